"""Replay of the grounding gate (eq. 15-19) over the answers of an evaluation run, no LLM.

Every answer in a run's ``records.jsonl`` (both systems unless --system) is checked again: its
claims (the explanation's sentences and the answer, as the write-back extracts them) against the
passages that were in its prompt (the retrieved corpus keys, resolved in the dataset), with the
offline verifier, and GS compared with tau_gs; once with GS alone and once with the answer-form
check first (gates.answer_form: an answer of the wrong form gets GS 0). The gate exists to keep wrong answers out of the
store, so the figures are about that: how many answers pass, the share of Contain-correct answers
among those that pass (the store's precision) and among those rejected, the mean GS of correct and
wrong answers, and the ROC AUC of GS as a correct/wrong separator (0.5 = no better than chance).
Usage:

    .venv/bin/python benchmarks/gate_replay.py --records benchmarks/results/2wiki-300-offline/records.jsonl \
        --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa
"""

import argparse
import json
import time

import numpy as np

from livingrag.bench.stats import roc_auc as auc
from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.experience.answer_form import check_answer_form
from livingrag.experience.grounding import extract_claims, grounding_score
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers.offline import OfflineVerifier
from livingrag.models.embedder import get_embedder

ap = argparse.ArgumentParser(description="Replay the grounding gate over an evaluation run's answers.")
ap.add_argument("--records", required=True, help="records.jsonl of a `livingrag eval stream` run.")
ap.add_argument("--dataset", default="2wikimultihopqa")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--system", default=None, help="Only this system's answers (default: every system's).")
ap.add_argument(
    "--relation-miss",
    default="0.4",
    help="The offline verifier's R for an answer unit without the question's relation ('off': no relation check).",
)
args = ap.parse_args()
s = get_settings()
g = s.gates
with open(args.records, encoding="utf-8") as fh:
    records = [json.loads(line) for line in fh if line.strip()]
records = [r for r in records if (args.system is None or r["system"] == args.system) and r.get("prediction")]
ds = load_dataset(args.dataset, args.data_dir)
docs = {d.key: d for d in ds.corpus}
encoder = get_embedder(s.models.embedding_model, s.models.device, s.models.embedding_batch_size)
miss = None if args.relation_miss == "off" else float(args.relation_miss)
verifier = OfflineVerifier(encoder=encoder, evidence_k=g.evidence_sentences, relation_miss=miss)
print(
    f"settings: verifier offline (relation_miss {args.relation_miss}), tau_nli={g.tau_nli} tau_gs={g.tau_gs} "
    f"evidence_k={g.evidence_sentences} "
    f"max_claims={g.max_claims}; {len(records)} answers from {args.records}"
)
t0 = time.perf_counter()
rows = []
for r in records:
    passages = [
        UsedPassage(id=i, text=docs[k].text, title=docs[k].title)
        for i, k in enumerate(dict.fromkeys(r["retrieved_keys"]))
        if k in docs
    ]
    claims = extract_claims(r.get("explanation") or "", r["prediction"], r["question"], g.max_claims)
    verdicts = verifier.verify(claims, passages) if claims and passages else []
    gs = grounding_score([v.score for v in verdicts], g.tau_nli) if verdicts else 0.0
    fits = check_answer_form(r["question"], r["prediction"]).fits
    rows.append((gs, fits, bool(r["contain_correct"])))
print(f"{(time.perf_counter() - t0) / max(len(rows), 1) * 1000:.0f} ms per answer")
n = max(len(rows), 1)
print(f"answers {len(rows)} (Contain-correct {sum(c for _, _, c in rows)}, {sum(c for _, _, c in rows) / n:.1%})")
for name, scored in (
    ("GS alone", [(gs, c) for gs, _, c in rows]),
    ("answer form, then GS", [(gs if fits else 0.0, c) for gs, fits, c in rows]),
):
    ok = [x for x, c in scored if c]
    bad = [x for x, c in scored if not c]
    passed = [c for x, c in scored if x >= g.tau_gs]
    rejected = [c for x, c in scored if x < g.tau_gs]
    print(
        f"{name:22s} passed {len(passed)} ({len(passed) / n:.1%}); correct among passed "
        f"{np.mean(passed) if passed else float('nan'):.3f}, among rejected "
        f"{np.mean(rejected) if rejected else float('nan'):.3f}; mean GS correct {np.mean(ok):.3f} "
        f"wrong {np.mean(bad):.3f}; ROC AUC {auc(ok, bad):.3f}"
    )
