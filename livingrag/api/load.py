"""A closed-loop load generator for the HTTP API: N clients asking questions and adding passages.

Used by ``livingrag bench api`` and by the load test. Each client is a thread with its own HTTP
connection; it sends its next request as soon as the previous one returned. Every response is
recorded (kind, status, latency), and the answers' ``query_log_id``s and added ``passage_ids``
are kept so a caller can check that nothing was lost or written twice.
"""

from __future__ import annotations

import threading
import time
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

    def percentile(self, kind: str, q: float) -> float:
        xs = self.latencies_ms.get(kind) or [float("nan")]
        return float(np.percentile(xs, q))

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "clients": self.clients,
            "seconds": round(self.seconds, 1),
            "requests": self.requests,
            "throughput_rps": round(self.requests / self.seconds, 2) if self.seconds else 0.0,
            "statuses": {f"{k} {s}": n for (k, s), n in sorted(self.statuses.items())},
        }
        for kind in sorted(self.latencies_ms):
            out[kind] = {
                "n": len(self.latencies_ms[kind]),
                "p50_ms": round(self.percentile(kind, 50), 1),
                "p95_ms": round(self.percentile(kind, 95), 1),
                "p99_ms": round(self.percentile(kind, 99), 1),
            }
        return out


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

    def record(kind: str, status: int, ms: float, body: Any, sent: str | None) -> None:
        with lock:
            report.statuses[(kind, status)] += 1
            if 200 <= status < 300:
                report.latencies_ms.setdefault(kind, []).append(ms)
                if kind == "ask" and body.get("query_log_id") is not None and body.get("writeback") == "queued":
                    report.query_log_ids.append(int(body["query_log_id"]))
                if kind == "add":
                    report.passage_ids.extend(int(p) for p in body.get("passage_ids", []))
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
                if add_every and (i + n) % add_every == 0:  # clients staggered
                    kind = "add"
                    sent = f"{tag} passage {n}-{i}: Village {n}{i} lies on the river Ostra in the county of Vell."
                    path, body = f"/v1/corpora/{corpus_id}/passages", {"passages": [{"text": sent, "title": sent[:30]}]}
                else:
                    kind = "ask"
                    q = questions[(n + i) % len(questions)]
                    path, body = "/v1/ask", {"question": q, "corpus": corpus_id} | (ask_body or {})
                t = time.perf_counter()
                try:
                    r = http.post(path, json=body)
                    status, payload = r.status_code, (r.json() if r.content else {})
                except httpx.HTTPError as exc:
                    status, payload = 0, {"transport": f"{type(exc).__name__}: {exc}"}
                except ValueError:
                    status, payload = r.status_code, {"raw": r.text[:300]}
                record(kind, status, (time.perf_counter() - t) * 1000.0, payload, sent)
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
