"""The pure retrieval core on tiny hand-built graphs, with exact expected values.

Numbers are chosen to be exact in binary floating point (0.75, 0.625, ...) so results can be
compared with ``==`` or to 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from livingrag.retrieval.corpus_graph import CorpusGraph, transition_matrix
from livingrag.retrieval.linking import Link, base_activation, exact_links, nearest_links
from livingrag.retrieval.params import RetrievalParams
from livingrag.retrieval.ppr import personalized_pagerank
from livingrag.retrieval.propagation import semantic_bridging
from livingrag.retrieval.ranking import rank_passages
from livingrag.retrieval.scoring import entity_bonus, length_normalize, min_max, passage_reset, top_k

# ----------------------------------------------------------------------------- PPR


def test_ppr_two_nodes_exact() -> None:
    # a - b, reset on a: p_a = 0.5 + 0.5 p_b, p_b = 0.5 p_a  =>  p = (2/3, 1/3)
    t = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    res = personalized_pagerank(t, np.array([1.0, 0.0]), damping=0.5, tol=1e-14, max_iter=200)
    assert res.converged
    np.testing.assert_allclose(res.scores, [2 / 3, 1 / 3], rtol=0, atol=1e-13)


def test_ppr_dangling_node_restarts_from_reset() -> None:
    # a - b and an isolated c; r = (1/2, 0, 1/2). A walker at c restarts from r:
    # p_c = 1/4 + 1/2 * p_c/2 => 1/3;  p_a = 1/4 + 1/2 (p_b + p_c/2), p_b = p_a/2 => p_a = 4/9, p_b = 2/9
    t = sp.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    dangling = np.array([False, False, True])
    res = personalized_pagerank(t, np.array([1.0, 0.0, 1.0]), damping=0.5, tol=1e-14, dangling=dangling)
    np.testing.assert_allclose(res.scores, [4 / 9, 2 / 9, 1 / 3], rtol=0, atol=1e-13)
    assert res.scores.sum() == pytest.approx(1.0, abs=1e-13)


def test_ppr_reset_is_scale_free_and_ignores_negative_and_nan() -> None:
    t = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    a = personalized_pagerank(t, np.array([3.0, 0.0]), tol=1e-14).scores
    b = personalized_pagerank(t, np.array([1.0, -5.0]), tol=1e-14).scores
    c = personalized_pagerank(t, np.array([1.0, np.nan]), tol=1e-14).scores
    np.testing.assert_allclose(a, b, atol=1e-15)
    np.testing.assert_allclose(a, c, atol=1e-15)


def test_ppr_zero_reset_and_tolerance_bound() -> None:
    t = sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))
    zero = personalized_pagerank(t, np.zeros(2))
    assert zero.iterations == 0 and not zero.scores.any()
    loose = personalized_pagerank(t, np.array([1.0, 0.0]), damping=0.5, tol=1e-3)
    # contraction d = 0.5: the error left is at most tol * d / (1 - d)
    assert np.abs(loose.scores - [2 / 3, 1 / 3]).sum() <= 1e-3
    with pytest.raises(ValueError, match="damping"):
        personalized_pagerank(t, np.ones(2), damping=1.0)


def test_transition_matrix_of_passage_entity_graph() -> None:
    # p0 mentions e0 twice and e1 once; p1 mentions e1 once.
    # edges: p0-e0 2/3, p0-e1 1/3, p1-e1 1; degrees e0 2/3, e1 4/3, p0 1, p1 1.
    mentions = sp.csr_matrix(np.array([[2.0, 1.0], [0.0, 1.0]], dtype=np.float32))
    t, dangling = transition_matrix(mentions, np.zeros((0, 3)))
    dense = t.toarray()  # node order: e0, e1, p0, p1
    expected = np.array(
        [
            [0, 0, 2 / 3, 0],
            [0, 0, 1 / 3, 1],
            [1, 1 / 4, 0, 0],
            [0, 3 / 4, 0, 0],
        ]
    )
    np.testing.assert_allclose(dense, expected, atol=1e-7)
    np.testing.assert_allclose(dense.sum(axis=0), 1.0, atol=1e-7)
    assert not dangling.any()


def test_transition_matrix_passage_links_and_dangling() -> None:
    # p0 - e0; p1 and p2 linked (chunks of one document); p3 isolated.
    mentions = sp.csr_matrix(np.array([[1.0], [0.0], [0.0], [0.0]], dtype=np.float32))
    t, dangling = transition_matrix(mentions, np.array([[1, 2, 1.0]]))
    dense = t.toarray()  # e0, p0, p1, p2, p3
    assert dense[0, 1] == 1 and dense[1, 0] == 1
    assert dense[2, 3] == 1 and dense[3, 2] == 1
    assert dangling.tolist() == [False, False, False, False, True]


# ----------------------------------------------------------------------------- semantic bridging


def _bridge_graph() -> tuple[np.ndarray, sp.csr_matrix, sp.csr_matrix]:
    # entities A0 B1 C2 D3; sentences s0 {A,B} sim .75, s1 {A,C} .5, s2 {B,D} .625, s3 {C,D} 1.0
    sent = np.array([[0.75, 0.1], [0.5, 0.2], [0.625, 0.3], [1.0, 0.0]], dtype=np.float32)
    pairs = [(0, 0), (1, 0), (0, 1), (2, 1), (1, 2), (3, 2), (2, 3), (3, 3)]
    e2s = sp.csr_matrix((np.ones(len(pairs)), ([p[0] for p in pairs], [p[1] for p in pairs])), shape=(4, 4))
    return sent, e2s, e2s.T.tocsr()


def test_semantic_bridging_exact() -> None:
    sent, e2s, s2e = _bridge_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    r = semantic_bridging({0: 1.0}, q, sent, e2s, s2e, max_iterations=3, delta=0.4, top_k_sentence=1)
    # round 1: A (1.0) takes s0 (.75): A += .75, B = .75 (tier 2)
    # round 2: A (.75) takes s1: .375 < delta, nothing; B (.75) takes s2: .46875 -> B += .46875, D = .46875 (tier 3)
    assert r.weights == {0: 1.75, 1: 1.21875, 3: 0.46875}
    assert r.tiers == {0: 1, 1: 2, 3: 3}
    assert r.scores == {0: 1.0, 1: 0.75, 3: 0.46875}
    assert r.used_sentences == (0, 1, 2)
    assert r.rounds == 2


def test_semantic_bridging_limits() -> None:
    sent, e2s, s2e = _bridge_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    # one round only
    r = semantic_bridging({0: 1.0}, q, sent, e2s, s2e, max_iterations=2, delta=0.4, top_k_sentence=1)
    assert r.weights == {0: 1.75, 1: 0.75} and r.tiers == {0: 1, 1: 2}
    # max_iterations=1: seeds only
    r = semantic_bridging({0: 1.0}, q, sent, e2s, s2e, max_iterations=1, delta=0.4, top_k_sentence=1)
    assert r.weights == {0: 1.0} and r.rounds == 0
    # a seed under delta does not spread
    r = semantic_bridging({0: 0.3}, q, sent, e2s, s2e, max_iterations=3, delta=0.4, top_k_sentence=1)
    assert r.weights == {0: 0.3} and r.used_sentences == ()
    # top_k_sentence=2: A takes s0 (.75) and s1 (.5): B = .75, C = .5, A += 1.25
    r = semantic_bridging({0: 1.0}, q, sent, e2s, s2e, max_iterations=2, delta=0.4, top_k_sentence=2)
    assert r.weights == {0: 2.25, 1: 0.75, 2: 0.5}
    assert r.tiers == {0: 1, 1: 2, 2: 2}


def test_semantic_bridging_two_seeds_strongest_first() -> None:
    sent, e2s, s2e = _bridge_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    # C (0.5) and D (1.0) share s3 (sim 1): D goes first and uses s3; C then takes s1 (.5): .25 < delta
    r = semantic_bridging({2: 0.5, 3: 1.0}, q, sent, e2s, s2e, max_iterations=2, delta=0.4, top_k_sentence=1)
    assert r.weights == {2: 1.5, 3: 2.0}
    assert r.tiers == {2: 1, 3: 1}
    assert r.used_sentences == (3, 1)


# ----------------------------------------------------------------------------- scoring


def test_min_max_and_length_normalisation() -> None:
    np.testing.assert_array_equal(min_max(np.array([1.0, 3.0, 2.0])), [0.0, 1.0, 0.5])
    np.testing.assert_array_equal(min_max(np.array([2.0, 2.0])), [1.0, 1.0])
    scores = np.array([1.0, 1.0])
    np.testing.assert_array_equal(length_normalize(scores, np.array([1.0, 3.0]), 0.0), [1.0, 1.0])
    # eq. 27 with b = .5, mean length 2: 1 / (.5 + .5 * 1/2) = 4/3 and 1 / (.5 + .5 * 3/2) = .8
    np.testing.assert_allclose(length_normalize(scores, np.array([1.0, 3.0]), 0.5), [4 / 3, 0.8], atol=1e-15)


def test_entity_bonus_and_passage_reset() -> None:
    counts = sp.csr_matrix(np.array([[1.0, 0.0], [3.0, 1.0]]))
    log_counts = counts.copy()
    log_counts.data = np.log1p(log_counts.data)
    # bonus(p) = sum_e score(e) ln(1 + c(p, e)) / tier(e), score(e0)=1 tier 1, score(e1)=.5 tier 2
    bonus = entity_bonus(log_counts.T.tocsr(), {0: 1.0, 1: 0.5}, {0: 1, 1: 2})
    np.testing.assert_allclose(bonus, [np.log(2), np.log(4) + 0.25 * np.log(2)], atol=1e-15)
    reset = passage_reset(np.array([0.2, 0.6]), bonus, passage_ratio=2.0, passage_node_weight=0.05)
    np.testing.assert_allclose(
        reset, [0.05 * (0.0 + np.log1p(bonus[0])), 0.05 * (2.0 + np.log1p(bonus[1]))], atol=1e-15
    )


def test_top_k_breaks_ties_by_row() -> None:
    s = np.array([0.5, 0.9, 0.5, 0.9, 0.1])
    assert top_k(s, 3).tolist() == [1, 3, 0]
    assert top_k(s, 10).tolist() == [1, 3, 0, 2, 4]
    assert top_k(s, 0).tolist() == []


# ----------------------------------------------------------------------------- linking


def test_linking_exact_then_nearest() -> None:
    key_to_entity = {"paris": 0, "lothair ii": 1}
    links = exact_links(["Paris", "Lothair Ii", "Rome"], ["paris", "lothair ii", "rome"], key_to_entity)
    assert links[0] == Link("Paris", "paris", 0, 1.0, True)
    assert links[1] is not None and links[1].entity == 1
    assert links[2] is None
    ents = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    near = nearest_links(["Rome", "x"], ["rome", "x"], np.array([[0.6, 0.8], [1.0, 0.0]]), ents, min_score=0.7)
    assert near[0] is not None and near[0].entity == 1 and near[0].score == pytest.approx(0.8)
    assert near[1] is not None and near[1].entity == 0
    assert nearest_links(["y"], ["y"], np.array([[0.6, 0.6]]), ents, min_score=0.7) == [None]
    act = base_activation([links[0], Link("p", "paris", 0, 0.5, False), near[0], None])
    assert act == {0: 1.0, 1: pytest.approx(0.8)}


# ----------------------------------------------------------------------------- the whole ranking


def _tiny_graph() -> CorpusGraph:
    # passages: p0 mentions A; p1 mentions A and B; p2 mentions C (unrelated); p3 no entity
    return CorpusGraph.build(
        passage_ids=[10, 11, 12, 13],
        passage_embeddings=np.array([[0.0, 1.0], [0.6, 0.8], [1.0, 0.0], [0.8, 0.6]], dtype=np.float32),
        entity_ids=[100, 101, 102],
        entity_keys=["a", "b", "c"],
        entity_embeddings=np.eye(3, 2, dtype=np.float32),
        sentence_ids=[1000, 1001, 1002],
        sentence_passages=[0, 1, 2],
        sentence_embeddings=np.array([[0.5, 0.0], [1.0, 0.0], [0.25, 0.0]], dtype=np.float32),
        entity_sentence_pairs=[(0, 0), (0, 1), (1, 1), (2, 2)],
        passage_entity_mentions=[(0, 0, 1), (1, 0, 1), (1, 1, 1), (2, 2, 2)],
    )


def test_rank_passages_follows_the_seed() -> None:
    g = _tiny_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    params = RetrievalParams(max_iterations=3, passage_ratio=0.05, delta=0.4, top_k_sentence=1, top_k=4)
    r = rank_passages(g, q, {0: 1.0}, params)
    assert not r.dense_fallback
    # A takes its best sentence (p1's, sim 1): B joins at tier 2; p1 holds both, p0 holds A
    assert r.tiers == {0: 1, 1: 2}
    assert r.passages.tolist()[:2] == [1, 0]
    assert set(r.final_activation) == {0, 1}
    # the seed decides: starting from C ranks p2 first
    assert rank_passages(g, q, {2: 1.0}, params).passages[0] == 2


def test_rank_passages_takes_a_deferred_dense_term_after_the_propagation() -> None:
    g = _tiny_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    params = RetrievalParams(max_iterations=3, passage_ratio=0.05, delta=0.4, top_k_sentence=1, top_k=4)
    cosines = g.passage_embeddings @ q
    calls: list[int] = []

    def deferred() -> np.ndarray:
        calls.append(1)
        return cosines

    r = rank_passages(g, q, {0: 1.0}, params, dense=deferred)
    direct = rank_passages(g, q, {0: 1.0}, params, dense=cosines)
    computed = rank_passages(g, q, {0: 1.0}, params)
    assert calls == [1]  # called once, when the reset needs it
    assert r.passages.tolist() == direct.passages.tolist() == computed.passages.tolist()
    np.testing.assert_array_equal(r.scores, direct.scores)
    np.testing.assert_array_equal(r.scores, computed.scores)
    # the wait is timed apart from the propagation; a term computed here is timed as dense_ms
    assert list(r.timings)[:2] == ["propagation_ms", "dense_wait_ms"] and "dense_ms" not in r.timings
    assert "dense_ms" in computed.timings and "dense_wait_ms" not in computed.timings
    # with no seed the deferred term is the ranking itself
    fallback = rank_passages(g, q, {}, RetrievalParams(top_k=4), dense=deferred)
    assert fallback.dense_fallback and fallback.passages.tolist() == [2, 3, 1, 0] and calls == [1, 1]


def test_rank_passages_dense_fallback_and_length_norm() -> None:
    g = _tiny_graph()
    q = np.array([1.0, 0.0], dtype=np.float32)
    r = rank_passages(g, q, {}, RetrievalParams(top_k=4))
    assert r.dense_fallback and r.final_activation == {}
    assert r.passages.tolist() == [2, 3, 1, 0]
    np.testing.assert_allclose(r.scores, [1.0, 0.8, 0.6, 0.0], atol=1e-7)


def test_gazetteer_finds_exact_entity_spans() -> None:
    from livingrag.corpus.normalize import normalize_entity as norm
    from livingrag.retrieval.linking import gazetteer_mentions, merge_mentions

    keys = {"lothair ii": 0, "3 dots": 1, "dying god": 2, "inherent vice": 3, "wanted 18": 4, "dots": 5}
    q = "Which film came out first, 3 Dots or Dying God?"
    assert gazetteer_mentions(q, keys, norm) == [("3 Dots", 27, 33), ("Dying God?", 37, 47)]
    assert [t for t, _, _ in gazetteer_mentions("When did Lothair Ii's mother die?", keys, norm)] == ["Lothair Ii's"]
    # a span must start and end capitalised and not start with a question word or article
    assert gazetteer_mentions("where are the 3 dots?", keys, norm) == []
    assert [t for t, _, _ in gazetteer_mentions("Who directed The Wanted 18?", keys, norm)] == ["Wanted 18?"]
    assert gazetteer_mentions(q, keys, norm, skip=lambda row: row == 1) == [("Dots", 29, 33), ("Dying God?", 37, 47)]
    # a title that starts with a question word, inside the question; never the question's first word
    # alone nor at its start
    titles = {"where does it hurt": 0, "glass wall": 1, "do you believe": 2, "where": 3}
    q3 = "Which film came out first, The Glass Wall or Where Does It Hurt??"
    assert [t for t, _, _ in gazetteer_mentions(q3, titles, norm)] == ["Glass Wall", "Where Does It Hurt??"]
    q4 = "Where was the director of film Do You Believe? (Film) born?"
    assert [t for t, _, _ in gazetteer_mentions(q4, titles, norm)] == ["Do You Believe?"]
    assert gazetteer_mentions("Where Does It Hurt? Who knows", titles, norm) == []
    assert gazetteer_mentions("Films of 1990 or Where?", titles, norm) == []
    # NER's partial reading is replaced by the exact span; exact NER mentions stay
    q2 = "When did Lothair Ii's mother die in Dying God?"
    spans = gazetteer_mentions(q2, keys, norm)
    merged = merge_mentions(q2, ["Lothair Ii's mother", "Dying God"], spans, keys, norm)
    assert merged == ["Dying God", "Lothair Ii's"]


@pytest.mark.parametrize("seed", range(4))
def test_bipartite_ppr_has_the_same_fixed_point(seed: int) -> None:
    from livingrag.retrieval.ppr import BipartitePPR

    rng = np.random.default_rng(seed)
    n_p, n_e = 25, 40
    m = (rng.random((n_p, n_e)) < 0.06) * rng.integers(1, 4, size=(n_p, n_e))
    m[0, :] = 0  # an isolated passage (dangling)
    links = np.array([[1, 2, 1.0], [2, 3, 1.0], [7, 8, 1.0]])
    t, dangling = transition_matrix(sp.csr_matrix(m.astype(np.float32)), links)
    reset = rng.random(n_e + n_p) * (rng.random(n_e + n_p) < 0.5)
    plain = personalized_pagerank(t, reset, damping=0.5, tol=1e-15, max_iter=1000, dangling=dangling)
    fast = BipartitePPR.build(t, n_e, dangling).solve(reset, damping=0.5, tol=1e-15, max_iter=1000)
    np.testing.assert_allclose(fast.scores, plain.scores, rtol=0, atol=1e-14)
    assert fast.iterations < plain.iterations
    # the exact two-node case through the fast path: an entity hanging on one passage
    t2, d2 = transition_matrix(sp.csr_matrix(np.array([[1.0]], dtype=np.float32)), np.zeros((0, 3)))
    two = BipartitePPR.build(t2, 1, d2).solve(np.array([1.0, 0.0]), tol=1e-15)
    np.testing.assert_allclose(two.scores, [2 / 3, 1 / 3], atol=1e-14)


def test_presets_and_overrides() -> None:
    from livingrag.config import RetrievalSettings
    from livingrag.errors import InvalidInput
    from livingrag.retrieval.presets import preset_params, resolve_params

    m = resolve_params(RetrievalSettings(preset="musique"))
    assert (m.max_iterations, m.passage_ratio, m.delta, m.top_k_sentence) == (5, 2.0, 0.1, 4)
    w = resolve_params(RetrievalSettings(preset="2wikimultihopqa"))
    assert (w.max_iterations, w.passage_ratio, w.delta, w.top_k_sentence) == (3, 0.05, 0.4, 1)
    assert preset_params("hotpotqa") == preset_params("2wikimultihopqa")
    o = resolve_params(RetrievalSettings(preset="musique", delta=0.3, length_norm_b=0.1), top_k=7)
    assert (o.delta, o.max_iterations, o.length_norm_b, o.top_k) == (0.3, 5, 0.1, 7)
    with pytest.raises(InvalidInput, match="unknown retrieval preset"):
        preset_params("wixqa")


def test_normalisation_makes_variants_meet() -> None:
    from livingrag.corpus.normalize import normalize_entity as norm

    assert norm("Lothair II") == norm("Lothair Ii") == "lothair ii"
    assert norm("St. Maurice's Abbey") == norm("St Maurice’s Abbey") == "st maurice abbey"
    assert norm("The Beatles") == norm("the Beatles") == "beatles"
    assert norm("Anhalt- Bernburg") == norm("Anhalt-Bernburg") == "anhalt bernburg"
    assert norm("Alû") == "alu" and norm("Malmö") == "malmo"
    assert norm("The") == "the" and norm("'s") == "s" and norm("—") == ""
    assert norm("東京") == "東京"


def _random_bipartite(seed: int, links: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray, int, int]:
    rng = np.random.default_rng(seed)
    n_p, n_e = 30, 50
    m = (rng.random((n_p, n_e)) < 0.06) * rng.integers(1, 4, size=(n_p, n_e))
    m[0, :] = 0  # an isolated passage (dangling)
    t, dangling = transition_matrix(sp.csr_matrix(m.astype(np.float32)), links)
    return t, dangling, n_p, n_e


@pytest.mark.parametrize("seed", range(4))
def test_solve_passages_is_the_passage_part_of_the_full_solution(seed: int) -> None:
    from livingrag.retrieval.ppr import BipartitePPR

    t, dangling, n_p, n_e = _random_bipartite(seed, np.array([[1, 2, 1.0]]))
    fast = BipartitePPR.build(t, n_e, dangling)
    rng = np.random.default_rng(100 + seed)
    rows = rng.choice(n_e, size=6, replace=False)  # leaves and kept entities alike
    assert (fast.entity_position[rows] < 0).any() and (fast.entity_position[rows] >= 0).any()
    weights = rng.random(6)
    p_reset = rng.random(n_p) * (rng.random(n_p) < 0.5)
    full = np.zeros(n_e + n_p)
    full[rows] = weights
    full[n_e:] = p_reset
    plain = personalized_pagerank(t, full, damping=0.5, tol=1e-15, max_iter=1000, dangling=dangling)
    got = fast.solve_passages(rows, weights, p_reset, damping=0.5, tol=1e-15, max_iter=1000)
    np.testing.assert_allclose(got.scores, plain.scores[n_e:], rtol=0, atol=1e-14)
    assert got.converged and got.scores.shape == (n_p,)
    # nothing to start from: all zeros; a negative or NaN weight counts as 0
    zero = fast.solve_passages(rows[:1], np.array([np.nan]), np.zeros(n_p))
    assert zero.iterations == 0 and not zero.scores.any()
    with pytest.raises(ValueError, match="2 entity rows with 1 weights"):
        fast.solve_passages(rows[:2], weights[:1], p_reset)
    with pytest.raises(ValueError, match="29 passage resets for a graph of 30 passages"):
        fast.solve_passages(rows, weights, p_reset[1:])


def test_over_relaxation_reaches_the_same_point_in_fewer_sweeps() -> None:
    from dataclasses import replace

    from livingrag.retrieval.ppr import BipartitePPR, over_relaxation

    # omega = 2 / (2 - d^2): 8/7 at d = 0.5
    assert over_relaxation(0.5) == pytest.approx(8 / 7, abs=1e-15)
    t, dangling, n_p, n_e = _random_bipartite(7, np.zeros((0, 3)))
    relaxed = BipartitePPR.build(t, n_e, dangling)
    assert relaxed.links_rare  # no passage link at all
    plain = replace(relaxed, links_rare=False, _cache={})
    reset = np.random.default_rng(3).random(n_e + n_p)
    a = relaxed.solve(reset, tol=1e-12, max_iter=1000)
    b = plain.solve(reset, tol=1e-12, max_iter=1000)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-12)
    assert a.iterations < b.iterations
    # many passage links: no over-relaxation
    t2, dangling2, _, _ = _random_bipartite(7, np.array([[1, 2, 1.0], [3, 4, 1.0]]))
    linked = BipartitePPR.build(t2, n_e, dangling2)
    assert not linked.links_rare


def test_entity_bonus_reads_only_the_activated_rows() -> None:
    # 3 passages x 3 entities; entity 2 has no mention; entity 1 twice in passage 2
    log_counts = sp.csr_matrix(np.log1p(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 2.0, 0.0]])))
    by_entity = log_counts.T.tocsr()
    np.testing.assert_array_equal(entity_bonus(by_entity, {}, {}), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(entity_bonus(by_entity, {2: 1.0}, {2: 1}), [0.0, 0.0, 0.0])
    # passage 2: 0.8 ln 2 (entity 0, tier 1) + 0.6 ln 3 / 3 (entity 1, tier 3)
    got = entity_bonus(by_entity, {1: 0.6, 0: 0.8}, {0: 1, 1: 3})
    np.testing.assert_allclose(got, [0.8 * np.log(2), 0.2 * np.log(2), 0.8 * np.log(2) + 0.2 * np.log(3)], atol=1e-15)
