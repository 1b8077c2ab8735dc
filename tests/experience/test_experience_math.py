"""The experience store's equations on hand-computed values (pure modules: no database, no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from livingrag.errors import InvalidInput
from livingrag.experience.fusion import (
    cut_top_h,
    fuse,
    fusion_weights,
    newly_active,
    normalize_to_base,
    softmax_weights,
)
from livingrag.experience.grounding import (
    Claim,
    claim_support,
    evidence_units,
    extract_claims,
    grounding_score,
    passes_grounding,
)
from livingrag.experience.keysent import compose_summary, keysent, top_entities
from livingrag.experience.matching import (
    apply_decay,
    decay_factors,
    retrieval_scores,
    retrieval_scores_from_cosines,
    top_k,
)
from livingrag.experience.novelty import is_novel, novelty_score
from livingrag.experience.scaffold import scaffold_scores, select_findings, select_scaffold
from livingrag.experience.sentences import split_sentences
from livingrag.experience.similarity import (
    dense_cosines,
    sparse_cosine,
    sparse_cosines,
    sparse_cosines_flat,
    sparse_dot,
    sparse_norm,
    unit_sparse,
)
from livingrag.experience.sparsify import sparsify, validate_activation
from livingrag.experience.template import DATE, ENT, NUM, QUOTE, guess_mentions, has_placeholder, mask, mask_scaffold

# ------------------------------------------------------------------ similarity


def test_sparse_cosine_by_hand() -> None:
    a, b = {1: 3.0, 2: 4.0}, {1: 1.0, 3: 2.0}
    assert sparse_norm(a) == 5.0
    assert sparse_dot(a, b) == 3.0
    assert sparse_cosine(a, b) == pytest.approx(3.0 / (5.0 * math.sqrt(5.0)))
    assert sparse_cosine(a, {}) == 0.0 and sparse_cosine({}, {}) == 0.0
    assert unit_sparse(a) == {1: 0.6, 2: 0.8}


def test_sparse_cosines_flat_by_hand() -> None:
    """Maps concatenated with their lengths: {1: 3, 2: 4}, {} and {5: 2} against base {1: 1, 5: 1}."""
    base = {1: 1.0, 5: 1.0}
    ids, w, lengths = np.array([1, 2, 5]), np.array([3.0, 4.0, 2.0]), np.array([2, 0, 1])
    got = sparse_cosines_flat(base, ids, w, lengths)
    # 3 / (5 * sqrt 2), 0 (empty map), 2 / (2 * sqrt 2)
    assert got == pytest.approx([3 / (5 * math.sqrt(2)), 0.0, 1 / math.sqrt(2)])
    per_row = sparse_cosines(base, [ids[:2], ids[2:2], ids[2:]], [w[:2], w[2:2], w[2:]])
    assert per_row == pytest.approx(got)
    assert sparse_cosines_flat({}, ids, w, lengths).tolist() == [0.0, 0.0, 0.0]
    assert sparse_cosines_flat(base, ids[:0], w[:0], np.zeros(0)).shape == (0,)
    with pytest.raises(ValueError, match="lengths summing to 2"):
        sparse_cosines_flat(base, ids, w, np.array([1, 1]))


def test_dense_cosines_by_hand() -> None:
    m = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [0.0, 0.0]])
    assert dense_cosines(np.array([2.0, 0.0]), m) == pytest.approx([1.0, 0.0, 1 / math.sqrt(2), 0.0])


# ------------------------------------------------------------------ eq. 7 matching


def test_eq7_retrieval_scores_by_hand() -> None:
    q = np.array([1.0, 0.0])
    v = np.array([[1.0, 0.0], [0.0, 1.0]])
    base = {1: 1.0}
    maps = [{1: 1.0}, {1: 3.0, 2: 4.0}]
    s = retrieval_scores(q, v, base, maps, alpha=0.5)
    # s_1 = 0.5 * 1 + 0.5 * 1 ; s_2 = 0.5 * 0 + 0.5 * 3/5
    assert s.embedding == pytest.approx([1.0, 0.0])
    assert s.activation == pytest.approx([1.0, 0.6])
    assert s.combined == pytest.approx([1.0, 0.3])
    s = retrieval_scores(q, v, base, maps, alpha=0.2)
    assert s.combined == pytest.approx([1.0, 0.8 * 0.6])
    # the same from the embedding cosines and the maps concatenated, as preselection returns them
    flat = retrieval_scores_from_cosines(
        np.array([1.0, 0.0]), base, np.array([1, 1, 2]), np.array([1.0, 3.0, 4.0]), np.array([1, 2]), 0.2
    )
    assert flat.combined == pytest.approx([1.0, 0.8 * 0.6]) and flat.activation == pytest.approx([1.0, 0.6])
    with pytest.raises(ValueError, match="1 embedding cosines for 2 activation maps"):
        retrieval_scores_from_cosines(np.array([1.0]), base, np.array([1, 1, 2]), np.ones(3), np.array([1, 2]), 0.2)
    with pytest.raises(ValueError, match="alpha must lie in"):
        retrieval_scores_from_cosines(np.array([1.0, 0.0]), base, np.array([1, 1, 2]), np.ones(3), np.array([1, 2]), 2)


def test_eq7_top_k_is_deterministic_on_ties() -> None:
    ids = [30, 10, 20, 40]
    scores = np.array([0.5, 0.9, 0.5, 0.1])
    assert list(top_k(ids, scores, 3)) == [1, 2, 0]  # 0.9 (id 10), then the 0.5 tie: id 20 before id 30
    assert list(top_k(ids, scores, 0)) == []


def test_decay_half_life() -> None:
    f = decay_factors(np.array([0.0, 10.0, 20.0, -3.0]), 10.0)
    assert f == pytest.approx([1.0, 0.5, 0.25, 1.0])
    assert decay_factors(np.array([5.0, 500.0]), None) == pytest.approx([1.0, 1.0])  # off: the paper
    assert apply_decay(np.array([0.8, -0.2]), np.array([0.5, 0.5])) == pytest.approx([0.4, -0.2])


# ------------------------------------------------------------------ eq. 8-10 fusion


def test_eq9_eq10_weights_by_hand() -> None:
    w = softmax_weights(np.array([0.2, 0.1]), 0.1)
    e = math.e
    assert w == pytest.approx([e / (e + 1), 1 / (e + 1)])
    wc = fusion_weights(np.array([0.2, 0.1]), np.array([0.5, 1.0]), 0.1)
    assert wc == pytest.approx([0.5 * e / (e + 1), 1 / (e + 1)])
    assert wc.sum() < 1.0  # not renormalised (eq. 10)


def test_eq8_fusion_by_hand() -> None:
    base = {1: 0.8, 2: 0.4}
    maps = [{1: 0.5, 3: 1.0}, {4: 0.2}]
    a0 = fuse(base, maps, [0.6, 0.5], beta=0.5)
    # raw: 1: 0.8 + 0.5*0.6*0.5 = 0.95; 2: 0.4; 3: 0.5*0.6*1.0 = 0.3; 4: 0.5*0.5*0.2 = 0.05
    s = 0.8 / 0.95  # normalize: max(a0) = max(a_base)
    assert a0 == pytest.approx({1: 0.8, 2: 0.4 * s, 3: 0.3 * s, 4: 0.05 * s})
    assert newly_active(base, a0, 0.25) == (3,)
    assert newly_active(base, a0, 0.0) == (3, 4)
    # top-H cut: m1 keeps only entity 3
    a0h = fuse(base, maps, [0.6, 0.5], beta=0.5, top_h=1)
    assert a0h == pytest.approx({1: 0.8, 2: 0.4, 3: 0.3, 4: 0.05})


def test_fusion_falls_back_to_base_exactly() -> None:
    base = {1: 0.8, 2: 0.4}
    assert fuse(base, [], [], beta=0.5) == base  # empty store
    assert fuse(base, [{3: 1.0}], [0.7], beta=0.0) == base
    assert fuse({}, [{3: 1.0}], [0.7], beta=0.5) == {}  # no seed entity
    assert fuse({1: 0.0}, [{3: 1.0}], [0.7], beta=0.5) == {1: 0.0}


def test_cut_top_h_and_normalize() -> None:
    assert cut_top_h({1: 0.1, 2: 0.5, 3: 0.5}, 2) == {2: 0.5, 3: 0.5}
    assert cut_top_h({1: 0.1}, None) == {1: 0.1}
    assert normalize_to_base({1: 2.0, 2: 1.0}, {1: 0.5}) == {1: 0.5, 2: 0.25}


@given(
    base=st.dictionaries(st.integers(0, 30), st.floats(0.01, 1.0), min_size=1, max_size=8),
    maps=st.lists(st.dictionaries(st.integers(0, 30), st.floats(0.0, 1.0), max_size=8), min_size=1, max_size=4),
    beta=st.floats(0.0, 2.0),
)
def test_fusion_keeps_the_base_scale(base: dict[int, float], maps: list[dict[int, float]], beta: float) -> None:
    w = fusion_weights(np.linspace(0.2, 0.9, len(maps)), np.ones(len(maps)), 0.1)
    a0 = fuse(base, maps, w, beta=beta)
    assert max(a0.values()) == pytest.approx(max(base.values()))
    assert set(base) <= set(a0)
    assert all(v >= 0 for v in a0.values())


# ------------------------------------------------------------------ eq. 5 sparsify


def test_eq5_sparsify_by_hand() -> None:
    a = {1: 0.5, 2: 0.009, 3: 0.01, 4: 0.2, 5: 0.0}
    assert sparsify(a, 0.01) == {1: 0.5, 3: 0.01, 4: 0.2}
    assert sparsify(a, 0.01, max_entities=2) == {1: 0.5, 4: 0.2}
    assert sparsify({7: 0.3, 2: 0.3, 9: 0.1}, 0.0, max_entities=2) == {2: 0.3, 7: 0.3}  # ties: smaller id


def test_validate_activation_names_the_problem() -> None:
    assert validate_activation({"3": 1, 4: 0.5}) == {3: 1.0, 4: 0.5}
    with pytest.raises(InvalidInput, match="not finite"):
        validate_activation({1: float("nan")})
    with pytest.raises(InvalidInput, match="negative"):
        validate_activation({1: -0.1})
    with pytest.raises(InvalidInput, match="not an integer"):
        validate_activation({"Paris": 0.3})
    with pytest.raises(InvalidInput, match="not a number"):
        validate_activation({1: "high"})
    with pytest.raises(InvalidInput, match="mapping"):
        validate_activation([0.1, 0.2])  # type: ignore[arg-type]


# ------------------------------------------------------------------ eq. 11 template


def test_eq11_mask_by_hand() -> None:
    assert (
        mask("Where was the director of 'Titanic' born in 1997?", [])
        == f"Where was the director of {QUOTE} born in {DATE}?"
    )
    assert (
        mask("Who is the father of Tom Hanks, born March 3, 1956, with 3 kids?", ["Tom Hanks"])
        == f"Who is the father of {ENT}, born {DATE}, with {NUM} kids?"
    )
    # longest mention first; case-insensitive whole words
    assert mask("Did new york times praise New York?", ["New York", "New York Times"]) == f"Did {ENT} praise {ENT}?"
    assert mask("How many films did he make?", []) == "How many films did he make?"
    assert mask("It costs 1,200.50 dollars", []) == f"It costs {NUM} dollars"


def test_templates_of_same_shape_match() -> None:
    a = mask("Where was the director of Winter Harbour born?", ["Winter Harbour"])
    b = mask("Where was the director of Glass Orchard born?", ["Glass Orchard"])
    assert a == b == f"Where was the director of {ENT} born?"


def test_guess_mentions() -> None:
    assert guess_mentions("Where was the University of Chicago founded?") == ["University of Chicago"]
    assert guess_mentions("Who is she?") == []
    # a capitalised article inside a sentence belongs to the title; at the start it does not
    assert guess_mentions("Which film came out first, The Salt Road or Glass Orchard?") == [
        "The Salt Road",
        "Glass Orchard",
    ]
    assert (
        mask("Which film came out first, The Salt Road or Glass Orchard?")
        == "Which film came out first, [ENT] or [ENT]?"
    )
    assert guess_mentions("The director of Winter Harbour was born where?") == ["Winter Harbour"]


# ------------------------------------------------------------------ eq. 12-13 scaffold


def test_eq12_eq13_scaffold_by_hand() -> None:
    s = scaffold_scores(np.array([0.5, 0.4]), np.array([0.2, 0.9]), 0.5)
    assert s == pytest.approx([0.35, 0.65])
    assert select_scaffold(s, 0.35) == 1
    assert select_scaffold(s, 0.7) is None  # under the floor: no scaffold
    assert select_scaffold(np.array([]), 0.0) is None
    # lambda = 0: the best retrieval match
    assert list(scaffold_scores(np.array([0.5, 0.4]), np.array([0.2, 0.9]), 0.0)) == [0.5, 0.4]


def test_findings_are_the_top_k_over_the_floor_without_the_scaffold() -> None:
    s = np.array([0.9, 0.3, 0.6, 0.55])
    ranked = np.array([0, 2, 3, 1])  # eq. 7's order
    assert select_findings(s, ranked, 0.5, 2) == [0, 2]
    assert select_findings(s, ranked, 0.5, 2, exclude=0) == [2, 3]  # the scaffold is shown otherwise
    assert select_findings(s, ranked, 0.5, 5) == [0, 2, 3]  # 0.3 is under the floor
    assert select_findings(s, ranked, 0.95, 2) == []
    assert select_findings(s, ranked, 0.5, 0) == []  # findings off
    assert select_findings(np.array([]), np.array([], dtype=np.int64), 0.0, 2) == []
    with pytest.raises(ValueError, match="k must be"):
        select_findings(s, ranked, 0.5, -1)


def test_the_template_floor_makes_a_candidate_ineligible() -> None:
    # s_ret 0.9 / 0.5, template similarity 0.6 / 0.8, lambda 0.5: eq. 12 gives 0.75 / 0.65
    t = np.array([0.6, 0.8])
    s = scaffold_scores(np.array([0.9, 0.5]), t, 0.5)
    assert s == pytest.approx([0.75, 0.65])
    assert select_scaffold(s, 0.35) == 0  # eq. 13 alone: the shared entity wins
    assert select_scaffold(s, 0.35, t, 0.7) == 1  # only the same-form question is eligible
    assert select_scaffold(s, 0.7, t, 0.7) is None  # eligible, but under the score floor
    assert select_scaffold(s, 0.35, t, 0.85) is None  # nothing eligible
    assert select_scaffold(s, 0.35, t, 0.0) == 0  # template floor 0: eq. 13 alone
    with pytest.raises(ValueError, match="template similarities"):
        select_scaffold(s, 0.35, np.array([0.1]), 0.5)


# ------------------------------------------------------------------ eq. 6 KeySent


def test_eq6_keysent_by_hand() -> None:
    explanation = (
        "Let me think about the film. Winter Harbour was directed by Orla Brennick. "
        "The weather was bad that year. Orla Brennick was born in Galway. Galway is in Ireland."
    )
    anchors = {10: ("Orla Brennick", "Brennick"), 11: ("Galway",), 12: ("Winter Harbour",), 13: ("Ireland",)}
    weights = {10: 0.9, 11: 0.8, 12: 0.7, 13: 0.1}
    # mentions: s2 {12, 10} (1.6), s4 {10, 11} (1.7), s5 {11, 13} (0.9); s1 and s3 none
    assert keysent(explanation, anchors, weights, 2) == [
        "Winter Harbour was directed by Orla Brennick.",
        "Orla Brennick was born in Galway.",
    ]
    assert keysent(explanation, anchors, weights, 1) == ["Orla Brennick was born in Galway."]
    assert keysent("No entity here. None at all.", anchors, weights, 1) == ["No entity here."]
    summary = compose_summary("Where was the director of Winter Harbour born?", ["A.", "B."], " Galway ")
    assert summary == "Question: Where was the director of Winter Harbour born?\nKey reasoning: A. B.\nAnswer: Galway"
    assert top_entities({1: 0.2, 2: 0.9, 3: 0.2}, 2) == [2, 1]


def test_sentence_splitter() -> None:
    text = "Dr. Smith met J. R. R. Tolkien in the U.S. Army. He left in 1945! Did he?\nStep 2: done"
    assert split_sentences(text) == [
        "Dr. Smith met J. R. R. Tolkien in the U.S. Army.",
        "He left in 1945!",
        "Did he?",
        "Step 2: done",
    ]


# ------------------------------------------------------------------ eq. 15-16 grounding


def test_eq15_eq16_by_hand() -> None:
    g = claim_support([[0.2, 0.7], [0.4, 0.3], []])
    assert list(g) == [0.7, 0.4, 0.0]
    assert grounding_score(g, 0.5) == pytest.approx(1 / 3)
    assert grounding_score(g, 0.4) == pytest.approx(2 / 3)
    assert grounding_score([], 0.5) == 0.0
    assert passes_grounding(0.6, 0.6) and not passes_grounding(0.59, 0.6)


def test_claim_extraction() -> None:
    explanation = (
        "Let's find the director first. According to the passages, Winter Harbour was directed by Orla Brennick. "
        "So, Orla Brennick was born in Galway; she studied in Dublin. Who else? Answer: Galway"
    )
    claims = extract_claims(explanation, "Galway", "Where was the director of Winter Harbour born?", 12)
    assert [c.text for c in claims] == [
        "Winter Harbour was directed by Orla Brennick.",
        "Orla Brennick was born in Galway",
        "She studied in Dublin.",
        'The answer to "Where was the director of Winter Harbour born?" is Galway.',
    ]
    assert claims[-1] == Claim(
        text='The answer to "Where was the director of Winter Harbour born?" is Galway.',
        source="answer",
        question="Where was the director of Winter Harbour born?",
        answer="Galway",
    )
    capped = extract_claims(explanation, "Galway", "q?", 2)
    assert [c.source for c in capped] == ["explanation", "answer"]  # the answer claim always stays
    assert all(c.source == "explanation" for c in extract_claims(explanation, "yes", "Is it?", 12))


def test_evidence_units_are_titled_sentence_windows() -> None:
    units = evidence_units([(7, "Galway", "Galway is a city. It is in Ireland. It has a port.")])
    assert [u.text for u in units] == [
        "Galway is a city. It is in Ireland.",
        "Galway. It is in Ireland. It has a port.",
    ]
    assert {u.passage_id for u in units} == {7}


# ------------------------------------------------------------------ eq. 17-18 novelty


def test_eq17_eq18_novelty_by_hand() -> None:
    q = np.array([1.0, 0.0])
    v = np.array([[0.6, 0.8], [0.0, 1.0]])
    eta = retrieval_scores(q, v, {1: 1.0}, [{1: 1.0, 2: 1.0}, {3: 1.0}], alpha=0.5).combined
    # eta_1 = 0.5*0.6 + 0.5*(1/sqrt 2); eta_2 = 0
    assert eta == pytest.approx([0.3 + 0.5 / math.sqrt(2), 0.0])
    ns = novelty_score(eta)
    assert ns == pytest.approx(1 - 0.3 - 0.5 / math.sqrt(2))
    assert not is_novel(ns, 0.7) and is_novel(ns, 0.3)
    assert novelty_score(np.array([])) == 1.0


def test_mask_scaffold_keeps_the_reasoning_pattern_only() -> None:
    q, r, a = mask_scaffold(
        "Where was the director of Heat born?",
        "Heat was directed by Michael Mann. Michael Mann was born in Chicago in 1943.",
        "Chicago",
    )
    assert q == "Where was the director of [ENT] born?"
    assert r == "[ENT] was directed by [ENT]. [ENT] was born in [ENT] in [DATE]."
    assert a == "[ENT]"
    # a lower-case answer is masked wherever it occurs; pronouns are not entities; yes/no is kept
    q2 = "Where did Coulson Wallop's father study?"
    masked = mask_scaffold(q2, "His father studied at eton college.", "eton college")
    assert masked == ("Where did [ENT] father study?", "His father studied at [ENT].", "[ENT]")
    assert mask_scaffold("Are Heat and Ronin both American?", "Heat is American. Ronin is American.", "Yes") == (
        "Are [ENT] both [ENT]?",
        "[ENT] is [ENT]. [ENT] is [ENT].",
        "Yes",
    )
    assert mask_scaffold("", "", "") == ("", "", "")


def test_placeholders_are_found_in_an_answer() -> None:
    assert has_placeholder("[ENT]") and has_placeholder("born in [DATE]") and has_placeholder("[NUM] films")
    assert has_placeholder("the song [QUOTE]")
    assert not has_placeholder("Galway") and not has_placeholder("") and not has_placeholder("[1] passage")
