"""The faster-compiling paths of issue 14 give the answers of the paths they replace."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

import markovsim as ms
import markovsim.availability as av


# jitted once per form and size: run eagerly, each example compiled the loop form again
# (0.6-0.9 s per call) and the first of each size hundreds of single-op programs (about 30 s
# in all); eager calls are checked once below
_GTH = {unroll: jax.jit(functools.partial(ms.gth, unroll=unroll)) for unroll in (True, False)}


def _random_generator(n, seed):
    rng = np.random.default_rng(seed)
    R = 10.0 ** rng.uniform(-4, 2, size=(n, n))
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


@given(n=st.sampled_from([2, 5, 12]), seed=st.integers(0, 2**31 - 1))  # few sizes: each compiles anew
def test_gth_loop_form_equals_unrolled(n, seed):
    Q = _random_generator(n, seed)
    a = np.asarray(_GTH[True](jnp.asarray(Q)))
    b = np.asarray(_GTH[False](jnp.asarray(Q)))
    np.testing.assert_allclose(b, a, rtol=1e-12)
    np.testing.assert_allclose(a, ms.stationary_distribution(Q), rtol=1e-12)


def test_gth_eager_calls_equal_the_jitted_ones():
    Q = jnp.asarray(_random_generator(5, 3))
    for unroll in (True, False):
        np.testing.assert_allclose(np.asarray(ms.gth(Q, unroll=unroll)), np.asarray(_GTH[unroll](Q)), rtol=1e-13)


@pytest.mark.parametrize("interval", [600.0, 3600.0])
def test_analyze_and_optimum_equals_the_two_calls(interval):
    model = av.single_tier_model(interval, 60.0, 6 * 3600.0, 300.0, 120.0)
    result, opt = av.analyze_and_optimum(model)
    alone = av.analyze(model)
    best = av.checkpoint_interval_optimum(model)
    np.testing.assert_allclose(float(result.goodput), float(alone.goodput), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(result.lost), np.asarray(alone.lost), rtol=1e-12, atol=1e-16)
    assert int(result.status) == int(alone.status) and int(opt.status) == int(best.status)
    np.testing.assert_allclose(float(opt.interval), float(best.interval), rtol=1e-6)
    # the goodput the search reports is the model's goodput at the interval it returns
    at = av.analyze(av.single_tier_model(float(opt.interval), 60.0, 6 * 3600.0, 300.0, 120.0))
    np.testing.assert_allclose(float(opt.goodput), float(at.goodput), rtol=1e-12)


def test_analyze_and_optimum_equals_the_two_calls_with_a_spare_pool():
    import dataclasses

    import jax.numpy as jnp

    base = av.single_tier_model(1800.0, 60.0, 2 * 3600.0, 300.0, 120.0)
    model = dataclasses.replace(
        base, tiers=(dataclasses.replace(base.tiers[0], takes_spare=True),), fault_spare_nodes=jnp.ones(1),
        spares=av.SparePool(size=1, repair_time=4 * 3600.0, activation_time=30.0)).validate()
    result, opt = av.analyze_and_optimum(model)
    alone, best = av.analyze(model), av.checkpoint_interval_optimum(model)
    assert float(alone.lost[4]) > 1e-4  # the pool runs dry: waits for a spare are part of the answer
    for name in ("goodput", "availability", "interruptions_per_day", "lost_work_per_interruption", "lost"):
        np.testing.assert_allclose(np.asarray(getattr(result, name)), np.asarray(getattr(alone, name)),
                                   rtol=1e-12, atol=1e-16, err_msg=name)
    np.testing.assert_allclose(float(opt.interval), float(best.interval), rtol=1e-6)


# ----------------------------------------------------------------------------- imports on first use


def test_lazy_names_equal_their_sources():
    import markovsim
    import markovsim.engine
    from markovsim._cli._validate import CASE_KINDS
    from markovsim.validate import MODEL_KINDS

    assert set(markovsim._ENGINE_NAMES) == set(markovsim.engine.__all__)
    assert all(hasattr(markovsim.engine, n) for n in markovsim.engine.__all__)
    assert markovsim.gth is markovsim.engine.gth and markovsim.engine is markovsim.engine
    assert tuple(CASE_KINDS) == tuple(sorted(MODEL_KINDS))  # the built-in kinds (tests register more)
    import markovsim.training as tr
    from markovsim._cli._plan import ELEMENTWISE, PRECISIONS, RECOMPUTES, SCHEDULES, STACKS

    from markovsim.training._search import _RECOMPUTES

    # the plan search's --recompute filter offers the modes the search proposes (not selective-op)
    assert SCHEDULES == tuple(s.value for s in tr.Schedule) and RECOMPUTES == tuple(r.value for r in _RECOMPUTES)
    # --precision offers the GEMM formats a plan accepts (FP32 is a format of gradients and moments only)
    assert PRECISIONS == tuple(p.value for p in tr.Precision if p is not tr.Precision.FP32)
    assert STACKS == tuple(tr.SOFTWARE_STACKS)
    assert ELEMENTWISE == tuple(e.value for e in tr.Elementwise)


def test_goodput_command_imports_only_what_it_uses():
    """``markovsim goodput`` answers without the engine (scipy.sparse), training or inference
    packages, and without starting XLA (issue 14: the first answer in seconds)."""
    import subprocess
    import sys

    code = ("import sys, io, contextlib\n"
            "from markovsim._cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['goodput', '--cluster', 'atlas800t_a2_10k', '--recovery', 'ascend_tiered'])\n"
            "import jax._src.xla_bridge as xb\n"
            "print(sorted(m for m in ('markovsim.engine', 'markovsim.training', 'markovsim.inference',"
            " 'scipy.sparse') if m in sys.modules), bool(xb._backends))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "MARKOVSIM_NO_COMPILE_CACHE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[] False"


def test_sweep_points_equal_on_both_paths():
    """A CLI sweep of COMPILED_FROM points or more solves them through the compiled programs
    (shared by the points of one structure); fewer take the numpy path. A point's outputs are
    the same either way."""
    from markovsim._cli._goodput import job_document
    from markovsim._cli._sweep import COMPILED_FROM, evaluate_point

    assert COMPILED_FROM > 1
    from markovsim.availability._optimum import _both_jit

    doc, label, base, _ = job_document(None, "atlas800t_a2_10k", "ascend_tiered", None, [])
    before = _both_jit._cache_size()
    eager, err = evaluate_point("goodput", doc, label, base)
    assert _both_jit._cache_size() == before  # the numpy path compiles nothing
    compiled, err2 = evaluate_point("goodput", doc, label, base, True)
    assert _both_jit._cache_size() >= 1  # the compiled program ran (its outputs are read lazily)
    assert err is None and err2 is None and eager.keys() == compiled.keys()
    for key, value in eager.items():
        # the optimum's interval is known to the search's resolution (a flat optimum), the rest to rounding
        rel = 1e-6 if "interval" in key else 1e-10
        assert value == pytest.approx(compiled[key], rel=rel, abs=1e-12), key
