"""A real ``livingrag serve`` subprocess on a loopback port, for the tests of the HTTP service and
the load benchmark (``livingrag bench mixed-load``): its environment (a database, the loopback LLM of
:mod:`livingrag.testing.openai_server`, the offline verifier, a known admin key) and its start,
health wait and stop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import livingrag

ADMIN_KEY = "6OkuGdf6IUsXoUDUBh5x6oalC2uO8koyqyumYoGXDCA"  # strong enough for serve (livingrag.api.admin_key)
SOURCE_ROOT = Path(livingrag.__file__).resolve().parents[1]
"""The folder that holds the imported ``livingrag`` package: the server runs the same code."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(database_url: str | None, llm_url: str, **extra: str) -> dict[str, str]:
    """Environment of a ``livingrag serve`` subprocess: this process's environment without its
    ``LIVINGRAG_*`` settings, then the database (``database_url``; None: none, e.g. to give
    ``LIVINGRAG_DB__DATA_DIR`` in ``extra`` for an embedded server), the loopback LLM at
    ``llm_url``, the offline verifier and :data:`ADMIN_KEY`; ``extra`` last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {
        "PYTHONPATH": str(SOURCE_ROOT),
        "LIVINGRAG_LLM__PROVIDER": "openai",
        "LIVINGRAG_LLM__BASE_URL": llm_url,
        "LIVINGRAG_LLM__MODEL": "test",
        "LIVINGRAG_LLM__TIMEOUT_S": "5",
        "LIVINGRAG_LLM__MAX_RETRIES": "0",
        "LIVINGRAG_GATES__VERIFIER": "offline",
        "LIVINGRAG_API__ADMIN_KEY": ADMIN_KEY,
    }
    if database_url is not None:
        env["LIVINGRAG_DB__URL"] = database_url
    return env | extra


class Server:
    """A ``livingrag serve`` subprocess on a loopback port."""

    def __init__(
        self,
        env: dict[str, str],
        port: int | None = None,
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
        cwd: Path = SOURCE_ROOT,
    ) -> None:
        """``cwd``: where it runs; ``python -m`` imports the package found there first (give the
        source tree of the package to serve, with ``PYTHONPATH`` naming it in ``env``)."""
        self.env = env
        self.args = args
        self.cwd = cwd
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> Server:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        cmd = [sys.executable, "-m", "livingrag.cli.main", "serve", "--port", str(self.port), "--log-level", "warning"]
        cmd += self.args
        self.proc = subprocess.Popen(cmd, env=self.env, cwd=self.cwd, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"server not healthy within {timeout} s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@contextmanager
def running_server(env: dict[str, str], log_path: Path | None = None) -> Iterator[Server]:
    srv = Server(env, log_path=log_path).start()
    try:
        yield srv
    finally:
        srv.stop()


__all__ = ["ADMIN_KEY", "SOURCE_ROOT", "Server", "free_port", "running_server", "server_env"]
