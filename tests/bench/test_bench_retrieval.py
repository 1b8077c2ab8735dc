"""The retrieval benchmark's figures that need no database: the indexing floor."""

from __future__ import annotations

from livingrag.bench.retrieval import indexing_floor
from livingrag.models.onnx_embedder import ModelUsage


def test_the_embed_phase_against_the_model_alone() -> None:
    report = {
        "phases": {"plan": 1.0, "ner": 40.0, "embed": 150.0, "write": 9.0, "total": 200.0},
        "model": {"runs": 10, "tokens": 1_200_000, "padded_tokens": 1_500_000, "seconds": 120.0},
    }
    assert indexing_floor(report) == {
        "index_embed_tokens": 1_200_000,
        "index_embed_padded_tokens": 1_500_000,
        "index_embed_model_tokens_per_s": 10_000.0,  # 1.2M tokens / 120 s inside the runtime
        "index_embed_phase_tokens_per_s": 8_000.0,  # / 150 s of the phase
        "index_embed_phase_over_model": 1.25,
        "index_ner_embed_share": 0.95,  # (40 + 150) / 200
    }
    assert indexing_floor({"phases": {"embed": 1.0}}) == {}  # no model counts (torch)


def test_model_usage_since_a_copy() -> None:
    from dataclasses import replace

    u = ModelUsage()
    u.add(10, 16, 0.5)
    before = replace(u)
    u.add(30, 32, 1.5)
    assert u.since(before) == ModelUsage(runs=1, tokens=30, padded_tokens=32, seconds=1.5)
    assert (u.runs, u.tokens, u.padded_tokens, u.seconds) == (2, 40, 48, 2.0)


def test_roc_auc_by_hand() -> None:
    from livingrag.bench.stats import roc_auc

    # pairs (p, n): (3,1) win, (3,2) win, (2,1) win, (2,2) tie -> (3 + 0.5) / 4
    assert roc_auc([3.0, 2.0], [1.0, 2.0]) == 0.875
    assert roc_auc([1.0], [1.0]) == 0.5
    assert roc_auc([], [1.0]) != roc_auc([], [1.0])  # NaN
