"""GTH on a wide band, blocked on the host (numpy and BLAS), certified.

The banded solver of :mod:`._gth_host` slides a ``(w+1) x (w+1)`` window one state at a
time: each step is a rank-1 update of the whole window, so its time grows as ``n w^2``
memory passes: fine for ``w`` up to about a hundred, even with this one near 256, twice as
slow at 400 (a 160,400-state grid chain: 34 s cold against 17 s, two cores). This one
eliminates the same states in the same order, in panels of :data:`PANEL` states: inside
a panel, recursively halved, the updates are matrix products of the panel's rows and
columns, and the rest of the band, up to the envelope (the last state joined to any state
so far), gets the whole panel at once as one product ``C @ R`` with ``C, R >= 0``. Every
update still adds products of non-negative numbers, so it is GTH, subtraction-free, and the
``n w^2`` work runs in BLAS-3.

Two things differ from the sliding-window solver, both for the certificate
(:func:`._certify.gth_log_bound_pivots`):

- each pivot sum (a state's total rate to the states not yet eliminated) is summed in
  extended precision (numpy's ``longdouble`` where it carries at least a 64-bit
  mantissa, else ``math.fsum``, correctly rounded) and rounded once to float64. Summed
  in float64, a pivot of ``w_k`` rates errs by up to :math:`\\gamma_{w_k-1}`, and that
  error reaches every one of the ``c_k`` states with a rate into the pivot: with
  ``c_k, w_k`` near a thousand the bound would pass ``1e-6`` (3.6e-6 on the chain above)
  although the answer is as good;
- a weight's scale is tracked per window, as in the banded back substitution: the last
  ``w`` weights share one power of two, rescaled exactly when the newest drifts past
  ``2^±256``; a weight below ``2^-700`` of its window sends the solve to a back
  substitution with a separate exponent per weight.

Memory: the ratio columns, ``n w`` float64 (the back substitution reads them), and a
window of ``(w + B)^2`` with ``B`` a few panels.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._certify import FLOOR, gamma, gth_log_bound_pivots
from ._gth_host import HostGTH, scaled_weight

__all__ = ["PANEL", "blocked_banded_gth", "envelope_work"]

#: States per panel: the trailing product has this inner dimension.
PANEL = 128
#: Below this the panel is eliminated one state at a time (rank-1 updates).
_LEAF = 8
#: The window holds the band plus this many panels before it is shifted (one copy of
#: ``w^2`` entries per shift).
_PANELS_PER_SHIFT = 4

_LD = np.finfo(np.longdouble)
#: numpy's long double carries at least 64 mantissa bits here (x86 extended or IEEE quad)
_EXTENDED = _LD.nmant >= 63
_U_EXT = float(_LD.epsneg) if _EXTENDED else 0.0

_BIG, _TINY, _LOST = 2.0**256, 2.0**-256, 2.0**-700
_ONE_ROUNDING = float(gamma(1))


def _pivot_sum(rates: np.ndarray) -> tuple[float, float]:
    """The sum of positive rates, rounded once to float64, and its relative error bound."""
    if _EXTENDED:
        # any order of summing m non-negative terms in the wider format errs by at most
        # (m - 1) u_ext relative; then one rounding to float64
        m = rates.size
        return float(rates.astype(np.longdouble).sum()), (m * _U_EXT) / (1.0 - m * _U_EXT) + _ONE_ROUNDING
    return math.fsum(rates.tolist()), _ONE_ROUNDING


def _envelope(R: sp.spmatrix, perm: np.ndarray | None = None) -> np.ndarray:
    """Per state ``k``, the last state any of states ``0..k`` has a rate to or from (in the
    order ``perm``: state ``k`` is ``R``'s state ``perm[k]``; None: ``R``'s own order).

    Elimination without pivoting keeps the envelope of the symmetric pattern: eliminating
    ``k`` joins states that are joined to ``k``, all at most ``reach[k]``, so a panel ending
    at ``k`` touches nothing past ``reach[k]`` (on the fleet chains ~40 % less work than the
    band ``k + w``)."""
    n = R.shape[0]
    coo = R.tocoo()
    row, col = coo.row, coo.col
    if perm is not None:
        position = np.empty(n, dtype=np.int64)
        position[np.asarray(perm)] = np.arange(n)
        row, col = position[row], position[col]
    last = np.arange(n)
    np.maximum.at(last, row, col)
    np.maximum.at(last, col, row)
    return np.maximum.accumulate(last)


def envelope_work(R: sp.spmatrix, perm: np.ndarray | None, w: int) -> float:
    """The blocked elimination's work in the order ``perm`` (see :func:`_envelope`), in
    multiply-adds: each state's trailing update reaches its envelope front, at most ``w``
    states, so the work is about the sum of the squared fronts. Measured on two cores:
    2.2e10 (the CloudMatrix384 decode fleet, 21,671 states) in 5.6 s, 7.4e10 (38,765
    states) in 12 s, 4.0e11 (96,339 states) in 52 s."""
    front = np.minimum(_envelope(R, perm) - np.arange(R.shape[0]), max(int(w), 1)).astype(float)
    return float(front @ front)


class _Eliminator:
    """The state of one elimination: the window and what each eliminated state leaves."""

    def __init__(self, R: sp.csr_matrix, w: int):
        self.R = R
        self.reach = _envelope(R)
        self.n = R.shape[0]
        self.w = w
        self.size = min(self.n, w + PANEL * _PANELS_PER_SHIFT)
        self.W = np.zeros((self.size, self.size))
        self.base = 0  # state of W[0]
        self.loaded = 0  # states [base, loaded) are in the window
        n1 = max(self.n - 1, 0)
        self.cols = np.zeros((n1, w))  # ratios A[k+1..k+w, k] / s_k
        self.s_err = np.zeros(n1)
        self.nw = np.zeros(n1, dtype=np.int64)
        self.min_rate = np.full(n1, np.inf)  # smallest positive rate in or out of the pivot
        self.zero_pivot = False
        self.lost = False
        self._load(self.size)

    def _load(self, upto: int) -> None:
        """Bring the original rates of states ``[loaded, base + upto)`` into the window."""
        new0, new1 = self.loaded, min(self.base + upto, self.n)
        if new1 <= new0:
            return
        lo, hi = self.base, new1
        a, b = new0 - lo, new1 - lo
        self.W[a:b, :hi - lo] = self.R[new0:new1, lo:hi].toarray()
        self.W[:hi - lo, a:b] = self.R[lo:hi, new0:new1].toarray()
        self.loaded = new1

    def _shift(self, first: int) -> None:
        """Move local state ``first`` to the top of the window."""
        keep = self.loaded - self.base - first
        W = self.W
        W[:keep, :keep] = W[first:first + keep, first:first + keep]
        W[keep:, :] = 0.0
        W[:keep, keep:] = 0.0
        self.base += first
        self._load(self.size)

    def run(self) -> None:
        n, w = self.n, self.w
        k0 = 0
        while k0 < n - 1 and not self.zero_pivot:
            p = k0 - self.base
            pb = min(PANEL, n - 1 - k0)
            if p + pb + w > self.size and p > 0:
                self._shift(p)
                p = 0
            # the envelope's reach past the panel (elimination fills nothing beyond it)
            end = min(int(self.reach[k0 + pb - 1]) + 1 - self.base, p + pb + w, self.loaded - self.base)
            self._panel(p, p + pb, end)
            if self.zero_pivot:
                return
            W = self.W
            a, b = p + pb, end
            if b > a:
                W[a:b, a:b] += W[a:b, p:a] @ W[p:a, a:b]
            k0 += pb

    def _panel(self, lo: int, hi: int, end: int) -> None:
        """Eliminate local states ``[lo, hi)``; rows and columns up to ``end`` are live."""
        W = self.W
        if hi - lo <= _LEAF:
            for k in range(lo, hi):
                row = W[k, k + 1:end]
                pos_out = row[row > 0]
                s, err = _pivot_sum(pos_out)
                g = self.base + k
                if not s > 0:
                    self.zero_pivot = True
                    return
                col = W[k + 1:end, k]
                smallest_in = col[col > 0].min(initial=np.inf)
                self.nw[g] = pos_out.size
                self.min_rate[g] = min(pos_out.min(initial=np.inf), smallest_in)
                self.s_err[g] = err
                if smallest_in / s == 0.0:
                    self.lost = True  # a ratio underflowed to zero: a link is lost
                col /= s
                cnt = min(self.w, col.size)  # entries past the band are zero
                self.cols[g, :cnt] = col[:cnt]
                if k + 1 < hi:
                    c = hi - k - 1
                    W[k + 1:hi, k + 1:end] += np.outer(col[:c], row)
                    W[hi:end, k + 1:hi] += np.outer(col[c:], row[:c])
            return
        mid = (lo + hi) // 2
        self._panel(lo, mid, end)
        if self.zero_pivot:
            return
        W[mid:hi, mid:end] += W[mid:hi, lo:mid] @ W[lo:mid, mid:end]
        W[hi:end, mid:hi] += W[hi:end, lo:mid] @ W[lo:mid, mid:hi]
        self._panel(mid, hi, end)


def _back_fast(cols: np.ndarray, n: int, w: int):
    """Weights ``x_k = sum_j x_j cols[k, j-k-1]`` on windows sharing one power of two;
    None when a weight falls more than ``2^700`` below its window."""
    x = np.zeros(n)
    ex = np.zeros(n, dtype=np.int64)
    x[n - 1] = 1.0
    E = 0
    for k in range(n - 2, -1, -1):
        hi = min(k + 1 + w, n)
        v = float(x[k + 1:hi] @ cols[k, :hi - k - 1])
        if not (v > 0 and math.isfinite(v)):
            return None
        x[k], ex[k] = v, E
        if v > _BIG or v < _TINY:
            top = min(k + w, n)  # the window the next steps read
            _, e = np.frexp(x[k:top].max())
            x[k:top] = np.ldexp(x[k:top], -int(e))
            E += int(e)
            ex[k:top] = E
            win = x[k:top]
            if np.any((win > 0) & (win < _LOST)):
                return None
    return x, ex


def _back_exact(cols: np.ndarray, n: int, w: int):
    """Weights with a mantissa and an exponent each (no range limit); zero where a weight
    underflowed through a lost link."""
    m = np.zeros(n)
    e = np.zeros(n, dtype=np.int64)
    m[n - 1], e[n - 1] = 0.5, 1
    with np.errstate(under="ignore"):
        for k in range(n - 2, -1, -1):
            hi = min(k + 1 + w, n)
            step = scaled_weight(m[k + 1:hi], e[k + 1:hi], *np.frexp(cols[k, :hi - k - 1]))
            if step is not None:
                m[k], e[k] = step
    return m, e


def blocked_banded_gth(R: sp.spmatrix, w: int) -> HostGTH:
    """GTH on a sparse matrix already in an order of bandwidth ``w`` (only the off-diagonal
    entries are read), blocked for a wide band; certified as :func:`._gth_host.banded_gth`.
    """
    R = sp.csr_matrix(R, dtype=float, copy=True)
    n = R.shape[0]
    R.setdiag(0.0)
    R.eliminate_zeros()
    if n == 1:
        return HostGTH(np.ones(1), np.zeros(1, dtype=np.int64), 0.0, False, True)
    w = max(int(w), 1)
    el = _Eliminator(R, w)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        el.run()
    cols = el.cols
    if el.zero_pivot or not np.isfinite(cols).all():
        return HostGTH(np.full(n, np.nan), np.zeros(n, dtype=np.int64), np.inf, False, False)
    c = np.count_nonzero(cols, axis=1)
    min_ratio = np.empty(len(cols))
    for i in range(0, len(cols), 4096):  # in slices: a full copy of the ratios is n w floats
        block = cols[i:i + 4096]
        min_ratio[i:i + 4096] = np.where(block > 0, block, np.inf).min(axis=1)
    # near the bottom of the range numpy errs by 2^-1074 absolutely (gradual underflow): a
    # step whose smallest rate or ratio is v adds that over v to its rounding terms
    smallest = np.minimum(el.min_rate, min_ratio)
    near = np.where(smallest < FLOOR, (el.nw + c + 4.0) * 2.0**-1074 / smallest, 0.0)
    L = gth_log_bound_pivots(c, el.s_err + near) + float(gamma(n))
    lost = el.lost  # a positive rate in whose ratio underflowed: the bound does not hold
    with np.errstate(under="ignore", over="ignore"):
        fast = _back_fast(cols, n, w)
        if fast is not None:
            m, e = fast
            underflow = lost
        else:
            m, e = _back_exact(cols, n, w)
            underflow = lost or bool(np.any(m <= 0))
    return HostGTH(m, e, L, underflow, bool(np.isfinite(m).all()))
