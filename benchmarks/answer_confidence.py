"""How sure was the answer model of its own answer? A correct/wrong separator measured on kept runs.

For every answer of a run's ``records.jsonl`` (LinearRAG's by default: its prompt is rebuilt
exactly, with no scaffold or findings), the answer prompt is rebuilt from the retrieved passages
(``--style``, the current template), the model's reply ``Evidence: <explanation>\\nAnswer: <answer>``
is fed back to the local model token by token (teacher forcing), and the log-probability the model
gives each answer token is read. Per answer:

    mean_logprob  = (1/T) sum_t log P(a_t | prompt, evidence, a_<t)   (geometric-mean confidence)
    min_logprob   = min_t log P(a_t | ...)
    first_logprob = log P(a_1 | ...)

and the ROC AUC of each for Contain-correct vs wrong answers is printed, with the share of
correct answers above a few thresholds. No answer is generated; the cost is one prompt evaluation
per answer. Usage:

    .venv/bin/python benchmarks/answer_confidence.py --records benchmarks/results/musique-100-offline/records.jsonl \\
        --dataset musique --data-dir ../shared/datasets/musique --dump conf.jsonl
"""

import argparse
import json
import os
import time

import numpy as np

from livingrag.bench.run_answers import load_run_answers
from livingrag.bench.stats import roc_auc
from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.generation.providers import models_dir_for
from livingrag.generation.providers.llama_child import LlamaModel, log_softmax
from livingrag.generation.providers.local_models import resolve_model_path
from livingrag.generation.qa import build_qa_prompt

ap = argparse.ArgumentParser(description="Answer-token confidence of the answer model on a run's answers.")
ap.add_argument("--records", required=True)
ap.add_argument("--dataset", required=True)
ap.add_argument("--data-dir", required=True)
ap.add_argument("--system", default="linear")
ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="The answer model (a local preset or GGUF path).")
ap.add_argument("--style", default="short", choices=("short", "linearrag"))
ap.add_argument("--positions", default=None, help="A:B, stream positions A <= p < B only.")
ap.add_argument("--limit", type=int, default=None)
ap.add_argument("--threads", type=int, default=None)
ap.add_argument("--dump", default=None)
args = ap.parse_args()

s = get_settings()
records = load_run_answers(
    args.records, system=args.system, positions=args.positions, one_per="question", limit=args.limit
)
ds = load_dataset(args.dataset, args.data_dir)
docs = {d.key: d for d in ds.corpus}
path, name = resolve_model_path(args.model, models_dir_for(s.llm, s.db.data_dir))
model = LlamaModel(
    path, name=name, threads=args.threads or s.llm.threads or os.cpu_count() or 1, context_tokens=4096, timeout_s=600
)
llama = model.llama
print(
    f"settings: model {name}, style {args.style}, system {args.system}, positions {args.positions or 'all'}; "
    f"{len(records)} answers from {args.records}"
)


def logits_now() -> np.ndarray:
    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).astype(np.float64)


rows = []
out = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
t0 = time.perf_counter()
for r in records:
    passages = [docs[k] for k in dict.fromkeys(r["retrieved_keys"]) if k in docs]
    prompt = build_qa_prompt(r["question"], passages, style=args.style)
    chat = model.formatter(messages=prompt.messages)
    head = llama.tokenize(chat.prompt.encode("utf-8"), add_bos=not chat.added_special, special=True)
    explanation = " ".join((r.get("explanation") or "").split())
    prefix = f"Evidence: {explanation}\nAnswer:" if args.style == "short" else f"Thought: {explanation}\nAnswer:"
    answer = " " + " ".join(r["prediction"].split())
    pre = llama.tokenize(prefix.encode("utf-8"), add_bos=False, special=False)
    full = llama.tokenize((prefix + answer).encode("utf-8"), add_bos=False, special=False)
    if full[: len(pre)] != pre:
        continue
    answer_tokens = full[len(pre) :]
    llama.reset()
    llama.eval(head + pre)
    lps = []
    for t in answer_tokens:
        lps.append(float(log_softmax(logits_now())[t]))
        llama.eval([t])
    row = {
        "question_id": r["question_id"],
        "position": r["position"],
        "prediction": r["prediction"],
        "contain_correct": bool(r["contain_correct"]),
        "mean_logprob": float(np.mean(lps)),
        "min_logprob": float(np.min(lps)),
        "first_logprob": lps[0],
        "answer_tokens": len(lps),
    }
    rows.append(row)
    if out is not None:
        out.write(json.dumps(row) + "\n")
        out.flush()
if out is not None:
    out.close()
n = max(len(rows), 1)
correct = [r for r in rows if r["contain_correct"]]
print(f"{(time.perf_counter() - t0) / n * 1000:.0f} ms per answer; answers {len(rows)}, Contain-correct {len(correct)}")
for feature in ("mean_logprob", "min_logprob", "first_logprob"):
    ok = [r[feature] for r in rows if r["contain_correct"]]
    bad = [r[feature] for r in rows if not r["contain_correct"]]
    shares = []
    for p in (0.5, 0.7, 0.9):
        kept = [r["contain_correct"] for r in rows if r[feature] >= np.log(p)]
        shares.append(f"P>={p}: {len(kept)} kept, {np.mean(kept) if kept else float('nan'):.2f} correct")
    print(f"{feature:14s} ROC AUC {roc_auc(ok, bad) if ok and bad else float('nan'):.3f}; " + "; ".join(shares))
