"""The blocked banded GTH (markovsim.engine._gth_blocked): the same answer as dense GTH to
both certified bounds, whatever the panel, leaf and window sizes; the path the engine picks
for wide bands; its bound; its refusals."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

import markovsim as ms
import markovsim.engine._gth_blocked as B
from markovsim.engine._certify import gamma, gth_log_bound, scaled_normalise
from markovsim.engine._gth_host import dense_gth


def _banded_chain(n: int, w: int, seed: int, decades: float = 6.0, density: float = 0.6) -> sp.csr_matrix:
    """Random rates (log-uniform over ``decades``) between states at most ``w`` apart, a
    path in both directions so that the chain is irreducible."""
    rng = np.random.default_rng(seed)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    band = (np.abs(i - j) <= w) & (i != j)
    keep = band & ((rng.random((n, n)) < density) | (np.abs(i - j) == 1))
    R = np.where(keep, 10.0 ** rng.uniform(-decades / 2, decades / 2, (n, n)), 0.0)
    return sp.csr_matrix(R)


def _pi(h):
    assert h.finite and not h.underflow
    return scaled_normalise(h.mantissa, h.exponent)[0]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 90), w=st.integers(1, 12), seed=st.integers(0, 2**31),
       panel=st.sampled_from([1, 2, 3, 5, 8, 16]), leaf=st.sampled_from([1, 2, 4]),
       shift=st.sampled_from([1, 2, 3]), chord=st.one_of(st.none(), st.tuples(st.floats(0, 1), st.floats(0, 1))))
def test_blocked_equals_dense_gth_within_both_bounds(n, w, seed, panel, leaf, shift, chord, monkeypatch_module):
    """Small panels, leaves and windows put panel edges, recursion splits and window shifts
    everywhere in the chain, and a long chord makes the band much wider than the envelope
    before it; the answer must match dense GTH within the two certified bounds."""
    monkeypatch_module.setattr(B, "PANEL", panel)
    monkeypatch_module.setattr(B, "_LEAF", leaf)
    monkeypatch_module.setattr(B, "_PANELS_PER_SHIFT", shift)
    R = _banded_chain(n, min(w, n - 1), seed).tolil()
    if chord is not None:
        a, b = sorted((int(chord[0] * (n - 1)), int(chord[1] * (n - 1))))
        if a != b:
            R[a, b], R[b, a] = 0.5, 2.0
    R = R.tocsr()
    w = int(np.max(np.abs(np.subtract(*R.nonzero()))))
    hb = B.blocked_banded_gth(R, w)
    hd = dense_gth(R.toarray())
    pb, pd = _pi(hb), _pi(hd)
    bound = np.expm1(hb.log_bound) + np.expm1(hd.log_bound)
    assert np.max(np.abs(pb / pd - 1.0)) <= bound
    # the bound's own ceiling: at most w states feed a pivot of at most w rates, each pivot
    # sum within one float64 rounding plus w roundings of a 64-bit mantissa
    ww = w
    e = float(gamma(1)) + ww * 2.0**-63
    assert hb.log_bound <= (n - 1) * (2 * ww * (float(gamma(5)) + e) + 2 * (float(gamma(ww + 3)) + e)) + float(gamma(n))


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_pivots_in_extended_precision_tighten_the_bound_by_about_w():
    """The bound of float64 pivot sums (gth_log_bound) against the blocked solver's, on the
    same elimination: the c_k w_k term becomes c_k times a few roundings."""
    R = _banded_chain(600, 60, 3)
    h = B.blocked_banded_gth(R, 60)
    # the steps' counts, read back from a dense elimination of the same chain
    A = R.toarray()
    c = np.count_nonzero(np.tril(_eliminated(A), -1), axis=0)[:-1]
    w = np.count_nonzero(np.triu(_eliminated(A), 1), axis=1)[:-1]
    plain = gth_log_bound(c, w) + float(gamma(600))
    assert h.log_bound < plain / 5
    assert h.log_bound > 2 * np.sum(c) * float(gamma(5))  # it still charges every step


def _eliminated(A):
    from markovsim.engine._gth_host import _eliminate_dense
    return _eliminate_dense(A, {})


def test_the_engine_takes_the_blocked_solver_for_a_wide_band_and_certifies():
    R = _banded_chain(1500, 280, 5, density=0.05)
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    res = ms.solve_stationary(Q, method=ms.SparseDirect())
    # RCM may narrow the band below 280; force the check on what it chose
    if "blocked" in res.method:
        assert res.status == ms.Status.SUCCESS
    dense = ms.solve_stationary(Q.toarray())
    np.testing.assert_allclose(res.pi, dense.pi, rtol=res.error_bound + dense.error_bound)


def test_blocked_retry_when_the_sliding_window_cannot_certify():
    """A narrow band whose float64-pivot bound exceeds rtol, while the blocked solver's does
    not: the engine answers SUCCESS through the blocked solver instead of UNCERTIFIED."""
    R = _banded_chain(4000, 40, 11)
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    banded = ms.solve_stationary(Q, method=ms.SparseDirect(rtol=1.0))
    assert banded.method == "SparseDirect[banded GTH]"
    rtol = banded.error_bound / 4
    res = ms.solve_stationary(Q, method=ms.SparseDirect(rtol=rtol))
    assert res.method == "SparseDirect[blocked banded GTH]" and res.status == ms.Status.SUCCESS
    assert res.error_bound <= rtol
    np.testing.assert_allclose(res.pi, banded.pi, rtol=res.error_bound + banded.error_bound)


def test_a_zero_pivot_is_not_an_answer():
    """A state with no way out (a reducible matrix handed to the solver directly)."""
    R = _banded_chain(40, 3, 1).tolil()
    R[5, :] = 0.0
    h = B.blocked_banded_gth(R.tocsr(), 3)
    assert not h.finite


def test_a_lost_link_is_flagged():
    """A rate into the pivot so small beside the pivot sum that its ratio underflows to
    zero: the bound does not hold, and the solve says UNDERFLOW."""
    R = np.zeros((3, 3))
    R[0, 1], R[0, 2], R[1, 0], R[2, 0], R[1, 2], R[2, 1] = 1e300, 1.0, 1e-320, 1.0, 1.0, 1.0
    h = B.blocked_banded_gth(sp.csr_matrix(R), 2)
    assert h.underflow


def test_without_an_extended_long_double_the_pivots_are_summed_by_fsum(monkeypatch):
    """Where numpy's long double is float64 (Windows, macOS on ARM) the pivots go through
    math.fsum, correctly rounded: the same answer, within both bounds."""
    monkeypatch.setattr(B, "_EXTENDED", False)
    monkeypatch.setattr(B, "PANEL", 4)
    R = _banded_chain(300, 20, 7)
    hb, hd = B.blocked_banded_gth(R, 20), dense_gth(R.toarray())
    assert np.max(np.abs(_pi(hb) / _pi(hd) - 1.0)) <= np.expm1(hb.log_bound) + np.expm1(hd.log_bound)
    assert B._pivot_sum(np.array([1.0, 2.0**-60, 2.0**-60]))[0] == 1.0 + 2.0**-59


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), density=st.floats(0.0, 0.3), seed=st.integers(0, 2**31), w=st.integers(1, 70))
def test_envelope_work_is_the_sum_of_squared_fronts_in_the_given_order(n, density, seed, w):
    """The envelope in an order ``perm`` equals the envelope of the permuted matrix, and the
    work is the sum over states of the squared front (how far the states up to ``k`` reach
    past ``k``, capped at ``w``), brute-forced here from the dense pattern."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=density, random_state=rng, format="csr")
    perm = rng.permutation(n)
    Rp = R[perm][:, perm].toarray()
    np.testing.assert_array_equal(B._envelope(R, perm), B._envelope(sp.csr_matrix(Rp)))
    linked = (Rp != 0) | (Rp.T != 0) | np.eye(n, dtype=bool)
    reach = [max(j for i in range(k + 1) for j in range(n) if linked[i, j]) for k in range(n)]
    fronts = np.minimum(np.array(reach) - np.arange(n), w)
    assert B.envelope_work(R, perm, w) == float(fronts @ fronts)


def _wide_tail_chain(n: int = 3000, m: int = 300) -> sp.csr_matrix:
    """A birth-death path ending in a clique of ``m`` states: no order has a band narrower
    than ``m - 1``, but the envelope is wide only over the clique, so the work is far below
    ``n w^2``."""
    tail = np.arange(n - m, n)
    ci, cj = np.meshgrid(tail, tail, indexing="ij")
    off = ci != cj
    i = np.r_[np.arange(n - 1), np.arange(1, n), ci[off]]
    j = np.r_[np.arange(1, n), np.arange(n - 1), cj[off]]
    rng = np.random.default_rng(4)
    R = sp.coo_matrix((10.0 ** rng.uniform(-2, 2, i.size), (i, j)), shape=(n, n)).tocsr()
    return (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()


def test_the_engine_routes_by_envelope_work_and_memory(monkeypatch):
    """The blocked solver takes a chain by its envelope work, not by ``n w^2``; past the work
    or the memory limit the chain goes to pinned LU, flagged UNCERTIFIED."""
    from markovsim.engine import _stationary as S
    from markovsim.engine._gth_host import band_order

    Q = _wide_tail_chain()
    n = Q.shape[0]
    perm, w = band_order(Q)
    assert w >= S.BLOCKED_FROM
    work = B.envelope_work(Q, perm, w)
    assert work < n * (w + 1) ** 2 / 20  # the tail alone is wide
    monkeypatch.setattr(S, "BLOCKED_WORK_LIMIT", 2 * work)
    res = ms.solve_stationary(Q, method=ms.SparseDirect())
    assert res.method == "SparseDirect[blocked banded GTH]" and res.status == ms.Status.SUCCESS
    monkeypatch.setattr(S, "BLOCKED_WORK_LIMIT", work / 2)
    lu = ms.solve_stationary(Q, method=ms.SparseDirect())
    # flagged, rightly: on this chain LU puts 0.99 of the probability on the wrong state,
    # at a residual of 1e-16 (the blocked answer equals dense GTH's to 1e-16)
    assert lu.method == "SparseDirect[pinned LU]" and lu.status == ms.Status.UNCERTIFIED
    monkeypatch.setattr(S, "BLOCKED_WORK_LIMIT", 2 * work)
    monkeypatch.setattr(S, "BLOCKED_MEMORY_LIMIT", n * w - 1)
    assert ms.solve_stationary(Q, method=ms.SparseDirect()).method == "SparseDirect[pinned LU]"
