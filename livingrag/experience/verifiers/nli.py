"""The NLI verifier: any sequence-classification NLI model (a cross-encoder such as the paper's
``cross-encoder/nli-deberta-v3-large``) loaded through transformers from a local path or the
Hugging Face cache, never downloaded.

    g_i = max over the claim's K_g evidence units of P(entail | unit, claim)     (eq. 15)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from livingrag.errors import ModelUnavailable
from livingrag.experience.grounding import Claim
from livingrag.experience.types import ClaimVerdict, UsedPassage
from livingrag.experience.verifiers.base import EvidenceSelector, TextEncoder

log = logging.getLogger(__name__)


def entailment_index(id2label: dict[int, str]) -> int:
    """The output index whose label names entailment (e.g. ``{1: "entailment"}``)."""
    hits = [
        int(i) for i, label in id2label.items() if "entail" in str(label).lower() and "not" not in str(label).lower()
    ]
    if len(hits) != 1:
        raise ModelUnavailable(f"the NLI model's labels {dict(id2label)} do not name exactly one entailment class")
    return hits[0]


class NLIVerifier:
    """Entailment probabilities from an NLI cross-encoder."""

    def __init__(
        self,
        model: str,
        *,
        encoder: TextEncoder,
        evidence_k: int,
        device: str = "cpu",
        batch_size: int = 16,
        max_length: int = 512,
    ) -> None:
        import livingrag.models  # noqa: F401  (offline defaults: never download)

        try:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
            self._model = AutoModelForSequenceClassification.from_pretrained(model, local_files_only=True)
        except Exception as exc:  # transformers raises OSError, ValueError, ... for missing weights
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelUnavailable(
                f"NLI model {model!r} is not available locally (no weights at that path or in the Hugging Face "
                f"cache; livingrag never downloads models): {first}"
            ) from exc
        self._model.eval()
        self._model.to(device)
        self.device = device
        self.entail = entailment_index(dict(self._model.config.id2label))
        self.model_name = model
        self.name = f"nli:{model}"
        self.batch_size = batch_size
        self.max_length = max_length
        self.selector = EvidenceSelector(encoder, evidence_k)
        self._lock = threading.Lock()

    def entailment_probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """``P(entail | premise, hypothesis)`` for each ``(premise, hypothesis)`` pair."""
        if not pairs:
            return np.zeros(0)
        import torch

        out: list[np.ndarray] = []
        with self._lock, torch.inference_mode():
            for i in range(0, len(pairs), self.batch_size):
                chunk = pairs[i : i + self.batch_size]
                enc = self._tokenizer(
                    [p for p, _ in chunk],
                    [h for _, h in chunk],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                logits = self._model(**enc).logits
                out.append(torch.softmax(logits.float(), dim=-1)[:, self.entail].cpu().numpy())
        return np.concatenate(out).astype(np.float64)

    def verify(self, claims: Sequence[Claim], passages: Sequence[UsedPassage]) -> list[ClaimVerdict]:
        units, _sims, top = self.selector.select(claims, passages)
        pairs = [(units[j].text, c.text) for c, idx in zip(claims, top, strict=True) for j in idx]
        probs = self.entailment_probabilities(pairs)
        verdicts: list[ClaimVerdict] = []
        pos = 0
        for c, idx in zip(claims, top, strict=True):
            p = probs[pos : pos + len(idx)]
            pos += len(idx)
            if len(idx) == 0:
                verdicts.append(ClaimVerdict(claim=c.text, source=c.source, score=0.0))
                continue
            best = int(np.argmax(p))
            u = units[idx[best]]
            verdicts.append(
                ClaimVerdict(
                    claim=c.text, source=c.source, score=float(p[best]), passage_id=u.passage_id, evidence=u.text
                )
            )
        return verdicts
