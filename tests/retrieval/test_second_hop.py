"""Common-word seeds, title pages and the pseudo-relevance re-ranking (issue 45), on tiny hand-built inputs with
exact expected values."""

from __future__ import annotations

import numpy as np
import pytest

from livingrag.retrieval.common_words import MIN_PASSAGES, common_word_threshold, writes_at_least
from livingrag.retrieval.corpus_graph import CorpusGraph
from livingrag.retrieval.params import RetrievalParams
from livingrag.retrieval.pseudo_relevance import feedback_query, pseudo_relevance_rerank
from livingrag.retrieval.ranking import rank_passages


def test_writes_at_least_counts_passages_that_write_the_key_as_a_word() -> None:
    texts = [
        "Dead Mine is a 2013 film; the film was shot in 2013.",  # film and 2013: one passage each
        "A magazine devoted to Film and DVD.",  # capitalised: not the key's word
        "An American film.",  # "American" is capitalised, "film" is not
        "Kiss and Tell is a film.",
        "filming songs",  # a word that merely starts with the key is another word
    ]
    assert writes_at_least("film", texts, 3) and not writes_at_least("film", texts, 4)
    assert writes_at_least("2013", texts, 1) and not writes_at_least("2013", texts, 2)
    assert not writes_at_least("american", texts, 1)
    assert not writes_at_least("song", texts, 1)
    # a key of several words, or an empty one, is never a common word
    assert not writes_at_least("kiss and tell", texts, 1) and not writes_at_least("", texts, 0)
    assert writes_at_least("film", texts, 0) and not writes_at_least("film", [], 1)


def test_a_common_word_needs_the_share_and_the_floor() -> None:
    # 0.5 % of 6,127 passages is 30.6: 31 passages; a small corpus needs the floor of 20
    assert MIN_PASSAGES == 20
    assert common_word_threshold(6127, 0.005) == 31
    assert common_word_threshold(4000, 0.005) == 20  # 0.005 * 4000 is 20 exactly, not 21
    assert common_word_threshold(10, 0.005) == 20
    assert common_word_threshold(6127, 0.01) == 62
    assert common_word_threshold(6127, 0.0) is None  # s_min 0 turns the filter off


def test_the_graph_remembers_which_entities_are_common_words() -> None:
    texts = [f"passage {i} about a film from 1999" if i < 20 else f"passage {i}" for i in range(30)]
    g = CorpusGraph.build(
        passage_ids=list(range(30)),
        passage_embeddings=np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (30, 1)),
        entity_ids=[100, 101, 102],
        entity_keys=["film", "1999", "passage 3"],
        entity_embeddings=np.eye(3, 2, dtype=np.float32),
        sentence_ids=[],
        sentence_passages=[],
        sentence_embeddings=np.zeros((0, 2), dtype=np.float32),
        entity_sentence_pairs=[],
        passage_entity_mentions=[(0, 0, 1)],
        passage_texts=texts,
    )
    # 20 of 30 passages: common at s_min 0.5 (limit 20), not at 0.7 (limit 21)
    assert g.is_common_word(0, 0.5) and g.is_common_word(1, 0.5)
    assert not g.is_common_word(0, 0.7)
    assert not g.is_common_word(2, 0.01)  # several words
    assert not g.is_common_word(0, 0.0) and not g.is_common_word(7, 0.5)  # off; no such row
    assert g._common_words == {(0, 20): True, (1, 20): True, (0, 21): False, (2, 20): False}


def test_feedback_query_adds_the_feedback_passages_and_normalises() -> None:
    q = np.array([1.0, 0.0])
    np.testing.assert_allclose(feedback_query(q, np.array([[0.0, 1.0]]), 1.0), [2**-0.5, 2**-0.5])
    # a = 0.5, two passages: (1, 0) + 0.5 * ((0, 1) + (0, 1)) = (1, 1)
    np.testing.assert_allclose(feedback_query(q, np.array([[0.0, 1.0], [0.0, 1.0]]), 0.5), [2**-0.5, 2**-0.5])
    # a zero sum stays zero instead of dividing by 0
    np.testing.assert_array_equal(feedback_query(np.zeros(2), np.array([[0.0, 0.0]]), 1.0), [0.0, 0.0])


def test_pseudo_relevance_rerank_exact() -> None:
    passages = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    rows = np.array([0, 1, 2])
    scores = np.array([2.0, 1.8, 1.6])  # normalised by the largest: 1.0, 0.9, 0.8
    q = np.array([1.0, 0.0])
    # m = 1: q' = (q + p0) / ||.|| = (1, 0); cos = 1, 0, 0.6; s' = 1.3, 0.9, 0.98
    out_rows, out_scores = pseudo_relevance_rerank(rows, scores, passages, q, depth=1, weight=1.0, mix=0.3)
    assert out_rows.tolist() == [0, 2, 1]
    np.testing.assert_allclose(out_scores, [1.3, 0.98, 0.9])
    # m = 2, a = 1: q' = ((1, 0) + (1, 0) + (0, 1)) / sqrt(5) = (2, 1) / sqrt(5)
    # cos = 2/sqrt5, 1/sqrt5, 2/sqrt5 (0.6*2 + 0.8*1 = 2); b = 0.5
    r = 5**-0.5
    out_rows, out_scores = pseudo_relevance_rerank(rows, scores, passages, q, depth=2, weight=1.0, mix=0.5)
    np.testing.assert_allclose(sorted(out_scores, reverse=True), [1.0 + r, 0.8 + r, 0.9 + 0.5 * r])
    assert out_rows.tolist() == [0, 2, 1]
    # mix 0 keeps the order (ties too: the first order wins)
    out_rows, _ = pseudo_relevance_rerank(rows, np.array([1.0, 1.0, 1.0]), passages, q, depth=1, weight=1.0, mix=0.0)
    assert out_rows.tolist() == [0, 1, 2]


@pytest.mark.parametrize("depth, n", [(0, 3), (2, 1), (3, 0)])
def test_pseudo_relevance_rerank_leaves_a_ranking_alone_when_off_or_too_short(depth: int, n: int) -> None:
    passages = np.eye(3)
    rows, scores = np.arange(n), np.linspace(1.0, 0.5, n)
    out_rows, out_scores = pseudo_relevance_rerank(
        rows, scores, passages, np.array([0.0, 0.0, 1.0]), depth=depth, weight=1.0, mix=5.0
    )
    assert out_rows.tolist() == rows.tolist()
    np.testing.assert_array_equal(out_scores, scores)


def _graph() -> CorpusGraph:
    """Six passages on the unit circle; entity "a" (row 0) in p0 and p1; "film" (row 1) is written in
    lower case by every passage, "1999" by none."""
    angles = np.array([0.0, 0.3, 0.9, 1.2, 1.5, 2.0])
    return CorpusGraph.build(
        passage_ids=[10, 11, 12, 13, 14, 15],
        passage_embeddings=np.stack([np.cos(angles), np.sin(angles)], axis=1),
        entity_ids=[100, 101, 102],
        entity_keys=["a", "film", "1999"],
        entity_embeddings=np.eye(3, 2, dtype=np.float32),
        sentence_ids=[1000, 1001],
        sentence_passages=[0, 1],
        sentence_embeddings=np.array([[1.0, 0.0], [0.8, 0.6]], dtype=np.float32),
        entity_sentence_pairs=[(0, 0), (0, 1)],
        passage_entity_mentions=[(0, 0, 1), (1, 0, 1), (2, 1, 1)],
        passage_texts=[f"passage {i} about a film" for i in range(6)],
    )


def test_rank_passages_reranks_the_pool_and_cuts_to_k() -> None:
    g = _graph()
    q = np.array([0.0, 1.0], dtype=np.float32)
    off = RetrievalParams(top_k=2, prf_depth=0)
    on = RetrievalParams(top_k=2, prf_depth=2, prf_weight=1.0, prf_mix=0.3, prf_pool=5)
    for seeds in ({0: 1.0}, {}):
        wide = rank_passages(g, q, seeds, RetrievalParams(top_k=5, prf_depth=0))
        want_rows, want_scores = pseudo_relevance_rerank(
            wide.passages, wide.scores, g.passage_embeddings, q, depth=2, weight=1.0, mix=0.3
        )
        got = rank_passages(g, q, seeds, on)
        assert got.passages.tolist() == want_rows[:2].tolist()
        np.testing.assert_allclose(got.scores, want_scores[:2])
        assert rank_passages(g, q, seeds, off).passages.tolist() == wide.passages[:2].tolist()
        assert got.dense_fallback == (not seeds)
    assert "prf_ms" in rank_passages(g, q, {0: 1.0}, on).timings
    assert "prf_ms" not in rank_passages(g, q, {0: 1.0}, off).timings


def test_presets_turn_the_feedback_on_for_2wiki_and_hotpotqa_only() -> None:
    from livingrag.config import RetrievalSettings
    from livingrag.retrieval.presets import resolve_params

    assert resolve_params(RetrievalSettings(preset="2wikimultihopqa")).prf_depth == 3
    assert resolve_params(RetrievalSettings(preset="hotpotqa")).prf_depth == 3
    assert resolve_params(RetrievalSettings(preset="custom")).prf_depth == 3
    assert resolve_params(RetrievalSettings(preset="musique")).prf_depth == 0
    p = resolve_params(RetrievalSettings(preset="musique", prf_depth=2, prf_mix=0.5, prf_pool=20))
    assert (p.prf_depth, p.prf_weight, p.prf_mix, p.prf_pool) == (2, 1.0, 0.5, 20)
    assert resolve_params(RetrievalSettings()).common_word_share == 0.005
    assert resolve_params(RetrievalSettings(common_word_share=0)).common_word_share == 0.0
    assert resolve_params(RetrievalSettings(preset="musique")).title_boost == 0.8
    assert resolve_params(RetrievalSettings(title_boost=0)).title_boost == 0.0


@pytest.mark.parametrize(
    "field, value",
    [
        ("prf_depth", -1),
        ("prf_pool", 1),
        ("prf_mix", -0.1),
        ("common_word_share", 1.5),
        ("prf_weight", -1),
        ("title_boost", -0.5),
    ],
)
def test_bad_feedback_settings_are_refused_by_name(field: str, value: float) -> None:
    from pydantic import ValidationError

    from livingrag.config import RetrievalSettings

    with pytest.raises(ValidationError, match=field):
        RetrievalSettings.model_validate({field: value})


def test_title_pages_map_each_entity_to_the_first_passage_with_its_title() -> None:
    from livingrag.retrieval.title_pages import title_pages

    keys = ["michael curtiz", "film", "kiss and tell", ""]
    titles = ["god s gift to women", "michael curtiz", "kiss and tell", "michael curtiz", ""]
    assert title_pages(keys, titles).tolist() == [1, -1, 2, -1]
    assert title_pages(keys, []).tolist() == [-1, -1, -1, -1]


def test_title_boost_exact() -> None:
    from livingrag.retrieval.title_pages import title_boost

    scores = np.array([4.0, 2.0, 1.0, 0.5])
    pages = np.array([2, -1, 3, 3])  # entity 0's page is passage 2; entities 2 and 3 share passage 3
    weights = {0: 2.0, 1: 1.0, 2: 0.5, 3: 1.0}  # entity 1 has no page
    # s / 4 + 0.8 * (w / 2): passage 2 gets 0.8 * 1.0, passage 3 the larger of 0.25 and 0.5 -> 0.4
    np.testing.assert_allclose(title_boost(scores, weights, pages, 0.8), [1.0, 0.5, 1.05, 0.525])
    # off, nothing active, or no page among the active entities: the scores themselves
    assert title_boost(scores, weights, pages, 0.0) is scores
    assert title_boost(scores, {}, pages, 0.8) is scores
    assert title_boost(scores, {1: 1.0}, pages, 0.8) is scores
    # an entity row outside the map (a stale activation) has no page, but its weight is the largest
    np.testing.assert_allclose(title_boost(scores, {0: 1.0, 9: 5.0}, pages, 1.0), [1.0, 0.5, 0.45, 0.125])


def test_the_loaded_graph_knows_each_entity_s_page() -> None:
    g = CorpusGraph.build(
        passage_ids=[10, 11],
        passage_embeddings=np.eye(2, dtype=np.float32),
        entity_ids=[100, 101],
        entity_keys=["a", "b"],
        entity_embeddings=np.eye(2, dtype=np.float32),
        sentence_ids=[],
        sentence_passages=[],
        sentence_embeddings=np.zeros((0, 2), dtype=np.float32),
        entity_sentence_pairs=[],
        passage_entity_mentions=[(0, 0, 1), (1, 1, 1)],
        passage_title_keys=["b", "c"],
    )
    assert g.entity_title_passages.tolist() == [-1, 0]
    assert _graph().entity_title_passages.tolist() == [-1, -1, -1]  # no title keys given


def test_rank_passages_lifts_the_page_of_a_reached_entity() -> None:
    """Entity a (seed) is mentioned by p0 and p1; p2 is titled "b" and b is reached through p1's
    sentence: p2, unconnected (PPR score 0), climbs above p3 with 0.8 * w(b) / w(a) = 0.8 * 1 / 2."""
    g = CorpusGraph.build(
        passage_ids=[10, 11, 12, 13],
        passage_embeddings=np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.9, 0.1]], dtype=np.float32),
        entity_ids=[100, 101],
        entity_keys=["a", "b"],
        entity_embeddings=np.eye(2, dtype=np.float32),
        sentence_ids=[1000],
        sentence_passages=[1],
        sentence_embeddings=np.array([[1.0, 0.0]], dtype=np.float32),
        entity_sentence_pairs=[(0, 0), (1, 0)],
        passage_entity_mentions=[(0, 0, 1), (1, 0, 1), (1, 1, 1)],
        passage_title_keys=["x", "y", "b", "z"],
    )
    q = np.array([1.0, 0.0], dtype=np.float32)
    off = rank_passages(g, q, {0: 1.0}, RetrievalParams(top_k=4, title_boost=0.0))
    on = rank_passages(g, q, {0: 1.0}, RetrievalParams(top_k=4, title_boost=0.8))
    assert off.tiers == on.tiers == {0: 1, 1: 2}
    assert off.passages.tolist() == [1, 0, 3, 2] and on.passages.tolist() == [1, 0, 2, 3]
    assert on.scores[0] == pytest.approx(1.0) and on.scores[2] == pytest.approx(0.4)
    assert "title_ms" in on.timings and "title_ms" not in off.timings
