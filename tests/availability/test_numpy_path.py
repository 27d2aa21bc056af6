"""The numpy path (``markovsim._backend``): one concrete model is solved without JAX, and
gives the compiled program's numbers (issue 14: "same numbers, tested equal to the JAX
path").

References: the compiled JAX program (``compiled_single``) for analyze, the optimum and the
sensitivities (exact gradients by ``jax.grad``); closed forms for the birth-death chains
behind the two GTH variants, including their complex-step derivatives.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._backend import NUMPY, compiled_single, gth_band, gth_numpy, numpy_single
from markovsim.availability import (
    SaveMode,
    SparePool,
    analyze,
    analyze_and_optimum,
    checkpoint_interval_optimum,
    goodput_sensitivities,
)
from markovsim.availability._phasetype import PhaseType

from .availability_models import tiered
from .random_models import availability_models

H = 3600.0
_FIELDS = ("goodput", "availability", "unavailability", "interruptions_per_day", "lost_work_per_interruption",
           "lost", "job_mtbf")

_MODELS = {
    "blocking, no pool": tiered(),
    "background, memory copies, pool": tiered(save_mode=SaveMode.BACKGROUND, memory=2, predicted=0.3,
                                              spares=SparePool(size=2, repair_time=8 * H, activation_time=60.0)),
    "saturated pool": tiered(memory=1, rates=[1e-4, 2e-4, 3e-4, 1e-5],
                             spares=SparePool(size=1, repair_time=30 * H, activation_time=120.0)),
    "Erlang-2 repair": tiered(spares=SparePool.with_repair(
        3, PhaseType(np.array([1.0, 0.0]), np.array([[-2 / (6 * H), 2 / (6 * H)], [0.0, -2 / (6 * H)]])),
        activation_time=30.0)),
}


def _same(a, b, rtol=1e-12):
    assert int(a.status) == int(b.status)
    for name in _FIELDS:
        np.testing.assert_allclose(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)), rtol=rtol,
                                   atol=1e-15, err_msg=name)


def test_the_numpy_path_is_the_default_and_returns_numpy():
    assert numpy_single()
    r = analyze(_MODELS["blocking, no pool"])
    assert isinstance(r.goodput, np.ndarray) and r.goodput.shape == ()
    with compiled_single():
        assert not numpy_single()
        assert isinstance(analyze(_MODELS["blocking, no pool"]).goodput, jax.Array)
    assert numpy_single()


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_analyze_and_optimum_equal_the_compiled_program(name):
    model = _MODELS[name].validate()
    r, opt = analyze_and_optimum(model)
    with compiled_single():
        rj, optj = analyze_and_optimum(model)
    _same(r, rj)
    assert int(opt.status) == int(optj.status)
    # goodput at the optimum to rounding; the interval within the search's resolution (the
    # optimum is flat: intervals 1e-8 apart tie to 1e-16 and either path may keep either)
    np.testing.assert_allclose(float(opt.goodput), float(optj.goodput), rtol=1e-13)
    np.testing.assert_allclose(float(opt.interval), float(optj.interval), rtol=1e-6)
    for name in ("feasible_lower", "search_lower", "search_upper"):
        np.testing.assert_allclose(float(getattr(opt, name)), float(getattr(optj, name)), rtol=1e-13)


@pytest.mark.parametrize("name", ["blocking, no pool", "background, memory copies, pool", "Erlang-2 repair"])
def test_complex_step_sensitivities_equal_the_compiled_gradient(name):
    model = _MODELS[name].validate()
    sens = goodput_sensitivities(model, relative=False)
    with compiled_single():
        ref = goodput_sensitivities(model, relative=False)
    assert sens.keys() == ref.keys()
    scale = max(abs(v) for v in ref.values())
    for key, value in ref.items():
        assert sens[key] == pytest.approx(value, rel=1e-10, abs=1e-13 * scale), key


@settings(max_examples=8, deadline=None)
@given(availability_models())
def test_random_models_equal_the_compiled_program(m):
    r = analyze(m, throw=False)
    with compiled_single():
        rj = analyze(m, throw=False)
    _same(r, rj)


def test_the_numpy_path_compiles_nothing():
    """A new structure (one more mode and tier, another pool) on the numpy path: no XLA
    compilation at all (what makes the first answer fast)."""
    events = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **_: events.append(event) if "backend_compile" in event else None)
    base = _MODELS["background, memory copies, pool"]
    model = dataclasses.replace(base, spares=SparePool(size=5, repair_time=5 * H)).validate()
    analyze(model), checkpoint_interval_optimum(model), goodput_sensitivities(model)
    assert events == []


# ----------------------------------------------------------------------------- the two GTH variants


def _birth_death(lam, mu):
    """Generator of a birth-death chain (births ``lam[k]`` from k, deaths ``mu[k]`` from k+1)
    and its stationary vector from the product form."""
    lam, mu = np.asarray(lam), np.asarray(mu)
    n = len(lam) + 1
    Q = np.zeros((n, n), dtype=np.result_type(lam, mu, float))
    for k in range(n - 1):
        Q[k, k + 1], Q[k + 1, k] = lam[k], mu[k]
    w = np.concatenate([[1.0], np.cumprod(lam / mu)])
    return Q, w / w.sum()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=30), st.data())
def test_gth_variants_equal_the_product_form(lam, data):
    mu = data.draw(st.lists(st.floats(1e-3, 1e3), min_size=len(lam), max_size=len(lam)))
    Q, pi = _birth_death(lam, mu)
    np.testing.assert_allclose(gth_numpy(Q), pi, rtol=1e-12)
    np.testing.assert_allclose(gth_band(Q, 1), pi, rtol=1e-12)
    np.testing.assert_allclose(gth_band(Q, 4), pi, rtol=1e-12)  # a wider band than needed changes nothing


def test_gth_band_handles_a_band_of_three_and_huge_ratios():
    rng = np.random.default_rng(7)
    n = 41
    Q = np.zeros((n, n))
    for i in range(n):
        for j in range(max(0, i - 3), min(n, i + 4)):
            if i != j:
                Q[i, j] = rng.uniform(0.1, 10.0)
    np.testing.assert_allclose(gth_band(Q, 3), gth_numpy(Q), rtol=1e-12)
    lam, mu = [1e12] * 30, [1.0] * 30  # weights up to 1e360: rescaled on the way
    with np.errstate(over="ignore", invalid="ignore"):  # (the product form itself overflows)
        Q, _ = _birth_death(lam, mu)
    pi = gth_band(Q, 1)
    assert np.isfinite(pi).all() and pi[-1] == pytest.approx(1 - 1e-12, rel=1e-12)


@pytest.mark.parametrize("solver", [gth_numpy, lambda Q: gth_band(Q, 1)], ids=["dense", "band"])
def test_complex_step_through_gth_is_the_derivative_of_the_product_form(solver):
    lam, mu = np.array([0.5, 2.0, 1.5, 0.7]), np.array([1.0, 0.3, 2.5, 1.1])
    h = 1e-20
    for k in range(len(lam)):
        bumped = lam.astype(complex)
        bumped[k] += 1j * h
        Q, pi_closed = _birth_death(bumped, mu.astype(complex))  # the product form in complex arithmetic
        d = np.imag(solver(Q)) / h
        # the product form's derivative, by hand: d pi_j / d lam_k = pi_j ([j > k] - P(J > k)) / lam_k
        _, pi = _birth_death(lam, mu)
        above = np.arange(len(pi)) > k
        exact = pi * (above - pi[above].sum()) / lam[k]
        np.testing.assert_allclose(d, exact, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(d, np.imag(pi_closed) / h, rtol=1e-12, atol=1e-15)


def test_numpy_ops_stop_gradient_keeps_the_real_part():
    assert NUMPY.stop_gradient(np.asarray(2.0 + 3e-20j)) == 2.0
    assert NUMPY.stop_gradient(np.asarray(2.0)) == 2.0


def test_gth_band_gives_nan_for_a_reducible_chain_as_gth_numpy():
    """A state with no rate to the states after it (a rate underflowed to 0) makes the chain
    reducible: both numpy GTHs answer NaN, which the callers flag, instead of raising
    ZeroDivisionError (a 2**200 GB recovery state reached it through the spare pool's root
    search probing a zero running share)."""
    Q = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    assert np.all(np.isnan(gth_band(Q, 1))) and np.all(np.isnan(gth_numpy(Q)))
