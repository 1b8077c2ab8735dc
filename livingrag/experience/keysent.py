"""Compact reasoning summaries (paper eq. 6).

    sum_t = (q_t, KeySent(r_t, a_final), a_t)                                   (eq. 6)

KeySent ranks the sentences of the explanation ``r_t`` by how many of the most activated entities
of ``a_final`` they mention (ties: larger summed activation of those entities, then earlier
position) and keeps the top ``k`` in their original order. Sentences that mention no anchor
entity are kept only when no sentence mentions one (then the first ``k``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from livingrag.experience.sentences import split_sentences


def top_entities(activation: Mapping[int, float], n: int) -> list[int]:
    """The ``n`` most activated entity ids (ties: smaller id)."""
    return [e for e, _ in sorted(activation.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def _pattern(forms: Sequence[str]) -> re.Pattern[str] | None:
    forms = sorted({f.strip() for f in forms if f and f.strip()}, key=len, reverse=True)
    if not forms:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(f) for f in forms) + r")(?!\w)", re.IGNORECASE)


def mentioned_entities(sentences: Sequence[str], anchors: Mapping[int, Sequence[str]]) -> list[set[int]]:
    """For each sentence, the anchor entities (ids) it mentions by any of their surface forms."""
    patterns = {e: p for e, forms in anchors.items() if (p := _pattern(forms)) is not None}
    return [{e for e, p in patterns.items() if p.search(s)} for s in sentences]


def keysent(
    explanation: str,
    anchors: Mapping[int, Sequence[str]],
    weights: Mapping[int, float],
    k: int,
) -> list[str]:
    """KeySent of eq. 6: the ``k`` best sentences of ``explanation`` in their original order.

    ``anchors`` maps each of the most activated entities to its surface forms and ``weights`` to
    its activation.
    """
    sentences = split_sentences(explanation)
    if k <= 0 or not sentences:
        return []
    hits = mentioned_entities(sentences, anchors)
    ranked = sorted(
        range(len(sentences)),
        key=lambda i: (-len(hits[i]), -sum(weights.get(e, 0.0) for e in hits[i]), i),
    )
    if any(hits):
        ranked = [i for i in ranked if hits[i]]
    return [sentences[i] for i in sorted(ranked[:k])]


def compose_summary(query: str, key_sentences: Sequence[str], answer: str) -> str:
    """The stored summary ``(q, KeySent, a)`` as the text that goes into a later prompt."""
    lines = [f"Question: {' '.join(query.split())}"]
    if key_sentences:
        lines.append("Key reasoning: " + " ".join(key_sentences))
    lines.append(f"Answer: {' '.join(answer.split())}")
    return "\n".join(lines)


def parse_summary(summary: str) -> tuple[str, str, str]:
    """``(question, key reasoning, answer)`` of a summary written by :func:`compose_summary`.

    Lines without a known label are kept with the reasoning, so a summary edited by an operator
    still yields a usable scaffold; a missing part is the empty string.
    """
    parts: dict[str, list[str]] = {"question": [], "reasoning": [], "answer": []}
    labels = (("Question:", "question"), ("Key reasoning:", "reasoning"), ("Answer:", "answer"))
    for raw in str(summary or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        for label, key in labels:
            if line.startswith(label):
                parts[key].append(line[len(label) :].strip())
                break
        else:
            parts["reasoning"].append(line)
    question, reasoning, answer = (" ".join(parts[k]).strip() for k in ("question", "reasoning", "answer"))
    return question, reasoning, answer
