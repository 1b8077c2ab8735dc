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
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from livingrag.bench.stats import percentile
from livingrag.bench.store_data import DIM, MAP_SIZE, Synth, load_synthetic, regenerate, reopen
from livingrag.bench.tenant_figures import format_tenant_figures, tenant_counts, tenant_figures
from livingrag.config import DBSettings, Settings
from livingrag.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from livingrag.db.engine import Database
    from livingrag.experience.store import ExperienceStore

log = logging.getLogger(__name__)
NAN = float("nan")  # a figure with no sample


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


def run_store_bench(settings: Settings, cfg: BenchConfig, *, progress: Callable[[str], None]) -> dict[str, Any]:
    """Create a scratch database, load, measure, drop it (unless ``cfg.keep``); returns the report.
    With ``cfg.database`` it measures that kept database instead (its data regenerated from the
    seed, which must be the one it was loaded with) and never drops it."""
    from pydantic import SecretStr

    from livingrag.db import migrate
    from livingrag.db.engine import Database
    from livingrag.db.repositories import databases
    from livingrag.db.scratch import autocommit_engine, database_url

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
    admin = autocommit_engine(server.owner_url)
    with admin.connect() as c:
        exists = databases.database_exists(c, name)
        if reuse and not exists:
            admin.dispose()
            server.close()
            raise NotFound(f"no database {name!r} on the configured server (keep one with --keep)")
        mismatch = _skew_mismatch(databases.database_comment(c, name), name, cfg) if reuse else None
        if mismatch is not None:
            admin.dispose()
            server.close()
            raise InvalidInput(mismatch)
        if not reuse:
            databases.create_database(c, name, comment=_skew_mark(cfg))
    url = database_url(server.owner_url, name)
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
            scopes, data = regenerate(db, synth)
        else:
            migrate.upgrade(db)
            db = reopen(db, db_settings)
            progress(f"scratch database {name}: loading {cfg.experiences} experiences for {cfg.tenants} tenants")
            scopes, data = load_synthetic(db, synth, report, progress)
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
                databases.drop_database(c, name)
        admin.dispose()
        server.close()
    return report


def _skew_mark(cfg: BenchConfig) -> str:
    """The database comment that records how a scratch database's tenants were sized (JSON, no
    single quote), so that ``--database NAME`` regenerates the same synthetic data."""
    return json.dumps({"livingrag_bench": "store", "skew": cfg.skew, "zipf_s": cfg.zipf_s})


def _skew_mismatch(raw: str | None, name: str, cfg: BenchConfig) -> str | None:
    """Why the kept database ``name`` cannot be measured with ``cfg``'s tenant sizes (None if it
    can): its comment ``raw`` names the --skew and --zipf-s it was loaded with (none: loaded before
    skews existed, so split equally)."""
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

        from livingrag.db.repositories.server_settings import backend_pid

        self.root = None
        try:
            with db.owner_engine.connect() as c:
                pid = backend_pid(c)
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
    from livingrag.db.repositories.bench_data import highest_ids
    from livingrag.experience.types import ExperienceCandidate, UsedPassage

    store = _bench_store(db, settings, verifier="none")
    # fresh candidates on every run, also over a kept store that holds an earlier run's writes (the
    # same ones again would be rejected as near-duplicates of those)
    with db.owner_session() as s:
        rows, top = highest_ids(s)
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
