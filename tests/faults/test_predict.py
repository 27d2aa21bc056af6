"""Predictions of the next window, and training-run distributions."""

import numpy as np
import pytest

from markovsim import DAY, HOUR
from markovsim.availability import (INFINITEHBD_REST, BurstSizes, FaultModel, MarkovModulatedPoisson, TrainingJob,
                                    exponential, predict_next_window, simulate_fault_log,
                                    training_distributions, window_statistics)


def test_next_window_prediction(fit):
    p = predict_next_window(fit, INFINITEHBD_REST, simulations=200, seed=1)
    assert set(p.faults_by_class) == set(fit.model.classes)
    # the nodes still down at the cut start the window down
    assert p.max_nodes_down.low >= 1 and p.node_days_lost.low > 0
    b = p.faults
    assert b.low < b.median < b.high
    # expected faults of the fitted model over the window lie inside the prediction interval
    expected = fit.model.shocks.mean_rate() * fit.up_share * INFINITEHBD_REST * \
        (fit.model.class_shares * fit.model.sizes.mean_size()).sum()
    assert b.low <= expected <= b.high
    assert p.repair_median_days.low < p.model_repair_median_days.median < p.repair_median_days.high
    row = p.as_dict()
    assert "faults GPU" in row and len(row["max nodes down"]) == 3


def test_holdout_statistics_pipeline(fit):
    """The check of the prediction will compute the held-back window's statistics with
    FaultLog.after + window_statistics; they are the statistics the prediction simulates."""
    full = simulate_fault_log(fit.model, 300 * DAY, np.random.default_rng(4))
    later, node, end = full.after(200 * DAY)
    s = window_statistics(later, carried_node=node, carried_end=end)
    assert s["faults"] == int(np.sum(full.start >= 200 * DAY))
    assert s["max nodes down"] >= node.size
    down_in_window = np.minimum(full.end, 300 * DAY) - np.maximum(full.start, 200 * DAY)
    assert s["node-days lost"] == pytest.approx(down_in_window.clip(min=0).sum() / DAY, rel=1e-9)


def poisson_model(rate):
    return FaultModel(classes=("any",), nodes=1,
                      shocks=MarkovModulatedPoisson(rates=np.array([rate, rate]), switch=np.array([1.0, 1.0]) / DAY),
                      class_shares=np.array([1.0]),
                      sizes=BurstSizes(np.zeros(1), np.zeros(1), np.ones(1), np.zeros(1), np.zeros(1)),
                      rate_class_shares=np.array([1.0]), rate_class_weights=np.array([1.0]),
                      repair=(exponential(1 / DAY),))


def test_time_to_train_matches_the_renewal_formula():
    """Poisson interruptions at rate lam, checkpoint every tau (free), restart R: each tau of
    work takes (exp(lam tau) - 1)(1/lam + R) on average (the classic restart formula)."""
    lam, tau, R, cycles = 1 / (10 * HOUR), HOUR, 0.5 * HOUR, 200
    job = TrainingJob(nodes=1, work=cycles * tau, checkpoint_interval=tau, checkpoint_save_time=0.0, restart_time=R)
    d = training_distributions(poisson_model(lam), job, runs=400, window=2 * DAY, seed=3)
    want = cycles * np.expm1(lam * tau) * (1 / lam + R) / DAY
    # the band's mean is over 400 runs; its spread gives the standard error
    se = (d.time_to_train_days.high - d.time_to_train_days.low) / (2 * 1.645) / np.sqrt(400)
    assert d.time_to_train_days.mean == pytest.approx(want, abs=4 * se)
    assert d.percentiles[10] < d.percentiles[50] < d.percentiles[90]
    assert 0 < d.rolling_percentiles[5] <= d.rolling_percentiles[50] <= 1


def test_training_job_checks_its_inputs():
    with pytest.raises(ValueError, match="checkpoint_interval"):
        TrainingJob(nodes=4, work=DAY, checkpoint_interval=0.0).validate()
