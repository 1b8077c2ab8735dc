"""A closed-loop load generator for the HTTP API: N clients asking questions and adding passages.

Used by ``livingrag bench api``, ``livingrag bench mixed-load`` and the load tests. Each client is a
thread with its own HTTP connection; it sends its next request as soon as the previous one
returned. Every response is recorded (kind, status, latency, the stages the server timed), and the
answers' ``query_log_id``s and added ``passage_ids`` are kept so a caller can check that nothing
was lost or written twice. It imports nothing of the package: it measures a service over HTTP.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

DEFAULT_QUESTIONS = (
    "Where was the director of Silver Harbor born?",
    "In which town was the author of The Glass Orchard born?",
    "Who founded the Aurora Quartet?",
    "Which engineer built the harbour of Brevik?",
)


@dataclass
class LoadReport:
    """What a load run measured."""

    clients: int
    seconds: float
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    query_log_ids: list[int] = field(default_factory=list)
    passage_ids: list[int] = field(default_factory=list)
    added_texts: list[str] = field(default_factory=list)
    add_versions: set[int] = field(default_factory=set)
    """Corpus versions the passage adds answered with: each is one indexing run (a group commit)."""
    stages_ms: dict[str, list[float]] = field(default_factory=dict)
    """``<kind>.<stage>`` -> durations the server timed: passage adds send theirs in a
    ``Server-Timing`` header (wait, index, its phases, graph), answers in their body's
    ``latency_ms`` (the pipeline's stages: encode, match, retrieve, llm, ..., total)."""

    def percentile(self, kind: str, q: float) -> float:
        xs = self.latencies_ms.get(kind) or [float("nan")]
        return float(np.percentile(xs, q))

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def answered(self) -> int:
        """Requests answered 2xx."""
        return sum(n for (_, status), n in self.statuses.items() if 200 <= status < 300)

    def server_errors(self) -> int:
        """Answers 5xx and transport failures (status 0)."""
        return sum(n for (_, status), n in self.statuses.items() if status >= 500 or status == 0)

    def target_checks(self) -> list[tuple[str, float, bool]]:
        """The mixed-load targets of issue 21 (32 clients, 60 s, loopback LLM): answered requests
        >= 50 /s, ask p95 <= 250 ms, passage add p95 <= 1 s, no 5xx; (name, measured, met) each."""
        rps = self.answered / self.seconds if self.seconds else 0.0
        ask, add = self.percentile("ask", 95), self.percentile("add", 95)
        return [
            (">= 50 answered requests/s", round(rps, 2), rps >= 50),
            ("ask p95 <= 250 ms", round(ask, 1), ask <= 250),
            ("passage add p95 <= 1000 ms", round(add, 1), add <= 1000),
            ("no 5xx or transport error", float(self.server_errors()), self.server_errors() == 0),
        ]

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "clients": self.clients,
            "seconds": round(self.seconds, 1),
            "requests": self.requests,
            "throughput_rps": round(self.requests / self.seconds, 2) if self.seconds else 0.0,
            "answered_rps": round(self.answered / self.seconds, 2) if self.seconds else 0.0,
            "statuses": {f"{k} {s}": n for (k, s), n in sorted(self.statuses.items())},
        }
        for kind in sorted(self.latencies_ms):
            out[kind] = {
                "n": len(self.latencies_ms[kind]),
                "p50_ms": round(self.percentile(kind, 50), 1),
                "p95_ms": round(self.percentile(kind, 95), 1),
                "p99_ms": round(self.percentile(kind, 99), 1),
            }
        if self.add_versions:
            out["add_runs"] = len(self.add_versions)
        if self.stages_ms:
            out["stages_ms"] = {
                name: {
                    "n": len(xs),
                    "p50": round(float(np.percentile(xs, 50)), 1),
                    "p95": round(float(np.percentile(xs, 95)), 1),
                }
                for name, xs in sorted(self.stages_ms.items())
            }
        return out


def load_result(report: LoadReport) -> dict[str, Any]:
    """What ``bench api`` and ``bench mixed-load`` print: the summary, the errors and the targets."""
    return report.summary() | {
        "errors": report.errors,
        "targets": [{"target": name, "measured": value, "met": met} for name, value, met in report.target_checks()],
    }


def format_result(result: dict[str, Any], *, add_every: int) -> str:
    """:func:`load_result` as lines of text."""
    lines = [
        f"{result['requests']} requests in {result['seconds']} s from {result['clients']} clients "
        f"({result['throughput_rps']} req/s; {result['answered_rps']} answered 2xx /s), "
        f"a passage add every {add_every} requests per client"
    ]
    for kind in ("ask", "add"):
        if kind in result:
            k = result[kind]
            lines.append(f"{kind:4} n={k['n']:6}  p50 {k['p50_ms']:8.1f} ms  p95 {k['p95_ms']:8.1f} ms  "
                         f"p99 {k['p99_ms']:8.1f} ms")  # fmt: skip
    if "add_runs" in result:
        lines.append(f"passage adds committed in {result['add_runs']} indexing runs (group commits)")
    stages = result.get("stages_ms", {})
    if stages:
        lines.append(
            "stages (timed by the server: the adds' Server-Timing, the answers' latency_ms; ms p50/p95): "
            + ", ".join(f"{name} {v['p50']:g}/{v['p95']:g}" for name, v in stages.items())
        )
    lines.append("statuses: " + ", ".join(f"{k}: {v}" for k, v in result["statuses"].items()))
    lines.append(
        "targets (issue 21, measured at 32 clients for 60 s): "
        + "; ".join(f"{t['target']}: {t['measured']:g} {'met' if t['met'] else 'MISSED'}" for t in result["targets"])
    )
    lines += [f"error: {e}" for e in result["errors"]]
    return "\n".join(lines)


def parse_server_timing(header: str) -> dict[str, float]:
    """``name;dur=ms, ...`` (a ``Server-Timing`` value) -> {name: ms}; metrics without a
    duration, or with one that is not a number, are left out."""
    out: dict[str, float] = {}
    for metric in header.split(","):
        name, _, params = metric.strip().partition(";")
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if name and key == "dur":
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
    return out


def _body_latencies(body: Any) -> dict[str, float]:
    """An answer's ``latency_ms`` (stage -> ms); {} for a body without one."""
    lat = body.get("latency_ms") if isinstance(body, dict) else None
    if not isinstance(lat, dict):
        return {}
    return {str(k): float(v) for k, v in lat.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def run_load(
    url: str,
    key: str,
    corpus_id: int,
    *,
    clients: int = 32,
    seconds: float = 60.0,
    add_every: int = 5,
    questions: Sequence[str] = DEFAULT_QUESTIONS,
    ask_body: dict[str, Any] | None = None,
    timeout_s: float = 60.0,
    tag: str = "load",
) -> LoadReport:
    """Run ``clients`` clients for ``seconds``; every ``add_every``-th request of a client adds a
    passage (0: never), the others ask. Latencies count successful (2xx) requests only."""
    report = LoadReport(clients=clients, seconds=seconds)
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {key}"}

    def record(kind: str, status: int, ms: float, body: Any, sent: str | None, timing: str | None = None) -> None:
        with lock:
            report.statuses[(kind, status)] += 1
            if 200 <= status < 300:
                report.latencies_ms.setdefault(kind, []).append(ms)
                for stage, dur in (parse_server_timing(timing or "") | _body_latencies(body)).items():
                    report.stages_ms.setdefault(f"{kind}.{stage}", []).append(dur)
                if kind == "ask" and body.get("query_log_id") is not None and body.get("writeback") == "queued":
                    report.query_log_ids.append(int(body["query_log_id"]))
                if kind == "add":
                    report.passage_ids.extend(int(p) for p in body.get("passage_ids", []))
                    if body.get("version") is not None:
                        report.add_versions.add(int(body["version"]))
                    if sent is not None:
                        report.added_texts.append(sent)
            elif status not in (429, 503) and len(report.errors) < 20:
                report.errors.append(f"{kind} {status}: {str(body)[:300]}")

    def client(n: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=timeout_s) as http:
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                sent = None
                body: dict[str, object]
                if add_every and (i + n) % add_every == 0:  # clients staggered
                    kind = "add"
                    sent = f"{tag} passage {n}-{i}: Village {n}{i} lies on the river Ostra in the county of Vell."
                    path, body = f"/v1/corpora/{corpus_id}/passages", {"passages": [{"text": sent, "title": sent[:30]}]}
                else:
                    kind = "ask"
                    q = questions[(n + i) % len(questions)]
                    path, body = "/v1/ask", {"question": q, "corpus": corpus_id} | (ask_body or {})
                t = time.perf_counter()
                timing = None
                try:
                    r = http.post(path, json=body)
                    timing = r.headers.get("server-timing")
                    status, payload = r.status_code, (r.json() if r.content else {})
                except httpx.HTTPError as exc:
                    status, payload = 0, {"transport": f"{type(exc).__name__}: {exc}"}
                except ValueError:
                    status, payload = r.status_code, {"raw": r.text[:300]}
                record(kind, status, (time.perf_counter() - t) * 1000.0, payload, sent, timing)
                if status in (0, 429, 503):
                    time.sleep(0.05)  # back off a little, as a polite client does

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,), name=f"load-{n}", daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout_s + 30)
    report.seconds = time.monotonic() - t0
    return report


def setup_load_tenant(
    url: str, admin_key: str, passages: Sequence[dict[str, str]], *, name: str = "load"
) -> tuple[int, str, int]:
    """Through the API: a new tenant (``name`` and a random suffix) with the admin key, a corpus
    ``wiki`` of it holding ``passages``; returns (tenant id, its API key, corpus id)."""
    admin = {"Authorization": f"Bearer {admin_key}"}
    r = httpx.post(url + "/v1/tenants", json={"name": f"{name}-{uuid.uuid4().hex[:8]}"}, headers=admin)
    if r.status_code != 201:
        raise RuntimeError(f"creating the load tenant: {r.status_code} {r.text[:300]}")
    tid, key = int(r.json()["id"]), str(r.json()["api_key"])
    auth = {"Authorization": f"Bearer {key}"}
    r = httpx.post(url + "/v1/corpora", json={"name": "wiki"}, headers=auth)
    if r.status_code != 201:
        raise RuntimeError(f"creating the load corpus: {r.status_code} {r.text[:300]}")
    cid = int(r.json()["id"])
    r = httpx.post(url + f"/v1/corpora/{cid}/passages", json={"passages": list(passages)}, headers=auth, timeout=300)
    if r.status_code != 201:
        raise RuntimeError(f"adding the load corpus's passages: {r.status_code} {r.text[:300]}")
    return tid, key, cid


def tenant_key(url: str, admin_key: str, tenant_id: int, *, name: str = "load") -> str:
    """A new API key (read, write, admin scopes) of an existing tenant, made with the admin key."""
    r = httpx.post(
        url + f"/v1/tenants/{tenant_id}/keys",
        json={"name": name, "scopes": ["read", "write", "admin"]},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    if r.status_code != 201:
        raise RuntimeError(f"a key of tenant {tenant_id}: {r.status_code} {r.text[:300]}")
    return str(r.json()["key"])


def writeback_figures(url: str, key: str, corpus_id: int) -> dict[str, int]:
    """The corpus's write-back decisions so far (``GET /v1/store/health``): stored, rejected by
    the novelty or the grounding gate, and the experiences it holds."""
    r = httpx.get(url + "/v1/store/health", params={"corpus_id": corpus_id}, headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    body = r.json()
    out = {
        name: sum(int(day.get(name) or 0) for day in body.get("gates", []))
        for name in ("stored", "rejected_novelty", "rejected_grounding")
    }
    out["experiences"] = sum(int(c.get("experiences") or 0) for c in body.get("corpora", []))
    return out


def _post(http: httpx.Client, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST and decode: (status, JSON body); status 0 for a transport failure."""
    try:
        r = http.post(path, json=body)
    except httpx.HTTPError as exc:
        return 0, {"transport": f"{type(exc).__name__}: {exc}"}
    try:
        return r.status_code, (r.json() if r.content else {})
    except ValueError:
        return r.status_code, {"raw": r.text[:300]}


def _record(report: LoadReport, lock: threading.Lock, kind: str, status: int, ms: float, body: Any) -> None:
    with lock:
        report.statuses[(kind, status)] += 1
        if 200 <= status < 300:
            report.latencies_ms.setdefault(kind, []).append(ms)
        elif status not in (429,) and len(report.errors) < 20:
            report.errors.append(f"{kind} {status}: {str(body)[:300]}")


def steady_asker(
    url: str,
    key: str,
    corpus_id: int,
    *,
    rate_per_s: float,
    seconds: float,
    questions: Sequence[str] = DEFAULT_QUESTIONS,
    ask_body: dict[str, Any] | None = None,
    timeout_s: float = 60.0,
) -> LoadReport:
    """One client asking at a steady ``rate_per_s`` (open loop: the k-th question is sent at
    ``k / rate_per_s`` s, or as soon as the previous one returned when it is late) for ``seconds``.
    Only 429 is an expected refusal here; any other non-2xx is an error."""
    report = LoadReport(clients=1, seconds=seconds)
    lock = threading.Lock()
    t0 = time.monotonic()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s) as http:
        k = 0
        while (due := t0 + k / rate_per_s) < t0 + seconds:
            time.sleep(max(0.0, due - time.monotonic()))
            body = {"question": questions[k % len(questions)], "corpus": corpus_id} | (ask_body or {})
            t = time.perf_counter()
            status, payload = _post(http, "/v1/ask", body)
            _record(report, lock, "ask", status, (time.perf_counter() - t) * 1000.0, payload)
            k += 1
    report.seconds = time.monotonic() - t0
    return report


def flood(
    url: str,
    key: str,
    corpus_id: int,
    *,
    ask_clients: int,
    index_clients: int,
    seconds: float,
    questions: Sequence[str] = DEFAULT_QUESTIONS,
    ask_body: dict[str, Any] | None = None,
    job_documents: int = 3,
    timeout_s: float = 60.0,
    backoff_s: float = 0.2,
    tag: str = "flood",
) -> LoadReport:
    """One tenant flooding for ``seconds`` from closed-loop clients without pause: ``ask_clients``
    ask questions (kind ``ask``), ``index_clients`` alternate an index job of ``job_documents``
    new documents (``job``) and a passage add (``add``). 429 is an expected refusal, after which a
    client waits ``backoff_s`` (it does not read ``Retry-After``)."""
    report = LoadReport(clients=ask_clients + index_clients, seconds=seconds)
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def request(n: int, i: int, asking: bool) -> tuple[str, str, dict[str, Any]]:
        if asking:
            q = questions[(n + i) % len(questions)]
            return "ask", "/v1/ask", {"question": q, "corpus": corpus_id} | (ask_body or {})
        if i % 2 == 0:
            docs = [
                {"title": f"{tag} {n}-{i}-{j}", "text": f"{tag} town {n}{i}{j} lies by the lake Vessa in Orm."}
                for j in range(job_documents)
            ]
            return "job", f"/v1/corpora/{corpus_id}/index-jobs", {"documents": docs}
        text = f"{tag} passage {n}-{i}: the mill {n}{i} stands on the river Ostra."
        return "add", f"/v1/corpora/{corpus_id}/passages", {"passages": [{"title": text[:30], "text": text}]}

    def client(n: int, asking: bool) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s) as http:
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                kind, path, body = request(n, i, asking)
                t = time.perf_counter()
                status, payload = _post(http, path, body)
                _record(report, lock, kind, status, (time.perf_counter() - t) * 1000.0, payload)
                if status in (0, 429):
                    time.sleep(backoff_s)

    t0 = time.monotonic()
    roles = [True] * ask_clients + [False] * index_clients
    threads = [
        threading.Thread(target=client, args=(n, asking), name=f"flood-{n}", daemon=True)
        for n, asking in enumerate(roles)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + timeout_s + 30)
    report.seconds = time.monotonic() - t0
    return report


@dataclass
class TwoTenantReport:
    """Tenant B asking at a steady rate, alone (``unloaded``) and while tenant A floods
    (``loaded``, A's own requests in ``flood``)."""

    unloaded: LoadReport
    loaded: LoadReport
    flood: LoadReport

    @property
    def p95_ratio(self) -> float:
        """B's loaded p95 over its unloaded p95."""
        return self.loaded.percentile("ask", 95) / self.unloaded.percentile("ask", 95)

    def summary(self) -> dict[str, Any]:
        return {
            "b_unloaded": self.unloaded.summary(),
            "b_loaded": self.loaded.summary(),
            "a_flood": self.flood.summary(),
            "b_p95_ratio": round(self.p95_ratio, 2),
        }


def run_two_tenants(
    url: str,
    flooder: tuple[str, int],
    asker: tuple[str, int],
    *,
    seconds: float = 20.0,
    flood_ask_clients: int = 8,
    flood_index_clients: int = 4,
    asker_rate_per_s: float = 4.0,
    asker_body: dict[str, Any] | None = None,
    flood_body: dict[str, Any] | None = None,
) -> TwoTenantReport:
    """Fairness between two tenants, each given as (API key, corpus id): B (``asker``) asks at
    ``asker_rate_per_s`` for ``seconds`` alone, then for ``seconds`` more while A (``flooder``)
    floods questions from ``flood_ask_clients`` clients and index jobs and passage adds from
    ``flood_index_clients`` (:func:`flood`)."""
    b_key, b_corpus = asker
    a_key, a_corpus = flooder
    unloaded = steady_asker(url, b_key, b_corpus, rate_per_s=asker_rate_per_s, seconds=seconds, ask_body=asker_body)
    out: dict[str, LoadReport] = {}
    flooding = threading.Thread(
        target=lambda: out.setdefault(
            "a",
            flood(
                url,
                a_key,
                a_corpus,
                ask_clients=flood_ask_clients,
                index_clients=flood_index_clients,
                seconds=seconds + 1.0,
                ask_body=flood_body,
            ),
        ),
        name="flooder",
        daemon=True,
    )
    flooding.start()
    time.sleep(1.0)  # A is flooding before B's loaded phase starts
    loaded = steady_asker(url, b_key, b_corpus, rate_per_s=asker_rate_per_s, seconds=seconds, ask_body=asker_body)
    flooding.join(seconds + 120)
    return TwoTenantReport(unloaded=unloaded, loaded=loaded, flood=out["a"])
