"""Every command stops the embedded PostgreSQL it started (issue 42, item 8): each command runs in a
subprocess on a fresh data directory (the embedded server is initialised, restarted once with its
memory settings, used) and, once it has exited, no postmaster of that directory is left running,
whether the command succeeded, failed after the server started, or was interrupted (Ctrl-C,
SIGTERM). A server that another process still holds is left running for it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from livingrag.testing.openai_server import OpenAICompatServer, Step, qa_reply

pytestmark = [pytest.mark.db, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "eval"
TIMEOUT_S = 300

# The cheapest arguments that make each command start the embedded server, use it and exit 0.
COMMANDS: dict[str, list[str]] = {
    "corpus list": ["corpus", "list"],
    "bench retrieval": [
        "bench",
        "retrieval",
        "--dataset",
        "musique",
        "--data-dir",
        str(FIXTURES / "musique" / "musique_mini.json"),
        "--limit",
        "1",
        "--quiet",
        "--json",
    ],
    "bench store": [
        "bench",
        "store",
        "--experiences",
        "20",
        "--tenants",
        "1",
        "--queries",
        "2",
        "--writers",
        "1",
        "--writes",
        "1",
        "--warmup",
        "0",
        "--no-scope-indexes",
        "--json",
    ],
    "demo": ["demo", "--limit", "1", "--no-feedback", "--json"],
    "eval stream": [
        "eval",
        "stream",
        "--dataset",
        "jsonl",
        "--data-dir",
        str(FIXTURES / "generic"),
        "--out",
        "{run}",
        "--limit",
        "1",
        "--systems",
        "linear",
        "--quiet",
    ],
}


def _postmasters(root: Path) -> list[psutil.Process]:
    """The live PostgreSQL processes whose command line names a path under ``root`` (the postmaster:
    its ``-D <pgdata>``; its children retitle themselves and die with it)."""
    found = []
    for p in psutil.process_iter(["name", "cmdline", "status"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE or not (p.info["name"] or "").startswith("postgres"):
            continue
        if any(str(root) in arg for arg in p.info["cmdline"] or ()):
            found.append(p)
    return found


def _left_running(root: Path, grace_s: float = 5.0) -> list[psutil.Process]:
    """The postmasters of ``root`` still running after a short grace (a server that is being stopped
    goes within it; a forgotten one stays)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = _postmasters(root)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.fixture
def root() -> Iterator[Path]:
    """A fresh folder under the temporary directory: ``data`` is the command's data directory."""
    d = Path(tempfile.mkdtemp(prefix="lrg-servers-", dir=tempfile.gettempdir()))
    yield d
    for p in _postmasters(d):  # a server this test's command left behind (the failure being tested)
        p.terminate()
    psutil.wait_procs(_postmasters(d), timeout=15)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(responder=qa_reply, record=False) as server:
        yield server


def _env(root: Path, llm: OpenAICompatServer) -> dict[str, str]:
    """The environment of a command: the embedded server in ``root/data`` (no external URL), the
    loopback LLM."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LIVINGRAG_DB__", "LIVINGRAG_LLM__", "LIVINGRAG_GATES__")) and k != "LIVINGRAG_TENANT"
    }
    env.update(
        {
            "LIVINGRAG_DB__DATA_DIR": str(root / "data"),
            "LIVINGRAG_LLM__PROVIDER": "openai",
            "LIVINGRAG_LLM__BASE_URL": llm.base_url,
            "LIVINGRAG_LLM__API_KEY": "test-key",
            "LIVINGRAG_LLM__MODEL": "loopback",
            "LIVINGRAG_LLM__MAX_RETRIES": "0",
            "LIVINGRAG_GATES__VERIFIER": "none",
        }
    )
    return env


def _command(args: list[str], root: Path) -> list[str]:
    return [sys.executable, "-m", "livingrag.cli.main", *(a.replace("{run}", str(root / "run")) for a in args)]


def _run(args: list[str], root: Path, llm: OpenAICompatServer) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(args, root), env=_env(root, llm), cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def _served(root: Path) -> bool:
    """Whether an embedded server ran in ``root/data`` (its log says it accepted connections)."""
    log = root / "data" / "pgdata" / "log"
    return log.exists() and "ready to accept connections" in log.read_text(errors="replace")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_stops_the_embedded_server_it_started(name: str, root: Path, llm: OpenAICompatServer) -> None:
    res = _run(COMMANDS[name], root, llm)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _served(root), "the command did not start the embedded server"
    left = _left_running(root)
    assert not left, f"`livingrag {name}` left its embedded server running: {[p.pid for p in left]}"


def test_a_command_that_fails_after_the_server_started_stops_it(root: Path, llm: OpenAICompatServer) -> None:
    res = _run(["retrieve", "who directed it?", "--corpus", "no-such-corpus"], root, llm)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "no-such-corpus" in res.stderr
    assert _served(root)
    assert not _left_running(root), "a failed command left its embedded server running"


# Ctrl-C and SIGTERM end a command by that signal, once its cleanups ran (a shell reports 130 / 143)
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, -signal.SIGTERM)])
def test_an_interrupted_command_stops_the_server(
    sig: signal.Signals, code: int, root: Path, llm: OpenAICompatServer
) -> None:
    """Ctrl-C (or SIGTERM) while the demo works on its database: it exits, its server with it. The
    LLM answers slowly here, so that the demo is surely still at work when the signal comes."""
    llm.default = Step(delay_s=5.0)
    proc = subprocess.Popen(
        _command(["demo", "--no-feedback"], root),
        # a test run started in the background by a non-interactive shell inherits SIGINT ignored,
        # and Python then keeps it ignored: Ctrl-C is the default again in the command under test
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        env=_env(root, llm),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:  # the demo prints this once its database is open and migrated
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "indexing the demo corpus" in line:
                break
        assert seen and "indexing the demo corpus" in seen[-1], "".join(seen)[-3000:]
        assert _postmasters(root), "the server is not running while the demo works"
        assert proc.poll() is None, "the demo ended before it could be interrupted"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        llm.default = Step()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == code, err[-3000:]
    assert not _left_running(root), f"the demo stopped by {sig.name} left its embedded server running"


_HOLDER = """
import sys
from livingrag.db.embedded import start_embedded
server = start_embedded(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
server.stop()
"""


def test_a_command_leaves_running_a_server_another_process_holds(root: Path, llm: OpenAICompatServer) -> None:
    """Another process (a `serve`, a long evaluation) holds the data directory's server: a command
    that used it in the meantime leaves it running; it stops when its last holder lets it go."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(root / "data")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "ready"
        before = [p.pid for p in _postmasters(root)]
        assert len(before) == 1
        res = _run(["corpus", "list"], root, llm)
        assert res.returncode == 0, res.stderr[-3000:]
        assert [p.pid for p in _postmasters(root)] == before, "the command stopped a server another process holds"
        handles = json.loads((root / "data" / "pgdata" / ".handle_pids.json").read_text())
        assert handles == [holder.pid]
        holder.stdin.close()
        assert holder.wait(60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
    assert not _left_running(root), "the server outlived its last holder"


_FORGETFUL = """
import os, sys
from livingrag.cli.common import command_scope
from livingrag.config import DBSettings
from livingrag.db.engine import Database
try:
    with command_scope():
        db = Database(DBSettings(data_dir=sys.argv[1]))  # never closed
        with db.owner_engine.connect():
            pass
        raise RuntimeError("the command failed")
except RuntimeError:
    pass
os._exit(0)  # no exit hooks: only the scope can have stopped the server
"""


def test_the_command_scope_stops_a_server_a_command_forgot(root: Path) -> None:
    """The one mechanism every command runs in (``livingrag.cli.main``): a database a command never
    closed, on an error, still has its server stopped when the command ends."""
    res = subprocess.run(
        [sys.executable, "-c", _FORGETFUL, str(root / "data")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _served(root)
    assert not _left_running(root), "the command scope left a forgotten server running"


_CTRL_C = """
import os, signal, sys, time
from livingrag.cli.common import command_scope
signal.signal(signal.SIGINT, signal.default_int_handler)
how = sys.argv[1]
with command_scope():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
    except KeyboardInterrupt as exc:
        if how == "exit":  # what typer makes of it: Exit(130), which livingrag.cli.main exits with
            raise SystemExit(130) from exc
        if how == "raised":
            raise
print("went on")
"""


@pytest.mark.parametrize(
    ("how", "code", "out"),
    [("handled", 0, "went on\n"), ("exit", -signal.SIGINT, ""), ("raised", -signal.SIGINT, "")],
)
def test_a_ctrl_c_ends_the_process_by_sigint_unless_the_command_handled_it(how: str, code: int, out: str) -> None:
    """The scope ends a command that Ctrl-C ended by SIGINT, also when the interrupt became an exit
    status on its way out (never a status that depends on where the interrupt landed); a command
    that caught its KeyboardInterrupt goes on and exits 0."""
    res = subprocess.run([sys.executable, "-c", _CTRL_C, how], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (code, out), res.stderr[-3000:]
