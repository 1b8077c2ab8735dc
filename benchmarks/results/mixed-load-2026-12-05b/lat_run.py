"""load_run.py plus: the per-stage latencies of the answered asks from query_log, before stopping."""
import json, sys, os
from pathlib import Path
root, workers, secs, data_dir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)
import numpy as np
import tests.test_api_load as tl
from livingrag.api.load import run_load
from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import Server, server_env
from sqlalchemy import text
with OpenAICompatServer() as llm:
    env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
    env.pop("LIVINGRAG_DB__URL")
    srv = Server(env, log_path=Path(f"/tmp/lrg-load-server-w{workers}.log"), args=("--workers", str(workers))).start(timeout=300)
    try:
        tid, key, cid = tl._setup(srv.url)
        rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
        print(json.dumps(rep.summary()))
        os.environ["LIVINGRAG_DB__DATA_DIR"] = data_dir
        from livingrag.config import Settings
        from livingrag.db.engine import Database
        db = Database(Settings().db)
        with db.owner_session() as s:
            rows = [r[0] for r in s.execute(text("SELECT latencies FROM query_log WHERE error IS NULL"))]
        keys = sorted({k for r in rows for k in r})
        for k in keys:
            v = np.array([r[k] for r in rows if k in r])
            print(f"{k:22s} n={len(v):5d} p50={np.percentile(v,50):8.1f} p95={np.percentile(v,95):8.1f} mean={v.mean():8.1f}")
    finally:
        srv.stop()
