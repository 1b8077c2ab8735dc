"""One mixed-load run (32 clients, SECS seconds, an add every 5th request, loopback LLM, `serve
--workers 2`) against an existing corpus in a copy of a data directory (e.g. 2Wiki's 6,127 passages).

usage: python bound_corpus.py SRC_ROOT DATADIR SECS TENANT_ID CORPUS_ID   (prints one JSON line)
SRC_ROOT is the source tree whose `livingrag serve` runs (before / after)."""

import json
import os
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from livingrag.api.load import run_load  # noqa: E402
from livingrag.testing.openai_server import OpenAICompatServer  # noqa: E402
from tests.api_support import ADMIN_KEY, Server, auth, server_env  # noqa: E402

if __name__ == "__main__":
    data_dir, secs, tid, cid = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    with OpenAICompatServer() as llm:
        env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
        env.pop("LIVINGRAG_DB__URL")
        extra_args = tuple(os.environ.get("BOUND_SERVE_ARGS", "").split())
        srv = Server(env, log_path=Path(os.environ.get("BOUND_LOG", "/tmp/lrg-bound-corpus.log")), args=("--workers", "2", *extra_args)).start(timeout=300)
        try:
            r = httpx.post(
                srv.url + f"/v1/tenants/{tid}/keys",
                json={"name": "load", "scopes": ["read", "write", "admin"]},
                headers=auth(ADMIN_KEY),
            )
            assert r.status_code == 201, r.text
            key = r.json()["key"]
            rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
            print(json.dumps(rep.summary() | {"targets": rep.target_checks()}))
        finally:
            srv.stop()
