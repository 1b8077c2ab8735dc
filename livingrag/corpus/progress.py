"""Progress reporting for long runs: rich progress bars with rate and ETA, or nothing.

The indexer talks to a :class:`Progress`; the CLI passes :class:`RichProgress` (drawn on stderr so
``--json`` output stays clean), the Python API defaults to :class:`NullProgress`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol


class Progress(Protocol):
    def add(self, description: str, total: int) -> Any: ...

    def advance(self, task: Any, n: int = 1) -> None: ...

    def __enter__(self) -> Progress: ...

    def __exit__(self, *exc: object) -> None: ...


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
    """rich bars: description, bar, done/total, rate (items/s), elapsed and time remaining."""

    def __init__(self, console: Any = None, *, transient: bool = False) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _RichProgress
        from rich.text import Text

        class RateColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                return Text("?/s" if speed is None else f"{speed:,.1f}/s", style="progress.data.speed")

        self._progress = _RichProgress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
            transient=transient,
        )

    def add(self, description: str, total: int) -> Any:
        return self._progress.add_task(description, total=total)

    def advance(self, task: Any, n: int = 1) -> None:
        self._progress.advance(task, n)

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()


__all__ = ["NullProgress", "Progress", "RichProgress"]
