"""``livingrag doctor``: its pure checks, its output and exit status, and real failures it must name
(a missing model file, an unreachable database, an LLM process that crashes at start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from livingrag import diagnostics
from livingrag.cli.main import app
from livingrag.config import DBSettings, get_settings
from livingrag.db import migrate
from livingrag.db.engine import Database
from livingrag.diagnostics import (
    CHECK_NAMES,
    Check,
    all_passed,
    check_cpu,
    check_data_dir,
    check_python,
    check_runtime,
    llm_fix,
    one_line,
    run_checks,
    schema_verdict,
)
from livingrag.errors import ConfigError, LLMError, LLMTimeout, LLMUnavailable, ModelUnavailable
from livingrag.generation.providers.cpu_support import REQUIRED_CPU_FLAGS, cpu_refusal, read_cpu_flags
from livingrag.testing.openai_server import OpenAICompatServer

runner = CliRunner()
UNREACHABLE_URL = "postgresql+psycopg://u:p@127.0.0.1:9/x"
CPU_REFUSED = cpu_refusal(read_cpu_flags()) is not None


def doctor(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["doctor", *args])
    return res.exit_code, res.output


def doctor_json(*args: str) -> tuple[int, dict[str, Any]]:
    res = runner.invoke(app, ["doctor", "--json", *args])
    return res.exit_code, json.loads(res.stdout)


def line_of(output: str, name: str) -> str:
    """The output line of check ``name`` (its status, name and detail)."""
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("ok", "fail", "skip") and parts[1] == name:
            return line
    raise AssertionError(f"no line for check {name!r} in:\n{output}")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("LIVINGRAG_DB__DATA_DIR", str(path))
    return path


# -- pure parts ------------------------------------------------------------------------------------


def test_python_version_check() -> None:
    assert check_python((3, 11, 0), "/x/python").status == "ok"
    assert check_python((3, 13, 1), "/x/python").detail == "Python 3.13.1 at /x/python"
    old = check_python((3, 10, 14), "/x/python")
    assert old.status == "fail" and "3.10.14" in old.detail and "3.11" in old.detail
    assert old.fix and "scripts/install.sh" in old.fix
    assert check_python().status == "ok"  # this interpreter


def test_cpu_check() -> None:
    assert check_cpu("openai", frozenset()).status == "skip"
    assert check_cpu("local", None, "aarch64").status == "skip"
    ok = check_cpu("local", frozenset(REQUIRED_CPU_FLAGS) | {"sse4_2"}, "x86_64")
    assert ok.status == "ok" and "AVX2" in ok.detail and ok.fix is None
    bad = check_cpu("local", frozenset({"avx", "sse4_2"}), "x86_64")
    assert bad.status == "fail" and "AVX2" in bad.detail and "BMI2" in bad.detail
    assert bad.fix and "LIVINGRAG_LLM__PROVIDER=openai" in bad.fix and "LIVINGRAG_LLM__BASE_URL" in bad.fix


def test_data_dir_check(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "b"
    ok = check_data_dir(fresh)
    assert ok.status == "ok" and "created" in ok.detail and "GiB free" in ok.detail
    assert fresh.is_dir() and not list(fresh.iterdir())  # the probe file is gone
    assert "created" not in check_data_dir(fresh).detail
    afile = tmp_path / "file"
    afile.write_text("x")
    assert check_data_dir(afile).status == "fail"
    below = check_data_dir(afile / "sub")
    assert below.status == "fail" and "cannot create" in below.detail
    assert below.fix and "LIVINGRAG_DB__DATA_DIR" in below.fix
    full = check_data_dir(fresh, min_free_bytes=1 << 62)
    assert full.status == "fail" and "GiB" in full.detail and full.fix
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        assert check_data_dir(locked).status == "fail"


def test_schema_verdict() -> None:
    assert schema_verdict("0007", "0007", embedded=False, known=True)[0] == "ok"
    status, detail, fix = schema_verdict("0005", "0007", embedded=False, known=True)
    assert status == "fail" and "0005" in detail and "0007" in detail and fix and "livingrag db upgrade" in fix
    status, detail, fix = schema_verdict(None, "0007", embedded=False, known=True)
    assert status == "fail" and "no livingrag schema" in detail and fix and "livingrag db upgrade" in fix
    # livingrag upgrades the embedded database itself on first use: behind is not a failure there
    status, detail, fix = schema_verdict(None, "0007", embedded=True, known=True)
    assert status == "ok" and "first use" in detail and fix is None
    status, detail, fix = schema_verdict("9999", "0007", embedded=True, known=False)
    assert status == "fail" and "newer" in detail and fix


def test_llm_fix_names_the_remedy() -> None:
    missing = ModelUnavailable("unknown local model '/x.gguf' (LIVINGRAG_LLM__MODEL)")
    assert "LIVINGRAG_LLM__MODEL" in llm_fix(missing, "local") and "livingrag doctor" in llm_fix(missing, "local")
    cpu = ModelUnavailable("local model m: this CPU lacks AVX2, which ...")
    assert "LIVINGRAG_LLM__PROVIDER=openai" in llm_fix(cpu, "local")
    crash = LLMUnavailable("the local model process ended with SIGSEGV (segmentation fault)")
    assert "bash scripts/install.sh" in llm_fix(crash, "local") and "LIVINGRAG_LLM__BASE_URL" in llm_fix(crash, "local")
    assert "LIVINGRAG_LLM__TIMEOUT_S (now 120 s)" in llm_fix(LLMTimeout("slow"), "local", timeout_s=120.0)
    assert "LIVINGRAG_LLM__BASE_URL" in llm_fix(LLMUnavailable("could not connect"), "openai")
    assert "LIVINGRAG_LLM__API_KEY" in llm_fix(LLMError("server answered HTTP 401: refused"), "openai")
    assert "LIVINGRAG_LLM__MODEL" in llm_fix(LLMError("server answered HTTP 404: no such model"), "openai")
    assert "LIVINGRAG_LLM__BASE_URL" in llm_fix(ConfigError("llm.provider=openai needs ..."), "openai")


def test_runtime_check_reads_the_inspection(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = get_settings(llm={"provider": "local"})
    replies: list[subprocess.CompletedProcess[str]] = []
    monkeypatch.setattr(diagnostics.subprocess, "run", lambda *_a, **_k: replies.pop(0))

    def reply(code: int, stdout: str = "", stderr: str = "") -> None:
        replies.append(subprocess.CompletedProcess([], code, stdout, stderr))

    reply(1, json.dumps({"ok": False, "version": "0.3.36", "problems": ["compiled with AMX_INT8", "no record"]}))
    bad = check_runtime(settings)
    assert bad.status == "fail" and "AMX_INT8; no record" in bad.detail and bad.fix == "bash scripts/install.sh"
    reply(-4, "", "some output\nthe last line")  # the native library crashed the inspection
    crashed = check_runtime(settings)
    assert crashed.status == "fail" and "SIGILL" in crashed.detail and "the last line" in crashed.detail
    reply(0, json.dumps({"ok": True, "version": "0.3.36", "provenance": "portable build", "problems": []}))
    assert check_runtime(settings).status == "ok"
    assert check_runtime(get_settings(llm={"provider": "openai"})).status == "skip"


def test_one_line_and_tallies() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    long = one_line("start " + "x" * 1000 + " end", limit=100)
    assert len(long) <= 100 and long.startswith("start") and long.endswith("end") and " ... " in long
    ok, skip, fail = Check("a", "ok", ""), Check("b", "skip", ""), Check("c", "fail", "", "fix")
    assert all_passed([ok, skip]) and not all_passed([ok, fail])
    assert fail.as_dict() == {"name": "c", "status": "fail", "detail": "", "fix": "fix", "seconds": 0.0}
    with pytest.raises(ValueError, match="unknown check nope"):
        list(run_checks(only=["nope"]))


# -- the command -------------------------------------------------------------------------------------


def test_unexpected_exception_is_a_fail_line_and_the_others_run(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: object, **_k: object) -> Check:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(diagnostics, "check_cpu", boom)
    code, out = doctor("--only", "python,settings,cpu", "--only", "data_dir")
    assert code == 1, out
    assert "fail" in line_of(out, "cpu") and "unexpected ZeroDivisionError: division by zero" in out
    assert "livingrag -v doctor" in out and "Traceback" not in out
    assert line_of(out, "data_dir").startswith("ok") and str(data_dir) in out
    assert [ln.split()[1] for ln in out.splitlines() if ln.split()[:1] in (["ok"], ["fail"], ["skip"])] == [
        "python",
        "settings",
        "cpu",
        "data_dir",
    ]


def test_invalid_settings_fail_and_the_rest_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__POOL_SIZE", "0")
    code, data = doctor_json("--skip-llm")
    assert code == 1
    by = {c["name"]: c for c in data["checks"]}
    assert data["ok"] is False and by["python"]["status"] == "ok"
    assert by["settings"]["status"] == "fail" and "LIVINGRAG_DB__POOL_SIZE" in by["settings"]["detail"]
    assert by["settings"]["fix"] and "livingrag config show" in by["settings"]["fix"]
    assert {by[n]["status"] for n in CHECK_NAMES if n not in ("python", "settings", "llm")} == {"skip"}
    assert "llm" not in by


def test_unknown_check_name_is_a_usage_error() -> None:
    code, out = doctor("--only", "databse")
    assert code == 2 and "unknown check databse" in out and "schema" in out
    # the installed entry point too: a usage error, not a traceback
    proc = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "doctor", "--skip", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "unknown check nope" in proc.stderr and "Traceback" not in proc.stderr


def test_exit_status_of_the_entry_point(tmp_path: Path) -> None:
    env = {**os.environ, "LIVINGRAG_DB__DATA_DIR": str(tmp_path / "data")}
    run = [sys.executable, "-m", "livingrag.cli.main", "doctor"]
    passed = subprocess.run([*run, "--only", "python,data_dir"], env=env, capture_output=True, timeout=120)
    assert passed.returncode == 0, passed
    env["LIVINGRAG_LLM__POOL"] = "1"  # an unknown setting: the settings check fails
    failed = subprocess.run([*run, "--only", "python,settings"], env=env, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and "LIVINGRAG_LLM__POOL" in failed.stdout, failed


@pytest.mark.skipif(CPU_REFUSED, reason="this CPU cannot run the local model at all")
def test_missing_model_file_fails_the_llm_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_LLM__PROVIDER", "local")
    monkeypatch.setenv("LIVINGRAG_LLM__MODEL", "/nonexistent/model.gguf")
    code, out = doctor("--only", "llm")
    assert code == 1, out
    line = line_of(out, "llm")
    assert line.startswith("fail") and "/nonexistent/model.gguf" in line
    assert "fix:" in out and "LIVINGRAG_LLM__MODEL" in out.split("fix:", 1)[1]


def test_unreachable_database_fails_fast(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", UNREACHABLE_URL)
    started = time.monotonic()
    code, out = doctor("--skip", "runtime,embedding,ner", "--skip-llm")
    took = time.monotonic() - started
    assert code == 1, out
    line = line_of(out, "database")
    assert line.startswith("fail") and "127.0.0.1" in line and ":p@" not in out  # the password stays masked
    assert "LIVINGRAG_DB__URL" in out and "Traceback" not in out
    assert line_of(out, "schema").startswith("skip")
    assert line_of(out, "data_dir").startswith("ok")  # the checks after it still ran... and before it
    assert took < 15, f"doctor took {took:.1f} s against a refused connection"


def test_unroutable_database_respects_the_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", "postgresql+psycopg://u:p@192.0.2.1:5432/x")  # TEST-NET-1
    started = time.monotonic()
    code, out = doctor("--only", "database,schema", "--connect-timeout", "2")
    took = time.monotonic() - started
    assert code == 1 and line_of(out, "database").startswith("fail")
    assert took < 20, f"doctor took {took:.1f} s with --connect-timeout 2"


def test_openai_provider_llm_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_LLM__PROVIDER", "openai")
    monkeypatch.setenv("LIVINGRAG_LLM__MODEL", "loopback")
    with OpenAICompatServer() as server:
        monkeypatch.setenv("LIVINGRAG_LLM__BASE_URL", server.base_url)
        code, out = doctor("--only", "cpu,runtime,llm")
    assert code == 0, out
    assert line_of(out, "cpu").startswith("skip") and line_of(out, "runtime").startswith("skip")
    line = line_of(out, "llm")
    assert line.startswith("ok") and "openai:loopback" in line and server.base_url in line
    assert "all checks passed" in out
    monkeypatch.setenv("LIVINGRAG_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    code, out = doctor("--only", "llm")
    assert code == 1 and line_of(out, "llm").startswith("fail")
    assert "start the server, or correct LIVINGRAG_LLM__BASE_URL" in out


@pytest.mark.db
def test_database_and_schema_at_head(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    code, out = doctor("--only", "database,schema")
    assert code == 0, out
    assert "pgvector" in line_of(out, "database") and "at head" in line_of(out, "schema")


@pytest.mark.db
def test_external_database_without_schema_fails_and_is_not_migrated(
    make_database_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = make_database_url()
    monkeypatch.setenv("LIVINGRAG_DB__URL", url)
    code, out = doctor("--only", "schema")
    assert code == 1, out
    assert "no livingrag schema" in line_of(out, "schema") and "livingrag db upgrade" in out
    db = Database(DBSettings(url=SecretStr(url)))
    try:
        assert migrate.status(db).current is None  # doctor did not migrate it
    finally:
        db.dispose()


# -- the whole install (real models, the real local LLM) -------------------------------------------


@pytest.mark.slow
@pytest.mark.db
def test_doctor_passes_on_this_install(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVINGRAG_DB__URL", database_url)
    code, data = doctor_json()
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert code == 0 and data["ok"] is True and not failed, json.dumps(failed, indent=2)
    assert [c["name"] for c in data["checks"]] == list(CHECK_NAMES)
    by = {c["name"]: c for c in data["checks"]}
    assert by["embedding"]["status"] == "ok" and "dimensions" in by["embedding"]["detail"]
    assert by["ner"]["status"] == "ok" and "Warsaw" in by["ner"]["detail"]
    assert by["llm"]["status"] in ("ok", "skip") and all(c["seconds"] >= 0 for c in data["checks"])


@pytest.mark.slow
@pytest.mark.skipif(CPU_REFUSED, reason="this CPU cannot run the local model at all")
def test_llm_process_that_crashes_at_start_is_named(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        'import os, signal\nif "LIVINGRAG_LLM_CHILD_TOKEN" in os.environ:\n    os.kill(os.getpid(), signal.SIGSEGV)\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVINGRAG_")}
    env |= {"PYTHONPATH": str(hook), "LIVINGRAG_LLM__PROVIDER": "local"}
    probe = subprocess.run(
        [sys.executable, "-c", "import sitecustomize; print(sitecustomize.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0 and probe.stdout.strip() == str(hook / "sitecustomize.py"), probe
    proc = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "doctor", "--only", "python,llm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert line_of(out, "python").startswith("ok")  # the doctor process itself was not hit
    line = line_of(out, "llm")
    assert line.startswith("fail") and "SIGSEGV" in line, out
    assert "bash scripts/install.sh" in out and "Traceback" not in out
