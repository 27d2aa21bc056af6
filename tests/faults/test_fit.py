"""The fault model fitted to the shipped InfiniteHBD part, and to synthetic logs of known models."""

import dataclasses

import numpy as np
import pytest

from markovsim import DAY, HOUR
from markovsim.availability import (fit_fault_log, fit_rate_classes, goodness_of_fit,
                                    simulate_fault_log)


def test_acceptance_on_the_shipped_trace(fit):
    """Issue 13 acceptance: per-class counts, repair KS <= 0.10, per-node and daily dispersion
    within 20 %, the most nodes down at once inside its 90 % interval."""
    g = goodness_of_fit(fit, simulations=400, seed=0)
    failed = [r.statistic for r in g.rows if not r.passed]
    assert not failed, g.table()
    assert g.row("repair time KS distance").model <= 0.10
    for key in ("per-node dispersion", "daily dispersion"):
        r = g.row(key)
        assert abs(r.model - r.observed) <= 0.2 * r.observed
    r = g.row("max nodes down")
    assert r.low <= 35 <= r.high
    assert g.exponential_ks > 0.3          # the exponential repair the chain assumes today is far off


def test_fitted_values_have_intervals(fit):
    vals = {v.name: v for v in fit.values(draws=300)}
    for v in vals.values():
        assert v.low <= v.estimate * (1 + 1e-9) + 1e-12 and v.estimate <= v.high * (1 + 1e-9) + 1e-12, v
        assert np.isfinite([v.low, v.high]).all(), v
    assert 0 < vals["lemon share"].low < vals["lemon share"].high < 0.5
    assert vals["lemon rate ratio"].low > 3
    # a class never seen in a burst reports its burst probability on the bound, not a made-up interval
    assert vals["burst probability System Crash"].on_bound
    # the model's per-class rates are the log's counts per (weighted) node-time, in the mean
    total = vals["rate all classes"].estimate / 1000 / DAY
    assert total * fit.log.nodes * fit.log.window * fit.up_share == pytest.approx(
        fit.model.shocks.mean_rate() * fit.up_share * fit.log.window
        * (fit.model.class_shares * fit.model.sizes.mean_size()).sum(), rel=1e-9)


def test_heterogeneity_is_real(fit):
    rc = fit.rate_classes
    # likelihood ratio of two rate classes against one, far beyond any chi-square quantile
    assert 2 * (rc.loglik - rc.loglik_one_class) > 50
    assert rc.posterior.shape == (400, 2) and np.allclose(rc.posterior.sum(1), 1)


def test_rate_classes_recover_a_known_mixture():
    rng = np.random.default_rng(11)
    E = np.full(4000, 200.0)
    lemon = rng.random(4000) < 0.15
    n = rng.poisson(np.where(lemon, 0.02, 0.002) * E)
    f = fit_rate_classes(n, E)
    se = np.sqrt(np.diag(f.covariance))
    assert abs(np.log(f.shares[1] / f.shares[0]) - np.log(0.15 / 0.85)) < 4 * se[0]
    assert f.rates == pytest.approx([0.002, 0.02], rel=0.15)


def test_fit_recovers_the_model_it_simulated(fit):
    """Simulate 600 days of the fitted model 8 times, refit each: the refits are unbiased.

    For each value, a two-sided t-test of "mean of the 8 refits = generating value" at the
    99.7 % level (t with 7 degrees of freedom: |t| <= 4.78; the spread is estimated from the
    same 8 refits, so the normal 3-sigma bound would be too tight).
    """
    from scipy import stats

    truth = fit.model
    gpu = truth.classes.index("GPU")
    got = {"rate all": [], "rate GPU": [], "lemon share": [], "correlated share": [], "shared repair": []}
    for seed in range(8):
        refit = fit_fault_log(simulate_fault_log(truth, 600 * DAY, np.random.default_rng(seed)))
        m = refit.model
        got["rate all"].append(m.node_rate())
        got["rate GPU"].append(m.class_rates()[gpu])
        got["lemon share"].append(m.rate_class_shares[-1])
        got["correlated share"].append(m.correlated_share())
        got["shared repair"].append(m.repair_shared)
    want = {"rate all": truth.node_rate(), "rate GPU": truth.class_rates()[gpu],
            "lemon share": truth.rate_class_shares[-1], "correlated share": truth.correlated_share(),
            "shared repair": truth.repair_shared}
    for name, values in got.items():
        v = np.asarray(values)
        se = v.std(ddof=1) / np.sqrt(v.size)
        assert abs(v.mean() - want[name]) <= stats.t.ppf(1 - 0.003 / 2, v.size - 1) * se, \
            (name, v.mean(), want[name], se)


def test_burst_window_is_a_stated_choice(fit):
    same_instant = fit_fault_log(fit.log, burst_window=0.0)
    assert same_instant.model.correlated_share() < fit.model.correlated_share()
    assert fit.model.burst_window == HOUR
