"""``livingrag bench api --compare-standby``: the same load on the primary alone and with the
questions' reads on a streaming standby, in one run, and what each costs the primary.

It starts the loopback OpenAI-compatible LLM (:mod:`livingrag.testing.openai_server`), then in a
fresh temporary data directory two ``livingrag serve`` (:mod:`livingrag.testing.server`) on one
embedded PostgreSQL: ``primary`` (no read URL) and ``standby`` (``LIVINGRAG_DB__READ_URLS`` naming
a hot standby of that server, made with :func:`livingrag.db.standby.create_standby`). A tenant and
a corpus of the ten passages of :mod:`livingrag.testing.corpus` are made through the first; both
services answer for them. Then the same closed-loop load (:func:`livingrag.bench.http_load.run_load`:
``clients`` clients for ``seconds``, every ``add_every``-th request a passage add) runs against each
in turn, ``rounds`` times, in the order primary, standby, then standby, primary, ... (so that
neither always meets the larger corpus and store that the earlier runs leave).

During each run the CPU time of three process trees is read from ``/proc`` (psutil): the primary's
postmaster and its backends (the ones that ended included, through the postmaster's reaped-children
times), the standby's, and the service's. Each arm reports its answered questions, rates and
latencies, the standby's share of the reads (``/health``), and the primary's CPU per answered
question, the figure read replicas are for; both services and both servers run on this machine, so
the CPU figures of one run are comparable with each other, not with another machine's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from livingrag.bench.http_load import DEFAULT_QUESTIONS, run_load, setup_load_tenant
from livingrag.db.embedded import start_embedded
from livingrag.db.standby import create_standby, stop_standby
from livingrag.testing.corpus import CORPUS
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.testing.server import ADMIN_KEY, SOURCE_ROOT, Server, server_env

ARMS = ("primary", "standby")
# Settings the harness gives the services itself: the caller's values of these are not passed on.
_HARNESS_OWNED = ("LIVINGRAG_DB__", "LIVINGRAG_LLM__", "LIVINGRAG_API__ADMIN_KEY")


@dataclass(frozen=True)
class ReplicaLoadConfig:
    clients: int = 16
    seconds: float = 30.0
    add_every: int = 5
    rounds: int = 1
    """Pairs of runs (primary then standby, then standby then primary, ...)."""
    workers: int = 1
    """``livingrag serve --workers`` of each service."""
    ask_body: Mapping[str, Any] = field(default_factory=lambda: {"ablations": ["gate"]})
    server_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of both services (e.g. ``LIVINGRAG_DB__MAX_REPLICA_LAG_MS``)."""
    server_log: Path | None = None
    start_timeout_s: float = 300.0


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its descendants, the ended ones that it
    reaped included (a PostgreSQL postmaster reaps its backends)."""
    try:
        root = psutil.Process(pid)
        t = root.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        children = root.children(recursive=True)
    except psutil.Error:
        return 0.0
    for child in children:
        try:
            ct = child.cpu_times()
        except psutil.Error:  # ended meanwhile: its time is in its parent's reaped-children times now
            continue
        total += ct.user + ct.system
    return float(total)


def postmaster_pid(pgdata: Path) -> int:
    """The pid ``pgdata/postmaster.pid`` names."""
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _standby_reads(url: str) -> tuple[int, dict[str, int]]:
    """Reads the service's standbys answered so far, and those it sent to the primary by reason
    (``/health``'s ``replicas`` and ``reads_on_primary``)."""
    body = httpx.get(url + "/health", timeout=10).json()
    return sum(int(r.get("reads") or 0) for r in body.get("replicas", [])), dict(body.get("reads_on_primary") or {})


def _arm_figures(arm: str, report: Any, cpu: Mapping[str, float]) -> dict[str, Any]:
    """One run's figures: answers, rates, latencies, CPU seconds and CPU ms per answered question."""
    asks = report.latencies_ms.get("ask", [])
    answered = sum(n for (kind, status), n in report.statuses.items() if kind == "ask" and 200 <= status < 300)
    out: dict[str, Any] = {
        "arm": arm,
        "answered_questions": answered,
        "answered_rps": round(report.answered / report.seconds, 2) if report.seconds else 0.0,
        "ask_p50_ms": round(float(np.percentile(asks, 50)), 1) if asks else None,
        "ask_p95_ms": round(float(np.percentile(asks, 95)), 1) if asks else None,
        "add_p95_ms": round(report.percentile("add", 95), 1) if report.latencies_ms.get("add") else None,
        "server_errors": report.server_errors(),
        "requests": report.requests,
    }
    for name, seconds in cpu.items():
        out[f"{name}_cpu_s"] = round(seconds, 2)
        out[f"{name}_cpu_ms_per_answer"] = round(1000.0 * seconds / answered, 2) if answered else None
    out["ask_stages_p50_ms"] = {
        name.removeprefix("ask."): round(float(np.percentile(xs, 50)), 1)
        for name, xs in sorted(report.stages_ms.items())
        if name.startswith("ask.") and xs
    }
    return out


def run_replica_comparison(
    cfg: ReplicaLoadConfig, *, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """One run (module docstring): each arm's figures per round, their means, and the standby arm's
    primary CPU per answered question over the primary arm's."""
    root = Path(tempfile.mkdtemp(prefix="lrg-replica-load-"))
    data_dir, standby_dir = root / "primary", root / "standby"
    servers: dict[str, Server] = {}
    runs: list[dict[str, Any]] = []
    held = None
    try:
        with OpenAICompatServer(record=False) as llm:
            own = {
                k: v for k, v in os.environ.items() if k.startswith("LIVINGRAG_") and not k.startswith(_HARNESS_OWNED)
            }
            extra = own | {"LIVINGRAG_DB__DATA_DIR": str(data_dir)} | dict(cfg.server_env)
            env = server_env(None, llm.base_url, **extra)
            args = ("--workers", str(cfg.workers))
            progress("starting the service on the primary alone (and the embedded server)")
            servers["primary"] = Server(env, log_path=cfg.server_log, args=args, cwd=SOURCE_ROOT).start(
                timeout=cfg.start_timeout_s
            )
            _, key, cid = setup_load_tenant(servers["primary"].url, ADMIN_KEY, CORPUS)
            held = start_embedded(data_dir, cleanup_mode="stop")  # keeps the primary up until the end
            progress(f"making a standby of it in {standby_dir} (pg_basebackup)")
            standby = create_standby(held.url, standby_dir)
            read_env = env | {"LIVINGRAG_DB__READ_URLS": standby.url()}
            progress("starting the service that reads from the standby")
            servers["standby"] = Server(read_env, log_path=cfg.server_log, args=args, cwd=SOURCE_ROOT).start(
                timeout=cfg.start_timeout_s
            )
            trees = {"primary": postmaster_pid(held.pgdata), "standby": postmaster_pid(standby.pgdata)}
            for r in range(cfg.rounds):
                for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
                    srv = servers[arm]
                    assert srv.proc is not None
                    pids = trees | {"service": srv.proc.pid}
                    reads0 = _standby_reads(srv.url) if arm == "standby" else None
                    cpu0 = {name: process_tree_cpu_s(pid) for name, pid in pids.items()}
                    progress(f"round {r + 1}, {arm}: {cfg.clients} clients for {cfg.seconds:g} s")
                    report = run_load(
                        srv.url, key, cid, clients=cfg.clients, seconds=cfg.seconds, add_every=cfg.add_every,
                        questions=DEFAULT_QUESTIONS, ask_body=dict(cfg.ask_body),
                    )  # fmt: skip
                    cpu = {name: process_tree_cpu_s(pid) - cpu0[name] for name, pid in pids.items()}
                    figures = _arm_figures(arm, report, cpu) | {"round": r + 1}
                    if reads0 is not None:
                        reads1 = _standby_reads(srv.url)
                        figures["standby_reads"] = reads1[0] - reads0[0]
                        figures["reads_on_primary"] = {k: v - reads0[1].get(k, 0) for k, v in reads1[1].items()}
                    runs.append(figures)
    finally:
        for srv in servers.values():
            srv.stop()
        if held is not None:
            held.stop()
        stop_standby(standby_dir)
        shutil.rmtree(root, ignore_errors=True)
    means = {arm: _means([x for x in runs if x["arm"] == arm]) for arm in ARMS}
    ratios = {
        k: round(means["standby"][k] / v, 3)
        for k, v in means["primary"].items()
        if isinstance(v, float) and v and means["standby"].get(k) is not None
    }
    settings = {
        "clients": cfg.clients,
        "seconds": cfg.seconds,
        "add_every": cfg.add_every,
        "rounds": cfg.rounds,
        "workers": cfg.workers,
        "ask_body": dict(cfg.ask_body),
        "server_env": dict(cfg.server_env),
        "cpus": os.cpu_count(),
    }
    return {"runs": runs, "means": means, "standby_over_primary": ratios, "settings": settings}


def _means(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each number over ``runs`` (one arm's)."""
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and k != "round"]
    out: dict[str, Any] = {}
    for k in keys:
        xs = [float(x[k]) for x in runs if x.get(k) is not None]
        out[k] = round(sum(xs) / len(xs), 2) if xs else None
    return out


def format_comparison(result: Mapping[str, Any]) -> str:
    """:func:`run_replica_comparison`'s result as lines of text."""
    lines = []
    for run in result["runs"]:
        lines.append(
            f"round {run['round']} {run['arm']:>7}: {run['answered_questions']} questions answered "
            f"({run['answered_rps']} answered req/s), ask p50 {run['ask_p50_ms']} ms p95 {run['ask_p95_ms']} ms, "
            f"add p95 {run['add_p95_ms']} ms, {run['server_errors']} server errors; CPU per answered question: "
            f"primary {run['primary_cpu_ms_per_answer']} ms, standby {run['standby_cpu_ms_per_answer']} ms, "
            f"service {run['service_cpu_ms_per_answer']} ms"
            + (f"; standby reads {run['standby_reads']}" if "standby_reads" in run else "")
            + (f", on the primary {run['reads_on_primary']}" if run.get("reads_on_primary") else "")
        )
    ratio = result["standby_over_primary"]
    lines.append(
        "standby arm / primary arm (means): primary CPU per answered question "
        f"{ratio.get('primary_cpu_ms_per_answer')}, answered req/s {ratio.get('answered_rps')}, "
        f"ask p95 {ratio.get('ask_p95_ms')}, service CPU per answered question {ratio.get('service_cpu_ms_per_answer')}"
    )
    return "\n".join(lines)


__all__ = ["ReplicaLoadConfig", "format_comparison", "postmaster_pid", "process_tree_cpu_s", "run_replica_comparison"]
