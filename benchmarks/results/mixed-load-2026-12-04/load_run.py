"""A/B harness: livingrag serve --workers N on the embedded server (data dir given), loopback LLM,
32 clients of one tenant for SECS seconds via livingrag.api.load.run_load (as bench api does)."""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, "/work/main")
from tests.api_support import Server, server_env
import tests.test_api_load as tl
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.api.load import run_load

workers, secs, data_dir = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
with OpenAICompatServer() as llm:
    env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
    env.pop("LIVINGRAG_DB__URL")
    srv = Server(env, log_path=Path(f"/work/runs/load/server-w{workers}.log"), args=("--workers", str(workers))).start(timeout=300)
    try:
        tid, key, cid = tl._setup(srv.url)
        rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
        out = rep.summary() | {"workers": workers, "targets": rep.target_checks(), "errors": rep.errors}
        print(json.dumps(out))
    finally:
        srv.stop()
