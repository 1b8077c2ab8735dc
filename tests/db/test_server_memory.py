"""The embedded server's memory settings: sized from the machine, written into its data folder,
applied at its start and shown by ``livingrag db status``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from livingrag.db.embedded import write_memory_conf
from livingrag.db.server_memory import CONF_NAME, INCLUDE_LINE, cgroup_limit_mb, conf_text, plan_memory


def test_the_plan_from_the_machine_memory() -> None:
    # 24 GB: a quarter, three quarters, a sixteenth
    p = plan_memory(24_000)
    assert (p.shared_buffers_mb, p.effective_cache_size_mb, p.maintenance_work_mem_mb) == (6000, 18000, 1500)
    assert p.auto == (True, True, True)
    assert p.conf() == {"shared_buffers": "6000MB", "effective_cache_size": "18000MB", "maintenance_work_mem": "1500MB"}
    # the bounds: 128 MB .. 16 GB shared buffers, 64 MB .. 2 GB for index builds
    small, big = plan_memory(256), plan_memory(1_000_000)
    assert (small.shared_buffers_mb, small.effective_cache_size_mb, small.maintenance_work_mem_mb) == (128, 192, 64)
    assert (big.shared_buffers_mb, big.effective_cache_size_mb, big.maintenance_work_mem_mb) == (16384, 750_000, 2048)
    # a value that is set wins; the cache estimate never falls under the buffers
    s = plan_memory(1000, shared_buffers_mb=900, maintenance_work_mem_mb=100)
    assert (s.shared_buffers_mb, s.effective_cache_size_mb, s.maintenance_work_mem_mb) == (900, 900, 100)
    assert s.auto == (False, True, False)
    with pytest.raises(ValueError, match="memory must be positive"):
        plan_memory(0)


def test_the_cgroup_limit(tmp_path: Path) -> None:
    assert cgroup_limit_mb(tmp_path) is None
    (tmp_path / "memory.max").write_text("max\n")
    assert cgroup_limit_mb(tmp_path) is None
    (tmp_path / "memory.max").write_text(f"{8 * 1024**3}\n")
    assert cgroup_limit_mb(tmp_path) == 8192
    v1 = tmp_path / "v1"
    (v1 / "memory").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert cgroup_limit_mb(v1) is None


def test_the_conf_is_written_once_and_included_last(tmp_path: Path) -> None:
    (tmp_path / "postgresql.conf").write_text("shared_buffers = 128MB\n")
    plan = plan_memory(4096)
    assert write_memory_conf(tmp_path, plan)
    assert (tmp_path / CONF_NAME).read_text() == conf_text(plan)
    main = (tmp_path / "postgresql.conf").read_text().splitlines()
    assert main[0] == "shared_buffers = 128MB" and main[-1] == INCLUDE_LINE
    assert not write_memory_conf(tmp_path, plan)  # nothing changes the second time
    assert (tmp_path / "postgresql.conf").read_text().count(INCLUDE_LINE) == 1
    assert write_memory_conf(tmp_path, plan_memory(4096, shared_buffers_mb=300))
    assert "shared_buffers = '300MB'" in (tmp_path / CONF_NAME).read_text()
    assert not list(tmp_path.glob(".*.tmp"))


def _status(data_dir: Path, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "db", "status", "--json"],
        env={**os.environ, "LIVINGRAG_DB__DATA_DIR": str(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.db
def test_db_status_shows_what_the_embedded_server_runs_with(tmp_path: Path) -> None:
    """A new data folder starts with the settings (restarted once after initdb); a changed
    setting applies at the next start (the server stops when its last process exits)."""
    first = _status(tmp_path, LIVINGRAG_DB__SHARED_BUFFERS_MB="160")
    mem = first["memory"]
    assert mem["shared_buffers"] == {"running_mb": 160, "configured_mb": 160, "auto": False}  # type: ignore[index]
    ec = mem["effective_cache_size"]  # type: ignore[index]
    assert ec["auto"] is True and ec["running_mb"] == ec["configured_mb"] == 3 * first["memory_basis_mb"] // 4  # type: ignore[operator]
    assert first["memory_restart_needed"] is False
    # the read-ahead of the experience store (db.prewarm) is on, and the store's size is shown:
    # none before the schema exists, its tables' and indexes' pages after `db upgrade`
    assert first["prewarm"] is True and first["experience_store_mb"] == 0.0
    # and so is the load of its indexes into shared buffers, with the loader install.sh built
    assert first["prewarm_buffers_fraction"] == 0.5
    assert str(first["buffer_loader"]).endswith("/livingrag_buffers.so")
    # the human form lines every name up, the longest included
    human = subprocess.run(
        [sys.executable, "-m", "livingrag.cli.main", "db", "status"],
        env={**os.environ, "LIVINGRAG_DB__DATA_DIR": str(tmp_path), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    colons = {line.index(": ") for line in human.splitlines() if ": " in line and not line.startswith("schema")}
    assert len(colons) == 1 and "prewarm_buffers_fraction: 0.5" in human, human
    env = {**os.environ, "LIVINGRAG_DB__DATA_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "livingrag.cli.main", "db", "upgrade"], env=env, check=True, timeout=120)
    migrated = _status(tmp_path, LIVINGRAG_DB__PREWARM="false")
    assert migrated["prewarm"] is False and migrated["experience_store_mb"] > 0  # type: ignore[operator]
    second = _status(tmp_path, LIVINGRAG_DB__SHARED_BUFFERS_MB="192", LIVINGRAG_DB__MAINTENANCE_WORK_MEM_MB="100")
    assert second["memory"]["shared_buffers"]["running_mb"] == 192  # type: ignore[index]
    assert second["memory"]["maintenance_work_mem"] == {"running_mb": 100, "configured_mb": 100, "auto": False}  # type: ignore[index]
