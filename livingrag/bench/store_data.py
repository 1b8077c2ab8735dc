"""The synthetic experiences of ``livingrag bench store`` (:mod:`livingrag.bench.store_bench`): their
shape (topics of query embeddings, activation maps drawn from topic entity pools), their rows in
PostgreSQL's binary COPY format, the bulk load into a scratch database, and their regeneration from
the seed for a kept one."""

from __future__ import annotations

import math
import struct
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from livingrag.bench.tenant_figures import tenant_counts
from livingrag.config import DBSettings
from livingrag.errors import InvalidInput

if TYPE_CHECKING:
    from livingrag.db.engine import Database

DIM = 384
MAP_SIZE = 30
HOT_PER_MAP = 3
TOPIC_SIZE = 40
POOL_SIZE = 150
INTRA_COS = 0.35  # cosine between two query embeddings of one topic


def _prime_at_most(n: int) -> int:
    def prime(k: int) -> bool:
        return k > 1 and all(k % d for d in range(2, math.isqrt(k) + 1))

    while not prime(n):
        n -= 1
    return n


class Synth:
    """Deterministic synthetic experiences and queries (see :mod:`livingrag.bench.store_bench`)."""

    def __init__(self, n: int, tenants: int, seed: int, skew: str = "none", zipf_s: float = 1.0) -> None:
        self.rng = np.random.default_rng(seed)
        self.tenants = tenants
        self.counts = tenant_counts(n, tenants, skew, zipf_s)
        self.sigma = math.sqrt((1.0 - INTRA_COS) / INTRA_COS / DIM)
        self.topics = [max(1, c // TOPIC_SIZE) for c in self.counts]
        self.centers = [self._unit(self.rng.normal(size=(k, DIM))) for k in self.topics]
        # each topic's entity pool (distinct ids >= 100, ordered by popularity within the topic):
        # an arithmetic progression modulo a prime vocabulary size never repeats within 150 steps
        self.pools = []
        for k, c in zip(self.topics, self.counts, strict=True):
            v = _prime_at_most(max(2000, c // 5))
            a = self.rng.integers(0, v, size=(k, 1))
            b = self.rng.integers(1, v, size=(k, 1))
            self.pools.append((a + b * np.arange(POOL_SIZE)[None, :]) % v + 100)
        self.rank_w = np.exp(-np.arange(MAP_SIZE) / 8.0)
        self._logp = -0.6 * np.log(np.arange(1, POOL_SIZE + 1))

    @staticmethod
    def _unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)

    def embed(self, t: int, topic: np.ndarray) -> np.ndarray:
        return self._unit(self.centers[t][topic] + self.sigma * self.rng.normal(size=(len(topic), DIM)))

    def maps(self, t: int, topic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Entity ids and weights (n x 30): 27 distinct entities of the topic's pool drawn by
        popularity without replacement (Gumbel top-k) and 3 distinct very common ones; weights
        decay with rank (~1 to ~0.02), rounded to 6 decimals as stored."""
        n, pick = len(topic), MAP_SIZE - HOT_PER_MAP
        keys = self._logp + self.rng.gumbel(size=(n, POOL_SIZE))
        cols = np.argpartition(-keys, pick, axis=1)[:, :pick]
        cols = np.take_along_axis(cols, np.argsort(-np.take_along_axis(keys, cols, axis=1), axis=1), axis=1)
        hot = np.argpartition(self.rng.random(size=(n, 99)), HOT_PER_MAP, axis=1)[:, :HOT_PER_MAP] + 1
        ents = np.concatenate([self.pools[t][topic[:, None], cols], hot], axis=1).astype(np.int64)
        w = np.round(self.rank_w[None, :] * self.rng.uniform(0.7, 1.0, size=(n, MAP_SIZE)), 6)
        return ents, w

    def chunk(self, t: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        topic = self.rng.integers(0, self.topics[t], size=size)
        ents, w = self.maps(t, topic)
        return topic, self.embed(t, topic), ents, w

    def query(self, t: int) -> tuple[np.ndarray, dict[int, float]]:
        topic = self.rng.integers(0, self.topics[t], size=1)
        emb = self.embed(t, topic)[0]
        k = int(self.rng.integers(1, 4))
        seeds = self.rng.choice(self.pools[t][topic[0]][:20], size=k, replace=False)
        return emb, {int(e): round(float(self.rng.uniform(0.5, 1.0)), 4) for e in seeds}


_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)


def _text(value: str) -> bytes:
    b = value.encode("utf-8")
    return struct.pack(">i", len(b)) + b


def experience_rows_binary(
    first_id: int, tenant_id: int, corpus_id: int, topic: np.ndarray, emb: np.ndarray, ents: np.ndarray,
    w: np.ndarray, created: datetime,
) -> bytes:  # fmt: skip
    """The rows of one chunk in PostgreSQL's binary COPY format (the columns of
    :data:`livingrag.db.repositories.bench_data.COPY_EXPERIENCES`)."""
    n, dim = emb.shape
    vec = emb.astype(">f4").tobytes()
    vlen = 4 + 4 * dim
    ts = struct.pack(">iq", 8, int((created - _PG_EPOCH).total_seconds() * 1_000_000))
    fixed_scope = struct.pack(">iqiq", 8, tenant_id, 8, corpus_id)
    tail = struct.pack(">if", 4, 0.8)
    out = [_COPY_HEADER]
    for i in range(n):
        eid = first_id + i
        q = f"synthetic question {eid} about topic {int(topic[i])}?"
        act = "{" + ", ".join(f'"{e}": {x!r}' for e, x in zip(ents[i].tolist(), w[i].tolist(), strict=True)) + "}"
        jb = b"\x01" + act.encode()
        src = struct.pack(">iiiIiiiq", 32, 1, 0, 20, 1, 1, 8, eid % 5000 + 1)  # int8[] {eid % 5000 + 1}
        out.append(
            struct.pack(">hiq", 14, 8, eid)
            + fixed_scope
            + _text(q)
            + _text("synthetic question [NUM] about topic [NUM]?")
            + struct.pack(">ihh", vlen, dim, 0)
            + vec[i * 4 * dim : (i + 1) * 4 * dim]
            + struct.pack(">ii", 4, dim)
            + struct.pack(">i", len(jb))
            + jb
            + _text(
                f"Question: {q}\nKey reasoning: entity {int(ents[i, 0])} leads to the answer.\nAnswer: answer {eid}"
            )
            + _text(f"answer {eid}")
            + ts
            + tail
            + src
            + struct.pack(">iq", 8, 0)
        )
    out.append(_COPY_TRAILER)
    return b"".join(out)


def entity_rows_binary(first_id: int, tenant_id: int, corpus_id: int, ents: np.ndarray, w: np.ndarray) -> bytes:
    """experience_entities rows (unit-normalised weights) in binary COPY format, built in numpy (the
    columns of :data:`livingrag.db.repositories.bench_data.COPY_ENTITIES`)."""
    n, k = ents.shape
    dt = np.dtype(
        [("nf", ">i2"), ("l1", ">i4"), ("x", ">i8"), ("l2", ">i4"), ("e", ">i8"), ("l3", ">i4"), ("t", ">i8"),
         ("l4", ">i4"), ("c", ">i8"), ("l5", ">i4"), ("w", ">f4")]
    )  # fmt: skip
    rows = np.empty(n * k, dtype=dt)
    rows["nf"] = 5
    rows["l1"] = rows["l2"] = rows["l3"] = rows["l4"] = 8
    rows["l5"] = 4
    rows["x"] = np.repeat(np.arange(first_id, first_id + n), k)
    rows["e"] = ents.reshape(-1)
    rows["t"] = tenant_id
    rows["c"] = corpus_id
    rows["w"] = (w / np.linalg.norm(w, axis=1, keepdims=True)).reshape(-1)
    return _COPY_HEADER + rows.tobytes() + _COPY_TRAILER


def synthetic_chunks(synth: Synth) -> Any:
    """The synthetic rows in load order: ``(tenant index, first id, topic, emb, ents, w)`` chunks of
    at most 20,000 rows (the order fixes the random stream, so a kept store can be regenerated)."""
    next_id = 1
    for t in range(synth.tenants):
        left = synth.counts[t]
        while left > 0:
            size = min(left, 20_000)
            yield (t, next_id, *synth.chunk(t, size))
            next_id += size
            left -= size


def collect_by_tenant(synth: Synth, rows: Any) -> list[dict[str, Any]]:
    parts: list[list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(synth.tenants)]
    for t, first, _topic, emb, ents, w in rows:
        parts[t].append((first, emb, ents, w))
    return [
        {
            "ids": np.arange(p[0][0], p[-1][0] + len(p[-1][1])),
            "emb": np.concatenate([x[1] for x in p]),
            "ents": np.concatenate([x[2] for x in p]),
            "w": np.concatenate([x[3] for x in p]),
        }
        for p in parts
    ]


def regenerate(db: Database, synth: Synth) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """The scopes and synthetic data of a kept benchmark database (checked against its row count)."""
    from livingrag.db.repositories import bench_data

    with db.owner_session() as s:
        scopes = bench_data.scopes(s)
        n = sum(synth.counts)
        loaded = bench_data.count_loaded_experiences(s, n)
    if len(scopes) != synth.tenants or loaded != n:
        raise InvalidInput(
            f"the kept database has {len(scopes)} tenants and {loaded} loaded experiences, not "
            f"{synth.tenants} and {n}: give the --experiences and --tenants it was loaded with"
        )
    return scopes, collect_by_tenant(synth, synthetic_chunks(synth))


def reopen(db: Database, db_settings: DBSettings) -> Database:
    from livingrag.db.engine import Database

    db.dispose()
    return Database(db_settings)


def load_synthetic(
    db: Database, synth: Synth, report: dict[str, Any], progress: Callable[[str], None]
) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """Tenants, corpora, COPY of experiences, entity rows, then the indexes."""
    from livingrag.db.repositories import bench_data, corpora, tenants

    scopes = []
    with db.owner_session() as s:
        for t in range(synth.tenants):
            rec, _ = tenants.create_tenant(s, f"bench-{t}-{uuid.uuid4().hex[:6]}")
            c = corpora.create_corpus(s, rec.id, "bench", embedding_model="synthetic", embedding_dim=DIM, ner_model="-")
            scopes.append((rec.id, c.id))
    t0 = time.perf_counter()
    index_defs: list[str] = []
    raw = db.owner_engine.raw_connection()
    try:
        conn = raw.driver_connection
        assert conn is not None  # a checked-out pool record always holds its psycopg connection
        with conn.cursor() as cur:
            index_defs += bench_data.drop_secondary_indexes(cur)
            bench_data.begin_bulk_load(cur)  # bulk load: skip FK triggers
        conn.commit()
        data: list[dict[str, Any]] = []
        next_id = 1
        created = datetime.now(UTC)
        for t, (tenant_id, corpus_id) in enumerate(scopes):
            embs, all_ents, all_w = [], [], []
            first = next_id
            left = synth.counts[t]
            while left > 0:
                size = min(left, 20_000)
                topic, emb, ents, w = synth.chunk(t, size)
                with conn.cursor() as cur:
                    bench_data.copy_rows(
                        cur,
                        experience_rows_binary(next_id, tenant_id, corpus_id, topic, emb, ents, w, created),
                        entity_rows_binary(next_id, tenant_id, corpus_id, ents, w),
                    )
                conn.commit()
                embs.append(emb)
                all_ents.append(ents)
                all_w.append(w)
                next_id += size
                left -= size
                progress(f"  tenant {t + 1}/{synth.tenants}: {next_id - first}/{synth.counts[t]} experiences")
            data.append(
                {
                    "ids": np.arange(first, next_id),
                    "emb": np.concatenate(embs),
                    "ents": np.concatenate(all_ents),
                    "w": np.concatenate(all_w),
                }
            )
        with conn.cursor() as cur:
            bench_data.end_bulk_load(cur)
        conn.commit()
        report["load_s"] = round(time.perf_counter() - t0, 1)
        progress(f"loaded in {report['load_s']} s; building {len(index_defs)} indexes (HNSW last)")
        t1 = time.perf_counter()
        with conn.cursor() as cur:
            bench_data.prepare_index_builds(cur)
            for defn in sorted(index_defs, key=lambda d: "hnsw" in d):
                t2 = time.perf_counter()
                bench_data.build_index(cur, defn)
                conn.commit()
                progress(f"  {defn.split(' ON ')[0].replace('CREATE INDEX ', '')}: {time.perf_counter() - t2:.1f} s")
        conn.autocommit = True
        with conn.cursor() as cur:
            bench_data.vacuum_analyze(cur)
        conn.autocommit = False
        report["index_build_s"] = round(time.perf_counter() - t1, 1)
    finally:
        raw.close()
    with db.owner_session() as s:
        report["entity_rows"] = bench_data.count_entity_rows(s)
    return scopes, data
