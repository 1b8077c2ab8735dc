"""The retrieval benchmark: Recall@2/@5 against gold passages, latency split, indexing time, memory.

Datasets are read by ``eval stream``'s reader (:func:`livingrag.evaluation.datasets.load_dataset`,
docs/evaluation.md, Datasets): the development folders of ``../shared/datasets`` (2WikiMultiHopQA's
``gold_1000/questions_with_gold.json`` + ``hipporag_1000/2wikimultihopqa_corpus.json``, HippoRAG's
``musique_train``/``hotpotqa_train`` pairs), any other HippoRAG pair, and raw MuSiQue, HotpotQA and
2WikiMultiHopQA files. A question's gold passages become the document keys of its gold corpus
documents; questions without gold passages are left out. The development corpora keep their
benchmark corpus names ``bench-<dataset>`` (what earlier runs indexed and ``eval --corpus`` names);
any other corpus is the one ``bench reuse`` indexes (:func:`stream_corpus_name`).

Recall@k is HippoRAG's, reported as ``passage_recall_at_k``: the share of a question's gold passages
found in the top k, averaged over questions; ``all_gold_recall_at_k`` is the share of questions with
every gold passage in the top k (the names mean the same in the evaluation's records and report).
Gold passages are matched by document, so a chunked gold document counts once.
"""

from __future__ import annotations

import json
import os
import random
import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from livingrag.bench.stats import percentile
from livingrag.corpus.chunking import document_key
from livingrag.errors import InvalidInput
from livingrag.evaluation.datasets import Dataset as StreamDataset
from livingrag.evaluation.datasets import load_dataset as load_stream
from livingrag.io.documents import Document

if TYPE_CHECKING:
    from livingrag.config import Settings
    from livingrag.corpus.indexer import IndexReport
    from livingrag.corpus.progress import Progress
    from livingrag.db.engine import Database
    from livingrag.types import CorpusInfo

DATASETS = ("2wikimultihopqa", "musique", "hotpotqa")


@dataclass(frozen=True)
class BenchQuestion:
    question: str
    gold: tuple[str, ...]  # document keys


@dataclass(frozen=True)
class BenchDataset:
    name: str  # the dataset (and its retrieval preset)
    documents: list[Document]
    questions: list[BenchQuestion]
    corpus: str = ""  # the benchmark corpus's name (default: bench-<name>)

    @property
    def corpus_name(self) -> str:
        return self.corpus or f"bench-{self.name}"


DEVELOPMENT_CORPORA: dict[str, str] = {
    "2wikimultihopqa": "2wikimultihopqa_corpus.json",
    "musique": "musique_train_corpus.json",
    "hotpotqa": "hotpotqa_train_corpus.json",
}
"""Per dataset, the corpus file of its development folder, indexed as ``bench-<dataset>``."""


def load_dataset(name: str, data_dir: str | Path) -> BenchDataset:
    """The dataset ``name`` under ``data_dir`` as ``eval stream``'s reader reads it, for the
    benchmark (see the module docstring)."""
    if name not in DATASETS:
        raise InvalidInput(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    path = Path(data_dir).expanduser()
    return bench_dataset(load_stream(name, path), path)


def bench_dataset(ds: StreamDataset, where: str | Path = "") -> BenchDataset:
    """``ds``'s corpus documents (title and text, as ``bench reuse`` indexes them) and, per question
    with gold passages, their document keys in the question's order."""
    docs = [Document(title=d.title, text=d.text) for d in ds.corpus]
    key_of = {d.key: document_key(doc) for d, doc in zip(ds.corpus, docs, strict=True)}
    questions = [
        BenchQuestion(q.question, tuple(dict.fromkeys(key_of[k] for k in q.gold_keys)))
        for q in ds.questions
        if q.gold_keys
    ]
    if not questions:
        raise InvalidInput(f"{ds.name}: no question under {where or ', '.join(ds.sources)} names its gold passages")
    return BenchDataset(ds.name, docs, questions, corpus=bench_corpus_name(ds))


def bench_corpus_name(dataset: StreamDataset) -> str:
    """``bench-<dataset>`` for a development corpus (:data:`DEVELOPMENT_CORPORA`), else
    :func:`stream_corpus_name`."""
    if dataset.sources and Path(dataset.sources[-1]).name == DEVELOPMENT_CORPORA.get(dataset.name):
        return f"bench-{dataset.name}"
    return stream_corpus_name(dataset)


def stream_corpus_name(dataset: StreamDataset) -> str:
    """``bench-reuse-<dataset>-<corpus file stem>``: the benchmark corpus of a dataset read by the
    evaluation reader, one per corpus file (``bench retrieval`` and ``bench reuse`` share it)."""
    stem = Path(dataset.sources[-1]).stem if dataset.sources else "corpus"
    return f"bench-reuse-{dataset.name}-{stem}"[:100]


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def ensure_bench_corpus(
    db: Database,
    settings: Settings,
    dataset: BenchDataset,
    *,
    tenant: str = "bench",
    shuffle_seed: int | None = None,
    progress: Progress | None = None,
) -> tuple[int, CorpusInfo, IndexReport, dict[str, Any] | None]:
    """The dataset's corpus ``bench-<dataset>[-shuffle<seed>]`` of ``tenant`` (both created when
    missing), indexed if not yet (re-runs index nothing): tenant id, corpus, this run's indexing
    report and the report of the run that first indexed it (None when this run did)."""
    from livingrag.corpus import service
    from livingrag.corpus.progress import NullProgress
    from livingrag.errors import NotFound

    progress = progress or NullProgress()
    tenant_id, _ = service.ensure_tenant(db, tenant)
    name = dataset.corpus_name + (f"-shuffle{shuffle_seed}" if shuffle_seed is not None else "")
    docs = list(dataset.documents)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(docs)
    try:
        corpus = service.get_corpus(db, tenant_id, name)
    except NotFound:
        corpus = service.create_corpus(
            db, tenant_id, name, settings, preset=bench_settings(settings, dataset).retrieval.preset
        )
    indexer = service.indexer(db, tenant_id, corpus, settings, progress=progress)
    report = indexer.index_documents(docs)
    first_index = _remember_first_index(settings, name, report.as_dict())
    return tenant_id, service.get_corpus(db, tenant_id, corpus.id), report, first_index


def bench_settings(settings: Settings, dataset: BenchDataset, preset: str | None = None) -> Settings:
    """A copy of ``settings`` with the retrieval preset of the dataset (or ``preset``; ``custom``
    when there is no preset of that name)."""
    settings = settings.model_copy(deep=True)
    settings.retrieval.preset = (preset or dataset.name) if (preset or dataset.name) in _preset_names() else "custom"  # type: ignore[assignment]
    return settings


def run_retrieval_bench(
    db: Database,
    settings: Settings,
    dataset: BenchDataset,
    *,
    tenant: str = "bench",
    limit: int | None = None,
    start: int = 1,
    shuffle_seed: int | None = None,
    preset: str | None = None,
    progress: Progress | None = None,
    ks: tuple[int, ...] = (2, 5),
    per_question: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Index the dataset's corpus if needed, run the questions ``start`` .. ``start + limit - 1``
    (1-based; all from ``start`` without ``limit``) and measure (see the module docstring).

    ``per_question``, when given, receives one record per question (its number, text, gold count
    and recalls), for paired comparisons of two runs (:mod:`livingrag.bench.paired_runs`)."""
    if start < 1:
        raise InvalidInput(f"the first question is number 1 or more, not {start}")
    from livingrag.corpus import service
    from livingrag.corpus.progress import NullProgress
    from livingrag.db.repositories import passages as passage_repo

    progress = progress or NullProgress()
    tenant_id, corpus, report, first_index = ensure_bench_corpus(
        db, settings, dataset, tenant=tenant, shuffle_seed=shuffle_seed, progress=progress
    )
    name = corpus.name
    settings = bench_settings(settings, dataset, preset)
    retriever = service.retriever(db, tenant_id, corpus, settings)
    t = time.perf_counter()
    graph = retriever.graph()
    graph_load_s = time.perf_counter() - t
    with db.tenant_session(tenant_id) as s:
        doc_of = passage_repo.passage_doc_keys(s, corpus.id)
    first = start - 1
    questions = dataset.questions[first : first + limit] if limit else dataset.questions[first:]
    if not questions:
        raise InvalidInput(f"no question from number {start}: the dataset has {len(dataset.questions)}")
    for q in questions[:3]:  # warm-up: first calls pay for lazy initialisation
        retriever.retrieve(retriever.encode(q.question))
    kmax = max(ks)
    recall = {k: [] for k in ks}  # type: dict[int, list[float]]
    full = {k: [] for k in ks}  # type: dict[int, list[float]]
    dense_recall: list[float] = []
    stages = "retrieval encode ner embed dense mention_embed graph link propagation passage_scoring ppr title prf"
    lat: dict[str, list[float]] = {k: [] for k in stages.split()}
    cpu: dict[str, list[float]] = {"retrieval": [], "encode": [], "rank": []}
    fallbacks = 0
    exact_same = 0  # questions whose top k equals the one of PPR solved to 1e-12
    exact_params = replace(retriever.params, ppr_tol=EXACT_PPR_TOL, ppr_max_iter=1000)
    task = progress.add("questions ", len(questions))
    with progress:
        for number, q in enumerate(questions, start=start):
            c0 = time.process_time()
            enc = retriever.encode(q.question)
            c1, tc1 = time.process_time(), time.thread_time()
            res = retriever.retrieve(enc, top_k=kmax)
            cpu["retrieval"].append((time.process_time() - c0) * 1000)
            cpu["encode"].append((c1 - c0) * 1000)
            cpu["rank"].append((time.thread_time() - tc1) * 1000)
            dense = retriever.dense(enc, top_k=kmax)
            exact_same += _same_as_exact(graph, res, exact_params, kmax)
            t_ = res.timings
            for key in lat:
                lat[key].append(float(t_.get(f"{key}_ms", 0.0)))
            fallbacks += res.dense_fallback
            gold = set(q.gold)
            got = [doc_of.get(p.id) for p in res.passages]
            for k in ks:
                hit = gold & set(got[:k])
                recall[k].append(len(hit) / len(gold))
                full[k].append(float(hit == gold))
            dense_recall.append(len(gold & {doc_of.get(p.id) for p in dense[:5]}) / len(gold))
            if per_question is not None:
                per_question.append(
                    {"number": number, "question": q.question, "gold": len(gold)}
                    | {f"passage_recall_at_{k}": recall[k][-1] for k in ks}
                    | {f"all_gold_recall_at_{k}": full[k][-1] for k in ks}
                    | {"dense_recall_at_5": dense_recall[-1]}
                )
            progress.advance(task, 1)
    retriever.close()
    query_cosine = _query_cosine(settings, corpus.embedding_model, retriever.embedder, [q.question for q in questions])
    out: dict[str, Any] = {
        "dataset": dataset.name,
        "corpus": name,
        "questions": len(questions),
        "first_question": start,
        "passages": graph.n_passages,
        "entities": graph.n_entities,
        "bridge_sentences": graph.n_sentences,
    }
    for k in ks:
        out[f"passage_recall_at_{k}"] = round(float(np.mean(recall[k])), 4) if questions else 0.0
    for k in ks:
        out[f"all_gold_recall_at_{k}"] = round(float(np.mean(full[k])), 4) if questions else 0.0
    out["dense_recall_at_5"] = round(float(np.mean(dense_recall)), 4) if questions else 0.0
    out["dense_fallback_rate"] = round(fallbacks / max(len(questions), 1), 4)
    # the PPR tolerance in use, and how often it leaves the ranking of an exact solve unchanged
    out["ppr_tol"] = retriever.params.ppr_tol
    out["query_embedding"] = getattr(retriever.embedder, "backend", "?")
    out.update(query_cosine)
    out[f"ppr_exact_top{kmax}_agreement"] = round(exact_same / max(len(questions), 1), 4)
    out.update(_latency_figures(lat, cpu))
    out.update(_index_figures(report, first_index))
    out["graph_load_seconds"] = round(graph_load_s, 2)
    out["peak_rss_mb"] = peak_rss_mb()
    out["shuffle_seed"] = shuffle_seed
    out["settings"] = {
        "retrieval": replace(retriever.params).as_dict() | {"preset": settings.retrieval.preset},
        "embedding_model": corpus.embedding_model,
        "ner_model": corpus.ner_model,
        "extractor": corpus.extractor,
        "corpus": corpus.settings,
    }
    return out


def _latency_figures(lat: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict[str, Any]:
    """Percentiles of the retrieval's stages (``lat``, wall ms) and of its CPU time (``cpu``)."""
    cpu_graph = [a + b + c for a, b, c in zip(cpu["rank"], lat["link"], lat["dense"], strict=True)]
    return {
        "graph_ms_p50": percentile(lat["graph"], 50),
        "graph_ms_p95": percentile(lat["graph"], 95),
        "retrieval_ms_p50": percentile(lat["retrieval"], 50),
        "retrieval_ms_p95": percentile(lat["retrieval"], 95),
        "encode_ms_p50": percentile(lat["encode"], 50),
        "encode_ms_p95": percentile(lat["encode"], 95),
        "ner_ms_p50": percentile(lat["ner"], 50),
        "embed_ms_p50": percentile(lat["embed"], 50),
        "mention_embed_ms_p50": percentile(lat["mention_embed"], 50),
        "dense_ms_p50": percentile(lat["dense"], 50),
        "link_ms_p50": percentile(lat["link"], 50),
        "propagation_ms_p50": percentile(lat["propagation"], 50),
        "passage_scoring_ms_p50": percentile(lat["passage_scoring"], 50),
        "ppr_ms_p50": percentile(lat["ppr"], 50),
        "title_ms_p50": percentile(lat["title"], 50),
        "prf_ms_p50": percentile(lat["prf"], 50),
        # CPU time (this process, all threads) per question: what the wall times would be
        # without other processes competing for the cores, for the parts that run serially
        "cpu_retrieval_ms_p50": percentile(cpu["retrieval"], 50),
        "cpu_encode_ms_p50": percentile(cpu["encode"], 50),
        "cpu_graph_ms_p50": percentile(cpu_graph, 50),
        "cpu_graph_ms_p95": percentile(cpu_graph, 95),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _index_figures(report: IndexReport, first_index: dict[str, Any] | None) -> dict[str, Any]:
    """The indexing's time split: this run's, and the first indexing's when this run indexed nothing."""
    out: dict[str, Any] = {}
    out["index_seconds"] = round(report.phases.get("total", 0.0), 2)
    out["index_phases"] = {k: round(v, 2) for k, v in report.phases.items()}
    out["index_cpu_seconds"] = {k: round(v, 2) for k, v in report.cpu.items()}
    out["indexed_passages"] = report.indexed
    out["skipped_existing"] = report.skipped_existing
    if first_index is not None and report.indexed == 0:
        out["first_index_seconds"] = first_index.get("phases", {}).get("total")
        out["first_index_phases"] = first_index.get("phases")
        out["first_index_cpu_seconds"] = first_index.get("cpu")
    first = report.as_dict() if report.indexed else first_index
    if first:
        out.update(indexing_floor(first))
    return out


EXACT_PPR_TOL = 1e-12


def indexing_floor(report: dict[str, Any]) -> dict[str, Any]:
    """An indexing report against the embedding model's own speed: the embed phase's tokens per
    second beside the runtime's (tokens over the seconds inside ONNX Runtime, same batches), their
    ratio (phase / model time; 1.0 = nothing but the model), and NER + embedding's share of the
    wall time. Empty without model counts (the torch backend, or a report from before them)."""
    model = report.get("model") or {}
    phases = report.get("phases") or {}
    if not model.get("seconds") or not phases.get("embed"):
        return {}
    tokens, model_s, embed_s = model["tokens"], model["seconds"], phases["embed"]
    total = phases.get("total") or sum(v for k, v in phases.items() if k != "total")
    return {
        "index_embed_tokens": int(tokens),
        "index_embed_padded_tokens": int(model.get("padded_tokens", 0)),
        "index_embed_model_tokens_per_s": round(tokens / model_s, 1),
        "index_embed_phase_tokens_per_s": round(tokens / embed_s, 1),
        "index_embed_phase_over_model": round(embed_s / model_s, 3),
        "index_ner_embed_share": round((phases.get("ner", 0.0) + embed_s) / total, 3) if total else None,
    }


def _query_cosine(settings: Settings, model: str, encoder: Any, texts: list[str]) -> dict[str, float]:
    """With int8 question embeddings: their cosine to the float32 model's over ``texts`` (min,
    1st percentile, mean), each text encoded alone as a question is (dynamic quantization scales
    a batch's activations together, so a batch of questions would measure something else);
    nothing when questions are embedded in float32."""
    if not getattr(encoder, "quantized", False) or not texts:
        return {}
    from livingrag.models.embedder import embedder_from_settings

    exact = embedder_from_settings(settings.models, model).encode(texts)
    cos = np.array([float(np.dot(encoder.encode([t])[0], e)) for t, e in zip(texts, exact, strict=True)])
    return {
        "query_cosine_to_float32_min": round(float(cos.min()), 4),
        "query_cosine_to_float32_p1": round(float(np.percentile(cos, 1)), 4),
        "query_cosine_to_float32_mean": round(float(cos.mean()), 4),
    }


def _same_as_exact(graph: Any, res: Any, exact: Any, k: int) -> bool:
    """Whether ``res``'s top ``k`` is the one PPR solved to :data:`EXACT_PPR_TOL` gives from the
    same start (what the tolerance in use can change)."""
    from livingrag.retrieval.ranking import rank_passages
    from livingrag.retrieval.retriever import entity_rows

    if res.dense_fallback:
        return True
    rows = entity_rows(res.start_activation, graph)
    dense = res.encoding.passage_scores.scores if res.encoding.passage_scores is not None else None
    ranking = rank_passages(graph, res.encoding.embedding, rows, exact, k=k, dense=dense)
    return [int(graph.passage_ids[p]) for p in ranking.passages] == [p.id for p in res.passages[:k]]


def _preset_names() -> tuple[str, ...]:
    from livingrag.retrieval.presets import PRESETS

    return tuple(PRESETS)


def _remember_first_index(settings: Settings, corpus: str, report: dict[str, Any]) -> dict[str, Any] | None:
    """Keep the report of the run that indexed the corpus, so later runs can show its timings."""
    path = Path(settings.db.data_dir) / "bench" / f"{corpus}.index.json"
    if report.get("indexed"):
        path.parent.mkdir(parents=True, exist_ok=True)
        previous = json.loads(path.read_text()) if path.exists() else None
        if previous is None or previous.get("indexed", 0) < report["indexed"]:
            path.write_text(json.dumps(report, indent=2))
        return None
    return json.loads(path.read_text()) if path.exists() else None


__all__ = [
    "DATASETS",
    "BenchDataset",
    "BenchQuestion",
    "bench_dataset",
    "bench_settings",
    "ensure_bench_corpus",
    "load_dataset",
    "peak_rss_mb",
    "run_retrieval_bench",
]
