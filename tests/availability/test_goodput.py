"""The tiered goodput model: reductions to closed forms, invariants, gradients, errors."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

import markovsim
from markovsim.availability import (
    CAUSES,
    AvailabilityModel,
    CheckpointPolicy,
    RecoveryTier,
    Rollback,
    SaveMode,
    SparePool,
    analyze,
    checkpoint_goodput,
    goodput,
    goodput_sensitivities,
    optimal_checkpoint_interval,
    optimal_interval,
    single_tier_model,
    time_to_train,
)

from .availability_models import H, tiered


@pytest.mark.parametrize("tau,save,mtbf,restart,down", [
    (3000.0, 100.0, 20000.0, 300.0, 60.0),
    (600.0, 50.0, 3600.0, 0.0, 0.0),
    (20000.0, 400.0, 5 * 86400.0, 1800.0, 900.0),
    (100.0, 1.0, 150.0, 40.0, 10.0),  # failures more frequent than segments
])
def test_single_tier_reduces_exactly_to_renewal_formula(tau, save, mtbf, restart, down):
    g = float(goodput(single_tier_model(tau, save, mtbf, restart, down)))
    assert g == pytest.approx(float(checkpoint_goodput(tau, save, mtbf, restart, down)), rel=1e-12)


def test_single_tier_under_vmap_and_optimum():
    taus = jnp.array([300.0, 1000.0, 3000.0])
    g = jax.vmap(lambda t: goodput(single_tier_model(t, 100.0, 20000.0, 300.0, 60.0)))(taus)
    np.testing.assert_allclose(g, checkpoint_goodput(taus, 100.0, 20000.0, 300.0, 60.0), rtol=1e-12)
    best = float(optimal_checkpoint_interval(single_tier_model(1000.0, 100.0, 20000.0, 300.0, 60.0)))
    # golden section on a flat optimum: the interval to ~sqrt(eps), the goodput to eps
    assert best == pytest.approx(float(optimal_interval(100.0, 20000.0)), rel=1e-5)


def test_pause_only_faults_dilate_time_exactly():
    # one mode, a tier that rolls nothing back: goodput = tau / ((tau + C) (1 + lambda c))
    tier = RecoveryTier(name="retry", rollback=Rollback.NONE, detection=20.0, compile=10.0)
    lam = 1 / 1800.0
    m = single_tier_model(1000.0, 50.0, 1 / lam, 0.0)
    m = dataclasses.replace(m, tiers=(tier,))
    cost = 20.0 * math.exp(lam * 10.0) + math.expm1(lam * 10.0) / lam  # restart of the exposed phase
    assert float(goodput(m)) == pytest.approx(1000.0 / (1050.0 * (1 + lam * cost)), rel=1e-12)


def test_two_level_without_persistent_faults_matches_closed_form():
    # only in-memory rollbacks: each of n segments is a renewal segment with its own save;
    # the persistent save rides on the last one
    n, tau, c_m, c_p, lam, rec = 4, 4000.0, 5.0, 120.0, 1 / 3000.0, 200.0
    tier = RecoveryTier(name="mem", rollback=Rollback.MEMORY, detection=rec)
    m = single_tier_model(tau, c_p, 1 / lam, 0.0)
    m = dataclasses.replace(m, tiers=(tier,), checkpoint=CheckpointPolicy(
        interval=tau, save_time=c_p, memory_per_persistent=n, memory_save_time=c_m))
    seg = lambda length: math.expm1(lam * length) * (1 / lam + rec)  # noqa: E731
    expected = tau / ((n - 1) * seg(tau / n + c_m) + seg(tau / n + c_m + c_p))
    assert float(goodput(m)) == pytest.approx(expected, rel=1e-12)


def test_spare_pool_with_no_spares_waits_a_full_repair():
    # no rollback, every fault needs a node and the pool is empty: wait = repair + activation
    tier = RecoveryTier(name="swap", rollback=Rollback.NONE, takes_spare=True)
    lam, repair, act = 1 / 7200.0, 3000.0, 60.0
    m = single_tier_model(1000.0, 10.0, 1 / lam, 0.0)
    m = dataclasses.replace(m, tiers=(tier,), fault_spare_nodes=jnp.ones(1),
                            spares=SparePool(size=0, repair_time=repair, activation_time=act))
    assert float(goodput(m)) == pytest.approx(1000.0 / (1010.0 * (1 + lam * (repair + act))), rel=1e-12)
    r = analyze(m)
    assert float(r.lost[CAUSES.index("waiting_for_spares")]) > 0


@pytest.mark.parametrize("kw", [dict(), dict(memory=4), dict(save_mode=SaveMode.BACKGROUND),
                                dict(save_mode=SaveMode.BACKGROUND, memory=3), dict(predicted=0.5),
                                dict(spares=SparePool(size=2, repair_time=4 * H, activation_time=60.0))])
def test_breakdown_sums_to_one_and_outputs_are_sane(kw):
    r = analyze(tiered(**kw))
    total = float(r.goodput) + float(jnp.sum(r.lost))
    assert total == pytest.approx(1.0, abs=1e-12)
    assert 0 < float(r.goodput) <= 1
    assert (np.asarray(r.lost) >= -1e-15).all()
    assert float(r.unavailability) == pytest.approx(1 - float(r.availability), abs=1e-14)
    assert set(r.breakdown()) == {"useful", *CAUSES}


def test_memory_checkpoints_and_prediction_help():
    base = float(goodput(tiered()))
    assert float(goodput(tiered(memory=4))) > base
    assert float(goodput(tiered(predicted=0.5))) > base
    assert float(time_to_train(tiered(), 1e6)) == pytest.approx(1e6 / base, rel=1e-12)


def test_background_save_with_vanishing_write_equals_blocking_snapshot():
    blocking = float(goodput(tiered()))
    m = tiered(save_mode=SaveMode.BACKGROUND)
    m = dataclasses.replace(m, checkpoint=dataclasses.replace(m.checkpoint, write_time=1e-7,
                                                              write_interference=0.0))
    assert float(goodput(m)) == pytest.approx(blocking, rel=1e-8)


def test_gradients_match_finite_differences():
    m = tiered()
    s = goodput_sensitivities(m, relative=False)
    h = 1e-9
    plus = dataclasses.replace(m, fault_rates=m.fault_rates.at[2].add(h))
    minus = dataclasses.replace(m, fault_rates=m.fault_rates.at[2].add(-h))
    fd = (float(goodput(plus)) - float(goodput(minus))) / (2 * h)
    assert s["fault_rates[card lost]"] == pytest.approx(fd, rel=1e-5)
    t = m.tiers[3]
    up = dataclasses.replace(m, tiers=m.tiers[:3] + (dataclasses.replace(t, detection=t.detection + 1e-3),))
    dn = dataclasses.replace(m, tiers=m.tiers[:3] + (dataclasses.replace(t, detection=t.detection - 1e-3),))
    fd = (float(goodput(up)) - float(goodput(dn))) / 2e-3
    assert s["tiers[job restart].detection"] == pytest.approx(fd, rel=1e-5)


def test_sensitivities_name_every_input_and_rank_sensibly():
    s = goodput_sensitivities(tiered())
    assert "fault_rates[card lost]" in s and "tiers[job restart].compile" in s
    assert all(math.isfinite(v) for v in s.values())
    assert s["fault_rates[card lost]"] < 0 and s["tiers[job restart].detection"] < 0
    assert s["tiers[operator retry].coverage"] > 0


def test_whole_model_optimum_beats_neighbours():
    m = tiered(memory=2)
    best = float(optimal_checkpoint_interval(m))
    g = lambda t: float(goodput(dataclasses.replace(m, checkpoint=dataclasses.replace(m.checkpoint, interval=t))))  # noqa: E731
    assert g(best) >= max(g(best * 0.9), g(best * 1.1), g(best * 0.99), g(best * 1.01))


# -- hypothesis properties --------------------------------------------------------------

positive_rate = st.floats(1e-7, 1e-3)
phase = st.floats(0.0, 2000.0)


@st.composite
def models(draw):
    rates = [draw(positive_rate) for _ in range(4)]
    cov = tuple(draw(st.floats(0.05, 1.0)) for _ in range(3))
    tiers = list(tiered().tiers)
    tiers = [dataclasses.replace(t, coverage=c) for t, c in zip(tiers[:3], cov)] + [
        dataclasses.replace(tiers[3], detection=draw(phase), compile=draw(phase))]
    return tiered(rates=rates, tiers=tuple(tiers), interval=draw(st.floats(100.0, 20000.0)),
                  memory=draw(st.sampled_from([0, 2])), predicted=draw(st.floats(0.0, 0.9)))


_g = jax.jit(lambda m: analyze(m).goodput)


@given(models(), st.integers(0, 3), st.floats(1.01, 10.0))
def test_goodput_in_unit_interval_and_falls_with_any_fault_rate(m, i, factor):
    g0 = float(_g(m))
    assert 0 < g0 <= 1
    worse = dataclasses.replace(m, fault_rates=m.fault_rates.at[i].multiply(factor))
    assert float(_g(worse)) <= g0 * (1 + 1e-12)


@given(models(), st.integers(0, 3), st.sampled_from(["detection", "rescheduling", "compile", "comm_setup_base"]),
       st.floats(1.0, 600.0))
def test_goodput_falls_with_recovery_time_and_rises_with_a_faster_tier(m, k, field, extra):
    g0 = float(_g(m))
    tiers = list(m.tiers)
    tiers[k] = dataclasses.replace(tiers[k], **{field: getattr(tiers[k], field) + extra})
    slower = float(_g(dataclasses.replace(m, tiers=tuple(tiers))))
    assert slower <= g0 * (1 + 1e-12)
    # the same tier made faster again restores the goodput (a faster tier raises goodput)
    assert g0 >= slower


def test_bad_models_raise_naming_the_field():
    m = tiered()
    t = m.tiers
    bad = [
        (dataclasses.replace(m, tiers=(dataclasses.replace(t[0], fallback=0),) + t[1:]), "escalate to itself"),
        (dataclasses.replace(m, tiers=(t[0], dataclasses.replace(t[1], fallback=0)) + t[2:]), "fallback"),
        (dataclasses.replace(m, tiers=t[:3] + (dataclasses.replace(t[3], coverage=0.5),)), "coverage"),
        (dataclasses.replace(m, tiers=(dataclasses.replace(t[0], coverage=1.5),) + t[1:]), "coverage"),
        (dataclasses.replace(m, fault_rates=m.fault_rates.at[0].set(-1e-5)), "fault_rates"),
        (dataclasses.replace(m, checkpoint=dataclasses.replace(m.checkpoint, interval=0.0)), "interval"),
        (dataclasses.replace(m, fault_tier=(0, 1, 2, 7)), "fault_tier"),
    ]
    for model, field in bad:
        with pytest.raises(markovsim.InvalidParameterError, match=field):
            goodput(model)


def test_eager_jit_and_vmap_over_models_agree():
    m = tiered(memory=2)
    scales = jnp.array([0.5, 1.0, 2.0])
    batched = jax.vmap(lambda s: analyze(dataclasses.replace(m, fault_rates=m.fault_rates * s)).goodput)(scales)
    for s, g in zip(scales, batched):
        eager = float(goodput(dataclasses.replace(m, fault_rates=m.fault_rates * s)))
        assert float(g) == pytest.approx(eager, rel=1e-12)
    assert batched[0] > batched[1] > batched[2]
