"""``livingrag bench store``: the experience store at scale, on synthetic experiences of realistic
shape, in a scratch database of the configured server.

Data: ``T`` tenants with one 384-dimensional corpus each, of equal sizes or (``skew="zipf"``)
sizes proportional to ``1 / (t + 1) ** s`` (:mod:`livingrag.bench.tenant_figures`; the database's
comment records the skew, so that a kept store is regenerated alike); experiences grouped in
topics (about 40 per topic) whose query embeddings have cosine ~0.35 with each other and ~0 across
topics, and activation maps of 30 entities (27 from the topic's entity pool, 3 from a few very
common entities) with weights decaying from ~1 to ~0.02, as sparsified final activations do. This is the
shape of a store whose experiences passed the novelty gate (pairwise eta mostly under 0.3). Rows
are loaded with COPY before the indexes are built; then each tenant's corpus gets its own HNSW
index, as ``livingrag admin index-scopes`` builds them (``scope_indexes=False``: the shared index
alone).

Measured: ``store.match`` latency over queries matched back to back (split into SQL preselection
and numpy rescoring; scaffold template embedding off, lambda = 0), agreement of each top K,
checked afterwards, with an exact full scan of the tenant's store in numpy (the paper's method),
per-tenant figures with several tenants (the median-sized and the largest tenant's latency,
agreement per size decile: issue 21's target 3), write-back throughput of 8 concurrent writers
(store side: the grounding verifier is off, its cost depends on the model), and how many of a
burst of 8 near-duplicate candidates raced by 8 writers get stored.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from livingrag.bench.stats import percentile
from livingrag.bench.tenant_figures import format_tenant_figures, tenant_counts, tenant_figures
from livingrag.config import DBSettings, Settings
from livingrag.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from livingrag.db.engine import Database
    from livingrag.experience.store import ExperienceStore

log = logging.getLogger(__name__)
NAN = float("nan")  # a figure with no sample

DIM = 384
MAP_SIZE = 30
HOT_PER_MAP = 3
TOPIC_SIZE = 40
POOL_SIZE = 150
INTRA_COS = 0.35  # cosine between two query embeddings of one topic
_COPY_ENTITIES = (
    "COPY experience_entities (experience_id, entity_id, tenant_id, corpus_id, weight) FROM STDIN WITH (FORMAT BINARY)"
)
_COPY_EXPERIENCES = (
    "COPY experiences (id, tenant_id, corpus_id, query, query_template, query_embedding, embedding_dim, activation,"
    " summary, answer, created_at, confidence, source_passage_ids, corpus_version) FROM STDIN WITH (FORMAT BINARY)"
)


@dataclass(frozen=True)
class BenchConfig:
    experiences: int
    tenants: int = 4
    queries: int = 1000
    writers: int = 8
    writes: int = 400
    race_bursts: int = 5
    seed: int = 0
    keep: bool = False
    database: str | None = None  # measure a store kept by an earlier run (``keep``) instead of loading one
    scope_indexes: bool = True  # give each tenant's corpus its own HNSW index (``livingrag admin index-scopes``)
    warmup: int = 50  # queries matched before the timed ones
    query_seed: int | None = None  # another stream of queries over the same store (None: the seed's own)
    skew: str = "none"  # tenant sizes: "none" (equal) or "zipf" (tenant t holds a share ~ 1 / (t + 1) ** zipf_s)
    zipf_s: float = 1.0


def _prime_at_most(n: int) -> int:
    def prime(k: int) -> bool:
        return k > 1 and all(k % d for d in range(2, math.isqrt(k) + 1))

    while not prime(n):
        n -= 1
    return n


class Synth:
    """Deterministic synthetic experiences and queries (see the module docstring)."""

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
    """The rows of one chunk in PostgreSQL's binary COPY format (columns of _COPY_EXPERIENCES)."""
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
    """experience_entities rows (unit-normalised weights) in binary COPY format, built in numpy."""
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


def run_store_bench(settings: Settings, cfg: BenchConfig, *, progress: Callable[[str], None]) -> dict[str, Any]:
    """Create a scratch database, load, measure, drop it (unless ``cfg.keep``); returns the report.
    With ``cfg.database`` it measures that kept database instead (its data regenerated from the
    seed, which must be the one it was loaded with) and never drops it."""
    from pydantic import SecretStr
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from livingrag.db import migrate
    from livingrag.db.engine import Database

    if cfg.experiences < cfg.tenants or cfg.tenants < 1:
        raise ValueError("need at least one experience per tenant")
    tenant_counts(cfg.experiences, cfg.tenants, cfg.skew, cfg.zipf_s)  # a bad --skew or --zipf-s, before any work
    if cfg.tenants > 1 and cfg.queries < cfg.tenants:
        raise ValueError(
            f"--queries ({cfg.queries}) must be at least --tenants ({cfg.tenants}): every tenant gets timed queries"
        )
    server = Database(settings.db)
    reuse = cfg.database is not None
    name = cfg.database or f"livingrag_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server.owner_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        exists = c.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is not None
        if reuse and not exists:
            admin.dispose()
            server.close()
            raise NotFound(f"no database {name!r} on the configured server (keep one with --keep)")
        mismatch = _skew_mismatch(c, name, cfg) if reuse else None
        if mismatch is not None:
            admin.dispose()
            server.close()
            raise InvalidInput(mismatch)
        if not reuse:
            c.execute(text(f'CREATE DATABASE "{name}"'))
            c.execute(text(f"COMMENT ON DATABASE \"{name}\" IS '{_skew_mark(cfg)}'"))
    url = make_url(server.owner_url).set(database=name).render_as_string(hide_password=False)
    db_settings = DBSettings(
        url=SecretStr(url), data_dir=settings.db.data_dir, app_role=settings.db.app_role, pool_size=16
    )
    db = Database(db_settings)
    report: dict[str, Any] = {
        "experiences": cfg.experiences,
        "tenants": cfg.tenants,
        "skew": cfg.skew,
        "zipf_s": cfg.zipf_s if cfg.skew == "zipf" else None,
        "database": name,
    }
    try:
        synth = Synth(cfg.experiences, cfg.tenants, cfg.seed, cfg.skew, cfg.zipf_s)
        if reuse:
            progress(f"measuring the kept database {name} ({cfg.experiences} experiences, seed {cfg.seed})")
            scopes, data = _regenerate(db, synth)
        else:
            migrate.upgrade(db)
            db = _reopen(db, db_settings)
            progress(f"scratch database {name}: loading {cfg.experiences} experiences for {cfg.tenants} tenants")
            scopes, data = _load(db, synth, report, progress)
        if cfg.scope_indexes:
            report |= _build_scope_indexes(db, progress)
        report |= _settings_report(settings) | {"scope_indexes": _scope_index_count(db)}
        report |= _wait_for_prewarm(server, progress)
        report |= _measure_match(db, settings, synth, scopes, data, cfg, progress)
        report |= _measure_writes(db, settings, synth, scopes, cfg, progress)
        report["cpu_count"] = os.cpu_count()
    finally:
        db.close()
        if not cfg.keep and not reuse:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        server.close()
    return report


def _skew_mark(cfg: BenchConfig) -> str:
    """The database comment that records how a scratch database's tenants were sized (JSON, no
    single quote), so that ``--database NAME`` regenerates the same synthetic data."""
    return json.dumps({"livingrag_bench": "store", "skew": cfg.skew, "zipf_s": cfg.zipf_s})


def _skew_mismatch(c: Any, name: str, cfg: BenchConfig) -> str | None:
    """Why the kept database ``name`` cannot be measured with ``cfg``'s tenant sizes (None if it
    can): its comment names the --skew and --zipf-s it was loaded with (none: loaded before skews
    existed, so split equally)."""
    from sqlalchemy import text

    raw = c.execute(
        text("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = :n"), {"n": name}
    ).scalar()
    try:
        mark = json.loads(raw) if raw else {}
    except ValueError:
        mark = {}
    skew = mark.get("skew", "none") if isinstance(mark, dict) else "none"
    zipf_s = float(mark.get("zipf_s", 1.0)) if isinstance(mark, dict) else 1.0
    if skew == cfg.skew and (skew != "zipf" or zipf_s == cfg.zipf_s):
        return None
    was = f"--skew {skew}" + (f" --zipf-s {zipf_s:g}" if skew == "zipf" else "")
    now = f"--skew {cfg.skew}" + (f" --zipf-s {cfg.zipf_s:g}" if cfg.skew == "zipf" else "")
    return f"the kept database {name} was loaded with {was}, not {now}: give the --skew and --zipf-s it was loaded with"


def _build_scope_indexes(db: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """The scope indexes an operator builds with ``livingrag admin index-scopes`` (every scope here:
    the smallest holds thousands of experiences); nothing to do on a kept store that has them."""
    from livingrag.experience.scope_indexing import index_scopes

    t0 = time.perf_counter()
    done = index_scopes(db, min_experiences=0, maintenance_work_mem="3GB", progress=progress)
    return {"scope_index_build_s": round(time.perf_counter() - t0, 1)} if done.built else {}


def _scope_index_count(db: Database) -> int:
    from livingrag.db.repositories.scope_indexes import list_scope_indexes

    with db.owner_session() as s:
        return sum(1 for i in list_scope_indexes(s) if i.valid)


def _wait_for_prewarm(server: Database, progress: Callable[[str], None]) -> dict[str, Any]:
    """Wait for the embedded server's read-ahead (``db.prewarm``) when this run started the server,
    so that the timed matches see the store as a restarted deployment does once it is warm; the
    report says what was read and how long the wait was (None: no read-ahead ran)."""
    warm = server.embedded.prewarm if server.embedded is not None else None
    if warm is None:
        return {"prewarm": None}
    progress("waiting for the read-ahead of the experience store (db.prewarm)")
    t0 = time.perf_counter()
    result = warm.wait()
    waited = round(time.perf_counter() - t0, 2)
    if result is None:
        return {"prewarm": {"error": warm.error, "wait_s": waited}}
    progress(f"  read {result.as_dict()['mb']} MB in {result.seconds:.1f} s")
    return {"prewarm": warm.report() | {"wait_s": waited}}


def _settings_report(settings: Settings) -> dict[str, Any]:
    """The matching settings the figures were measured with."""
    e = settings.experience
    return {
        "settings": {
            "candidates_m": e.candidates_m,
            "entity_hits": e.entity_hits,
            "rows_per_entity": e.rows_per_entity,
            "seed_entities_for_lookup": e.seed_entities_for_lookup,
            "hnsw_ef_search": e.hnsw_ef_search,
            "top_k": e.top_k,
            "alpha": e.alpha,
            "db_prewarm": settings.db.prewarm,
            "db_prewarm_buffers_fraction": settings.db.prewarm_buffers_fraction,
        }
    }


def _chunks(synth: Synth) -> Any:
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


def _collect(synth: Synth, rows: Any) -> list[dict[str, Any]]:
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


def _regenerate(db: Database, synth: Synth) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """The scopes and synthetic data of a kept benchmark database (checked against its row count)."""
    from sqlalchemy import text

    with db.owner_session() as s:
        scopes = [
            (int(t), int(c))
            for t, c in s.execute(
                text("SELECT t.id, c.id FROM tenants t JOIN corpora c ON c.tenant_id = t.id ORDER BY t.id, c.id")
            ).all()
        ]
        n = sum(synth.counts)
        loaded = int(s.execute(text("SELECT count(*) FROM experiences WHERE id <= :n"), {"n": n}).scalar_one())
    if len(scopes) != synth.tenants or loaded != n:
        raise InvalidInput(
            f"the kept database has {len(scopes)} tenants and {loaded} loaded experiences, not "
            f"{synth.tenants} and {n}: give the --experiences and --tenants it was loaded with"
        )
    return scopes, _collect(synth, _chunks(synth))


def _reopen(db: Database, db_settings: DBSettings) -> Database:
    from livingrag.db.engine import Database

    db.dispose()
    return Database(db_settings)


def _load(
    db: Database, synth: Synth, report: dict[str, Any], progress: Callable[[str], None]
) -> tuple[list[tuple[int, int]], list[dict[str, Any]]]:
    """Tenants, corpora, COPY of experiences, entity rows, then the indexes."""
    from sqlalchemy import text

    from livingrag.db.repositories import corpora, tenants

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
            cur.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('experiences', 'experience_entities')"
                " AND indexname NOT IN (SELECT conname FROM pg_constraint)"
            )
            rows = cur.fetchall()
            for idx, defn in rows:
                index_defs.append(defn)
                cur.execute(f'DROP INDEX "{idx}"')
            cur.execute("SET session_replication_role = replica")  # bulk load: skip FK triggers
            cur.execute("SET statement_timeout = 0")
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
                    with cur.copy(_COPY_EXPERIENCES) as cp:
                        cp.write(experience_rows_binary(next_id, tenant_id, corpus_id, topic, emb, ents, w, created))
                    with cur.copy(_COPY_ENTITIES) as cp:
                        cp.write(entity_rows_binary(next_id, tenant_id, corpus_id, ents, w))
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
            cur.execute("SELECT setval(pg_get_serial_sequence('experiences', 'id'), (SELECT max(id) FROM experiences))")
            cur.execute("SET session_replication_role = DEFAULT")
        conn.commit()
        report["load_s"] = round(time.perf_counter() - t0, 1)
        progress(f"loaded in {report['load_s']} s; building {len(index_defs)} indexes (HNSW last)")
        t1 = time.perf_counter()
        with conn.cursor() as cur:
            cur.execute("SET maintenance_work_mem = '3GB'")
            cur.execute("SET max_parallel_maintenance_workers = 2")
            for defn in sorted(index_defs, key=lambda d: "hnsw" in d):
                t2 = time.perf_counter()
                cur.execute(defn)
                conn.commit()
                progress(f"  {defn.split(' ON ')[0].replace('CREATE INDEX ', '')}: {time.perf_counter() - t2:.1f} s")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE experiences")
            cur.execute("VACUUM ANALYZE experience_entities")
        conn.autocommit = False
        report["index_build_s"] = round(time.perf_counter() - t1, 1)
    finally:
        raw.close()
    with db.owner_session() as s:
        report["entity_rows"] = int(s.execute(text("SELECT count(*) FROM experience_entities")).scalar_one())
    return scopes, data


def _bench_store(db: Database, settings: Settings, **gates: Any) -> ExperienceStore:
    from livingrag.experience.store import ExperienceStore

    s = settings.model_copy(
        update={
            # no text is embedded: eq. 12's template term and the template floors are off
            "experience": settings.experience.model_copy(
                update={"scaffold_lambda": 0.0, "scaffold_template_floor": 0.0, "fusion_template_floor": 0.0}
            ),
            "gates": settings.gates.model_copy(update=gates),
        }
    )
    return ExperienceStore(db, s, encoder=_NoEncoder())


class _ServerCPU:
    """CPU time of the local PostgreSQL server's processes (all children of the postmaster), read
    from the OS: with the client's own CPU time it measures a match's work independently of how
    busy a shared machine is. Unavailable for a remote server."""

    def __init__(self, db: Database) -> None:
        import psutil
        from sqlalchemy import text

        self.root = None
        try:
            with db.owner_engine.connect() as c:
                pid = int(c.execute(text("SELECT pg_backend_pid()")).scalar_one())
            proc = psutil.Process(pid).parent()
            if proc is not None and proc.name().startswith("postgres"):
                self.root = proc
        except Exception:  # a remote server, or no permission to read its processes
            self.root = None

    @property
    def available(self) -> bool:
        return self.root is not None

    def ms(self) -> float:
        if self.root is None:
            return 0.0
        import psutil

        total = 0.0
        for p in self.root.children():
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        return total * 1000.0


class _NoEncoder:
    """The benchmark never embeds text (lambda = 0, template floors 0, verifier off); being asked
    to is a bug."""

    def encode(self, texts: Any) -> np.ndarray:
        raise RuntimeError("the store benchmark does not embed text")


def _measure_match(
    db: Database,
    settings: Settings,
    synth: Synth,
    scopes: list[tuple[int, int]],
    data: list[dict[str, Any]],
    cfg: BenchConfig,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    with _one_blas_thread():
        return _match_loop(db, settings, synth, scopes, data, cfg, progress)


def _one_blas_thread() -> Any:
    """Limit BLAS to one thread while measuring: idle OpenBLAS threads spin, and on a small shared
    machine they would steal CPU from the database being measured."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional (it comes with scikit-learn)
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def _match_loop(
    db: Database,
    settings: Settings,
    synth: Synth,
    scopes: list[tuple[int, int]],
    data: list[dict[str, Any]],
    cfg: BenchConfig,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    from scipy import sparse

    from livingrag.types import QueryEncoding

    store = _bench_store(db, settings)
    k, alpha = settings.experience.top_k, settings.experience.alpha
    # exact full scan structures: unit-normalised activation maps as one CSR matrix per tenant
    mats = []
    for d in data:
        n, width = d["ents"].shape
        w = d["w"] / np.linalg.norm(d["w"], axis=1, keepdims=True)
        rows = np.repeat(np.arange(n), width)
        mats.append(
            sparse.csr_matrix((w.reshape(-1), (rows, d["ents"].reshape(-1))), shape=(n, int(d["ents"].max()) + 1))
        )
    if cfg.query_seed is not None:  # queries of another stream (the store stays the seed's)
        synth.rng = np.random.default_rng([cfg.seed, cfg.query_seed])
    warm = cfg.warmup
    queries = [(t, *synth.query(t)) for t in (np.arange(cfg.queries + warm) % synth.tenants).tolist()]
    total, pre, res, agree, cands = [], [], [], [], []
    tops: list[list[int]] = []
    server = _ServerCPU(db)
    progress(f"matching {cfg.queries} queries (after {warm} warm-up queries), back to back")
    # Matches run back to back and are checked afterwards: the exact scan below multiplies a
    # tenant's whole embedding matrix, and between two timed matches it would evict the caches of
    # both processes, which no deployment does to its store. CPU time is read around the whole
    # timed loop: the OS counts a process's CPU in clock ticks (10 ms), far coarser than a match.
    cpu0 = (0.0, 0.0)
    for n, (t, emb, base) in enumerate(queries):
        if n == warm:
            cpu0 = (time.process_time(), server.ms())
        tenant_id, corpus_id = scopes[t]
        enc = QueryEncoding(question="q", embedding=emb, mentions=(), seeds=(), base_activation=base)
        t0 = time.perf_counter()
        m = store.match(tenant_id, corpus_id, enc)
        wall = (time.perf_counter() - t0) * 1000
        if n < warm:
            continue
        total.append(wall)
        pre.append(m.timings["preselect_ms"])
        res.append(m.timings["rescore_ms"])
        cands.append(m.candidates)
        tops.append([x.id for x in m.top])
        if len(total) % 250 == 0:
            progress(f"  {len(total)} queries: p50 {np.percentile(total, 50):.2f} ms")
    client_cpu_ms = (time.process_time() - cpu0[0]) * 1000 / len(total)
    server_cpu_ms = (server.ms() - cpu0[1]) / len(total) if server.available else None
    progress("checking every top K against an exact full scan of its tenant's store")
    for (t, emb, base), got in zip(queries[warm:], tops, strict=True):
        # the paper's exact scan over the tenant's whole store
        d, mat = data[t], mats[t]
        e = (d["emb"] @ emb.astype(np.float32)).astype(np.float64)
        bvec = np.zeros(mat.shape[1])
        bn = math.sqrt(sum(v * v for v in base.values()))
        for ent, v in base.items():
            if ent < mat.shape[1]:
                bvec[ent] = v / bn
        s = alpha * e + (1 - alpha) * (mat @ bvec)
        kth = np.partition(-s, k - 1)[k - 1] * -1
        id_to_row = {int(d["ids"][r]): int(r) for r in np.argsort(-s)[: 4 * k]}
        hits = sum(1 for x in got if x in id_to_row and s[id_to_row[x]] >= kth - 1e-5)
        agree.append(hits / k)
    progress(f"  agreement {np.mean(agree):.4f}")
    extra: dict[str, Any] = {}
    if synth.tenants > 1:  # every tenant has timed queries (round robin, --queries >= --tenants)
        extra["tenant_figures"] = tenant_figures(synth.counts, [int(q[0]) for q in queries[warm:]], total, agree)
    return {
        "queries": len(total),
        "warmup": warm,
        "query_seed": cfg.query_seed,
        "k": k,
        "candidates_m": settings.experience.candidates_m,
        "candidates_mean": round(float(np.mean(cands)), 1),
        "match_ms_p50": percentile(total, 50, empty=NAN),
        "match_ms_p95": percentile(total, 95, empty=NAN),
        "match_client_cpu_ms": round(client_cpu_ms, 3),
        "match_server_cpu_ms": round(server_cpu_ms, 3) if server_cpu_ms is not None else None,
        "preselect_ms_p50": percentile(pre, 50, empty=NAN),
        "preselect_ms_p95": percentile(pre, 95, empty=NAN),
        "rescore_ms_p50": percentile(res, 50, empty=NAN),
        "rescore_ms_p95": percentile(res, 95, empty=NAN),
        "topk_agreement": round(float(np.mean(agree)), 4),
    } | extra


def _measure_writes(
    db: Database,
    settings: Settings,
    synth: Synth,
    scopes: list[tuple[int, int]],
    cfg: BenchConfig,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    from sqlalchemy import text

    from livingrag.experience.types import ExperienceCandidate, UsedPassage

    store = _bench_store(db, settings, verifier="none")
    # fresh candidates on every run, also over a kept store that holds an earlier run's writes (the
    # same ones again would be rejected as near-duplicates of those)
    with db.owner_session() as s:
        rows = int(s.execute(text("SELECT coalesce(max(id), 0) FROM experiences")).scalar_one())
        top = int(s.execute(text("SELECT coalesce(max(entity_id), 0) FROM experience_entities")).scalar_one())
    rng = np.random.default_rng([cfg.seed + 1, rows])
    next_entity = [max(10_000_000, top + 1)]
    lock = threading.Lock()

    def fresh_candidate(t: int, emb: np.ndarray, ents: dict[int, float], i: int) -> ExperienceCandidate:
        tenant_id, corpus_id = scopes[t]
        return ExperienceCandidate(
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            query=f"bench write {i}?",
            query_embedding=emb,
            base_activation=dict(list(ents.items())[:2]),
            final_activation=ents,
            explanation="Entity one leads to entity two. Entity two answers it.",
            answer=f"answer {i}",
            passages=(UsedPassage(1, "Entity one leads to entity two."),),
            corpus_version=0,
        )

    def novel(t: int, i: int) -> ExperienceCandidate:
        with lock:
            emb = rng.normal(size=DIM)
            first = next_entity[0]
            next_entity[0] += MAP_SIZE
        ents = {first + j: round(float(w), 6) for j, w in enumerate(synth.rank_w)}
        return fresh_candidate(t, emb, ents, i)

    per_writer = max(1, cfg.writes // cfg.writers)
    latencies: list[float] = []
    decisions: list[str] = []
    stages: dict[str, list[float]] = {}
    progress(f"write-back: {cfg.writers} writers x {per_writer} novel candidates")

    def writer(w: int) -> None:
        for j in range(per_writer):
            c = novel((w + j) % synth.tenants, w * per_writer + j)
            t0 = time.perf_counter()
            r = store.write_back(c)
            with lock:
                latencies.append((time.perf_counter() - t0) * 1000)
                decisions.append(r.decision)
                for key, v in r.timings.items():
                    stages.setdefault(key, []).append(v)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(cfg.writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    stored = decisions.count("stored")

    bursts = []
    progress(f"race: {cfg.race_bursts} bursts of {cfg.writers} near-duplicates raced by {cfg.writers} writers")
    for b in range(cfg.race_bursts):
        center = rng.normal(size=DIM)
        center /= np.linalg.norm(center)
        with lock:
            first = next_entity[0]
            next_entity[0] += MAP_SIZE
        ents = {first + j: round(float(w), 6) for j, w in enumerate(synth.rank_w)}
        cands = [
            fresh_candidate(b % synth.tenants, center + 0.01 * rng.normal(size=DIM) / math.sqrt(DIM), ents, 10**6 + i)
            for i in range(cfg.writers)
        ]
        barrier = threading.Barrier(cfg.writers)
        out: list[Any] = []

        def race(c: ExperienceCandidate, out: list[Any] = out, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            r = store.write_back(c)
            with lock:
                out.append(r)

        threads = [threading.Thread(target=race, args=(c,)) for c in cands]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        bursts.append(
            {
                "stored": sum(r.decision == "stored" for r in out),
                "rejected_at_recheck": sum(r.decision == "rejected_novelty" and "recheck_ms" in r.timings for r in out),
            }
        )
    return {
        "writers": cfg.writers,
        "writes": len(decisions),
        "writes_stored": stored,
        "writes_per_s": round(stored / wall, 1) if wall > 0 else float("nan"),
        "write_ms_p50": percentile(latencies, 50, empty=NAN),
        "write_ms_p95": percentile(latencies, 95, empty=NAN),
        "write_stage_ms_p50": {k: percentile(v, 50, empty=NAN) for k, v in stages.items()},
        "race_stored": max(b["stored"] for b in bursts) if bursts else None,
        "race_bursts": bursts,
    }


def _prewarm_line(p: dict[str, Any] | None) -> str:
    if p is None:
        return "none (the server was already running, or db.prewarm is off)"
    if "error" in p:
        return f"failed after {p['wait_s']} s: {p['error']}"
    cut = ", stopped at the memory budget" if p["truncated"] else ""
    line = f"read {p['mb']} MB in {p['files']} files in {p['seconds']} s before the warm-up{cut}"
    b = p.get("buffers")
    if b is not None:
        bcut = ", stopped at the budget" if b["truncated"] else ""
        line += f"; {b['mb']} MB of {b['relations']} relations loaded into shared buffers in {b['seconds']} s{bcut}"
    elif "buffers_error" in p:
        line += f"; nothing loaded into shared buffers: {p['buffers_error']}"
    return line


def format_report(report: dict[str, Any]) -> str:
    """The human-readable form printed without ``--json``."""
    skew = f" of zipf sizes, s = {report['zipf_s']:g}" if report.get("skew") == "zipf" else ""
    lines = [
        f"experiences          {report['experiences']:,} ({report['tenants']} tenants{skew}, "
        f"{report.get('entity_rows', 0):,} entity rows)",
        f"load / index build   {report.get('load_s')} s / {report.get('index_build_s')} s "
        f"(scope indexes: {report.get('scope_indexes', 0)}, built in {report.get('scope_index_build_s', '-')} s)",
        f"match latency        p50 {report['match_ms_p50']} ms, p95 {report['match_ms_p95']} ms "
        f"({report['queries']} queries, {report['candidates_mean']} candidates of M={report['candidates_m']})",
        f"  CPU per match      client {report.get('match_client_cpu_ms')} ms, server "
        f"{report.get('match_server_cpu_ms') if report.get('match_server_cpu_ms') is not None else 'n/a'} ms "
        "(means over the timed loop)",
        f"  SQL preselection   p50 {report['preselect_ms_p50']} ms, p95 {report['preselect_ms_p95']} ms",
        f"  numpy rescoring    p50 {report['rescore_ms_p50']} ms, p95 {report['rescore_ms_p95']} ms",
        f"top-{report['k']} agreement      {report['topk_agreement']} (vs an exact full scan)",
        f"prewarm              {_prewarm_line(report.get('prewarm'))}",
        *(
            format_tenant_figures(report["tenant_figures"], list_tenants=report["tenants"] <= 16)
            if "tenant_figures" in report
            else []
        ),
        f"write-back           {report['writes_per_s']} stored/s with {report['writers']} writers "
        f"(p50 {report['write_ms_p50']} ms, p95 {report['write_ms_p95']} ms; verifier off)",
        f"race                 {report['race_stored']} stored of {report['writers']} near-duplicates "
        f"(bursts: {json.dumps(report['race_bursts'])})",
    ]
    return "\n".join(lines)
