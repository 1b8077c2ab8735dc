"""The local provider: the packaged Qwen GGUF model, run in-process with llama-cpp-python.

Slow: the first run joins and verifies the model file (seconds) under the default data folder,
which later runs and the demo reuse; a short completion then takes a few seconds on 2 cores.
"""

from __future__ import annotations

import math
import threading

import pytest

from livingrag.config import LLMSettings, default_data_dir
from livingrag.errors import LLMError, LLMTimeout
from livingrag.experience.grounding import extract_claims
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers.judge import JudgeVerifier
from livingrag.generation.llm import LLM
from livingrag.generation.providers import build_llm
from livingrag.generation.providers.local import LocalLLM
from livingrag.generation.qa import build_qa_prompt, generate_answer
from tests.experience_helpers import HashingEncoder

pytestmark = pytest.mark.slow

MODEL = "qwen2.5-coder-0.5b"  # the smaller preset keeps the test quick; the same code runs both


@pytest.fixture(scope="module")
def llm() -> LocalLLM:
    settings = LLMSettings(provider="local", model=MODEL, max_tokens=16, timeout_s=120, context_tokens=1024)
    model = build_llm(settings, data_dir=default_data_dir())
    assert isinstance(model, LocalLLM)
    return model.load()


def test_local_model_answers_a_tiny_prompt(llm: LocalLLM) -> None:
    assert isinstance(llm, LLM)
    messages = [{"role": "user", "content": "What is the capital of France? Reply with one word."}]
    c = llm.complete(messages)
    assert "paris" in c.text.lower()
    assert c.usage_source == "tokenizer" and c.attempts == 1
    assert 10 < c.prompt_tokens < 60  # the question plus Qwen's chat template
    assert 1 <= c.completion_tokens <= 16
    assert c.model == f"local:{MODEL}" and c.latency_s > 0
    assert llm.model_path is not None and llm.model_path.name.endswith(".gguf")


def test_greedy_decoding_is_deterministic_and_respects_max_tokens(llm: LocalLLM) -> None:
    messages = [{"role": "user", "content": "Count from one to fifty in words, separated by commas."}]
    a = llm.complete(messages, max_tokens=8)
    b = llm.complete(messages, max_tokens=8)
    assert a.text == b.text
    assert a.completion_tokens == 8 and a.finish_reason == "length"


def test_token_counts_use_the_models_tokenizer(llm: LocalLLM) -> None:
    assert llm.count_tokens("Hello world") == 2
    assert llm.count_tokens("") == 0


def test_qa_prompt_end_to_end_follows_the_grammar(llm: LocalLLM) -> None:
    prompt = build_qa_prompt(
        "Where was the director of Film Alpha born?",
        ["Film Alpha is a 1961 drama directed by Mira Okafor.", "Mira Okafor was born in Lagos in 1920."],
        style="short",
    )
    assert prompt.grammar
    out = generate_answer(llm, prompt, max_tokens=48)
    assert out.completion.text.startswith("Evidence: ") and "\nAnswer: " in out.completion.text
    assert out.marker_found and out.explanation
    assert "lagos" in out.answer.lower()
    assert out.completion.prompt_tokens > 50


def test_grammar_constrains_the_reply(llm: LocalLLM) -> None:
    c = llm.complete([{"role": "user", "content": "Is Paris in France?"}], grammar='root ::= "yes" | "no"')
    assert c.text in ("yes", "no")
    with pytest.raises(LLMError, match="invalid output grammar"):
        llm.complete([{"role": "user", "content": "hi"}], grammar="root ::= (")


def test_calls_from_many_threads_are_serialised(llm: LocalLLM) -> None:
    messages = [{"role": "user", "content": "Say OK."}]
    results: list[str] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            results.append(llm.complete(messages, max_tokens=3).text)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 3 and len(set(results)) == 1


def test_generation_past_the_timeout_raises_llm_timeout() -> None:
    settings = LLMSettings(provider="local", model=MODEL, timeout_s=0.01, context_tokens=512)
    slow = build_llm(settings, data_dir=default_data_dir())
    with pytest.raises(LLMTimeout, match=r"did not finish within 0.01 s"):
        slow.complete([{"role": "user", "content": "Write a long story."}], max_tokens=200)


def test_timeout_under_a_grammar_ends_cleanly() -> None:
    """Regression: ending generation must not force a token that the grammar forbids (llama.cpp aborts)."""
    settings = LLMSettings(provider="local", model=MODEL, timeout_s=0.01, context_tokens=512)
    slow = build_llm(settings, data_dir=default_data_dir())
    grammar = 'root ::= "Evidence: " [^\\n]+ "\\nAnswer: " [^\\n]+'
    with pytest.raises(LLMTimeout):
        slow.complete([{"role": "user", "content": "Tell me about Paris."}], max_tokens=64, grammar=grammar)  # type: ignore[call-arg]


def test_prompt_longer_than_the_context_is_a_clear_error() -> None:
    settings = LLMSettings(provider="local", model=MODEL, context_tokens=256)
    small = build_llm(settings, data_dir=default_data_dir())
    with pytest.raises(LLMError, match="LIVINGRAG_LLM__CONTEXT_TOKENS"):
        small.complete([{"role": "user", "content": "word " * 400}], max_tokens=4)


def test_an_answer_does_not_depend_on_the_request_before_it(llm: LocalLLM) -> None:
    """Each prompt is evaluated from its first token (no KV-cache prefix reuse across requests), so
    a prompt answered after another that shares a long prefix with it, and after one that shares
    none, gets the same reply."""
    shared = "Passages:\n" + " ".join(f"Fact {i}: the river Ulm{i} flows into lake Bera{i}." for i in range(30))
    question = [{"role": "user", "content": shared + "\nWhich lake does the river Ulm17 flow into?"}]
    other_q = [{"role": "user", "content": shared + "\nWhich lake does the river Ulm3 flow into?"}]
    unrelated = [{"role": "user", "content": "Name a colour."}]
    llm.complete(other_q, max_tokens=12)
    after_shared = llm.complete(question, max_tokens=12)
    llm.complete(unrelated, max_tokens=4)
    after_unrelated = llm.complete(question, max_tokens=12)
    assert after_shared.text == after_unrelated.text


def test_first_token_alternatives_come_from_the_model(llm: LocalLLM) -> None:
    messages = [{"role": "user", "content": "Is Paris the capital of France? Answer yes or no."}]
    c = llm.complete(messages, max_tokens=1, temperature=0.0, top_logprobs=5)
    alts = c.first_token_alternatives
    assert len(alts) == 5 and [lp for _, lp in alts] == sorted((lp for _, lp in alts), reverse=True)
    assert sum(math.exp(lp) for _, lp in alts) <= 1.0 + 1e-6
    assert c.text.strip() and alts[0][0].strip() == c.text.strip()  # greedy: the best alternative is the reply
    assert llm.complete(messages, max_tokens=1, temperature=0.0).first_token_alternatives == ()


def test_the_judge_on_the_real_model_prefers_the_supported_answer(llm: LocalLLM) -> None:
    judge = JudgeVerifier(llm, encoder=HashingEncoder(), evidence_k=2)
    passages = [
        UsedPassage(1, "Orla Brennick is an Irish film director. She was born in Galway in 1961.", "Orla Brennick")
    ]
    q = "Where was Orla Brennick born?"
    right = judge.verify(extract_claims("", "Galway", q, 4), passages)[0].score
    wrong = judge.verify(extract_claims("", "Tokyo", q, 4), passages)[0].score
    assert 0.0 <= wrong < right <= 1.0 and right > 0.5


def test_streamed_reply_equals_the_whole_reply_token_by_token(llm: LocalLLM) -> None:
    """The model process streams each token as it is made (server-sent chunks); the pieces join into
    the same reply, token counts and log-probabilities as the whole reply."""
    messages = [{"role": "user", "content": "Count from one to five in words, separated by commas."}]
    whole = llm.complete(messages, max_tokens=12, top_logprobs=2)
    pieces: list[str] = []
    streamed = llm.complete(messages, max_tokens=12, top_logprobs=2, on_token=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == streamed.text == whole.text
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (whole.prompt_tokens, whole.completion_tokens)
    assert streamed.finish_reason == whole.finish_reason
    assert streamed.token_logprobs == whole.token_logprobs and streamed.first_token_alternatives


def test_streamed_qa_answer_under_the_grammar(llm: LocalLLM) -> None:
    prompt = build_qa_prompt(
        "Where was the director of Film Alpha born?",
        ["Film Alpha is a 1961 drama directed by Mira Okafor.", "Mira Okafor was born in Lagos in 1920."],
        style="short",
    )
    pieces: list[str] = []
    out = generate_answer(llm, prompt, max_tokens=48, on_token=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == out.completion.text
    assert out.completion.text.startswith("Evidence: ") and "lagos" in out.answer.lower()


def test_streamed_timeout_and_context_errors_are_the_same_errors() -> None:
    slow = build_llm(
        LLMSettings(provider="local", model=MODEL, timeout_s=0.01, context_tokens=256), data_dir=default_data_dir()
    )
    with pytest.raises(LLMTimeout, match=r"did not finish within 0.01 s"):
        slow.complete([{"role": "user", "content": "Write a long story."}], max_tokens=200, on_token=lambda t: None)  # type: ignore[call-arg]
    with pytest.raises(LLMError, match="LIVINGRAG_LLM__CONTEXT_TOKENS"):
        slow.complete([{"role": "user", "content": "word " * 400}], max_tokens=4, on_token=lambda t: None)  # type: ignore[call-arg]
