"""GTH elimination on the host: dense (numpy, blocked) and banded (JAX scan), both certified.

Both return :class:`HostGTH`: the unnormalised probabilities as mantissa and exponent
(``x_i = m_i 2^{e_i}``, so nothing underflows however small a probability is), the
certified relative error bound of :mod:`._certify`, and whether a rate or a ratio left the
normal float64 range during the elimination (then the bound does not hold).

The banded solver is GTH on a chain whose states are ordered so that every rate joins
states at most ``w`` apart (the natural order or reverse Cuthill-McKee, whichever is
narrower). Elimination keeps the band, so it costs ``n (w+1)^2`` multiply-adds and
``O(n w)`` memory (the elimination loop alone measured 0.05 s for a 1,000,000-state
birth-death chain; for a 266,305-state chain with ``w = 65`` it is the dominant cost,
see ``benchmarks/engine.py``). It runs as one ``lax.scan`` over the states on a sliding
``(w+1) x (w+1)`` window. The back substitution runs on a window of the last ``w``
weights kept within a power of two of 1 (exact rescaling, the scale kept as an integer);
when a weight would leave the normal range relative to the window it reruns with a
separate exponent per weight.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ._certify import FLOOR, gamma, gth_log_bound

__all__ = ["HostGTH", "dense_gth", "band_order", "banded_gth", "BAND_WORK_LIMIT", "BAND_MEMORY_LIMIT"]

#: A banded elimination is used when ``n (w+1)^2`` is at most this (about 3 s on one core).
BAND_WORK_LIMIT = 4e9
#: ... and when ``n w`` (entries of each of the five band arrays) is at most this (160 MB each).
BAND_MEMORY_LIMIT = 2e7


@dataclasses.dataclass(frozen=True)
class HostGTH:
    """Unnormalised GTH weights ``mantissa * 2**exponent``, the bound and the range check."""

    mantissa: np.ndarray
    exponent: np.ndarray
    log_bound: float  # L of _certify, before exp
    underflow: bool  # a rate, ratio or pivot left the normal range: the bound does not hold
    finite: bool


# ----------------------------------------------------------------------------- dense

_PANEL = 64


def _eliminate_dense(Q: np.ndarray, tiny: dict) -> np.ndarray | None:
    """Blocked GTH elimination in place on a copy; None on a zero pivot.

    Right-looking elimination in panels of ``_PANEL`` states: inside a panel each step
    updates only the panel's columns and rows (rank-1, O(n b)); the rest of the matrix
    gets the whole panel at once as one matrix product ``C @ R`` with ``C, R >= 0``.
    Every update still adds products of non-negative numbers (subtraction-free), and the
    O(n^3/3) work runs in BLAS-3. The smallest subnormal rate or ratio of a step goes to
    ``tiny[k]`` (for the bound).
    """
    A = np.array(Q, dtype=float, copy=True)
    n = A.shape[0]
    np.fill_diagonal(A, 0.0)
    for k0 in range(0, n - 1, _PANEL):
        k1 = min(k0 + _PANEL, n - 1)
        for k in range(k0, k1):
            s = A[k, k + 1:].sum()
            if not s > 0:
                return None
            col = A[k + 1:, k]
            positive = col > 0
            smallest = min(col[positive].min(initial=np.inf), A[k, k + 1:][A[k, k + 1:] > 0].min(initial=np.inf))
            col /= s
            # numpy underflows gradually: a ratio or product flushed to zero is below 5e-324,
            # negligible beside the rest unless it was a state's only link, which leaves a
            # zero weight (caught in the back substitution)
            kept = col[positive]
            smallest = min(smallest, kept[kept > 0].min(initial=np.inf))
            if smallest < FLOOR:  # subnormal: absolute error 2^-1075 per operation
                tiny[k] = smallest
            row = A[k, k + 1:k1]
            if row.size:
                A[k + 1:, k + 1:k1] += np.outer(col, row)
            if k + 1 < k1:
                A[k + 1:k1, k1:] += np.outer(col[:k1 - k - 1], A[k, k1:])
        if k1 < n:
            A[k1:, k1:] += A[k1:, k0:k1] @ A[k0:k1, k1:]
    return A


def scaled_weight(m: np.ndarray, e: np.ndarray, cm: np.ndarray, ce: np.ndarray) -> tuple[float, int] | None:
    """One back-substitution step in scaled arithmetic: ``sum_j (m_j 2^e_j)(cm_j 2^ce_j)``
    as a mantissa and an exponent (each term shifted to the largest one's power of two), or
    None when no term is positive."""
    pos = (cm > 0) & (m > 0)
    if not pos.any():
        return None
    ee = e[pos] + ce[pos]
    top = ee.max()
    mk, ek = np.frexp(np.sum(np.ldexp(m[pos] * cm[pos], np.maximum(ee - top, -1100).astype(np.int32))))
    return mk, int(ek) + int(top)


def dense_gth(Q: np.ndarray) -> HostGTH:
    """GTH on a dense matrix (only off-diagonal entries are read), certified.

    The back substitution :math:`x_k = \\sum_{j>k} x_j A_{jk}` runs on mantissas and
    exponents (``np.frexp``), one vectorised step per state.
    """
    n = Q.shape[0]
    tiny: dict = {}
    with np.errstate(under="ignore"):
        A = _eliminate_dense(Q, tiny)
    if A is None or not np.isfinite(A).all():
        return HostGTH(np.full(n, np.nan), np.zeros(n, dtype=np.int64), np.inf, False, False)
    lower = np.tril(A, -1)
    upper = np.triu(A, 1)
    underflow = False
    c = np.count_nonzero(lower, axis=0)[:-1]
    w = np.count_nonzero(upper, axis=1)[:-1]
    # a subnormal v carries an absolute error of 2^-1075 per operation: relative 2^-1075 / v
    extra = sum(2.0 * c[k] * (w[k] + c[k] + 4) * 2.0**-1074 / v for k, v in tiny.items())
    cm, ce = np.frexp(lower.T)  # row k: ratios A[j, k] for j > k
    m = np.zeros(n)
    e = np.zeros(n, dtype=np.int64)
    m[n - 1], e[n - 1] = 0.5, 1
    with np.errstate(under="ignore"):
        for k in range(n - 2, -1, -1):
            step = scaled_weight(m[k + 1:], e[k + 1:], cm[k, k + 1:], ce[k, k + 1:])
            if step is None:
                underflow = True  # irreducible: every weight is positive
                continue
            m[k], e[k] = step
    return HostGTH(m, e, gth_log_bound(c, w) + float(gamma(n)) + extra, underflow, True)


# ----------------------------------------------------------------------------- banded


def _bandwidth(R: sp.csr_matrix) -> int:
    coo = R.tocoo()
    if coo.nnz == 0:
        return 0
    return int(np.max(np.abs(coo.row.astype(np.int64) - coo.col)))


#: Natural orders up to this bandwidth are kept (a permutation of a large chain costs more
#: than the few percent a narrower band would save; breadth-first orders from
#: ``explore`` are already close to Cuthill-McKee).
_RCM_FROM = 96


def band_order(R: sp.csr_matrix) -> tuple[np.ndarray | None, int]:
    """The state order for banded GTH and its bandwidth: natural, or reverse Cuthill-McKee
    when that is narrower. ``perm`` is None for the natural order."""
    w = _bandwidth(R)
    if w <= _RCM_FROM:
        return None, w
    pattern = (R + R.T).tocsr()
    perm = reverse_cuthill_mckee(pattern, symmetric_mode=True)
    w2 = _bandwidth(R[perm][:, perm])
    if w2 < w:
        return np.asarray(perm), w2
    return None, w


def _bucket(n: int, w: int) -> tuple[int, int]:
    """Padded sizes, so that similar chains share one compiled program. Each padding state
    costs a full elimination step, so ``n`` is rounded up by at most 1/64 (1/8 cost 11 %
    of the 266,305-state cluster's time); a new bucket compiles in about a second."""
    g = 1 << max(0, n.bit_length() - 7)
    n_pad = -(-n // g) * g
    w_pad = w if (w <= 8 or w >= 32) else (-(-w // 4) * 4)  # every extra band entry costs time
    return n_pad, max(w_pad, 1)


def _band_arrays(R: sp.csr_matrix, w: int, pad: int, total: int):
    """``Lrev[i, w - d] = A[i, i-d]`` and ``Urev[j, w - d] = A[j-d, j]`` for ``d = 1..w``
    (states shifted by ``pad``): row ``i`` of each holds the band entries of state ``i``
    with the states before it, oldest first, as the sliding window takes them in."""
    coo = R.tocsr().tocoo()  # CSR: no repeated (i, j), so plain assignment is exact
    i = coo.row.astype(np.int64) + pad
    j = coo.col.astype(np.int64) + pad
    v = coo.data
    d = i - j
    Lrev = np.zeros((total + w + 1, w))
    Urev = np.zeros((total + w + 1, w))
    lo = (d > 0) & (v != 0)
    Lrev[i[lo], w - d[lo]] = v[lo]
    up = (d < 0) & (v != 0)
    Urev[j[up], w + d[up]] = v[up]
    return Lrev, Urev


@partial(jax.jit, static_argnums=(3,))
def _banded_eliminate(Lrev, Urev, pad, w):
    """Banded GTH elimination on a sliding ``(w+1) x (w+1)`` window.

    ``Lrev[i] = A[i, i-w:i]`` and ``Urev[i] = A[i-w:i, i]`` (band rows and columns, oldest
    first). Per step it emits the censored rates into and out of the eliminated state and
    the pivot sum; :func:`_banded_summary` derives the ratios, the bound and the range
    check from them afterwards (inside the loop they cost 40 % of the time)."""
    total = Lrev.shape[0] - w - 1
    idx = jnp.arange(w + 1)
    I, J = jnp.meshgrid(idx, idx, indexing="ij")
    d = I - J
    W0 = jnp.where(d > 0, Lrev[I, jnp.clip(w - d, 0, w - 1)], 0.0)
    W0 = W0 + jnp.where(d < 0, Urev[J, jnp.clip(w + d, 0, w - 1)], 0.0)

    def step(W, k):
        row = W[0, 1:]
        s = jnp.sum(row)
        raw = W[1:, 0]
        col = raw / jnp.where(s > 0, s, 1.0)
        T = W[1:, 1:] + jnp.outer(col, row)
        W = jnp.concatenate([jnp.concatenate([T, Urev[k + w + 1][:, None]], axis=1),
                             jnp.concatenate([Lrev[k + w + 1], jnp.zeros(1, T.dtype)])[None, :]], axis=0)
        return W, (raw, row, s)

    _, (raw, row, s) = jax.lax.scan(step, W0, jnp.arange(total - 1))
    return raw, row, s


@jax.jit
def _banded_summary(raw, row, s, pad):
    """The bound's sum over the states after the padding, and whether a rate, ratio or
    pivot left the normal range.

    Division by the step's pivot is monotone, so a step's smallest ratio is its smallest
    positive rate in over the pivot, and its ratios are positive where its rates in are
    unless one underflowed: then (a lost link, rare) the ratios ``raw / s`` are formed as
    the back substitutions form them (:func:`_summary_from_ratios`); otherwise no ratio is
    formed (forming them cost a third of this summary, writing them out a quarter of a
    solve)."""
    sp = jnp.where(s > 0, s, 1.0)
    min_raw = _min_positive(raw)
    min_col = min_raw / sp
    lost = min_col < FLOOR  # a ratio underflowed: a link is lost
    return jax.lax.cond(jnp.any(lost), lambda: _summary_from_ratios(raw, row, s, pad),
                        lambda: _summary(raw > 0, row, s, pad, min_raw, min_col, lost))


def _min_positive(a):
    return jnp.min(jnp.where(a > 0, a, jnp.inf), axis=1)


def _summary_from_ratios(raw, row, s, pad):
    cols = _ratios(raw, s)
    lost = jnp.any((raw > 0) & (cols < FLOOR), axis=1)
    return _summary(cols > 0, row, s, pad, _min_positive(raw), _min_positive(cols), lost)


def _summary(into, row, s, pad, min_raw, min_col, lost):
    """``into``: per step, which ratios are positive; the minima are per step."""
    real = jnp.arange(s.shape[0]) >= pad
    nc = jnp.sum(into, axis=1).astype(s.dtype)
    nw = jnp.sum(row > 0, axis=1).astype(s.dtype)
    u = jnp.finfo(s.dtype).eps / 2

    def g(m):
        return m * u / (1 - m * u)

    # XLA flushes subnormals to zero: an operation near the bottom of the range errs by up
    # to FLOOR absolutely, i.e. by FLOOR / v relative on the smallest value v of the step
    smallest = jnp.minimum(jnp.minimum(min_raw, _min_positive(row)), min_col)
    # (a subnormal in the output shows gradual underflow, whose error is 2^-1075 per operation)
    per_op = jnp.where(jnp.any(real & (smallest < FLOOR)), 2.0**-1074, FLOOR)
    near = (nw + nc + 4.0) * per_op / smallest
    L = jnp.sum(jnp.where(real, 2.0 * nc * (g(nw + 4.0) + near) + 2.0 * g(nw + nc + 2.0), 0.0))
    bad = jnp.any(real & (lost | (s < FLOOR)))
    return L, bad


def _ratios(raw, s):
    """Step ``k``'s ratios ``raw[k] / s[k]`` (a zero pivot divides by 1)."""
    return raw / jnp.where(s > 0, s, 1.0)[..., None]


@partial(jax.jit, static_argnums=(3,))
def _banded_back_fast(raw, s, pad, w):
    """Back substitution on a window of the last ``w`` weights, ``x_j = win_j 2^E``; the
    window is rescaled by an exact power of two only when its newest weight drifts past
    2^±256. ``lost`` says a weight left the normal range relative to its window."""
    total = s.shape[0] + 1

    def rescale(args):
        new, E, lost, real = args
        _, ex = jnp.frexp(jnp.max(new))
        scaled = jnp.ldexp(new, -ex)
        lost = lost | (real & jnp.any((new > 0) & (scaled < FLOOR)))
        return scaled, E + ex, lost

    def step(carry, k):
        win, E, lost = carry
        v = jnp.dot(win, _ratios(raw[k], s[k]), precision=jax.lax.Precision.HIGHEST)
        real = k >= pad
        lost = lost | (real & (v < _SMALL))
        new = jnp.concatenate([v[None], win[:-1]])
        win, E2, lost = jax.lax.cond((v > _BIG) | (v < _TINY), rescale, lambda a: a[:3], (new, E, lost, real))
        return (win, E2, lost), (v, E)

    win0 = jnp.zeros(w).at[0].set(1.0)
    (_, _, lost), (v, E) = jax.lax.scan(step, (win0, jnp.zeros((), jnp.int64), jnp.zeros((), bool)),
                                         jnp.arange(total - 2, -1, -1))
    return v[::-1], E[::-1], lost


# window thresholds of the fast back substitution: rescale past 2^±256; a weight below
# 2^-700 of the window's scale is too close to the end of the range to be trusted
_BIG, _TINY, _SMALL = 2.0**256, 2.0**-256, 2.0**-700


@partial(jax.jit, static_argnums=(2,))
def _banded_back_exact(cols, pad, w):
    """Back substitution with a mantissa and an exponent per weight (no range limit)."""
    total = cols.shape[0] + 1
    cm, ce = jnp.frexp(cols)

    def step(carry, k):
        m, e = carry
        c = cm[k]
        ee = e + ce[k]
        pos = (c > 0) & (m > 0)
        top = jnp.max(jnp.where(pos, ee, jnp.iinfo(jnp.int32).min // 2))
        t = jnp.where(pos, jnp.ldexp(m * c, jnp.maximum(ee - top, -1100)), 0.0)
        mk, ek = jnp.frexp(jnp.sum(t))
        ek = ek + top
        return (jnp.concatenate([mk[None], m[:-1]]), jnp.concatenate([ek[None], e[:-1]])), (mk, ek)

    m0 = jnp.zeros(w).at[0].set(0.5)
    e0 = jnp.zeros(w, dtype=jnp.int32).at[0].set(1)
    _, (mm, ee) = jax.lax.scan(step, (m0, e0), jnp.arange(total - 2, -1, -1))
    return mm[::-1], ee[::-1]


def banded_gth(R: sp.csr_matrix, w: int) -> HostGTH:
    """GTH on a sparse matrix already in an order of bandwidth ``w`` (only the off-diagonal
    entries are read: a generator, a transition matrix or the rates alone)."""
    n = R.shape[0]
    total, wp = _bucket(n, w)
    pad = total - n
    Lrev, Urev = _band_arrays(R, wp, pad, total)
    raw, row, s = _banded_eliminate(jnp.asarray(Lrev), jnp.asarray(Urev), pad, wp)
    L, bad = _banded_summary(raw, row, s, pad)
    del row
    if not bool(np.isfinite(np.asarray(L))):
        return HostGTH(np.full(n, np.nan), np.zeros(n, dtype=np.int64), np.inf, False, False)
    v, E, lost = _banded_back_fast(raw, s, pad, wp)
    if bool(lost):
        m, e = _banded_back_exact(_ratios(raw, s), pad, wp)
        m = np.r_[np.asarray(m)[pad:], 0.5]
        e = np.r_[np.asarray(e, dtype=np.int64)[pad:], 1]
        underflow = bool(np.any(m[:-1] <= 0))
    else:
        m = np.r_[np.asarray(v)[pad:], 1.0]
        e = np.r_[np.asarray(E, dtype=np.int64)[pad:], 0]
        underflow = False
    finite = bool(np.isfinite(m).all())
    return HostGTH(m, e, float(L) + float(gamma(n)), bool(bad) or underflow, finite)
