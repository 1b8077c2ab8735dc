"""The judge verifier and the logprobs it reads: P(yes) from first-token alternatives by hand, the
OpenAI provider asking for and parsing them over real HTTP, the local model process's own
alternatives (log softmax by hand, request checks), and the judge over a scripted server."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from livingrag.config import GateSettings, LLMSettings, Settings
from livingrag.db.engine import Database
from livingrag.errors import ConfigError
from livingrag.experience.grounding import extract_claims
from livingrag.experience.store import ExperienceStore
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers import build_verifier
from livingrag.experience.verifiers.judge import JudgeVerifier, judged_score, yes_probability
from livingrag.generation.llm import Completion, takes_logprobs
from livingrag.generation.providers import build_llm
from livingrag.generation.providers.llama_child import (
    RequestError,
    TokenLogprobs,
    log_softmax,
    parse_chat_request,
    token_entry,
)
from livingrag.generation.providers.openai_provider import OpenAICompatibleLLM
from livingrag.testing.openai_server import OpenAICompatServer, Step
from tests.experience_helpers import HashingEncoder

PASSAGES = (
    UsedPassage(1, "Orla Brennick (born 14 March 1961) is an Irish film director born in Galway.", "Orla Brennick"),
    UsedPassage(2, "Winter Harbour is a 2003 film directed by Orla Brennick.", "Winter Harbour"),
)
MESSAGES = [{"role": "user", "content": "Is it?"}]


def _completion(text: str, alternatives: tuple[tuple[str, float], ...] = ()) -> Completion:
    return Completion(
        text=text, prompt_tokens=1, completion_tokens=1, model="m", latency_s=0.0, first_token_alternatives=alternatives
    )


# ------------------------------------------------------------------ P(yes), by hand


def test_yes_probability_sums_every_spelling_of_each_word() -> None:
    alts = (("Yes", math.log(0.6)), (" yes", math.log(0.1)), ("No", math.log(0.2)), ("Maybe", math.log(0.1)))
    assert yes_probability(alts) == pytest.approx(0.7 / 0.9)
    assert yes_probability((("no.", math.log(0.5)), ("NO", math.log(0.25)))) == 0.0
    assert yes_probability((("Yes", 0.0),)) == 1.0
    assert yes_probability((("Maybe", 0.0), ("yesterday", -1.0))) is None
    assert yes_probability(()) is None


def test_judged_score_falls_back_to_the_reply_text() -> None:
    assert judged_score(_completion("No", (("No", math.log(0.75)), ("Yes", math.log(0.25))))) == pytest.approx(0.25)
    assert judged_score(_completion("yes")) == 1.0
    assert judged_score(_completion("No.")) == 0.0
    assert judged_score(_completion("hmm", (("hmm", 0.0),))) == 0.0


# ------------------------------------------------------------------ the local model process's side


def test_token_entries_are_log_softmax_by_hand() -> None:
    logits = np.array([0.0, math.log(2.0), math.log(5.0), 0.0], dtype=np.float32)  # softmax: 1/9, 2/9, 5/9, 1/9
    logp = log_softmax(logits)
    assert logp == pytest.approx(np.log([1 / 9, 2 / 9, 5 / 9, 1 / 9]))
    entry = token_entry(logp, 1, 3, lambda t: f"t{t}")
    assert entry["token"] == "t1" and entry["logprob"] == pytest.approx(math.log(2 / 9))
    assert [a["token"] for a in entry["top_logprobs"]] == ["t2", "t1", "t0"]  # ties keep the lower id first
    expected = [math.log(5 / 9), math.log(2 / 9), math.log(1 / 9)]
    assert [a["logprob"] for a in entry["top_logprobs"]] == pytest.approx(expected)
    assert token_entry(logp, 2, 0, lambda t: f"t{t}")["top_logprobs"] == []


def test_the_recorder_writes_each_token_when_the_next_step_shows_it() -> None:
    text_of = {0: "<eos>", 1: "Gal", 2: "way", 3: "x"}.__getitem__
    step1 = np.log(np.array([0.1, 0.6, 0.2, 0.1]))  # chooses 1 ("Gal", p 0.6)
    step2 = np.log(np.array([0.2, 0.1, 0.5, 0.2]))  # chooses 2 ("way", p 0.5)
    step3 = np.log(np.array([0.7, 0.1, 0.1, 0.1]))  # argmax: end of text
    rec = TokenLogprobs(2, text_of)
    rec(np.array([9, 9]), step1)
    rec(np.array([9, 9, 1]), step2)
    rec(np.array([9, 9, 1, 2]), step3)
    entries = rec.finish(greedy_unconstrained=True, eos=0)
    assert [(e["token"], round(math.exp(e["logprob"]), 6)) for e in entries] == [("Gal", 0.6), ("way", 0.5)]
    assert [a["token"] for a in entries[0]["top_logprobs"]] == ["Gal", "way"]
    rec = TokenLogprobs(0, text_of)
    rec(np.array([9]), step1)  # one step, greedy: its argmax is the token chosen
    assert [e["token"] for e in rec.finish(greedy_unconstrained=True, eos=0)] == ["Gal"]
    rec = TokenLogprobs(0, text_of)
    rec(np.array([9]), step1)  # under a grammar the argmax need not be what was chosen: left out
    assert rec.finish(greedy_unconstrained=False, eos=0) == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs' must be an integer from 0 to 20"),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs' must be an integer from 0 to 20"),
        ({"top_logprobs": 3}, "needs 'logprobs': true"),
        ({"logprobs": "yes"}, "'logprobs' must be true or false, not str"),
        ({"logprobs": True, "top_logprobs": True}, "'top_logprobs' has the wrong type"),
    ],
)
def test_the_model_process_refuses_bad_logprob_fields(body: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError, match=message) as err:
        parse_chat_request({"messages": MESSAGES, **body})
    assert err.value.status == 400


def test_the_model_process_reads_logprob_fields() -> None:
    req = parse_chat_request({"messages": MESSAGES, "logprobs": True, "top_logprobs": 5})
    assert (req["logprobs"], req["top_logprobs"]) == (True, 5)
    assert (
        parse_chat_request({"messages": MESSAGES})["logprobs"],
        parse_chat_request({"messages": MESSAGES})["top_logprobs"],
    ) == (False, 0)


# ------------------------------------------------------------------ the OpenAI provider, over HTTP


@pytest.fixture
def server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer() as srv:
        yield srv


def _llm(server: OpenAICompatServer) -> OpenAICompatibleLLM:
    llm = build_llm(LLMSettings(provider="openai", base_url=server.base_url, model="judge-model", timeout_s=5.0))
    assert isinstance(llm, OpenAICompatibleLLM)
    return llm


def test_the_openai_provider_asks_for_and_parses_first_token_alternatives(server: OpenAICompatServer) -> None:
    llm = _llm(server)
    assert takes_logprobs(llm)
    server.script.append(Step(first_token_alternatives=(("No", -0.2), ("Yes", -1.8), ("no", -3.0))))
    c = llm.complete(MESSAGES, max_tokens=1, top_logprobs=2)
    body = server.requests[-1]["body"]
    assert body["logprobs"] is True and body["top_logprobs"] == 2 and body["max_tokens"] == 1
    assert c.first_token_alternatives == (("No", -0.2), ("Yes", -1.8))
    plain = llm.complete(MESSAGES)  # not asked: not sent, none parsed
    assert "logprobs" not in server.requests[-1]["body"] and plain.first_token_alternatives == ()
    with pytest.raises(ValueError, match="top_logprobs must be from 0 to 20"):
        llm.complete(MESSAGES, top_logprobs=21)
    server.script.append(Step(token_logprobs=(("Answer", -0.1), (":", -0.01), (" Paris", -0.5))))
    tokens_only = llm.complete(MESSAGES, top_logprobs=0)
    body = server.requests[-1]["body"]
    assert body["logprobs"] is True and "top_logprobs" not in body
    assert tokens_only.token_logprobs == (("Answer", -0.1), (":", -0.01), (" Paris", -0.5))
    assert tokens_only.first_token_alternatives == ()


def test_the_judge_asks_once_per_answer_and_scores_every_claim(server: OpenAICompatServer) -> None:
    judge = JudgeVerifier(_llm(server), encoder=HashingEncoder(), evidence_k=2)
    server.script.append(Step(first_token_alternatives=(("Yes", math.log(0.6)), ("No", math.log(0.2)))))
    claims = extract_claims(
        "Orla Brennick directed Winter Harbour. She was born in Galway.",
        "Galway",
        "Where was the director of Winter Harbour born?",
        12,
    )
    verdicts = judge.verify(claims, PASSAGES)
    assert len(server.requests) == 1
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    assert "Question: Where was the director of Winter Harbour born?" in prompt
    assert "Proposed answer: Galway" in prompt
    assert "[1] Orla Brennick: Orla Brennick (born 14 March 1961)" in prompt and "[2] Winter Harbour:" in prompt
    assert [v.score for v in verdicts] == pytest.approx([0.75] * len(claims))
    answer = [v for v in verdicts if v.source == "answer"]
    assert len(answer) == 1 and answer[0].passage_id in (1, 2) and answer[0].evidence


def test_the_judge_gets_an_answer_claim_for_yes_no_answers(server: OpenAICompatServer) -> None:
    q = "Was Winter Harbour directed by Orla Brennick?"
    assert [c.source for c in extract_claims("", "Yes", q, 12)] == []
    claims = extract_claims("", "Yes", q, 12, yes_no_answer_claim=True)
    assert [(c.source, c.answer) for c in claims] == [("answer", "Yes")]
    judge = JudgeVerifier(_llm(server), encoder=HashingEncoder(), evidence_k=2, evidence="units")
    server.script.append(Step(first_token_alternatives=(("No", math.log(0.9)), ("Yes", math.log(0.1)))))
    assert judge.verify(claims, PASSAGES)[0].score == pytest.approx(0.1)
    prompt = server.requests[0]["body"]["messages"][-1]["content"]
    assert "Proposed answer: Yes" in prompt and "[1] " in prompt and "[3]" not in prompt  # 2 units only


def test_the_judge_without_passages_or_answer_asks_nothing(server: OpenAICompatServer) -> None:
    judge = JudgeVerifier(_llm(server), encoder=HashingEncoder(), evidence_k=2)
    claims = extract_claims("Orla Brennick directed Winter Harbour.", "Galway", "Where?", 12)
    assert [v.score for v in judge.verify(claims, [])] == [0.0] * len(claims)
    assert [v.score for v in judge.verify([c for c in claims if c.source != "answer"], PASSAGES)] == [0.0]
    assert server.requests == []


def test_judge_settings_and_build() -> None:
    with pytest.raises(ConfigError, match="verifier=judge needs a configured LLM"):
        build_verifier("judge", encoder=HashingEncoder(), evidence_k=2)
    s = Settings(gates=GateSettings(verifier="judge", judge_model="qwen2.5-coder-1.5b", judge_evidence="units"))
    assert (s.gates.verifier, s.gates.judge_model, s.gates.judge_evidence) == ("judge", "qwen2.5-coder-1.5b", "units")
    with pytest.raises(ValueError, match="judge_evidence"):
        Settings(gates=GateSettings.model_validate({"judge_evidence": "sentences"}))
    with pytest.raises(ValueError, match="evidence must be"):
        JudgeVerifier(_completion_llm(), encoder=HashingEncoder(), evidence_k=2, evidence="all")


def _completion_llm() -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(LLMSettings(provider="openai", base_url="http://127.0.0.1:9/v1", model="m"))


def test_the_store_asks_the_judge_model_it_is_configured_with(db: Database, server: OpenAICompatServer) -> None:
    llm = LLMSettings(provider="openai", base_url=server.base_url, model="answer-model", timeout_s=5.0)
    gates = GateSettings(verifier="judge", judge_model="judge-model")
    store = ExperienceStore(db, Settings(llm=llm, gates=gates), encoder=HashingEncoder(), llm=_llm(server))
    assert store.verifier.name == "judge:openai:judge-model"
    plain = Settings(llm=llm, gates=GateSettings(verifier="judge"))
    same = ExperienceStore(db, plain, encoder=HashingEncoder(), llm=_llm(server))
    assert same.verifier.name == "judge:openai:judge-model"  # no judge_model: the answer LLM given to the store
    server.script.append(Step(first_token_alternatives=(("Yes", math.log(0.9)), ("No", math.log(0.1)))))
    claims = extract_claims("", "Galway", "Where was Orla Brennick born?", 12)
    assert store.verifier.verifier is not None
    assert store.verifier.verifier.verify(claims, PASSAGES)[0].score == pytest.approx(0.9)
    assert server.requests[-1]["body"]["model"] == "judge-model"
