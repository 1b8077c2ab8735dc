"""load_run.py, then the per-stage latencies of the answered questions from query_log, read while
the server still runs.

usage: python lat_run.py ROOT WORKERS SECS DATADIR
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_run import run


def stage_latencies(data_dir: str) -> None:
    from sqlalchemy import text

    from livingrag.config import Settings
    from livingrag.db.engine import Database

    os.environ["LIVINGRAG_DB__DATA_DIR"] = data_dir
    db = Database(Settings().db)
    with db.owner_session() as s:
        rows = [r[0] for r in s.execute(text("SELECT latencies FROM query_log WHERE error IS NULL"))]
    for k in sorted({k for r in rows for k in r}):
        v = np.array([r[k] for r in rows if k in r])
        p50, p95 = np.percentile(v, 50), np.percentile(v, 95)
        print(f"{k:22s} n={len(v):5d} p50={p50:8.1f} p95={p95:8.1f} mean={v.mean():8.1f}")


if __name__ == "__main__":
    root, workers, secs, data_dir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    print(json.dumps(run(root, workers, secs, data_dir, then=lambda: stage_latencies(data_dir))))
