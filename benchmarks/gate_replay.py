"""Replay of the grounding gate (eq. 15-19) over the answers of an evaluation run.

Every answer in a run's ``records.jsonl`` (both systems unless --system) is checked again: its
claims (the explanation's sentences and the answer, as the write-back extracts them) against the
passages that were in its prompt (the retrieved corpus keys, resolved in the dataset), with the
offline verifier (or, with --verifier judge, the judge verifier: one yes/no question per answer to a
local model, read as P(yes); this one calls an LLM), and GS compared with tau_gs; once with GS
alone and once with the answer-form check first (gates.answer_form: an answer of the wrong form
gets GS 0), and the same two with the mean claim score (a soft GS). The gate exists to keep wrong
answers out of the store, so the figures are about that: how many answers pass, the share of Contain-correct answers
among those that pass (the store's precision) and among those rejected, the mean GS of correct and
wrong answers, and the ROC AUC of GS as a correct/wrong separator (0.5 = no better than chance).
Usage:

    .venv/bin/python benchmarks/gate_replay.py --records benchmarks/results/2wiki-300-offline/records.jsonl \
        --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa
    .venv/bin/python benchmarks/gate_replay.py --records ... --verifier judge --judge-model qwen2.5-coder-1.5b \
        --positions 150:300 --unique --dump scores.jsonl

--positions A:B keeps the questions at stream positions A <= position < B (to keep tuning and
held-out questions apart); --unique judges each (question, answer) pair once (LinearRAG and
LivingRAG often give the same answer); --dump writes every answer's scores as JSON lines.
"""

import argparse
import json
import time

import numpy as np

from livingrag.bench.run_answers import load_run_answers
from livingrag.bench.stats import roc_auc as auc
from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.experience.answer_form import check_answer_form
from livingrag.experience.grounding import extract_claims, grounding_score
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers.judge import JudgeVerifier
from livingrag.experience.verifiers.offline import OfflineVerifier
from livingrag.generation.providers import build_llm
from livingrag.models.embedder import get_embedder


def _mean(xs: list[float] | list[bool]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


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
ap.add_argument("--verifier", choices=("offline", "judge"), default="offline")
ap.add_argument("--judge-model", default="qwen2.5-coder-1.5b", help="The judge's local model (preset or GGUF path).")
ap.add_argument("--judge-evidence", choices=("passages", "units"), default="passages")
ap.add_argument("--judge-threads", type=int, default=None, help="The judge model's CPU threads (default: all).")
ap.add_argument("--positions", default=None, help="A:B, stream positions A <= p < B only.")
ap.add_argument("--unique", action="store_true", help="Judge each (question, answer) pair once.")
ap.add_argument("--limit", type=int, default=None, help="At most this many answers (after the filters).")
ap.add_argument("--dump", default=None, help="Write each answer's scores here (JSON lines).")
args = ap.parse_args()
s = get_settings()
g = s.gates
records = load_run_answers(
    args.records,
    system=args.system,
    positions=args.positions,
    one_per="answer" if args.unique else None,
    limit=args.limit,
)
ds = load_dataset(args.dataset, args.data_dir)
docs = {d.key: d for d in ds.corpus}
encoder = get_embedder(s.models.embedding_model, s.models.device, s.models.embedding_batch_size)
miss = None if args.relation_miss == "off" else float(args.relation_miss)
verifier: OfflineVerifier | JudgeVerifier
if args.verifier == "judge":
    llm_settings = s.llm.model_copy(update={"provider": "local", "model": args.judge_model})
    if args.judge_threads:
        llm_settings = llm_settings.model_copy(update={"threads": args.judge_threads})
    llm = build_llm(llm_settings, data_dir=s.db.data_dir)
    verifier = JudgeVerifier(llm, encoder=encoder, evidence_k=g.evidence_sentences, evidence=args.judge_evidence)
    described = f"judge ({args.judge_model}, evidence {args.judge_evidence})"
else:
    verifier = OfflineVerifier(encoder=encoder, evidence_k=g.evidence_sentences, relation_miss=miss)
    described = f"offline (relation_miss {args.relation_miss})"
print(
    f"settings: verifier {described}, tau_nli={g.tau_nli} tau_gs={g.tau_gs} "
    f"evidence_k={g.evidence_sentences} max_claims={g.max_claims}; positions {args.positions or 'all'}"
    f"{', unique pairs' if args.unique else ''}; {len(records)} answers from {args.records}"
)
t0 = time.perf_counter()
rows = []
dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
for r in records:
    passages = [
        UsedPassage(id=i, text=docs[k].text, title=docs[k].title)
        for i, k in enumerate(dict.fromkeys(r["retrieved_keys"]))
        if k in docs
    ]
    claims = extract_claims(
        r.get("explanation") or "",
        r["prediction"],
        r["question"],
        g.max_claims,
        yes_no_answer_claim=bool(getattr(verifier, "judges_answers", False)),  # the store's rule
    )
    verdicts = verifier.verify(claims, passages) if claims and passages else []
    scores = [v.score for v in verdicts]
    gs = grounding_score(scores, g.tau_nli) if verdicts else 0.0
    soft = float(np.mean(scores)) if scores else 0.0
    fits = check_answer_form(r["question"], r["prediction"]).fits
    rows.append((gs, soft, fits, bool(r["contain_correct"])))
    if dump is not None:
        dump.write(
            json.dumps(
                {
                    "system": r["system"],
                    "position": r["position"],
                    "question_id": r["question_id"],
                    "prediction": r["prediction"],
                    "contain_correct": bool(r["contain_correct"]),
                    "gs": gs,
                    "mean_g": soft,
                    "answer_form_fits": fits,
                }
            )
            + "\n"
        )
        dump.flush()
if dump is not None:
    dump.close()
print(f"{(time.perf_counter() - t0) / max(len(rows), 1) * 1000:.0f} ms per answer")
n = max(len(rows), 1)
print(f"answers {len(rows)} (Contain-correct {sum(c for *_, c in rows)}, {sum(c for *_, c in rows) / n:.1%})")
for name, scored in (
    ("GS alone", [(gs, c) for gs, _, _, c in rows]),
    ("answer form, then GS", [(gs if fits else 0.0, c) for gs, _, fits, c in rows]),
    ("mean g (soft GS)", [(soft, c) for _, soft, _, c in rows]),
    ("answer form, mean g", [(soft if fits else 0.0, c) for _, soft, fits, c in rows]),
):
    ok = [x for x, c in scored if c]
    bad = [x for x, c in scored if not c]
    passed = [c for x, c in scored if x >= g.tau_gs]
    rejected = [c for x, c in scored if x < g.tau_gs]
    print(
        f"{name:22s} passed {len(passed)} ({len(passed) / n:.1%}); correct among passed "
        f"{_mean(passed):.3f}, among rejected "
        f"{_mean(rejected):.3f}; mean GS correct {_mean(ok):.3f} wrong {_mean(bad):.3f}; "
        f"ROC AUC {auc(ok, bad) if ok and bad else float('nan'):.3f}"
    )
