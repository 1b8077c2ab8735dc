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
    back to ``offline`` and says so (a warning, and ``fallback_reason`` in every decision).
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

            log.warning("grounding gate: %s; falling back to the offline verifier (gates.verifier=auto)", exc)
            return ResolvedVerifier(
                OfflineVerifier(encoder=get_encoder(), evidence_k=evidence_k), "offline", kind, fallback_reason=str(exc)
            )
    raise ConfigError(f"unknown verifier {kind!r}; choose one of auto, nli, llm, judge, offline, none")


__all__ = ["EvidenceSelector", "ResolvedVerifier", "TextEncoder", "Verifier", "build_verifier"]
