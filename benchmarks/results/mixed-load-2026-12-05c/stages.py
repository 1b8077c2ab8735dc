"""bound.py's run, then the per-stage latencies of the answered questions (from `query_log`), the
experiences stored by then and the write-back decisions, read while the server still runs.

usage: python stages.py ASK_BODY_JSON SECS DATADIR
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import tests.test_api_load as tl  # noqa: E402
from livingrag.api.load import run_load  # noqa: E402
from livingrag.testing.openai_server import OpenAICompatServer  # noqa: E402
from tests.api_support import Server, server_env  # noqa: E402


def report(data_dir: str) -> None:
    from sqlalchemy import text

    from livingrag.config import Settings
    from livingrag.db.engine import Database

    os.environ["LIVINGRAG_DB__DATA_DIR"] = data_dir
    db = Database(Settings().db)
    with db.owner_session() as s:
        rows = [r[0] for r in s.execute(text("SELECT latencies FROM query_log WHERE error IS NULL"))]
        print("experiences", s.execute(text("SELECT count(*) FROM experiences")).scalar())
        for d in s.execute(text("SELECT decision, coalesce(reason, ''), count(*) FROM writeback_log GROUP BY 1, 2")):
            print("write-back", *d)
    for k in sorted({k for r in rows for k in r}):
        v = np.array([r[k] for r in rows if k in r])
        p50, p95 = np.percentile(v, 50), np.percentile(v, 95)
        print(f"{k:22s} n={len(v):5d} p50={p50:8.1f} p95={p95:8.1f} mean={v.mean():8.1f}")


if __name__ == "__main__":
    body, secs, data_dir = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    with OpenAICompatServer() as llm:
        env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
        env.pop("LIVINGRAG_DB__URL")
        srv = Server(env, log_path=Path("/tmp/lrg-stages.log"), args=("--workers", "2")).start(timeout=300)
        try:
            _, key, cid = tl._setup(srv.url)
            s = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body=body).summary()
            print(body, s["answered_rps"], s["ask"], s["add"])
            report(data_dir)
        finally:
            srv.stop()
