"""Agreement of a second answer model as a correctness signal for the grounding gate (issue 18).

For each answer of an evaluation run, a second local model (default the packaged 1.5B) answers the
same question from the same retrieved passages, with the prompt the pipeline builds without
experience (``build_qa_prompt``, the answer style of a local model). The answers *agree* when
their normalised forms are equal or one contains the other (the Contain rule of the metrics).
Printed: how often they agree, the share of Contain-correct first answers among the agreeing and
the disagreeing ones (what a gate "store only when a second model agrees" would keep), the ROC
AUC of agreement as a correct/wrong separator (a binary score: (TPR + TNR) / 2), and the second
model's own Contain-Acc.

    .venv/bin/python benchmarks/answer_agreement.py --records benchmarks/results/2wiki-300-offline/records.jsonl \
        --dataset 2wikimultihopqa --data-dir ../shared/datasets/2wikimultihopqa --positions 150:300 \
        --dump agreement.jsonl

Each answer is one LLM call to the second model (about 10-20 s on a 2-core CPU for the 1.5B).
A call that fails is retried once, then counted as disagreement and reported.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np

from livingrag.bench.run_answers import load_run_answers
from livingrag.bench.stats import roc_auc
from livingrag.config import get_settings
from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.metrics import contain_match, normalize_answer
from livingrag.generation.providers import build_llm
from livingrag.generation.qa import build_qa_prompt, generate_answer, resolve_answer_style


@dataclass(frozen=True)
class _Passage:
    title: str
    text: str


def agree(a: str, b: str) -> bool:
    """Normalised answers equal, or one containing the other (both non-empty)."""
    x, y = normalize_answer(a), normalize_answer(b)
    return bool(x and y) and (x == y or x in y or y in x)


ap = argparse.ArgumentParser(description="A second answer model's agreement as a gate signal.")
ap.add_argument("--records", required=True, help="records.jsonl of a `livingrag eval stream` run.")
ap.add_argument("--dataset", default="2wikimultihopqa")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--system", default="linear", help="Whose answers (default linear: prompts without experience).")
ap.add_argument("--second-model", default="qwen2.5-coder-1.5b", help="The second local model (preset or GGUF path).")
ap.add_argument("--positions", default=None, help="A:B, stream positions A <= p < B only.")
ap.add_argument("--limit", type=int, default=None)
ap.add_argument("--dump", default=None, help="Write each answer's pair here (JSON lines).")
args = ap.parse_args()

s = get_settings()
records = load_run_answers(
    args.records, system=args.system, positions=args.positions, one_per="question", limit=args.limit
)
docs = {d.key: d for d in load_dataset(args.dataset, args.data_dir).corpus}
llm_settings = s.llm.model_copy(update={"provider": "local", "model": args.second_model})
llm = build_llm(llm_settings, data_dir=s.db.data_dir)
style = resolve_answer_style(llm_settings)
print(
    f"settings: second model {args.second_model} (local, style {style}, max_tokens {s.llm.max_tokens}); "
    f"system {args.system}; positions {args.positions or 'all'}; {len(records)} answers from {args.records}"
)
dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
rows: list[tuple[bool, bool, bool]] = []
failed = 0
t0 = time.perf_counter()
for r in records:
    passages = [_Passage(docs[k].title, docs[k].text) for k in dict.fromkeys(r["retrieved_keys"]) if k in docs]
    prompt = build_qa_prompt(r["question"], passages, style=style)
    second = ""
    for attempt in range(2):
        try:
            second = generate_answer(llm, prompt, max_tokens=s.llm.max_tokens).answer
            break
        except Exception as exc:  # an LLM failure is reported and counted, never silently dropped
            print(f"  {r['question_id']}: second model failed ({type(exc).__name__}: {exc}); attempt {attempt + 1}")
    else:
        failed += 1
    same = agree(r["prediction"], second)
    second_ok = contain_match(second, r["gold_answers"]) if second else False
    rows.append((same, bool(r["contain_correct"]), second_ok))
    if dump is not None:
        dump.write(
            json.dumps(
                {
                    "position": r["position"],
                    "question_id": r["question_id"],
                    "prediction": r["prediction"],
                    "second": second,
                    "agree": same,
                    "contain_correct": bool(r["contain_correct"]),
                    "second_contain_correct": second_ok,
                }
            )
            + "\n"
        )
        dump.flush()
if dump is not None:
    dump.close()
llm_close = getattr(llm, "close", None)
if llm_close is not None:
    llm_close()

n = max(len(rows), 1)
agreeing = [c for a, c, _ in rows if a]
disagreeing = [c for a, c, _ in rows if not a]
ok = [1.0 if a else 0.0 for a, c, _ in rows if c]
bad = [1.0 if a else 0.0 for a, c, _ in rows if not c]
print(f"{(time.perf_counter() - t0) / n:.1f} s per answer; {failed} second answers failed")
print(f"answers {len(rows)}: first model Contain-correct {sum(c for _, c, _ in rows) / n:.1%}, "
      f"second model {sum(x for *_, x in rows) / n:.1%}")  # fmt: skip
print(
    f"agree {len(agreeing)} ({len(agreeing) / n:.1%}); Contain-correct among agreeing "
    f"{np.mean(agreeing) if agreeing else float('nan'):.3f}, among disagreeing "
    f"{np.mean(disagreeing) if disagreeing else float('nan'):.3f}; "
    f"ROC AUC of agreement {roc_auc(ok, bad) if ok and bad else float('nan'):.3f}"
)
