"""The LinearRAG retriever as a service over one stored corpus.

Two calls, so the experience store can sit between them (paper eq. 7-8):

    encoding = retriever.encode(question)      # NER + embedding + entity linking -> a_base
    a0 = fuse(encoding.base_activation, ...)   # elsewhere (experience store)
    result = retriever.retrieve(encoding, start_activation=a0)   # None: start from a_base

``retrieve`` also accepts the question text directly. Activations cross the border as
``{entity_id: weight}`` dicts over the corpus's entity ids (:data:`livingrag.types.Activation`);
ids the graph no longer holds are ignored.

Query encoding runs the question embedding in a worker thread while spaCy finds the mentions; a
gazetteer pass adds the question spans that name a graph entity exactly. A mention whose
normalised name is a graph entity links with score 1 (its cosine, since entity embeddings are
embeddings of normalised names), and only the others are embedded and searched. A link to an
entity that is a common word of the corpus ("Film", a year: ``retrieval.common_word_share``) seeds
nothing; the encoding names it in ``common_words``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from livingrag.corpus.graph_loader import GraphCache
from livingrag.corpus.normalize import normalize_entity
from livingrag.errors import InvalidInput
from livingrag.models.threads import limit_blas_threads, set_torch_threads
from livingrag.retrieval.corpus_graph import CorpusGraph
from livingrag.retrieval.linking import (
    Link,
    base_activation,
    exact_links,
    gazetteer_mentions,
    merge_mentions,
    nearest_links,
)
from livingrag.retrieval.params import RetrievalParams
from livingrag.retrieval.ranking import rank_passages
from livingrag.retrieval.scoring import dense_scores, length_normalize, top_k
from livingrag.types import Activation, CorpusInfo, QueryEncoding, RetrievalResult, RetrievedPassage, SeedEntity

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.ner import EntityExtractor
    from livingrag.db.engine import Database
    from livingrag.models.embedder import SentenceEncoder

log = logging.getLogger(__name__)

_shared_cache = GraphCache()


def shared_graph_cache() -> GraphCache:
    """The process's graph cache, which retrievers use unless given another."""
    return _shared_cache


class Retriever:
    """LinearRAG retrieval over one corpus of one tenant (thread-safe)."""

    def __init__(
        self,
        db: Database,
        tenant_id: int,
        corpus: CorpusInfo,
        *,
        extractor: EntityExtractor,
        embedder: SentenceEncoder,
        params: RetrievalParams,
        cache: GraphCache | None = None,
    ) -> None:
        if embedder.dim != corpus.embedding_dim:
            raise InvalidInput(
                f"corpus {corpus.name!r} has {corpus.embedding_dim}-d embeddings ({corpus.embedding_model}); "
                f"the embedder gives {embedder.dim}-d"
            )
        self.db = db
        self.tenant_id = tenant_id
        self.corpus = corpus
        self.extractor = extractor
        self.embedder = embedder
        self.params = params
        self.cache = cache or _shared_cache
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livingrag-embed")
        limit_blas_threads(1)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, db: Database, tenant_id: int, corpus: CorpusInfo, settings: Settings, **overrides: object
    ) -> Retriever:
        """A retriever with the corpus's models and the settings' retrieval parameters, from the
        preset the corpus recorded unless ``retrieval.preset`` is set explicitly."""
        from livingrag.corpus.ner import llm_factory, make_extractor
        from livingrag.models.embedder import embedder_from_settings
        from livingrag.retrieval.presets import preset_for, resolve_params

        extractor = make_extractor(
            corpus.extractor,
            ner_model=corpus.ner_model if corpus.extractor == "spacy" else settings.models.ner_model,
            batch_size=settings.models.ner_batch_size,
            llm_factory=llm_factory(settings),
            concurrency=settings.llm.concurrency,
        )
        embedder = embedder_from_settings(settings.models, corpus.embedding_model, queries=True)
        preset = preset_for(settings.retrieval, corpus.settings.get("retrieval_preset"))
        retrieval = settings.retrieval.model_copy(update={"preset": preset})
        params = resolve_params(retrieval, **overrides)
        return cls(db, tenant_id, corpus, extractor=extractor, embedder=embedder, params=params)

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    # ------------------------------------------------------------------ graph

    def graph(self, *, min_version: int | None = None) -> CorpusGraph:
        """The corpus graph at its current version (loaded, or reloaded after a change; while a
        newer version loads, the previous one unless it is older than ``min_version``)."""
        return self.cache.get(
            self.db, self.tenant_id, self.corpus.id, self.corpus.embedding_dim, min_version=min_version
        )

    # ------------------------------------------------------------------ encode

    def encode(
        self,
        question: str,
        *,
        graph: CorpusGraph | None = None,
        template: Callable[[str, tuple[str, ...]], str] | None = None,
        known_template: Callable[[str], np.ndarray | None] | None = None,
    ) -> QueryEncoding:
        """Mentions, question embedding and seed entities (a_base) for ``question``.

        Mentions: the gazetteer's exact entity spans, plus the extractor's (spaCy NER) mentions
        when ``question_ner`` is "always", or "fallback" and the gazetteer found nothing.

        ``template`` (question, mentions) -> text: when the mentions are known from the gazetteer
        alone (no NER needed), that text is embedded in the same forward pass as the question
        (the experience store's question template, eq. 11-12) and returned as
        ``template_text`` / ``template_embedding``; otherwise both are None.

        timings (ms): ``ner`` (0 when skipped), ``embed`` (question, in a worker thread),
        ``mention_embed`` (only for mentions without an exact name match), ``link`` and
        ``encode`` (wall).
        """
        question = question.strip()
        t0 = time.perf_counter()
        mode = self.params.question_ner
        template_text: str | None = None
        template_vec: np.ndarray | None = None  # the template's vector when known_template had it
        if template is not None and mode != "always":
            # find the gazetteer spans first: if they settle the mentions, one forward pass embeds
            # the question and its template together (a second pass costs a whole one on a CPU)
            g = graph or self.graph()
            t_link = time.perf_counter()
            spans = self._gazetteer_spans(question, g)
            if spans or mode == "never":
                known = merge_mentions(question, [], spans, g.key_to_entity, normalize_entity)
                template_text = template(question, tuple(known))
            link_ms = (time.perf_counter() - t_link) * 1000
            if template_text is not None and known_template is not None:
                cached = known_template(template_text)
                if cached is not None and cached.shape == (self.embedder.dim,):
                    template_vec = cached
            texts = [question] if template_text is None or template_vec is not None else [question, template_text]
            fut = self._pool.submit(self._timed_encode, texts)
        else:
            fut = self._pool.submit(self._timed_encode, [question])
            g = graph or self.graph()
        # dense passage scores in the worker thread too, after the embedding; nobody waits for
        # them before the ranking needs them (after the propagation), so the product, which
        # streams the whole passage matrix from memory, runs beside the linking, the caller's
        # work between encode and retrieve (the experience match) and the propagation
        fut_dense = self._pool.submit(self._timed_dense, fut, g)
        if template is None or mode == "always":
            t_link = time.perf_counter()
            spans = self._gazetteer_spans(question, g)
            link_ms = (time.perf_counter() - t_link) * 1000
        ner_mentions, ner_ms = self._question_ner(question, spans)
        t_link = time.perf_counter()
        mentions = merge_mentions(question, ner_mentions, spans, g.key_to_entity, normalize_entity)
        keys = [normalize_entity(m) for m in mentions]
        links = exact_links(mentions, keys, g.key_to_entity)
        link_ms += (time.perf_counter() - t_link) * 1000
        q_vecs, embed_ms = fut.result()
        mention_ms, nearest_ms = self._link_by_embedding(mentions, keys, links, g)
        share = self.params.common_word_share
        dropped = [link is not None and g.is_common_word(link.entity, share) for link in links]
        common = [link for link, drop in zip(links, dropped, strict=True) if drop and link is not None]
        links = [None if drop else link for link, drop in zip(links, dropped, strict=True)]
        seeds = _seeds(links, g)
        base = {int(g.entity_ids[e]): float(w) for e, w in base_activation(links).items()}
        timings = {
            "ner": ner_ms,
            "embed": embed_ms,
            "mention_embed": mention_ms,
            "link": link_ms + nearest_ms,
            "encode": (time.perf_counter() - t0) * 1000,
        }
        return QueryEncoding(
            question=question,
            embedding=q_vecs[0],
            mentions=tuple(mentions),
            seeds=seeds,
            base_activation=base,
            timings=timings,
            passage_scores=_DenseScores(g.corpus_id, g.version, fut_dense, weakref.ref(g), time.monotonic()),
            graph_version=g.version,
            template_text=template_text,
            template_embedding=(
                template_vec if template_vec is not None else q_vecs[1] if template_text is not None else None
            ),
            common_words=tuple(dict.fromkeys(g.entity_names[link.entity] for link in common)),
        )

    def _gazetteer_spans(self, question: str, g: CorpusGraph) -> list[tuple[str, int, int]]:
        """The question's exact entity-name spans (none when ``question_gazetteer`` is off)."""
        if not self.params.question_gazetteer:
            return []
        return gazetteer_mentions(question, g.key_to_entity, normalize_entity)

    def _question_ner(self, question: str, spans: list[tuple[str, int, int]]) -> tuple[list[str], float]:
        """The extractor's mentions of the question and their milliseconds, when ``question_ner`` asks for
        them ("always", or "fallback" with no gazetteer ``spans``); else none and 0."""
        mode = self.params.question_ner
        if not (mode == "always" or (mode == "fallback" and not spans)):
            return [], 0.0
        t_ner = time.perf_counter()
        ner_mentions = self.extractor.extract_question(question)
        return ner_mentions, (time.perf_counter() - t_ner) * 1000

    def _link_by_embedding(
        self, mentions: list[str], keys: list[str], links: list[Link | None], g: CorpusGraph
    ) -> tuple[float, float]:
        """Fill in, in place, the ``links`` that no exact name match found, by the nearest entity embedding
        of the mention (at least ``min_link_score``); returns the milliseconds of embedding the mentions
        and of linking them (both 0 when every mention matched a name)."""
        missing = [i for i, link in enumerate(links) if link is None]
        if not missing:
            return 0.0, 0.0
        t_m = time.perf_counter()
        m_vecs = self._pool.submit(self._timed_encode, [keys[i] for i in missing]).result()[0]
        mention_ms = (time.perf_counter() - t_m) * 1000
        t_link = time.perf_counter()
        found = nearest_links(
            [mentions[i] for i in missing],
            [keys[i] for i in missing],
            m_vecs,
            g.entity_embeddings,
            min_score=self.params.min_link_score,
        )
        for i, link in zip(missing, found, strict=True):
            links[i] = link
        return mention_ms, (time.perf_counter() - t_link) * 1000

    @staticmethod
    def _timed_dense(fut: Future[tuple[np.ndarray, float]], g: CorpusGraph) -> tuple[np.ndarray, float]:
        q = fut.result()[0][0]
        t = time.perf_counter()
        scores = dense_scores(g.passage_embeddings, q)
        return scores, (time.perf_counter() - t) * 1000

    def _timed_encode(self, texts: list[str]) -> tuple[np.ndarray, float]:
        set_torch_threads(self.params.query_threads)
        t = time.perf_counter()
        vecs = self.embedder.encode(texts)
        return vecs, (time.perf_counter() - t) * 1000

    # ------------------------------------------------------------------ retrieve

    def retrieve(
        self,
        query: QueryEncoding | str,
        *,
        start_activation: Activation | None = None,
        top_k: int | None = None,
    ) -> RetrievalResult:
        """Rank passages for an encoded question (or a question text).

        ``start_activation`` (a0 of eq. 8, {entity_id: weight}) replaces the base activation when
        given; entity ids unknown to the current graph are ignored. With no usable seed the
        passages are ranked by the dense score alone (``dense_fallback``).
        """
        t0 = time.perf_counter()
        g = _encoding_graph(query, self.corpus.id) if not isinstance(query, str) else None
        if g is None:
            g = self.graph()
        load_ms = (time.perf_counter() - t0) * 1000
        encoding = self.encode(query, graph=g) if isinstance(query, str) else query
        t_after_encode = time.perf_counter()
        start = dict(encoding.base_activation) if start_activation is None else dict(start_activation)
        seeds = entity_rows(start, g)
        t1 = time.perf_counter()
        ranking = rank_passages(
            g, encoding.embedding, seeds, self.params, k=top_k or self.params.top_k, dense=_cached_dense(encoding, g)
        )
        rank_ms = (time.perf_counter() - t1) * 1000
        cached = encoding.passage_scores
        dense_ms = cached.compute_ms() if isinstance(cached, _DenseScores) else None
        passages = tuple(
            RetrievedPassage(
                id=int(g.passage_ids[p]), title=g.passage_titles[p], text=g.passage_texts[p], score=float(s)
            )
            for p, s in zip(ranking.passages, ranking.scores, strict=True)
        )
        enc = encoding.timings
        # graph work (wall time on this thread): linking, bridging, reset, PPR, and the wait for the
        # dense passage term still being computed on the worker thread (``dense_wait_ms``); the
        # worker's own time for it is ``dense_ms``
        graph_ms = enc.get("link", 0.0) + rank_ms
        timings = {
            **{f"{k}_ms": v for k, v in enc.items()},
            **({} if dense_ms is None else {"dense_ms": dense_ms}),
            **ranking.timings,
            "graph_check_ms": load_ms,
            "graph_ms": graph_ms,
            # everything: encoding, the version check, ranking (a text query's encoding is inside encode_ms)
            "retrieval_ms": enc.get("encode", 0.0) + load_ms + (time.perf_counter() - t_after_encode) * 1000,
        }
        ids = g.entity_ids
        return RetrievalResult(
            encoding=encoding,
            passages=passages,
            start_activation={int(k): float(v) for k, v in start.items()},
            final_activation={int(ids[e]): float(w) for e, w in ranking.final_activation.items()},
            entity_tiers={int(ids[e]): int(t) for e, t in ranking.tiers.items()},
            dense_fallback=ranking.dense_fallback,
            timings=timings,
        )

    def dense(self, query: QueryEncoding | str, *, top_k: int | None = None) -> tuple[RetrievedPassage, ...]:
        """Dense-only ranking with the same embedder (the benchmark's baseline)."""
        g = self.graph()
        encoding = self.encode(query, graph=g) if isinstance(query, str) else query
        cached = _cached_dense(encoding, g)
        raw = cached() if cached is not None else dense_scores(g.passage_embeddings, encoding.embedding)
        scores = length_normalize(raw, g.passage_lengths, self.params.length_norm_b)
        order = _top(scores, top_k or self.params.top_k)
        return tuple(
            RetrievedPassage(int(g.passage_ids[p]), g.passage_titles[p], g.passage_texts[p], float(scores[p]))
            for p in order
        )

    def entity_names(self, entity_ids: Mapping[int, object] | list[int]) -> dict[int, str]:
        """Display names of entity ids in the current graph (unknown ids are left out)."""
        g = self.graph()
        return {int(e): g.entity_names[g.id_to_entity[int(e)]] for e in entity_ids if int(e) in g.id_to_entity}


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    return top_k(scores, k)


@dataclass(frozen=True)
class _DenseScores:
    """What encode() computes against one graph on the worker thread, kept on the encoding for
    retrieve(): ``pending`` resolves to (cos(q, p) of every passage, the worker's milliseconds)."""

    corpus_id: int
    version: int
    pending: Future[tuple[np.ndarray, float]]
    graph: weakref.ref[CorpusGraph]
    created: float  # time.monotonic()

    @property
    def scores(self) -> np.ndarray:
        """The scores, waiting for the worker thread if it is still computing them."""
        return self.pending.result()[0]

    def compute_ms(self) -> float | None:
        """The worker's time for the scores, None while they are not computed yet."""
        return self.pending.result()[1] if self.pending.done() else None


FRESH_S = 1.0
"""A retrieval within this many seconds of its encoding uses the graph the encoding was linked
against, without reading the corpus version again."""


def _encoding_graph(encoding: QueryEncoding, corpus_id: int) -> CorpusGraph | None:
    cached = encoding.passage_scores
    if not isinstance(cached, _DenseScores) or time.monotonic() - cached.created > FRESH_S:
        return None
    g = cached.graph()
    return g if g is not None and g.corpus_id == corpus_id else None


def _cached_dense(encoding: QueryEncoding, g: CorpusGraph) -> Callable[[], np.ndarray] | None:
    """The encoding's passage scores (resolved when called) when they are computed on this very
    graph (corpus and version)."""
    cached = encoding.passage_scores
    if not isinstance(cached, _DenseScores) or (cached.corpus_id, cached.version) != (g.corpus_id, g.version):
        return None
    return lambda: cached.scores


def entity_rows(activation: Mapping[int, float], g: CorpusGraph) -> dict[int, float]:
    """{entity id: weight} as {graph row: weight}, keeping positive weights of entities in ``g``."""
    rows: dict[int, float] = {}
    for eid, w in activation.items():
        row = g.id_to_entity.get(int(eid))
        if row is not None and w > 0:
            rows[row] = float(w)
    return rows


__all__ = ["Retriever"]


def _seeds(links: list[Link | None], g: CorpusGraph) -> tuple[SeedEntity, ...]:
    """The seed entities of the found ``links``: mention, entity id and name, link score."""
    return tuple(
        SeedEntity(
            mention=link.mention,
            entity_id=int(g.entity_ids[link.entity]),
            name=g.entity_names[link.entity],
            score=float(link.score),
        )
        for link in links
        if link is not None
    )
