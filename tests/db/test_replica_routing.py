"""The routing of reads among standbys (:mod:`livingrag.db.replicas`) on stand-in servers: lag,
read your writes, failover and the settings that configure it. The same behaviour against a real
primary and a real standby is ``tests/db/test_read_replicas.py``."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from sqlalchemy import Engine

from livingrag.config import get_settings
from livingrag.config_view import settings_as_dict
from livingrag.db.replicas import (
    PRIMARY_LSN_SQL,
    REPLAY_LSN_SQL,
    STANDBY_STATE_SQL,
    ReplicaSet,
    format_lsn,
    lag_ms,
    parse_lsn,
    write_position,
)
from livingrag.errors import ConfigError, ServerUnreachable


def test_lsn_text_round_trips() -> None:
    assert parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"
    assert parse_lsn(None) is None and format_lsn(None) is None


def test_a_write_position_just_past_a_page_header_is_the_page_boundary() -> None:
    page = 5 * 8192
    assert write_position(page + 24) == page  # short header: the last record ended at the boundary
    assert write_position(page + 40) == page  # long header (a segment's first page)
    assert write_position(page + 25) == page + 25


def test_lag_is_zero_when_caught_up_and_an_upper_bound_when_behind() -> None:
    samples = [(10.0, 100), (10.25, 100), (10.5, 200), (10.75, 300)]
    # caught up, however long ago its last transaction was replayed (an idle standby)
    assert lag_ms(300, 3_600_000.0, 300, samples, now=11.0) == 0.0
    # behind: the primary was last at a position it holds at t=10.25 -> 750 ms
    assert lag_ms(150, None, 300, samples, now=11.0) == pytest.approx(750.0)
    # the age of its last replayed transaction bounds it too; the smaller bound wins
    assert lag_ms(150, 120.0, 300, samples, now=11.0) == pytest.approx(120.0)
    # behind every sample, no replayed transaction: unbounded
    assert lag_ms(50, None, 300, samples, now=11.0) == float("inf")
    assert lag_ms(None, None, 300, samples, now=11.0) is None and lag_ms(100, None, None, samples, now=11.0) is None


# ---------------------------------------------------------------- a replica set over stand-in servers


class FakeEngine:
    def __init__(self, name: str) -> None:
        self.name = name

    def dispose(self, close: bool = True) -> None:
        pass


@dataclass
class Servers:
    """The primary's position and each standby's replay state, as the stand-in round trip reports them."""

    primary_lsn: int = 1000
    replay: dict[str, int] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    down: set[str] = field(default_factory=set)
    version: dict[str, int] = field(default_factory=dict)
    statements: list[tuple[str, str]] = field(default_factory=list)

    def round_trip(self, engine: Any, scope: Mapping[str, str], statement: str, params: Mapping[str, Any]) -> Any:
        name = engine.name.split("/")[0]
        self.statements.append((name, statement))
        if name == "primary":
            return [(format_lsn(self.primary_lsn),)] if statement == PRIMARY_LSN_SQL else [("primary",)]
        if name in self.down:
            raise ServerUnreachable(f"database unavailable: {name} is gone")
        if statement == STANDBY_STATE_SQL:
            return [(True, format_lsn(self.replay[name]), None, name in self.paused)]
        if statement == REPLAY_LSN_SQL:
            return [(format_lsn(self.replay[name]),)]
        if statement == "VERSION":
            return [(self.version.get(name, 0),)]
        return [(name,)]


@pytest.fixture
def servers() -> Servers:
    return Servers(replay={"s1": 1000, "s2": 1000})


def replica_set(servers: Servers, **kw: Any) -> ReplicaSet:
    urls = [("s1", "postgresql+psycopg://web:********@s1/db"), ("s2", "postgresql+psycopg://web:********@s2/db")]
    made: list[Any] = []

    def make(url: str, autocommit: bool) -> Engine:
        made.append(FakeEngine(f"{url}/{'read' if autocommit else 'session'}"))
        return cast(Engine, made[-1])

    primary = cast(Engine, FakeEngine("primary"))
    args: dict[str, Any] = {"max_lag_ms": 1000, "wait_ms": 30, "retry_s": 0.2, "check_interval_s": 3600.0} | kw
    return ReplicaSet(urls, make_engine=make, round_trip=servers.round_trip, primary_engine=lambda: primary, **args)


@pytest.fixture
def replicas(servers: Servers) -> Iterator[ReplicaSet]:
    rs = replica_set(servers)
    yield rs
    rs.close()


def read(rs: ReplicaSet, tenant: int = 1) -> str:
    return str(rs.read(tenant, {}, "SELECT 1", {}, lambda: [("primary",)])[0][0])


def test_reads_take_the_standbys_in_turn(replicas: ReplicaSet) -> None:
    assert {read(replicas) for _ in range(4)} == {"s1", "s2"}
    assert [s["reads"] for s in replicas.status()] == [2, 2]
    assert replicas.counters.primary == {}


def test_a_tenants_write_waits_for_a_standby_that_replayed_it_else_the_primary(
    servers: Servers, replicas: ReplicaSet
) -> None:
    replicas.start()
    servers.primary_lsn = 2000
    replicas.note_write(7, 2000)
    assert read(replicas, tenant=7) == "primary"  # neither replayed it within the wait
    assert replicas.counters.primary["read_your_writes"] == 1
    assert read(replicas, tenant=8) in {"s1", "s2"}  # another tenant's reads need nothing of it
    assert read(replicas, tenant=7) == "primary"  # right after a wait timed out: no second wait
    assert replicas.counters.primary["read_your_writes"] == 2
    servers.replay["s2"] = 2000
    time.sleep(0.05)  # past the wait bound: probing again
    assert read(replicas, tenant=7) == "s2"  # probed: s2 has it now
    servers.replay["s1"] = 2000
    replicas.check_once()
    assert replicas.floor(7) == 0  # every standby has it: forgotten


def test_a_paused_standby_is_not_waited_for(servers: Servers) -> None:
    rs = replica_set(servers, wait_ms=5000)
    try:
        servers.paused = {"s1", "s2"}
        rs.start()
        rs.note_write(1, 2000)
        t0 = time.monotonic()
        assert read(rs) == "primary"
        assert time.monotonic() - t0 < 1.0
    finally:
        rs.close()


def test_a_standby_that_fails_is_skipped_at_once_and_tried_again_later(servers: Servers, replicas: ReplicaSet) -> None:
    replicas.start()
    servers.down = {"s1"}
    assert {read(replicas) for _ in range(4)} == {"s2"}  # the read that met s1 went on to s2
    s1 = replicas.status()[0]
    assert s1["state"] == "down" and "s1 is gone" in s1["error"] and s1["retry_in_s"] > 0
    servers.down = {"s1", "s2"}
    assert read(replicas) == "primary"
    servers.down = set()
    replicas.check_once()  # before the retry time: still skipped
    assert replicas.status()[0]["state"] == "down"
    time.sleep(0.25)
    replicas.check_once()
    assert [s["state"] for s in replicas.status()] == ["up", "up"]


def test_a_standby_past_the_lag_bound_is_skipped(servers: Servers) -> None:
    rs = replica_set(servers, max_lag_ms=100)
    try:
        rs.start()
        servers.primary_lsn = 5000  # s1 and s2 replay nothing more
        time.sleep(0.15)
        rs.check_once()
        assert [s["state"] for s in rs.status()] == ["lagging", "lagging"]
        assert read(rs) == "primary" and rs.counters.primary["no_usable_standby"] == 1
        servers.replay["s1"] = 5000
        rs.check_once()
        assert read(rs) == "s1"
    finally:
        rs.close()


def test_a_requirement_picks_a_standby_that_meets_it_once_per_scope(servers: Servers, replicas: ReplicaSet) -> None:
    def holds(engine: Engine) -> bool:
        return bool(servers.round_trip(engine, {}, "VERSION", {})[0][0] >= 3)

    servers.version = {"s1": 2, "s2": 3}
    with replicas.requirement(1, holds):
        assert {read(replicas) for _ in range(3)} == {"s2"}
        assert read(replicas, tenant=2) in {"s1", "s2"}  # another tenant's reads are not bound by it
    servers.version = {"s1": 2, "s2": 2}
    with replicas.requirement(1, holds):
        assert read(replicas) == "primary"
        checks = sum(1 for _, st in servers.statements if st == "VERSION")
        assert read(replicas) == "primary"
        assert sum(1 for _, st in servers.statements if st == "VERSION") == checks  # decided once


# ---------------------------------------------------------------- settings


def test_read_urls_take_commas_or_json_and_name_a_bad_url_masked() -> None:
    s = get_settings(db={"read_urls": "postgres://web:pw1@h1:5433/lrg, postgresql://web:pw2@h2/lrg"})
    assert [u.get_secret_value() for u in s.db.read_urls] == [
        "postgresql+psycopg://web:pw1@h1:5433/lrg",
        "postgresql+psycopg://web:pw2@h2/lrg",
    ]
    assert len(get_settings(db={"read_urls": '["postgresql://web:pw@h1/lrg"]'}).db.read_urls) == 1
    shown = settings_as_dict(s)["db"]["read_urls"]
    assert shown == ["postgresql+psycopg://web:********@h1:5433/lrg", "postgresql+psycopg://web:********@h2/lrg"]
    for bad, what in [
        ("postgresql://web:pw9@h1:99999/lrg", "does not parse"),
        ("mysql://web:pw9@h1/lrg", "must be a PostgreSQL URL"),
        ("postgresql://web:pw9@h1", "names no database"),
    ]:
        with pytest.raises(ConfigError) as err:
            get_settings(db={"read_urls": bad})
        assert "read URL 1" in str(err.value) and what in str(err.value) and "pw9" not in str(err.value)
