"""Measure an answer model on typical RAG prompts: seconds per answer, tokens, Contain-Acc, format rate.

Each prompt holds 5 passages of a 2WikiMultiHopQA question (its gold passages plus neighbouring
distractors from the same question's context), read at run time from the development data in
``shared/datasets`` (nothing is copied into the project). These small models are fragile to prompt
wording: re-run this after every change to the QA prompts.

    python scripts/measure_local_llm.py --model qwen2.5-coder-1.5b --style short -n 20
    python scripts/measure_local_llm.py --provider openai --base-url http://localhost:8000/v1 --model NAME
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import string
import sys
import time
from pathlib import Path

from livingrag.config import LLMSettings, default_data_dir
from livingrag.evaluation.datasets import load_dataset
from livingrag.generation.providers import build_llm
from livingrag.generation.qa import build_qa_prompt, generate_answer

ROOT = Path(__file__).resolve().parents[1]


def find_datasets() -> Path:
    for cand in (ROOT.parent / "shared" / "datasets", ROOT.parent.parent / "shared" / "datasets"):
        if (cand / "2wikimultihopqa").is_dir():
            return cand
    sys.exit("measure: no shared/datasets/2wikimultihopqa next to the repository; pass --datasets")


def normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", default="local", choices=["local", "openai"])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--style", default="short", choices=["short", "linearrag"])
    ap.add_argument("-n", type=int, default=20, help="questions (default 20)")
    ap.add_argument("--offset", type=int, default=0, help="first question index (default 0)")
    ap.add_argument("--passages", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=None, help="default: 64 short, 256 linearrag")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per answer before LLMTimeout")
    ap.add_argument("--datasets", type=Path, default=None)
    ap.add_argument("--show", action="store_true", help="print every reply")
    ap.add_argument("--json", type=Path, default=None, help="write per-question records here")
    args = ap.parse_args()

    data = load_dataset("2wikimultihopqa", (args.datasets or find_datasets()) / "2wikimultihopqa")
    corpus, questions = data.corpus, data.questions
    position = {d.key: i for i, d in enumerate(corpus)}
    max_tokens = args.max_tokens or (64 if args.style == "short" else 256)
    settings = LLMSettings(
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        threads=args.threads,
        max_tokens=max_tokens,
        timeout_s=args.timeout,
    )
    llm = build_llm(settings, data_dir=default_data_dir())
    t0 = time.perf_counter()
    if hasattr(llm, "load"):
        llm.load()
    print(f"model {llm.name}: ready in {time.perf_counter() - t0:.1f} s; style {args.style}; max_tokens {max_tokens}")

    rng = random.Random(0)
    records = []
    for q in questions[args.offset : args.offset + args.n]:
        gold = [position[k] for k in q.gold_keys]
        picked = gold[: args.passages]
        step = 1
        while len(picked) < args.passages:  # neighbours: the question's own distractor paragraphs
            for idx in (min(gold) - step, max(gold) + step):
                if 0 <= idx < len(corpus) and idx not in picked and len(picked) < args.passages:
                    picked.append(idx)
            step += 1
        rng.shuffle(picked)
        passages = [f"{corpus[i].title}\n{corpus[i].text}" for i in picked]
        prompt = build_qa_prompt(q.question, passages, style=args.style)
        out = generate_answer(llm, prompt)
        c = out.completion
        pred, gold_ans = normalize(out.answer), normalize(q.answer)
        hit = bool(gold_ans) and gold_ans in pred
        records.append(
            {
                "question": q.question,
                "gold": q.answer,
                "answer": out.answer,
                "marker": out.marker_found,
                "contain": hit,
                "latency_s": round(c.latency_s, 3),
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "explanation": out.explanation,
            }
        )
        mark = "+" if hit else "-"
        print(
            f"{mark} {c.latency_s:5.1f}s p={c.prompt_tokens:4d} c={c.completion_tokens:3d} "
            f"{q.question[:60]!r} -> {out.answer[:50]!r} (gold {q.answer!r})",
            flush=True,
        )
        if args.show:
            print("   | " + c.text.replace("\n", "\n   | "))

    lat = [r["latency_s"] for r in records]
    n = len(records)
    print(
        f"\n{llm.name} style={args.style} n={n} threads={getattr(llm, 'threads', '-')}: "
        f"{statistics.mean(lat):.2f} s/answer (median {statistics.median(lat):.2f}, max {max(lat):.2f}); "
        f"prompt tokens {statistics.mean(r['prompt_tokens'] for r in records):.0f}, "
        f"completion tokens {statistics.mean(r['completion_tokens'] for r in records):.1f}; "
        f"Contain-Acc {sum(r['contain'] for r in records) / n:.2f}; "
        f"'Answer:' written {sum(r['marker'] for r in records) / n:.0%}"
    )
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
