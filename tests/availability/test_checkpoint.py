"""Checkpoint formulas: Lambert W, the exact segment time and optimum, Young, Daly, ETTR."""

import warnings
from fractions import Fraction

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
    optimal_interval_and_goodput,
    young_interval,
)
from markovsim.availability import _lambertw


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
    with warnings.catch_warnings():  # Young is far off at large C/M (tested on its own)
        warnings.simplefilter("ignore", markovsim.MarkovsimWarning)
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
    (optimal_interval_and_goodput, (10.0, 100.0, float("inf")), "restart_time"),
    (optimal_interval_and_goodput, (10.0, 100.0, 5.0, -1.0), "downtime"),
    (optimal_interval_and_goodput, (0.0, 100.0, 5.0), "save_time"),
])
def test_bad_arguments_name_the_field(fn, args, field):
    with pytest.raises(markovsim.InvalidParameterError, match=field):
        fn(*args)


def test_docstring_examples_run():
    import doctest

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    examples = 0
    for name, fn in [("young_interval", young_interval), ("optimal_interval", optimal_interval),
                     ("optimal_interval_and_goodput", optimal_interval_and_goodput),
                     ("lambertw", lambertw)]:
        for test in finder.find(fn, name, globs={}):
            examples += len(test.examples)
            runner.run(test)
    assert examples >= 3 and runner.failures == 0


def _series_coefficients_by_lagrange_inversion(n_terms):
    """a_k of x = sum a_k s^(k+1), s = sqrt(2c), from s = x g(x), g^2 = 2(-x - log(1-x))/x^2.

    Lagrange inversion: a_k = [x^k] q(x)^(-(k+1)/2) / (k+1) with q = g^2 = sum 2 x^j/(j+2);
    powers of a series by the J. C. P. Miller recurrence, in exact rationals.
    """
    q = [Fraction(2, j + 2) for j in range(n_terms)]
    out = []
    for k in range(n_terms):
        r = Fraction(-(k + 1), 2)
        b = [Fraction(1)] + [Fraction(0)] * k
        for n in range(1, k + 1):
            b[n] = sum((r * j - (n - j)) * q[j] * b[n - j] for j in range(1, n + 1)) / n
        out.append(b[k] / (k + 1))
    return out


def test_series_coefficients_are_the_rounded_lagrange_inversion():
    exact = _series_coefficients_by_lagrange_inversion(len(_lambertw._S_SERIES))
    assert exact[:4] == [1, Fraction(-1, 3), Fraction(1, 36), Fraction(1, 270)]
    assert list(_lambertw._S_SERIES) == [float(a) for a in exact]


def test_one_plus_w0_and_complement_against_40_digits_over_the_whole_range():
    mpmath.mp.dps = 40
    c = np.concatenate([np.logspace(-18, np.log10(700.0), 700), [0.5, np.nextafter(0.5, 1), 2.0, 1.999999, 2.000001]])
    x, y = (np.asarray(a) for a in jax.jit(_lambertw.one_plus_w0_and_complement)(jnp.asarray(c)))
    ref_x, ref_y = [], []
    for ci in c:
        w = mpmath.lambertw(-mpmath.e ** (-1 - mpmath.mpf(float(ci))))
        ref_x.append(float(1 + w))
        ref_y.append(float(-w))
    np.testing.assert_allclose(x, ref_x, rtol=6e-16, atol=0)
    # 1 - x: exact where it is carried (c > 1/2), one subtraction from x >= 1/3 below
    # 1 - x has condition number ~c in c (d log(1-x)/d log c = -c/x): a few ulps times c
    ref_y = np.array(ref_y)
    assert np.all(np.abs(y - ref_y) <= (1.2e-15 + 4e-16 * c) * ref_y)
    # the series-only branch (no element above 1/2) and vmap (where cond becomes select) agree
    low = c <= 0.5
    np.testing.assert_allclose(np.asarray(_lambertw.one_plus_w0_of_neg_exp(jnp.asarray(c[low]))), x[low], rtol=3e-16)
    np.testing.assert_allclose(np.asarray(jax.vmap(_lambertw.one_plus_w0_of_neg_exp)(jnp.asarray(c))), x, rtol=3e-16)


@given(st.floats(1e-10, 5.0), st.floats(10.0, 1e8), st.floats(0.0, 1e5), st.floats(0.0, 1e5))
def test_optimal_interval_and_goodput_is_the_goodput_at_the_optimum(ratio, mtbf, restart, down):
    save = ratio * mtbf
    tau, good = optimal_interval_and_goodput(save, mtbf, restart, down)
    assert float(tau) == pytest.approx(float(optimal_interval(save, mtbf)), rel=1e-14)
    direct = float(checkpoint_goodput(tau, save, mtbf, restart, down))
    assert 0.0 <= float(good) <= 1.0
    assert float(good) == pytest.approx(direct, rel=1e-12, abs=1e-300)


def test_optimal_interval_and_goodput_gradients():
    args = (jnp.array([30.0, 600.0, 3000.0]), jnp.array([3600.0, 86400.0, 4000.0]), jnp.array([60.0, 900.0, 10.0]),
            jnp.array([5.0, 120.0, 30.0]))
    check_grads(lambda *a: optimal_interval_and_goodput(*a)[1], args, order=1, modes=["fwd", "rev"], rtol=1e-5)
    # envelope theorem: d goodput*/dC equals the partial derivative at a fixed interval
    tau = optimal_interval(300.0, 86400.0)
    dC = jax.grad(lambda c: optimal_interval_and_goodput(c, 86400.0, 900.0, 120.0)[1])(300.0)
    partial = jax.grad(lambda c: checkpoint_goodput(tau, c, 86400.0, 900.0, 120.0))(300.0)
    assert float(dC) == pytest.approx(float(partial), rel=1e-9)
