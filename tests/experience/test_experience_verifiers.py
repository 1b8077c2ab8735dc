"""Claim verifiers: NLI (a tiny real model saved locally; the paper's model is not on this
machine, so loading it must fail cleanly), auto's visible fallback, the LLM verifier with a
rule-based chat model, and the offline verifier on hand-made evidence with the packaged embedder."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from livingrag.errors import ConfigError, ModelUnavailable
from livingrag.experience.grounding import Claim, extract_claims
from livingrag.experience.types import UsedPassage
from livingrag.experience.verifiers import build_verifier
from livingrag.experience.verifiers.llm import LLMVerifier, parse_entailment
from livingrag.experience.verifiers.nli import NLIVerifier, entailment_index
from livingrag.experience.verifiers.offline import (
    OfflineVerifier,
    answer_found,
    content_words,
    head_relation,
    number_agreement,
    numbers,
    question_entity_coverage,
    relation_agreement,
    relation_words,
)
from livingrag.generation.llm import Completion, Message
from livingrag.models.embedder import SentenceEncoder
from tests.experience_helpers import HashingEncoder

PASSAGES = (
    UsedPassage(
        1,
        "Winter Harbour is a 2003 thriller film directed by Orla Brennick and produced by Kestrel Pictures. "
        "It was shot in Reykjavik over eight weeks.",
        "Winter Harbour",
    ),
    UsedPassage(
        2,
        "Orla Brennick (born 14 March 1961) is an Irish film director and screenwriter. Brennick was born in "
        "Galway and studied history at Trinity College Dublin.",
        "Orla Brennick",
    ),
)


# ------------------------------------------------------------------ NLI


def test_paper_nli_model_is_unavailable_here_and_fails_cleanly() -> None:
    with pytest.raises(ModelUnavailable, match="not available locally"):
        NLIVerifier("cross-encoder/nli-deberta-v3-large", encoder=HashingEncoder(), evidence_k=2)
    with pytest.raises(ModelUnavailable):
        build_verifier("nli", encoder=HashingEncoder(), evidence_k=2, nli_model="/nonexistent/nli-model")


def test_auto_falls_back_to_offline_visibly(caplog: pytest.LogCaptureFixture) -> None:
    # a note (info the first time in a process, debug after it); `livingrag doctor` reports it
    # the handler on the logger itself: a CLI test may have stopped "livingrag" propagating to the root
    logger = logging.getLogger("livingrag.experience.verifiers")
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.DEBUG, logger="livingrag.experience.verifiers"):
            r = build_verifier("auto", encoder=HashingEncoder(), evidence_k=2, nli_model="/nonexistent/nli-model")
    finally:
        logger.removeHandler(caplog.handler)
    assert r.name == "offline" and r.requested == "auto"
    assert r.fallback_reason and "not available locally" in r.fallback_reason
    assert r.record()["verifier_fallback_reason"] == r.fallback_reason
    assert any("falling back to the offline verifier" in m for m in caplog.messages)


def test_none_and_llm_without_model() -> None:
    assert build_verifier("none", encoder=HashingEncoder(), evidence_k=2).verifier is None
    with pytest.raises(ConfigError, match="needs a configured LLM"):
        build_verifier("llm", encoder=HashingEncoder(), evidence_k=2)


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (tiny, untrained) BERT sequence classifier whose classifier is set by hand so that
    P(entailment) = e^2 / (e^2 + 2) for every input."""
    import torch

    # transformers 5 keeps BertTokenizerFast only as a lazy alias (of BertTokenizer), which its types lack
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast  # type: ignore[attr-defined]

    path = tmp_path_factory.mktemp("tiny-nli")
    words = sorted({w.lower() for p in PASSAGES for w in re.findall(r"\w+", p.text + " " + p.title)})
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    config = BertConfig(
        vocab_size=5 + len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        id2label={0: "contradiction", 1: "entailment", 2: "neutral"},
        label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
    )
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 2.0, 0.0]))
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_nli_verifier_from_a_local_path(tiny_nli: Path) -> None:
    r = build_verifier("auto", encoder=HashingEncoder(), evidence_k=2, nli_model=str(tiny_nli))
    assert r.name == f"nli:{tiny_nli}" and r.fallback_reason is None
    v = r.verifier
    assert isinstance(v, NLIVerifier) and v.entail == 1
    claims = [Claim("Winter Harbour was directed by Orla Brennick."), Claim("Brennick was born in Galway.")]
    verdicts = v.verify(claims, PASSAGES)
    p = math.exp(2) / (math.exp(2) + 2)
    assert [round(x.score, 6) for x in verdicts] == [round(p, 6)] * 2
    assert all(x.passage_id in (1, 2) and x.evidence for x in verdicts)
    assert v.entailment_probabilities([]).shape == (0,)


def test_entailment_label_lookup() -> None:
    assert entailment_index({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}) == 0
    assert entailment_index({0: "not_entailment", 1: "entailment"}) == 1
    with pytest.raises(ModelUnavailable, match="entailment"):
        entailment_index({0: "LABEL_0", 1: "LABEL_1"})


# ------------------------------------------------------------------ LLM


class OverlapJudge:
    """A deterministic chat model implementing the LLM protocol: it answers "yes" when every
    capitalised word and number of the claim occurs in the evidence, else "no"."""

    name = "overlap-judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> Completion:
        user = messages[-1]["content"]
        self.prompts.append(user)
        evidence = user.split("Claim:")[0]
        claim = user.split("Claim:")[1].split("\n")[0]
        keys = re.findall(r"\b[A-Z]\w+|\d+", claim)
        ok = all(k in evidence for k in keys[1:])  # the first word is capitalised anyway
        return Completion(
            text="Yes." if ok else "No.", prompt_tokens=10, completion_tokens=1, model=self.name, latency_s=0.0
        )


def test_llm_verifier_asks_the_model_per_claim() -> None:
    judge = OverlapJudge()
    r = build_verifier("llm", encoder=HashingEncoder(), evidence_k=3, llm=judge)
    assert r.name == "llm:overlap-judge"
    claims = [Claim("Brennick was born in Galway."), Claim("Brennick was born in Cork in 1961.")]
    verdicts = r.verifier.verify(claims, PASSAGES)  # type: ignore[union-attr]
    assert [v.score for v in verdicts] == [1.0, 0.0]
    assert (
        len(judge.prompts) == 2
        and "[1]" in judge.prompts[0]
        and "Claim: Brennick was born in Galway." in judge.prompts[0]
    )


@pytest.mark.parametrize(
    ("reply", "p"),
    [("Yes", 1.0), ("yes, it does", 1.0), ("No.", 0.0), ("0.85", 0.85), ("Entailed.", 1.0), ("contradiction", 0.0),
     ("The evidence is not entailed", 0.0), ("???", None), ("", None)],
)  # fmt: skip
def test_parse_entailment(reply: str, p: float | None) -> None:
    assert parse_entailment(reply) == p


def test_llm_verifier_uses_the_versioned_prompt() -> None:
    v = LLMVerifier(OverlapJudge(), encoder=HashingEncoder(), evidence_k=1)
    assert v.prompt.id == "grounding_entailment.v1" and v.prompt.fields == {"evidence", "claim"}


# ------------------------------------------------------------------ offline


def test_offline_features_by_hand() -> None:
    assert numbers("born 14 March 1961, 1,200 fans, the 3rd film, five days") == {"14", "1961", "1200", "3", "5"}
    assert content_words("The films were directed by Orla") == {"film", "direct", "orla"}
    assert number_agreement({"1961"}, {"14", "1961"}) == 1.0
    assert number_agreement({"1962"}, {"1961"}) == 0.0  # another year: a contradiction
    assert number_agreement({"8"}, set()) == 0.3
    assert answer_found("Galway", "Brennick was born in Galway.") and not answer_found("Cork", "born in Galway")
    assert question_entity_coverage("Where was the director of Winter Harbour born?", PASSAGES[0].text) == 1.0
    assert question_entity_coverage("Where was the director of Amber Coast born?", PASSAGES[0].text) == 0.0


@pytest.fixture(scope="module")
def embedder() -> SentenceEncoder:
    from livingrag.models.embedder import get_embedder

    return get_embedder()


def test_offline_verifier_supports_true_claims_and_rejects_false_ones(embedder: SentenceEncoder) -> None:
    v = OfflineVerifier(encoder=embedder, evidence_k=4)
    claims = [
        Claim("The film Winter Harbour was directed by Orla Brennick."),  # paraphrase: true
        Claim("Orla Brennick was born in Galway."),  # true
        Claim("Winter Harbour was released in 2003."),  # true (2003 film)
        Claim("Winter Harbour was directed by Dalia Marsh."),  # entity swapped
        Claim("Orla Brennick was born in 1975."),  # wrong year
        Claim("Orla Brennick was not born in Galway."),  # negated
        Claim("Winter Harbour won an Oscar for its music score."),  # unsupported
    ]
    g = [x.score for x in v.verify(claims, PASSAGES)]
    assert all(x >= 0.5 for x in g[:3]), g
    assert all(x < 0.5 for x in g[3:]), g


def test_offline_answer_claims(embedder: SentenceEncoder) -> None:
    v = OfflineVerifier(encoder=embedder, evidence_k=4)
    q = "Where was the director of Winter Harbour born?"
    good = extract_claims("", "Galway", q, 12)
    wrong = extract_claims("", "Cork", q, 12)
    unrelated_q = extract_claims("", "Galway", "Where was the director of Amber Coast born?", 12)
    assert v.verify(good, PASSAGES)[0].score == pytest.approx(1.0)
    assert v.verify(good, PASSAGES)[0].passage_id == 2
    assert v.verify(wrong, PASSAGES)[0].score == 0.0
    assert v.verify(unrelated_q, PASSAGES)[0].score == pytest.approx(0.4)  # < tau_nli: subject never named


def test_relation_words_fold_synonyms_and_skip_names_and_answer_types() -> None:
    q = "Where was the place of death of Maurice, Prince of Orange's father?"
    assert relation_words(q) == ["die", "parent"] and head_relation(q) == "die"
    q = "Who is the child of the performer of song Me And Bobby McGee?"
    assert relation_words(q) == ["child", "perform"] and head_relation(q) == "child"
    assert head_relation("Where was the director of Winter Harbour born?") == "born"  # the final verb
    assert head_relation("When did Lothair II's mother die?") == "die"
    assert head_relation("Which film came out first, 3 Dots or Dying God?") is None
    assert relation_agreement("die", "William the Silent was assassinated in Delft.")
    assert relation_agreement("child", "Her son Dean Miller is a singer.")
    assert not relation_agreement("die", "He was stadtholder of every province except Friesland.")
    assert not relation_agreement("born", "Winter Harbour was directed by Orla Brennick and shot in Reykjavik.")
    assert relation_agreement(None, "anything")


def test_an_answer_unit_without_the_questions_relation_is_weak(embedder: SentenceEncoder) -> None:
    passages = [
        UsedPassage(
            1, "Maurice of Orange was stadtholder of every province of the republic except Friesland.", "Maurice"
        ),
        UsedPassage(2, "William the Silent, father of Maurice of Orange, was assassinated in Delft.", "William"),
    ]
    q = "Where did Maurice of Orange's father die?"
    right, wrong = extract_claims("", "Delft", q, 12), extract_claims("", "Friesland", q, 12)
    v = OfflineVerifier(encoder=embedder, evidence_k=4)
    assert v.verify(right, passages)[0].score == pytest.approx(1.0)
    assert v.verify(wrong, passages)[0].score == pytest.approx(0.4)  # (0.4 + 0.6 * 1) * relation_miss 0.4
    off = OfflineVerifier(encoder=embedder, evidence_k=4, relation_miss=None)
    assert off.verify(wrong, passages)[0].score == pytest.approx(1.0)  # without the check it was grounded


def test_offline_verifier_with_no_passages(embedder: SentenceEncoder) -> None:
    v = OfflineVerifier(encoder=embedder, evidence_k=4)
    out = v.verify([Claim("Orla Brennick was born in Galway.")], [])
    assert [x.score for x in out] == [0.0] and out[0].passage_id is None
    assert np.isfinite([x.score for x in out]).all()


def test_offline_tokens_are_never_empty() -> None:
    """Regression (found by `livingrag bench pipeline` on 2Wiki): a bare "n't" token gave an empty
    word, and content_words() crashed on it, turning the write-back into an error decision."""
    from livingrag.experience.verifiers.offline import content_words, words

    assert words("n't") == ["n't"]
    assert words("it isn't") == ["it", "is", "n't"]
    assert "" not in words("didn 't and n't 's")
    assert {"ireland", "win"} <= content_words("Ireland didn 't n't win")
