"""What stating earlier questions in the prompt does to one answer model's answers, measured with the
LLM before it is built into the store (issue 18: "oracle upper bounds first, LLM runs second").

`livingrag bench reuse --answers` bounds answer and finding reuse by what the answer model once got
right, and counts the questions whose intermediate answer an earlier related question's *output*
names, right or wrong. This replay asks the model. It reads that model's LinearRAG run
(``--records``, system ``linear``: one answer per question, valid for any order, since LinearRAG keeps
no state) and, in each stream order, scores every earlier question as eq. 7 scores an experience
(``alpha * cos(Emb q, Emb q_j) + (1 - alpha) * cos(a_base, map_j)``, over the base maps; the store
holds every earlier question, ungated). Up to ``findings_k`` of eq. 7's top K with ``s_ret >=
findings_floor`` (the settings, as ``select_findings``) are put in the prompt after LinearRAG's own
passages, in one of two forms:

* ``answer``: the store's findings, ``- <earlier question> <its answer>. <its evidence>``;
* ``evidence``: ``- <earlier question> <its evidence>``, without the earlier answer (the
  ``findings_evidence`` prompt), so a wrong earlier answer is never stated; what its evidence says
  can still carry a shared hop's intermediate answer.

The evidence is the earlier answer's explanation (the evidence line of the short answer style). A
question that gets no line keeps LinearRAG's answer: its prompt is LinearRAG's, and the local model
answers a prompt the same way each time. Printed per form and order, and over all orders: Contain-Acc
against LinearRAG's with a 95 % paired bootstrap interval, questions fixed and broken, how many got a
line, and completion tokens per question (a question's replayed answer counts its own tokens).

    LIVINGRAG_DB__DATA_DIR=runs/lrg-reuse LIVINGRAG_LLM__MODEL=qwen2.5-coder-1.5b \\
      .venv/bin/python benchmarks/findings_replay.py --dataset musique \\
      --data-dir ../shared/datasets/musique_reuse --records RUN/records.jsonl --orders 1 --dump replay.jsonl

The model is the configured one (``LIVINGRAG_LLM__*``): it must be the model that answered
``--records``. Each stated question is one LLM call; a (question, lines) pair already asked in an
earlier order is not asked again.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from livingrag.bench.reuse_metrics import select_experiences
from livingrag.bench.reuse_replay import ensure_corpus, resolve_preset
from livingrag.bench.run_answers import load_run_answers
from livingrag.config import get_settings
from livingrag.corpus import service
from livingrag.db.setup import open_database
from livingrag.evaluation.datasets import load_dataset, stream_orders
from livingrag.evaluation.metrics import contain_match
from livingrag.evaluation.paired import fixed_and_broke, paired_bootstrap
from livingrag.experience.matching import retrieval_scores
from livingrag.experience.scaffold import select_findings
from livingrag.experience.sparsify import sparsify
from livingrag.generation.providers import build_llm
from livingrag.generation.qa import Scaffold, build_qa_prompt, generate_answer, resolve_answer_style

FORMS = ("answer", "evidence")

ap = argparse.ArgumentParser(description="LLM replay of findings stated with or without earlier answers.")
ap.add_argument("--dataset", default="musique")
ap.add_argument("--data-dir", required=True)
ap.add_argument("--records", required=True, help="records.jsonl of the answer model's `eval stream` LinearRAG run.")
ap.add_argument("--orders", type=int, default=1, help="Stream orders (0 = file order, then shuffles of --seed).")
ap.add_argument("--only-orders", default=None, help="Comma-separated orders to run (default: all).")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--limit", type=int, default=None, help="Only the dataset's first N questions (a smoke run).")
ap.add_argument("--forms", default=",".join(FORMS), help="answer, evidence, or both (comma-separated).")
ap.add_argument("--tenant", default="bench")
ap.add_argument("--dump", default=None, help="Write each replayed answer here (JSON lines).")
args = ap.parse_args()
forms = [f.strip() for f in args.forms.split(",") if f.strip()]
if not forms or set(forms) - set(FORMS):
    raise SystemExit(f"--forms: use {', '.join(FORMS)} (got {args.forms!r})")

s = get_settings()
e = s.experience
data = load_dataset(args.dataset, args.data_dir)
qs = data.head(args.limit).questions
linear = {r["question_id"]: r for r in load_run_answers(args.records, system="linear", one_per="question")}
missing = [q.id for q in qs if q.id not in linear]
if missing:
    raise SystemExit(
        f"--records: {args.records} has no LinearRAG answer for {len(missing)} questions, e.g. {missing[0]}"
    )
settings = s.model_copy(deep=True)
settings.retrieval.preset = resolve_preset(args.dataset, None)  # type: ignore[assignment]
llm = build_llm(settings.llm, data_dir=settings.db.data_dir)
style = resolve_answer_style(settings.llm)
k_findings = e.findings_k or 2
print(
    f"settings: model {settings.llm.provider}:{settings.llm.model} (style {style}, "
    f"max_tokens {settings.llm.max_tokens}); "
    f"K {e.top_k}, alpha {e.alpha}, findings_k {k_findings}, findings_floor {e.findings_floor}; "
    f"preset {settings.retrieval.preset}; {len(qs)} questions; orders {args.orders} (seed {args.seed}); "
    f"forms {', '.join(forms)}; LinearRAG answers from {args.records}"
)

db = open_database(settings.db)
tenant_id, corpus, _passage_keys = ensure_corpus(db, settings, data, tenant=args.tenant)
retriever = service.retriever(db, tenant_id, corpus, settings)
t0 = time.perf_counter()
prepared: list[tuple[Any, Any, dict[int, float]]] = []
for q in qs:
    enc = retriever.encode(q.question)
    res = retriever.retrieve(enc, top_k=5)
    prepared.append((enc, res, sparsify(res.final_activation, e.epsilon, e.max_map_entities)))
emb = np.stack([np.asarray(p[0].embedding, dtype=np.float64) for p in prepared])
print(f"retrieval of {len(qs)} questions: {time.perf_counter() - t0:.1f} s")


def compare(p: dict[str, Any]) -> str:
    """Contain-Acc and completion tokens with the lines against LinearRAG's, paired over ``p``'s
    question-orders (95 % bootstrap), and the questions fixed and broken."""
    d = paired_bootstrap(p["rep"], p["lin"])
    t = paired_bootstrap(p["rep_tok"], p["lin_tok"])
    fixed, broke = fixed_and_broke([bool(x) for x in p["rep"]], [bool(x) for x in p["lin"]])
    return (
        f"Contain-Acc {d.mean_b:.1%} -> {d.mean_a:.1%}, diff {d.diff * 100:+.1f} [{d.lo * 100:+.1f}, "
        f"{d.hi * 100:+.1f}] points over {d.n} question-orders; fixed {fixed}, broke {broke}; completion tokens/q "
        f"{t.mean_b:.1f} -> {t.mean_a:.1f} ({t.diff:+.1f} [{t.lo:+.1f}, {t.hi:+.1f}])"
    )


only = None if args.only_orders is None else {int(x) for x in args.only_orders.split(",")}
asked: dict[tuple[int, tuple[int, ...], str], tuple[bool, int, str]] = {}
dump = open(args.dump, "w", encoding="utf-8") if args.dump else None  # noqa: SIM115
pooled: dict[str, dict[str, list[float]]] = {f: {"lin": [], "rep": [], "lin_tok": [], "rep_tok": []} for f in forms}
calls = 0
for o, order in enumerate(stream_orders(len(qs), args.orders, args.seed)):
    if only is not None and o not in only:
        continue
    per: dict[str, dict[str, Any]] = {
        f: {"lin": [], "rep": [], "lin_tok": [], "rep_tok": [], "lines": 0} for f in forms
    }
    earlier: list[int] = []
    for i in order:
        q = qs[i]
        lin = linear[q.id]
        found: list[int] = []
        if earlier:
            base = dict(prepared[i][0].base_activation)
            maps = [prepared[j][2] for j in earlier]
            s_all = retrieval_scores(emb[i], emb[earlier], base, maps, e.alpha).combined  # eq. 7
            top, _weights = select_experiences(s_all, e.top_k, e.tau_s, None)
            found = [earlier[t] for t in select_findings(s_all, top, e.findings_floor, k_findings)]
        for form in forms:
            stated = [
                Scaffold(
                    question=qs[j].question,
                    reasoning=linear[qs[j].id].get("explanation") or "",
                    answer=linear[qs[j].id]["prediction"],
                )
                for j in found
            ]
            if form == "evidence":
                stated = [x for x in stated if x.reasoning.strip()]
            ok, tokens = bool(lin["contain_correct"]), int(lin["completion_tokens"])
            if stated:
                key = (i, tuple(found), form)
                if key not in asked:
                    prompt = build_qa_prompt(
                        q.question,
                        prepared[i][1].passages,
                        findings=stated,
                        findings_with_answers=form == "answer",
                        style=style,
                    )
                    gen = generate_answer(llm, prompt, max_tokens=settings.llm.max_tokens)
                    calls += 1
                    asked[key] = (
                        contain_match(gen.answer, list(q.answers)),
                        gen.completion.completion_tokens,
                        gen.answer,
                    )
                    if dump is not None:
                        dump.write(
                            json.dumps(
                                {
                                    "order": o,
                                    "form": form,
                                    "question_id": q.id,
                                    "question": q.question,
                                    "gold": list(q.answers),
                                    "linear": lin["prediction"],
                                    "linear_correct": ok,
                                    "replayed": gen.answer,
                                    "replayed_correct": asked[key][0],
                                    "stated": [x.__dict__ for x in stated],
                                }
                            )
                            + "\n"
                        )
                        dump.flush()
                ok_rep, tok_rep, _answer = asked[key]
                per[form]["lines"] += 1
            else:
                ok_rep, tok_rep = ok, tokens
            per[form]["lin"].append(float(ok))
            per[form]["rep"].append(float(ok_rep))
            per[form]["lin_tok"].append(float(tokens))
            per[form]["rep_tok"].append(float(tok_rep))
        earlier.append(i)
    for form in forms:
        p = per[form]
        print(f"order {o}, {form}: {compare(p)}; {p['lines']} questions got a line")
        for part in ("lin", "rep", "lin_tok", "rep_tok"):
            pooled[form][part].extend(p[part])
for form in forms:
    if pooled[form]["lin"]:
        print(f"all orders, {form}: {compare(pooled[form])}")
print(f"{calls} LLM calls, {time.perf_counter() - t0:.0f} s")
retriever.close()
close = getattr(llm, "close", None)
if close is not None:
    close()
db.close()
if dump is not None:
    dump.close()
