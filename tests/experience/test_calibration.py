"""The learned gate's math (livingrag.experience.calibration) on tiny hand-built inputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from livingrag.experience.calibration import (
    LogisticModel,
    assess,
    fit_logistic,
    forward_predictions,
    precision_recall_at,
    roc_auc,
    threshold_for_precision,
)


def sigmoid(t: float) -> float:
    return 1.0 / (1.0 + math.exp(-t))


def test_roc_auc_counts_pairs_and_half_ties() -> None:
    assert roc_auc([0.9, 0.8], [0.1, 0.8]) == pytest.approx((1 + 1 + 1 + 0.5) / 4)
    assert math.isnan(roc_auc([], [0.1]))


def test_fit_logistic_solves_the_penalised_likelihood() -> None:
    # z = x (mean 0, sd 1); by symmetry b = 0 and the stationarity condition is 4 sigmoid(w) - 4 + w = 0
    x = np.array([[-1.0], [-1.0], [1.0], [1.0]])
    m = fit_logistic(x, [False, False, True, True], ["f"], l2=1.0)
    (w,) = m.weights
    assert m.bias == pytest.approx(0.0, abs=1e-9)
    assert w == pytest.approx(4 * (1 - sigmoid(w)), abs=1e-9)
    assert w == pytest.approx(1.0428, abs=1e-3)
    assert m.mean == (0.0,) and m.scale == (1.0,)
    assert m.probability({"f": 1.0}) == pytest.approx(sigmoid(w))
    assert m.probability({}) == pytest.approx(0.5)  # a missing feature counts as its mean


def test_a_constant_feature_gets_no_weight_and_the_model_round_trips() -> None:
    x = np.array([[-1.0, 3.0], [-1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
    m = fit_logistic(x, [False, False, True, True], ["f", "c"], l2=1.0)
    assert m.scale[1] == 1.0 and m.weights[1] == pytest.approx(0.0, abs=1e-12)
    assert LogisticModel.from_dict(m.to_dict()) == m


def test_fit_logistic_refuses_one_kind_of_label_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="both right and wrong"):
        fit_logistic(np.ones((3, 1)), [True, True, True], ["f"])
    with pytest.raises(ValueError, match="do not match"):
        fit_logistic(np.ones((3, 2)), [True, False, True], ["f"])


def test_forward_predictions_score_each_block_with_the_labels_before_it() -> None:
    x = np.array([[0.0], [1.0], [0.0], [1.0], [0.0], [1.0], [1.0], [0.0]])
    y = np.array([False, True, False, True, False, True, True, False])
    probs, held = forward_predictions(x, y, ["f"], first=4, blocks=2, l2=1.0)
    assert held.tolist() == y[4:].tolist()
    first_model = fit_logistic(x[:4], y[:4], ["f"])
    second_model = fit_logistic(x[:6], y[:6], ["f"])
    assert probs[:2] == pytest.approx(first_model.probabilities(x[4:6]))
    assert probs[2:] == pytest.approx(second_model.probabilities(x[6:]))


def test_forward_predictions_use_the_base_rate_before_both_kinds_are_seen() -> None:
    x = np.zeros((4, 1))
    probs, held = forward_predictions(x, [True, True, False, True], ["f"], first=2, blocks=2)
    assert probs.tolist() == [1.0, pytest.approx(2 / 3)]
    assert held.tolist() == [False, True]


def test_precision_recall_at_a_threshold() -> None:
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    y = np.array([True, True, False, True, False])
    assert precision_recall_at(p, y, 0.7) == (pytest.approx(2 / 3), pytest.approx(2 / 3), 3)
    prec, rec, n = precision_recall_at(p, y, 0.95)
    assert math.isnan(prec) and rec == 0.0 and n == 0


def test_threshold_for_precision_is_the_lowest_that_qualifies() -> None:
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    y = np.array([True, True, False, True, False])
    assert threshold_for_precision(p, y, 0.75, min_support=2) == 0.6  # 3 of 4; 0.8 qualifies too
    assert threshold_for_precision(p, y, 0.75, min_support=5) is None
    assert threshold_for_precision(p, y, 1.0, min_support=3) is None
    # a threshold keeps every label of its probability: 0.9 keeps one right and one wrong
    assert threshold_for_precision(np.array([0.9, 0.9, 0.5]), np.array([True, False, True]), 0.6, min_support=1) == 0.5
    assert (
        threshold_for_precision(np.array([0.9, 0.9, 0.5]), np.array([True, False, False]), 0.6, min_support=1) is None
    )


def test_assess_earns_only_with_auc_and_a_store_threshold() -> None:
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    y = np.array([True, True, True, False, True, False])
    kw: dict[str, Any] = {
        "total": 20,
        "right": 12,
        "store_min_precision": 0.75,
        "serve_min_precision": 1.0,
        "min_support": 3,
    }
    a = assess(p, y, min_auc=0.75, **kw)
    assert a.auc == pytest.approx(7 / 8) and a.earned
    assert a.store_threshold == 0.5 and a.store_precision == pytest.approx(0.8) and a.store_recall == 1.0
    assert a.serve_threshold == 0.7 and a.serve_precision == 1.0 and a.serve_recall == pytest.approx(0.75)
    assert (a.labels, a.right, a.held_out) == (20, 12, 6)
    low = assess(p, y, min_auc=0.9, **kw)
    assert not low.earned and low.serve_threshold is None and "below 0.9" in low.why
    none = assess(np.array([0.5, 0.6]), np.array([True, True]), min_auc=0.75, **kw)
    assert none.auc is None and not none.earned
