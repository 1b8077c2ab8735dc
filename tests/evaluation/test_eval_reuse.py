"""Reuse analyses (Tables 1, 4, 6, 8, 16, 17, 18) on tiny hand-built records with exact expected values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livingrag.evaluation.datasets import load_dataset
from livingrag.evaluation.metrics import Prices
from livingrag.evaluation.records import QueryRecord
from livingrag.evaluation.reuse import (
    cosine_matrix,
    experience_clusters,
    experience_coverage,
    fusion_added_entities,
    gate_stats,
    jaccard_matrix,
    mean_std,
    order_robustness,
    paired_deltas,
    realised_reuse,
    reuse_opportunities,
    subquestion_key,
)

FIX = Path(__file__).parents[1] / "fixtures" / "eval"


def rec(system: str, position: int, qid: str | None = None, order: int = 0, **kw: Any) -> QueryRecord:
    return QueryRecord(
        system=system, order=order, position=position, question_id=qid or f"q{position}", question="?", **kw
    )


# --------------------------------------------------------------------------------------------------
# Similarities


def test_jaccard_matrix() -> None:
    j = jaccard_matrix([{"a", "b"}, {"b", "c", "d"}, set(), ["a", "a"]])
    assert j[0, 1] == pytest.approx(1 / 4)  # {b} / {a, b, c, d}
    assert j[0, 3] == pytest.approx(1 / 2)
    assert j[2, 2] == 0.0 and j[1, 3] == 0.0  # empty sets are similar to nothing


def test_tfidf_cosine_is_sklearns() -> None:
    texts = ["when did [ENT] die", "when was [ENT] born", "who directed the film [ENT]", "", "[NUM] films by [ENT]"]
    ours = cosine_matrix(texts)
    assert ours[0, 0] == pytest.approx(1.0) and ours[3, 3] == 0.0 and ours[0, 3] == 0.0
    sk = pytest.importorskip("sklearn.feature_extraction.text")
    m = sk.TfidfVectorizer().fit_transform(texts)
    np.testing.assert_allclose(ours, (m @ m.T).toarray(), atol=1e-12)


# --------------------------------------------------------------------------------------------------
# Table 1


def test_reuse_opportunities_exact() -> None:
    run = [
        rec("linear", 0, seed_entity_ids=(1, 2), retrieved_keys=tuple("abcde"), context_entity_ids=(10, 11),
            masked_question="when did [ENT] die"),
        # no shared seed with q0, same template -> template reuse only
        rec("linear", 1, seed_entity_ids=(3,), retrieved_keys=tuple("fghij"), context_entity_ids=(12,),
            masked_question="when did [ENT] die"),
        # shares seed 2 with q0; passages {a} of 9 -> Jaccard 1/9 >= 0.05
        rec("linear", 2, seed_entity_ids=(2, 5), retrieved_keys=("a", "v", "w", "x", "y"), context_entity_ids=(20,),
            masked_question="population of city"),
        # no seeds; context entities {11, 12} vs q0 {10, 11}: Jaccard 1/3; template as q2 with no seed overlap
        rec("linear", 3, seed_entity_ids=(), retrieved_keys=tuple("klmno"), context_entity_ids=(11, 12),
            masked_question="population of city"),
    ]  # fmt: skip
    o = reuse_opportunities(list(reversed(run)))  # order comes from position, not list order
    assert o.queries == 4
    assert o.entity_reuse == 0.25
    assert (o.graph_reuse, o.graph_reuse_passages, o.graph_reuse_entities) == (0.5, 0.25, 0.25)
    assert o.template_reuse == 0.5
    assert reuse_opportunities(run, graph=False).graph_reuse is None


def test_template_reuse_needs_no_shared_seed_and_is_causal() -> None:
    run = [
        rec("linear", 0, seed_entity_ids=(1,), masked_question="when did [ENT] die"),
        rec("linear", 1, seed_entity_ids=(1,), masked_question="when did [ENT] die"),
    ]
    o = reuse_opportunities(run)
    assert (o.entity_reuse, o.template_reuse, o.graph_reuse) == (0.5, 0.0, 0.0)
    with pytest.raises(ValueError, match="one run"):
        reuse_opportunities([*run, rec("living", 2)])


# --------------------------------------------------------------------------------------------------
# Tables 4, 6, 16


def living_run() -> list[QueryRecord]:
    return [
        rec("living", 0, writeback="stored", novelty=0.9, grounding=1.0, stored_experience_id=7, store_size_after=1),
        rec("living", 1, graph_transfer=True, fused_experience_ids=(7,), scaffold_experience_id=7,
            scaffold_similarity=0.5, writeback="stored", novelty=0.8, grounding=0.8, stored_experience_id=8,
            store_size_after=2),
        rec("living", 2, graph_transfer=False, fused_experience_ids=(7, 8), scaffold_experience_id=7,
            scaffold_similarity=0.2, writeback="rejected_ns", novelty=0.2, store_size_after=2),
        rec("living", 3, graph_transfer=True, fused_experience_ids=(8,), scaffold_experience_id=8,
            scaffold_similarity=0.35, writeback="rejected_gs", novelty=0.8, grounding=0.3, store_size_after=2),
        rec("living", 4, writeback="rejected_ns", novelty=0.1, store_size_after=2),
    ]  # fmt: skip


def test_realised_reuse() -> None:
    r = realised_reuse(living_run())
    assert (r.queries, r.graph_transfer, r.template_reuse) == (5, 0.4, 0.4)  # sims 0.5 and 0.35 count
    assert (r.scaffold_use, r.activation_map_use) == (0.6, 0.6)


def test_fusion_added_entities() -> None:
    base = {1: 0.5, 2: 0.05}
    assert fusion_added_entities(base, {1: 0.4, 2: 0.2, 3: 0.01}, 0.1) is True  # 2 crossed the threshold
    assert fusion_added_entities(base, {1: 0.6, 3: 0.09}, 0.1) is False
    assert fusion_added_entities({}, {}, 0.1) is False


def test_gate_stats() -> None:
    g = gate_stats(living_run())
    assert (g.questions, g.ns_pass, g.gs_checked, g.gs_pass, g.gs_reject, g.stored, g.errors) == (
        5, 0.6, 3, pytest.approx(2 / 3), 1, 2, 0,
    )  # fmt: skip
    none = gate_stats([rec("linear", 0), rec("linear", 1)])
    assert (none.questions, none.ns_pass, none.gs_pass) == (0, None, None)


def test_experience_coverage() -> None:
    c = experience_coverage(living_run())
    assert (c.stored, c.topk_selections, c.topk_coverage) == (2, 4, 1.0)
    assert (c.scaffold_uses, c.scaffold_coverage, c.max_scaffold_uses) == (3, 1.0, 2)
    run = living_run()
    run[3] = rec("living", 3, fused_experience_ids=(7,), writeback="rejected_ns", novelty=0.1)
    run[2] = rec("living", 2, writeback="rejected_ns", novelty=0.1)
    c = experience_coverage(run)
    assert (c.topk_selections, c.topk_coverage, c.scaffold_uses, c.scaffold_coverage, c.max_scaffold_uses) == (
        2, 0.5, 1, 0.5, 1,
    )  # fmt: skip
    # Top-K selections count matches (eq. 7), fused or not: under a fusion floor nothing may be fused
    run = [rec("living", 0, writeback="stored", novelty=0.9, grounding=1.0, stored_experience_id=7),
           rec("living", 1, matched_experience_ids=(7,), writeback="stored", novelty=0.9, grounding=1.0,
               stored_experience_id=8),
           rec("living", 2, matched_experience_ids=(7, 8), fused_experience_ids=(8,))]  # fmt: skip
    c = experience_coverage(run)
    assert (c.stored, c.topk_selections, c.topk_coverage) == (2, 3, 1.0)


# --------------------------------------------------------------------------------------------------
# Table 17


def test_paired_deltas() -> None:
    linear = [
        rec("linear", 0, "a", llm_correct=True, contain_correct=True, completion_tokens=100),
        rec("linear", 1, "b", llm_correct=False, completion_tokens=200),
        rec("linear", 2, "c", llm_correct=True, contain_correct=True, completion_tokens=300),
        rec("linear", 3, "d", llm_correct=False, completion_tokens=400),
        rec("linear", 0, "a", order=1, llm_correct=False, completion_tokens=100),
        rec("linear", 1, "e", order=1, llm_correct=None, completion_tokens=100),
    ]
    living = [
        rec("living", 0, "a", llm_correct=True, contain_correct=True, completion_tokens=90),
        rec("living", 1, "b", graph_transfer=True, llm_correct=True, completion_tokens=150),
        rec("living", 2, "c", scaffold_experience_id=1, scaffold_similarity=0.9, llm_correct=False,
            completion_tokens=250),
        rec("living", 3, "d", graph_transfer=True, scaffold_experience_id=1, scaffold_similarity=0.4, llm_correct=True,
            contain_correct=True, completion_tokens=300),
        rec("living", 0, "a", order=1, llm_correct=True, completion_tokens=100),
        rec("living", 1, "e", order=1, llm_correct=True, completion_tokens=50),  # linear side unjudged
    ]  # fmt: skip
    rows = paired_deltas(living, linear, metric="llm")
    got = [(r.graph, r.template, r.n, r.delta_acc, r.delta_completion_tokens) for r in rows]
    assert got == [
        (False, False, 2, 0.5, -5.0),
        (True, False, 1, 1.0, -50.0),
        (False, True, 1, -1.0, -50.0),
        (True, True, 1, 1.0, -100.0),
    ]
    rows = paired_deltas(living, linear, metric="contain")
    assert [(r.n, r.delta_acc) for r in rows] == [(3, 0.0), (1, 0.0), (1, -1.0), (1, 1.0)]
    assert rows[0].delta_completion_tokens == pytest.approx((-10 + 0 - 50) / 3)


# --------------------------------------------------------------------------------------------------
# Table 8


def test_experience_clusters_on_fixture() -> None:
    ds = load_dataset("musique", FIX / "musique")
    # q1 and q2 share "who founded Mirela Harbour?" (same supporting paragraph and answer, different ids)
    c = experience_clusters(ds.questions, documents=len(ds.corpus))
    assert (c.questions, c.documents, c.clusters, c.sizes, c.max_size) == (3, 5, 1, (2,), 2)
    assert c.coverage == pytest.approx(2 / 3) and c.avg_size == 2.0
    by_id = experience_clusters(ds.questions, by="id")
    assert (by_id.clusters, by_id.coverage, by_id.avg_size, by_id.max_size) == (0, 0.0, None, 0)
    assert subquestion_key("5", "The Grey Coast", "3") == ("support", "3", "grey coast")
    assert subquestion_key("5", "x", None) == ("id", "5")


def test_clusters_merge_transitively() -> None:
    from livingrag.evaluation.datasets import Question, SubQuestion

    def q(i: int, *subs: tuple[str, str]) -> Question:
        return Question(
            str(i), "?", "a", decomposition=tuple(SubQuestion(f"{i}{j}", "?", a, k) for j, (k, a) in enumerate(subs))
        )

    qs = [
        q(0, ("p1", "x")),
        q(1, ("p1", "X."), ("p2", "y")),
        q(2, ("p2", "y")),
        q(3, ("p3", "z")),
        q(4, ("p3", "z")),
        q(5),
    ]
    c = experience_clusters(qs)
    assert (c.clusters, c.sizes, c.coverage, c.avg_size) == (2, (3, 2), pytest.approx(5 / 6), 2.5)


# --------------------------------------------------------------------------------------------------
# Table 18


def test_mean_std() -> None:
    m = mean_std([1.0, 2.0, 3.0])
    assert (m.mean, m.std, m.n) == (2.0, 1.0, 3)
    assert mean_std([5.0]) == type(m)(5.0, None, 1)
    assert mean_std([None]).mean is None


def test_order_robustness() -> None:
    recs = [
        rec("linear", 0, "a", order=0, contain_correct=True, completion_tokens=100),
        rec("linear", 1, "b", order=0, contain_correct=True, completion_tokens=300),
        rec("linear", 0, "b", order=1, contain_correct=False, completion_tokens=100),
        rec("linear", 1, "a", order=1, contain_correct=True, completion_tokens=100),
        rec("living", 0, "a", order=0, contain_correct=True, graph_transfer=True, completion_tokens=50),
        rec("living", 1, "b", order=0, contain_correct=True, completion_tokens=50),
        rec("living", 0, "b", order=1, contain_correct=True, completion_tokens=50),
        rec("living", 1, "a", order=1, contain_correct=True, completion_tokens=50),
    ]
    r = order_robustness(recs, prices=Prices(), judge=None)
    assert r.orders == 2
    assert r.contain_acc["linear"].mean == 0.75 and r.contain_acc["linear"].std == pytest.approx(0.5**0.5 / 2)
    assert r.contain_acc["living"] == type(r.contain_acc["living"])(1.0, 0.0, 2)
    assert (r.completion_tokens["linear"].mean, r.completion_tokens["linear"].std) == (
        150.0,
        pytest.approx(50 * 2**0.5),
    )
    assert r.llm_acc["linear"].mean is None  # no judge: unavailable in every order
    assert (r.graph_transfer.mean, r.graph_transfer.std) == (0.25, pytest.approx(0.5**0.5 / 2))


def test_template_reuse_unmeasured_without_masked_questions() -> None:
    o = reuse_opportunities([rec("linear", 0, seed_entity_ids=(1,)), rec("linear", 1, seed_entity_ids=(1,))])
    assert (o.entity_reuse, o.template_reuse) == (0.5, None)
    assert reuse_opportunities([]).queries == 0
