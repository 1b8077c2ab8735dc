"""A supervised child process that announces itself with one JSON line on stdout.

:class:`SupervisedChild` starts a command, waits for its first stdout line (a JSON object with
``"event": "ready"`` or ``"event": "error"``), keeps the last lines of its stderr (llama.cpp's log and
Python's fault handler report go there) and describes how it ended: ``exit_description()`` names a
signal the way a person reads it (``SIGSEGV (segmentation fault)``). It is stopped with ``stop()``,
and when the parent process exits.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from typing import IO, Any

__all__ = ["ChildStartError", "SupervisedChild", "describe_returncode"]

_SIGNAL_MEANING = {
    signal.SIGSEGV: "segmentation fault",
    signal.SIGILL: "illegal instruction: the runtime uses an instruction this CPU lacks",
    signal.SIGBUS: "bus error",
    signal.SIGFPE: "floating-point exception",
    signal.SIGABRT: "aborted",
    signal.SIGKILL: "killed, e.g. by the out-of-memory killer",
    signal.SIGTERM: "terminated",
}


def describe_returncode(code: int | None) -> str:
    """A returncode as a person reads it: ``exit status 2``, ``SIGSEGV (segmentation fault)``."""
    if code is None:
        return "still running"
    if code >= 0:
        return f"exit status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"signal {-code}"
    meaning = _SIGNAL_MEANING.get(sig)
    return f"{sig.name} ({meaning})" if meaning else sig.name


class ChildStartError(Exception):
    """The child ended, reported an error, or stayed silent before it was ready."""

    def __init__(self, message: str, *, reported: bool) -> None:
        super().__init__(message)
        self.reported = reported
        """True when the child itself reported the error (it did not crash)."""


def _stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class SupervisedChild:
    """One run of a child process; a new run is a new object."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        name: str = "child process",
        stderr_lines: int = 40,
    ) -> None:
        self.command = list(command)
        self.name = name
        self._stderr: deque[str] = deque(maxlen=stderr_lines)
        self._stdout: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            close_fds=True,
        )
        self.pid = self.proc.pid
        self.ready: dict[str, Any] | None = None
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self._stdout.put, True), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._stderr.append, False), daemon=True),
        ]
        for t in self._threads:
            t.start()
        self._finalizer = weakref.finalize(self, _stop, self.proc, 5.0)  # also runs at interpreter exit

    @staticmethod
    def _pump(stream: IO[bytes] | None, sink: Any, mark_end: bool) -> None:
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            sink(raw.decode("utf-8", "replace").rstrip("\n"))
        if mark_end:
            sink(None)

    # -- state -----------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def returncode(self, wait_s: float = 0.0) -> int | None:
        """The exit code, waiting up to ``wait_s`` for the process to end (None: still running)."""
        if wait_s > 0:
            try:
                return self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                return None
        return self.proc.poll()

    def stderr_tail(self, lines: int = 12) -> str:
        """The last ``lines`` lines the child wrote to stderr."""
        for t in self._threads[1:]:
            t.join(timeout=0.5 if not self.alive else 0)
        return "\n".join(list(self._stderr)[-lines:])

    def exit_description(self, wait_s: float = 0.0) -> str:
        """How the child ended (``SIGSEGV (segmentation fault)``), or ``still running``."""
        return describe_returncode(self.returncode(wait_s))

    def crash_report(self, wait_s: float = 1.0, *, when: str = "") -> str:
        """``<name> (pid N) ended with <how> <when>`` plus the last lines of its stderr, for error messages."""
        how = self.exit_description(wait_s)
        tail = self.stderr_tail()
        text = f"{self.name} (pid {self.pid}) ended with {how}{' ' + when if when else ''}"
        return f"{text}; its last output:\n{tail}" if tail else text

    # -- start and stop --------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        """The child's ready line; raises ChildStartError when it reports an error, ends or stays silent."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise ChildStartError(
                    f"{self.name} (pid {self.pid}) was not ready within {timeout_s:g} s; stopped it. "
                    f"Its last output:\n{self.stderr_tail()}",
                    reported=False,
                )
            try:
                line = self._stdout.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:  # stdout closed: the child ended before it was ready
                raise ChildStartError(self.crash_report(when="before it was ready"), reported=False)
            try:
                event = json.loads(line)
            except ValueError:
                self._stderr.append(line)  # stray output (a library printing to stdout): keep for the report
                continue
            if not isinstance(event, dict):
                continue
            if event.get("event") == "ready":
                self.ready = event
                return event
            if event.get("event") == "error":
                self.stop()
                raise ChildStartError(str(event.get("message") or "unknown error"), reported=True)

    def stop(self, grace_s: float = 5.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``grace_s``); idempotent."""
        _stop(self.proc, grace_s)
        self._finalizer.detach()

    def kill(self) -> None:
        """Kill the child at once (a wedged generation)."""
        if self.alive:
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.stop()
