"""EXPLAIN (ANALYZE, BUFFERS) of the matching statement of a kept `bench store` database, for chosen
tenants, in the order the benchmark queries them (round robin over all tenants), with timing of
the bare tenant_read call beside it; this copy waits for the server's read-ahead and buffer load
first, and prints every watched tenant's plan in the last round.

usage: LIVINGRAG_DB__DATA_DIR=... python explain.py DBNAME EXPERIENCES TENANTS ROUNDS
"""
import json, sys, time
import numpy as np
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from livingrag.config import DBSettings, get_settings
from livingrag.db.engine import Database
from livingrag.db.repositories import experiences as repo
from livingrag.bench.store import Synth, _bench_store, _regenerate
from livingrag.types import QueryEncoding

name, n, tenants, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
settings = get_settings()
server = Database(settings.db)
warm = server.embedded.prewarm if server.embedded is not None else None
if warm is not None:  # as bench store does: the read-ahead and the buffer load first
    warm.wait()
    print("# prewarm", json.dumps(warm.report()), flush=True)
url = make_url(server.owner_url).set(database=name).render_as_string(hide_password=False)
db = Database(DBSettings(url=SecretStr(url), data_dir=settings.db.data_dir, app_role=settings.db.app_role, pool_size=4))
synth = Synth(n, tenants, 0, "zipf", 1.0)
scopes, data = _regenerate(db, synth)
synth.rng = np.random.default_rng([0, 5])
store = _bench_store(db, settings)
ef = settings.experience.hnsw_ef_search
watch = {0: "largest", tenants // 2: "median"}
rows = []
for r in range(rounds):
    for t in range(tenants):
        emb, base = synth.query(t)
        tid, cid = scopes[t]
        a = store._preselect_args(tid, cid, emb, base)
        sql = repo._preselect_driver_sql(int(emb.shape[0]), *repo._limits(a["m"], a["entity_hits"], a["rows_per_entity"]), tid, cid)
        params = repo._preselect_params(embedding=emb, seeds=a["seeds"], now=a["now"], alpha=a["alpha"])
        plan = None
        if t in watch:  # first, in the round robin's state of the caches
            plan = db.tenant_read(tid, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params, local_settings=repo.preselect_settings(ef))[0][0][0]
        t0 = time.perf_counter()
        db.tenant_read(tid, sql, params, local_settings=repo.preselect_settings(ef))
        wall = (time.perf_counter() - t0) * 1000
        t1 = time.perf_counter()
        store.match(tid, cid, QueryEncoding(question="q", embedding=emb, mentions=(), seeds=(), base_activation=base))
        match_ms = (time.perf_counter() - t1) * 1000
        if plan is not None:
            top = plan["Plan"]
            rows.append(dict(round=r, tenant=watch[t], size=synth.counts[t], read_again_ms=round(wall, 2), match_again_ms=round(match_ms, 2),
                             plan_ms=plan.get("Planning Time"), exec_ms=plan.get("Execution Time"),
                             hit=top.get("Shared Hit Blocks"), read=top.get("Shared Read Blocks")))
            print(json.dumps(rows[-1]), flush=True)
            if r == rounds - 1:
                def walk(node, depth=0):
                    print("   " * depth + f"{node['Node Type']} {node.get('Index Name', node.get('Relation Name', ''))} {node.get('Subplan Name','')} rows={node.get('Actual Rows')} loops={node.get('Actual Loops')} hit={node.get('Shared Hit Blocks')} read={node.get('Shared Read Blocks')} ms={node.get('Actual Startup Time')}..{node.get('Actual Total Time')}")
                    for ch in node.get("Plans", []):
                        walk(ch, depth + 1)
                walk(top)
db.close(); server.close()
