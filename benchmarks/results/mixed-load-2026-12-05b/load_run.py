"""A/B harness: `livingrag serve --workers N` from the source tree ROOT (a git worktree of the
version to measure) on a fresh embedded server in DATADIR, the loopback LLM, 32 clients of one
tenant for SECS seconds via livingrag.api.load.run_load (as `bench api` does), the gate off.

usage: python load_run.py ROOT WORKERS SECS DATADIR   (prints one JSON line)
"""

import json
import sys
from pathlib import Path

root, workers, secs, data_dir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
sys.path.insert(0, root)

import tests.test_api_load as tl  # noqa: E402
from livingrag.api.load import run_load  # noqa: E402
from livingrag.testing.openai_server import OpenAICompatServer  # noqa: E402
from tests.api_support import Server, server_env  # noqa: E402

with OpenAICompatServer() as llm:
    env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
    env.pop("LIVINGRAG_DB__URL")
    log = Path(f"/tmp/lrg-load-server-w{workers}.log")
    srv = Server(env, log_path=log, args=("--workers", str(workers))).start(timeout=300)
    try:
        tid, key, cid = tl._setup(srv.url)
        rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
        out = rep.summary() | {"workers": workers, "targets": rep.target_checks(), "errors": rep.errors}
        print(json.dumps(out))
    finally:
        srv.stop()
