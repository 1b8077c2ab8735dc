"""``livingrag bench mixed-load``: the standard mixed load on a service this command starts itself.

It starts the loopback OpenAI-compatible LLM (:mod:`livingrag.testing.openai_server`) and
``livingrag serve --workers N`` (:mod:`livingrag.testing.server`, the same code this process
imports) on an embedded PostgreSQL in a data directory (a fresh temporary one, removed afterwards,
or one given, e.g. a copy of a kept data directory), then:

- without a corpus given: a new tenant and a corpus of the ten passages of
  :mod:`livingrag.testing.corpus` (what ``tests/api/test_api_load.py`` loads), made through the API;
- with ``tenant_id`` and ``corpus_id``: a new key of that tenant, and that corpus as it is;

and runs :func:`livingrag.bench.http_load.run_load` (closed-loop clients, every ``add_every``-th
request a passage add, the questions with ``ask_body``; by default the gate off, so that every
answer is a write-back candidate). Before stopping the server it reads the corpus's write-back
decisions (``GET /v1/store/health``). The server inherits this process's ``LIVINGRAG_*`` settings
except the database, the LLM and the admin key, which the harness sets; ``server_env`` adds or
overrides variables of the server alone. ``source`` serves another source tree's package (the
harness stays this one), for revisions that predate this command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livingrag.bench.http_load import (
    DEFAULT_QUESTIONS,
    load_result,
    run_load,
    setup_load_tenant,
    tenant_key,
    writeback_figures,
)
from livingrag.testing.corpus import CORPUS
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.testing.server import ADMIN_KEY, SOURCE_ROOT, Server, server_env

# Settings the harness itself gives the server: the caller's values of these are not passed on.
_HARNESS_OWNED = ("LIVINGRAG_DB__URL", "LIVINGRAG_DB__DATA_DIR", "LIVINGRAG_LLM__", "LIVINGRAG_API__ADMIN_KEY")


@dataclass(frozen=True)
class MixedLoadConfig:
    workers: int = 2
    clients: int = 32
    seconds: float = 60.0
    add_every: int = 5
    ask_body: Mapping[str, Any] = field(default_factory=lambda: {"ablations": ["gate"]})
    server_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of the server alone (e.g. ``LIVINGRAG_API__TENANT_MAX_INFLIGHT``)."""
    serve_args: tuple[str, ...] = ()
    """More arguments of ``livingrag serve``."""
    data_dir: Path | None = None
    """The embedded server's data directory (None: a fresh temporary one, removed afterwards)."""
    tenant_id: int | None = None
    corpus_id: int | None = None
    """An existing corpus of ``data_dir`` to load (both, or neither: a new seeded one)."""
    source: Path | None = None
    """Serve the package of this source tree (e.g. a checkout of an older revision) instead of
    the one this process imports."""
    server_log: Path | None = None
    start_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if (self.tenant_id is None) != (self.corpus_id is None):
            raise ValueError("give the tenant id and the corpus id together")
        if self.corpus_id is not None and self.data_dir is None:
            raise ValueError("an existing corpus needs the data directory that holds it")


def harness_env(cfg: MixedLoadConfig, llm_url: str, data_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: :func:`server_env` for an embedded server in ``data_dir``, with
    the ``LIVINGRAG_*`` settings of ``environ`` that the harness does not own, then ``cfg.server_env``."""
    extra = {"LIVINGRAG_DB__DATA_DIR": str(data_dir.resolve())}
    if cfg.source is not None:
        extra["PYTHONPATH"] = str(cfg.source.resolve())
    extra |= {k: v for k, v in environ.items() if k.startswith("LIVINGRAG_") and not k.startswith(_HARNESS_OWNED)}
    return server_env(None, llm_url, **(extra | dict(cfg.server_env)))


def run_mixed_load(cfg: MixedLoadConfig, *, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """One run (module docstring); returns :func:`load_result`'s figures, the write-back
    decisions (``writeback``) and the settings of the run."""
    temporary = cfg.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="lrg-mixed-load-")) if cfg.data_dir is None else cfg.data_dir
    try:
        with OpenAICompatServer(record=False) as llm:
            env = harness_env(cfg, llm.base_url, data_dir, os.environ)
            args = ("--workers", str(cfg.workers), *cfg.serve_args)
            progress(f"starting livingrag serve {' '.join(args)} on {'a fresh' if temporary else 'the'} data directory")
            cwd = SOURCE_ROOT if cfg.source is None else cfg.source.resolve()
            srv = Server(env, log_path=cfg.server_log, args=args, cwd=cwd).start(timeout=cfg.start_timeout_s)
            try:
                if cfg.tenant_id is None or cfg.corpus_id is None:
                    _, key, cid = setup_load_tenant(srv.url, ADMIN_KEY, CORPUS)
                else:
                    key, cid = tenant_key(srv.url, ADMIN_KEY, cfg.tenant_id), cfg.corpus_id
                progress(f"{cfg.clients} clients for {cfg.seconds:g} s on corpus {cid}")
                report = run_load(
                    srv.url, key, cid, clients=cfg.clients, seconds=cfg.seconds, add_every=cfg.add_every,
                    questions=DEFAULT_QUESTIONS, ask_body=dict(cfg.ask_body),
                )  # fmt: skip
                writeback = writeback_figures(srv.url, key, cid) | {"queued": len(report.query_log_ids)}
                if cfg.corpus_id is None:  # a new corpus: every decision is this load's
                    decided = sum(writeback[k] for k in ("stored", "rejected_novelty", "rejected_grounding"))
                    writeback["undecided_or_dropped"] = max(0, writeback["queued"] - decided)
            finally:
                srv.stop()
    finally:
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    return load_result(report) | {
        "writeback": writeback,
        "settings": {
            "workers": cfg.workers,
            "add_every": cfg.add_every,
            "ask_body": dict(cfg.ask_body),
            "server_env": dict(cfg.server_env),
            "serve_args": list(cfg.serve_args),
            "source": None if cfg.source is None else str(cfg.source),
            "corpus": "seeded" if cfg.corpus_id is None else {"tenant_id": cfg.tenant_id, "corpus_id": cfg.corpus_id},
        },
    }


def format_writeback(writeback: Mapping[str, int]) -> str:
    """The ``writeback`` figures of :func:`run_mixed_load` as a line of text."""
    line = (
        f"write-back by the end of the load: {writeback['queued']} answers queued; in the corpus "
        f"{writeback['stored']} stored, {writeback['rejected_novelty']} + {writeback['rejected_grounding']} "
        f"rejected (novelty + grounding), {writeback['experiences']} experiences"
    )
    if "undecided_or_dropped" in writeback:
        line += f"; {writeback['undecided_or_dropped']} answers undecided or dropped (a full queue)"
    return line


__all__ = ["MixedLoadConfig", "format_writeback", "harness_env", "run_mixed_load"]
