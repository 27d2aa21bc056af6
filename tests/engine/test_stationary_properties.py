"""Property tests of the stationary solvers on random irreducible chains (hypothesis).

Invariants: pi >= 0, sums to 1, small normalised residual |pi Q|; the DTMC of a
uniformised chain has the same pi; every path agrees; eager == jit == vmap; gradients
match finite differences (both GTH code paths: unrolled for n <= 24, fori_loop above);
a second jitted call does not recompile; a large batched value-and-grad completes.
"""

from __future__ import annotations

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from jax.test_util import check_grads

import markovsim as ms

# ----------------------------------------------------------------------------- strategy


@st.composite
def irreducible_generators(draw, *, n: int | None = None, min_states: int = 2, max_states: int = 8,
                           log10_rates: tuple[float, float] = (-3.0, 3.0), density: float | None = None):
    """Generators ``Q`` (numpy, float64) of random irreducible CTMCs.

    A random Hamiltonian cycle (a permutation of the states) makes every chain
    irreducible; other off-diagonal rates are present with probability ``density``
    (drawn when None). Rates are log-uniform in ``10**log10_rates`` per second.
    (Candidate for a public ``markovsim.testing`` strategy.)
    """
    if n is None:
        n = draw(st.integers(min_states, max_states))
    lo, hi = log10_rates
    exps = draw(arrays(np.float64, (n, n), elements=st.floats(lo, hi, allow_nan=False)))
    if density is None:
        density = draw(st.sampled_from([0.0, 0.3, 1.0]))
    mask = draw(arrays(np.float64, (n, n), elements=st.floats(0.0, 1.0))) < density
    cycle = draw(st.permutations(range(n)))
    R = np.where(mask, 10.0**exps, 0.0)
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        if a != b:
            R[a, b] = 10.0 ** exps[a, b]
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


def _residual(pi, Q) -> float:
    pi = np.asarray(pi)
    return float(np.abs(pi @ Q).sum() / (np.abs(pi) @ np.abs(Q)).sum())


# ----------------------------------------------------------------------------- invariants

INPUTS = {
    "numpy": lambda Q: Q,
    "jax": jnp.asarray,
    "sparse-direct": sp.csr_matrix,
}
METHODS = {"numpy": None, "jax": None, "sparse-direct": ms.SparseDirect()}


@pytest.mark.parametrize("kind", list(INPUTS))
@given(Q=irreducible_generators(max_states=12))
def test_pi_is_a_stationary_distribution(kind, Q):
    pi = np.asarray(ms.stationary_distribution(INPUTS[kind](Q), method=METHODS[kind]))
    assert pi.shape == (Q.shape[0],)
    assert (pi >= 0).all()
    assert abs(pi.sum() - 1.0) <= 1e-13
    assert _residual(pi, Q) <= 1e-13


@given(Q=irreducible_generators(max_states=10))
def test_uniformised_dtmc_has_the_same_pi(Q):
    q = 1.25 * float(-Q.diagonal().min())
    P = np.eye(Q.shape[0]) + Q / q
    P = P / P.sum(axis=1, keepdims=True)  # exact row sums despite rounding
    pi_dtmc = ms.stationary_distribution(ms.DTMC(P))
    pi_ctmc = ms.stationary_distribution(Q)
    np.testing.assert_allclose(pi_dtmc, pi_ctmc, rtol=1e-11, atol=0)
    assert np.abs(pi_dtmc @ P - pi_dtmc).sum() <= 1e-14


@given(Q=irreducible_generators(max_states=12))
def test_sparse_direct_agrees_with_gth(Q):
    """Two algorithms (pinned LU vs GTH): normwise agreement, and componentwise on the
    probabilities above 1e-8 (LU carries no componentwise guarantee on tiny ones)."""
    a = ms.stationary_distribution(Q, method=ms.GTH())
    b = ms.stationary_distribution(sp.csr_matrix(Q), method=ms.SparseDirect())
    assert np.abs(a - b).sum() <= 1e-12
    big = a > 1e-8
    np.testing.assert_allclose(b[big], a[big], rtol=1e-8)


# ----------------------------------------------------------------------------- eager == jit == vmap

_jit = jax.jit(ms.stationary_distribution)
_vmap = jax.jit(jax.vmap(ms.stationary_distribution))


@pytest.mark.parametrize("n", [3, 7, 30], ids=lambda n: f"n={n}")
@settings(max_examples=10)
@given(data=st.data())
def test_eager_jit_vmap_agree(n, data):
    """n=30 runs the fori_loop GTH, the others the unrolled one."""
    Qs = [data.draw(irreducible_generators(n=n), label=f"Q{i}") for i in range(3)]
    batch = jnp.asarray(np.stack(Qs))
    vm = np.asarray(_vmap(batch))
    for i, Q in enumerate(Qs):
        eager = np.asarray(ms.stationary_distribution(jnp.asarray(Q)))
        jitted = np.asarray(_jit(jnp.asarray(Q)))
        numpy = ms.stationary_distribution(Q)
        np.testing.assert_allclose(jitted, eager, rtol=1e-12, atol=0)
        np.testing.assert_allclose(vm[i], eager, rtol=1e-12, atol=0)
        np.testing.assert_allclose(numpy, eager, rtol=1e-11, atol=0)


# ----------------------------------------------------------------------------- gradients


def test_gradient_of_two_state_chain_matches_closed_form():
    """pi_down = lam / (lam + mu): d/dlam = mu / (lam + mu)^2, d/dmu = -lam / (lam + mu)^2."""
    lam, mu = 3e-4, 2e-2

    def down(rates):
        l, m = rates
        Q = jnp.array([[-l, l], [m, -m]])
        return ms.stationary_distribution(Q)[1]

    g = np.asarray(jax.grad(down)(jnp.array([lam, mu])))
    np.testing.assert_allclose(g, [mu / (lam + mu) ** 2, -lam / (lam + mu) ** 2], rtol=1e-13)


_pi_jit = jax.jit(ms.stationary_distribution)


@pytest.mark.parametrize("n", [2, 5, 12, 25, 32], ids=lambda n: f"n={n}")
@settings(max_examples=5)
@given(data=st.data())
def test_gradient_matches_finite_differences(n, data):
    """check_grads in forward and reverse mode; n <= 24 unrolled GTH, n >= 25 fori_loop
    (n = 24 itself works too but its unrolled reverse-mode compile costs ~9 s here).

    Rates in [0.1, 10] keep every rate positive under the finite-difference steps. The
    step is 1e-6 rather than check_grads' 1e-4: its random direction has norm ~n, and at
    n=32 the O(step^2) truncation error of the central difference reached 1.5e-3 relative
    (the JVP itself agrees with the two-state closed form to 1e-13, test above)."""
    Q = data.draw(irreducible_generators(n=n, log10_rates=(-1.0, 1.0)))
    check_grads(_pi_jit, (jnp.asarray(Q),), order=1, modes=("fwd", "rev"), eps=1e-6)


# ----------------------------------------------------------------------------- no recompilation


@pytest.fixture
def compile_counter():
    """Number of XLA backend compilations since the fixture started (jax.monitoring)."""
    events: list[str] = []

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            events.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield lambda: len(events)
    jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.parametrize("n", [6, 40], ids=lambda n: f"n={n}")
def test_second_jitted_call_does_not_recompile(n, compile_counter):
    rng = np.random.default_rng(n)
    Q1, Q2 = (jnp.asarray(_random_generator(rng, n)) for _ in range(2))
    traces = []

    @jax.jit
    def f(Q):
        traces.append(1)  # runs only while tracing
        return ms.stationary_distribution(Q)

    f(Q1).block_until_ready()
    compiled = compile_counter()
    f(Q2).block_until_ready()
    assert len(traces) == 1
    assert compile_counter() == compiled

    batched = jax.jit(jax.vmap(ms.stationary_distribution))
    batched(jnp.stack([Q1, Q2])).block_until_ready()
    compiled = compile_counter()
    batched(jnp.stack([Q2, Q1])).block_until_ready()
    assert compile_counter() == compiled


def test_host_wrapper_does_not_recompile(compile_counter):
    """The eager public call (validation on the host, then compiled GTH) compiles once."""
    rng = np.random.default_rng(1)
    Q1, Q2 = (jnp.asarray(_random_generator(rng, 9)) for _ in range(2))
    ms.stationary_distribution(Q1)
    compiled = compile_counter()
    ms.stationary_distribution(Q2)
    assert compile_counter() == compiled


def _random_generator(rng, n):
    R = rng.exponential(size=(n, n))
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


# ----------------------------------------------------------------------------- large batches


def test_batched_value_and_grad_over_2000_chains_completes():
    """One jit(vmap(value_and_grad)) call over 2,000 16-state chains (a hang was reported
    for 10k-100k; not reproduced here up to 100k x 16 states and 10k x 32 states). Each
    gradient is checked against the one of the same chain computed alone."""
    rng = np.random.default_rng(7)
    n, batch = 16, 2000
    Q = jnp.asarray(np.stack([_random_generator(rng, n) for _ in range(batch)]))
    reward = jnp.asarray(rng.random(n))

    def reward_rate(Q):
        return ms.stationary_distribution(Q) @ reward

    values, grads = jax.jit(jax.vmap(jax.value_and_grad(reward_rate)))(Q)
    jax.block_until_ready((values, grads))
    assert values.shape == (batch,) and grads.shape == (batch, n, n)
    assert np.isfinite(np.asarray(grads)).all()
    single = jax.jit(jax.value_and_grad(reward_rate))
    for i in (0, 999, batch - 1):
        v, g = single(Q[i])
        np.testing.assert_allclose(values[i], v, rtol=1e-12)
        np.testing.assert_allclose(grads[i], g, rtol=1e-9, atol=1e-14)


# ----------------------------------------------------------------------------- the chunked batching rule


@pytest.mark.parametrize("batch,chunk_bytes", [(6, 3 * 8 * 8 * 8), (7, 2 * 8 * 8 * 8), (5, 10 * 2**20)],
                         ids=["dividing chunks", "chunks with a remainder", "one chunk"])
def test_vmap_in_chunks_matches_each_chain_alone(batch, chunk_bytes, monkeypatch):
    """Under vmap small chains are solved by lax.map over chunks (markovsim.engine._stationary);
    whatever the chunking, every chain gets the answer it gets alone, and derivatives too."""
    from markovsim.engine import _stationary

    monkeypatch.setattr(_stationary, "_BATCH_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(batch)
    Q = jnp.asarray(np.stack([_random_generator(rng, 8) for _ in range(batch)]))
    alone = np.stack([np.asarray(_pi_jit(Q[i])) for i in range(batch)])
    np.testing.assert_allclose(jax.jit(jax.vmap(ms.stationary_distribution))(Q), alone, rtol=1e-13)
    # nested vmap, and vmap with the chain axis last
    nested = jax.jit(jax.vmap(jax.vmap(ms.stationary_distribution)))(jnp.stack([Q, Q[::-1]]))
    np.testing.assert_allclose(nested[0], alone, rtol=1e-13)
    np.testing.assert_allclose(nested[1], alone[::-1], rtol=1e-13)
    last = jax.jit(jax.vmap(ms.stationary_distribution, in_axes=2))(jnp.moveaxis(Q, 0, 2))
    np.testing.assert_allclose(last, alone, rtol=1e-13)
    # gradients under vmap (reverse) and forward-mode Jacobians
    w = jnp.asarray(rng.random(8))
    grads = jax.jit(jax.vmap(jax.grad(lambda q: ms.stationary_distribution(q) @ w)))(Q)
    jac = jax.jit(jax.vmap(jax.jacfwd(ms.stationary_distribution)))(Q)
    alone_grad = jax.jit(jax.grad(lambda q: ms.stationary_distribution(q) @ w))  # one chain, no vmap
    for i in range(batch):
        g1 = alone_grad(Q[i])
        np.testing.assert_allclose(grads[i], g1, rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(jnp.einsum("jkl,j->kl", jac[i], w), g1, rtol=1e-10, atol=1e-15)


def test_chunk_size_divides_the_batch_when_it_can():
    from markovsim.engine._stationary import _chunk_size

    assert _chunk_size(100_000, 5120) == 5000
    assert _chunk_size(300, 5120) == 300
    assert _chunk_size(7, 2) == 2  # 7 is prime: chunks of 2 and a remainder
    for batch, top in [(12_345, 1000), (65_536, 5120), (99_991, 4000)]:
        size = _chunk_size(batch, top)
        assert size <= top and (batch % size == 0 or size == top)
