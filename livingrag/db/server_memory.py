"""Memory settings of the embedded PostgreSQL server, sized from the machine (pure).

PostgreSQL's defaults (shared_buffers 128 MB, maintenance_work_mem 64 MB, effective_cache_size
4 GB) fit a laptop running many services; this server is the project's own, and a store of a
million experiences (its table plus HNSW index, a few GB) then misses the buffer cache on every
match after a restart. With M the memory this process may use (the machine's, or its cgroup's
limit when lower), in MB:

    shared_buffers       = clamp(M / 4,  128, 16384)
    effective_cache_size = max(3 M / 4, shared_buffers)
    maintenance_work_mem = clamp(M / 16, 64, 2048)

(the usual sizing: a quarter of memory for PostgreSQL's cache, the planner told the OS caches
most of the rest, index builds given a sixteenth). A value set explicitly wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONF_NAME = "livingrag_memory.conf"
INCLUDE_LINE = f"include_if_exists = '{CONF_NAME}'"


@dataclass(frozen=True)
class MemoryPlan:
    """The three settings, in MB, and whether each was derived (True) or given."""

    shared_buffers_mb: int
    effective_cache_size_mb: int
    maintenance_work_mem_mb: int
    memory_mb: int
    auto: tuple[bool, bool, bool] = (True, True, True)

    def settings_mb(self) -> dict[str, int]:
        """PostgreSQL setting name -> MB."""
        return {
            "shared_buffers": self.shared_buffers_mb,
            "effective_cache_size": self.effective_cache_size_mb,
            "maintenance_work_mem": self.maintenance_work_mem_mb,
        }

    def auto_by_name(self) -> dict[str, bool]:
        """PostgreSQL setting name -> whether its value was derived (not set explicitly)."""
        return dict(zip(self.settings_mb(), self.auto, strict=True))

    def conf(self) -> dict[str, str]:
        """postgresql.conf lines: name -> value."""
        return {k: f"{v}MB" for k, v in self.settings_mb().items()}


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


def plan_memory(
    memory_mb: int,
    *,
    shared_buffers_mb: int | None = None,
    effective_cache_size_mb: int | None = None,
    maintenance_work_mem_mb: int | None = None,
) -> MemoryPlan:
    """The settings of the module docstring for ``memory_mb`` of memory (given values win)."""
    if memory_mb <= 0:
        raise ValueError(f"memory must be positive, got {memory_mb} MB")
    sb = shared_buffers_mb if shared_buffers_mb is not None else _clamp(memory_mb // 4, 128, 16384)
    ec = effective_cache_size_mb if effective_cache_size_mb is not None else max(3 * memory_mb // 4, sb)
    mw = maintenance_work_mem_mb if maintenance_work_mem_mb is not None else _clamp(memory_mb // 16, 64, 2048)
    auto = (shared_buffers_mb is None, effective_cache_size_mb is None, maintenance_work_mem_mb is None)
    return MemoryPlan(sb, ec, mw, memory_mb, auto)


def cgroup_limit_mb(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1
    ``memory/memory.limit_in_bytes``) in MB; None when there is none."""
    for f in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            raw = f.read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:  # "max" or a huge number: no limit
            return int(raw) // (1024 * 1024)
    return None


def conf_text(plan: MemoryPlan) -> str:
    """The file livingrag writes into the data directory (included by postgresql.conf)."""
    lines = [
        "# Written by livingrag at each start of the embedded server (db.shared_buffers_mb and the",
        f"# others; automatic values are sized from {plan.memory_mb} MB of memory). Edits here are replaced:",
        "# change the livingrag settings, or use ALTER SYSTEM, which wins over this file.",
    ]
    lines += [f"{k} = '{v}'" for k, v in plan.conf().items()]
    return "\n".join(lines) + "\n"


__all__ = ["CONF_NAME", "INCLUDE_LINE", "MemoryPlan", "cgroup_limit_mb", "conf_text", "plan_memory"]
