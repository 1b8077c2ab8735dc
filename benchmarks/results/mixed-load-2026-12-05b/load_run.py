"""A/B harness: `livingrag serve --workers N` from the source tree ROOT (a git worktree of the
version to measure) on a fresh embedded server in DATADIR, the loopback LLM, 32 clients of one
tenant for SECS seconds via livingrag.api.load.run_load (as `bench api` does), the gate off.

usage: python load_run.py ROOT WORKERS SECS DATADIR   (prints one JSON line)
"""

import json
import sys
from collections.abc import Callable
from pathlib import Path


def run(root: str, workers: int, secs: float, data_dir: str, then: Callable[[], None] | None = None) -> dict:
    """The load's summary; ``then`` runs after the load, while the server still runs."""
    sys.path.insert(0, root)
    import tests.test_api_load as tl
    from livingrag.api.load import run_load
    from livingrag.testing.openai_server import OpenAICompatServer
    from tests.api_support import Server, server_env

    with OpenAICompatServer() as llm:
        env = server_env("", llm.base_url, LIVINGRAG_DB__DATA_DIR=data_dir)
        env.pop("LIVINGRAG_DB__URL")
        log = Path(f"/tmp/lrg-load-server-w{workers}.log")
        srv = Server(env, log_path=log, args=("--workers", str(workers))).start(timeout=300)
        try:
            _, key, cid = tl._setup(srv.url)
            rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
            if then is not None:
                then()
            return rep.summary() | {"workers": workers, "targets": rep.target_checks(), "errors": rep.errors}
        finally:
            srv.stop()


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])))
