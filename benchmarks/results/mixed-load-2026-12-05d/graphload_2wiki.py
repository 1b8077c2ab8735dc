"""What the graph load an add pays costs on a real corpus (2Wiki, ~6k passages), idle machine:
the full load, the incremental read and the build. Nothing is written: the incremental read is
timed with nothing changed, which is its fixed cost."""
import os, sys, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import numpy as np
from sqlalchemy import text
from livingrag.config import get_settings
from livingrag.db.setup import open_database
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.corpus.matrices import load_graph_and_tables, graph_from_tables
from livingrag.db.repositories.corpus_graph import load_graph_tables_since

settings = get_settings()
db = open_database(settings.db)
with db.owner_session() as s:
    rows = s.execute(text("SELECT c.id, c.tenant_id, c.name, (SELECT count(*) FROM passages p WHERE p.corpus_id = c.id) FROM corpora c ORDER BY 4 DESC")).all()
print(rows[:5])
cid, tid, name, n = rows[0]
from livingrag.db.repositories import corpora
with db.tenant_session(tid) as s:
    info = corpora.get_corpus(s, cid) if hasattr(corpora, "get_corpus") else None
print("corpus", name, n, "passages")
dim = 384
graph, tables = load_graph_and_tables(db, tid, cid, dim)
print("graph", graph.n_passages, "passages", graph.n_entities, "entities", graph.n_sentences, "sentences")
full, reads, builds = [], [], []
for r in range(5):
    t0 = time.perf_counter(); load_graph_and_tables(db, tid, cid, dim); full.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with db.tenant_session(tid) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        new_tables = load_graph_tables_since(s, cid, dim, tables)
    t1 = time.perf_counter(); graph_from_tables(cid, new_tables); t2 = time.perf_counter()
    reads.append(t1 - t0); builds.append(t2 - t1)
ms = lambda xs: f"{np.median(xs)*1000:.1f} ms p50 (min {min(xs)*1000:.1f})"
print("full load:", ms(full))
print("incremental read, nothing changed:", ms(reads))
print("build from tables:", ms(builds))
