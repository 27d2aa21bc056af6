"""Certified stationary answers (issue 11 item 5): the hard-chain table and the regressions.

Stated accuracy (markovsim.engine._certify): ``SUCCESS`` means every probability whose exact
value is >= 2.2e-308 has relative error <= ``error_bound`` <= ``rtol`` and every smaller
one is returned below 2.2e-308. The table runs every solver path on chains whose exact
answer is known independently (tests/engine/hard_chains.py) and requires: no ``SUCCESS``
with any entry off by more than the bound; and ``SUCCESS`` wherever the certified banded
or dense GTH applies.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import markovsim as ms
from markovsim.engine._certify import DEFAULT_RTOL, FLOOR, dense_error_bound

from . import hard_chains as H

# ----------------------------------------------------------------------------- the table

CHAINS = {
    "ncd-1200-1e-15": lambda: H.nearly_decomposable(1200, 2, 1e-15),
    "ncd-1200-6blocks-1e-15": lambda: H.nearly_decomposable(1200, 6, 1e-15, seed=5),
    "ncd-1200-1e-30": lambda: H.nearly_decomposable(1200, 2, 1e-30, seed=7),
    "two-well-1201": lambda: H.two_well(600, 1400),
    "two-well-1201-asymmetric": lambda: H.two_well(600, 1400, 30),
    "two-well-4001-1e-1204": lambda: H.two_well(2000, 4000, 200),
    "bd-10k-random-1e-9..1e3": lambda: H.random_birth_death(10_000, seed=1, decades=(-9, 3)),
    "bd-100k-random-1e-3..1e3": lambda: H.random_birth_death(100_000, seed=4, decades=(-3, 3)),
    "local-10k": lambda: H.random_local(10_000, seed=2),
    "local-100k": lambda: H.random_local(100_000, seed=6, slope_log2=1),
    "random-graph-2k": lambda: H.random_graph(2000),
    # bandwidth 300: the blocked banded solver; probabilities down to 2^-5814 (windows
    # rescaled) and 2^-39964 with windows spanning over 2^700 (an exponent per weight)
    "local-wide-6k": lambda: H.random_local(6000, reach=300, seed=9, slope_log2=1, step_log2=3),
    "local-wide-20k": lambda: H.random_local(20_000, reach=300, seed=8, slope_log2=2, step_log2=6),
}
#: chains where the certified GTH applies (narrow band after ordering) and must certify
CERTIFIABLE = {k for k in CHAINS if not k.startswith("random-graph")}


@functools.lru_cache(maxsize=None)
def chain(name):
    return CHAINS[name]()


def _sparse_default(c):
    return ms.solve_stationary(c.Q)


def _sparse_direct(c):
    return ms.solve_stationary(c.Q, method=ms.SparseDirect())


def _sparse_iterative(c):
    return ms.solve_stationary(c.Q, method=ms.SparseIterative())


def _dense_gth(c):
    return ms.solve_stationary(c.Q.toarray(), method=ms.GTH())


PATHS = {"default": _sparse_default, "sparse-direct": _sparse_direct, "sparse-iterative": _sparse_iterative,
         "dense-gth": _dense_gth}
DENSE_MAX = 1300  # dense GTH only where n^3 stays cheap


def _check_certificate(res, c, what):
    """The table's rule: a SUCCESS is right to its stated bound; anything else is flagged."""
    err, above_floor = H.rel_errors(res.pi, c)
    if res.status == ms.Status.SUCCESS:
        assert res.error_bound <= DEFAULT_RTOL, what
        assert err <= res.error_bound, f"{what}: SUCCESS with relative error {err:.3g} > bound {res.error_bound:.3g}"
        assert above_floor == 0, f"{what}: {above_floor} probabilities below 2.2e-308 returned above it"
    else:
        assert res.status in (ms.Status.UNCERTIFIED, ms.Status.UNDERFLOW, ms.Status.NOT_CONVERGED,
                              ms.Status.NONFINITE), what
    return err


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("name", list(CHAINS))
def test_hard_chain_never_success_with_a_wrong_answer(name, path):
    c = chain(name)
    if path == "dense-gth" and c.Q.shape[0] > DENSE_MAX:
        pytest.skip("dense GTH is for chains up to ~1,000s of states")
    res = PATHS[path](c)
    _check_certificate(res, c, f"{path} on {name}")
    if name in CERTIFIABLE and path in ("default", "sparse-direct", "dense-gth"):
        assert res.status == ms.Status.SUCCESS, f"{path} on {name}: {res.status.name} ({res.method})"
    if path == "sparse-iterative":
        assert res.status != ms.Status.SUCCESS  # GMRES answers are never certified


@pytest.mark.parametrize("name", ["two-well-1201", "ncd-1200-1e-15", "bd-10k-random-1e-9..1e3"])
def test_log_pi_holds_every_probability(name):
    """log_pi carries the probabilities below the float64 range too (1e-1330 here)."""
    c = chain(name)
    res = ms.solve_stationary(c.Q)
    assert res.status == ms.Status.SUCCESS
    err = np.abs(res.log_pi - c.log_pi)
    assert np.all(err <= 2 * res.error_bound + 1e-14 * np.abs(c.log_pi))


# ----------------------------------------------------------------------------- regressions (fail on 82057e9)


def test_default_sparse_nearly_decomposable_1200_states_is_right():
    """Reported: 57 % error with SUCCESS on a 1,200-state chain with coupling 1e-15."""
    c = chain("ncd-1200-1e-15")
    pi = ms.stationary_distribution(c.Q)
    assert H.rel_errors(pi, c)[0] <= DEFAULT_RTOL


def test_default_sparse_random_rates_10k_states_is_right():
    """Reported: 73.6 % of the mass on a state of probability 1e-1607 (10,000 states, random rates)."""
    c = chain("bd-10k-random-1e-9..1e3")
    pi = ms.stationary_distribution(c.Q)
    err, above = H.rel_errors(pi, c)
    assert err <= DEFAULT_RTOL and above == 0
    assert np.exp(c.log_pi).max() == pytest.approx(pi.max(), rel=1e-9)


@pytest.mark.parametrize("dense", [False, True], ids=["sparse-default", "dense-gth"])
def test_two_well_chain_splits_the_mass_between_the_wells(dense):
    """Reported: all the mass in one well (sparse default, and GTH once the barrier
    underflows below 1e-308). Exact: the asymmetric wells hold 1 : 2^30 of each other's mass."""
    c = chain("two-well-1201-asymmetric")
    Q = c.Q.toarray() if dense else c.Q
    pi = ms.stationary_distribution(Q)
    exact = np.exp(c.log_pi)
    half = len(pi) // 2
    np.testing.assert_allclose([pi[:half].sum(), pi[half + 1:].sum()], [exact[:half].sum(), exact[half + 1:].sum()],
                               rtol=1e-9)
    assert pi[:half].sum() > 1e-10  # the shallow well is not empty


def test_sparse_iterative_does_not_claim_success_with_small_entries_zeroed():
    """Reported: SparseIterative returned SUCCESS with small entries zeroed."""
    c = chain("bd-10k-random-1e-9..1e3")
    res = ms.solve_stationary(c.Q, method=ms.SparseIterative())
    assert res.status != ms.Status.SUCCESS
    with pytest.warns(ms.MarkovsimWarning, match="UNCERTIFIED"):
        ms.stationary_distribution(sp.csr_matrix(np.array([[-1.0, 1.0], [2.0, -2.0]])), method=ms.SparseIterative())


# ----------------------------------------------------------------------------- statuses under jit / vmap, eager JAX


def _small_two_well():
    return H.two_well(100, 1100, 10)  # 201 states, barrier 2^-1100 ~ 1e-331: below the float range


def test_jit_reports_underflow_as_a_status_and_nan():
    c = _small_two_well()
    Q = jnp.asarray(c.Q.toarray())
    res = jax.jit(ms.solve_stationary)(Q)
    assert int(res.status) == ms.Status.UNDERFLOW
    assert np.isnan(np.asarray(jax.jit(ms.stationary_distribution)(Q))).all()


def test_vmap_gives_one_status_per_chain():
    rng = np.random.default_rng(0)
    R = rng.exponential(size=(3, 6, 6))
    for r in R:
        np.fill_diagonal(r, 0.0)
    R[1] = 0.0  # chain 1: the underflowing 3-state chain, states 3..5 hanging off state 2
    R[1, :3, :3] = _underflowing_chain() - np.diag(np.diag(_underflowing_chain()))
    R[1, 2, 3:] = R[1, 3:, 2] = 1.0
    R[1, 3, 4] = R[1, 4, 5] = R[1, 5, 3] = 2.0
    Q = R - np.einsum("bij->bi", R)[..., None] * np.eye(6)
    res = jax.jit(jax.vmap(ms.solve_stationary))(jnp.asarray(Q))
    assert [int(s) for s in res.status] == [ms.Status.SUCCESS, ms.Status.UNDERFLOW, ms.Status.SUCCESS]
    good = jax.jit(jax.vmap(ms.stationary_distribution))(jnp.asarray(Q))
    assert np.isfinite(np.asarray(good[0])).all() and np.isnan(np.asarray(good[1])).all()


def test_eager_jax_input_falls_back_to_the_scaled_host_solve():
    c = _small_two_well()
    res = ms.solve_stationary(jnp.asarray(c.Q.toarray()))
    assert res.status == ms.Status.SUCCESS and isinstance(res.pi, jax.Array)
    err, above = H.rel_errors(res.pi, c)
    assert err <= res.error_bound and above == 0


def _underflowing_chain():
    """Eliminating state 0 creates the rate 2 -> 1 = 1e-160 * 1e-160 = 1e-320, a subnormal
    with ~10 significant bits; pi_1 / pi_2 = 1e-320 / 1e-300 = 1e-20 depends on it."""
    R = np.zeros((3, 3))
    R[0, 1], R[0, 2], R[2, 0], R[1, 2] = 1e-160, 1.0, 1e-160, 1e-300
    return R - np.diag(R.sum(axis=1))


@pytest.mark.parametrize("kind", ["numpy", "jax", "sparse"])
def test_underflow_in_the_elimination_is_not_certified(kind):
    """The censored rate fell to 1e-320 (10 significant bits): the host paths widen the
    bound by the subnormal's absolute error (UNCERTIFIED: a warning, bound above rtol);
    under jit, where XLA flushes subnormals to zero, the status is UNDERFLOW (NaN)."""
    Q = _underflowing_chain()
    M = {"numpy": Q, "jax": jnp.asarray(Q), "sparse": sp.csr_matrix(Q)}[kind]
    method = ms.SparseDirect() if kind == "sparse" else None
    res = ms.solve_stationary(M, method=method)
    assert res.status in (ms.Status.UNCERTIFIED, ms.Status.UNDERFLOW)
    if res.status == ms.Status.UNCERTIFIED:
        assert res.error_bound > DEFAULT_RTOL
        with pytest.warns(ms.MarkovsimWarning, match="UNCERTIFIED"):
            ms.stationary_distribution(M, method=method)
    else:
        with pytest.raises(ms.SolverError, match="UNDERFLOW"):
            ms.stationary_distribution(M, method=method)
    if kind == "jax":
        assert int(jax.jit(ms.solve_stationary)(M).status) == ms.Status.UNDERFLOW
        assert np.isnan(np.asarray(jax.jit(ms.stationary_distribution)(M))).all()


def test_dense_bound_and_rtol():
    """The dense bound grows like n^3 u; a bound above rtol is UNCERTIFIED, not SUCCESS."""
    assert dense_error_bound(16) < 1e-12
    assert 1e-8 < dense_error_bound(1000) < 1e-6
    Q = np.array([[-1.0, 1.0, 0.0], [0.5, -1.5, 1.0], [2.0, 0.0, -2.0]])
    assert ms.solve_stationary(Q).status == ms.Status.SUCCESS
    res = ms.solve_stationary(Q, method=ms.GTH(rtol=1e-17))
    assert res.status == ms.Status.UNCERTIFIED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ms.MarkovsimWarning, match="rtol"):
            ms.stationary_distribution(Q, method=ms.GTH(rtol=1e-17))


def test_floor_is_the_smallest_normal_float():
    assert FLOOR == np.finfo(float).tiny
