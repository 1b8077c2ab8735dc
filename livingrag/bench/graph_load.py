"""``livingrag bench graph-load``: what loading a corpus's graph costs a process, per kind of load.

A process that serves a corpus keeps its graph in memory (:class:`~livingrag.corpus.graph_loader.GraphCache`)
and loads it again when the corpus version moves: after every passage add, update or deletion,
every worker pays that load. Three kinds of load, each timed ``rounds`` times (medians):

- **full**: every row of the corpus (a process's first load);
- **rewrite**: after an update or a deletion, every id and edge again, texts and vectors only of
  the rows it lacks (:func:`~livingrag.db.repositories.graph_tables.load_graph_tables_since`),
  timed with nothing changed, which is its fixed cost;
- **appended**: after passages were only added, the added rows alone
  (:func:`~livingrag.db.repositories.graph_tables.load_graph_tables_appended`).

The appended load is measured without writing anything: in one transaction that is rolled back,
the corpus's ``added`` newest passages are deleted under a savepoint (with the entities only they
mention and whose ids are above every other entity's, as if they had come with them), the graph
"before" them is read, the savepoint is rolled back, and the appended load then reads them as the
rows added since. Its result is checked against a full load of the same snapshot (ids, texts and
edge counts). Each load is also built into the graph (``build``), the same for every kind.

Run it on an idle server: the transaction holds the corpus's row and the deleted rows' locks while
it runs, so a writer of that corpus waits for it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from livingrag.corpus.graph_loader import graph_from_tables
from livingrag.db.engine import Database
from livingrag.db.repositories import corpora as corpus_repo
from livingrag.db.repositories import graph_tables as tables_repo
from livingrag.db.repositories import graph_writer as graph_repo
from livingrag.db.repositories import passages as passage_repo
from livingrag.errors import InvalidInput
from livingrag.types import CorpusInfo

__all__ = ["GraphLoadReport", "format_report", "run_graph_load_bench"]


@dataclass
class AppendedLoad:
    added: int
    """Passages read as added."""
    new_entities: int
    read_ms: float
    build_ms: float
    same_as_full: bool
    """The appended tables hold the ids, texts and edge counts of a full load of the snapshot."""


@dataclass
class GraphLoadReport:
    corpus: str
    corpus_id: int
    version: int
    passages: int
    entities: int
    sentences: int
    edges: int
    rounds: int
    full_read_ms: float
    full_build_ms: float
    rewrite_read_ms: float
    appended: list[AppendedLoad] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 2)


def run_graph_load_bench(
    db: Database,
    tenant_id: int,
    corpus: CorpusInfo,
    *,
    added: list[int],
    rounds: int = 5,
    progress: Callable[[str], None] | None = None,
) -> GraphLoadReport:
    """Time the full, rewrite and appended loads of ``corpus`` (see the module's docstring)."""
    if rounds < 1:
        raise InvalidInput(f"--rounds must be at least 1, got {rounds}")
    if any(k < 1 for k in added):
        raise InvalidInput(f"--added takes passage counts of at least 1, got {sorted(added)}")
    with db.tenant_session(tenant_id) as s:
        held = passage_repo.count_passages(s, corpus.id)
    if added and max(added) > held:
        raise InvalidInput(f"--added {max(added)}: corpus {corpus.name!r} holds only {held} passages")
    say = progress or (lambda _msg: None)
    dim = corpus.embedding_dim
    reads, builds, since_reads = [], [], []
    tables: tables_repo.GraphTables | None = None
    for r in range(rounds):
        say(f"full load {r + 1}/{rounds}")
        t0 = time.perf_counter()
        with db.tenant_session(tenant_id) as s:
            tables_repo.repeatable_read(s)
            tables = tables_repo.load_graph_tables(s, corpus.id, dim)
        t1 = time.perf_counter()
        graph = graph_from_tables(corpus.id, tables)
        builds.append(time.perf_counter() - t1)
        reads.append(t1 - t0)
    assert tables is not None
    for r in range(rounds):
        say(f"rewrite load {r + 1}/{rounds}")
        t0 = time.perf_counter()
        with db.tenant_session(tenant_id) as s:
            tables_repo.repeatable_read(s)
            tables_repo.load_graph_tables_since(s, corpus.id, dim, tables)
        since_reads.append(time.perf_counter() - t0)
    report = GraphLoadReport(
        corpus=corpus.name,
        corpus_id=corpus.id,
        version=tables.version,
        passages=graph.n_passages,
        entities=graph.n_entities,
        sentences=graph.n_sentences,
        edges=len(tables.es_entity_ids) + len(tables.pe_passage_ids) + len(tables.link_sources),
        rounds=rounds,
        full_read_ms=_median_ms(reads),
        full_build_ms=_median_ms(builds),
        rewrite_read_ms=_median_ms(since_reads),
    )
    for k in added:
        say(f"appended load of {k} passages")
        report.appended.append(_appended(db, tenant_id, corpus, k, rounds))
    return report


def _appended(db: Database, tenant_id: int, corpus: CorpusInfo, k: int, rounds: int) -> AppendedLoad:
    """The appended load of the corpus's ``k`` newest passages, in a transaction rolled back."""
    dim = corpus.embedding_dim
    reads, builds = [], []
    with db.tenant_session(tenant_id) as s:
        tables_repo.repeatable_read(s)
        newest = passage_repo.newest_passage_ids(s, corpus.id, k)
        if len(newest) < k:
            raise InvalidInput(f"--added {k}: corpus {corpus.name!r} holds only {len(newest)} passages")
        # The loads after the savepoint see the corpus one append newer than "before".
        corpus_repo.mark_last_change_appended(s, corpus.id)
        # as the application changes passages: under the corpus's evidence lock, so the staleness
        # trigger (migration 0012) leaves the versions set above as they are
        graph_repo.lock_evidence(s, corpus.id)
        savepoint = s.begin_nested()
        mentioned = graph_repo.passage_entity_ids(s, newest)
        graph_repo.delete_passages(s, corpus.id, newest)
        kept_high = graph_repo.highest_mentioned_entity_id(s, corpus.id)
        graph_repo.remove_orphan_entities(s, corpus.id, [e for e in mentioned if e > kept_high])
        corpus_repo.step_version_back(s, corpus.id)
        before = tables_repo.load_graph_tables(s, corpus.id, dim)
        savepoint.rollback()
        got: tables_repo.GraphTables | None = None
        for _ in range(rounds):
            t0 = time.perf_counter()
            got = tables_repo.load_graph_tables_appended(s, tenant_id, corpus.id, dim, before)
            t1 = time.perf_counter()
            if got is None:
                raise RuntimeError("the appended load declined a corpus one append newer than the tables it holds")
            graph_from_tables(corpus.id, got)
            builds.append(time.perf_counter() - t1)
            reads.append(t1 - t0)
        assert got is not None
        full = tables_repo.load_graph_tables(s, corpus.id, dim)
        s.rollback()
    same = (
        got.passage_ids.tolist() == full.passage_ids.tolist()
        and got.entity_ids.tolist() == full.entity_ids.tolist()
        and got.sentence_ids.tolist() == full.sentence_ids.tolist()
        and got.passage_texts == full.passage_texts
        and got.entity_keys == full.entity_keys
        and len(got.es_entity_ids) == len(full.es_entity_ids)
        and len(got.pe_passage_ids) == len(full.pe_passage_ids)
        and len(got.link_sources) == len(full.link_sources)
    )
    return AppendedLoad(
        added=k,
        new_entities=len(got.entity_ids) - len(before.entity_ids),
        read_ms=_median_ms(reads),
        build_ms=_median_ms(builds),
        same_as_full=same,
    )


def format_report(r: GraphLoadReport) -> str:
    lines = [
        f"corpus {r.corpus!r} (id {r.corpus_id}, version {r.version}): {r.passages:,} passages, "
        f"{r.entities:,} entities, {r.sentences:,} sentences, {r.edges:,} edges; medians of {r.rounds} rounds",
        f"  full load        read {r.full_read_ms:8.1f} ms   build {r.full_build_ms:7.1f} ms",
        f"  rewrite load     read {r.rewrite_read_ms:8.1f} ms   (after an update or deletion; nothing changed)",
    ]
    for a in r.appended:
        lines.append(
            f"  appended load    read {a.read_ms:8.1f} ms   build {a.build_ms:7.1f} ms   "
            f"({a.added} passages, {a.new_entities} new entities; same as a full load: {a.same_as_full})"
        )
    return "\n".join(lines)
