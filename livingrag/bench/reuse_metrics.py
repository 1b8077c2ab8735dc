"""Pure helpers of ``livingrag bench reuse`` (no database, no model): recall, the same-group oracle,
answer containment, experience selection and passage-level memory.

Definitions (``k`` a cut-off, ``G`` a question's gold passages, ``R`` its ranked passages):

* Per-passage recall: ``recall@k = |G ∩ R[:k]| / |G|`` (HippoRAG's Recall@k, reported as
  ``passage_recall_at_k``), ``None`` without gold; a stream's figure is the mean over the questions
  that have gold. This is *not* ``all_gold_recall_at_k`` of ``livingrag.evaluation.metrics`` (share of
  questions with every gold passage).
* Same group (MuSiQue): two questions are related when their decompositions share a single-hop
  sub-question id (``question_decomposition[*].id``).
* Answer containment (scaffold oracle): an earlier question ``j`` can state an intermediate answer of
  the current question ``i`` when ``norm(answer_j)`` (``earlier="answer"``), or also one of ``j``'s
  sub-answers (``earlier="any"``), equals ``norm(a)`` for one of ``i``'s sub-answers ``a``
  (``norm`` = SQuAD normalisation).
* Experience selection (eq. 7, 9, 10 as the store does it): the top ``K`` candidates by score ``s``
  (ties: the earlier experience), weights ``w_k = softmax(s / tau_s)_k * conf_k`` over those ``K``,
  then ``w_k = 0`` where ``s_k < floor``.
* Passage memory as a prior: ``m(p) = sum_k w_k * [p in P_k]`` (``P_k`` = the passages experience
  ``k`` retrieved); the harness adds ``gamma * max(reset) * m(p)`` to the passages' PPR reset.
* Passage memory in a slot: the top-``k`` list is ``R[:k - s]`` followed by the first ``s`` memory
  passages (in order: experiences by weight, each one's passages by rank) not already in it; with
  fewer memory passages the base ranking fills the list.
* Union bounds (oracles, no ranking): a gold passage counts as found when it is in ``R[:k]`` or in
  a given set (what earlier related questions retrieved, or their gold passages).
* Room an answer model leaves for reuse (an oracle over one model's LinearRAG answers, ``right_i``
  = Contain-correct, unknown for a question it did not answer): over one stream order, question
  ``i`` is *fixable by an answer* when it was answered wrong and some earlier ``j`` answered right
  has ``norm(answer_j)`` among ``norm`` of ``i``'s gold answer and aliases (a stored right answer
  states ``i``'s answer); else *fixable by a sub-answer* when such a ``j``'s answer is one of ``i``'s
  sub-answers (the model must still compose the hop); *at risk* when ``i`` was answered right and
  an earlier related question was answered wrong (a stored wrong answer could mislead it); and
  *bridged* when it was answered wrong and an earlier related question's output (its answer and
  explanation, right or wrong) contains ``norm`` of one of ``i``'s intermediate sub-answers (all
  but the last) as whole words: the room for reuse that states what earlier questions' evidence said
  rather than their answers.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from livingrag.evaluation.metrics import normalize_answer
from livingrag.experience.fusion import fusion_weights
from livingrag.experience.matching import top_k

K = TypeVar("K", bound=Hashable)


def per_passage_recall(retrieved: Sequence[K | None], gold: Collection[K], k: int) -> float | None:
    """``|G ∩ R[:k]| / |G|`` (gold de-duplicated); None when there is no gold passage."""
    g = set(gold)
    if not g:
        return None
    top = set(retrieved[:k])
    return sum(1 for x in g if x in top) / len(g)


def union_recall(retrieved: Sequence[K | None], gold: Collection[K], k: int, extra: Collection[K]) -> float | None:
    """Upper bound: ``|G ∩ (R[:k] ∪ extra)| / |G|``; None when there is no gold passage."""
    g = set(gold)
    if not g:
        return None
    found = set(retrieved[:k]) | set(extra)
    return sum(1 for x in g if x in found) / len(g)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None (None when there are none)."""
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n - 1; None below two values) of the non-None values."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def related(sub_ids: Sequence[Collection[str]], i: int, earlier: Iterable[int]) -> list[int]:
    """The questions of ``earlier`` (indices into ``sub_ids``) that share a sub-question id with ``i``."""
    mine = set(sub_ids[i])
    if not mine:
        return []
    return [j for j in earlier if mine & set(sub_ids[j])]


def answer_contained(
    sub_answers: Collection[str], earlier_answer: str, earlier_sub_answers: Collection[str] = ()
) -> bool:
    """An earlier question's gold answer (or, given, one of its sub-answers) equals one of the current
    question's sub-answers, after SQuAD normalisation (empty strings never match)."""
    mine = {normalize_answer(a) for a in sub_answers} - {""}
    theirs = {normalize_answer(earlier_answer), *(normalize_answer(a) for a in earlier_sub_answers)} - {""}
    return bool(mine & theirs)


def model_reuse_room(
    order: Sequence[int],
    right: Sequence[bool | None],
    answers: Sequence[Sequence[str]],
    sub_answers: Sequence[Collection[str]],
    sub_ids: Sequence[Collection[str]],
    outputs: Sequence[str | None] | None = None,
) -> dict[str, int]:
    """Tally, over the stream ``order`` (question indices), what one answer model leaves for reuse
    (see the module docstring): ``answered`` (``right_i`` known), ``right``, ``fix_answer``,
    ``fix_subanswer``, ``at_risk`` and, given the model's ``outputs`` (answer and explanation; None
    where unknown), ``bridged``. ``answers[i]`` is the gold answer, then its aliases;
    ``sub_answers[i]`` are in hop order, the last the final one."""
    out = {"answered": 0, "right": 0, "fix_answer": 0, "fix_subanswer": 0, "at_risk": 0}
    if outputs is not None:
        out["bridged"] = 0
    right_answers: set[str] = set()  # norm(gold answer) of the earlier questions answered right
    earlier: list[int] = []
    for i in order:
        ok = right[i]
        if ok is not None:
            out["answered"] += 1
            if ok:
                out["right"] += 1
                out["at_risk"] += any(right[j] is False for j in related(sub_ids, i, earlier))
            elif right_answers & ({normalize_answer(a) for a in answers[i]} - {""}):
                out["fix_answer"] += 1
            elif right_answers & ({normalize_answer(a) for a in sub_answers[i]} - {""}):
                out["fix_subanswer"] += 1
            if not ok and outputs is not None:
                bridges = {normalize_answer(a) for a in list(sub_answers[i])[:-1]} - {""}
                said = [f" {normalize_answer(outputs[j] or '')} " for j in related(sub_ids, i, earlier)]
                out["bridged"] += any(f" {b} " in text for b in bridges for text in said)
            if ok and answers[i] and (gold := normalize_answer(answers[i][0])):
                right_answers.add(gold)
        earlier.append(i)
    return out


def select_experiences(
    scores: Sequence[float] | np.ndarray,
    k: int,
    tau_s: float,
    floor: float | None,
    confidences: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 7's top ``k`` (indices into ``scores``, best first, ties to the lower index) and their
    eq. 9-10 weights, zeroed under ``floor`` (None: no floor)."""
    s = np.asarray(scores, dtype=np.float64)
    order = top_k(list(range(len(s))), s, k)
    if order.size == 0:
        return order, np.zeros(0)
    conf = np.ones(order.size) if confidences is None else np.asarray(confidences, dtype=np.float64)[order]
    w = fusion_weights(s[order], conf, tau_s)
    if floor is not None:
        w = w * (s[order] >= floor)
    return order, w


def memory_prior(passages: Sequence[Sequence[K]], weights: Sequence[float]) -> dict[K, float]:
    """``m(p) = sum_k w_k * [p in P_k]`` over the experiences with ``w_k > 0``."""
    out: dict[K, float] = {}
    for ps, w in zip(passages, weights, strict=True):
        if w <= 0.0:
            continue
        for p in dict.fromkeys(ps):
            out[p] = out.get(p, 0.0) + float(w)
    return out


def memory_order(passages: Sequence[Sequence[K]], weights: Sequence[float]) -> list[K]:
    """Memory passages in slot order: experiences with ``w_k > 0`` by weight (ties: given order), each
    experience's passages by rank, without repeats."""
    ranked = sorted((i for i, w in enumerate(weights) if w > 0.0), key=lambda i: -weights[i])
    return list(dict.fromkeys(p for i in ranked for p in passages[i]))


def slot_merge(base: Sequence[K], memory: Sequence[K], k: int, slots: int = 1) -> list[K]:
    """The top-``k`` list ``base[:k - slots]`` + the first ``slots`` memory passages not in it, then
    the rest of ``base`` (no repeats) up to ``k``."""
    head = list(dict.fromkeys(base[: max(k - slots, 0)]))
    added = 0
    for p in memory:
        if added >= slots or len(head) >= k:
            break
        if p not in head:
            head.append(p)
            added += 1
    for p in base:
        if len(head) >= k:
            break
        if p not in head:
            head.append(p)
    return head[:k]


def add_prior(reset: np.ndarray, prior: Mapping[int, float], gamma: float) -> np.ndarray:
    """``reset + gamma * max(reset) * m`` for a prior ``m`` given as {row: m(p)} (rows out of range are
    ignored); with ``max(reset) <= 0`` the prior is added at scale 1."""
    out = np.array(reset, dtype=np.float64, copy=True)
    if not prior or gamma == 0.0:
        return out
    scale = float(out.max()) if out.size and out.max() > 0 else 1.0
    for row, m in prior.items():
        if 0 <= row < out.size:
            out[row] += gamma * scale * float(m)
    return out


__all__ = [
    "add_prior",
    "answer_contained",
    "mean",
    "mean_std",
    "memory_order",
    "memory_prior",
    "model_reuse_room",
    "per_passage_recall",
    "related",
    "select_experiences",
    "slot_merge",
    "union_recall",
]
