"""What a certified stationary answer means, and the bound that certifies GTH.

**Stated accuracy.** A solve is ``SUCCESS`` when every probability whose exact value is at
least :data:`FLOOR` (the smallest normal float64, 2.2e-308) is proven to carry a relative
error of at most ``error_bound <= rtol``, and every probability whose exact value is below
:data:`FLOOR` is returned below :data:`FLOOR` (such numbers have no float64 representation
with relative accuracy). ``log_pi`` holds the natural logarithm of every probability, the
tiny ones too, to the same relative accuracy (up to the rounding of a float64 logarithm,
``1e-16 |log pi_i|``). "Exact" means the stationary distribution of the chain whose rates
are the given float64 numbers.

**The bound.** GTH (Grassmann, Taksar and Heyman 1985) eliminates states one at a time;
after step ``k`` the remaining matrix holds the rates of the chain *censored* to the states
not yet eliminated, computed from sums of products of non-negative numbers only. Following
O'Cinneide's entrywise analysis (Numer. Math. 65, 1993), each step's rounding is a relative
perturbation of the censored chain's rates: the pivot sum of ``w_k`` rates and the update
``a_ij + (a_ik / s_k) a_kj`` move each updated rate by at most :math:`\\gamma_{w_k+4}`
(:math:`\\gamma_m = m u / (1 - m u)`, ``u = 2^-53``; one ``u`` more than the operation count
covers gradual underflow of a product that is added to a normal number), and only the
``c_k`` rows that have a rate into state ``k`` are touched. By the Markov chain tree
theorem, :math:`\\pi_i \\propto \\sum_{T} \\prod_{e \\in T} q_e` over spanning in-trees,
and an in-tree uses one rate out of each state, so a relative perturbation
:math:`\\delta` of the rates out of ``c`` states moves every stationary probability by a
factor within :math:`((1+\\delta)/(1-\\delta))^{c}`. The back substitution
:math:`x_k = \\sum_{j>k} x_j a_{jk} / s_k` is the balance equation of state ``k`` in the
censored chain, rounded by at most :math:`\\gamma_{w_k + c_k + 2}`. Summing the logarithms,

.. math::
    \\Bigl|\\log \\frac{\\hat\\pi_i}{\\pi_i}\\Bigr| \\le L = \\sum_k \\bigl[2 c_k \\gamma_{w_k+4}
    + 2 \\gamma_{w_k+c_k+2}\\bigr] + \\gamma_n, \\qquad
    \\text{error\\_bound} = e^{L} - 1

(to first order in ``u``; the neglected terms are below ``L^2``). Near the bottom of the
range an operation errs by an absolute amount instead (``2^-1074`` with numpy's gradual
underflow; up to 2.2e-308 in XLA, which flushes subnormals to zero), so a step whose
smallest rate or ratio is ``v`` adds that amount over ``v`` to its :math:`\\gamma` term: a
rate of 1e-306 in a banded (XLA) solve widens the bound visibly, and such a chain of up to
3,000 states is retried on the numpy path. A ratio that underflows to zero, or a zero
pivot, gives ``UNDERFLOW``. The bound further needs the back substitution to run in scaled arithmetic
(mantissa and a separate power of two per probability, so a probability of 1e-1607 is
carried exactly like one of 0.5). For a dense chain :math:`L \\approx \\tfrac23 n^3 u`
(7e-8 at 1,000 states); for a banded one with bandwidth ``w``,
:math:`L \\approx 2 n w^2 u` (3e-7 for 266,305 states with w = 65; 1e-9 for a
1,000,000-state birth-death chain). Summing each pivot in extended precision and rounding
it once (:func:`gth_log_bound_pivots`, the blocked solver of wide bands) replaces the
:math:`\\gamma_{w_k-1}` of the pivot by about one rounding, so
:math:`L \\approx 15\\, n\\, \\bar c\\, u` with :math:`\\bar c` the mean number of rates into
a pivot (3.3e-8 for the 21,671-state CloudMatrix384 decode fleet with w = 1,320, where
float64 pivots would give 3.6e-6). The bound is a worst case: measured errors are ~1e-14
(the hard-chain table in the tests).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FLOOR", "SMALL", "DEFAULT_RTOL", "gamma", "gth_log_bound", "gth_log_bound_pivots", "dense_error_bound",
           "scaled_normalise"]

#: Probabilities below this (the smallest normal float64) are certified only to lie below it.
FLOOR = float(np.finfo(np.float64).tiny)
#: Unit roundoff of float64.
UNIT = float(np.finfo(np.float64).eps) / 2
#: Censored rates, ratios and back-substitution weights below this void the certificate:
#: XLA flushes subnormals to zero, and what a flush loses (< FLOOR per term, a few terms)
#: is below one rounding of anything at least this large.
SMALL = FLOOR * 2.0**60
#: Default relative accuracy a solve must prove on every probability >= FLOOR to be SUCCESS.
DEFAULT_RTOL = 1e-6

# ln 2 split so that (integer up to 2^21) * _LN2_HI is exact (fdlibm's constants)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


def gamma(m):
    """:math:`\\gamma_m = m u / (1 - m u)`, the classical bound of ``m`` roundings (array-safe)."""
    m = np.asarray(m, dtype=np.float64)
    return m * UNIT / (1.0 - m * UNIT)


def gth_log_bound(c: np.ndarray, w: np.ndarray) -> float:
    """The sum over elimination steps in :math:`L` (without the final :math:`\\gamma_n`).

    Args:
        c: per step, the number of states with a positive rate into the eliminated state.
        w: per step, the number of positive rates out of the eliminated state.
    """
    c = np.asarray(c, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return float(np.sum(2.0 * c * gamma(w + 4) + 2.0 * gamma(w + c + 2)))


def gth_log_bound_pivots(c: np.ndarray, pivot_error: np.ndarray) -> float:
    """The sum over elimination steps in :math:`L` when each pivot sum carries its own
    relative error bound ``pivot_error[k]`` (without the final :math:`\\gamma_n`).

    :func:`gth_log_bound` charges a pivot of ``w_k`` rates summed in float64 with
    :math:`\\gamma_{w_k-1}`; its :math:`\\gamma_{w_k+4}` is that plus :math:`\\gamma_5` for
    the ratio, the product, the sum and gradual underflow, and its back-substitution term
    :math:`\\gamma_{w_k+c_k+2}` is that plus :math:`\\gamma_{c_k+3}` for the dot product of
    ``c_k`` terms and the division. With a pivot summed more accurately (in extended
    precision and rounded once, :mod:`._gth_blocked`) the same terms read, to first order,

    .. math::
        \\sum_k \\bigl[2 c_k (\\gamma_5 + e_k) + 2 (\\gamma_{c_k+3} + e_k)\\bigr].

    A blocked elimination adds each trailing entry's contributions in another order (a
    matrix product); for non-negative terms any order of ``q + 1`` additions errs by at most
    :math:`\\gamma_q` relative, below the :math:`q` steps' charge above, so the bound holds.

    Args:
        c: per step, the number of states with a positive rate into the eliminated state.
        pivot_error: per step, the relative error bound of the computed pivot sum (plus
            any near-underflow allowance of the step).
    """
    c = np.asarray(c, dtype=np.float64)
    e = np.asarray(pivot_error, dtype=np.float64)
    return float(np.sum(2.0 * c * (gamma(5) + e) + 2.0 * (gamma(c + 3) + e)))


def dense_error_bound(n: int) -> float:
    """``error_bound`` of GTH on a dense ``n``-state chain (every rate present)."""
    k = np.arange(n - 1, dtype=np.float64)
    m = n - 1 - k  # states after k
    return float(np.expm1(gth_log_bound(m, m) + float(gamma(n))))


def scaled_normalise(mantissa: np.ndarray, exponent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pi`` and ``log pi`` from unnormalised weights ``x_i = mantissa_i * 2**exponent_i``.

    Entries below the float64 range come out as 0 or subnormal in ``pi`` (below
    :data:`FLOOR`) and exactly scaled in ``log_pi``.
    """
    m, shift = np.frexp(np.asarray(mantissa, dtype=np.float64))  # mantissas into [0.5, 1)
    e = np.asarray(exponent, dtype=np.int64) + shift
    pos = m > 0
    top = int(e[pos].max())
    shifted = np.where(pos, e - top, 0)
    scaled = np.ldexp(m, np.maximum(shifted, -1100).astype(np.int32))
    total = float(np.sum(scaled))
    with np.errstate(divide="ignore", under="ignore"):
        pi = np.ldexp(m / total, np.maximum(shifted, -1100).astype(np.int32))
        log_pi = np.where(pos, np.log(np.where(pos, m, 1.0)) - np.log(total)
                          + shifted * _LN2_LO + shifted * _LN2_HI, -np.inf)
    return pi, log_pi
