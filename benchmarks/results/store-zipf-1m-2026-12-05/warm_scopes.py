"""Experiment: start the embedded server (OS read-ahead on), then walk each scope HNSW index with a
sample of its own embeddings so the pages enter PostgreSQL's buffers; then hold the server open."""
import sys, time
from pathlib import Path
from livingrag.db.embedded import start_embedded
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

per_scope, min_rows, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = start_embedded(Path("/work/lrg-1mz"), prewarm=True)
if s.prewarm is not None:
    s.prewarm.wait(600) if hasattr(s.prewarm, "wait") else None
url = make_url(s.url).set(database="livingrag_bench_f45dfe3513").render_as_string(hide_password=False)
e = create_engine(url)
t0 = time.perf_counter()
with e.connect() as c:
    scopes = c.execute(text("""SELECT tenant_id, corpus_id, count(*) FROM experiences GROUP BY 1, 2 HAVING count(*) >= :m ORDER BY 3 DESC"""), {"m": min_rows}).all()
    n = 0
    for t, co, size in scopes:
        k = max(1, int(per_scope * size / scopes[0][2]))
        embs = c.execute(text(f"SELECT query_embedding::text FROM experiences WHERE tenant_id = {t} AND corpus_id = {co} AND id % 97 = 0 LIMIT {k}")).scalars().all()
        with e.begin() as w:
            w.execute(text("SET LOCAL hnsw.ef_search = 20"))
            for v in embs:
                w.execute(text(f"SELECT id FROM experiences WHERE tenant_id = {t} AND corpus_id = {co} ORDER BY query_embedding::halfvec(384) <=> CAST(:v AS halfvec(384)) LIMIT 16"), {"v": v}).all()
                n += 1
    print("warm queries", n, "over", len(scopes), "scopes in", round(time.perf_counter() - t0, 1), "s", flush=True)
time.sleep(hold)
e.dispose(); s.stop()
