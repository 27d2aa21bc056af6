"""Checkpoint formulas: Lambert W, the exact segment time and optimum, Young, Daly, ETTR."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.special
import sympy as sp
from hypothesis import given, strategies as st
from jax.test_util import check_grads

import markovsim
from markovsim.availability import (
    checkpoint_goodput,
    daly_interval,
    expected_ettr_first_order,
    expected_segment_time,
    lambertw,
    optimal_interval,
    young_interval,
)


def test_lambertw_matches_scipy():
    z = np.concatenate([-1 / np.e + np.logspace(-8, -1, 25), np.linspace(-0.3, 10, 60), np.logspace(1, 300, 40)])
    w = np.asarray(lambertw(jnp.asarray(z)))
    ref = scipy.special.lambertw(z).real
    # near the branch point W is ill-conditioned (dW/dz ~ 1/sqrt(z + 1/e)): tolerance 1e-10
    np.testing.assert_allclose(w, ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(w * np.exp(w)), z, rtol=1e-12, atol=1e-15)


def test_lambertw_gradient_and_domain():
    check_grads(lambertw, (jnp.array([-0.2, 0.5, 3.0, 40.0]),), order=1, modes=["fwd", "rev"])
    assert np.isnan(float(lambertw(-0.5)))


def test_optimal_interval_matches_scipy_lambert_formula():
    save = np.array([1.0, 10.0, 60.0, 300.0, 3600.0, 5e4])
    mtbf = np.array([3600.0, 7200.0, 36000.0, 864000.0, 4000.0, 1e5])
    tau = np.asarray(optimal_interval(save, mtbf))
    ref = mtbf * (1 + scipy.special.lambertw(-np.exp(-1 - save / mtbf)).real)
    # scipy's route forms -e^{-1-c} and loses digits of small c: compare at 1e-7
    np.testing.assert_allclose(tau, ref, rtol=1e-7)


@pytest.mark.parametrize("c", ["1e-14", "1e-9", "1e-5", "0.01", "0.7", "3", "40"])
def test_optimal_interval_tiny_and_large_ratios_against_mpmath(c):
    mpmath.mp.dps = 40
    ref = float(1 + mpmath.lambertw(-mpmath.e ** (-1 - mpmath.mpf(c))))
    got = float(optimal_interval(float(c), 1.0))
    assert got == pytest.approx(ref, rel=1e-12)


def _renewal_segment_time_sympy():
    """Derive E[segment time] from the renewal equations, independently of the module."""
    lam, L, R, D, t = sp.symbols("lambda L R D t", positive=True)
    X, E = sp.symbols("X E")
    # restart episode: downtime D, then R; a failure during R starts again (D + R)
    eq_x = sp.Eq(X, D + sp.exp(-lam * R) * R + sp.integrate((t + X) * lam * sp.exp(-lam * t), (t, 0, R)))
    x = sp.solve(eq_x, X)[0]
    eq_e = sp.Eq(E, sp.exp(-lam * L) * L + sp.integrate((t + x + E) * lam * sp.exp(-lam * t), (t, 0, L)))
    return sp.simplify(sp.solve(eq_e, E)[0]), (lam, L, R, D)


def test_expected_segment_time_matches_sympy_renewal_derivation():
    expr, (lam, L, R, D) = _renewal_segment_time_sympy()
    closed = (1 / lam + D) * sp.exp(lam * R) * (sp.exp(lam * L) - 1)
    assert sp.simplify(expr - closed) == 0
    f = sp.lambdify((lam, L, R, D), expr)
    for tau, c, m, r, d in [(600.0, 50.0, 3600.0, 120.0, 0.0), (5000.0, 300.0, 86400.0, 900.0, 600.0),
                            (10.0, 1.0, 20.0, 3.0, 5.0)]:
        got = float(expected_segment_time(tau, c, m, r, downtime=d))
        assert got == pytest.approx(f(1 / m, tau + c, r, d), rel=1e-12)


def test_optimum_satisfies_the_first_order_condition_and_series():
    tau, c, m = sp.symbols("tau C M", positive=True)
    g = tau / (sp.exp((tau + c) / m) - 1)
    dg = sp.diff(g, tau)
    for cv, mv in [(50.0, 3600.0), (300.0, 86400.0), (1000.0, 1500.0)]:
        t_opt = float(optimal_interval(cv, mv))
        val = dg.subs({tau: t_opt, c: cv, m: mv})
        assert abs(float(val)) < 1e-10
        assert float(sp.diff(g, tau, 2).subs({tau: t_opt, c: cv, m: mv})) < 0
    # series: Daly's formula plus 2 c^2 / 135 solves x + log(1 - x) + c = 0 to O(c^{5/2})
    s = sp.symbols("s", positive=True)  # s = sqrt(c)
    daly = sp.sqrt(2) * s * (1 + s / (3 * sp.sqrt(2)) + s**2 / 18) - s**2
    x = daly + sp.Rational(2, 135) * s**4
    residual = sp.series(x + sp.log(1 - x) + s**2, s, 0, 5).removeO()
    assert sp.simplify(residual) == 0


@pytest.mark.parametrize("save,mtbf,restart,down", [(50.0, 3600.0, 60.0, 0.0), (300.0, 86400.0, 900.0, 300.0),
                                                     (120.0, 1800.0, 30.0, 10.0)])
def test_exact_optimum_beats_a_fine_brute_force_grid(save, mtbf, restart, down):
    t_opt = float(optimal_interval(save, mtbf))
    grid = np.linspace(0.05 * t_opt, 5 * t_opt, 200001)
    g_grid = np.asarray(checkpoint_goodput(grid, save, mtbf, restart, down))
    g_opt = float(checkpoint_goodput(t_opt, save, mtbf, restart, down))
    assert g_opt >= g_grid.max() - 1e-15
    assert abs(grid[np.argmax(g_grid)] - t_opt) <= 2 * (grid[1] - grid[0]) + 1e-6 * t_opt


@given(st.floats(1e-8, 1.99), st.floats(1.0, 1e7))
def test_exact_optimum_lies_between_daly_and_young(ratio, mtbf):
    save = ratio * mtbf
    exact = float(optimal_interval(save, mtbf))
    young = float(young_interval(save, mtbf))
    daly = float(daly_interval(save, mtbf))
    assert exact < young
    assert daly < exact * (1 + 1e-13)
    # Daly's error is 2 c^2 M / 135 to leading order, far below Young's 2C/3
    if ratio < 1e-2:
        assert exact - daly == pytest.approx(2 * ratio**2 * mtbf / 135, rel=0.05, abs=1e-9 * mtbf)


def test_formulas_vectorise_jit_and_differentiate():
    save = jnp.array([10.0, 100.0, 500.0])
    mtbf = jnp.array([3600.0, 86400.0, 7200.0])
    eager = optimal_interval(save, mtbf)
    np.testing.assert_allclose(jax.vmap(optimal_interval)(save, mtbf), eager, rtol=1e-14)
    np.testing.assert_allclose(jax.jit(optimal_interval)(save, mtbf), eager, rtol=1e-14)
    check_grads(lambda c, m: optimal_interval(c, m), (save, mtbf), order=1, modes=["rev"], rtol=1e-5)
    check_grads(lambda t: expected_segment_time(t, 50.0, 3600.0, 60.0, 30.0), (jnp.array([300.0, 900.0]),),
                order=2, modes=["rev"])
    # d tau*/dC = M (1 - x)/x / M from the implicit function theorem
    x = float(optimal_interval(100.0, 1.0e4)) / 1.0e4
    assert float(jax.grad(optimal_interval)(100.0, 1.0e4)) == pytest.approx((1 - x) / x, rel=1e-10)


def test_first_order_ettr_error_is_second_order():
    # scale every time with the MTBF fixed: the error must fall as (time / M)^2
    def err_scaled(k):
        m = 1e6
        args = (k * 1e3, k * 1e2, m, k * 2e2, k * 1e2)
        return abs(float(checkpoint_goodput(*args)) - float(expected_ettr_first_order(*args)))

    assert 70 < err_scaled(1.0) / err_scaled(0.1) < 130


@pytest.mark.parametrize("fn,args,field", [
    (young_interval, (-1.0, 100.0), "save_time"),
    (daly_interval, (10.0, 0.0), "mtbf"),
    (optimal_interval, (10.0, float("nan")), "mtbf"),
    (expected_segment_time, (100.0, 10.0, 1000.0, -5.0), "restart_time"),
])
def test_bad_arguments_name_the_field(fn, args, field):
    with pytest.raises(markovsim.InvalidParameterError, match=field):
        fn(*args)


def test_docstring_examples_run():
    import doctest

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    examples = 0
    for name, fn in [("young_interval", young_interval), ("optimal_interval", optimal_interval),
                     ("lambertw", lambertw)]:
        for test in finder.find(fn, name, globs={}):
            examples += len(test.examples)
            runner.run(test)
    assert examples >= 3 and runner.failures == 0
