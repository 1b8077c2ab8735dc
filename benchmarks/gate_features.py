"""Which answer features separate Contain-correct from wrong answers, and does a calibrator fitted
on one stream carry to another? No LLM: the answers of earlier `eval stream` runs are re-checked.

For each run (``--run NAME=RECORDS.jsonl:DATASET:DATA_DIR``, repeatable) every answer gets:
``gs`` (GS of eq. 17 with the offline verifier, as the write-back computes it), ``answer_claim``
(the answer claim's support), ``explanation_min`` / ``explanation_mean`` (the explanation claims'
supports), ``form`` (the answer-form check), ``found_any`` / ``found_count`` / ``first_rank`` (the
answer's words in the retrieved passages, and 1/rank of the first such passage), ``echo`` (share
of the answer's words that are in the question), ``answer_words``, ``yes_no``, ``hedge`` (the
model says the passages do not tell), ``question_coverage`` (the question's entities found in the
passages), ``cooccurrence`` (a passage holding the answer also names the question's entities).

Printed: per run, each feature's ROC AUC for correct vs wrong; then a logistic calibrator (L2,
standardised features, gradient descent) fitted on each run and scored on every run (the
diagonal is in-sample). The gate's target is AUC >= 0.75 on questions it was not tuned on.
Usage (the runs kept in benchmarks/results):

    R=benchmarks/results; D=../shared/datasets
    .venv/bin/python benchmarks/gate_features.py \\
      --run 2wiki-300=$R/2wiki-300-offline/records.jsonl:2wikimultihopqa:$D/2wikimultihopqa \\
      --run musique-100=$R/musique-100-offline/records.jsonl:musique:$D/musique \\
      --run musique_reuse=$R/musique-reuse-findings-offline/records.jsonl:musique:$D/musique_reuse
"""

import argparse
import json
import time

import numpy as np

from livingrag.bench.stats import roc_auc
from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.experience.answer_form import check_answer_form
from livingrag.experience.gate_features import candidate_features
from livingrag.experience.grounding import extract_claims, grounding_score
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers.offline import OfflineVerifier
from livingrag.models.embedder import get_embedder

FEATURES = [
    "gs",
    "answer_claim",
    "explanation_min",
    "explanation_mean",
    "form",
    "found_any",
    "found_count",
    "first_rank",
    "echo",
    "answer_words",
    "yes_no",
    "hedge",
    "question_coverage",
    "cooccurrence",
]
ap = argparse.ArgumentParser(description="Answer features against correctness, and a cross-stream calibrator.")
ap.add_argument("--run", action="append", required=True, help="NAME=RECORDS.jsonl:DATASET:DATA_DIR (repeatable).")
ap.add_argument("--l2", type=float, default=1.0, help="L2 penalty of the calibrator.")
args = ap.parse_args()
s = get_settings()
g = s.gates
encoder = get_embedder(s.models.embedding_model, s.models.device, s.models.embedding_batch_size)
verifier = OfflineVerifier(encoder=encoder, evidence_k=g.evidence_sentences, relation_miss=0.4)
print(f"settings: offline verifier (relation_miss 0.4), tau_nli={g.tau_nli}, evidence_k={g.evidence_sentences}")


def features(r: dict, docs: dict) -> list[float]:
    ps = [
        UsedPassage(id=i, text=docs[k].text, title=docs[k].title)
        for i, k in enumerate(dict.fromkeys(r["retrieved_keys"]))
        if k in docs
    ]
    q, a, e = r["question"], r["prediction"], r.get("explanation") or ""
    claims = extract_claims(e, a, q, g.max_claims)
    vs = verifier.verify(claims, ps) if claims and ps else []
    gs = grounding_score([v.score for v in vs], g.tau_nli) if vs else 0.0
    # the write-back's own features (livingrag.experience.gate_features); "form" is its form_fits
    f = candidate_features(
        query=q, answer=a, explanation=e, passages=ps, verdicts=vs, ns=0.0, gs=gs,
        form_fits=check_answer_form(q, a).fits, type_fits=True,
    )  # fmt: skip
    return [f["form_fits" if name == "form" else name] for name in FEATURES]


def fit(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Logistic regression on standardised features: weights, mean, scale, bias."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(3000):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        w -= 0.1 * (z.T @ (p - y) / len(y) + l2 * w / len(y))
        b -= 0.1 * float((p - y).mean())
    return w, mu, sd, b


data: dict[str, tuple[np.ndarray, np.ndarray]] = {}
for spec in args.run:
    name, rest = spec.split("=", 1)
    records, dataset, data_dir = rest.split(":", 2)
    with open(records, encoding="utf-8") as fh:
        rs = [json.loads(line) for line in fh if line.strip()]
    ds = load_dataset(dataset, data_dir)
    docs = {d.key: d for d in ds.corpus}
    seen: dict[tuple, list[float]] = {}
    rows, ys = [], []
    t0 = time.perf_counter()
    for r in rs:
        if not r.get("prediction"):
            continue
        key = (r["question_id"], r["prediction"], r.get("explanation"), tuple(r["retrieved_keys"]))
        if key not in seen:  # LinearRAG's answers copied over orders are checked once
            seen[key] = features(r, docs)
        rows.append(seen[key])
        ys.append(r["contain_correct"] in (True, "True"))
    x, y = np.asarray(rows), np.asarray(ys, dtype=bool)
    data[name] = (x, y)
    print(f"\n{name}: {len(y)} answers ({len(seen)} distinct), Contain-correct {y.mean():.1%}, "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    print(
        "  ROC AUC per feature: " + ", ".join(f"{f} {roc_auc(x[y, i], x[~y, i]):.2f}" for i, f in enumerate(FEATURES))
    )

print(f"\ncalibrator (logistic, L2 {args.l2}) fitted on the row's run, ROC AUC on each column's run:")
names = list(data)
print("  " + " " * 16 + "".join(f"{n:>16s}" for n in names))
for tr in names:
    w, mu, sd, b = fit(data[tr][0], data[tr][1].astype(float), args.l2)
    cells = []
    for te in names:
        x, y = data[te]
        score = ((x - mu) / sd) @ w + b
        cells.append(f"{roc_auc(score[y], score[~y]):16.2f}")
    print(f"  {tr:16s}" + "".join(cells))
