"""``livingrag bench``: performance benchmarks (never part of the test suite)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from livingrag.cli.common import console, examples, load_settings, print_json, tenant_option

app = typer.Typer(
    help="Benchmarks (never part of the test suite)."
    + examples(
        "livingrag bench retrieval --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench reuse --dataset musique --data-dir ../shared/datasets/musique_reuse --orders 3",
        "livingrag bench store --experiences 100000",
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench api --url http://127.0.0.1:8000 --key lrg_... --corpus 1",
        "livingrag bench graph-load --tenant bench --corpus bench-2wikimultihopqa",
        "livingrag bench llm",
        "livingrag bench answer-types --run benchmarks/results/2wiki-300-offline",
        "livingrag bench mixed-load --workers 2 --seconds 60",
        "livingrag bench ab --a HEAD~1 --pairs 3 --cmd 'livingrag bench mixed-load --seconds 60 --json'",
    ),
    no_args_is_help=True,
)


def _ask_body(text: str) -> dict[str, object]:
    """``--ask-body``: a JSON object (BadParameter naming the option otherwise)."""
    import json

    try:
        body = json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"--ask-body is no JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise typer.BadParameter("--ask-body must be a JSON object")
    return body


def _assignments(values: list[str], option: str) -> dict[str, str]:
    """``NAME=VALUE`` options as a dict."""
    out: dict[str, str] = {}
    for v in values:
        name, eq, value = v.partition("=")
        if not eq or not name:
            raise typer.BadParameter(f"{option} takes NAME=VALUE, got {v!r}")
        out[name] = value
    return out


@app.command(
    help="Measure the configured answer model's speed through the real client path (for provider=local: the "
    "supervised llama.cpp process): prompt-evaluation and generation tokens per second (medians over the "
    "rounds), load time, and the runtime's build (its system info, and whether it is the portable build that "
    "scripts/install.sh records)."
    + examples(
        "livingrag bench llm",
        "livingrag bench llm --rounds 10 --prompt-words 600 --gen-tokens 128 --json",
        "LIVINGRAG_LLM__MODEL=qwen2.5-coder-1.5b LIVINGRAG_LLM__THREADS=2 livingrag bench llm",
    )
)
def llm(
    rounds: int = typer.Option(5, "--rounds", min=1, max=1000, help="Prompt-only + generation request pairs."),
    prompt_words: int = typer.Option(300, "--prompt-words", min=10, max=20_000, help="Words in each prompt."),
    gen_tokens: int = typer.Option(64, "--gen-tokens", min=2, max=4096, help="Tokens each generation asks for."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.llm_throughput import measure_llm
    from livingrag.generation.providers import build_llm

    settings = load_settings()
    model = build_llm(settings.llm, data_dir=settings.db.data_dir)
    try:
        summary = measure_llm(
            settings, model, rounds=rounds, prompt_words=prompt_words, gen_tokens=gen_tokens
        ).summary()
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()
    if as_json:
        print_json(summary)
        return
    console.print(
        f"model {summary['model']} (provider {summary['provider']}, {summary['threads'] or '-'} threads), "
        f"loaded in {summary['load_s']} s\n"
        f"prompt evaluation: {summary['prompt_tps_median']} tokens/s (median of {rounds}; "
        f"{summary['prompt_tokens']} prompt tokens)\n"
        f"generation: {summary['gen_tps_median']} tokens/s (median of {len(summary['gen_tps'])}; "
        f"{gen_tokens} tokens asked)\n"
        f"[dim]runtime: {summary['system_info'] or '-'}\nbuild: {summary['build'] or '-'}[/dim]",
        highlight=False,
    )


@app.command(
    help="Load a running HTTP service (`livingrag serve`) with concurrent clients that ask questions and add "
    "passages for a while, then print latency percentiles (p50/p95/p99) per request kind, throughput and "
    "status counts. Adds passages to the corpus you name: use a scratch corpus. With --flood-key and "
    "--flood-corpus it measures fairness instead: the tenant of --key asks at --rate questions/s, alone and then "
    "while the flood tenant's --clients clients ask and half as many send index jobs and passage adds; it prints "
    "both p95s "
    "and their ratio. With --compare-standby it starts what it measures itself (no --url, --key or --corpus): the "
    "loopback LLM, an embedded PostgreSQL and a streaming standby of it, and two services on it, one reading from "
    "the standby (LIVINGRAG_DB__READ_URLS) and one on the primary alone; it runs the same load on each (--rounds "
    "pairs, in alternating order) and prints, per run, answers, latencies and the CPU per answered question of the "
    "primary, the standby and the service (their process trees in /proc)."
    + examples(
        "livingrag bench api --url http://127.0.0.1:8000 --key lrg_... --corpus 1",
        "livingrag bench api --url http://127.0.0.1:8000 --key lrg_... --corpus 1 --clients 32 --seconds 60 --json",
        "livingrag bench api --key lrg_B... --corpus 2 --flood-key lrg_A... --flood-corpus 1 --clients 8 --seconds 20",
        "livingrag bench api --compare-standby --clients 16 --seconds 30 --rounds 2 --json",
    )
)
def api(
    url: str = typer.Option("http://127.0.0.1:8000", "--url", help="Base URL of the service."),
    key: str | None = typer.Option(
        None, "--key", envvar="LIVINGRAG_API_KEY", help="A tenant's API key (not with --compare-standby)."
    ),
    corpus: int | None = typer.Option(None, "--corpus", min=1, help="Corpus id (the tenant's)."),
    clients: int = typer.Option(32, "--clients", min=1, max=1024, help="Concurrent clients."),
    seconds: float = typer.Option(60.0, "--seconds", min=1, help="Duration."),
    add_every: int = typer.Option(5, "--add-every", min=0, help="Every n-th request of a client adds a passage."),
    question: list[str] = typer.Option([], "--question", help="Questions to ask (repeatable; default: built-in)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    flood_key: str | None = typer.Option(None, "--flood-key", help="Fairness run: the flooding tenant's key."),
    flood_corpus: int | None = typer.Option(None, "--flood-corpus", min=1, help="Fairness run: its corpus id."),
    rate: float = typer.Option(4.0, "--rate", min=0.1, help="Fairness run: questions/s of the --key tenant."),
    compare_standby: bool = typer.Option(
        False, "--compare-standby", help="Measure reads on a standby against the primary alone (see above)."
    ),
    rounds: int = typer.Option(1, "--rounds", min=1, max=20, help="--compare-standby: pairs of runs."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="--compare-standby: `serve --workers`."),
    ask_body: str = typer.Option(
        '{"ablations": ["gate"]}', "--ask-body", help="--compare-standby: JSON merged into every question's body."
    ),
    env: list[str] = typer.Option([], "--env", help="--compare-standby: NAME=VALUE for both services (repeatable)."),
    server_log: Path | None = typer.Option(None, "--server-log", help="--compare-standby: the services' output."),
) -> None:
    from livingrag.bench.http_load import DEFAULT_QUESTIONS, format_result, load_result, run_load, run_two_tenants

    if compare_standby:
        _compare_standby(clients, seconds, add_every, rounds, workers, ask_body, env, server_log, as_json)
        return
    if key is None or corpus is None:
        raise typer.BadParameter("give --key and --corpus (or --compare-standby)")
    if (flood_key is None) != (flood_corpus is None):
        raise typer.BadParameter("give --flood-key and --flood-corpus together")
    if flood_key is not None and flood_corpus is not None:
        fair = run_two_tenants(
            url, (flood_key, flood_corpus), (key, corpus), seconds=seconds, flood_ask_clients=clients,
            flood_index_clients=max(1, clients // 2), asker_rate_per_s=rate, asker_body={"mode": "linear"},
        )  # fmt: skip
        fs = fair.summary()
        if as_json:
            print_json(fs)
            return
        for name in ("b_unloaded", "b_loaded", "a_flood"):
            console.print(f"{name}: " + ", ".join(f"{k}: {v}" for k, v in fs[name].items()), highlight=False)
        console.print(f"p95 of the asking tenant, loaded / unloaded: {fs['b_p95_ratio']}")
        return

    report = run_load(
        url, key, corpus, clients=clients, seconds=seconds, add_every=add_every,
        questions=question or DEFAULT_QUESTIONS,
    )  # fmt: skip
    result = load_result(report)
    if as_json:
        print_json(result)
    else:
        console.print(format_result(result, add_every=add_every), highlight=False, markup=False)


def _compare_standby(
    clients: int,
    seconds: float,
    add_every: int,
    rounds: int,
    workers: int,
    ask_body: str,
    env: list[str],
    server_log: Path | None,
    as_json: bool,
) -> None:
    """``bench api --compare-standby`` (:mod:`livingrag.bench.replica_load`)."""

    from livingrag.bench.replica_load import ReplicaLoadConfig, format_comparison, run_replica_comparison
    from livingrag.cli.common import err_console

    body = _ask_body(ask_body)
    cfg = ReplicaLoadConfig(
        clients=clients, seconds=seconds, add_every=add_every, rounds=rounds, workers=workers, ask_body=body,
        server_env=_assignments(env, "--env"), server_log=server_log,
    )  # fmt: skip
    result = run_replica_comparison(cfg, progress=lambda m: err_console.print(f"[dim]{m}[/dim]", highlight=False))
    if as_json:
        print_json(result)
    else:
        console.print(format_comparison(result), highlight=False, markup=False)


class Skew(StrEnum):
    """``bench store --skew``: how the experiences are split among the tenants."""

    none = "none"
    zipf = "zipf"


@app.command(
    help="Benchmark the experience store on synthetic experiences (384-d embeddings, ~30 entities per map, tenants "
    "mixed) in a scratch database of the configured server, dropped afterwards: match latency (SQL preselection "
    "and numpy rescoring), top-K agreement with an exact full scan, write-back throughput of concurrent writers, "
    "and near-duplicates stored when raced."
    + examples(
        "livingrag bench store --experiences 100000",
        "livingrag bench store --experiences 1000000 --tenants 4 --json",
        "livingrag bench store --experiences 100000 --tenants 100 --skew zipf",
        "livingrag bench store --experiences 100000 --database livingrag_bench_0123456789",
    )
)
def store(
    experiences: int = typer.Option(..., "--experiences", min=1, help="Experiences to load."),
    tenants: int = typer.Option(4, "--tenants", min=1, max=1000, help="Tenants sharing the store."),
    skew: Skew = typer.Option(
        Skew.none,
        "--skew",
        case_sensitive=False,
        help="Tenant sizes: none (equal) or zipf (tenant t, largest first, holds a share proportional to "
        "1/(t+1)^s, every tenant at least one). With several tenants the report adds per-tenant figures: the "
        "median-sized and the largest tenant's latency, agreement per size decile, and issue 21's target 3.",
    ),
    zipf_s: float = typer.Option(1.0, "--zipf-s", min=0.0, help="The zipf exponent s (with --skew zipf)."),
    queries: int = typer.Option(1000, "--queries", min=1, help="Queries matched (and checked against a full scan)."),
    writers: int = typer.Option(8, "--writers", min=1, max=64, help="Concurrent write-back writers."),
    writes: int = typer.Option(400, "--writes", min=1, help="Novel candidates written for the throughput."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the synthetic data."),
    warmup: int = typer.Option(50, "--warmup", min=0, help="Queries matched before the timed ones."),
    query_seed: int | None = typer.Option(
        None,
        "--query-seed",
        help="Match another stream of queries over the same store (with --database: queries the kept store has "
        "not seen, so no cache holds exactly their pages).",
    ),
    keep: bool = typer.Option(False, "--keep", help="Keep the scratch database."),
    database: str | None = typer.Option(
        None,
        "--database",
        help="Measure a database kept by --keep instead of loading one (give the same --experiences, --tenants, "
        "--skew, --zipf-s and --seed); it is not dropped. For comparing settings (LIVINGRAG_EXPERIENCE__*) on one "
        "store.",
    ),
    scope_indexes: bool = typer.Option(
        True,
        "--scope-indexes/--no-scope-indexes",
        help="Give each tenant's corpus its own HNSW index before measuring, as `livingrag admin index-scopes` "
        "does (--no-scope-indexes: match through the shared index alone).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.store_bench import BenchConfig, format_report, run_store_bench

    cfg = BenchConfig(
        experiences=experiences,
        tenants=tenants,
        skew=skew.value,
        zipf_s=zipf_s,
        queries=queries,
        writers=writers,
        writes=writes,
        seed=seed,
        keep=keep,
        database=database,
        scope_indexes=scope_indexes,
        warmup=warmup,
        query_seed=query_seed,
    )

    def progress(msg: str) -> None:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    report = run_store_bench(load_settings(), cfg, progress=progress)
    if as_json:
        print_json(report)
    else:
        console.print(format_report(report), highlight=False)


@app.command(
    name="graph-load",
    help="Time what loading a corpus's graph costs a process that serves it (medians of --rounds): a full load, "
    "the read after an update or deletion (every id and edge again), and the read after passages were only "
    "added (the added rows alone), each with the build of the graph. The appended read is measured in a "
    "transaction that is rolled back, so nothing is written; run it on an idle server, since a writer of the "
    "corpus waits for that transaction."
    + examples(
        "livingrag bench graph-load --tenant bench --corpus bench-2wikimultihopqa",
        "livingrag bench graph-load --corpus wiki --added 1 --added 64 --rounds 10 --json",
    ),
)
def graph_load(
    corpus: str = typer.Option(..., "--corpus", "-c", help="Corpus name or id."),
    tenant: str = tenant_option(),
    added: list[int] = typer.Option(
        [1, 16], "--added", help="Newest passages read as added (repeat the option for several counts)."
    ),
    rounds: int = typer.Option(5, "--rounds", min=1, max=1000, help="Loads timed per kind."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.graph_load import format_report, run_graph_load_bench
    from livingrag.cli.common import err_console, open_database, resolve_tenant
    from livingrag.corpus import service

    with open_database(load_settings()) as db:
        tid = resolve_tenant(db, tenant)
        info = service.get_corpus(db, tid, int(corpus) if corpus.isdigit() else corpus)
        report = run_graph_load_bench(
            db, tid, info, added=added, rounds=rounds, progress=lambda m: err_console.print(f"[dim]{m}[/dim]")
        )
    if as_json:
        print_json(report.as_dict())
    else:
        console.print(format_report(report), highlight=False)


@app.command(
    help="Benchmark the answer pipeline's own overhead outside the LLM call (p50/p95 of total minus LLM, and of "
    "encode, match, retrieve, prompt and query log) on a multi-hop QA corpus: index it if needed (tenant 'bench', "
    "as `bench retrieval` does), clear its experiences, then run the questions through LivingRAG in living mode, "
    "awaiting each write-back so that matching sees the store grow. The LLM is a deterministic OpenAI-compatible "
    "server on loopback started in-process (through the real openai provider), or --llm configured."
    + examples(
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa",
        "livingrag bench pipeline --dataset 2wikimultihopqa --data-dir DATA --limit 50 --llm configured --json",
    )
)
def pipeline(
    dataset: str = typer.Option(..., "--dataset", help="2wikimultihopqa, musique or hotpotqa."),
    data_dir: Path = typer.Option(..., "--data-dir", help="The dataset's folder (as in ../shared/datasets)."),
    limit: int = typer.Option(200, "--limit", min=1, help="Questions to run (the first N)."),
    llm: str = typer.Option("loopback", "--llm", help="loopback (in-process test server) or configured."),
    tenant: str = typer.Option("bench", "--tenant", help="Tenant that owns the benchmark corpora (created)."),
    keep_store: bool = typer.Option(False, "--keep-store", help="Start from the experiences already stored."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.bench.pipeline import format_report, run_pipeline_bench
    from livingrag.bench.retrieval import load_dataset
    from livingrag.cli.common import err_console, open_database
    from livingrag.corpus.progress import NullProgress, RichProgress
    from livingrag.errors import InvalidInput

    if llm not in ("loopback", "configured"):
        raise InvalidInput(f"unknown --llm {llm!r}; use loopback or configured")
    settings = load_settings()
    data = load_dataset(dataset, data_dir)
    progress = NullProgress() if quiet else RichProgress(err_console)
    with open_database(settings) as db:
        out = run_pipeline_bench(
            db,
            settings,
            data,
            tenant=tenant,
            limit=limit,
            llm=llm,  # type: ignore[arg-type]  # a str checked against the two Literal values above
            keep_store=keep_store,
            progress=progress,
            log=None if quiet else (lambda msg: err_console.print(f"[dim]{msg}[/dim]")),
        )
    if as_json:
        print_json(out)
    else:
        console.print(format_report(out), highlight=False)


@app.command(
    name="reuse",
    help="Measure what experience reuse can do for retrieval, without the LLM: replay a question stream in "
    "several orders (order 0 = the file order, the others seeded shuffles) with an in-memory store as it would be "
    "at each question (every earlier question's map and top-5 passages, ungated), and print per-passage "
    "Recall@2/@5 (share of a question's gold passages in the top k, averaged over questions) for the base "
    "retriever, eq. 8 fusion with and without the fusion floor, maps stored before or after fusion, passage-level "
    "memory (in the PPR reset or a top-k slot), the same-group oracles on MuSiQue (only earlier questions that "
    "share a single-hop sub-question) and two union bounds; then how often a related earlier experience exists, "
    "is matched (eq. 7 top K), is used, and the scaffold oracle (an earlier gold answer or sub-answer equals a "
    "sub-answer of the question). With --answers (an answer model's `eval stream` run), also the room that "
    "model leaves for reuse: its right answers, the wrong ones an earlier right answer could fix, the right ones "
    "an earlier wrong answer could mislead, and the ceiling. The corpus is indexed once (tenant 'bench', as "
    "`bench retrieval`); the "
    "retrieval preset is the dataset's. Experience settings come from LIVINGRAG_EXPERIENCE__*."
    + examples(
        "livingrag bench reuse --dataset musique --data-dir ../shared/datasets/musique_reuse --orders 3",
        "livingrag bench reuse --dataset musique --data-dir ../shared/datasets/musique_reuse --orders 5 --json",
        "livingrag bench reuse --dataset musique --data-dir ../shared/datasets/musique_reuse --gamma 2 --gamma 8",
        "livingrag bench reuse --dataset musique --data-dir ../shared/datasets/musique_reuse "
        "--answers runs/musique-linear/records.jsonl",
        "LIVINGRAG_EXPERIENCE__BETA=1.0 livingrag bench reuse --dataset 2wikimultihopqa --data-dir DATA --limit 300",
    ),
)
def reuse(
    dataset: str = typer.Option(..., "--dataset", help="musique, 2wikimultihopqa, hotpotqa, ... (as eval stream)."),
    data_dir: Path = typer.Option(
        ..., "--data-dir", help="The dataset's folder (e.g. ../shared/datasets/musique_reuse)."
    ),
    orders: int = typer.Option(3, "--orders", min=1, max=100, help="Stream orders (0 = file order, then shuffles)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the shuffled orders."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N questions."),
    preset: str | None = typer.Option(None, "--preset", help="Retrieval preset (default: the dataset's)."),
    tenant: str = typer.Option("bench", "--tenant", help="Tenant that owns the benchmark corpora (created)."),
    gamma: list[float] = typer.Option(
        [],
        "--gamma",
        min=0,
        help="Also run passages→reset (and its oracle) with this prior strength (repeatable; default only beta).",
    ),
    answers: Path | None = typer.Option(
        None,
        "--answers",
        help="records.jsonl of an `eval stream` run with LinearRAG over this dataset: also print the room its "
        "answer model leaves for answer and finding reuse (an oracle; LinearRAG keeps no state, so any order).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from livingrag.bench.reuse_replay import format_report, run_reuse_bench
    from livingrag.bench.run_answers import linear_correctness
    from livingrag.cli.common import err_console, open_database
    from livingrag.corpus.progress import NullProgress, RichProgress
    from livingrag.evaluation.datasets import load_dataset

    settings = load_settings()
    data = load_dataset(dataset, data_dir)
    answer_model = None if answers is None else linear_correctness(answers)
    progress = NullProgress() if quiet else RichProgress(err_console)
    with open_database(settings) as db:
        out = run_reuse_bench(
            db,
            settings,
            data,
            dataset_name=dataset,
            orders=orders,
            seed=seed,
            tenant=tenant,
            preset=preset,
            limit=limit,
            gammas=gamma,
            answer_model=answer_model,
            answer_source=None if answers is None else str(answers),
            progress=progress,
            log=None if quiet else (lambda msg: err_console.print(f"[dim]{msg}[/dim]")),
        )
    if as_json:
        print_json(out)
    else:
        console.print(format_report(out), highlight=False, markup=False)


@app.command(
    name="answer-types",
    help="Replay the answer-type rule of the answer-form check (gates.answer_form) over kept `eval stream` runs, "
    "without a database or an LLM: for each run folder's records.jsonl, the candidates that were stored (and those "
    "that reached the grounding gate) are checked with and without the spaCy NER labels of their answer "
    "(models.ner_model), and the answers the labels alone would reject are counted as wrong ones removed or right "
    "ones lost (Contain against the gold answers), per run, in total and per answer kind, with each removed answer."
    + examples(
        "livingrag bench answer-types --run benchmarks/results/2wiki-300-offline",
        "livingrag bench answer-types --run benchmarks/results/musique-100-offline "
        "--run benchmarks/results/2wiki-300-offline --json",
    ),
)
def answer_types(
    run: list[Path] = typer.Option(..., "--run", help="A run folder with records.jsonl (repeat for several)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.answer_types import format_report, measure_runs

    m = load_settings().models
    report = measure_runs(run, model=m.ner_model, batch_size=m.ner_batch_size)
    if as_json:
        print_json(report)
    else:
        console.print(format_report(report), highlight=False, markup=False)


@app.command(
    name="mixed-load",
    help="The standard mixed load on a service this command starts: the loopback LLM and `livingrag serve --workers "
    "N` on an embedded server in a fresh temporary data directory (or --data-dir), a new tenant with the ten "
    "passages of the test corpus (or an existing corpus: --tenant-id and --corpus-id), then --clients closed-loop "
    "clients for --seconds, every --add-every-th request a passage add, the questions with --ask-body (default: the "
    "gate off, so every answer is a write-back candidate). Prints what `bench api` prints (latency percentiles, "
    "throughput, the server's stage timings, statuses, issue 21's targets) and the corpus's write-back decisions "
    "read before the server stops. The server inherits this shell's LIVINGRAG_* settings except the database, the "
    "LLM and the admin key; --env sets more for it alone."
    + examples(
        "livingrag bench mixed-load",
        "livingrag bench mixed-load --workers 2 --seconds 60 --json",
        'livingrag bench mixed-load --ask-body \'{"mode": "linear"}\' --env LIVINGRAG_API__WRITEBACK_QUEUE_SIZE=1',
        "livingrag bench mixed-load --data-dir runs/w2-copy --tenant-id 1 --corpus-id 1 --json",
        "livingrag bench mixed-load --source ../old-checkout --json",
    ),
)
def mixed_load(
    workers: int = typer.Option(2, "--workers", min=1, max=64, help="`livingrag serve --workers`."),
    clients: int = typer.Option(32, "--clients", min=1, max=1024, help="Concurrent clients."),
    seconds: float = typer.Option(60.0, "--seconds", min=1, help="Duration of the load."),
    add_every: int = typer.Option(5, "--add-every", min=0, help="Every n-th request of a client adds a passage."),
    ask_body: str = typer.Option(
        '{"ablations": ["gate"]}', "--ask-body", help="JSON merged into every question's request body."
    ),
    env: list[str] = typer.Option([], "--env", help="NAME=VALUE in the server's environment (repeatable)."),
    serve_arg: list[str] = typer.Option([], "--serve-arg", help="One more argument of `livingrag serve` (repeatable)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="The embedded server's data directory (default: a fresh temporary one, removed)."
    ),
    tenant_id: int | None = typer.Option(None, "--tenant-id", min=1, help="Load this tenant's --corpus-id."),
    corpus_id: int | None = typer.Option(None, "--corpus-id", min=1, help="An existing corpus in --data-dir."),
    source: Path | None = typer.Option(
        None,
        "--source",
        help="Serve the package of this source tree (a checkout of another revision) instead of the one this "
        "command runs; `bench ab --no-pythonpath` gives it as $AB_TREE.",
    ),
    server_log: Path | None = typer.Option(None, "--server-log", help="Append the server's output to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:

    from livingrag.bench.http_load import format_result
    from livingrag.bench.mixed_load import MixedLoadConfig, format_writeback, run_mixed_load
    from livingrag.cli.common import err_console

    body = _ask_body(ask_body)
    try:
        cfg = MixedLoadConfig(
            workers=workers,
            clients=clients,
            seconds=seconds,
            add_every=add_every,
            ask_body=body,
            server_env=_assignments(env, "--env"),
            serve_args=tuple(serve_arg),
            data_dir=data_dir,
            tenant_id=tenant_id,
            corpus_id=corpus_id,
            source=source,
            server_log=server_log,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    result = run_mixed_load(cfg, progress=lambda m: err_console.print(f"[dim]{m}[/dim]", highlight=False))
    if as_json:
        print_json(result)
        return
    console.print(format_result(result, add_every=add_every), highlight=False, markup=False)
    console.print(format_writeback(result["writeback"]), highlight=False, markup=False)


@app.command(
    name="ab",
    help="Run a benchmark command on two revisions (or two settings) in interleaved pairs (A B, B A, A B, ...) and "
    "print each figure's mean on both, the paired difference B - A and its 95 % t interval, and in how many pairs B "
    "was higher. A revision other than WORKTREE (the working tree, uncommitted changes included) is checked out "
    "with `git worktree add` into a temporary folder, removed afterwards. Every run is `sh -c CMD` in the current "
    "directory with this Python environment and the revision's tree first on PYTHONPATH (PYTHONSAFEPATH=1), so it "
    "runs that revision's package; it also sees AB_ARM, AB_PAIR, AB_REVISION, AB_COMMIT and AB_TREE. The figures "
    "are the numbers of the last JSON object the command prints (its --json), flattened to dotted keys; the table "
    "leaves out figures identical in every run (--all shows them). --out DIR writes results.json (every run's JSON) "
    "and a README.md with this exact command."
    + examples(
        "livingrag bench ab --a HEAD~1 --b HEAD --pairs 3 --cmd 'livingrag bench retrieval --dataset "
        "2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa --limit 100 --json -q'",
        "livingrag bench ab --pairs 2 --cmd 'livingrag bench mixed-load --json' --figure 'ask.*' --figure "
        "answered_rps --out benchmarks/results/my-change",
        "livingrag bench ab --a WORKTREE --b WORKTREE --b-env LIVINGRAG_MODELS__INDEX_THREADS=1 --pairs 2 "
        "--cmd 'livingrag bench mixed-load --json'",
        "livingrag bench ab --a 181042f --no-pythonpath "
        "--cmd 'livingrag bench mixed-load --source \"$AB_TREE\" --json'",
    ),
)
def ab(
    cmd: str = typer.Option(..., "--cmd", help="The benchmark command (a shell command line) printing JSON."),
    a: str = typer.Option("HEAD", "--a", help="Revision A (a commit, branch or tag; WORKTREE: the working tree)."),
    b: str = typer.Option("WORKTREE", "--b", help="Revision B (default: the working tree)."),
    pairs: int = typer.Option(3, "--pairs", min=1, max=1000, help="Pairs of runs."),
    b_cmd: str | None = typer.Option(None, "--b-cmd", help="B's command, where it differs from --cmd."),
    env: list[str] = typer.Option([], "--env", help="NAME=VALUE for every run (repeatable)."),
    a_env: list[str] = typer.Option([], "--a-env", help="NAME=VALUE for A's runs (repeatable)."),
    b_env: list[str] = typer.Option([], "--b-env", help="NAME=VALUE for B's runs (repeatable)."),
    before_each: str | None = typer.Option(
        None, "--before-each", help="A shell command run before every run (e.g. stopping a server, dropping caches)."
    ),
    after_each: str | None = typer.Option(
        None, "--after-each", help="A shell command run after every run, also a failed one."
    ),
    before_a: str | None = typer.Option(None, "--before-a", help="A shell command run before each of A's runs."),
    before_b: str | None = typer.Option(None, "--before-b", help="A shell command run before each of B's runs."),
    pause: float = typer.Option(0.0, "--pause", min=0, help="Seconds of rest after each run."),
    timeout: float | None = typer.Option(None, "--timeout", min=1, help="A run's wall-clock limit in seconds."),
    pythonpath: bool = typer.Option(
        True, "--pythonpath/--no-pythonpath", help="Put the revision's tree first on PYTHONPATH (else only $AB_TREE)."
    ),
    figure: list[str] = typer.Option([], "--figure", help="Only figures matching this glob (repeatable)."),
    show_all: bool = typer.Option(False, "--all", help="Also show the figures identical in every run."),
    out: Path | None = typer.Option(None, "--out", help="Write results.json and README.md into this folder."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    from livingrag.bench.ab import ABConfig, ArmSpec, format_report, run_ab, write_out
    from livingrag.cli.common import err_console

    common = _assignments(env, "--env")
    cfg = ABConfig(
        a=ArmSpec(revision=a, command=cmd, env=common | _assignments(a_env, "--a-env"), before=before_a),
        b=ArmSpec(revision=b, command=b_cmd or cmd, env=common | _assignments(b_env, "--b-env"), before=before_b),
        pairs=pairs,
        before_each=before_each,
        after_each=after_each,
        pause_s=pause,
        timeout_s=timeout,
        pythonpath=pythonpath,
        figures=tuple(figure),
    )
    result = run_ab(cfg, progress=lambda m: err_console.print(m, style="dim", highlight=False, markup=False))
    if out is not None:
        write_out(result, out, ["livingrag", *sys.argv[1:]])
    if as_json:
        print_json(result)
    else:
        console.print(format_report(result, show_constant=show_all), highlight=False, markup=False)
