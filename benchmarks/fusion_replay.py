"""Retrieval-only replay of activation-map fusion (eq. 7-10) on a benchmark stream, no LLM.

The maintained benchmark is ``livingrag bench reuse`` (livingrag/bench/reuse_replay.py: several
orders, the dataset's retrieval preset, passage-level memory, same-group oracles, reuse counts);
this script keeps the map-normalisation and template-floor variants it does not run. It retrieves
with the configured ``retrieval.preset`` (set LIVINGRAG_RETRIEVAL__PRESET=musique for MuSiQue).

Every question's LinearRAG map (a_final sparsified, eq. 5) goes into an in-memory store after it is
answered, ungated and at confidence 1; each question is retrieved from its base activation and
from fused starts built from the earlier questions only (K, alpha, beta, tau_s, H from the
settings). It prints per-passage Recall@5 for the base retriever and for fusion variants: our eq. 8
(livingrag.experience.fusion.fuse: normalize = rescale to the base's maximum) over every top-K
experience, the same with each map L1- or max-normalised first, only experiences whose map overlaps
the base activation, and only experiences with s_ret at or above each --floor (the fusion_floor
setting); with the share of queries where fusion made a new entity reach the retriever's delta
(Table 4's graph transfer). Usage:

    LIVINGRAG_DB__DATA_DIR=runs/lrg-bench .venv/bin/python benchmarks/fusion_replay.py \
        --data-dir ../shared/datasets/2wikimultihopqa --limit 100 --tenant bench --corpus bench-2wikimultihopqa
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from livingrag.config import get_settings
from livingrag.corpus import service
from livingrag.corpus.chunking import document_key
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.db.repositories import passages as passage_repo
from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.metrics import mean_or_none, passage_recall_at_k
from livingrag.experience.fusion import fuse, fusion_weights, newly_active
from livingrag.experience.similarity import sparse_cosine
from livingrag.experience.sparsify import sparsify
from livingrag.experience.template import mask
from livingrag.models.embedder import get_embedder

ap = argparse.ArgumentParser(description="Retrieval-only replay of activation-map fusion.")
ap.add_argument("--dataset", default="2wikimultihopqa")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--limit", type=int, default=100)
ap.add_argument("--tenant", default="bench")
ap.add_argument("--corpus", default="bench-2wikimultihopqa", help="An indexed corpus holding the dataset.")
ap.add_argument("--floor", type=float, nargs="+", default=[0.6], help="s_ret floors of the floor variants.")
ap.add_argument(
    "--template-floor", type=float, nargs="*", default=[0.7], help="Template-similarity floors (with each --floor)."
)
args = ap.parse_args()
s = get_settings()
e = s.experience
print(f"settings: K={e.top_k} alpha={e.alpha} beta={e.beta} tau_s={e.tau_s} H={e.top_h} eps={e.epsilon}")
embedder = get_embedder(s.models.embedding_model, s.models.device, s.models.embedding_batch_size)
db = Database(s.db)
tid, _ = service.ensure_tenant(db, args.tenant, create=False)
info = service.get_corpus(db, tid, args.corpus)
r = service.retriever(db, tid, info, s)
ds = load_dataset(args.dataset, args.data_dir, limit=args.limit)

bykey = {document_key(Document(title=d.title, text=d.text)): d.key for d in ds.corpus}
with db.tenant_session(tid) as ses:
    kp = {p: bykey.get(k) for p, k in passage_repo.passage_doc_keys(ses, info.id).items()}
store: list[tuple[np.ndarray, dict[int, float], np.ndarray]] = []  # (emb, map, unit template embedding)
Map = dict[int, float]
Keep = Callable[[float, float, float], bool]  # keep(s_ret, cos(a_base, map), template similarity)


def unit_max(m: Map) -> Map:
    top = max(m.values(), default=0.0)
    if top <= 0.0:
        return {}
    return {k: v / top for k, v in m.items()}


def l1(m: Map) -> Map:
    tot = sum(m.values())
    if tot <= 0.0:
        return {}
    return {k: v / tot for k, v in m.items()}


def overlaps(sr: float, ov: float, ts: float) -> bool:
    return ov > 0.0


def floor(f: float, t: float | None = None) -> Keep:
    """Keep experiences with s_ret >= f (and template similarity >= t)."""
    return lambda sr, ov, ts: sr >= f and (t is None or ts >= t)


# name -> (per-map transform, keep)
variants: dict[str, tuple[Callable[[Map], Map] | None, Keep | None]] = {
    "max-scale (ours)": (None, None),
    "L1 maps": (l1, None),
    "unit-max maps": (unit_max, None),
    "overlap>0": (None, overlaps),
    "unit-max + overlap>0": (unit_max, overlaps),
}
for f in args.floor:
    variants[f"floor {f}"] = (None, floor(f))
    variants[f"unit-max + floor {f}"] = (unit_max, floor(f))
    for t in args.template_floor:
        variants[f"floor {f} + template {t}"] = (None, floor(f, t))
rec: dict[str, list[float | None]] = {k: [] for k in ["base", *variants]}  # None: a question without gold
added = {k: 0 for k in variants}
for q in ds.questions:
    enc = r.encode(q.question)
    tv = np.asarray(embedder.encode([mask(q.question, enc.mentions)])[0], dtype=np.float64)
    tv /= np.linalg.norm(tv) or 1.0
    base = dict(enc.base_activation)
    res0 = r.retrieve(enc)
    keys0 = list(dict.fromkeys(kp.get(p.id) or "" for p in res0.passages))  # "": not in the dataset
    rec["base"].append(passage_recall_at_k(keys0, q.gold_keys, 5))
    if store and base:
        ov = np.array([sparse_cosine(base, m) for _, m, _ in store])
        ts = np.array([float(tv @ t) for _, _, t in store])
        sc = np.array([e.alpha * float(enc.embedding @ v) for v, _, _ in store]) + (1 - e.alpha) * ov
        top = np.argsort(-sc)[: e.top_k]
        w = fusion_weights(sc[top], np.ones(len(top)), e.tau_s)
        for name, (tf, keep) in variants.items():
            sel = [j for j, i in enumerate(top) if keep is None or keep(sc[i], ov[i], ts[i])]
            maps = [tf(store[top[j]][1]) if tf else store[top[j]][1] for j in sel]
            a0 = fuse(base, maps, [w[j] for j in sel], e.beta, e.top_h) if maps else base
            added[name] += bool(newly_active(base, a0, r.params.delta))
            res = r.retrieve(enc, start_activation=a0)
            keys = list(dict.fromkeys(kp.get(p.id) or "" for p in res.passages))
            rec[name].append(passage_recall_at_k(keys, q.gold_keys, 5))
    else:
        for name in variants:
            rec[name].append(rec["base"][-1])
    store.append((enc.embedding, sparsify(res0.final_activation, e.epsilon, e.max_map_entities), tv))
for k, v in rec.items():
    extra = f"  graph transfer {added[k] / len(v):.1%}" if k in added else ""
    print(f"{k:28s} R@5 {mean_or_none(v) or 0.0:.4f}{extra}")
db.close()
