"""Transient analysis against independent references.

References: the 2-state closed form (p(t) and its integral, exact), scipy.linalg.expm and
scipy.sparse.linalg.expm_multiply (safe horizons), the augmented-matrix identity
expm([[Q, I], [0, 0]] t) = [[e^{Qt}, int_0^t e^{Qs} ds], [0, I]], numpy matrix powers for
DTMCs, and the stationary distribution for long horizons (hypothesis).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from hypothesis import given
from hypothesis import strategies as st

import markovsim as ms

YEAR = ms.YEAR


def two_state(a, b):
    return np.array([[-a, a], [b, -b]])


def two_state_exact(a, b, t):
    """p(t) and int_0^t p(s) ds from state 0 (exact)."""
    s = a + b
    decay = np.exp(-s * t)
    p1 = a / s * -np.expm1(-s * t)
    L1 = a / s * t - a / s**2 * -np.expm1(-s * t)
    return np.array([1 - p1, p1]), np.array([t - L1, L1]), decay


BACKENDS = {
    "numpy": lambda Q: Q,
    "sparse": lambda Q: sp.csr_matrix(Q),
    "jax": lambda Q: jnp.asarray(Q),
}
METHODS = {"auto": None, "squaring": ms.Squaring(), "uniformization": ms.Uniformization()}


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("t", [0.0, 1e-3, 0.3, 2.0, 40.0, 1e7])
def test_two_state_closed_form(backend, method, t):
    a, b = 3.0, 5.0
    Q = BACKENDS[backend](two_state(a, b))
    p0 = np.array([1.0, 0.0])
    p_ex, L_ex, _ = two_state_exact(a, b, t)
    p = ms.transient_distribution(Q, p0, t, method=METHODS[method])
    L = ms.expected_time_in_states(Q, p0, t, method=METHODS[method])
    assert isinstance(p, jax.Array) == (backend == "jax")
    # 1e-13: a few ulps per step over up to ~40 squarings (or 1e8 vector steps bounded by tol)
    np.testing.assert_allclose(np.asarray(p), p_ex, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(L), L_ex, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_stiff_two_state_over_a_year(backend):
    # failure 1e-9/s, repair 1e3/s: Lambda t ~ 3e10; the down probability is ~1e-12
    a, b = 1e-9, 1e3
    p = ms.transient_distribution(BACKENDS[backend](two_state(a, b)), np.array([1.0, 0.0]), YEAR)
    p_ex, _, _ = two_state_exact(a, b, YEAR)
    np.testing.assert_allclose(np.asarray(p)[1], p_ex[1], rtol=1e-9)


def random_generator(rng, n, low=0.1, high=10.0, density=1.0):
    R = rng.uniform(low, high, size=(n, n)) * (rng.uniform(size=(n, n)) < density)
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_against_scipy_expm_and_augmented_integral(backend):
    rng = np.random.default_rng(7)
    n = 5
    Q = random_generator(rng, n, density=0.6)
    p0 = rng.dirichlet(np.ones(n))
    aug = np.zeros((2 * n, 2 * n))
    aug[:n, :n] = Q
    aug[:n, n:] = np.eye(n)
    ts = np.array([0.05, 0.7, 3.0])  # ||Q t|| <= ~100: expm is safe here
    p = ms.transient_distribution(BACKENDS[backend](Q), p0, ts)
    L = ms.expected_time_in_states(BACKENDS[backend](Q), p0, ts)
    assert np.asarray(p).shape == (3, n)
    for k, t in enumerate(ts):
        E = scipy.linalg.expm(aug * t)
        np.testing.assert_allclose(np.asarray(p)[k], p0 @ E[:n, :n], rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(np.asarray(L)[k], p0 @ E[:n, n:], rtol=1e-11, atol=1e-14)
    r = rng.normal(size=n)
    acc = ms.accumulated_reward(BACKENDS[backend](Q), p0, ts, r)
    np.testing.assert_allclose(np.asarray(acc), np.asarray(L) @ r, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("steps", [0, 1, 5, 37])
def test_dtmc_against_matrix_powers(backend, steps):
    P = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    p0 = np.array([0.2, 0.0, 0.8])
    chain = ms.DTMC(BACKENDS[backend](P))
    p = ms.transient_distribution(chain, p0, steps)
    visits = ms.expected_time_in_states(chain, p0, steps)
    np.testing.assert_allclose(np.asarray(p), p0 @ np.linalg.matrix_power(P, steps), rtol=1e-12, atol=1e-15)
    brute = sum((p0 @ np.linalg.matrix_power(P, k) for k in range(steps)), np.zeros(3))
    np.testing.assert_allclose(np.asarray(visits), brute, rtol=1e-12, atol=1e-14)


def test_periodic_dtmc_does_not_stop_early():
    # period 2: v_k alternates, the steady-state stop must not trigger
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    for steps in (10, 11):
        p = ms.transient_distribution(ms.DTMC(sp.csr_matrix(P)), np.array([1.0, 0.0]), steps)
        np.testing.assert_array_equal(p, [1.0, 0.0] if steps % 2 == 0 else [0.0, 1.0])


def repairable_cluster(n):
    """Birth-death chain of a cluster of n-1 nodes: k failed, failure 1/(5 years) per node,
    two repair crews at 1 per minute: ||Q t|| over a year is ~2e6 (jax expm gives NaN)."""
    N = n - 1
    lam, mu, crews = 1.0 / (5 * YEAR), 1.0 / 60.0, 2
    up = (N - np.arange(n - 1)) * lam
    down = np.minimum(np.arange(1, n), crews) * mu
    Q = sp.diags([up, down], [1, -1], shape=(n, n)).tocsr()
    return (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()


@pytest.mark.slow
def test_thousand_states_over_one_year_no_nan_and_agrees_with_scipy():
    n = 1000
    Q = repairable_cluster(n)
    p0 = np.zeros(n)
    p0[0] = 1.0
    # a genuinely transient horizon: scipy's expm_multiply (Al-Mohy & Higham)
    hour = 3600.0
    ref_hour = spla.expm_multiply(Q.T.tocsc() * hour, p0)
    np.testing.assert_allclose(ms.transient_distribution(Q, p0, hour), ref_hour, rtol=1e-9, atol=1e-14)
    # one year: scipy.linalg.expm (Pade, scaling and squaring) as the reference
    ref_year = p0 @ scipy.linalg.expm(Q.toarray() * YEAR)
    pi = ms.stationary_distribution(Q.toarray())
    big = pi > 1e-250
    for M in (Q, Q.toarray(), jnp.asarray(Q.toarray())):
        p = np.asarray(ms.transient_distribution(M, p0, YEAR))
        assert np.isfinite(p).all()
        assert abs(p.sum() - 1.0) < 1e-12 and (p >= 0).all()
        # scipy's own error here is ~3e-11 relative (it disagrees with the stationary
        # distribution by that much); 1e-9 leaves room for it
        np.testing.assert_allclose(p, ref_year, rtol=1e-9, atol=1e-300)
        # a year is ~5e5 repair times: p(t) is the stationary distribution, to every digit
        # of the entries above the underflow range (GTH is entrywise accurate)
        np.testing.assert_allclose(p[big], pi[big], rtol=1e-13)


@given(
    n=st.integers(2, 6),
    seed=st.integers(0, 2**32 - 1),
    density=st.floats(0.3, 1.0),
)
def test_transient_tends_to_stationary(n, seed, density):
    rng = np.random.default_rng(seed)
    R = rng.uniform(0.1, 10.0, size=(n, n)) * (rng.uniform(size=(n, n)) < density)
    R[np.arange(n), (np.arange(n) + 1) % n] = rng.uniform(0.1, 10.0, size=n)  # a cycle: irreducible
    np.fill_diagonal(R, 0.0)
    Q = R - np.diag(R.sum(axis=1))
    p0 = rng.dirichlet(np.ones(n))
    pi = ms.stationary_distribution(Q)
    # relaxation time <= ~n^2/0.1 s; 1e4 s is many of them
    for method in (ms.Uniformization(), None):
        p = ms.transient_distribution(Q, p0, 1e4, method=method)
        assert (p >= 0).all()
        np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-13)
        np.testing.assert_allclose(p, pi, rtol=1e-8, atol=1e-12)
    L = ms.expected_time_in_states(Q, p0, 1e4, method=ms.Uniformization())
    np.testing.assert_allclose(L.sum(), 1e4, rtol=1e-12)


# ----------------------------------------------------------------------------- JAX transformations


def _q3(theta):
    a, b, c, d = theta
    return jnp.array([[-a, a, 0.0], [b, -(b + c), c], [d, 0.0, -d]])


P0_3 = jnp.array([0.6, 0.4, 0.0])


def test_eager_jit_vmap_agree():
    theta = jnp.array([1.0, 2.0, 0.5, 3.0])
    ts = jnp.array([0.1, 1.0, 30.0])

    def f(th, t):
        return ms.transient_distribution(_q3(th), P0_3, t), ms.expected_time_in_states(_q3(th), P0_3, t)

    eager = [f(theta, t) for t in ts]
    jitted = jax.jit(f)
    vmapped = jax.jit(jax.vmap(f, in_axes=(None, 0)))(theta, ts)
    for k, t in enumerate(ts):
        for i in range(2):
            np.testing.assert_allclose(jitted(theta, t)[i], eager[k][i], rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(vmapped[i][k], eager[k][i], rtol=1e-13, atol=1e-15)
    # a traced 1-D t inside jit is vmapped; the concrete 1-D t loops: same answers
    np.testing.assert_allclose(jax.jit(lambda t: ms.transient_distribution(_q3(theta), P0_3, t))(ts),
                               ms.transient_distribution(_q3(theta), P0_3, ts), rtol=1e-13, atol=1e-15)
    # a batch of chains
    thetas = jnp.stack([theta, theta * 2.0])
    batch = jax.jit(jax.vmap(lambda th: ms.transient_distribution(_q3(th), P0_3, 2.0)))(thetas)
    for k in range(2):
        one = ms.transient_distribution(np.asarray(_q3(thetas[k])), np.asarray(P0_3), 2.0)
        np.testing.assert_allclose(batch[k], one, rtol=1e-12)


def test_second_jitted_call_does_not_retrace():
    traces = []

    @jax.jit
    def f(th, t):
        traces.append(1)
        return ms.transient_distribution(_q3(th), P0_3, t)

    theta = jnp.array([1.0, 2.0, 0.5, 3.0])
    f(theta, 1.0)
    f(theta * 3.0, 1e6)  # a different number of squarings: still the same compiled code
    assert len(traces) == 1


def test_gradient_matches_finite_differences_and_kolmogorov():
    from jax.test_util import check_grads

    theta = jnp.array([1.0, 2.0, 0.5, 3.0])
    check_grads(jax.jit(lambda th: ms.accumulated_reward(_q3(th), P0_3, 1.5, jnp.array([1.0, 0.3, 0.0]))),
                (theta,), order=1, modes=("rev",))
    # d p(t) / dt = p(t) Q (forward equation), exactly
    t = jnp.asarray(0.8)
    dp = jax.jit(jax.jacfwd(lambda t: ms.transient_distribution(_q3(theta), P0_3, t)))(t)
    np.testing.assert_allclose(dp, ms.transient_distribution(_q3(theta), P0_3, t) @ _q3(theta), rtol=1e-12, atol=1e-14)


def test_traced_horizon_beyond_max_squarings_is_nan_and_concrete_raises():
    Q = _q3(jnp.array([1.0, 2.0, 0.5, 3.0]))
    out = jax.jit(lambda t: ms.transient_distribution(Q, P0_3, t, method=ms.Squaring(max_squarings=4)))(1e3)
    assert np.isnan(np.asarray(out)).all()
    with pytest.raises(ms.SolverError, match="max_squarings"):
        ms.transient_distribution(Q, P0_3, 1e3, method=ms.Squaring(max_squarings=4))


# ----------------------------------------------------------------------------- bad input


Q2 = two_state(1.0, 2.0)


@pytest.mark.parametrize(
    "p0, t, match",
    [
        ([1.0, 0.0], -1.0, "t=-1.0: expected a time >= 0"),
        ([1.0, 0.0], np.nan, "expected a finite time"),
        ([1.0, 0.0], [1.0, -2.0], r"t\[1\]=-2.0"),
        ([0.5, 0.4], 1.0, "p0 sums to 0.9"),
        ([1.0, 0.0, 0.0], 1.0, r"p0: got shape \(3,\), expected \(2,\)"),
        ([1.5, -0.5], 1.0, r"p0\[1\]=-0.5"),
        ([1.0, 0.0], [[1.0]], "scalar or a 1-D array"),
    ],
)
def test_bad_parameters(p0, t, match):
    with pytest.raises(ms.InvalidParameterError, match=match):
        ms.transient_distribution(Q2, p0, t)


def test_bad_chain_rewards_and_method():
    with pytest.raises(ms.InvalidChainError, match="row 0 sums to"):
        ms.transient_distribution(np.array([[-1.0, 2.0], [1.0, -1.0]]), [1.0, 0.0], 1.0)
    with pytest.raises(ms.InvalidParameterError, match="whole steps"):
        ms.transient_distribution(ms.DTMC(np.eye(2)), [1.0, 0.0], 1.5)
    with pytest.raises(ms.InvalidParameterError, match=r"rewards: got shape \(3,\)"):
        ms.accumulated_reward(Q2, [1.0, 0.0], 1.0, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="method"):
        ms.transient_distribution(Q2, [1.0, 0.0], 1.0, method="expm")
    with pytest.raises(TypeError, match="Uniformization"):
        jax.jit(lambda Q: ms.transient_distribution(Q, jnp.array([1.0, 0.0]), 1.0,
                                                    method=ms.Uniformization()))(jnp.asarray(Q2))
