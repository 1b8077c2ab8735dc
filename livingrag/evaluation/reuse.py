"""Reuse analyses over stream records: pure functions behind Tables 1, 4, 6, 8, 16, 17 and 18.

All stream analyses are *causal*: query ``t`` may only draw on queries ``1..t-1`` of the same
stream (section 3.1). Rates are fractions in [0, 1] (the report prints them as percentages) and
take every query of the stream as the denominator, the first one included.

Definitions:

* Entity reuse (Table 1): the query shares at least one seed entity with an earlier query.
* Graph-neighbourhood reuse (Table 1): for some earlier query, the Jaccard similarity of the
  top-k retrieved passages, or of the context entities (final activation above threshold), is at
  least 0.05 — measured on the fixed LinearRAG run, so that experience fusion cannot cause it.
* Template reuse (Table 1): for some earlier query with *no* seed entity in common, the TF-IDF
  cosine of the masked questions (eq. 11) is at least 0.35. The TF-IDF model (sklearn defaults:
  lower-cased tokens of 2+ word characters, raw counts, smooth idf ``ln((1+n)/(1+df)) + 1``, L2 rows)
  is fitted on the stream's masked questions.
* Realised reuse (Table 4): graph transfer = activation-map fusion added new above-threshold
  entities (``graph_transfer``); template reuse = the selected scaffold's masked-template similarity
  is at least 0.35.
* Gate statistics (Table 6): NS pass over all questions; GS checked = candidates that passed NS and
  were graded; GS pass among the checked; GS reject; stored.
* Coverage (Table 16): how often stored experiences are selected (top-K for fusion; scaffold) and
  the share of stored experiences selected at least once.
* Paired deltas (Table 17): LivingRAG − LinearRAG per question (same order, same question),
  grouped by the realised signals of the LivingRAG query.
* Experience clusters (Table 8): MuSiQue questions linked when they share a decomposed single-hop
  question; clusters are connected components with at least two questions.
* Order robustness (Table 18): mean and sample standard deviation (n − 1) over stream orders.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from livingrag.evaluation.datasets import Question
from livingrag.evaluation.metrics import Prices, normalize_answer, summarize_run
from livingrag.evaluation.records import (
    DECISION_REJECTED_GS,
    DECISION_REJECTED_NS,
    DECISION_STORED,
    SYSTEM_LINEAR,
    SYSTEM_LIVING,
    QueryRecord,
    by_system_and_order,
)

JACCARD_THRESHOLD = 0.05
TEMPLATE_THRESHOLD = 0.35
GRAPH_TOP_K = 5

# --------------------------------------------------------------------------------------------------
# Similarity matrices

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def tfidf_matrix(texts: Sequence[str]) -> sp.csr_matrix:
    """TF-IDF rows, L2-normalised, with scikit-learn's ``TfidfVectorizer()`` defaults.

    ``tf`` = raw count; ``idf(w) = ln((1 + n) / (1 + df(w))) + 1``; each row divided by its L2 norm
    (an empty row stays zero). Row ``i`` · row ``j`` is the cosine of texts ``i`` and ``j``.
    """
    docs = [Counter(_TOKEN.findall(t.lower())) for t in texts]
    vocab: dict[str, int] = {}
    for d in docs:
        for w in d:
            vocab.setdefault(w, len(vocab))
    n = len(texts)
    df = np.zeros(len(vocab))
    rows, cols, vals = [], [], []
    for i, d in enumerate(docs):
        for w, c in d.items():
            j = vocab[w]
            df[j] += 1
            rows.append(i)
            cols.append(j)
            vals.append(float(c))
    idf = np.log((1 + n) / (1 + df)) + 1
    m = sp.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)))
    m = m @ sp.diags(idf)
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_matrix(sp.diags(1 / norms) @ m)


def cosine_matrix(texts: Sequence[str]) -> np.ndarray:
    """Dense n × n TF-IDF cosine matrix of ``texts``."""
    m = tfidf_matrix(texts)
    return np.asarray((m @ m.T).todense())


def _incidence(sets: Sequence[Collection[Hashable]]) -> sp.csr_matrix:
    ids: dict[Hashable, int] = {}
    rows, cols = [], []
    for i, s in enumerate(sets):
        for x in set(s):
            rows.append(i)
            cols.append(ids.setdefault(x, len(ids)))
    return sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), max(len(ids), 1)))


def jaccard_matrix(sets: Sequence[Collection[Hashable]]) -> np.ndarray:
    """Dense n × n Jaccard similarity ``|A ∩ B| / |A ∪ B|`` (0 when both are empty)."""
    m = _incidence(sets)
    inter = np.asarray((m @ m.T).todense())
    size = np.asarray(m.sum(axis=1)).ravel()
    union = size[:, None] + size[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def overlap_matrix(sets: Sequence[Collection[Hashable]]) -> np.ndarray:
    """Dense n × n boolean: the two sets share at least one element."""
    m = _incidence(sets)
    return np.asarray((m @ m.T).todense()) > 0


def _any_earlier(mask: np.ndarray) -> np.ndarray:
    """Row i: is ``mask[i, j]`` true for some j < i (strictly lower triangle)."""
    return np.asarray(np.tril(mask, k=-1).any(axis=1))  # any(axis=...) is typed bool | array


def _runs(records: Sequence[QueryRecord]) -> list[QueryRecord]:
    keys = {(r.system, r.order) for r in records}
    if len(keys) > 1:
        raise ValueError(f"expected the records of one run (system, order), got {sorted(keys)}")
    return sorted(records, key=lambda r: r.position)


# --------------------------------------------------------------------------------------------------
# Table 1


@dataclass(frozen=True)
class ReuseOpportunities:
    """Table 1 for one stream (fractions of all queries). None: not measurable from these records
    (graph reuse without a fixed LinearRAG run; template reuse when no record has a masked question)."""

    queries: int
    entity_reuse: float
    graph_reuse: float | None
    graph_reuse_passages: float | None
    graph_reuse_entities: float | None
    template_reuse: float | None


def reuse_opportunities(
    records: Sequence[QueryRecord],
    *,
    graph: bool = True,
    top_k: int = GRAPH_TOP_K,
    jaccard_threshold: float = JACCARD_THRESHOLD,
    template_threshold: float = TEMPLATE_THRESHOLD,
) -> ReuseOpportunities:
    """Table 1 from one run's records in stream order (pass the LinearRAG run; ``graph=False`` when
    the records are not from a fixed LinearRAG retriever, which leaves the graph column None)."""
    run = _runs(records)
    n = len(run)
    if n == 0:
        return ReuseOpportunities(0, 0.0, None, None, None, None)
    shared = overlap_matrix([r.seed_entity_ids for r in run])
    entity = _any_earlier(shared)
    template = None
    if any(r.masked_question.strip() for r in run):
        cos = cosine_matrix([r.masked_question for r in run])
        template = float(_any_earlier((cos >= template_threshold) & ~shared).mean())
    g = gp = ge = None
    if graph:
        jp = jaccard_matrix([r.retrieved_keys[:top_k] for r in run]) >= jaccard_threshold
        je = jaccard_matrix([r.context_entity_ids for r in run]) >= jaccard_threshold
        gp, ge = float(_any_earlier(jp).mean()), float(_any_earlier(je).mean())
        g = float(_any_earlier(jp | je).mean())
    return ReuseOpportunities(n, float(entity.mean()), g, gp, ge, template)


# --------------------------------------------------------------------------------------------------
# Table 4


def fusion_added_entities(
    base_activation: dict[int, float], start_activation: dict[int, float], threshold: float
) -> bool:
    """Graph transfer for one query: activation-map fusion (eq. 8) put an entity at or above
    ``threshold`` in the starting activation that the base activation did not have there."""
    above = {e for e, v in start_activation.items() if v >= threshold}
    return bool(above - {e for e, v in base_activation.items() if v >= threshold})


def template_reused(record: QueryRecord, threshold: float = TEMPLATE_THRESHOLD) -> bool:
    """Realised template reuse: a scaffold was selected and its masked similarity is >= threshold."""
    return (
        record.scaffold_experience_id is not None
        and record.scaffold_similarity is not None
        and record.scaffold_similarity >= threshold
    )


@dataclass(frozen=True)
class RealisedReuse:
    """Table 4 for one LivingRAG run (fractions of all queries)."""

    queries: int
    graph_transfer: float
    template_reuse: float
    scaffold_use: float
    activation_map_use: float


def realised_reuse(records: Sequence[QueryRecord], *, template_threshold: float = TEMPLATE_THRESHOLD) -> RealisedReuse:
    run = _runs(records)
    n = len(run) or 1
    return RealisedReuse(
        len(run),
        sum(1 for r in run if r.graph_transfer) / n,
        sum(1 for r in run if template_reused(r, template_threshold)) / n,
        sum(1 for r in run if r.scaffold_experience_id is not None) / n,
        sum(1 for r in run if r.fused_experience_ids) / n,
    )


# --------------------------------------------------------------------------------------------------
# Table 6


def ns_passed(r: QueryRecord) -> bool:
    """The candidate passed the novelty gate (it was then either graded by GS or stored)."""
    return r.writeback in (DECISION_STORED, DECISION_REJECTED_GS)


def gs_checked(r: QueryRecord) -> bool:
    return ns_passed(r) and r.grounding is not None


@dataclass(frozen=True)
class GateStats:
    """Table 6 for one run: ``ns_pass`` over all questions, ``gs_pass`` among the GS-checked."""

    questions: int
    ns_pass: float | None
    gs_checked: int
    gs_pass: float | None
    gs_reject: int
    stored: int
    errors: int


def gate_stats(records: Sequence[QueryRecord]) -> GateStats:
    """Gate statistics over the records that made a write-back decision (LinearRAG makes none)."""
    run = [r for r in _runs(records) if r.writeback is not None]
    n = len(run)
    checked = [r for r in run if gs_checked(r)]
    return GateStats(
        questions=n,
        ns_pass=sum(1 for r in run if ns_passed(r)) / n if n else None,
        gs_checked=len(checked),
        gs_pass=sum(1 for r in checked if r.writeback == DECISION_STORED) / len(checked) if checked else None,
        gs_reject=sum(1 for r in run if r.writeback == DECISION_REJECTED_GS),
        stored=sum(1 for r in run if r.writeback == DECISION_STORED),
        errors=sum(1 for r in run if r.writeback not in (DECISION_STORED, DECISION_REJECTED_GS, DECISION_REJECTED_NS)),
    )


# --------------------------------------------------------------------------------------------------
# Table 16


@dataclass(frozen=True)
class CoverageStats:
    """Table 16 for one run; coverages are fractions of the stored experiences (None: none stored)."""

    stored: int
    topk_selections: int
    topk_coverage: float | None
    scaffold_uses: int
    scaffold_coverage: float | None
    max_scaffold_uses: int


def experience_coverage(records: Sequence[QueryRecord]) -> CoverageStats:
    run = _runs(records)
    stored = {
        r.stored_experience_id for r in run if r.writeback == DECISION_STORED and r.stored_experience_id is not None
    }
    # The paper's Table 16 counts top-K selections (eq. 7), not fused maps: under a fusion floor
    # most selections are not fused. Records from before matched ids were kept fall back to fused.
    selected = Counter(e for r in run for e in (r.matched_experience_ids or r.fused_experience_ids))
    scaffolds = Counter(r.scaffold_experience_id for r in run if r.scaffold_experience_id is not None)
    k = len(stored)
    return CoverageStats(
        stored=k,
        topk_selections=sum(selected.values()),
        topk_coverage=len(stored & selected.keys()) / k if k else None,
        scaffold_uses=sum(scaffolds.values()),
        scaffold_coverage=len(stored & scaffolds.keys()) / k if k else None,
        max_scaffold_uses=max(scaffolds.values(), default=0),
    )


# --------------------------------------------------------------------------------------------------
# Table 17


@dataclass(frozen=True)
class DeltaRow:
    """One row of Table 17: mean paired differences (LivingRAG − LinearRAG) over ``n`` questions.
    ``delta_acc`` is a difference of fractions (x100 = percentage points)."""

    graph: bool
    template: bool
    n: int
    delta_acc: float
    delta_completion_tokens: float


def paired_deltas(
    living: Sequence[QueryRecord],
    linear: Sequence[QueryRecord],
    *,
    metric: str = "llm",
    template_threshold: float = TEMPLATE_THRESHOLD,
) -> list[DeltaRow]:
    """Table 17. Pairs are (order, question id); ``metric`` is ``llm`` (LLM-Acc; pairs with an
    unjudged side are left out) or ``contain`` (Contain-Acc). Rows with no pair are omitted; the row
    order is the paper's: neither, graph only, template only, both."""
    if metric not in ("llm", "contain"):
        raise ValueError(f"metric must be 'llm' or 'contain', got {metric!r}")
    base = {(r.order, r.question_id): r for r in linear}
    groups: dict[tuple[bool, bool], list[tuple[float, float]]] = {}
    for r in living:
        b = base.get((r.order, r.question_id))
        if b is None:
            continue
        if metric == "llm":
            if r.llm_correct is None or b.llm_correct is None:
                continue
            d_acc = float(r.llm_correct) - float(b.llm_correct)
        else:
            d_acc = float(r.contain_correct) - float(b.contain_correct)
        key = (bool(r.graph_transfer), template_reused(r, template_threshold))
        groups.setdefault(key, []).append((d_acc, float(r.completion_tokens - b.completion_tokens)))
    rows = []
    for key in [(False, False), (True, False), (False, True), (True, True)]:
        xs = groups.get(key)
        if xs:
            rows.append(
                DeltaRow(key[0], key[1], len(xs), sum(a for a, _ in xs) / len(xs), sum(t for _, t in xs) / len(xs))
            )
    return rows


# --------------------------------------------------------------------------------------------------
# Table 8


def subquestion_key(sub_id: str, answer: str, support_key: str | None, *, by: str = "support") -> tuple[str, ...]:
    """Identity of a decomposed single-hop question.

    ``by="support"`` (default): its supporting passage and normalised answer — the same fact asked
    of the same paragraph, whatever the wording ("Who was the first president of #1?") or the
    composite question it sits in; the MuSiQue single-hop id is used only when the step has no
    supporting passage. ``by="id"``: MuSiQue's single-hop question id.
    """
    if by == "id" or support_key is None:
        return ("id", sub_id)
    if by != "support":
        raise ValueError(f"by must be 'support' or 'id', got {by!r}")
    return ("support", support_key, normalize_answer(answer))


@dataclass(frozen=True)
class ClusterStats:
    """Table 8: clusters = connected components of >= 2 questions; coverage = share of questions in one."""

    questions: int
    documents: int
    clusters: int
    coverage: float
    avg_size: float | None
    max_size: int
    sizes: tuple[int, ...]


def experience_clusters(questions: Sequence[Question], *, documents: int = 0, by: str = "support") -> ClusterStats:
    """Connected components of the graph linking questions that share a decomposed single-hop question."""
    parent = list(range(len(questions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, ...], int] = {}
    for i, q in enumerate(questions):
        for s in q.decomposition:
            k = subquestion_key(s.id, s.answer, s.support_key, by=by)
            if k in first:
                a, b = find(i), find(first[k])
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                first[k] = i
    comp = Counter(find(i) for i in range(len(questions)))
    sizes = tuple(sorted((s for s in comp.values() if s >= 2), reverse=True))
    n = len(questions)
    return ClusterStats(
        questions=n,
        documents=documents,
        clusters=len(sizes),
        coverage=sum(sizes) / n if n else 0.0,
        avg_size=sum(sizes) / len(sizes) if sizes else None,
        max_size=max(sizes, default=0),
        sizes=sizes,
    )


# --------------------------------------------------------------------------------------------------
# Table 18


@dataclass(frozen=True)
class MeanStd:
    """Mean and sample standard deviation (n − 1; None for fewer than two values)."""

    mean: float | None
    std: float | None
    n: int


def mean_std(values: Sequence[float | None]) -> MeanStd:
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return MeanStd(None, None, 0)
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return MeanStd(m, None, len(xs))
    return MeanStd(m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)), len(xs))


@dataclass(frozen=True)
class OrderRobustness:
    """Table 18: per system, mean ± std over orders; reuse rates are LivingRAG's."""

    orders: int
    contain_acc: dict[str, MeanStd]
    llm_acc: dict[str, MeanStd]
    completion_tokens: dict[str, MeanStd]
    graph_transfer: MeanStd
    template_reuse: MeanStd


def order_robustness(
    records: Sequence[QueryRecord],
    *,
    prices: Prices,
    judge: str | None,
    systems: Sequence[str] = (SYSTEM_LINEAR, SYSTEM_LIVING),
    template_threshold: float = TEMPLATE_THRESHOLD,
) -> OrderRobustness:
    runs = by_system_and_order(records)
    contain: dict[str, MeanStd] = {}
    llm: dict[str, MeanStd] = {}
    completion: dict[str, MeanStd] = {}
    orders: set[int] = set()
    for system in systems:
        summaries = [summarize_run(run, prices=prices, judge=judge) for (s, _), run in runs.items() if s == system]
        orders |= {s.order for s in summaries}
        contain[system] = mean_std([s.contain_acc for s in summaries])
        llm[system] = mean_std([s.llm_acc.value for s in summaries])
        completion[system] = mean_std([s.tokens.completion_mean for s in summaries])
    living = [
        realised_reuse(run, template_threshold=template_threshold) for (s, _), run in runs.items() if s == SYSTEM_LIVING
    ]
    return OrderRobustness(
        orders=len(orders),
        contain_acc=contain,
        llm_acc=llm,
        completion_tokens=completion,
        graph_transfer=mean_std([x.graph_transfer for x in living]),
        template_reuse=mean_std([x.template_reuse for x in living]),
    )
