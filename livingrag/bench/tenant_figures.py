"""How ``livingrag bench store`` sizes its tenants and the per-tenant figures it reports (pure).

Sizes: ``none`` splits the experiences equally; ``zipf`` gives tenant ``t`` (0-based, largest
first) a share proportional to ``1 / (t + 1) ** s``, every tenant at least one experience.

Figures (issue 21, target 3): each tenant's match p50/p95 and top-K agreement over its own
queries; the median-sized tenant (the tenant at the median of the sizes: tenants sorted by size
ascending, ties by index, the one at position ``(T - 1) // 2``, i.e. the lower middle one for an
even count) and the largest; agreement per size decile (tenants sorted by size ascending, split
into 10 groups of as equal a count as possible; one group per tenant with fewer than 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from livingrag.bench.stats import percentile

SKEWS = ("none", "zipf")
MEDIAN_P50_TARGET_MS = 5.0
LARGEST_P50_TARGET_MS = 10.0
DECILE_AGREEMENT_TARGET = 0.99


def tenant_counts(n: int, tenants: int, skew: str = "none", s: float = 1.0) -> list[int]:
    """The experiences of each of ``tenants`` tenants, summing to exactly ``n``.

    ``none``: ``n // tenants`` each, the first ``n % tenants`` tenants one more. ``zipf``: the
    largest-remainder rounding of the quotas ``n * w_t / sum(w)`` with ``w_t = 1 / (t + 1) ** s``
    (remainder ties to the lower index), then every tenant left with none takes one from the
    largest tenant (the last of equally large ones), so the counts never increase with ``t``.
    """
    if tenants < 1 or n < tenants:
        raise ValueError(f"need at least one experience per tenant (experiences {n}, tenants {tenants})")
    if skew not in SKEWS:
        raise ValueError(f"unknown skew {skew!r}: use one of {', '.join(SKEWS)}")
    if skew == "none":
        return [n // tenants + (1 if t < n % tenants else 0) for t in range(tenants)]
    if not math.isfinite(s) or s < 0:
        raise ValueError(f"the zipf exponent must be a finite number >= 0, not {s}")
    w = 1.0 / np.arange(1, tenants + 1, dtype=np.float64) ** s
    quota = n * w / w.sum()
    counts = np.floor(quota).astype(np.int64)
    left = n - int(counts.sum())
    order = sorted(range(tenants), key=lambda t: (-(quota[t] - counts[t]), t))
    for t in order[:left]:
        counts[t] += 1
    for t in range(tenants):
        if counts[t] == 0:
            big = int(np.flatnonzero(counts == counts.max())[-1])
            counts[big] -= 1
            counts[t] = 1
    return [int(c) for c in counts]


def size_groups(sizes: Sequence[int], groups: int = 10) -> list[list[int]]:
    """Tenant indices sorted by size ascending (ties by index) in ``min(groups, len(sizes))``
    consecutive groups whose counts differ by at most one (the larger groups first)."""
    order = sorted(range(len(sizes)), key=lambda t: (sizes[t], t))
    return [list(map(int, g)) for g in np.array_split(np.asarray(order, dtype=np.int64), min(groups, len(sizes)))]


def _mean(values: Sequence[float]) -> float:
    return round(float(np.mean(values)), 4) if len(values) else float("nan")


def tenant_figures(
    sizes: Sequence[int], tenant_of: Sequence[int], latency_ms: Sequence[float], agreement: Sequence[float]
) -> dict[str, Any]:
    """Per-tenant match figures from the timed queries (``tenant_of[i]``: the tenant of query
    ``i``, whose latency and top-K agreement are ``latency_ms[i]`` and ``agreement[i]``): every
    tenant's size, queries, p50/p95 and mean agreement; the median-sized and the largest tenant;
    agreement (and p50) per size decile; and whether issue 21's target 3 is met (p50 <= 5 ms for
    the median tenant, <= 10 ms for the largest, agreement >= 0.99 in every decile)."""
    if not (len(tenant_of) == len(latency_ms) == len(agreement)):
        raise ValueError("tenant_of, latency_ms and agreement must have one entry per query")
    lat: list[list[float]] = [[] for _ in sizes]
    agr: list[list[float]] = [[] for _ in sizes]
    for t, ms, a in zip(tenant_of, latency_ms, agreement, strict=True):
        lat[t].append(float(ms))
        agr[t].append(float(a))
    per = [
        {
            "tenant": t,
            "experiences": int(sizes[t]),
            "queries": len(lat[t]),
            "match_ms_p50": percentile(lat[t], 50, empty=float("nan")),
            "match_ms_p95": percentile(lat[t], 95, empty=float("nan")),
            "topk_agreement": _mean(agr[t]),
        }
        for t in range(len(sizes))
    ]
    by_size = sorted(range(len(sizes)), key=lambda t: (sizes[t], t))
    median = per[by_size[(len(sizes) - 1) // 2]]
    largest = per[by_size[-1]]
    deciles = []
    for i, g in enumerate(size_groups(sizes)):
        group_ms = [x for t in g for x in lat[t]]
        deciles.append(
            {
                "group": i + 1,
                "tenants": len(g),
                "experiences_min": int(min(sizes[t] for t in g)),
                "experiences_max": int(max(sizes[t] for t in g)),
                "queries": len(group_ms),
                "match_ms_p50": percentile(group_ms, 50, empty=float("nan")),
                "topk_agreement": _mean([x for t in g for x in agr[t]]),
            }
        )
    lowest = min((d["topk_agreement"] for d in deciles), default=float("nan"))
    # NaN (a tenant or decile without queries) never meets a target
    return {
        "per_tenant": per,
        "median_tenant": median,
        "largest_tenant": largest,
        "agreement_by_size_decile": deciles,
        "targets": {
            "median_tenant_p50_ms": median["match_ms_p50"],
            "median_tenant_p50_met": bool(median["match_ms_p50"] <= MEDIAN_P50_TARGET_MS),
            "largest_tenant_p50_ms": largest["match_ms_p50"],
            "largest_tenant_p50_met": bool(largest["match_ms_p50"] <= LARGEST_P50_TARGET_MS),
            "lowest_decile_agreement": lowest,
            "decile_agreement_met": bool(all(d["topk_agreement"] >= DECILE_AGREEMENT_TARGET for d in deciles)),
        },
    }


def format_tenant_figures(fig: dict[str, Any], *, list_tenants: bool) -> list[str]:
    """The lines ``format_report`` prints for :func:`tenant_figures` (every tenant's own line
    only with ``list_tenants``)."""
    m, big, tg = fig["median_tenant"], fig["largest_tenant"], fig["targets"]
    lines = [
        f"median-sized tenant  #{m['tenant']} ({m['experiences']:,} experiences, the tenant at the median of the "
        f"sizes): p50 {m['match_ms_p50']} ms, p95 {m['match_ms_p95']} ms ({m['queries']} queries)",
        f"largest tenant       #{big['tenant']} ({big['experiences']:,} experiences): p50 {big['match_ms_p50']} ms, "
        f"p95 {big['match_ms_p95']} ms ({big['queries']} queries)",
        "agreement by size decile (tenants sorted by size, smallest first):",
    ]
    for d in fig["agreement_by_size_decile"]:
        lines.append(
            f"  {d['group']:>2}: {d['tenants']} tenants of {d['experiences_min']:,}-{d['experiences_max']:,}: "
            f"agreement {d['topk_agreement']}, p50 {d['match_ms_p50']} ms ({d['queries']} queries)"
        )
    if list_tenants:
        lines.append("per tenant:")
        for p in fig["per_tenant"]:
            lines.append(
                f"  #{p['tenant']}: {p['experiences']:,} experiences: p50 {p['match_ms_p50']} ms, p95 "
                f"{p['match_ms_p95']} ms, agreement {p['topk_agreement']} ({p['queries']} queries)"
            )
    else:
        lines.append("per tenant: in the --json report (per_tenant)")

    def met(ok: bool) -> str:
        return "met" if ok else "MISSED"

    lines.append(
        "targets (issue 21, target 3): "
        f"median tenant p50 {tg['median_tenant_p50_ms']} ms <= {MEDIAN_P50_TARGET_MS:g} ms: "
        f"{met(tg['median_tenant_p50_met'])}; "
        f"largest tenant p50 {tg['largest_tenant_p50_ms']} ms <= {LARGEST_P50_TARGET_MS:g} ms: "
        f"{met(tg['largest_tenant_p50_met'])}; "
        f"agreement >= {DECILE_AGREEMENT_TARGET} in each decile (lowest {tg['lowest_decile_agreement']}): "
        f"{met(tg['decile_agreement_met'])}"
    )
    return lines


__all__ = [
    "DECILE_AGREEMENT_TARGET",
    "LARGEST_P50_TARGET_MS",
    "MEDIAN_P50_TARGET_MS",
    "SKEWS",
    "format_tenant_figures",
    "size_groups",
    "tenant_counts",
    "tenant_figures",
]
