"""Cost of the graph load an add pays (read-your-writes), split into the DB read and the build,
on the load test's corpus grown to ~1,100 passages as in a 60 s mixed-load run. No other load."""
import os, sys, tempfile, time
d = tempfile.mkdtemp(prefix="lrg-gl-")
os.environ["LIVINGRAG_DB__DATA_DIR"] = d
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))
import numpy as np
from livingrag.config import get_settings
from livingrag.db.setup import open_database
from livingrag.corpus import service
from livingrag.corpus.ingest import Document
from livingrag.corpus.matrices import load_graph_and_tables, graph_from_tables
from livingrag.db.repositories.corpus_graph import load_graph_tables_since
from tests.corpus_support import CORPUS

settings = get_settings()
db = open_database(settings.db)
tid, _ = service.ensure_tenant(db, "gl")
corpus = service.create_corpus(db, tid, "wiki", settings)
idx = service.indexer(db, tid, corpus, settings)
idx.index_documents([Document(r["title"], r["text"]) for r in CORPUS])
t = time.perf_counter()
for b in range(220):
    docs = []
    for k in range(5):
        n, i = b, k
        sent = f"load passage {n}-{i}: Village {n}{i} lies on the river Ostra in the county of Vell."
        docs.append(Document(sent[:30], sent))
    idx.index_documents(docs)
print(f"indexed 1100 passages in 220 runs: {time.perf_counter() - t:.1f} s", flush=True)
dim = corpus.embedding_dim
graph, tables = load_graph_and_tables(db, tid, corpus.id, dim)
print("graph", graph.n_passages, "passages", graph.n_entities, "entities", graph.n_sentences, "sentences")
full, reads, builds = [], [], []
for r in range(15):
    idx.index_documents([Document(f"extra {r}", f"Extra village {r} lies on the river Ostra in the county of Vell.")])
    t0 = time.perf_counter()
    load_graph_and_tables(db, tid, corpus.id, dim)
    full.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    with db.tenant_session(tid) as s:
        s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        new_tables = load_graph_tables_since(s, corpus.id, dim, tables)
    t1 = time.perf_counter()
    graph_from_tables(corpus.id, new_tables)
    t2 = time.perf_counter()
    reads.append(t1 - t0); builds.append(t2 - t1)
    tables = new_tables
ms = lambda xs: f"{np.median(xs)*1000:.1f} ms p50 (min {min(xs)*1000:.1f})"
print("full load (no previous tables):", ms(full))
print("incremental read since previous:", ms(reads))
print("build from tables:", ms(builds))
