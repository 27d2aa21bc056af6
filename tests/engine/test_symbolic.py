"""Symbolic (sympy) stationary distributions and MTTF against textbook closed forms, and
the numeric engine against the symbolic answers as exact rationals.

References: the M/M/1/K product form rho^k (1 - rho) / (1 - rho^(K+1)), the birth-death
product formula, the 1-out-of-2 repairable MTTF (3 lam + mu) / (2 lam^2), the k-out-of-n
MTTF sum 1 / (i lam), all checked by sympy's own simplification.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy

import markovsim as ms

lam, mu = sympy.symbols("lambda mu", positive=True)


def birth_death(births, deaths):
    n = len(births) + 1
    Q = sympy.zeros(n, n)
    for k, b in enumerate(births):
        Q[k, k + 1] = b
    for k, d in enumerate(deaths):
        Q[k + 1, k] = d
    for i in range(n):
        Q[i, i] = -sum(Q[i, j] for j in range(n) if j != i)
    return Q


def test_two_state_and_mm1k_product_form():
    pi = ms.symbolic_stationary_distribution(sympy.Matrix([[-lam, lam], [mu, -mu]]))
    assert sympy.simplify(pi[0] - mu / (lam + mu)) == 0
    K = 4
    pi = ms.symbolic_stationary_distribution(birth_death([lam] * K, [mu] * K))
    rho = lam / mu
    for k in range(K + 1):
        assert sympy.simplify(pi[k] - rho**k * (1 - rho) / (1 - rho ** (K + 1))) == 0
    assert pi.shape == (1, K + 1)


def test_mmck_and_dtmc():
    c, K = 2, 4  # M/M/2/4: death rate min(k, c) mu
    pi = ms.symbolic_stationary_distribution(birth_death([lam] * K, [min(k, c) * mu for k in range(1, K + 1)]))
    w = [sympy.Integer(1)]
    for k in range(1, K + 1):
        w.append(w[-1] * lam / (min(k, c) * mu))
    total = sum(w)
    for k in range(K + 1):
        assert sympy.simplify(pi[k] - w[k] / total) == 0
    p = sympy.Symbol("p", positive=True)
    P = sympy.Matrix([[1 - p, p], [sympy.Rational(1, 2), sympy.Rational(1, 2)]])
    pi = ms.symbolic_stationary_distribution(ms.DTMC(P))
    assert sympy.simplify(pi[0] - 1 / (1 + 2 * p)) == 0


def test_mttf_closed_forms():
    Q = sympy.Matrix([[-2 * lam, 2 * lam, 0], [mu, -lam - mu, lam], [0, 0, 0]])
    m = ms.symbolic_mean_time_to_absorption(Q, [1, 0, 0], [2])
    assert sympy.simplify(m - (3 * lam + mu) / (2 * lam**2)) == 0
    n, k = 5, 2
    Qk = sympy.zeros(n + 1, n + 1)
    for i in range(n):
        Qk[i, i + 1] = (n - i) * lam
        Qk[i, i] = -(n - i) * lam
    m = ms.symbolic_mean_time_to_absorption(Qk, [1] + [0] * n, list(range(n - k + 1, n + 1)))
    assert sympy.simplify(m - sum(1 / (i * lam) for i in range(k, n + 1))) == 0
    # DTMC: geometric number of steps
    p = sympy.Symbol("p", positive=True)
    steps = ms.symbolic_mean_time_to_absorption(ms.DTMC(sympy.Matrix([[1 - p, p], [0, 1]])), [1, 0], [1])
    assert sympy.simplify(steps - 1 / p) == 0


RATES = [sympy.Rational(1, 10**9), sympy.Rational(3, 10**4), sympy.Rational(7, 10), sympy.Integer(1000)]


@pytest.mark.parametrize("a", RATES)
@pytest.mark.parametrize("b", RATES)
def test_numeric_engine_within_1e10_of_exact_rationals(a, b):
    # a 4-state birth-death chain with rates spanning 1e-9 .. 1e3 per second
    Qs = birth_death([a, 2 * a, a], [b, b, 3 * b])
    exact = ms.symbolic_stationary_distribution(Qs)
    Qn = np.array(Qs.evalf(40).tolist(), dtype=float)
    pi = ms.stationary_distribution(Qn)
    for k in range(4):
        e = Fraction(int(sympy.numer(exact[k])), int(sympy.denom(exact[k])))
        assert abs(Fraction(float(pi[k])) - e) <= Fraction(1, 10**10) * e
    m_exact = ms.symbolic_mean_time_to_absorption(Qs, [1, 0, 0, 0], [3])
    m = ms.mean_time_to_absorption(Qn, np.array([1.0, 0, 0, 0]), [3])
    e = Fraction(int(sympy.numer(m_exact)), int(sympy.denom(m_exact)))
    assert abs(Fraction(m) - e) <= Fraction(1, 10**10) * e


def test_to_jax_function_values_transformations_and_gradient():
    Q = sympy.Matrix([[-2 * lam, 2 * lam, 0], [mu, -lam - mu, lam], [0, 2 * mu, -2 * mu]])
    pi = ms.symbolic_stationary_distribution(Q)
    f = ms.to_jax_function(pi, [lam, mu])
    out = f(0.3, 1.7)
    assert out.shape == (3,) and out.dtype == jnp.float64
    Qn = np.array(Q.subs({lam: 0.3, mu: 1.7}).tolist(), dtype=float)
    np.testing.assert_allclose(out, ms.stationary_distribution(Qn), rtol=1e-14)
    xs = jnp.array([0.3, 1.0, 5.0])
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, 1.7), jnp.stack([f(x, 1.7) for x in xs]), rtol=1e-15)
    np.testing.assert_allclose(jax.jit(f)(0.3, 1.7), out, rtol=1e-15)
    m = ms.symbolic_mean_time_to_absorption(Q, [1, 0, 0], [2])  # time to first reach state 2
    g = ms.to_jax_function(m, (lam, mu))
    dm = sympy.diff(m, lam)
    np.testing.assert_allclose(jax.jit(jax.grad(g))(0.3, 1.7), float(dm.subs({lam: 0.3, mu: 1.7})), rtol=1e-13)
    np.testing.assert_allclose(ms.to_jax_function(lam**2, lam)(3.0), 9.0)  # a single symbol
    # a plain list of expressions gives a 1-D array
    np.testing.assert_allclose(ms.to_jax_function([lam, lam**2], [lam])(3.0), [3.0, 9.0])


def test_errors():
    with pytest.raises(ms.InvalidChainError, match="square"):
        ms.symbolic_stationary_distribution(sympy.Matrix([[1, 2, 3]]))
    with pytest.raises(ms.InvalidChainError, match="row 0 sums to"):
        ms.symbolic_stationary_distribution(sympy.Matrix([[-lam, 2 * lam], [mu, -mu]]))
    with pytest.raises(ms.InvalidChainError, match=r"Q\[0, 1\]=-lambda"):
        ms.symbolic_stationary_distribution(sympy.Matrix([[lam, -lam], [mu, -mu]]))
    with pytest.raises(ms.ReducibleChainError, match="2 recurrent classes"):
        ms.symbolic_stationary_distribution(sympy.Matrix([[0, 0, 0], [lam, -lam - mu, mu], [0, 0, 0]]))
    # one recurrent class and a transient state: unique, zero on the transient state
    assert ms.symbolic_stationary_distribution(sympy.Matrix([[0, 0], [mu, -mu]])).tolist() == [[1, 0]]
    with pytest.raises(ms.InvalidParameterError, match="free symbols"):
        ms.to_jax_function(lam * mu, [lam])
    Q = sympy.Matrix([[-lam, lam], [0, 0]])
    with pytest.raises(ms.InvalidParameterError, match="p0 sums to"):
        ms.symbolic_mean_time_to_absorption(Q, [sympy.Rational(1, 2), 0], [1])
    with pytest.raises(ms.InvalidParameterError, match="empty set"):
        ms.symbolic_mean_time_to_absorption(Q, [1, 0], [])
    with pytest.raises(ms.InvalidParameterError, match="infinite"):
        ms.symbolic_mean_time_to_absorption(sympy.Matrix([[-lam, lam, 0], [0, 0, 0], [0, 0, 0]]), [1, 0, 0], [2])
