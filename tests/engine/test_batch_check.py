"""The range check of batched GTH under vmap (issue 14: batched speed without losing the
certificate).

Under ``vmap`` a batch first takes a cheap sufficient test (``_clear_of_range``: smallest
positive entry, largest entry, smallest probability) and runs the exact per-step check
(``_factor_flag``) only when some chain of the batch fails it. Checked here: the cheap
test never clears a chain the exact check flags (on chains with rates across the whole
float64 range, zeros, negative and non-finite entries), and under vmap every chain gets
the status it gets alone, also when the cheap test fails on chains the exact check
passes or flags, in chunks of their own or mixed with clear ones.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import markovsim as ms
from markovsim.engine import _stationary
from markovsim.engine._certify import SMALL


@st.composite
def wild_batches(draw):
    """``(batch, n, n)`` rate matrices: log-uniform rates over the float64 range (1e-320 is
    subnormal), zeros, and now and then a negative, infinite or NaN entry."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(2, 7))
    low = draw(st.sampled_from([-320.0, -300.0, -200.0, -60.0, -3.0]))
    high = draw(st.sampled_from([-250.0, 0.0, 3.0, 150.0, 300.0]))
    rng = np.random.default_rng(seed)
    R = 10.0 ** rng.uniform(low, max(low, high), size=(16, n, n))
    R *= rng.random(R.shape) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    idx = np.arange(n)
    R[:, idx, (idx + 1) % n] = np.maximum(R[:, idx, (idx + 1) % n], 10.0 ** rng.uniform(low, max(low, high), (16, n)))
    if draw(st.booleans()):
        b, i, j = rng.integers(0, 16), rng.integers(0, n), rng.integers(0, n)
        R[b, i, j] = draw(st.sampled_from([-1.0, -1e-300, -0.0, np.inf, np.nan]))
    R[:, idx, idx] = 0.0
    with np.errstate(invalid="ignore"):
        R[:, idx, idx] = -R.sum(axis=-1)
    return R


@given(wild_batches())
def test_the_cheap_test_never_clears_a_chain_the_exact_check_flags(Q):
    Q = jnp.asarray(Q)
    x, A = jax.vmap(lambda q: _stationary._eliminate_unrolled(_stationary._offdiag(q)))(Q)
    clear = np.asarray(_stationary._clear_of_range(A, x))
    exact = np.asarray(jax.vmap(_stationary._factor_flag)(A, x))
    assert not np.any(clear & (exact > 0)), (clear, exact)
    # and a cleared chain is a finite answer with every probability >= SMALL
    assert np.all(np.isfinite(np.asarray(x)[clear])) and np.all(np.asarray(x)[clear] >= SMALL)


def _fine(rng, n=6):
    R = rng.exponential(size=(n, n))
    np.fill_diagonal(R, 0.0)
    return R


def _transient_first(rng, n=6):
    """State 0 has no rate in: pi_0 = 0 exactly, below SMALL, and certified (it feeds no
    other state): the cheap test fails, the exact check passes."""
    R = _fine(rng, n)
    R[:, 0] = 0.0
    return R


def _wide_range(n=6):
    """Rates 1e150 and 1e-100 on a cycle: ratios 1e-250 and products 1e-100 are in range, so
    the exact check passes, but lo / hi (5e-251) is below FLOOR / lo: the cheap test fails."""
    R = np.zeros((n, n))
    for i in range(n - 1):
        R[i, i + 1] = 1e150
        R[i + 1, 0] = 1e-100
    return R


def _underflowing(n=6):
    """The 3-state chain whose elimination creates a rate of 1e-320 (flushed under XLA), with
    states 3..5 hanging off state 2: UNDERFLOW alone."""
    R = np.zeros((n, n))
    R[0, 1], R[0, 2], R[2, 0], R[1, 2] = 1e-160, 1.0, 1e-160, 1e-300
    R[2, 3:] = R[3:, 2] = 1.0
    R[3, 4] = R[4, 5] = R[5, 3] = 2.0
    return R


def _generators(Rs):
    R = np.stack(Rs)
    return jnp.asarray(R - R.sum(axis=-1)[..., None] * np.eye(R.shape[-1]))


@pytest.mark.parametrize("chunk_chains", [2, 3, 100], ids=["chunks of 2", "chunks of 3 and a remainder", "one chunk"])
def test_vmap_status_matches_each_chain_alone_when_the_cheap_test_fails(chunk_chains, monkeypatch):
    monkeypatch.setattr(_stationary, "_BATCH_CHUNK_BYTES", chunk_chains * 6 * 6 * 8)
    rng = np.random.default_rng(3)
    Q = _generators([_fine(rng), _fine(rng), _transient_first(rng), _fine(rng), _wide_range(), _fine(rng),
                     _fine(rng), _underflowing(), _fine(rng), _fine(rng), _fine(rng)])
    alone = [jax.jit(ms.solve_stationary)(Q[i]) for i in range(Q.shape[0])]
    status_alone = [int(r.status) for r in alone]
    assert status_alone[2] == status_alone[4] == ms.Status.SUCCESS  # the exact check passes these
    assert status_alone[7] == ms.Status.UNDERFLOW
    assert float(alone[2].pi[0]) == 0.0
    batched = jax.jit(jax.vmap(ms.solve_stationary))(Q)
    assert [int(s) for s in batched.status] == status_alone
    pi = np.asarray(jax.jit(jax.vmap(ms.stationary_distribution))(Q))
    for i, r in enumerate(alone):
        if status_alone[i] == ms.Status.SUCCESS:
            np.testing.assert_allclose(pi[i], np.asarray(r.pi), rtol=1e-13)
        else:
            assert np.isnan(pi[i]).all()


def test_negative_rates_are_left_to_the_exact_check():
    """Negative rates into and out of state 0 (not a generator; nothing validates under jit):
    the ratios come out positive, so every probability looks fine, but the exact check
    flags the pivot; the cheap test must not clear it."""
    R = np.full((4, 4), 1.0)
    R[0, 1:] = R[1:, 0] = -1.0
    np.fill_diagonal(R, 0.0)
    Q = _generators([R, _fine(np.random.default_rng(0), 4)])
    x, A = jax.vmap(lambda q: _stationary._eliminate_unrolled(_stationary._offdiag(q)))(Q)
    assert np.all(np.asarray(x[0]) >= SMALL)
    assert float(jax.vmap(_stationary._factor_flag)(A, x)[0]) == 1.0
    assert not bool(_stationary._clear_of_range(A, x)[0]) and bool(_stationary._clear_of_range(A, x)[1])
    assert [int(s) for s in jax.jit(jax.vmap(ms.solve_stationary))(Q).status] == [
        int(jax.jit(ms.solve_stationary)(Q[i]).status) for i in range(2)]
