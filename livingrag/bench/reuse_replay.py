"""``livingrag bench reuse``: what experience reuse can do for retrieval, measured without the LLM.

Over a question stream and several orders (order 0 = the file order, the others seeded shuffles,
as ``eval stream --orders``), every question is retrieved as LivingRAG would retrieve it with the
store as it stands at that question: each earlier question of the same order left one experience
(its sparsified final activation, eq. 5, and the top-5 passages it retrieved), written right after
it was answered, ungated, at confidence 1. The store is in memory and matched exhaustively (eq. 7;
the service preselects ``candidates_m`` rows in SQL first). Each variant keeps its own store,
because what a variant retrieved is what its experiences hold.

Figures: per-passage Recall@2 and Recall@5 (``|gold ∩ top-k| / |gold|``, averaged over the
questions; see :mod:`livingrag.bench.reuse_metrics`), mean and sample std over orders, for

* ``base``: LinearRAG from the base activation (no experience);
* ``eq8``: a0 = normalize(a_base + beta * sum_k w_k top_H(map_k)) over eq. 7's top K (eq. 8-10),
  no floor; ``eq8 floor f``: only experiences with s_ret >= f (the ``fusion_floor`` setting) get weight;
  ``… maps before fusion``: the stored map is the base retrieval's a_final, not the fused one's
  (the pipeline stores the map after fusion, so maps compound);
* ``passages→reset``: no map fusion; the passages earlier matched experiences retrieved get
  ``beta * max(reset) * sum_k w_k [p in P_k]`` added to their PPR reset (passage-level memory);
  ``passages→slot``: the last slot of the top k holds the best memory passage not already listed;
  ``… before memory``: an experience remembers its base top 5, not what the memory variant retrieved
  (passages compound otherwise, as maps do);
* oracles (MuSiQue decompositions): the same variants restricted to earlier questions that share a
  single-hop sub-question id (``oracle …``), and two bounds that are no ranking: a gold passage
  counts as found when it is in the base top k or among what those earlier questions retrieved
  (``bound: base ∪ related retrieved``) or their gold passages (``bound: base ∪ related gold``).
  Without decompositions (2Wiki, HotpotQA) related questions are those that share a gold passage,
  and the two bounds are left out.

Reuse counts (shares of all questions, mean over orders): a related earlier question exists; one is
matched (in eq. 7's top K over the base-map store); used (fused with weight > 0, with no floor and
with the floor); a scaffold is selected (eq. 12-13 with the settings' lambda and floors), related,
and stating a sub-answer; and the scaffold oracle: some earlier question's gold answer (or, second
figure, one of its sub-answers) equals one of the current question's sub-answers.

Findings (``experience.findings_k``; beyond the paper): at each floor of :data:`FINDINGS_FLOORS` and
the setting's, how often some finding is shown, one is related, one's gold answer is one of the
question's sub-answers, and how many unrelated ones a question gets; once leaving out the eq. 13
scaffold's experience and once counting it.

The room an answer model leaves (``--answers RUN/records.jsonl``, that model's LinearRAG answers;
an oracle, no retrieval): per order, the share of questions it answered right, and of those it
answered wrong, the ones an earlier question it answered right could fix by stating its answer
(the same gold answer) or an intermediate answer (one of the question's sub-answers), and the right
ones an earlier related question answered wrong could mislead; and the wrong ones whose
intermediate answer an earlier related question's output names. Right plus fixable is the ceiling
of answer and finding reuse with that model, whatever the gate and the matching do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from livingrag.bench.reuse_metrics import (
    add_prior,
    answer_contained,
    mean,
    mean_std,
    memory_order,
    memory_prior,
    model_reuse_room,
    per_passage_recall,
    related,
    select_experiences,
    slot_merge,
    union_recall,
)
from livingrag.errors import InvalidInput

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.progress import Progress
    from livingrag.db.engine import Database
    from livingrag.evaluation.datasets import Dataset, Question
    from livingrag.retrieval.retriever import Retriever
    from livingrag.types import QueryEncoding

KS = (2, 5)
PASSAGES_KEPT = 5
"""Passages an experience remembers: the top 5 its question retrieved (what the answer model saw)."""
FINDINGS_FLOORS = (0.3, 0.4, 0.5, 0.6, 0.7)
"""s_ret floors at which the findings (earlier answers stated as facts) are counted, besides the setting's."""


@dataclass(frozen=True)
class Variant:
    """One way of reusing the store. ``maps``: fuse activation maps stored ``after`` or ``before``
    fusion (None: no map fusion); ``passages``: passage memory into the PPR ``reset`` or a top-k
    ``slot`` (None: none); ``floor``: s_ret floor (None: none); ``oracle``: only related earlier
    questions are candidates; ``gamma``: strength of the passage prior in the reset (None: beta);
    ``passages_stored``: an experience remembers the passages its question got with this variant
    (``after`` memory) or from the base retriever (``before``)."""

    name: str
    maps: str | None = None
    passages: str | None = None
    floor: float | None = None
    oracle: bool = False
    gamma: float | None = None
    passages_stored: str = "after"


def default_variants(fusion_floor: float, gammas: Sequence[float] = ()) -> list[Variant]:
    """The variants the benchmark runs (``fusion_floor`` from the settings; -1 means no floor), plus
    a passages→reset variant and its oracle for each extra prior strength in ``gammas``."""
    f = fusion_floor if fusion_floor > -1 else None
    tag = f"floor {fusion_floor:g}"
    out = [Variant("eq8", maps="after")]
    if f is not None:
        out.append(Variant(f"eq8 {tag}", maps="after", floor=f))
    out.append(Variant("eq8, maps before fusion", maps="before"))
    if f is not None:
        out.append(Variant(f"eq8 {tag}, maps before fusion", maps="before", floor=f))
    out += [
        Variant("passages→reset", passages="reset"),
        Variant("passages→reset, passages before memory", passages="reset", passages_stored="before"),
    ]
    if f is not None:
        out.append(Variant(f"passages→reset {tag}", passages="reset", floor=f))
    out += [Variant("passages→slot", passages="slot")]
    if f is not None:
        out.append(Variant(f"passages→slot {tag}", passages="slot", floor=f))
    out += [
        Variant("eq8 + passages→reset", maps="after", passages="reset"),
        Variant("oracle eq8 (related only)", maps="before", oracle=True),
        Variant("oracle passages→reset (related only)", passages="reset", oracle=True),
        Variant("oracle passages→slot (related only)", passages="slot", oracle=True),
    ]
    for g in gammas:
        out.append(Variant(f"passages→reset gamma {g:g}", passages="reset", gamma=g))
        out.append(
            Variant(f"passages→reset gamma {g:g}, before memory", passages="reset", gamma=g, passages_stored="before")
        )
        out.append(Variant(f"oracle passages→reset gamma {g:g} (related only)", passages="reset", oracle=True, gamma=g))
    return out


@dataclass
class _Prepared:
    """Everything about one question that does not depend on the order."""

    encoding: QueryEncoding
    template: np.ndarray
    ids: list[int]  # base top passages (passage ids)
    keys: list[str | None]  # their dataset keys
    map: dict[int, float]  # base map (eq. 5)
    dense: np.ndarray | None = field(default=None, repr=False)


@dataclass
class _Memory:
    """One variant's store: per earlier question (by question index) its map and passage ids."""

    maps: dict[int, dict[int, float]] = field(default_factory=dict)
    passages: dict[int, list[int]] = field(default_factory=dict)


def resolve_preset(dataset: str, preset: str | None) -> str:
    """The retrieval preset: ``preset`` when given, else the dataset's own (``custom`` when it has none)."""
    from livingrag.retrieval.presets import PRESETS, preset_params

    name = preset or (dataset if dataset in PRESETS else "custom")
    preset_params(name)  # unknown names raise InvalidInput
    return name


def ensure_corpus(
    db: Database, settings: Settings, dataset: Dataset, *, tenant: str, progress: Progress | None = None
) -> tuple[int, Any, dict[int, str]]:
    """Index the dataset's corpus as ``bench retrieval`` does (tenant and corpus created when missing,
    indexed once, re-runs skip what is there): tenant id, corpus, passage id -> dataset key."""
    from livingrag.bench.retrieval import BenchDataset, ensure_bench_corpus, stream_corpus_name
    from livingrag.corpus.chunking import document_key
    from livingrag.corpus.ingest import Document
    from livingrag.db.repositories import passages as passage_repo

    docs = [Document(title=d.title, text=d.text) for d in dataset.corpus]
    bench = BenchDataset(dataset.name, docs, [], corpus=stream_corpus_name(dataset))
    tenant_id, corpus, _, _ = ensure_bench_corpus(db, settings, bench, tenant=tenant, progress=progress)
    by_doc = {document_key(Document(title=d.title, text=d.text)): d.key for d in dataset.corpus}
    with db.tenant_session(tenant_id) as s:
        doc_keys = passage_repo.passage_doc_keys(s, corpus.id)
    return tenant_id, corpus, {pid: by_doc[dk] for pid, dk in doc_keys.items() if dk in by_doc}


def rank_with_prior(
    retriever: Retriever,
    prep: _Prepared,
    start: dict[int, float],
    prior: dict[int, float],
    gamma: float,
    k: int,
) -> list[int]:
    """Passage ids ranked as :func:`livingrag.retrieval.ranking.rank_passages` ranks them from ``start``,
    with ``gamma * max(reset) * m(p)`` added to each passage's PPR reset (``prior`` = {passage id:
    m(p)}); with no usable seed the prior is added to the length-normalised dense scores."""
    from livingrag.retrieval.ranking import rank_passages
    from livingrag.retrieval.scoring import dense_scores

    g = retriever.graph()
    if prep.dense is None:
        prep.dense = dense_scores(g.passage_embeddings, prep.encoding.embedding)
    row_of = {int(p): i for i, p in enumerate(g.passage_ids)}
    rows = {row_of[p]: m for p, m in prior.items() if p in row_of}
    seeds = {}
    for eid, w in start.items():
        r = g.id_to_entity.get(int(eid))
        if r is not None and w > 0:
            seeds[r] = float(w)
    ranking = rank_passages(
        g,
        prep.encoding.embedding,
        seeds,
        retriever.params,
        k=k,
        dense=prep.dense,
        adjust_passages=lambda v: add_prior(v, rows, gamma),
    )
    return [int(g.passage_ids[i]) for i in ranking.passages]


def run_reuse_bench(
    db: Database,
    settings: Settings,
    dataset: Dataset,
    *,
    dataset_name: str,
    orders: int = 3,
    seed: int = 0,
    tenant: str = "bench",
    preset: str | None = None,
    limit: int | None = None,
    variants: Sequence[Variant] | None = None,
    gammas: Sequence[float] = (),
    answer_model: Mapping[str, tuple[bool, str]] | None = None,
    answer_source: str | None = None,
    progress: Progress | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Replay the stream in every order and measure (see the module docstring); a JSON-ready dict.
    ``answer_model`` (question id -> (Contain-correct, answer and explanation), from one answer
    model's LinearRAG run named by ``answer_source``) adds the room that model leaves for reuse in
    each order (:func:`~livingrag.bench.reuse_metrics.model_reuse_room`)."""
    from livingrag.corpus import service
    from livingrag.corpus.progress import NullProgress
    from livingrag.evaluation.datasets import stream_orders

    progress = progress or NullProgress()
    say = log or (lambda _msg: None)
    t_start = time.perf_counter()
    ds = dataset.head(limit)
    qs = ds.questions
    n = len(qs)
    preset_name = resolve_preset(dataset_name, preset)
    settings = settings.model_copy(deep=True)
    settings.retrieval.preset = preset_name  # type: ignore[assignment]  # a str; pydantic validates it (validate_assignment)
    e = settings.experience
    variants = list(variants) if variants is not None else default_variants(e.fusion_floor, gammas)

    say(f"indexing {len(ds.corpus)} documents (once; re-runs skip them)")
    t0 = time.perf_counter()
    tenant_id, corpus, key_of = ensure_corpus(db, settings, ds, tenant=tenant, progress=progress)
    index_s = time.perf_counter() - t0
    retriever = service.retriever(db, tenant_id, corpus, settings)
    st = _Replay.prepare(retriever, qs, key_of, variants, e, progress)

    said = [None if answer_model is None else answer_model.get(q.id) for q in qs]
    right = [None if x is None else x[0] for x in said]
    outputs = [None if x is None else x[1] for x in said]
    answers = [q.answers for q in qs]
    if answer_model is not None and not any(r is not None for r in right):
        raise InvalidInput(f"--answers: {answer_source or 'the run'} answers none of this stream's questions")
    per_order: list[dict[str, Any]] = []
    order_lists = stream_orders(n, orders, seed)
    task = progress.add("orders ", len(order_lists) * n)
    with progress:
        for o, order in enumerate(order_lists):
            per_order.append(
                {"order": o}
                | st.replay_order(order, lambda: progress.advance(task, 1))
                | (
                    {}
                    if answer_model is None
                    else {"model_room": model_reuse_room(order, right, answers, st.sub_answers, st.rel_ids, outputs)}
                )
            )
    retriever.close()
    meta = {
        "dataset": dataset_name,
        "data": list(ds.sources),
        "corpus": corpus.name,
        "documents": len(ds.corpus),
        "questions": n,
        "questions_with_gold": sum(1 for g in st.gold if g),
        "questions_with_decomposition": sum(1 for s in st.sub_ids if s),
        "related_by": "sub-question" if st.has_decomp else "gold passage",
        "limit": limit,
        "orders": len(order_lists),
        "seed": seed,
        "preset": preset_name,
        "retrieval": retriever.params.as_dict(),
        "experience": _experience_meta(e, st.findings_k),
        "variants": [v.__dict__ for v in variants],
        "answer_source": answer_source if answer_model is not None else None,
        "index_seconds": round(index_s, 2),
        "seconds": round(time.perf_counter() - t_start, 2),
    }
    return _summarise(per_order, names=st.names, bounds=st.bounds, n=n, meta=meta)


def _experience_meta(e: Any, findings_k: int) -> dict[str, Any]:
    """The experience settings a replay ran with (``e``: ``settings.experience``)."""
    return {
        "top_k": e.top_k,
        "alpha": e.alpha,
        "beta": e.beta,
        "tau_s": e.tau_s,
        "top_h": e.top_h,
        "epsilon": e.epsilon,
        "max_map_entities": e.max_map_entities,
        "fusion_floor": e.fusion_floor,
        "scaffold_lambda": e.scaffold_lambda,
        "scaffold_floor": e.scaffold_floor,
        "scaffold_template_floor": e.scaffold_template_floor,
        "passage_prior_gamma": e.beta,
        "passages_kept": PASSAGES_KEPT,
        "findings_k": findings_k,
        "findings_floor": e.findings_floor,
    }


@dataclass
class _Replay:
    """What every order of a replay reads: the stream's questions, their order-independent work
    (encodings, template embeddings, base retrieval, base maps), how they relate, and the settings."""

    retriever: Retriever
    qs: Sequence[Question]
    prepared: list[_Prepared]
    key_of: dict[int, str]
    variants: list[Variant]
    e: Any  # settings.experience
    kmax: int
    gold: list[set[str]] = field(init=False)
    sub_ids: list[frozenset[str]] = field(init=False)
    sub_answers: list[tuple[str, ...]] = field(init=False)
    has_decomp: bool = field(init=False)
    rel_ids: list[frozenset[str]] = field(init=False)
    emb: np.ndarray = field(init=False)
    tpl: np.ndarray = field(init=False)
    names: list[str] = field(init=False)
    bounds: list[str] = field(init=False)

    def __post_init__(self) -> None:
        qs, n = self.qs, len(self.qs)
        self.sub_ids = [frozenset(s.id for s in q.decomposition) for q in qs]
        self.sub_answers = [tuple(s.answer for s in q.decomposition) for q in qs]
        self.gold = [set(q.gold_keys) for q in qs]
        self.has_decomp = any(self.sub_ids)
        # related questions: a shared single-hop sub-question (MuSiQue); without decompositions (2Wiki,
        # HotpotQA), a shared gold passage
        self.rel_ids = self.sub_ids if self.has_decomp else [frozenset(f"gold:{k}" for k in q.gold_keys) for q in qs]
        prepared = self.prepared
        self.emb = (
            np.stack([np.asarray(p.encoding.embedding, dtype=np.float64) for p in prepared]) if n else np.zeros((0, 1))
        )
        self.tpl = np.stack([p.template for p in prepared]) if n else np.zeros((0, 1))
        self.names = ["base", *(v.name for v in self.variants)]
        self.bounds = ["bound: base ∪ related retrieved", "bound: base ∪ related gold"] if self.has_decomp else []

    @property
    def findings_k(self) -> int:
        k: int = self.e.findings_k or 2
        return k

    @property
    def findings_floors(self) -> list[float]:
        return sorted({*FINDINGS_FLOORS, self.e.findings_floor})

    def keys(self, ids: Sequence[int]) -> list[str | None]:
        return [self.key_of.get(p) for p in ids]

    @classmethod
    def prepare(
        cls,
        retriever: Retriever,
        qs: Sequence[Question],
        key_of: dict[int, str],
        variants: list[Variant],
        e: Any,
        progress: Progress,
    ) -> _Replay:
        """The order-independent work of every question: its encoding, template embedding, base
        retrieval and base map."""
        from livingrag.experience.sparsify import sparsify
        from livingrag.experience.template import mask

        kmax = max(max(KS), PASSAGES_KEPT)
        prepared: list[_Prepared] = []
        task = progress.add("base retrieval ", len(qs))
        with progress:
            for q in qs:
                enc = retriever.encode(q.question)
                tv = np.asarray(retriever.embedder.encode([mask(q.question, enc.mentions)])[0], dtype=np.float64)
                tv /= np.linalg.norm(tv) or 1.0
                res = retriever.retrieve(enc, top_k=kmax)
                ids = [p.id for p in res.passages]
                keys = [key_of.get(p) for p in ids]
                prepared.append(
                    _Prepared(enc, tv, ids, keys, sparsify(res.final_activation, e.epsilon, e.max_map_entities))
                )
                progress.advance(task, 1)
        return cls(retriever, qs, prepared, key_of, variants, e, kmax)

    def replay_order(self, order: Sequence[int], advance: Callable[[], None]) -> dict[str, Any]:
        """One stream order replayed: each question's recall by system and variant, the reuse counts,
        how often each variant fused, and how often its fusion activated new entities."""
        rec: dict[str, dict[int, list[float | None]]] = {x: {k: [] for k in KS} for x in self.names + self.bounds}
        counts: dict[str, Any] = {  # int tallies, and one dict of tallies per findings floor
            "related_exists": 0,
            "related_matched": 0,
            "related_used_no_floor": 0,
            "related_used_floor": 0,
            "scaffold_selected": 0,
            "scaffold_related": 0,
            "scaffold_states_subanswer": 0,
            "oracle_answer_contained": 0,
            "oracle_subanswer_contained": 0,
        }
        transfer = {v.name: 0 for v in self.variants if v.maps}
        fused = {v.name: 0 for v in self.variants}
        mem = {v.name: _Memory() for v in self.variants}
        earlier: list[int] = []
        gold = self.gold
        for i in order:
            p = self.prepared[i]
            base = dict(p.encoding.base_activation)
            for k in KS:
                rec["base"][k].append(per_passage_recall(p.keys, gold[i], k))
            rel = related(self.rel_ids, i, earlier)
            if earlier:  # reuse counts over the base-map store (what matching sees without fusion)
                self._count_reuse(counts, i, base, earlier, set(rel))
            if self.bounds:
                retrieved_before = {key for j in rel for key in self.prepared[j].keys[:PASSAGES_KEPT]}
                gold_before = {key for j in rel for key in gold[j]}
                for k in KS:
                    rec[self.bounds[0]][k].append(union_recall(p.keys, gold[i], k, retrieved_before))
                    rec[self.bounds[1]][k].append(union_recall(p.keys, gold[i], k, gold_before))
            for v in self.variants:
                used, transferred = self._replay_variant(v, mem[v.name], i, base, rel, earlier, rec[v.name])
                fused[v.name] += used
                if v.maps:
                    transfer[v.name] += transferred
            earlier.append(i)
            advance()
        return {
            "recall": {x: {f"passage_recall_at_{k}": mean(rec[x][k]) for k in KS} for x in rec},
            "counts": counts,
            "fused": fused,
            "graph_transfer": transfer,
        }

    def _count_reuse(
        self, counts: dict[str, Any], i: int, base: dict[int, float], earlier: list[int], rel_set: set[int]
    ) -> None:
        """Add question ``i``'s reuse counts over the base maps of the ``earlier`` questions: whether a
        related one is matched and used (with and without the fusion floor), the scaffold, the
        findings at each floor, and the oracle containment of its (sub-)answers."""
        from livingrag.experience.matching import retrieval_scores
        from livingrag.experience.scaffold import scaffold_scores, select_findings, select_scaffold

        e, qs, sub_answers, p = self.e, self.qs, self.sub_answers, self.prepared[i]
        maps = [self.prepared[j].map for j in earlier]
        s_all = retrieval_scores(self.emb[i], self.emb[earlier], base, maps, e.alpha).combined
        top, w_top = select_experiences(s_all, e.top_k, e.tau_s, None)
        floor = e.fusion_floor if e.fusion_floor > -1 else None
        _, w_floor = select_experiences(s_all, e.top_k, e.tau_s, floor)
        picked = [earlier[t] for t in top]
        counts["related_exists"] += bool(rel_set)
        counts["related_matched"] += any(j in rel_set for j in picked)
        counts["related_used_no_floor"] += any(j in rel_set and w > 0 for j, w in zip(picked, w_top, strict=True))
        counts["related_used_floor"] += any(j in rel_set and w > 0 for j, w in zip(picked, w_floor, strict=True))
        tsims = self.tpl[earlier] @ p.template
        pick = select_scaffold(
            scaffold_scores(s_all, tsims, e.scaffold_lambda),
            e.scaffold_floor,
            tsims,
            e.scaffold_template_floor,
        )
        if pick is not None:
            j = earlier[pick]
            counts["scaffold_selected"] += 1
            counts["scaffold_related"] += j in rel_set
            counts["scaffold_states_subanswer"] += answer_contained(sub_answers[i], qs[j].answer, sub_answers[j])
        for f in self.findings_floors:
            for label, exclude in (("findings", pick), ("findings with the scaffold's", None)):
                found = [earlier[t] for t in select_findings(s_all, top, f, self.findings_k, exclude=exclude)]
                c = counts.setdefault(f"{label} {f:g}", {"any": 0, "related": 0, "answer": 0, "unrelated": 0})
                c["any"] += bool(found)
                c["related"] += any(j in rel_set for j in found)
                c["answer"] += any(answer_contained(sub_answers[i], qs[j].answer) for j in found)
                c["unrelated"] += sum(j not in rel_set for j in found)
        counts["oracle_answer_contained"] += any(answer_contained(sub_answers[i], qs[j].answer) for j in earlier)
        counts["oracle_subanswer_contained"] += any(
            answer_contained(sub_answers[i], qs[j].answer, sub_answers[j]) for j in earlier
        )

    def _replay_variant(
        self,
        v: Variant,
        m: _Memory,
        i: int,
        base: dict[int, float],
        rel: list[int],
        earlier: list[int],
        rec: dict[int, list[float | None]],
    ) -> tuple[bool, bool]:
        """Question ``i`` answered by variant ``v`` from its store ``m`` (then stored in it), its
        recall added to ``rec``; (whether the variant used the store, whether its map fusion
        activated a new entity)."""
        from livingrag.experience.fusion import fuse, newly_active
        from livingrag.experience.matching import retrieval_scores
        from livingrag.experience.sparsify import sparsify

        e, p, retriever, kmax = self.e, self.prepared[i], self.retriever, self.kmax
        cands = rel if v.oracle else earlier
        got_ids, got_keys_by_k, final_map = p.ids, None, p.map
        weights = np.zeros(0)
        chosen: list[int] = []
        transferred = False
        if cands:
            s_v = retrieval_scores(self.emb[i], self.emb[cands], base, [m.maps[j] for j in cands], e.alpha).combined
            top, weights = select_experiences(s_v, e.top_k, e.tau_s, v.floor)
            chosen = [cands[t] for t in top]
        live = bool(chosen) and bool(weights.size) and float(weights.max()) > 0.0
        # used: the map fusion was applied (a seed entity, beta > 0), or passages were remembered
        used = live and (v.passages is not None or (bool(base) and e.beta > 0.0))
        if live:
            start = base
            if v.maps and base and max(base.values()) > 0.0 and e.beta > 0.0:
                start = fuse(base, [m.maps[j] for j in chosen], list(weights), e.beta, e.top_h)
                transferred = bool(newly_active(base, start, retriever.params.delta))
            if v.passages == "reset":
                prior = memory_prior([m.passages[j] for j in chosen], list(weights))
                gamma = e.beta if v.gamma is None else v.gamma
                got_ids = rank_with_prior(retriever, p, start, prior, gamma, kmax)
                if v.maps:
                    final_map = sparsify(
                        retriever.retrieve(p.encoding, start_activation=start, top_k=1).final_activation,
                        e.epsilon,
                        e.max_map_entities,
                    )
            elif start is not base:
                res = retriever.retrieve(p.encoding, start_activation=start, top_k=kmax)
                got_ids = [x.id for x in res.passages]
                final_map = sparsify(res.final_activation, e.epsilon, e.max_map_entities)
            if v.passages == "slot":
                memory = memory_order([m.passages[j] for j in chosen], list(weights))
                got_keys_by_k = {k: self.keys(slot_merge(got_ids, memory, k)) for k in KS}
                got_ids = slot_merge(got_ids, memory, kmax)
        for k in KS:
            got = got_keys_by_k[k] if got_keys_by_k is not None else self.keys(got_ids)
            rec[k].append(per_passage_recall(got, self.gold[i], k))
        m.maps[i] = final_map if v.maps == "after" else p.map
        m.passages[i] = list((got_ids if v.passages_stored == "after" else p.ids)[:PASSAGES_KEPT])
        return used, transferred


def _summarise(
    per_order: list[dict[str, Any]], *, names: list[str], bounds: list[str], n: int, meta: dict[str, Any]
) -> dict[str, Any]:
    rows = []
    base = {k: mean_std([po["recall"]["base"][f"passage_recall_at_{k}"] for po in per_order])[0] for k in KS}
    fused = per_order[0]["fused"] if per_order else {}
    transfer = per_order[0]["graph_transfer"] if per_order else {}
    for x in names + bounds:
        kind = "base" if x == "base" else "bound" if x in bounds else "oracle" if x.startswith("oracle") else "variant"
        row: dict[str, Any] = {"name": x, "kind": kind}
        for k in KS:
            by_order = [po["recall"][x][f"passage_recall_at_{k}"] for po in per_order]
            m, s = mean_std(by_order)
            row[f"passage_recall_at_{k}"] = None if m is None else round(m, 4)
            row[f"passage_recall_at_{k}_std"] = None if s is None else round(s, 4)
            row[f"passage_recall_at_{k}_by_order"] = [None if v is None else round(v, 4) for v in by_order]
        for k in KS:
            m, b = row[f"passage_recall_at_{k}"], base[k]
            row[f"delta_passage_recall_at_{k}"] = None if m is None or b is None else round(m - b, 4) + 0.0  # no -0.0
        if x in fused:
            row["used_share"] = round(float(np.mean([po["fused"][x] / max(n, 1) for po in per_order])), 4)
        if x in transfer:
            row["graph_transfer_share"] = round(
                float(np.mean([po["graph_transfer"][x] / max(n, 1) for po in per_order])), 4
            )
        rows.append(row)
    reuse: dict[str, Any] = {}
    findings: dict[str, dict[str, float]] = {}
    if per_order:
        for key, value in per_order[0]["counts"].items():
            if isinstance(value, dict):  # findings at one floor: shares (unrelated: mean count per question)
                findings[key] = {
                    part: round(float(np.mean([po["counts"][key][part] / max(n, 1) for po in per_order])), 4)
                    for part in value
                }
            else:
                reuse[key] = round(float(np.mean([po["counts"][key] / max(n, 1) for po in per_order])), 4)
    model_room: dict[str, float] = {}
    if per_order and "model_room" in per_order[0]:
        parts = [part for part in per_order[0]["model_room"] if part != "answered"]
        model_room = {
            part: round(
                float(np.mean([po["model_room"][part] / max(po["model_room"]["answered"], 1) for po in per_order])), 4
            )
            for part in parts
        }
        model_room["answered"] = per_order[0]["model_room"]["answered"]
    return {
        "metric": "per-passage recall: share of a question's gold passages found in the top k, averaged over "
        "questions with gold (mean over orders; std = sample std over orders)",
        **meta,
        "rows": rows,
        "reuse": reuse,
        "findings": findings,
        "model_room": model_room,
        "per_order": per_order,
    }


REUSE_LABELS = {
    "related_exists": "a related earlier question exists (shares a sub-question id, or a gold passage)",
    "related_matched": "a related one is matched (in eq. 7's top K over the base-map store)",
    "related_used_no_floor": "a related one is fused, no floor (weight > 0)",
    "related_used_floor": "a related one is fused under the fusion floor",
    "scaffold_selected": "a scaffold is selected (eq. 12-13)",
    "scaffold_related": "the scaffold is a related question",
    "scaffold_states_subanswer": "the scaffold's answer or a sub-answer is one of the question's sub-answers",
    "oracle_answer_contained": "oracle: an earlier gold answer is one of the question's sub-answers",
    "oracle_subanswer_contained": "oracle: an earlier gold answer or sub-answer is one of its sub-answers",
}


def format_report(out: dict[str, Any]) -> str:
    """The report as plain text: settings, the recall table, the reuse counts."""
    x = out["experience"]
    r = out["retrieval"]
    lines = [
        f"reuse benchmark: {out['dataset']} ({out['questions']} questions, {out['documents']} documents, "
        f"limit {out['limit']}), {out['orders']} orders (0 = file order, others shuffled with seed {out['seed']})",
        f"retrieval preset {out['preset']} (max_iterations {r['max_iterations']}, passage_ratio {r['passage_ratio']}, "
        f"delta {r['delta']}, top_k_sentence {r['top_k_sentence']}); corpus {out['corpus']}",
        f"experience: K {x['top_k']}, alpha {x['alpha']}, beta {x['beta']}, tau_s {x['tau_s']}, H {x['top_h']}, "
        f"epsilon {x['epsilon']}, fusion_floor {x['fusion_floor']}, scaffold lambda {x['scaffold_lambda']} "
        f"floor {x['scaffold_floor']} template floor {x['scaffold_template_floor']}; "
        "passage prior gamma = beta unless named; "
        f"an experience keeps its top {x['passages_kept']} passages; store ungated, confidence 1",
        f"metric: {out['metric']}",
        f"related questions: they share a {out.get('related_by', 'sub-question')} (oracle variants draw on them alone)",
        "",
    ]
    w = max(len(row["name"]) for row in out["rows"]) if out["rows"] else 10
    head = (
        f"{'variant':{w}}  {'R@2':>6} {'±':>5}  {'R@5':>6} {'±':>5}  {'ΔR@2':>6} {'ΔR@5':>6}  "
        f"{'used':>5} {'transfer':>8}"
    )
    lines.append(head)
    lines.append("-" * len(head))

    def f(v: float | None, width: int = 6, sign: bool = False) -> str:
        if v is None:
            return f"{'-':>{width}}"
        return f"{v:+{width}.4f}" if sign else f"{v:{width}.4f}"

    for row in out["rows"]:
        used = row.get("used_share")
        tr = row.get("graph_transfer_share")
        lines.append(
            f"{row['name']:{w}}  {f(row['passage_recall_at_2'])} {f(row['passage_recall_at_2_std'], 5)}  "
            f"{f(row['passage_recall_at_5'])} {f(row['passage_recall_at_5_std'], 5)}  "
            f"{f(row['delta_passage_recall_at_2'], sign=True)} "
            f"{f(row['delta_passage_recall_at_5'], sign=True)}  {'-' if used is None else f'{used:5.0%}':>5} "
            f"{'-' if tr is None else f'{tr:8.0%}':>8}"
        )
    lines.append(
        "(used: share of questions where the variant drew on some experience; transfer: fusion added an entity at "
        "or above delta; bounds are no ranking)"
    )
    lines.append("")
    lines.append("reuse (share of all questions, mean over orders):")
    for key, label in REUSE_LABELS.items():
        if key in out["reuse"]:
            lines.append(f"  {out['reuse'][key]:6.1%}  {label}")
    if out.get("findings"):
        lines.append("")
        lines.append(
            f"findings (up to {x.get('findings_k')} of eq. 7's top K with s_ret at or above the floor, stated as "
            f"facts; the setting's floor is {x.get('findings_floor')}), share of all questions, mean over orders:"
        )
        w = max(len(key) for key in out["findings"])
        lines.append(f"  {'selection, floor':{w}}  {'any':>6}  {'related':>7}  {'answer':>6}  {'unrelated/q':>11}")
        for key, c in out["findings"].items():
            lines.append(
                f"  {key:{w}}  {c['any']:6.1%}  {c['related']:7.1%}  {c['answer']:6.1%}  {c['unrelated']:11.2f}"
            )
        lines.append(
            "  (any: some finding is shown; related: one shares a sub-question; answer: one's gold answer is one "
            "of the question's sub-answers, what a stored answer can state; unrelated/q: findings per question "
            "that share no sub-question; findings leave out the eq. 13 scaffold's experience, \"with the "
            "scaffold's\" counts them as if they did not)"
        )
    room = out.get("model_room")
    if room:
        ceiling = room["right"] + room["fix_answer"] + room["fix_subanswer"]
        lines.append("")
        lines.append(
            f"room the answer model leaves for reuse ({out.get('answer_source')}: its LinearRAG answers to "
            f"{room['answered']} questions), share of those questions, mean over orders:"
        )
        lines.append(f"  {room['right']:6.1%}  answered right (LinearRAG's Contain-Acc with this model)")
        lines.append(
            f"  {room['fix_answer']:6.1%}  wrong, and an earlier question answered right has the same gold answer"
        )
        lines.append(
            f"  {room['fix_subanswer']:6.1%}  wrong, and an earlier question answered right has one of its "
            "sub-answers as its gold answer"
        )
        lines.append(f"  {room['at_risk']:6.1%}  right, and an earlier related question was answered wrong (at risk)")
        if "bridged" in room:
            lines.append(
                f"  {room['bridged']:6.1%}  wrong, and an earlier related question's answer or explanation names one "
                "of its intermediate answers (room for stating earlier evidence, not counted in the ceiling)"
            )
        lines.append(
            f"  {ceiling:6.1%}  ceiling of answer and finding reuse with this model (right + both fixable: a "
            f"perfect gate, perfect matching, and a model that uses what it is shown), "
            f"{ceiling - room['right']:+.1%} over LinearRAG"
        )
    lines.append(f"indexing {out['index_seconds']} s; total {out['seconds']} s")
    return "\n".join(lines)


__all__ = ["Variant", "default_variants", "format_report", "rank_with_prior", "resolve_preset", "run_reuse_bench"]
