"""``livingrag serve`` on the embedded database, with two worker processes (the single-process
server runs in the crash and load tests): /health answers 200, a tenant works end to end, and its
in-flight cap and request rate hold over both workers together; ``config show`` masks the admin
key."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from livingrag.testing.openai_server import OpenAICompatServer
from tests.api_support import ADMIN_KEY, ROOT, Server, auth
from tests.corpus_support import CORPUS, QUESTIONS

pytestmark = pytest.mark.db


def _env(data_dir: Path, llm_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    return env | {
        "PYTHONPATH": str(ROOT),
        "LIVINGRAG_DB__DATA_DIR": str(data_dir),
        "LIVINGRAG_LLM__PROVIDER": "openai",
        "LIVINGRAG_LLM__BASE_URL": llm_url,
        "LIVINGRAG_LLM__MODEL": "test",
        "LIVINGRAG_GATES__VERIFIER": "offline",
        "LIVINGRAG_API__ADMIN_KEY": ADMIN_KEY,
    }


BURST = 40


def test_serve_on_the_embedded_database(tmp_path: Path) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="livingrag-test-serve-"))  # not under /root (see DESIGN)
    try:
        with OpenAICompatServer(default_delay_s=1.5) as llm:
            env = _env(data_dir, llm.base_url) | {
                "LIVINGRAG_API__TENANT_MAX_INFLIGHT": "2",
                "LIVINGRAG_API__TENANT_RATE_PER_S": "0.01",
                "LIVINGRAG_API__TENANT_BURST": str(BURST),
            }
            srv = Server(env, log_path=tmp_path / "server.log", args=("--workers", "2"))
            srv.start(timeout=240)
            try:
                for _ in range(6):  # whichever worker answers, it is ready: none takes a connection before
                    health = httpx.get(srv.url + "/health").json()
                    assert health["status"] == "ok" and health["schema_up_to_date"] and health["models"] == "loaded"
                r = httpx.post(srv.url + "/v1/tenants", json={"name": "acme"}, headers=auth(ADMIN_KEY))
                key = r.json()["api_key"]
                cid = httpx.post(srv.url + "/v1/corpora", json={"name": "wiki"}, headers=auth(key)).json()["id"]
                r = httpx.post(
                    srv.url + f"/v1/corpora/{cid}/passages", json={"passages": CORPUS}, headers=auth(key), timeout=120
                )
                assert r.status_code == 201, r.text
                r = httpx.post(
                    srv.url + "/v1/ask", json={"question": QUESTIONS[0][0], "corpus": "wiki"}, headers=auth(key),
                    timeout=60,
                )  # fmt: skip
                assert r.status_code == 200 and r.json()["passages"], r.text
                assert httpx.get(srv.url + "/v1/corpora", headers=auth("lrg_wrong")).status_code == 401
                for _ in range(6):  # whichever worker answers, the tenant sees its corpus
                    listed = httpx.get(srv.url + "/v1/corpora", headers=auth(key)).json()["items"]
                    assert [c["name"] for c in listed] == ["wiki"]
                spent = 9  # the tenant's requests so far, each of which took a token

                def ask(i: int) -> httpx.Response:  # a connection each, so both workers take some
                    body = {"question": f"{QUESTIONS[i % 3][0]} ({i})", "corpus": cid, "mode": "linear"}
                    return httpx.post(srv.url + "/v1/ask", json=body, headers=auth(key), timeout=60)

                with ThreadPoolExecutor(8) as pool:
                    codes = sorted(r.status_code for r in pool.map(ask, range(8)))
                spent += 8
                # The LLM takes 1.5 s: two questions of the tenant in flight over both workers, not two each.
                assert codes == [200, 200] + [429] * 6, codes
                admitted = 0
                while True:  # one bucket for both workers: BURST requests in all (rate 0.01/s adds < 1)
                    r = httpx.get(srv.url + "/v1/corpora", headers=auth(key))
                    if r.status_code == 429:
                        break
                    assert r.status_code == 200, r.text
                    admitted += 1
                    assert spent + admitted <= BURST + 1, "each worker kept its own bucket"
                assert "api.tenant_rate_per_s" in r.json()["error"]["message"]
                assert spent + admitted >= BURST
                assert len(list((data_dir / "run").glob("limits-*"))) == 1  # the workers' shared table
            finally:
                srv.stop()
            assert not list((data_dir / "run").glob("limits-*")), "serve removes its limit table at exit"
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_config_show_masks_the_admin_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {"PYTHONPATH": str(ROOT), "LIVINGRAG_API__ADMIN_KEY": "very-secret-admin-key"}
    out = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "config", "show", "--json"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "very-secret-admin-key" not in out and "admin_key" in out
