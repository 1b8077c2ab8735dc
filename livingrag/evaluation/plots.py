"""PNG figures of a stream run (the paper's figures 2, 3, 8 and 9), drawn with matplotlib's Agg canvas.

Every figure plots per-segment values along the stream. The first 10 % of the stream is split into
finer segments and drawn wider ("expanded"), as in the paper, because the store starts empty and the
start-up stage differs from the rest. With several orders, each segment pools the records of every
order at those stream positions.

No pyplot state is used (``Figure`` + ``FigureCanvasAgg``), so drawing is safe in any thread and never
needs a display.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from livingrag.evaluation.records import DECISION_STORED, QueryRecord
from livingrag.evaluation.reuse import gs_checked, ns_passed

HEAD_FRACTION = 0.1
HEAD_WIDTH = 0.3  # share of the x axis given to the first 10 % of the stream
LINEAR_COLOR = "#1f77b4"
LIVING_COLOR = "#ff7f0e"
DPI = 120

Runs = Sequence[Sequence[QueryRecord]]


def stream_segments(
    n: int, *, head_fraction: float = HEAD_FRACTION, head_segments: int = 5, tail_segments: int = 18
) -> list[tuple[int, int]]:
    """Half-open position ranges: the first ``head_fraction`` of ``n`` in ``head_segments`` parts, the
    rest in ``tail_segments`` parts (fewer when there are fewer positions; never an empty one)."""
    if n <= 0:
        return []
    h = min(n, max(1, round(n * head_fraction)))

    def split(a: int, b: int, k: int) -> list[tuple[int, int]]:
        k = max(1, min(k, b - a))
        edges = [a + round(i * (b - a) / k) for i in range(k + 1)]
        return [(edges[i], edges[i + 1]) for i in range(k) if edges[i + 1] > edges[i]]

    return split(0, h, head_segments) + (split(h, n, tail_segments) if n > h else [])


class StreamAxis:
    """Maps stream positions to x so that the first 10 % takes ``HEAD_WIDTH`` of the axis."""

    def __init__(self, n: int, head_fraction: float = HEAD_FRACTION) -> None:
        self.n = max(n, 1)
        self.h = min(self.n, max(1, round(self.n * head_fraction)))

    def x(self, p: float) -> float:
        if self.h >= self.n:
            return p / self.n
        if p <= self.h:
            return HEAD_WIDTH * p / self.h
        return HEAD_WIDTH + (1 - HEAD_WIDTH) * (p - self.h) / (self.n - self.h)

    def decorate(self, ax: Axes) -> None:
        ticks = sorted({0, self.h, *(self.h + round(f * (self.n - self.h)) for f in (0.25, 0.5, 0.75, 1.0))})
        ax.set_xticks([self.x(t) for t in ticks])
        ax.set_xticklabels([str(t) for t in ticks])
        ax.set_xlim(0, 1)
        ax.set_xlabel("stream position (query index)")
        if self.h < self.n:
            ax.axvspan(0, HEAD_WIDTH, color="0.93", zorder=0)
            ax.axvline(HEAD_WIDTH, color="0.6", lw=0.8, ls="--", zorder=1)
            ax.text(
                HEAD_WIDTH / 2,
                0.02,
                "first 10 % of the stream (expanded)",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=8,
                color="0.3",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5},
            )


def _length(runs: Runs) -> int:
    return max((r.position + 1 for run in runs for r in run), default=0)


def _pooled(runs: Runs, segments: list[tuple[int, int]]) -> list[list[QueryRecord]]:
    out: list[list[QueryRecord]] = [[] for _ in segments]
    starts = np.array([a for a, _ in segments])
    for run in runs:
        for r in run:
            i = int(np.searchsorted(starts, r.position, side="right")) - 1
            if 0 <= i < len(segments) and r.position < segments[i][1]:
                out[i].append(r)
    return out


def segment_series(
    runs: Runs, segments: list[tuple[int, int]], value: Callable[[QueryRecord], float | None]
) -> np.ndarray:
    """Mean of ``value`` per segment over the pooled records (NaN where no record has a value)."""
    out = []
    for recs in _pooled(runs, segments):
        xs = [v for v in (value(r) for r in recs) if v is not None]
        out.append(float(np.mean(xs)) if xs else np.nan)
    return np.array(out)


def segment_ratio(
    runs: Runs, segments: list[tuple[int, int]], num: Callable[[QueryRecord], bool], den: Callable[[QueryRecord], bool]
) -> np.ndarray:
    """``#num / #den`` per segment over the pooled records (NaN where ``den`` never holds)."""
    out = []
    for recs in _pooled(runs, segments):
        d = [r for r in recs if den(r)]
        out.append(sum(1 for r in d if num(r)) / len(d) if d else np.nan)
    return np.array(out)


def cumulative_stored(runs: Runs, segments: list[tuple[int, int]]) -> np.ndarray:
    """Experiences stored up to the end of each segment, averaged over runs."""
    per_run = []
    for run in runs:
        stored = np.zeros(max((r.position + 1 for r in run), default=0))
        for r in run:
            stored[r.position] = r.writeback == DECISION_STORED
        cum = np.cumsum(stored)
        per_run.append([cum[min(b, len(cum)) - 1] if len(cum) else 0.0 for _, b in segments])
    return np.mean(np.array(per_run), axis=0) if per_run else np.zeros(len(segments))


def _new_figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(8.5, 4.6), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="y", color="0.88", lw=0.6)
    return fig, ax


def _legend_below(fig: Figure, *axes: Axes) -> None:
    handles, labels = [], []
    for a in axes:
        h, lab = a.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8, frameon=False)


def _centers(axis: StreamAxis, segments: list[tuple[int, int]]) -> np.ndarray:
    return np.array([axis.x((a + b) / 2) for a, b in segments])


def plot_tokens(path: str | Path, linear: Runs, living: Runs, *, field: str, title: str, shade: bool) -> None:
    """Figures 2 (``completion_tokens``, shaded) and 8 (``prompt_tokens``): mean tokens per segment,
    LinearRAG blue, LivingRAG orange; green where LivingRAG uses fewer tokens, red where more."""
    n = max(_length(linear), _length(living))
    segs = stream_segments(n)
    axis = StreamAxis(n)
    fig, ax = _new_figure(title)
    x = _centers(axis, segs)
    lin = segment_series(linear, segs, lambda r: float(getattr(r, field))) if linear else None
    liv = segment_series(living, segs, lambda r: float(getattr(r, field))) if living else None
    if lin is not None:
        ax.plot(x, lin, "-o", color=LINEAR_COLOR, ms=3.5, lw=1.6, label="LinearRAG")
    if liv is not None:
        ax.plot(x, liv, "-o", color=LIVING_COLOR, ms=3.5, lw=1.6, label="LivingRAG")
    if shade and lin is not None and liv is not None:
        ok = ~(np.isnan(lin) | np.isnan(liv))
        ax.fill_between(
            x, lin, liv, where=ok & (liv <= lin), color="#2ca02c", alpha=0.25, interpolate=True, label="LivingRAG fewer"
        )
        ax.fill_between(
            x, lin, liv, where=ok & (liv > lin), color="#d62728", alpha=0.25, interpolate=True, label="LivingRAG more"
        )
    ax.set_ylabel(f"{field.replace('_', ' ')} per query (segment mean)")
    axis.decorate(ax)
    fig.legend(loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    fig.savefig(path)


def plot_gate_dynamics(path: str | Path, living: Runs, *, title: str) -> None:
    """Figure 3: NS pass and write-back rate per segment, GS pass among the GS-checked, and the
    cumulative number of stored experiences (black, right axis)."""
    n = _length(living)
    segs = stream_segments(n)
    axis = StreamAxis(n)
    fig, ax = _new_figure(title)
    x = _centers(axis, segs)
    decided = [[r for r in run if r.writeback is not None] for run in living]
    ns = segment_ratio(decided, segs, ns_passed, lambda r: True)
    wb = segment_ratio(decided, segs, lambda r: r.writeback == DECISION_STORED, lambda r: True)
    gs = segment_ratio(decided, segs, lambda r: r.writeback == DECISION_STORED, gs_checked)
    ax.plot(x, 100 * ns, "-o", ms=3.5, color="#1f77b4", label="NS pass (all questions)")
    ax.plot(x, 100 * gs, "-s", ms=3.5, color="#9467bd", label="GS pass (among GS-checked)")
    ax.plot(x, 100 * wb, "-^", ms=3.5, color="#2ca02c", label="write-back")
    ax.set_ylabel("rate per segment (%)")
    ax.set_ylim(-3, 103)
    axis.decorate(ax)
    ax2 = ax.twinx()
    ax2.plot(x, cumulative_stored(decided, segs), "-", color="black", lw=2, label="stored (cumulative)")
    ax2.set_ylabel("stored experiences (cumulative)")
    ax2.set_ylim(bottom=0)
    _legend_below(fig, ax, ax2)
    fig.savefig(path)


def plot_experience_use(path: str | Path, living: Runs, *, title: str) -> None:
    """Figure 9: per segment, the share of queries that fused stored activation maps, that used a
    scaffold, and that were written back; the cumulative store size (black, right axis)."""
    n = _length(living)
    segs = stream_segments(n)
    axis = StreamAxis(n)
    fig, ax = _new_figure(title)
    x = _centers(axis, segs)
    every: Callable[[QueryRecord], bool] = lambda r: True  # noqa: E731
    fused = segment_ratio(living, segs, lambda r: bool(r.fused_experience_ids), every)
    scaf = segment_ratio(living, segs, lambda r: r.scaffold_experience_id is not None, every)
    wb = segment_ratio(living, segs, lambda r: r.writeback == DECISION_STORED, every)
    ax.plot(x, 100 * fused, "-o", ms=5, lw=3, color="#1f77b4", alpha=0.8, label="activation-map retrieval")
    ax.plot(x, 100 * scaf, "--s", ms=3, lw=1.4, color=LIVING_COLOR, label="reasoning scaffold use")
    ax.plot(x, 100 * wb, "-^", ms=3.5, color="#2ca02c", label="write-back")
    ax.set_ylabel("share of queries per segment (%)")
    ax.set_ylim(-3, 103)
    axis.decorate(ax)
    ax2 = ax.twinx()
    ax2.plot(x, cumulative_stored(living, segs), "-", color="black", lw=2, label="stored (cumulative)")
    ax2.set_ylabel("stored experiences (cumulative)")
    ax2.set_ylim(bottom=0)
    _legend_below(fig, ax, ax2)
    fig.savefig(path)


def plot_unavailable(path: str | Path, title: str, message: str) -> None:
    """A figure that says why it is empty (e.g. the run had no LivingRAG system)."""
    fig, ax = _new_figure(title)
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, color="0.3", wrap=True)
    fig.savefig(path)
