"""Long-run reward rates against closed forms, brute force and the transient limit.

References: the 2-state availability model with a rollback impulse (closed form), a
brute-force double loop over transitions with pi from scipy.linalg.null_space, the
limit of accumulated_reward(t) / t, sympy exact rationals.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
import sympy

import markovsim as ms

BACKENDS = {
    "numpy": lambda M: M,
    "sparse": lambda M: sp.csr_matrix(M),
    "jax": lambda M: jnp.asarray(M),
}


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_two_state_availability_with_rollback(backend):
    lam, mu, lost = 1e-4, 1e-2, 600.0  # failures per s, repairs per s, seconds of work lost
    Q = np.array([[-lam, lam], [mu, -mu]])
    C = np.array([[0.0, -lost], [0.0, 0.0]])
    exact = mu / (lam + mu) * (1.0 - lam * lost)
    g = ms.long_run_reward_rate(BACKENDS[backend](Q), np.array([1.0, 0.0]), BACKENDS[backend](C))
    assert isinstance(g, jax.Array) == (backend == "jax")
    np.testing.assert_allclose(float(g), exact, rtol=1e-14)
    # no impulses: availability
    np.testing.assert_allclose(float(ms.long_run_reward_rate(BACKENDS[backend](Q), np.array([1.0, 0.0]))),
                               mu / (lam + mu), rtol=1e-14)


def brute_force(M, r, C, dtmc):
    n = M.shape[0]
    if dtmc:
        pi = scipy.linalg.null_space((M - np.eye(n)).T)[:, 0]
    else:
        pi = scipy.linalg.null_space(M.T)[:, 0]
    pi = pi / pi.sum()
    g = sum(pi[i] * r[i] for i in range(n))
    for i in range(n):
        for j in range(n):
            if i != j or dtmc:
                g += pi[i] * M[i, j] * C[i, j]
    return g


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("kind", ["ctmc", "dtmc"])
def test_against_brute_force(backend, kind):
    rng = np.random.default_rng(11)
    n = 6
    W = rng.uniform(0.1, 3.0, size=(n, n)) * (rng.uniform(size=(n, n)) < 0.7)
    W[np.arange(n), (np.arange(n) + 1) % n] = 1.0
    r = rng.normal(size=n)
    C = rng.normal(size=(n, n))
    if kind == "ctmc":
        np.fill_diagonal(W, 0.0)
        M = W - np.diag(W.sum(axis=1))
        chain = BACKENDS[backend](M)
    else:
        M = W / W.sum(axis=1, keepdims=True)  # self-loops included: they fire too
        chain = ms.DTMC(BACKENDS[backend](M))
    g = ms.long_run_reward_rate(chain, r, C)
    np.testing.assert_allclose(float(g), brute_force(M, r, C, kind == "dtmc"), rtol=1e-12)


def test_limit_of_accumulated_reward():
    rng = np.random.default_rng(5)
    n = 4
    R = rng.uniform(0.5, 2.0, size=(n, n))
    np.fill_diagonal(R, 0.0)
    Q = R - np.diag(R.sum(axis=1))
    r = rng.uniform(size=n)
    g = ms.long_run_reward_rate(Q, r)
    # |acc(t)/t - g| = O(1/t): bias / t with a bias below ~1 here
    t = 1e9
    acc = ms.accumulated_reward(Q, np.eye(n)[0], t, r, method=ms.Uniformization())
    assert abs(acc / t - g) < 1e-8


def test_transient_states_and_sympy_exact():
    # a start-up state 0 leaves for good; the recurrent class {1, 2} carries the reward
    a, b, c = sympy.Rational(2), sympy.Rational(1, 3), sympy.Rational(5, 7)
    Qs = sympy.Matrix([[-a, a, 0], [0, -b, b], [0, c, -c]])
    pi = ms.symbolic_stationary_distribution(sympy.Matrix([[-b, b], [c, -c]]))
    r = [0, 1, 4]
    cost = -3  # impulse each time 1 -> 2 fires
    exact = pi[0] * r[1] + pi[1] * r[2] + pi[0] * b * cost
    Qn = np.array(Qs.tolist(), dtype=float)
    C = np.zeros((3, 3))
    C[1, 2] = cost
    g = ms.long_run_reward_rate(Qn, np.array(r, dtype=float), C)
    np.testing.assert_allclose(g, float(exact), rtol=1e-15)


def test_eager_jit_vmap_and_gradients():
    from jax.test_util import check_grads

    def rate(theta, r, C):
        lam, mu, nu = theta
        Q = jnp.array([[-(lam + nu), lam, nu], [mu, -mu, 0.0], [2 * mu, 0.0, -2 * mu]])
        return ms.long_run_reward_rate(Q, r, C)

    theta = jnp.array([0.3, 1.5, 0.1])
    r = jnp.array([1.0, 0.0, 0.2])
    C = jnp.array([[0.0, -2.0, -0.5], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    thetas = jnp.array([[0.3, 1.5, 0.1], [1.0, 1.0, 1.0], [1e-6, 1e3, 1e-9]])
    eager = jnp.stack([rate(t, r, C) for t in thetas])
    np.testing.assert_allclose(jax.jit(rate)(theta, r, C), eager[0], rtol=1e-14)
    np.testing.assert_allclose(jax.jit(jax.vmap(rate, in_axes=(0, None, None)))(thetas, r, C), eager, rtol=1e-14)
    check_grads(jax.jit(lambda th: rate(th, r, C)), (theta,), order=1, modes=("rev",))
    # linear in the rewards: d g / d r = pi and d g / d C = pi_i q_ij (off the diagonal)
    g_r, g_C = jax.grad(rate, argnums=(1, 2))(theta, r, C)
    Q = np.array([[-0.4, 0.3, 0.1], [1.5, -1.5, 0.0], [3.0, 0.0, -3.0]])
    pi = ms.stationary_distribution(Q)
    np.testing.assert_allclose(g_r, pi, rtol=1e-13)
    np.testing.assert_allclose(g_C, pi[:, None] * (Q - np.diag(np.diag(Q))), rtol=1e-13, atol=1e-16)
    # closed-form derivative of availability mu / (lam + mu) in lam
    g = jax.grad(lambda lam: ms.long_run_reward_rate(jnp.array([[-lam, lam], [2.0, -2.0]]), jnp.array([1.0, 0.0])))(0.5)
    np.testing.assert_allclose(g, -2.0 / 2.5**2, rtol=1e-14)


def test_bad_input():
    Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
    with pytest.raises(ms.InvalidParameterError, match=r"state_rewards: got shape \(3,\)"):
        ms.long_run_reward_rate(Q, [1.0, 0.0, 0.0])
    with pytest.raises(ms.InvalidParameterError, match=r"state_rewards\[1\]=nan"):
        ms.long_run_reward_rate(Q, [1.0, np.nan])
    with pytest.raises(ms.InvalidParameterError, match=r"impulse_rewards: got shape \(2, 3\)"):
        ms.long_run_reward_rate(Q, [1.0, 0.0], np.zeros((2, 3)))
    with pytest.raises(ms.InvalidParameterError, match=r"impulse_rewards\[0, 1\]=inf"):
        ms.long_run_reward_rate(Q, [1.0, 0.0], np.array([[0.0, np.inf], [0.0, 0.0]]))
    with pytest.raises(ms.ReducibleChainError, match="2 recurrent classes"):
        ms.long_run_reward_rate(np.zeros((2, 2)), [1.0, 0.0])
    with pytest.raises(ms.InvalidChainError, match="row 1 sums to"):
        ms.long_run_reward_rate(np.array([[-1.0, 1.0], [2.0, -1.0]]), [1.0, 0.0])
