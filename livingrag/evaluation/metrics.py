"""Answer, retrieval, token/cost and timing metrics, and the LLM judge (LLM-Acc).

Everything here is a pure function of predictions, gold answers, ranked passage keys and counters,
except :class:`Judge`, which calls an :class:`~livingrag.generation.llm.LLM` with the judge prompts of
the paper's figures 6 (``judge_qa``) and 7 (``judge_support``, WixQA).

Definitions (paper section 4, appendix F.3, tables 2, 3 and 15):

* ``normalize_answer``: SQuAD normalisation: lower-case, drop punctuation, drop the articles
  a/an/the, collapse white space.
* Contain-Acc: a prediction is correct when ``normalize(g)`` is a substring of ``normalize(pred)``
  for the gold answer or any alias ``g`` (empty normalised golds never match).
* EM / F1 (extras): SQuAD exact match and token F1, maximised over the gold answer and aliases.
* Recall@k: a question is recalled when *all* its gold passages are among the top k retrieved;
  per-passage Recall@k is ``|gold ∩ top-k| / |gold|`` (HippoRAG's convention). Questions without
  gold passages have no recall (None) and are left out of the means.
* Cost: ``prompt_tokens · p_in / 10^6 + completion_tokens · p_out / 10^6`` (defaults $0.50 and
  $3.00 per million, the paper's Qwen3.6 Plus prices).
* LLM-Acc: the share of judged answers the judge calls correct; unavailable (None, with a reason)
  when no judge is configured, never estimated from Contain-Acc.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from livingrag.errors import LLMError
from livingrag.evaluation.records import QueryRecord
from livingrag.generation.llm import LLM
from livingrag.generation.prompts import PromptTemplate, get_prompt

# --------------------------------------------------------------------------------------------------
# Answers

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def contain_match(prediction: str, answers: Sequence[str]) -> bool:
    """Contain-Acc for one answer: some normalised gold (or alias) is contained in the normalised prediction."""
    pred = normalize_answer(prediction)
    return any(g and g in pred for g in (normalize_answer(a) for a in answers))


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
    """SQuAD exact match against the gold answer or any alias."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(a) for a in answers)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1, the best over the gold answer and aliases: 2PR / (P + R) on normalised tokens."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for a in answers:
        gold = normalize_answer(a).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common == 0:
            continue
        p, r = common / len(pred), common / len(gold)
        best = max(best, 2 * p * r / (p + r))
    return best


@dataclass(frozen=True)
class AnswerScores:
    contain: bool
    em: bool
    f1: float


def score_answer(prediction: str, answers: Sequence[str]) -> AnswerScores:
    """Contain-Acc, EM and F1 of one prediction."""
    return AnswerScores(
        contain_match(prediction, answers), exact_match(prediction, answers), token_f1(prediction, answers)
    )


# --------------------------------------------------------------------------------------------------
# Retrieval


def all_gold_recall_at_k(retrieved: Sequence[str], gold: Collection[str], k: int) -> float | None:
    """1.0 when every gold passage is in the top ``k`` retrieved keys, else 0.0; None without gold."""
    if not gold:
        return None
    top = set(retrieved[:k])
    return 1.0 if all(g in top for g in gold) else 0.0


def passage_recall_at_k(retrieved: Sequence[str], gold: Collection[str], k: int) -> float | None:
    """Per-passage recall: ``|gold ∩ top-k| / |gold|``; None without gold."""
    if not gold:
        return None
    top = set(retrieved[:k])
    return sum(1 for g in set(gold) if g in top) / len(set(gold))


def mean_or_none(values: Sequence[float | bool | None]) -> float | None:
    """The mean of the values that are not None (None when there are none)."""
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


# --------------------------------------------------------------------------------------------------
# Tokens, cost, time


@dataclass(frozen=True)
class Prices:
    """USD per million tokens (defaults: the paper's Table 3 prices)."""

    prompt_per_m: float = 0.50
    completion_per_m: float = 3.00

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.prompt_per_m + completion_tokens * self.completion_per_m) / 1e6


@dataclass(frozen=True)
class TokenSummary:
    """Table 3 for one run: per-query means and the run's total cost."""

    queries: int
    prompt_total: int
    completion_total: int
    prompt_mean: float
    completion_mean: float
    cost_usd: float


def token_summary(prompt_tokens: Sequence[int], completion_tokens: Sequence[int], prices: Prices) -> TokenSummary:
    if len(prompt_tokens) != len(completion_tokens):
        raise ValueError("prompt and completion token lists differ in length")
    n = len(prompt_tokens)
    p, c = int(sum(prompt_tokens)), int(sum(completion_tokens))
    return TokenSummary(n, p, c, p / n if n else 0.0, c / n if n else 0.0, prices.cost(p, c))


def relative_delta(new: float | None, base: float | None) -> float | None:
    """(new − base) / base, as in Table 3's Rel. Δ; None when undefined."""
    if new is None or base is None or base == 0:
        return None
    return (new - base) / base


@dataclass(frozen=True)
class TimingSummary:
    """Table 15 for one run: module-level seconds per query; validation None when the system has none."""

    retrieval_s: float | None
    llm_s: float | None
    validation_s: float | None

    @property
    def retrieval_over_llm(self) -> float | None:
        if self.retrieval_s is None or not self.llm_s:
            return None
        return self.retrieval_s / self.llm_s


def timing_summary(
    retrieval_s: Sequence[float | None], llm_s: Sequence[float | None], validation_s: Sequence[float | None]
) -> TimingSummary:
    return TimingSummary(mean_or_none(retrieval_s), mean_or_none(llm_s), mean_or_none(validation_s))


# --------------------------------------------------------------------------------------------------
# LLM judge (figures 6 and 7)

JUDGE_PROMPTS: dict[str, str] = {"qa": "judge_qa", "support": "judge_support"}
"""Judge kind -> prompt name in :mod:`livingrag.generation.prompts` (placeholders ``{pred}``, ``{gold}``)."""


def judge_kind_for(dataset: str) -> str:
    """``support`` (figure 7) for WixQA, ``qa`` (figure 6) for every short-answer dataset."""
    return "support" if dataset == "wixqa" else "qa"


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


def parse_verdict(text: str) -> bool | None:
    """'correct' -> True, 'incorrect' -> False, anything else -> None (the judge did not answer)."""
    t = _THINK.sub(" ", text).strip().lower().strip(" \t\n\"'`*.:!")
    if t.startswith(("incorrect", "not correct")):
        return False
    if t.startswith("correct"):
        return True
    has_in = re.search(r"\b(incorrect|not correct)\b", t) is not None
    has_co = re.search(r"(?<!not )\bcorrect\b", t) is not None
    if has_in != has_co:
        return has_co
    return None


def format_gold(answers: Sequence[str]) -> str:
    """The gold answer as the judge sees it: the answer, then any aliases."""
    if not answers:
        return ""
    if len(answers) == 1:
        return answers[0]
    return f"{answers[0]} (also accepted: {'; '.join(answers[1:])})"


@dataclass(frozen=True)
class Verdict:
    """One judge call: ``correct`` None when the call failed or the reply was neither word."""

    correct: bool | None
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None


class Judge:
    """LLM-Acc through the judge prompts with a configured LLM.

    Judge calls are evaluation-only: their tokens are kept apart from the system's (Table 15 excludes
    them too). ``template`` overrides the prompt registry (``get_prompt(JUDGE_PROMPTS[kind])``).
    """

    def __init__(self, llm: LLM, kind: str = "qa", *, template: PromptTemplate | None = None, max_tokens: int = 16):
        if kind not in JUDGE_PROMPTS:
            raise ValueError(f"judge kind must be one of {sorted(JUDGE_PROMPTS)}, got {kind!r}")
        self.llm = llm
        self.kind = kind
        self.template = template or get_prompt(JUDGE_PROMPTS[kind])
        self.max_tokens = max_tokens

    @property
    def name(self) -> str:
        return f"{self.llm.name} ({self.template.id})"

    def judge(self, prediction: str, answers: Sequence[str]) -> Verdict:
        messages = self.template.render(pred=prediction, gold=format_gold(answers))
        try:
            c = self.llm.complete(messages, max_tokens=self.max_tokens, temperature=0.0)
        except LLMError as exc:
            return Verdict(None, error=f"{type(exc).__name__}: {exc}")
        return Verdict(parse_verdict(c.text), c.text, c.prompt_tokens, c.completion_tokens)

    def judge_many(self, items: Sequence[tuple[str, Sequence[str]]], *, concurrency: int = 4) -> list[Verdict]:
        """Judge (prediction, answers) pairs concurrently; results keep the input order."""
        if concurrency <= 1 or len(items) <= 1:
            return [self.judge(p, a) for p, a in items]
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(lambda it: self.judge(*it), items))


@dataclass(frozen=True)
class LLMAccuracy:
    """LLM-Acc of a run: ``value`` None (with ``reason``) when unavailable."""

    value: float | None
    judged: int
    total: int
    reason: str | None = None


def llm_accuracy(verdicts: Sequence[bool | None], *, judge: str | None) -> LLMAccuracy:
    """The share of judged answers called correct. Unjudged ones (failed calls, unparseable replies)
    are left out and counted; with no judge configured the value is unavailable, not guessed."""
    n = len(verdicts)
    if judge is None:
        return LLMAccuracy(None, 0, n, "no judge LLM configured")
    judged = [v for v in verdicts if v is not None]
    if not judged:
        return LLMAccuracy(None, 0, n, "the judge gave no usable verdict")
    return LLMAccuracy(sum(judged) / len(judged), len(judged), n)


# --------------------------------------------------------------------------------------------------
# One run (system x order)


@dataclass(frozen=True)
class RunSummary:
    """Tables 2, 3 and 15 for one system in one stream order. Accuracies and recalls are fractions."""

    system: str
    order: int
    queries: int
    errors: int
    contain_acc: float
    em: float
    f1: float
    llm_acc: LLMAccuracy
    questions_with_gold: int
    all_gold_recall_at_2: float | None
    all_gold_recall_at_5: float | None
    passage_recall_at_2: float | None
    passage_recall_at_5: float | None
    tokens: TokenSummary
    timing: TimingSummary


def summarize_run(records: Sequence[QueryRecord], *, prices: Prices, judge: str | None) -> RunSummary:
    """Summarise one run's records. Cost is recomputed from the token counts at ``prices``; recall
    from the ranked keys (the records' own recall fields when they carry no gold keys)."""
    if not records:
        raise ValueError("no records to summarise")
    systems = {(r.system, r.order) for r in records}
    if len(systems) != 1:
        raise ValueError(f"records of several runs given: {sorted(systems)}")
    system, order = next(iter(systems))
    n = len(records)

    def rec(r: QueryRecord, k: int) -> float | None:
        return (
            all_gold_recall_at_k(r.retrieved_keys, r.gold_keys, k)
            if r.gold_keys
            else getattr(r, f"all_gold_recall_at_{k}")
        )

    return RunSummary(
        system=system,
        order=order,
        queries=n,
        errors=sum(1 for r in records if r.error),
        contain_acc=sum(r.contain_correct for r in records) / n,
        em=sum(r.em for r in records) / n,
        f1=sum(r.f1 for r in records) / n,
        llm_acc=llm_accuracy([r.llm_correct for r in records], judge=judge),
        questions_with_gold=sum(1 for r in records if r.gold_keys or r.all_gold_recall_at_5 is not None),
        all_gold_recall_at_2=mean_or_none([rec(r, 2) for r in records]),
        all_gold_recall_at_5=mean_or_none([rec(r, 5) for r in records]),
        passage_recall_at_2=mean_or_none([passage_recall_at_k(r.retrieved_keys, r.gold_keys, 2) for r in records]),
        passage_recall_at_5=mean_or_none([passage_recall_at_k(r.retrieved_keys, r.gold_keys, 5) for r in records]),
        tokens=token_summary([r.prompt_tokens for r in records], [r.completion_tokens for r in records], prices),
        timing=timing_summary(
            [r.retrieval_s for r in records], [r.llm_s for r in records], [r.validation_s for r in records]
        ),
    )
