"""Retrieval-only replay of activation-map fusion (eq. 7-10) on a benchmark stream, no LLM.

Every question's LinearRAG map (a_final sparsified, eq. 5) goes into an in-memory store after it is
answered, ungated and at confidence 1; each question is retrieved from its base activation and
from fused starts built from the earlier questions only (K, alpha, beta, tau_s, H from the
settings). It prints per-passage Recall@5 for: the base retriever, our fusion
(livingrag.experience.fusion.fuse: normalize = rescale to the base's maximum), the same with each
map L1-normalised first, and with a similarity floor on s_ret. Usage:

    LIVINGRAG_DB__DATA_DIR=/tmp/lrg-bench .venv/bin/python benchmarks/fusion_replay.py \
        --data-dir ../shared/datasets/2wikimultihopqa --limit 100 --tenant bench --corpus bench-2wikimultihopqa
"""

import argparse

import numpy as np
from sqlalchemy import text

from livingrag.config import get_settings
from livingrag.corpus import service
from livingrag.corpus.chunking import document_key
from livingrag.corpus.ingest import Document
from livingrag.db.engine import Database
from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.metrics import passage_recall_at_k
from livingrag.experience.fusion import fuse, fusion_weights
from livingrag.experience.similarity import sparse_cosine
from livingrag.experience.sparsify import sparsify

ap = argparse.ArgumentParser(description="Retrieval-only replay of activation-map fusion.")
ap.add_argument("--dataset", default="2wikimultihopqa")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--limit", type=int, default=100)
ap.add_argument("--tenant", default="bench")
ap.add_argument("--corpus", default="bench-2wikimultihopqa", help="An indexed corpus holding the dataset.")
ap.add_argument("--floor", type=float, default=0.6, help="s_ret floor of the floor variant.")
args = ap.parse_args()
s = get_settings()
e = s.experience
print(f"settings: K={e.top_k} alpha={e.alpha} beta={e.beta} tau_s={e.tau_s} H={e.top_h} eps={e.epsilon}")
db = Database(s.db)
tid, _ = service.ensure_tenant(db, args.tenant, create=False)
info = service.get_corpus(db, tid, args.corpus)
r = service.retriever(db, tid, info, s)
ds = load_dataset(args.dataset, args.data_dir, limit=args.limit)

bykey = {document_key(Document(title=d.title, text=d.text)): d.key for d in ds.corpus}
with db.tenant_session(tid) as ses:
    kp = {
        int(p): bykey.get(k)
        for p, k in ses.execute(text("SELECT id, doc_key FROM passages WHERE corpus_id=:c"), {"c": info.id}).all()
    }
store = []  # (emb, map)
variants = {"base": None, "max-scale (ours)": "max", "L1 maps": "l1", f"floor {args.floor}": "floor"}
rec = {k: [] for k in variants}
for q in ds.questions:
    enc = r.encode(q.question)
    base = dict(enc.base_activation)
    res0 = r.retrieve(enc)
    keys0 = list(dict.fromkeys(kp.get(p.id) for p in res0.passages))
    rec["base"].append(passage_recall_at_k(keys0, q.gold_keys, 5))
    if store and base:
        sc = np.array([e.alpha * float(enc.embedding @ v) + (1 - e.alpha) * sparse_cosine(base, m) for v, m in store])
        top = np.argsort(-sc)[: e.top_k]
        w = fusion_weights(sc[top], np.ones(len(top)), e.tau_s)
        for name, kind in variants.items():
            if kind is None:
                continue
            maps = [store[i][1] for i in top]
            ww = list(w)
            if kind == "l1":
                maps = [{k: v / sum(m.values()) for k, v in m.items()} for m in maps]
            if kind == "floor":
                keep = [j for j, i in enumerate(top) if sc[i] >= args.floor]
                maps = [maps[j] for j in keep]
                ww = [ww[j] for j in keep]
            a0 = fuse(base, maps, ww, e.beta, e.top_h) if maps else base
            res = r.retrieve(enc, start_activation=a0)
            keys = list(dict.fromkeys(kp.get(p.id) for p in res.passages))
            rec[name].append(passage_recall_at_k(keys, q.gold_keys, 5))
    else:
        for name in variants:
            if name != "base":
                rec[name].append(rec["base"][-1])
    store.append((enc.embedding, sparsify(res0.final_activation, e.epsilon, e.max_map_entities)))
for k, v in rec.items():
    print(f"{k:18s} R@5 {np.mean(v):.4f}")
db.close()
