"""First passage and absorption against closed forms, sympy and brute-force solves.

References: exponential and k-out-of-n MTTF (sum of exponential stage means), the
repairable 1-out-of-2 system (3 lam + mu) / (2 lam^2), the M/M/1 busy period k / (mu - lam),
the gambler's ruin, the geometric number of DTMC steps, sympy exact rationals, and
numpy.linalg.solve of each first-passage system on well-conditioned chains.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import markovsim as ms

BACKENDS = {
    "numpy": lambda Q: Q,
    "sparse": lambda Q: sp.csr_matrix(Q),
    "jax": lambda Q: jnp.asarray(Q),
}


def repairable_pair(lam, mu):
    """Two units, one repair crew; state = number failed; state 2 (both down) absorbing."""
    return np.array([[-2 * lam, 2 * lam, 0.0], [mu, -(lam + mu), lam], [0.0, 0.0, 0.0]])


def k_out_of_n(n, lam):
    """n units without repair, state = number failed, failure rate (n - i) lam."""
    Q = np.zeros((n + 1, n + 1))
    for i in range(n):
        Q[i, i + 1] = (n - i) * lam
        Q[i, i] = -(n - i) * lam
    return Q


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("lam, mu", [(1e-3, 1.0), (1e-9, 1e3), (2.0, 0.5)])
def test_repairable_pair_closed_form(backend, lam, mu):
    Q = BACKENDS[backend](repairable_pair(lam, mu))
    exact = (3 * lam + mu) / (2 * lam**2)
    m = ms.mean_time_to_absorption(Q, np.array([1.0, 0.0, 0.0]), [2])
    assert isinstance(m, jax.Array) == (backend == "jax")
    # stiff case (MTTF 5e20 s from rates 1e-9 and 1e3): the subtraction-free elimination
    # keeps every digit; numpy.linalg.solve loses ~1e-4 here
    np.testing.assert_allclose(float(m), exact, rtol=1e-13)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_k_out_of_n_and_exponential(backend):
    lam = 1.0 / (3 * ms.YEAR)
    n, k = 6, 2  # system works while at least k units work: down after n - k + 1 failures
    Q = k_out_of_n(n, lam)
    down = list(range(n - k + 1, n + 1))
    p0 = np.eye(n + 1)[0]
    exact = sum(1.0 / (i * lam) for i in range(k, n + 1))
    np.testing.assert_allclose(float(ms.mean_time_to_absorption(BACKENDS[backend](Q), p0, down)), exact, rtol=1e-14)
    mask = np.zeros(n + 1, dtype=bool)
    mask[down] = True  # boolean mask, same answer
    np.testing.assert_allclose(float(ms.mean_time_to_absorption(BACKENDS[backend](Q), p0, mask)), exact, rtol=1e-14)
    # one unit: exponential, mean 1 / lam
    one = np.array([[-lam, lam], [0.0, 0.0]])
    np.testing.assert_allclose(float(ms.mean_time_to_absorption(BACKENDS[backend](one), [1.0, 0.0], [1])), 1 / lam, rtol=1e-15)


def test_mm1_busy_period_sparse_large():
    # M/M/1 truncated far out (rho^K ~ 1e-300): time to empty from k is k / (mu - lam)
    lam, mu, K = 1.0, 2.0, 1000
    up = np.full(K, lam)
    down = np.full(K, mu)
    Q = sp.diags([up, down], [1, -1], shape=(K + 1, K + 1)).tocsr()
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    m = ms.mean_first_passage_times(Q, [0])
    np.testing.assert_allclose(m[:50], np.arange(50) / (mu - lam), rtol=1e-10)
    p0 = np.zeros(K + 1)
    p0[5] = 1.0
    np.testing.assert_allclose(ms.mean_time_to_absorption(Q, p0, [0]), 5.0, rtol=1e-10)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_dtmc_geometric_and_gamblers_ruin(backend):
    p = 0.3
    geo = ms.DTMC(BACKENDS[backend](np.array([[1 - p, p], [0.0, 1.0]])))
    np.testing.assert_allclose(float(ms.mean_time_to_absorption(geo, [1.0, 0.0], [1])), 1 / p, rtol=1e-14)
    N, q = 8, 0.45  # random walk up with probability q on 0..N, absorbed at 0 and N
    P = np.zeros((N + 1, N + 1))
    P[0, 0] = P[N, N] = 1.0
    for i in range(1, N):
        P[i, i + 1], P[i, i - 1] = q, 1 - q
    H = np.asarray(ms.absorption_probabilities(ms.DTMC(BACKENDS[backend](P)), [0, N]))
    r = (1 - q) / q
    win = (1 - r ** np.arange(N + 1)) / (1 - r**N)
    np.testing.assert_allclose(H[:, 1], win, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(H.sum(axis=1), 1.0, rtol=1e-14)
    # expected duration of the game, classical formula
    i = np.arange(N + 1)
    duration = i / (1 - 2 * q) - N / (1 - 2 * q) * win
    m = ms.mean_first_passage_times(ms.DTMC(BACKENDS[backend](P)), [0, N])
    np.testing.assert_allclose(np.asarray(m), duration, rtol=1e-12, atol=1e-12)


def random_irreducible(rng, n):
    R = rng.uniform(0.2, 5.0, size=(n, n)) * (rng.uniform(size=(n, n)) < 0.6)
    R[np.arange(n), (np.arange(n) + 1) % n] = rng.uniform(0.2, 5.0, size=n)
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_first_passage_matrix_against_direct_solves(backend):
    rng = np.random.default_rng(3)
    n = 5
    Q = random_irreducible(rng, n)
    M = np.asarray(ms.mean_first_passage_times(BACKENDS[backend](Q)))
    for j in range(n):
        keep = np.arange(n) != j
        col = np.zeros(n)
        col[keep] = np.linalg.solve(-Q[np.ix_(keep, keep)], np.ones(n - 1))
        np.testing.assert_allclose(M[:, j], col, rtol=1e-12)
    # Kac: the mean return time to j, 1/q_j + sum_k q_jk/q_j M_kj, equals 1 / (pi_j q_j)
    pi = ms.stationary_distribution(Q)
    q = -np.diag(Q)
    ret = 1 / q + (Q - np.diag(np.diag(Q))) @ M / q[:, None]
    np.testing.assert_allclose(np.diag(ret), 1 / (pi * q), rtol=1e-12)


def test_absorption_probabilities_and_infinite_passage_on_reducible_chain():
    # 0 -> 1 (rate 1), 0 -> 2 (rate 3); 1 <-> 3 closed class; 2 absorbing
    Q = np.array([[-4.0, 1.0, 3.0, 0.0], [0.0, -1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, -2.0]])
    for backend in BACKENDS:
        H = np.asarray(ms.absorption_probabilities(BACKENDS[backend](Q), [2]))
        np.testing.assert_allclose(H[:, 0], [0.75, 0.0, 1.0, 0.0], rtol=1e-15)
        m = np.asarray(ms.mean_first_passage_times(BACKENDS[backend](Q), [2]))
        assert np.isinf(m[[0, 1, 3]]).all() and m[2] == 0.0
        M = np.asarray(ms.mean_first_passage_times(BACKENDS[backend](Q)))
        np.testing.assert_allclose([M[1, 3], M[3, 1]], [1.0, 0.5], rtol=1e-15)
        assert np.isinf(M[1, 0]) and np.isinf(M[3, 2])
    with pytest.raises(ms.InvalidParameterError, match="absorption is not certain"):
        ms.mean_time_to_absorption(Q, [1.0, 0, 0, 0], [2])
    # from a start that surely ends in 2 the mean is finite
    Q2 = Q.copy()
    Q2[0] = [-3.0, 0.0, 3.0, 0.0]
    assert ms.mean_time_to_absorption(Q2, [1.0, 0, 0, 0], [2]) == pytest.approx(1 / 3, rel=1e-15)


def test_against_sympy_exact_rationals():
    lam, mu = sympy.Rational(1, 1000), sympy.Rational(3, 7)
    Qs = sympy.Matrix([[-3 * lam, 3 * lam, 0, 0], [mu, -(mu + 2 * lam), 2 * lam, 0],
                       [0, 2 * mu, -(2 * mu + lam), lam], [0, 0, 0, 0]])
    exact = ms.symbolic_mean_time_to_absorption(Qs, [1, 0, 0, 0], [3])
    assert exact.is_Rational
    Qn = np.array(Qs.evalf(30).tolist(), dtype=float)
    for backend in BACKENDS:
        got = float(ms.mean_time_to_absorption(BACKENDS[backend](Qn), [1.0, 0, 0, 0], [3]))
        assert abs(Fraction(got) - Fraction(int(exact.p), int(exact.q))) <= Fraction(1, 10**12) * Fraction(got)


# ----------------------------------------------------------------------------- JAX transformations


def _q(theta):
    lam, mu, nu = theta
    return jnp.array([[-2 * lam, 2 * lam, 0.0], [mu, -(lam + mu + nu), lam + nu], [0.0, 0.0, 0.0]])


def test_eager_jit_vmap_and_gradients():
    from jax.test_util import check_grads

    p0 = jnp.array([0.7, 0.3, 0.0])

    def mtta(theta):
        return ms.mean_time_to_absorption(_q(theta), p0, [2])

    thetas = jnp.array([[0.1, 2.0, 0.05], [1.0, 0.5, 0.0], [3e-4, 10.0, 1e-5]])
    eager = jnp.stack([mtta(t) for t in thetas])
    np.testing.assert_allclose(jax.jit(mtta)(thetas[0]), eager[0], rtol=1e-14)
    np.testing.assert_allclose(jax.jit(jax.vmap(mtta))(thetas), eager, rtol=1e-14)
    check_grads(jax.jit(mtta), (jnp.array([0.5, 2.0, 0.3]),), order=1, modes=("rev",))
    # and against the closed form's derivative: d/dlam (3 lam + mu) / (2 lam^2) with nu = 0
    lam, mu = 0.2, 1.5
    g = jax.grad(lambda th: ms.mean_time_to_absorption(_q(th), jnp.array([1.0, 0, 0]), [2]))(jnp.array([lam, mu, 0.0]))
    np.testing.assert_allclose(g[0], -(3 * lam + 2 * mu) / (2 * lam**3), rtol=1e-12)
    np.testing.assert_allclose(g[1], 1 / (2 * lam**2), rtol=1e-12)
    # absorption probabilities and first-passage matrix under vmap
    H = jax.jit(jax.vmap(lambda th: ms.absorption_probabilities(_q(th), [2])))(thetas)
    np.testing.assert_allclose(H, 1.0, rtol=1e-14)
    M = jax.jit(ms.mean_first_passage_times)(jnp.asarray(random_irreducible(np.random.default_rng(1), 4)))
    np.testing.assert_allclose(M, ms.mean_first_passage_times(random_irreducible(np.random.default_rng(1), 4)), rtol=1e-13)


# ----------------------------------------------------------------------------- bad input


def test_bad_input():
    Q = repairable_pair(0.1, 1.0)
    p0 = [1.0, 0.0, 0.0]
    with pytest.raises(ms.InvalidParameterError, match="absorbing: empty set"):
        ms.mean_time_to_absorption(Q, p0, [])
    with pytest.raises(ms.InvalidParameterError, match="absorbing: empty set"):
        ms.mean_time_to_absorption(Q, p0, np.zeros(3, dtype=bool))
    with pytest.raises(ms.InvalidParameterError, match="state index 3 is out of range"):
        ms.mean_time_to_absorption(Q, p0, [3])
    with pytest.raises(ms.InvalidParameterError, match=r"boolean mask of shape \(2,\)"):
        ms.mean_time_to_absorption(Q, p0, np.array([True, False]))
    with pytest.raises(ms.InvalidParameterError, match="p0 sums to 0.5"):
        ms.mean_time_to_absorption(Q, [0.5, 0.0, 0.0], [2])
    with pytest.raises(ms.InvalidParameterError, match=r"p0: got shape \(2,\)"):
        ms.mean_time_to_absorption(Q, [1.0, 0.0], [2])
    with pytest.raises(ms.InvalidParameterError, match="state 0, from which the chain can reach state 1, "
                                                        "which cannot reach the absorbing set"):
        ms.mean_time_to_absorption(np.array([[-2.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), p0, [2])
    with pytest.raises(ms.InvalidChainError, match=r"Q\[0, 1\]=-1.0"):
        ms.absorption_probabilities(np.array([[1.0, -1.0], [0.0, 0.0]]), [1])
    with pytest.raises(TypeError, match="concrete"):
        jax.jit(lambda m: ms.mean_time_to_absorption(jnp.asarray(Q), jnp.asarray(p0), m))(jnp.array([False, False, True]))
