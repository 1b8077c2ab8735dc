"""One run of the standard mixed load (32 clients, 60 s, an add every 5th request, the loopback
LLM, `serve --workers 2` on a fresh embedded server) with a chosen ask body and server environment.

usage: python bound.py ASK_BODY_JSON SECS DATADIR [SERVER_ENV_JSON]   (prints one JSON line)

e.g. '{"mode": "linear"}' (no experience machinery at all), '{"ablations": ["gate"]}' (the load of
`tests/test_api_load.py`), and that with '{"LIVINGRAG_API__WRITEBACK_QUEUE_SIZE": "1"}' (almost
every write-back candidate dropped, so the write-back's cost is nearly gone).
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import tests.test_api_load as tl  # noqa: E402
from livingrag.api.load import run_load  # noqa: E402
from livingrag.testing.openai_server import OpenAICompatServer  # noqa: E402
from tests.api_support import Server, server_env  # noqa: E402

if __name__ == "__main__":
    body, secs, data_dir = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with OpenAICompatServer() as llm:
        env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir, **extra)
        env.pop("LIVINGRAG_DB__URL")
        srv = Server(env, log_path=Path("/tmp/lrg-bound.log"), args=("--workers", "2")).start(timeout=300)
        try:
            _, key, cid = tl._setup(srv.url)
            rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body=body)
            print(json.dumps(rep.summary() | {"body": body, "targets": rep.target_checks(), "extra": extra}))
        finally:
            srv.stop()
