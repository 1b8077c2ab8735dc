"""README's quickstart is true: every ``livingrag`` line of its first block, run as written (a fresh
tenant in place of ``acme``, the test documents in place of ``./my-docs/``, and the ids the earlier
commands printed in place of ``1``), on real PostgreSQL, the packaged models and the loopback
OpenAI-compatible LLM; ``serve`` is left out (the HTTP tests and the browser tests run it)."""

from __future__ import annotations

import json
import re
import shlex
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from livingrag.cli.main import app
from livingrag.testing.openai_server import OpenAICompatServer, qa_reply
from tests.conftest import loopback_llm_env

pytestmark = [pytest.mark.db, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ROOT / "tests" / "data" / "documents"


def quickstart_commands() -> list[list[str]]:
    """The ``livingrag`` command lines of README's first code block after "## Quickstart", without
    their comments, ``serve`` left out."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("## Quickstart") :].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [words[1:] for words in lines if words[:1] == ["livingrag"] and words[1:2] != ["serve"]]


def test_the_quickstart_runs_as_written(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    commands = quickstart_commands()
    assert [c[0] for c in commands] == ["tenant", "index", "ask", "feedback", "admin", "experience"]
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    ids: dict[str, str] = {}
    with OpenAICompatServer(responder=qa_reply) as llm:
        loopback_llm_env(monkeypatch, database_url, llm.base_url, verifier="offline")
        monkeypatch.delenv("LIVINGRAG_TENANT", raising=False)
        for words in commands:
            args = [tenant if w == "acme" else str(DOCUMENTS) if w == "./my-docs/" else w for w in words]
            if args[0] == "feedback":
                args[1] = ids["query"]
            if args[:2] == ["experience", "show"]:
                args[2] = ids["experience"]
            res = CliRunner().invoke(app, args)
            assert res.exit_code == 0, (args, res.output)
            if args[0] == "index":
                assert "4 documents" in res.output or "documents: 4" in res.output, res.output
            if args[0] == "ask":
                ids["query"] = re.findall(r"^query (\d+)", res.output, re.M)[-1]
                assert "Sources:" in res.output and "[1]" in res.output
            if args[0] == "feedback":
                assert "right" in res.output
            if args[0] == "admin":
                listed = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
                assert listed and listed[0]["trust"] == "verified"
                ids["experience"] = str(listed[0]["id"])
            if args[0] == "experience":
                assert "verified" in res.output
