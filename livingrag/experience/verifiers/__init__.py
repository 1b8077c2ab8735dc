"""Claim verifiers for the grounding gate, behind one interface (:class:`Verifier`).

``nli`` (an NLI cross-encoder from a local path or cache), ``llm`` (entailment asked of the
configured LLM, claim by claim), ``judge`` (one yes/no question per answer to an LLM, read as
P(yes)), ``offline`` (no NLI weights needed) and ``auto`` (``nli`` when loadable, else
``offline``, with the reason logged and recorded in every decision). ``none`` switches the
grounding gate off (an ablation; stored confidence is then 1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from livingrag.errors import ConfigError, ModelUnavailable
from livingrag.experience.verifiers.base import EvidenceSelector, TextEncoder, Verifier
from livingrag.generation.llm import LLM

log = logging.getLogger(__name__)
_fallbacks_said: set[str] = set()


def nli_model_problem(model: str) -> str | None:
    """Why the NLI model ``model`` cannot be loaded here, or None when its files are present (a
    local folder, or the Hugging Face cache): a look at the files, without loading the model, as
    ``livingrag doctor`` reports which verifier ``gates.verifier=auto`` will use."""
    from pathlib import Path

    why = f"NLI model {model!r} is not available locally (livingrag never downloads models)"
    weights = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file() or not any((folder / w).is_file() for w in weights):
            return f"{why}: {folder} holds no config.json and weights"
        return None
    if model.startswith(("/", ".", "~")):
        return f"{why}: no folder {folder}"
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return f"{why}: huggingface_hub is not installed"
    try:
        cached = [try_to_load_from_cache(model, f) for f in ("config.json", *weights)]
    except Exception as exc:  # a name that is no repository id
        return f"{why}: {exc}"
    if not isinstance(cached[0], str) or not any(isinstance(c, str) for c in cached[1:]):
        return f"{why}: no weights at that path or in the Hugging Face cache"
    return None


@dataclass(frozen=True)
class ResolvedVerifier:
    """The verifier in use, its recorded name, what was asked for and why it differs."""

    verifier: Verifier | None
    name: str
    requested: str
    fallback_reason: str | None = None

    def record(self) -> dict[str, str]:
        """What every write-back decision records about the verifier."""
        out = {"verifier": self.name, "verifier_requested": self.requested}
        if self.fallback_reason:
            out["verifier_fallback_reason"] = self.fallback_reason
        return out


def build_verifier(
    kind: str,
    *,
    encoder: Callable[[], TextEncoder] | TextEncoder,
    evidence_k: int,
    nli_model: str = "cross-encoder/nli-deberta-v3-large",
    device: str = "cpu",
    llm: LLM | None = None,
    judge_evidence: str = "passages",
) -> ResolvedVerifier:
    """Resolve ``kind`` (auto | nli | llm | judge | offline | none) into a verifier.

    ``nli`` raises :class:`ModelUnavailable` when the model cannot be loaded; ``auto`` then falls
    back to ``offline`` and says so: a log note (info, once per process; ``livingrag doctor`` reports
    it) and ``fallback_reason`` in every decision.
    """
    get_encoder: Callable[[], TextEncoder] = encoder if callable(encoder) else (lambda: encoder)
    kind = kind.strip().lower()
    if kind == "none":
        return ResolvedVerifier(None, "none", kind)
    if kind == "offline":
        from livingrag.experience.verifiers.offline import OfflineVerifier

        return ResolvedVerifier(OfflineVerifier(encoder=get_encoder(), evidence_k=evidence_k), "offline", kind)
    if kind == "llm":
        if llm is None:
            raise ConfigError("gates.verifier=llm needs a configured LLM (none was given to the experience store)")
        from livingrag.experience.verifiers.llm import LLMVerifier

        v = LLMVerifier(llm, encoder=get_encoder(), evidence_k=evidence_k)
        return ResolvedVerifier(v, v.name, kind)
    if kind == "judge":
        if llm is None:
            raise ConfigError("gates.verifier=judge needs a configured LLM (none was given to the experience store)")
        from livingrag.experience.verifiers.judge import JudgeVerifier

        j = JudgeVerifier(llm, encoder=get_encoder(), evidence_k=evidence_k, evidence=judge_evidence)
        return ResolvedVerifier(j, j.name, kind)
    if kind in ("nli", "auto"):
        from livingrag.experience.verifiers.nli import NLIVerifier

        try:
            nli = NLIVerifier(nli_model, encoder=get_encoder(), evidence_k=evidence_k, device=device)
            return ResolvedVerifier(nli, nli.name, kind)
        except ModelUnavailable as exc:
            if kind == "nli":
                raise
            from livingrag.experience.verifiers.offline import OfflineVerifier

            # Said once per process, as a note: `livingrag doctor` reports the fallback (its verifier
            # check), and every decision records it (fallback_reason); a warning on every `ask` helped no one.
            level = logging.DEBUG if str(exc) in _fallbacks_said else logging.INFO
            _fallbacks_said.add(str(exc))
            log.log(level, "grounding gate: %s; falling back to the offline verifier (gates.verifier=auto)", exc)
            return ResolvedVerifier(
                OfflineVerifier(encoder=get_encoder(), evidence_k=evidence_k), "offline", kind, fallback_reason=str(exc)
            )
    raise ConfigError(f"unknown verifier {kind!r}; choose one of auto, nli, llm, judge, offline, none")


__all__ = ["EvidenceSelector", "ResolvedVerifier", "TextEncoder", "Verifier", "build_verifier", "nli_model_problem"]
