"""The padded (bucketed) host path: the same numbers as the unpadded traced path, and models
that differ by a fault mode or a tier within a bucket share compiled programs (issue 14).

The reference is the solver traced into the caller's own ``jax.jit`` (no padding: the
model's exact mode and tier counts), so a padding mode or tier that leaked into a sum, a
fallback or a spare count would show as a difference. Single concrete models take the
numpy path by default (``tests/availability/test_numpy_path.py``); here every test asks for
the compiled one (``compiled_single``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from markovsim.availability import (
    SparePool,
    analyze,
    checkpoint_interval_optimum,
    goodput,
    goodput_sensitivities,
)
from markovsim._backend import compiled_single
from markovsim.availability._goodput import _solve_jit
from markovsim.availability._sensitivity import _value_and_grad
from markovsim.availability._optimum import _optimum_jit
from markovsim.availability._packed import MIN_MODES, MIN_TIERS, bucket, pack

from .availability_models import tiered
from .random_models import availability_models


def _grown(model, copies=1):
    """``model`` with ``copies`` more fault modes (each a copy of the first at a tenth of its
    rate, starting at a new tier) and as many more tiers (copies of the last)."""
    k = len(model.tiers)
    tiers = model.tiers + tuple(dataclasses.replace(model.tiers[-1], name=f"extra {j}", fallback=-1)
                                for j in range(copies))

    def more(a, v):
        return jnp.concatenate([jnp.asarray(a, dtype=float), jnp.full(copies, v)])

    return dataclasses.replace(
        model, tiers=tiers,
        fault_names=model.fault_names + tuple(f"extra {j}" for j in range(copies)),
        fault_tier=model.fault_tier + tuple(range(k, k + copies)),
        fault_interrupts=model.fault_interrupts + (True,) * copies,
        fault_rates=more(model.fault_rates, float(model.fault_rates[0]) / 10),
        fault_degraded_throughput=more(model.fault_degraded_throughput, 1.0),
        fault_detection_time=more(model.fault_detection_time, 0.0),
        fault_spare_nodes=more(model.fault_spare_nodes, 1.0),
        fault_predicted=more(model.fault_predicted, 0.0)).validate()


_traced = jax.jit(lambda m: analyze(m, throw=False))
# the reference gradient, jitted: the same autodiff of the unpadded model, compiled once per
# structure (run eagerly, jax.grad dispatched it op by op: 3x the time)
_grad = jax.jit(jax.grad(goodput))


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    with compiled_single():
        yield


def test_bucket_sizes():
    assert [bucket(n, 8) for n in (0, 1, 7, 8, 9, 16, 17)] == [8, 8, 8, 8, 16, 16, 32]
    pm = pack(tiered(), pad=True)
    assert pm.fault_rates.shape == (MIN_MODES,) and pm.tiers.detection.shape == (MIN_TIERS,)
    assert all(np.asarray(v).dtype == np.float64 for v in jax.tree_util.tree_leaves(pm))
    # padding modes never occur, padding tiers are never entered nor fallen back to
    assert np.all(pm.fault_rates[4:] == 0.0) and np.all(pm.tier_fallback[4:] == -1.0)
    assert np.all(pm.fault_tier[4:] < 4)


@settings(max_examples=5, deadline=None)
@given(availability_models())
def test_padded_host_path_equals_traced_unpadded_path(m):
    host = analyze(m, throw=False)
    ref = _traced(m)
    assert int(host.status) == int(ref.status)
    for name in ("goodput", "availability", "interruptions_per_day", "lost_work_per_interruption", "lost"):
        np.testing.assert_allclose(getattr(host, name), getattr(ref, name), rtol=1e-12, atol=1e-15, err_msg=name)


@pytest.mark.parametrize("spares", [None, SparePool(size=2, repair_time=6 * 3600.0, activation_time=60.0)])
def test_sensitivities_equal_gradient_of_the_unpadded_model(spares):
    m = tiered(spares=spares, memory=2).validate()
    sens = goodput_sensitivities(m, relative=False)
    grads = _grad(m)  # traced: the unpadded model
    for i, name in enumerate(m.fault_names):
        assert sens[f"fault_rates[{name}]"] == pytest.approx(float(grads.fault_rates[i]), rel=1e-9, abs=1e-18)
        assert sens[f"fault_spare_nodes[{name}]"] == pytest.approx(float(grads.fault_spare_nodes[i]), rel=1e-9,
                                                                     abs=1e-18)
    for t, gt in zip(m.tiers, grads.tiers):
        for field in ("detection", "coverage", "comm_setup_per_card", "degraded_time"):
            key = f"tiers[{t.name}].{field}"
            if key in sens:
                assert sens[key] == pytest.approx(float(getattr(gt, field)), rel=1e-9, abs=1e-18), key
    assert sens["checkpoint.interval"] == pytest.approx(float(grads.checkpoint.interval), rel=1e-9, abs=1e-18)


def test_one_more_mode_and_tier_reuses_the_compiled_programs():
    m = tiered(spares=SparePool(size=2, repair_time=6 * 3600.0)).validate()
    analyze(m), checkpoint_interval_optimum(m), goodput_sensitivities(m)
    sizes = [f._cache_size() for f in (_solve_jit, _optimum_jit, _value_and_grad)]
    g = _grown(m)
    analyze(g), checkpoint_interval_optimum(g), goodput_sensitivities(g)
    assert [f._cache_size() for f in (_solve_jit, _optimum_jit, _value_and_grad)] == sizes
    # and the grown model's numbers are its own: its extra mode lowers goodput
    assert float(goodput(g)) < float(goodput(m))
    np.testing.assert_allclose(float(goodput(g)), float(_traced(g).goodput), rtol=1e-12)


def test_crossing_a_bucket_compiles_once_more_and_stays_right():
    m = tiered().validate()
    big = _grown(m, copies=MIN_TIERS + 1 - len(m.tiers))  # one tier past the smallest bucket
    assert len(big.tiers) == MIN_TIERS + 1
    before = _solve_jit._cache_size()
    r = analyze(big)
    assert _solve_jit._cache_size() <= before + 1
    np.testing.assert_allclose(float(r.goodput), float(_traced(big).goodput), rtol=1e-12)
