"""The Monte-Carlo twin against the analytic goodput (99 % confidence intervals)."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import markovsim
from markovsim.availability import SaveMode, SparePool, analyze, simulate, single_tier_model

from .availability_models import H, tiered

# Each check uses a 99 % interval; with several configurations in one test the family-wise
# level is kept at 99 % by widening each interval (Bonferroni), as stated where used.


def _inside(value, ci, widen=1.0):
    low, high = ci
    mid, half = 0.5 * (low + high), 0.5 * (high - low) * widen
    return mid - half <= value <= mid + half


def _bonferroni_widen(k):
    """Factor that turns k two-sided 99 % normal intervals into a 99 % family."""
    from scipy.stats import norm

    return float(norm.ppf(1 - 0.005 / k) / norm.ppf(1 - 0.005))


def test_twin_matches_single_tier_renewal_formula():
    m = single_tier_model(3000.0, 100.0, 20000.0, 300.0, 60.0)
    r = simulate(m, replicas=128, horizon=10 * 86400.0, dt=1.0, seed=1)
    a = analyze(m)
    assert _inside(float(a.goodput), r.goodput.ci)
    assert _inside(float(a.interruptions_per_day), r.interruptions_per_day.ci)
    # each replica runs to its first durable save after the horizon
    assert 128 * 10 * 86400.0 <= r.replica_steps <= 1.1 * 128 * 10 * 86400.0


def test_twin_matches_analytic_goodput_across_random_configurations():
    rng = np.random.default_rng(20240601)  # draws configurations, not expected values
    configs = 6
    widen = _bonferroni_widen(2 * configs)
    base = tiered()
    for _ in range(configs):
        rates = jnp.asarray(10 ** rng.uniform(-5.5, -3.3, size=4))
        tiers = tuple(dataclasses.replace(t, coverage=float(rng.uniform(0.3, 1.0))) if t.fallback >= 0 else t
                      for t in base.tiers)
        m = dataclasses.replace(base, fault_rates=rates, tiers=tiers,
                                checkpoint=dataclasses.replace(base.checkpoint, interval=float(rng.uniform(600, 8000))))
        a = analyze(m)
        r = simulate(m, replicas=64, horizon=6 * 86400.0, dt=1.0, seed=int(rng.integers(1 << 30)))
        assert _inside(float(a.goodput), r.goodput.ci, widen), (float(a.goodput), r.goodput.ci)
        assert _inside(float(a.unavailability), r.unavailability.ci, widen), (float(a.unavailability),
                                                                              r.unavailability.ci)


@pytest.mark.parametrize("kw", [dict(memory=3), dict(save_mode=SaveMode.BACKGROUND, memory=2), dict(predicted=0.5),
                                dict(spares=SparePool(size=0, repair_time=2 * H, activation_time=60.0))],
                         ids=["two-level", "background", "predictive", "no-spares"])
def test_twin_matches_each_mechanism(kw):
    m = tiered(**kw)
    a = analyze(m)
    r = simulate(m, replicas=64, horizon=6 * 86400.0, dt=1.0, seed=7)
    assert _inside(float(a.goodput), r.goodput.ci), (float(a.goodput), r.goodput.ci)


def test_spare_pool_approximation_is_close_under_moderate_stress():
    # the analytic pool is a birth-death chain (an approximation for size >= 1): within 2 %
    m = tiered(spares=SparePool(size=3, repair_time=H, activation_time=60.0))
    a = float(analyze(m).goodput)
    r = simulate(m, replicas=64, horizon=6 * 86400.0, dt=1.0, seed=3)
    assert abs(a - r.goodput.mean) < 0.02 * a + (r.goodput.ci[1] - r.goodput.ci[0])


def test_simulate_rejects_bad_arguments():
    m = single_tier_model(3000.0, 100.0, 20000.0, 300.0)
    with pytest.raises(markovsim.InvalidParameterError, match="replicas"):
        simulate(m, replicas=1)
    with pytest.raises(markovsim.InvalidParameterError, match="horizon"):
        simulate(m, horizon=-1.0)


def test_twin_matches_renewal_formula_when_restarts_fail_often():
    # restart 1.5 x MTBF: most restarts are hit by a fault, many events need more than the
    # pre-drawn attempts, so the retry loop runs; the renewal formula is exact here too
    m = single_tier_model(1200.0, 60.0, 4000.0, 6000.0, 120.0)
    r = simulate(m, replicas=128, horizon=20 * 86400.0, dt=1.0, seed=5)
    a = analyze(m)
    assert _inside(float(a.goodput), r.goodput.ci), (float(a.goodput), r.goodput.ci)
    assert _inside(float(a.unavailability), r.unavailability.ci), (float(a.unavailability), r.unavailability.ci)


def test_warmup_counts_only_the_window_after_it():
    """``warmup``: the estimates are the replicas' differences between the stopping points
    after the warm-up and after warm-up + horizon, on the same random paths."""
    import jax

    from markovsim.availability._simulate import _RNG, _run

    m = tiered(spares=SparePool(size=1, repair_time=4 * H, activation_time=60.0))
    warm, horizon, seed = 20 * H, 3 * 86400.0, 11
    r = simulate(m, replicas=16, horizon=horizon, dt=1.0, seed=seed, warmup=warm)
    keys = jax.random.split(jax.random.key(seed, impl=_RNG), 16)
    end = {k: np.asarray(v) for k, v in _run(m, keys, warm + horizon, 1.0).items()}
    start = {k: np.asarray(v) for k, v in _run(m, keys, warm, 1.0).items()}
    work, time = end["work"] - start["work"], end["t_credit"] - start["t_credit"]
    assert (time > 0).all() and (work > 0).all()
    assert r.goodput.mean == pytest.approx(work.sum() / time.sum(), rel=1e-12)
    np.testing.assert_allclose(r.replica_goodput, work / time, rtol=1e-12)
    down, events = end["down"] - start["down"], end["t_event"] - start["t_event"]
    assert r.unavailability.mean == pytest.approx(down.sum() / events.sum(), rel=1e-12)
    # no warm-up: the same as before the keyword existed
    plain = simulate(m, replicas=16, horizon=horizon, dt=1.0, seed=seed)
    assert plain.goodput.mean == pytest.approx(end_plain := float(
        np.sum(np.asarray(_run(m, keys, horizon, 1.0)["work"])) /
        np.sum(np.asarray(_run(m, keys, horizon, 1.0)["t_credit"]))), rel=1e-12), end_plain


def test_warmup_refuses_bad_values_and_flags_an_empty_window():
    m = single_tier_model(3000.0, 100.0, 20000.0, 300.0)
    with pytest.raises(markovsim.InvalidParameterError, match="warmup"):
        simulate(m, warmup=-1.0)
    # a horizon shorter than one checkpoint interval after the warm-up: a replica has no
    # durable save in its window
    r = simulate(m, replicas=8, horizon=1.0, dt=1.0, warmup=86400.0, throw=False)
    assert r.status is markovsim.ResultStatus.NOT_CONVERGED
    with pytest.raises(markovsim.SolverError, match="after the warm-up"):
        simulate(m, replicas=8, horizon=1.0, dt=1.0, warmup=86400.0)
