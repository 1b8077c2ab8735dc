"""The in-memory corpus graph the retriever works on: numpy arrays and scipy.sparse matrices.

Pure data (no database, torch or settings): :mod:`livingrag.corpus.graph_loader` fills it from
PostgreSQL with bulk reads, tests build tiny ones by hand with :meth:`CorpusGraph.build`.

Row orders are content-derived (passages by content hash, entities by normalised name, sentences
by their passage's hash and position), never insertion order, so every tie in the retriever is
broken the same way however the corpus file was ordered.

Matrices (n_p passages, n_e entities, n_s entity-bearing sentences):

* ``entity_sentences``  (n_e x n_s, CSR, 0/1): the sentences an entity occurs in;
* ``sentence_entities`` (n_s x n_e, CSR, 0/1): its transpose;
* ``mentions``          (n_p x n_e, CSR): mention counts c(p, e) found at index time;
* ``mention_log``       (n_p x n_e, CSR): ln(1 + c(p, e)), the passage-reset term of LinearRAG;
* ``entity_mention_log`` (n_e x n_p, CSR): its transpose, read row by row for the activated entities;
* ``entity_title_passages`` (n_e,): the row of the passage whose title is the entity's key, -1 if
  none (:mod:`livingrag.retrieval.title_pages`);
* ``transition``        (n x n, CSR, n = n_e + n_p, entities first): the column-stochastic random
  walk of the undirected passage-entity graph, T[i, j] = A[i, j] / deg(j), where A holds the
  passage-entity edges (weight c(p, e) / sum_e' c(p, e')) and the passage-passage links.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from livingrag.retrieval.common_words import common_word_threshold, writes_at_least
from livingrag.retrieval.ppr import BipartitePPR
from livingrag.retrieval.title_pages import title_pages


@dataclass(frozen=True, eq=False)
class CorpusGraph:
    corpus_id: int
    version: int
    passage_ids: np.ndarray  # int64 (n_p,)
    passage_titles: tuple[str, ...]
    passage_texts: tuple[str, ...]
    passage_lengths: np.ndarray  # float64 (n_p,), characters (eq. 27 |p|)
    passage_embeddings: np.ndarray  # float32 (n_p, d), unit rows
    entity_ids: np.ndarray  # int64 (n_e,)
    entity_keys: tuple[str, ...]  # normalised names, sorted
    entity_names: tuple[str, ...]  # display names
    entity_embeddings: np.ndarray  # float32 (n_e, d), unit rows
    sentence_ids: np.ndarray  # int64 (n_s,)
    sentence_passages: np.ndarray  # int32 (n_s,), row of the passage a sentence belongs to
    sentence_embeddings: np.ndarray  # float32 (n_s, d), unit rows
    entity_sentences: sp.csr_matrix
    sentence_entities: sp.csr_matrix
    mentions: sp.csr_matrix
    mention_log: sp.csr_matrix
    entity_mention_log: sp.csr_matrix
    transition: sp.csr_matrix
    dangling: np.ndarray  # bool (n,), nodes without edges
    entity_title_passages: np.ndarray  # int64 (n_e,), row of the passage titled with the entity's key, -1: none
    ppr: BipartitePPR = field(repr=False)  # the walk, pre-arranged for the fast solver
    key_to_entity: dict[str, int] = field(repr=False)
    id_to_entity: dict[int, int] = field(repr=False)
    id_to_passage: dict[int, int] = field(repr=False)
    _common_words: dict[tuple[int, int], bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_passages(self) -> int:
        return len(self.passage_ids)

    @property
    def n_entities(self) -> int:
        return len(self.entity_ids)

    @property
    def n_sentences(self) -> int:
        return len(self.sentence_ids)

    @property
    def dim(self) -> int:
        return int(self.passage_embeddings.shape[1])

    def is_common_word(self, entity: int, min_share: float) -> bool:
        """Whether the entity (a row) is a common word of this corpus at s_min = ``min_share``
        (:mod:`livingrag.retrieval.common_words`); found by scanning the passage texts the first time
        an entity is asked about at a threshold, then remembered with this graph version."""
        limit = common_word_threshold(self.n_passages, min_share)
        if limit is None or not 0 <= entity < self.n_entities:
            return False
        memo = (entity, limit)
        known = self._common_words.get(memo)
        if known is None:
            known = writes_at_least(self.entity_keys[entity], self.passage_texts, limit)
            self._common_words[memo] = known
        return known

    def nbytes(self) -> int:
        """Approximate memory held by the arrays and matrices."""
        total = 0
        for v in vars(self).values():
            if isinstance(v, np.ndarray):
                total += v.nbytes
            elif isinstance(v, sp.csr_matrix | sp.csr_array):
                total += v.data.nbytes + v.indices.nbytes + v.indptr.nbytes
        return total

    @classmethod
    def build(
        cls,
        *,
        passage_ids: Sequence[int] | np.ndarray,
        passage_embeddings: np.ndarray,
        entity_ids: Sequence[int] | np.ndarray,
        entity_keys: Sequence[str],
        entity_embeddings: np.ndarray,
        sentence_ids: Sequence[int] | np.ndarray,
        sentence_passages: Sequence[int] | np.ndarray,
        sentence_embeddings: np.ndarray,
        entity_sentence_pairs: Sequence[tuple[int, int]] | np.ndarray,
        passage_entity_mentions: Sequence[tuple[int, int, float]] | np.ndarray,
        passage_links: Sequence[tuple[int, int, float]] | np.ndarray = (),
        passage_titles: Sequence[str] | None = None,
        passage_title_keys: Sequence[str] | None = None,
        passage_texts: Sequence[str] | None = None,
        passage_lengths: Sequence[float] | np.ndarray | None = None,
        entity_names: Sequence[str] | None = None,
        corpus_id: int = 0,
        version: int = 0,
    ) -> CorpusGraph:
        """Assemble a graph from rows given by position.

        ``entity_sentence_pairs`` are (entity row, sentence row); ``passage_entity_mentions`` are
        (passage row, entity row, mention count); ``passage_links`` are (passage row, passage row,
        weight), undirected. ``passage_title_keys`` are the titles normalised as entity keys are (the
        loader uses ``normalize_entity``); without them no entity has a title page. Rows are used as
        given (callers order them). Each sequence may be a numpy array of the same shape (the
        database loader passes arrays).
        """
        n_p, n_e, n_s = len(passage_ids), len(entity_ids), len(sentence_ids)
        es = np.asarray(entity_sentence_pairs, dtype=np.int64).reshape(-1, 2)
        e2s = sp.csr_matrix(
            (np.ones(len(es), dtype=np.float32), (es[:, 0], es[:, 1])), shape=(n_e, n_s), dtype=np.float32
        )
        e2s.sum_duplicates()
        e2s.data[:] = 1.0
        pem = np.asarray(passage_entity_mentions, dtype=np.float64).reshape(-1, 3)
        mentions = sp.csr_matrix(
            (pem[:, 2].astype(np.float32), (pem[:, 0].astype(np.int64), pem[:, 1].astype(np.int64))),
            shape=(n_p, n_e),
            dtype=np.float32,
        )
        mentions.sum_duplicates()
        mentions.eliminate_zeros()
        mention_log = mentions.copy()
        mention_log.data = np.log1p(mention_log.data)
        links = np.asarray(passage_links, dtype=np.float64).reshape(-1, 3)
        transition, dangling = transition_matrix(mentions, links)
        lengths = (
            np.asarray(passage_lengths, dtype=np.float64)
            if passage_lengths is not None
            else np.array([len(t) for t in passage_texts], dtype=np.float64)
            if passage_texts is not None
            else np.ones(n_p)
        )
        keys = tuple(entity_keys)
        ids = np.asarray(entity_ids, dtype=np.int64)
        pids = np.asarray(passage_ids, dtype=np.int64)
        texts = tuple(passage_texts) if passage_texts is not None else ("",) * n_p
        return cls(
            corpus_id=corpus_id,
            version=version,
            passage_ids=pids,
            passage_titles=tuple(passage_titles) if passage_titles is not None else ("",) * n_p,
            passage_texts=texts,
            passage_lengths=lengths,
            passage_embeddings=_matrix(passage_embeddings, n_p),
            entity_ids=ids,
            entity_keys=keys,
            entity_names=tuple(entity_names) if entity_names is not None else keys,
            entity_embeddings=_matrix(entity_embeddings, n_e),
            sentence_ids=np.asarray(sentence_ids, dtype=np.int64),
            sentence_passages=np.asarray(sentence_passages, dtype=np.int32),
            sentence_embeddings=_matrix(sentence_embeddings, n_s),
            entity_sentences=e2s,
            sentence_entities=e2s.T.tocsr(),
            mentions=mentions,
            mention_log=mention_log,
            entity_mention_log=mention_log.T.tocsr(),
            transition=transition,
            dangling=dangling,
            entity_title_passages=title_pages(keys, passage_title_keys if passage_title_keys is not None else ()),
            ppr=BipartitePPR.build(transition, n_e, dangling),
            key_to_entity=dict(zip(keys, range(n_e), strict=True)),
            id_to_entity=dict(zip(ids.tolist(), range(n_e), strict=True)),
            id_to_passage=dict(zip(pids.tolist(), range(n_p), strict=True)),
        )


def _matrix(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` as a C-contiguous float32 (n, d) matrix (d = 0 when it has no rows and no shape)."""
    arr = np.ascontiguousarray(a, dtype=np.float32)
    if arr.ndim == 2 and arr.shape[0] == n:
        return arr
    return arr.reshape(n, -1) if n else np.zeros((0, arr.shape[-1] if arr.ndim == 2 else 0), dtype=np.float32)


def transition_matrix(mentions: sp.csr_matrix, links: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
    """Column-stochastic walk matrix of the undirected passage-entity graph, and its dangling nodes.

    Nodes are the n_e entities followed by the n_p passages. A passage-entity edge weighs the
    entity's share of the passage's mentions, w(p, e) = c(p, e) / sum_e' c(p, e') (LinearRAG's
    reference, docs/corpora-and-retrieval.md); a passage link (p, q, w) adds w both ways.
    T[i, j] = A[i, j] / sum_i A[i, j]; a column with no edge is all zeros and the node is marked
    dangling.
    """
    n_p, n_e = mentions.shape
    n = n_e + n_p
    row_sums = np.asarray(mentions.sum(axis=1)).ravel()
    share = sp.diags(np.divide(1.0, row_sums, out=np.zeros_like(row_sums), where=row_sums > 0)) @ mentions
    share = sp.coo_matrix(share)
    rows = [n_e + share.row, share.col]
    cols = [share.col, n_e + share.row]
    vals = [share.data, share.data]
    if len(links):
        a = links[:, 0].astype(np.int64) + n_e
        b = links[:, 1].astype(np.int64) + n_e
        keep = a != b
        rows += [a[keep], b[keep]]
        cols += [b[keep], a[keep]]
        vals += [links[keep, 2], links[keep, 2]]
    adj = sp.csr_matrix(
        (np.concatenate(vals).astype(np.float64), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )
    adj.sum_duplicates()
    deg = np.asarray(adj.sum(axis=0)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    transition = (adj @ sp.diags(inv)).tocsr()
    transition.sort_indices()
    return transition, deg <= 0


__all__ = ["CorpusGraph", "transition_matrix"]
