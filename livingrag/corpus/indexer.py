"""Building and changing a corpus graph in PostgreSQL: index, add, update, delete.

Indexing: documents are read and validated in full (:mod:`livingrag.corpus.ingest`), chunked
(:mod:`livingrag.corpus.chunking`), and passages whose content hash the corpus already holds are
skipped. The rest go in batches; for each batch the entity extractor and the embedder run first,
then ONE transaction writes the passages, their sentences, entities and edges (bulk COPY), links
consecutive chunks of a document and bumps the corpus version. A run killed half-way therefore
leaves whole batches or nothing, and the next run skips what was written and continues.

Graph content of one passage (LinearRAG; docs/corpora-and-retrieval.md, LinearRAG's reference):

* sentences: every sentence of the passage; those holding an entity get an embedding and join the
  entity-sentence bridge;
* entities: the extractor's mentions keyed by their normalised name; with ``title_entities`` a
  record's title (without a trailing parenthetical) also counts as one mention of the passage,
  placed in its first sentence, since a title names the passage's subject; a title that is only
  a file's name (a text file's, or a document without heading or metadata title) never is;
* passage-entity edges: mention count c(p, e) and weight c(p, e) / sum_e' c(p, e');
* embeddings (unit vectors): the passage as "title\\ntext", its entity-bearing sentences, and each
  entity's normalised name (so an exact name match between a question and the graph has cosine 1).

Updating or deleting a passage changes its rows, drops entities no passage mentions any more,
bumps the version and fires :func:`livingrag.corpus.hooks.fire_passage_change`, all in one
transaction.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from livingrag.corpus.chunking import PassageDraft, chunk_document, content_hash
from livingrag.corpus.hooks import fire_passage_change
from livingrag.corpus.ingest import Document, read_corpus
from livingrag.corpus.ner import EntityExtractor, Extraction
from livingrag.corpus.normalize import normalize_entity
from livingrag.corpus.progress import NullProgress, Progress
from livingrag.db.repositories import corpora
from livingrag.db.repositories import graph_writer as repo
from livingrag.db.repositories import passages as passage_repo
from livingrag.errors import AlreadyExists, InvalidInput, NotFound
from livingrag.io.documents import title_is_file_name
from livingrag.models.threads import set_torch_threads
from livingrag.quotas import check_quota
from livingrag.types import CorpusInfo

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from livingrag.db.engine import Database
    from livingrag.models.embedder import SentenceEncoder

log = logging.getLogger(__name__)

_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


def title_key(title: str) -> str:
    """The entity key of a record title: "Theodred II (Bishop of Elmham)" -> "theodred ii"."""
    return normalize_entity(_PARENTHETICAL.sub("", title)) if title else ""


def embedding_text(title: str, text: str) -> str:
    """What a passage's embedding is computed from: its title (when it has one) and its text."""
    return f"{title}\n{text}" if title else text


@dataclass(frozen=True)
class PassageGraph:
    """The graph rows of one passage, computed from its extraction (pure)."""

    sentences: tuple[str, ...]
    bridged: tuple[int, ...]  # positions of sentences that hold an entity
    mentions: dict[str, int]  # entity key -> mention count
    entity_sentences: tuple[tuple[str, int], ...]  # (entity key, sentence position)
    surface: dict[str, Counter[str]]
    labels: dict[str, Counter[str]]


def passage_graph(title: str, extraction: Extraction, *, title_entities: bool = True) -> PassageGraph:
    """Sentences, mention counts and entity-sentence pairs of one passage."""
    sentences = extraction.sentences or ("",)
    counts: Counter[str] = Counter()
    pairs: set[tuple[str, int]] = set()
    surface: dict[str, Counter[str]] = {}
    labels: dict[str, Counter[str]] = {}
    items = [(m.key, m.text, m.label, m.sentence) for m in extraction.mentions]
    tk = title_key(title) if title_entities else ""
    if tk:
        items.append((tk, _PARENTHETICAL.sub("", title).strip() or title, "TITLE", 0))
    for key, text, label, sent in items:
        sent = min(max(sent, 0), len(sentences) - 1)
        counts[key] += 1
        pairs.add((key, sent))
        surface.setdefault(key, Counter())[text] += 1
        if label:
            labels.setdefault(key, Counter())[label] += 1
    bridged_set = {s for _, s in pairs if sentences[s].strip()}
    return PassageGraph(
        sentences=tuple(sentences),
        bridged=tuple(sorted(bridged_set)),
        mentions=dict(counts),
        entity_sentences=tuple(sorted((k, s) for k, s in pairs if s in bridged_set)),
        surface=surface,
        labels=labels,
    )


@dataclass
class IndexReport:
    """What one indexing run did, with wall time by phase (seconds)."""

    corpus: str
    documents: int = 0
    passages_in_input: int = 0
    duplicates_in_input: int = 0
    skipped_existing: int = 0
    indexed: int = 0
    new_entities: int = 0
    sentences: int = 0
    version: int = 0
    passage_ids: list[int] = field(default_factory=list)
    # content hash -> id of each passage indexed now (to tell requests committed together apart)
    ids_by_hash: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)

    cpu: dict[str, float] = field(default_factory=dict)
    # the embedding model's forward passes in the embed phase (ONNX backend): real and padded
    # tokens and the seconds inside the runtime, to compare the phase with the model's own speed
    model: dict[str, float] = field(default_factory=dict)

    def add_model_usage(self, usage: object) -> None:
        for k in ("runs", "tokens", "padded_tokens", "seconds"):
            self.model[k] = self.model.get(k, 0) + getattr(usage, k)

    def add_time(self, phase: str, seconds: float, cpu_seconds: float | None = None) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds
        if cpu_seconds is not None:
            self.cpu[phase] = self.cpu.get(phase, 0.0) + cpu_seconds

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall time and this process's CPU time (all threads) to ``phase``."""
        t, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.add_time(phase, time.perf_counter() - t, time.process_time() - c)

    def as_dict(self) -> dict[str, object]:
        d = {k: v for k, v in vars(self).items() if k not in ("passage_ids", "ids_by_hash")}
        d["phases"] = {k: round(v, 3) for k, v in self.phases.items()}
        d["cpu"] = {k: round(v, 3) for k, v in self.cpu.items()}
        d["model"] = {k: round(v, 3) for k, v in self.model.items()}
        return d


def _is_extractor(x: EntityExtractor | Callable[[], EntityExtractor]) -> TypeIs[EntityExtractor]:
    """Whether ``x`` is an extractor rather than the factory of one (a factory is callable and has
    no ``extract_passages``)."""
    return not callable(x) or hasattr(x, "extract_passages")


def _is_encoder(x: SentenceEncoder | Callable[[], SentenceEncoder]) -> TypeIs[SentenceEncoder]:
    """Whether ``x`` is an encoder rather than the factory of one (callable, no ``encode``)."""
    return not callable(x) or hasattr(x, "encode")


class CorpusIndexer:
    """Indexes documents into one corpus and applies passage updates and deletions.

    Models are loaded on first use, so a run with nothing new to index loads none.
    """

    def __init__(
        self,
        db: Database,
        tenant_id: int,
        corpus: CorpusInfo,
        *,
        extractor: EntityExtractor | Callable[[], EntityExtractor],
        embedder: SentenceEncoder | Callable[[], SentenceEncoder],
        chunk_tokens: int = 600,
        chunk_overlap: int = 60,
        batch_size: int = 256,
        embedding_batch_size: int = 64,
        title_entities: bool = True,
        sentence_embeddings: str = "late",
        threads: int | None = None,
        progress: Progress | None = None,
        max_passages: int | None = None,
    ) -> None:
        self.db = db
        self.max_passages = max_passages
        self.tenant_id = tenant_id
        self.corpus = corpus
        self._extractor = extractor
        self._embedder = embedder
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap = chunk_overlap
        self.batch_size = batch_size
        self.embedding_batch_size = embedding_batch_size
        self.title_entities = title_entities
        self.sentence_embeddings = sentence_embeddings
        self.threads = threads
        self.progress: Progress = progress or NullProgress()

    # ------------------------------------------------------------------ models (lazy)

    @property
    def extractor(self) -> EntityExtractor:
        if not _is_extractor(self._extractor):
            self._extractor = self._extractor()
        return self._extractor

    @property
    def embedder(self) -> SentenceEncoder:
        if not _is_encoder(self._embedder):
            self._embedder = self._embedder()
        emb = self._embedder
        if emb.dim != self.corpus.embedding_dim:
            raise InvalidInput(
                f"corpus {self.corpus.name!r} was built with {self.corpus.embedding_model} "
                f"({self.corpus.embedding_dim}-d) but the embedder gives {emb.dim}-d vectors"
            )
        return emb

    # ------------------------------------------------------------------ indexing

    def index_path(self, path: str | Path) -> IndexReport:
        report = IndexReport(corpus=self.corpus.name)
        with report.timed("read"):
            docs = read_corpus(path)
        return self.index_documents(docs, report=report)

    def content_hashes(self, docs: Sequence[Document]) -> list[str]:
        """The content hash of each passage ``docs`` chunk into, in order (duplicates kept), as
        :meth:`index_documents` chunks them."""
        return [
            d.content_hash
            for doc in docs
            for d in chunk_document(doc, chunk_tokens=self.chunk_tokens, overlap=self.chunk_overlap)
        ]

    def index_documents(self, docs: Sequence[Document], *, report: IndexReport | None = None) -> IndexReport:
        """Chunk, skip what the corpus holds, and index the rest batch by batch; a batch whose new
        passages would take the corpus past ``max_passages`` raises :class:`QuotaExceeded` before
        anything is written."""
        report = report or IndexReport(corpus=self.corpus.name)
        t_start, c_start = time.perf_counter(), time.process_time()
        t, c = t_start, c_start
        drafts: list[PassageDraft] = []
        seen: set[str] = set()
        for doc in docs:
            for d in chunk_document(doc, chunk_tokens=self.chunk_tokens, overlap=self.chunk_overlap):
                report.passages_in_input += 1
                if d.content_hash in seen:
                    report.duplicates_in_input += 1
                    continue
                seen.add(d.content_hash)
                drafts.append(d)
        report.documents = len(docs)
        with self.db.tenant_session(self.tenant_id) as s:
            present = repo.existing_hashes(s, self.corpus.id, [d.content_hash for d in drafts])
            todo = [d for d in drafts if d.content_hash not in present]
            if self.max_passages is not None:  # refused whole: nothing of the batch is written
                held = passage_repo.count_passages(s, self.corpus.id)
                check_quota("api.max_passages_per_corpus", self.max_passages, held, len(todo), "passages per corpus")
        report.skipped_existing = len(drafts) - len(todo)
        report.add_time("plan", time.perf_counter() - t, time.process_time() - c)
        if todo:
            with self.progress:
                bars = {
                    "ner": self.progress.add("entities ", len(todo)),
                    "embed": self.progress.add("embeddings", len(todo)),
                    "write": self.progress.add("written   ", len(todo)),
                }
                for i in range(0, len(todo), self.batch_size):
                    self._index_batch(todo[i : i + self.batch_size], report, bars)
            self._repair_entity_embeddings(report)
        with self.db.tenant_session(self.tenant_id) as s:
            report.version = corpora.current_version(s, self.corpus.id)
        report.add_time(
            "total",
            time.perf_counter() - t_start + report.phases.get("read", 0.0),
            time.process_time() - c_start + report.cpu.get("read", 0.0),
        )
        return report

    def _extract(self, drafts: Sequence[PassageDraft], bar: object) -> list[PassageGraph]:
        out: list[PassageGraph] = []
        for d, ex in zip(drafts, self.extractor.extract_passages([d.text for d in drafts]), strict=True):
            out.append(passage_graph(d.title, ex, title_entities=self.title_entities and d.title_entity))
            self.progress.advance(bar, 1)
        return out

    def _embed(self, texts: list[str], bar: object = None, per_text: float = 0.0) -> np.ndarray:
        """Embed ``texts`` longest first in chunks (so progress moves), returned in input order."""
        if not texts:
            return np.zeros((0, self.corpus.embedding_dim), dtype=np.float32)
        set_torch_threads(self.threads)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.corpus.embedding_dim), dtype=np.float32)
        step = max(self.embedding_batch_size * 8, 256)
        done = 0.0
        for i in range(0, len(order), step):
            idx = order[i : i + step]
            out[idx] = self.embedder.encode([texts[j] for j in idx], batch_size=self.embedding_batch_size)
            if bar is not None and per_text:
                before = int(done)
                done += per_text * len(idx)
                self.progress.advance(bar, int(done) - before)
        return out

    def _embed_passages(
        self, drafts: Sequence[PassageDraft], graphs: Sequence[PassageGraph], bar: object = None
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Passage vectors and, per passage, the vectors of its bridged sentences (in order).

        ``late`` sentence embeddings come from the passage's own forward pass (the mean of the
        sentence's contextual token vectors, :meth:`Embedder.encode_with_spans`), so sentences
        cost no extra model time; a sentence the model cut off, or that cannot be located in the
        text, is embedded on its own, as every sentence is with ``separate``.
        """
        texts = [embedding_text(d.title, d.text) for d in drafts]
        dim = self.corpus.embedding_dim
        set_torch_threads(self.threads)
        if self.sentence_embeddings == "separate":
            sent = [g.sentences[i] for g in graphs for i in g.bridged]
            vecs = self._embed(texts + sent, bar, per_text=len(drafts) / max(len(texts) + len(sent), 1))
            bounds = np.cumsum([len(texts)] + [len(g.bridged) for g in graphs])
            return vecs[: len(texts)], [vecs[bounds[i] : bounds[i + 1]] for i in range(len(graphs))]
        spans = [
            _sentence_spans(d.text, [g.sentences[i] for i in g.bridged], len(texts[k]) - len(d.text))
            for k, (d, g) in enumerate(zip(drafts, graphs, strict=True))
        ]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        p_vecs = np.zeros((len(texts), dim), dtype=np.float32)
        s_vecs: list[np.ndarray] = [np.zeros((len(g.bridged), dim), dtype=np.float32) for g in graphs]
        missing: list[tuple[int, int, str]] = []
        step = self.embedding_batch_size * 2
        for c in range(0, len(order), step):
            idx = order[c : c + step]
            pv, sv = self.embedder.encode_with_spans(
                [texts[i] for i in idx], [[sp for sp in spans[i] if sp is not None] for i in idx],
                batch_size=self.embedding_batch_size,
            )  # fmt: skip
            p_vecs[idx] = pv
            for row, i in enumerate(idx):
                it = iter(sv[row])
                for j, sp in enumerate(spans[i]):
                    v = next(it) if sp is not None else None
                    if v is None:
                        missing.append((i, j, graphs[i].sentences[graphs[i].bridged[j]]))
                    else:
                        s_vecs[i][j] = v
            self.progress.advance(bar, len(idx))
        if missing:
            vecs = self._embed([m[2] for m in missing])
            for (i, j, _), v in zip(missing, vecs, strict=True):
                s_vecs[i][j] = v
        return p_vecs, s_vecs

    def _index_batch(self, drafts: list[PassageDraft], report: IndexReport, bars: dict[str, object]) -> None:
        with report.timed("ner"):
            graphs = self._extract(drafts, bars["ner"])
        with report.timed("plan"):
            keys = sorted({k for g in graphs for k in g.mentions})
            with self.db.tenant_session(self.tenant_id) as s:
                known = repo.existing_entity_keys(s, self.corpus.id, keys)
            new_keys = [k for k in keys if k not in known]
        usage = getattr(self.embedder, "usage", None)
        before = replace(usage) if usage is not None else None
        with report.timed("embed"):
            p_vecs, s_vecs = self._embed_passages(drafts, graphs, bars["embed"])
            k_vecs = dict(zip(new_keys, self._embed(new_keys), strict=True))
        if usage is not None and before is not None:
            report.add_model_usage(usage.since(before))
        with report.timed("write"), self.db.tenant_session(self.tenant_id) as s:
            repo.lock_corpus(s, self.corpus.id)
            present = repo.existing_hashes(s, self.corpus.id, [d.content_hash for d in drafts])
            keep = [i for i, d in enumerate(drafts) if d.content_hash not in present]  # another writer's meanwhile
            batch = self._batch_rows(
                [drafts[i] for i in keep], [graphs[i] for i in keep], p_vecs[keep], [s_vecs[i] for i in keep], k_vecs
            )
            written = repo.write_batch(s, self.tenant_id, self.corpus.id, batch)
            ids = written.passage_ids
            repo.link_chunks(s, self.tenant_id, self.corpus.id, ids)
            # Only rows were added, unless an entity the corpus held without a vector got one.
            corpora.bump_version(s, self.corpus.id, appended=written.filled_vectors == 0)
        report.indexed += len(ids)
        report.passage_ids.extend(ids)
        report.ids_by_hash.update(zip((drafts[i].content_hash for i in keep), ids, strict=True))
        report.new_entities += len(new_keys)
        report.sentences += len(batch.sentences)
        self.progress.advance(bars["write"], len(drafts))

    def _batch_rows(
        self,
        drafts: Sequence[PassageDraft],
        graphs: Sequence[PassageGraph],
        p_vecs: np.ndarray,
        s_vecs: Sequence[np.ndarray],
        k_vecs: dict[str, np.ndarray],
    ) -> repo.GraphBatch:
        """Rows for ``write_batch``; ``s_vecs[i]`` holds passage i's bridged-sentence vectors in order."""
        passages = [
            repo.PassageRow(
                title=d.title,
                text=d.text,
                content_hash=d.content_hash,
                length=d.length,
                token_count=d.token_count,
                doc_key=d.doc_key,
                chunk_index=d.chunk_index,
                external_id=d.external_id,
                embedding=p_vecs[i],
            )
            for i, d in enumerate(drafts)
        ]
        sentences: list[repo.SentenceRow] = []
        es: list[tuple[str, int]] = []
        pe: list[tuple[int, str, int, float]] = []
        surface: dict[str, Counter[str]] = {}
        labels: dict[str, Counter[str]] = {}
        for pi, g in enumerate(graphs):
            pos_to_row: dict[int, int] = {}
            bridged = {si: j for j, si in enumerate(g.bridged)}
            for si, sent in enumerate(g.sentences):
                emb = s_vecs[pi][bridged[si]] if si in bridged else None
                pos_to_row[si] = len(sentences)
                sentences.append(repo.SentenceRow(passage=pi, position=si, text=sent, embedding=emb))
            es.extend((k, pos_to_row[si]) for k, si in g.entity_sentences)
            total = sum(g.mentions.values())
            pe.extend((pi, k, c, c / total) for k, c in sorted(g.mentions.items()))
            for k, c in g.surface.items():
                surface.setdefault(k, Counter()).update(c)
            for k, c in g.labels.items():
                labels.setdefault(k, Counter()).update(c)
        entities = [
            repo.EntityRow(
                key=k,
                name=_display_name(surface[k]),
                label=labels[k].most_common(1)[0][0] if labels.get(k) else None,
                surface_forms=tuple(sorted(surface[k]))[:32],
                embedding=k_vecs.get(k),
            )
            for k in sorted(surface)
        ]
        return repo.GraphBatch(passages, sentences, entities, es, pe)

    def _repair_entity_embeddings(self, report: IndexReport) -> None:
        """Embed entities that a concurrent change left without a vector (rare)."""
        with self.db.tenant_session(self.tenant_id) as s:
            missing = repo.entities_without_embedding(s, self.corpus.id)
        if not missing:
            return
        vecs = self._embed([k for _, k in missing])
        with self.db.tenant_session(self.tenant_id) as s:
            repo.lock_corpus(s, self.corpus.id)
            repo.set_entity_embeddings(s, self.corpus.id, [(i, v) for (i, _), v in zip(missing, vecs, strict=True)])
            corpora.bump_version(s, self.corpus.id)

    # ------------------------------------------------------------------ single passages

    def add_passage(self, text: str, *, title: str = "", external_id: str | None = None) -> int:
        """Index one passage (not chunked); returns its id (the existing id if already stored)."""
        doc = Document(title=title.strip(), text=text.strip(), external_id=external_id, source="add")
        if not doc.text:
            raise InvalidInput("the passage text is empty")
        h = content_hash(doc.title, doc.text)
        report = self.index_documents([doc])
        if report.passage_ids:
            return report.passage_ids[0]
        with self.db.tenant_session(self.tenant_id) as s:
            return repo.passage_id_by_hash(s, self.corpus.id, h)

    def update_passage(self, ref: int | str, *, text: str | None = None, title: str | None = None) -> int:
        """Replace a passage's text and/or title, re-extracting its sentences, entities and edges.

        One transaction: the passage keeps its id, entities no passage mentions any more are
        dropped, the corpus version is bumped and the passage-change hook fires ("updated").
        """
        with self.db.tenant_session(self.tenant_id) as s:
            old = passage_repo.get_passage(s, self.corpus.id, ref)
        new_title = old.title if title is None else title.strip()
        new_text = old.text if text is None else text.strip()
        if not new_text:
            raise InvalidInput("the passage text is empty")
        h = content_hash(new_title, new_text)
        if h == old.content_hash:
            return old.id
        extraction = next(iter(self.extractor.extract_passages([new_text])))
        # a title that is only the name of the passage's file stays no entity (livingrag.io.readers)
        as_entity = self.title_entities and not title_is_file_name(new_title, old.external_id)
        g = passage_graph(new_title, extraction, title_entities=as_entity)
        with self.db.tenant_session(self.tenant_id) as s:
            known = repo.existing_entity_keys(s, self.corpus.id, sorted(g.mentions))
        new_keys = [k for k in sorted(g.mentions) if k not in known]
        draft = PassageDraft(new_title, new_text, old.doc_key or "", old.chunk_index, old.external_id, 0, h, "update")
        p_vecs, s_vecs = self._embed_passages([draft], [g])
        p_vec = p_vecs[0]
        k_vecs = dict(zip(new_keys, self._embed(new_keys), strict=True))
        batch = self._batch_rows([draft], [g], p_vecs, s_vecs, k_vecs)
        row = repo.PassageRow(
            title=new_title,
            text=new_text,
            content_hash=h,
            length=len(new_text),
            token_count=len(new_text.split()),
            doc_key=old.doc_key,
            chunk_index=old.chunk_index,
            external_id=old.external_id,
            embedding=p_vec,
        )
        with self.db.tenant_session(self.tenant_id) as s:
            repo.lock_corpus(s, self.corpus.id)
            repo.lock_evidence(s, self.corpus.id)  # the experiences citing it are marked below
            current = passage_repo.get_passage(s, self.corpus.id, old.id)
            if repo.existing_hashes(s, self.corpus.id, [h]) - {current.content_hash}:
                raise AlreadyExists(f"another passage of corpus {self.corpus.name!r} already has this title and text")
            old_entities = repo.passage_entity_ids(s, [old.id])
            repo.clear_passage_graph(s, self.corpus.id, old.id)
            repo.update_passage_row(s, self.corpus.id, old.id, row)
            repo.insert_passage_graph(
                s,
                self.tenant_id,
                self.corpus.id,
                old.id,
                batch.sentences,
                batch.entities,
                batch.entity_sentences,
                [(k, m, w) for _, k, m, w in batch.passage_entities],
            )
            repo.remove_orphan_entities(s, self.corpus.id, old_entities)
            corpora.bump_version(s, self.corpus.id)
            fire_passage_change(s, self.corpus.id, [old.id], "updated")
        self._repair_entity_embeddings(IndexReport(corpus=self.corpus.name))
        return old.id

    def delete_passages(self, refs: Sequence[int | str]) -> list[int]:
        """Delete passages (by id or external id) with their sentences and edges, in one transaction.

        Entities left without any mention are dropped, the version is bumped and the hook fires
        ("deleted"). An unknown reference raises :class:`NotFound` and deletes nothing.
        """
        if not refs:
            return []
        with self.db.tenant_session(self.tenant_id) as s:
            repo.lock_corpus(s, self.corpus.id)
            repo.lock_evidence(s, self.corpus.id)  # the experiences citing them are marked below
            ids = sorted({passage_repo.get_passage(s, self.corpus.id, r).id for r in refs})
            old_entities = repo.passage_entity_ids(s, ids)
            deleted = repo.delete_passages(s, self.corpus.id, ids)
            if len(deleted) != len(ids):
                raise NotFound(f"passages {sorted(set(ids) - set(deleted))} vanished during the deletion")
            repo.remove_orphan_entities(s, self.corpus.id, old_entities)
            corpora.bump_version(s, self.corpus.id)
            fire_passage_change(s, self.corpus.id, deleted, "deleted")
        return deleted


def _sentence_spans(text: str, sentences: Sequence[str], offset: int) -> list[tuple[int, int] | None]:
    """Character spans of ``sentences`` in ``text`` (searched in order), shifted by ``offset``."""
    out: list[tuple[int, int] | None] = []
    pos = 0
    for sent in sentences:
        i = text.find(sent, pos) if sent else -1
        if i < 0:
            i = text.find(sent) if sent else -1
        if i < 0:
            out.append(None)
            continue
        out.append((offset + i, offset + i + len(sent)))
        pos = i + len(sent)
    return out


def _display_name(forms: Counter[str]) -> str:
    """The most frequent surface form (ties: the alphabetically first)."""
    return min(forms.items(), key=lambda kv: (-kv[1], kv[0]))[0]


__all__ = ["CorpusIndexer", "IndexReport", "PassageGraph", "embedding_text", "passage_graph", "title_key"]
