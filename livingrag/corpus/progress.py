"""Progress reporting for long runs: rich progress bars with rate and ETA, or nothing.

The indexer talks to a :class:`Progress`; the CLI passes :class:`RichProgress` (drawn on stderr so
``--json`` output stays clean), the Python API defaults to :class:`NullProgress`.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.progress import Task


class Progress(Protocol):
    def add(self, description: str, total: int) -> Any: ...

    def advance(self, task: Any, n: int = 1) -> None: ...

    def __enter__(self) -> Progress: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class NullProgress:
    """Reports nothing."""

    def add(self, description: str, total: int) -> Any:
        return None

    def advance(self, task: Any, n: int = 1) -> None:
        return None

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class RichProgress:
    """rich bars: description, bar, done/total, rate (items/s), elapsed and time remaining.

    When the console is not a terminal (a log file, CI), a plain line per task is printed at most
    every ``log_every_s`` seconds instead, with the same numbers.
    """

    def __init__(self, console: Any = None, *, transient: bool = False, log_every_s: float = 15.0) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as _RichProgress
        from rich.text import Text

        class RateColumn(ProgressColumn):
            def render(self, task: Task) -> Text:
                speed = _rate(task)
                return Text("?/s" if speed is None else f"{speed:,.1f}/s", style="progress.data.speed")

        class EtaColumn(ProgressColumn):
            def render(self, task: Task) -> Text:
                eta = _eta(task)
                if eta is None:
                    return Text("-:--:--", style="progress.remaining")
                m, sec = divmod(int(eta), 60)
                h, m = divmod(m, 60)
                return Text(f"{h}:{m:02d}:{sec:02d}", style="progress.remaining")

        self._progress = _RichProgress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            EtaColumn(),
            console=console,
            transient=transient,
        )

        self._console = self._progress.console
        self._log_every_s = log_every_s
        self._last_log: dict[Any, float] = {}

    def add(self, description: str, total: int) -> Any:
        return self._progress.add_task(description, total=total)

    def advance(self, task: Any, n: int = 1) -> None:
        self._progress.advance(task, n)
        if not self._console.is_terminal:
            self._log(task)

    def _log(self, task_id: Any, *, force: bool = False) -> None:
        import time

        now = time.monotonic()
        task = next(t for t in self._progress.tasks if t.id == task_id)
        if not force and now - self._last_log.get(task_id, 0.0) < self._log_every_s and not task.finished:
            return
        if task.finished and self._last_log.get(task_id) == -1.0:
            return
        self._last_log[task_id] = -1.0 if task.finished else now
        speed, eta = _rate(task), _eta(task)
        self._console.print(
            f"{task.description.strip()}: {int(task.completed)}/{int(task.total or 0)}"
            f" ({'?' if speed is None else f'{speed:,.1f}'}/s, elapsed {task.elapsed or 0:.0f}s, "
            f"eta {'?' if eta is None else f'{eta:.0f}s'})",
            highlight=False,
        )

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()


def _rate(task: Task) -> float | None:
    """Items per second: rich's recent estimate, or the average when updates are sparse."""
    speed = task.finished_speed or task.speed
    if speed is None and task.elapsed and task.completed:
        speed = task.completed / task.elapsed
    return speed


def _eta(task: Task) -> float | None:
    eta = task.time_remaining
    speed = _rate(task)
    if eta is None and speed and task.total is not None:
        eta = max(task.total - task.completed, 0) / speed
    return eta


__all__ = ["NullProgress", "Progress", "RichProgress"]
