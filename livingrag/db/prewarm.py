"""Read the experience store's files into the OS page cache when the embedded server starts.

After a restart PostgreSQL's buffer cache is empty, and after a reboot (or when the OS has dropped
its page cache) every page a match touches is a disk read: at a million experiences the HNSW walk
reads hundreds of random pages, and the first thousands of matches run at disk speed. The
embedded server ships no ``pg_prewarm``, so livingrag reads the files itself: for every database
of the server, the experience tables, their TOAST tables and their indexes (indexes first), each
file announced with ``posix_fadvise(WILLNEED)`` and then read through, in a background thread, up
to a budget of half the memory that is available. PostgreSQL then finds the pages in the page
cache and fills its own buffers from there at memory speed. After it, the indexes matching walks
are loaded into those buffers themselves (:mod:`livingrag.db.buffer_load`), up to
``db.prewarm_buffers_fraction`` of them.

Only the embedded server's files are on this machine for certain; an external server is never
read ahead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from livingrag.db.buffer_load import LIBRARY_NAME, BufferLoad, load_store_indexes
from livingrag.db.catalog import RelationFile, database_names, owner_connection, segment_bytes, store_relations

log = logging.getLogger(__name__)

_CHUNK = 1 << 20  # bytes read per call


def segment_paths(path: Path, size: int, segment: int) -> list[tuple[Path, int]]:
    """The segment files of a relation of ``size`` bytes split every ``segment`` bytes, with the
    bytes each holds: ``path``, ``path.1``, ``path.2``, ... (PostgreSQL's naming). An empty
    relation has no segment to read."""
    if segment <= 0:
        raise ValueError(f"segment size must be positive, got {segment}")
    if size <= 0:
        return []
    n = -(-size // segment)
    return [
        (path if i == 0 else path.with_name(f"{path.name}.{i}"), min(segment, size - i * segment)) for i in range(n)
    ]


@dataclass(frozen=True)
class ReadAhead:
    """What a read-ahead did: files and bytes read, files that were missing (dropped meanwhile),
    whether the budget stopped it early, and how long it took."""

    files: int
    bytes: int
    missing: int
    truncated: bool
    seconds: float

    def as_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "files": self.files,
            "mb": round(self.bytes / 1024**2, 1),
            "missing": self.missing,
            "truncated": self.truncated,
            "seconds": round(self.seconds, 2),
        }


def read_ahead(files: Iterable[tuple[Path, int]], budget: int) -> ReadAhead:
    """Announce each file to the kernel (``POSIX_FADV_WILLNEED``) and read it through, in order,
    until ``budget`` bytes have been read. A file that no longer exists is counted and skipped."""
    t0 = time.perf_counter()
    done = read = missing = 0
    truncated = False
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    for path, size in files:
        if read >= budget:
            truncated = True
            break
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            missing += 1
            continue
        try:
            want = min(size, budget - read)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, want, os.POSIX_FADV_WILLNEED)
            got = 0
            while got < want:
                n = os.readv(fd, [view[: min(_CHUNK, want - got)]])
                if n <= 0:
                    break
                got += n
            read += got
            done += 1
            truncated = truncated or want < size
        finally:
            os.close(fd)
    return ReadAhead(files=done, bytes=read, missing=missing, truncated=truncated, seconds=time.perf_counter() - t0)


def default_budget() -> int:
    """Half the memory available now, in bytes: a read-ahead must never push out what runs."""
    return int(psutil.virtual_memory().available // 2)


def plan_files(relations: Sequence[RelationFile], segment: int) -> list[tuple[Path, int]]:
    """Every segment file of ``relations``, in their order."""
    return [seg for r in relations for seg in segment_paths(r.path, r.size, segment)]


@dataclass
class Prewarm:
    """A read-ahead running in a daemon thread, followed by the buffer load when
    ``buffers_fraction`` is above 0; :meth:`wait` for its :class:`ReadAhead` (both have ended then)."""

    owner_url: str
    buffers_fraction: float = 0.0
    library: str = LIBRARY_NAME
    result: ReadAhead | None = None
    error: str | None = None
    buffers: BufferLoad | None = None
    buffers_error: str | None = None
    _done: threading.Event = field(default_factory=threading.Event)
    _cancelled: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Prewarm:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="livingrag-prewarm", daemon=True)
            self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> ReadAhead | None:
        """Block until the read-ahead ends (or ``timeout`` seconds); its result, None if it failed
        or is still running."""
        self._done.wait(timeout)
        return self.result

    def cancel(self) -> None:
        """The server is stopping (:meth:`EmbeddedServer.stop`): what fails from now on is that stop,
        not a fault, so it is logged at INFO (a short command that ends while the read-ahead runs
        must not print a warning), and no buffer load starts after the read-ahead."""
        self._cancelled.set()

    @property
    def done(self) -> bool:
        """Whether the read-ahead (and the buffer load after it) has ended (done, or failed)."""
        return self._done.is_set()

    def _run(self) -> None:
        try:
            self._read_ahead()
            if self.error is None and self.buffers_fraction > 0 and not self._cancelled.is_set():
                self._load_buffers()
        finally:
            self._done.set()

    def _read_ahead(self) -> None:
        try:
            files = collect_files(self.owner_url)
            self.result = read_ahead(files, default_budget())
            log.info("prewarm: read %s", self.result.as_dict())
        except Exception as exc:  # a server stopping under us, a database dropped meanwhile
            self.error = f"{type(exc).__name__}: {exc}"
            self._log_failure("prewarm failed: %s", self.error)

    def _load_buffers(self) -> None:
        try:
            self.buffers = load_store_indexes(self.owner_url, self.buffers_fraction, self.library)
            log.info("prewarm: loaded into shared buffers %s", self.buffers.as_dict())
        except Exception as exc:  # the loader not installed, the server stopping
            self.buffers_error = f"{type(exc).__name__}: {exc}"
            self._log_failure("prewarm: nothing loaded into shared buffers: %s", self.buffers_error)

    def _log_failure(self, message: str, error: str) -> None:
        if self._cancelled.is_set():
            log.info(message + " (the server was stopping)", error)
        else:
            log.warning(message, error)

    def report(self) -> dict[str, object]:
        """What the read-ahead and the buffer load did, JSON-ready."""
        out: dict[str, object] = {}
        if self.result is not None:
            out |= self.result.as_dict()
        if self.error is not None:
            out["error"] = self.error
        out["buffers"] = self.buffers.as_dict() if self.buffers is not None else None
        if self.buffers_error is not None:
            out["buffers_error"] = self.buffers_error
        return out


def collect_files(owner_url: str) -> list[tuple[Path, int]]:
    """The segment files of the experience relations of every database on the server at
    ``owner_url`` (the owner may read every database)."""
    with owner_connection(owner_url) as conn:
        names = database_names(conn)
        segment = segment_bytes(conn)
    relations = [r for _, r in store_relations(owner_url, names)]
    return plan_files(sorted(relations, key=read_order), segment)


def read_order(r: RelationFile) -> tuple[bool, int, str]:
    """Indexes before tables, larger before smaller (across databases)."""
    return (not r.is_index, -r.size, str(r.path))


__all__ = [
    "Prewarm",
    "ReadAhead",
    "collect_files",
    "default_budget",
    "plan_files",
    "read_ahead",
    "read_order",
    "segment_paths",
]
