"""Transient analysis: the distribution at time ``t`` and time integrals over ``[0, t]``.

For a CTMC with generator :math:`Q` and initial row vector :math:`p_0`,

.. math::

    p(t) = p_0 e^{Q t}, \\qquad
    L(t) = \\int_0^t p(s)\\,ds = p_0 \\int_0^t e^{Q s}\\,ds ,

where :math:`L_i(t)` is the expected time (seconds) spent in state :math:`i` during
:math:`[0, t]`; the expected accumulated reward of a reward rate vector :math:`r` (reward
per second in each state) is :math:`L(t)\\,r`.

Everything is computed by **uniformization**: with :math:`\\Lambda \\ge \\max_i q_i` and the
stochastic matrix :math:`P = I + Q/\\Lambda`,

.. math::

    e^{Q t} = \\sum_{k \\ge 0} e^{-\\Lambda t} \\frac{(\\Lambda t)^k}{k!} P^k, \\qquad
    \\int_0^t e^{Q s}\\,ds = \\frac{1}{\\Lambda} \\sum_{k \\ge 0}
        \\Pr[N_{\\Lambda t} > k]\\, P^k ,

a sum of non-negative terms (no cancellation, unlike a Taylor or Pade series of
:math:`Q t`, and no NaN: ``jax.scipy.linalg.expm`` returns NaN once :math:`\\lVert Q t\\rVert`
passes ~7e5 in float64). Two ways to evaluate it:

* :class:`Squaring` (dense, JAX; jit/vmap/grad-safe): the series for
  :math:`\\tau = t / 2^s` with :math:`\\Lambda\\tau \\le 1/4` (13 terms reach 1e-18), then
  ``s`` squarings of the non-negative matrix
  :math:`e^{Q\\tau}` (rows renormalised to 1 after each), and for the integral the
  doubling :math:`B(2\\tau) = B(\\tau) + e^{Q\\tau} B(\\tau)`. Cost :math:`O((13 + s) n^3)`,
  :math:`s \\approx \\log_2(4 \\Lambda t)`: one year at 1e3 events per second is 37 squarings.
* :class:`Uniformization` (host, numpy/scipy.sparse): vector-matrix products
  :math:`v_{k+1} = v_k P` weighted by Poisson probabilities computed Fox-Glynn style (in
  log space from the mode, truncated 10 standard deviations out), with steady-state
  detection: the iteration stops at step :math:`k` when every component's change
  :math:`|v_{k+1,i} - v_{k,i}|` times the steps left, :math:`R - k` (:math:`R` the right
  truncation point), is below ``tol`` relative to the component, and gives the remaining
  Poisson mass to :math:`v_{k+1}` (the change of a component per step is what a linear
  drift would add up to; the differences do not grow in 1-norm since
  :math:`\\lVert x P\\rVert_1 \\le \\lVert x\\rVert_1`). It also stops once every component
  changes by no more than 8 ulps of itself (the round-off fixed point) while
  :math:`R - k \\le 5\\cdot 10^6`, which bounds a drift hidden below round-off by ~1e-8
  relative. Tiny components (1e-200) keep their relative accuracy: a component still
  growing blocks the stop.

With no method given, JAX input uses :class:`Squaring`; numpy and scipy.sparse input first
try :class:`Uniformization` within the work :class:`Squaring` would need and fall back to
squaring (densified, up to 4,000 states) when the vector iteration has not finished by
then.

A DTMC moves in whole steps: ``t`` is a number of steps, :math:`p(t) = p_0 P^t` and the
"time integral" is the expected number of visits during steps :math:`0, \\dots, t-1`,
:math:`L(t) = p_0 \\sum_{k<t} P^k` (binary powering on the JAX side, vector iteration
with the same steady-state detection on the host).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .._errors import InvalidParameterError, SolverError
from ._chain import CTMC, DTMC, as_chain
from ._checks import (
    array_world,
    check_distribution,
    check_times,
    check_vector,
    offdiagonal_host,
)
from ._structure import validate_chain

__all__ = [
    "Uniformization",
    "Squaring",
    "transient_distribution",
    "expected_time_in_states",
    "accumulated_reward",
]

_HIGHEST = jax.lax.Precision.HIGHEST
#: Largest uniformized horizon of one base step of :class:`Squaring`.
_THETA = 0.25
#: Terms of the base series: Poisson(1/4) mass beyond 12 is below 3e-18.
_TERMS = 12
#: Extra terms used for the tail sums of the integral coefficients.
_EXTRA = 6
#: A sparse chain up to this many states may be densified for squaring.
_SQUARING_DENSE_LIMIT = 4000
#: The round-off stop of the vector iteration is used only this close to the end.
_ROUNDOFF_STOP_SPAN = 5_000_000
_DTMC_BITS = 62


@dataclasses.dataclass(frozen=True)
class Uniformization:
    """Vector uniformization on the host with steady-state detection (sparse chains).

    Attributes:
        tol: relative tolerance of the steady-state stop (per component; the Poisson
            truncation itself neglects less than 1e-20).
    """

    tol: float = 1e-12


@dataclasses.dataclass(frozen=True)
class Squaring:
    """Dense uniformized series on ``t / 2^s`` followed by ``s`` squarings (JAX).

    Attributes:
        max_squarings: bound on ``s`` (static under ``jit``; a horizon needing more gives
            NaN under tracing and :class:`SolverError` outside). The default covers
            :math:`\\Lambda t` up to :math:`2^{48}/4 \\approx 7\\cdot 10^{13}`. For a DTMC it
            bounds the number of bits of ``t`` (at most 62).
    """

    max_squarings: int = 48


# ----------------------------------------------------------------------------- JAX (dense)


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _uniformized(Q):
    """(P, Lambda): P = I + Q / Lambda built from the off-diagonal rates only."""
    n = Q.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    R = jnp.where(eye, 0.0, Q)
    out = jnp.sum(R, axis=1)
    lam = jnp.max(out)
    lam_safe = jnp.where(lam > 0, lam, 1.0)
    P = R / lam_safe + jnp.diag(jnp.clip(1.0 - out / lam_safe, 0.0, None))
    return P, lam


def _base_weights(x):
    """Poisson weights ``w_k = e^{-x} x^k/k!`` and integral coefficients ``beta_k``.

    ``beta_k = sum_{j>k} e^{-x} x^{j-1}/j!`` so that
    ``int_0^tau e^{Qs} ds = tau * sum_k beta_k P^k`` (finite at ``x = 0``).
    """
    ex = jnp.exp(-x)
    w = [ex]
    for k in range(1, _TERMS + 1):
        w.append(w[-1] * x / k)
    u = [ex]  # u_j = e^{-x} x^{j-1} / j!, j = 1, 2, ...
    for j in range(2, _TERMS + _EXTRA + 2):
        u.append(u[-1] * x / j)
    beta = []
    tail = jnp.zeros_like(x)
    tails = []
    for j in range(len(u) - 1, -1, -1):  # tails[k] = sum_{j >= k+1} u_j  (u index j-1)
        tail = tail + u[j]
        tails.append(tail)
    tails = tails[::-1]  # tails[i] = sum_{j >= i+1} u_j, i = 0..
    beta = tails[: _TERMS + 1]
    return w, beta


def _squarings_needed(x_total):
    return jnp.where(x_total > _THETA, jnp.ceil(jnp.log2(jnp.where(x_total > _THETA, x_total, 1.0) / _THETA)), 0.0)


@partial(jax.jit, static_argnames=("max_squarings", "integral"))
def _ctmc_squaring(Q, p0, t, max_squarings: int, integral: bool):
    """(p(t), L(t)) for a dense generator: series on t/2^s, then s squarings."""
    Q = jnp.asarray(Q)
    dtype = jnp.result_type(Q.dtype, jnp.asarray(p0).dtype, jnp.asarray(t).dtype, float)
    Q = Q.astype(dtype)
    p0 = jnp.asarray(p0, dtype=dtype)
    t = jnp.asarray(t, dtype=dtype)
    n = Q.shape[-1]
    P, lam = _uniformized(Q)
    s = jax.lax.stop_gradient(_squarings_needed(lam * t))
    ok = s <= max_squarings
    s = jnp.minimum(s, max_squarings)
    tau = t * jnp.exp2(-s)
    w, beta = _base_weights(lam * tau)
    eye = jnp.eye(n, dtype=dtype)
    A = w[0] * eye
    B = beta[0] * eye
    Pk = eye
    for k in range(1, _TERMS + 1):
        Pk = _mm(Pk, P)
        A = A + w[k] * Pk
        if integral:
            B = B + beta[k] * Pk
    A = A / jnp.sum(A, axis=1, keepdims=True)
    B = tau * B
    s_int = s.astype(jnp.int32)

    def square(carry):
        A, B = carry
        A2 = _mm(A, A)
        A2 = A2 / jnp.sum(A2, axis=1, keepdims=True)
        B2 = B + _mm(A, B) if integral else B
        return A2, B2

    def body(i, carry):
        return jax.lax.cond(i < s_int, square, lambda c: c, carry)

    A, B = jax.lax.fori_loop(0, max_squarings, body, (A, B))
    p = _mm(p0, A)
    L = _mm(p0, B)
    nan = jnp.asarray(jnp.nan, dtype=dtype)
    return jnp.where(ok, p, nan), jnp.where(ok, L, nan)


@partial(jax.jit, static_argnames=("bits", "integral"))
def _dtmc_powering(P, p0, steps, bits: int, integral: bool):
    """(p0 P^t, p0 sum_{k<t} P^k) by binary powering, most significant bit first."""
    P = jnp.asarray(P)
    dtype = jnp.result_type(P.dtype, jnp.asarray(p0).dtype, float)
    P = P.astype(dtype)
    p0 = jnp.asarray(p0, dtype=dtype)
    steps = jnp.asarray(steps).astype(jnp.int64)
    n = P.shape[-1]
    eye = jnp.eye(n, dtype=dtype)

    def double(c):  # m -> 2m
        A, B = c
        A2 = _mm(A, A)
        A2 = A2 / jnp.sum(A2, axis=1, keepdims=True)
        return A2, (B + _mm(A, B)) if integral else B

    def add_one(c):  # m -> m + 1
        A, B = c
        A1 = _mm(A, P)
        return A1, (B + A) if integral else B

    def body(i, c):
        shift = bits - 1 - i
        m = steps >> (shift + 1)
        c = jax.lax.cond(m > 0, double, lambda c: c, c)
        return jax.lax.cond(((steps >> shift) & 1) == 1, add_one, lambda c: c, c)

    A, B = jax.lax.fori_loop(0, bits, body, (eye, jnp.zeros_like(eye)))
    ok = (steps >= 0) & (steps < (jnp.int64(1) << bits))
    nan = jnp.asarray(jnp.nan, dtype=dtype)
    return jnp.where(ok, _mm(p0, A), nan), jnp.where(ok, _mm(p0, B), nan)


def _jax_solve(chain, p0, t, method: Squaring, integral: bool, *, traced: bool):
    """JAX evaluation, scalar or 1-D ``t`` (vmapped when traced, looped when concrete)."""
    M = jnp.asarray(chain.matrix)
    t = jnp.asarray(t)
    if isinstance(chain, DTMC):
        bits = min(int(method.max_squarings), _DTMC_BITS)

        def one(tt):
            return _dtmc_powering(M, p0, tt, bits, integral)
    else:

        def one(tt):
            return _ctmc_squaring(M, p0, tt, int(method.max_squarings), integral)

    if t.ndim == 0:
        return one(t)
    if traced:
        return jax.vmap(one)(t)
    outs = [one(tt) for tt in t]
    return jnp.stack([o[0] for o in outs]), jnp.stack([o[1] for o in outs])


# ----------------------------------------------------------------------------- host (numpy / scipy)


def _poisson_window(x: float) -> tuple[int, np.ndarray]:
    """(left, w): normalised Poisson(x) weights on [left, left + len(w)), Fox-Glynn style.

    Computed in log space by recurrences from the mode (no overflow or underflow, and no
    ``lgamma`` of huge arguments), truncated 10 standard deviations (+ 20) on each side:
    the neglected mass is below 1e-20.
    """
    if x <= 0:
        return 0, np.ones(1)
    mode = int(np.floor(x))
    half = int(np.ceil(10.0 * np.sqrt(x) + 20.0))
    left = max(0, mode - half)
    right = mode + half
    logw = np.zeros(right - left + 1)
    m = mode - left
    if right > mode:
        j = np.arange(mode + 1, right + 1, dtype=float)
        logw[m + 1:] = np.cumsum(np.log(x / j))
    if mode > left:
        j = np.arange(mode, left, -1, dtype=float)  # mode, mode-1, ..., left+1
        logw[:m][::-1] = np.cumsum(np.log(j / x))
    w = np.exp(logw - logw.max())
    return left, w / w.sum()


class _Unfinished(Exception):
    """The vector iteration ran past its work budget."""


def _vector_iterate(step, v0, weights_left, weights, tail_coeff, n_steps_max, tol, integral, budget):
    """Shared loop: v_{k+1} = step(v_k); p = sum_k w_k v_k; L = sum_k c_k v_k.

    ``weights`` covers indices [weights_left, weights_left + len(weights)); ``tail_coeff(k)``
    gives the integral coefficient of v_k. Returns (p, L, steps done).
    """
    v = np.array(v0, dtype=float)
    n = v.shape[0]
    p = np.zeros(n)
    L = np.zeros(n)
    right = weights_left + len(weights) - 1
    eps = np.finfo(float).eps
    k = 0
    while True:
        wk = weights[k - weights_left] if weights_left <= k <= right else 0.0
        if wk:
            p += wk * v
        if integral:
            L += tail_coeff(k) * v
        if k >= n_steps_max:
            return p, L, k
        if budget is not None and k >= budget:
            raise _Unfinished
        v_next = step(v)
        diff = np.abs(v_next - v)
        scale = np.abs(v_next)
        # largest change relative to the component itself (a component that just became
        # positive counts as a change of 100 %, one that stays 0 as none)
        rel = float(np.max(np.where(diff > 0, diff / np.where(scale > 0, scale, 1.0), 0.0), initial=0.0))
        if np.any((diff > 0) & (scale == 0)):
            rel = np.inf
        remaining = n_steps_max - k
        stop = rel * remaining <= tol or (remaining <= _ROUNDOFF_STOP_SPAN and rel <= 8.0 * eps)
        k += 1
        v = v_next
        if stop:
            # every later v_j equals v (within the bound): give it the remaining weights
            lo = max(k, weights_left)
            if lo <= right:
                p += weights[lo - weights_left:].sum() * v
            if integral:
                L += tail_coeff.rest(k) * v
            return p, L, k


class _CtmcTail:
    """Integral coefficients c_k = Pr[N > k] / Lambda of the uniformized series."""

    def __init__(self, left, w, lam, t):
        self.left = left
        self.lam = lam
        self.t = t
        # sf[k - left] = sum_{j > k} w_j for k in [left, right]
        self.sf = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])
        self.right = left + len(w) - 1

    def __call__(self, k):
        if k < self.left:
            return 1.0 / self.lam
        if k > self.right:
            return 0.0
        return self.sf[k - self.left] / self.lam

    def rest(self, k):
        """sum_{j >= k} c_j."""
        if k > self.right:
            return 0.0
        # sum_{j>=k} sf_j = E[(N - k)^+] = sum_{j > k} (j - k) w_j
        lo = max(k, self.left)
        sf = self.sf[lo - self.left:]
        below = max(0, self.left - k)  # indices k .. left-1 have sf = 1
        return (below + sf.sum()) / self.lam


class _DtmcTail:
    """Visits are counted at steps 0..t-1: coefficient 1 below t."""

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, k):
        return 1.0 if k < self.steps else 0.0

    def rest(self, k):
        return float(max(0, self.steps - k))


def _host_uniformization(R: sp.csr_matrix, p0: np.ndarray, t: float, tol: float, integral: bool, budget):
    """CTMC by vector uniformization; R are the off-diagonal rates (CSR)."""
    n = R.shape[0]
    out = np.asarray(R.sum(axis=1)).ravel()
    lam = float(out.max()) * 1.02  # strictly above the largest rate: P aperiodic
    if lam == 0.0 or t == 0.0:
        return p0.copy(), p0 * t, 0
    P = (R / lam + sp.diags(1.0 - out / lam)).tocsr()
    PT = P.T.tocsr()
    left, w = _poisson_window(lam * t)
    tail = _CtmcTail(left, w, lam, t)
    right = left + len(w) - 1
    p, L, k = _vector_iterate(lambda v: PT @ v, p0, left, w, tail, right, tol, integral, budget)
    return p, L, k


def _host_dtmc(P: sp.csr_matrix, p0: np.ndarray, steps: int, tol: float, integral: bool, budget):
    PT = P.T.tocsr()
    tail = _DtmcTail(steps)
    w = np.ones(1)
    p, L, k = _vector_iterate(lambda v: PT @ v, p0, steps, w, tail, steps, tol, integral, budget)
    return p, L, k


def _squaring_plan(chain, t: float, method: Squaring) -> int:
    """Squarings a CTMC horizon needs (or bits of a DTMC step count); raises past the bound."""
    if isinstance(chain, DTMC):
        bits = int(t).bit_length()
        limit = min(int(method.max_squarings), _DTMC_BITS)
        if bits > limit:
            raise SolverError(f"t={int(t)} steps needs {bits} binary digits, more than "
                              f"max_squarings={limit}; raise Squaring(max_squarings=...)")
        return bits
    R = offdiagonal_host(chain)
    lam = float(np.asarray(R.sum(axis=1)).max()) if R.nnz else 0.0
    x = lam * t
    if not np.isfinite(x):
        raise SolverError(f"Lambda*t overflows float64 (largest exit rate {lam:.3g}/s times t={t:.3g} s); "
                          "expected a finite product: a shorter t")
    s = int(np.ceil(np.log2(x / _THETA))) if x > _THETA else 0
    if s > method.max_squarings:
        raise SolverError(f"Lambda*t={lam * t:.3g} (largest exit rate {lam:.3g}/s times t={t:.3g} s) needs "
                          f"{s} squarings, more than max_squarings={method.max_squarings}; "
                          "raise Squaring(max_squarings=...)")
    return s


def _host_one(chain, p0: np.ndarray, t: float, method, integral: bool):
    """One horizon on the host: numpy results."""
    n = chain.n
    dense_input = not sp.issparse(chain.matrix)
    if isinstance(method, Squaring):
        _squaring_plan(chain, t, method)
        p, L = _jax_solve(_densified(chain), jnp.asarray(p0), jnp.asarray(t), method, integral, traced=False)
        return np.asarray(p), np.asarray(L)
    tol = method.tol if isinstance(method, Uniformization) else Uniformization().tol
    budget = None
    if method is None and (dense_input or n <= _SQUARING_DENSE_LIMIT):
        s = _squaring_plan(chain, t, Squaring())
        nnz = n * n if dense_input else max(chain.matrix.nnz, n)
        work = (_TERMS + s + 2) * (2 if integral else 1) * float(n) ** 3
        budget = int(work / nnz) + 10
    try:
        if isinstance(chain, DTMC):
            M = chain.matrix
            P = M.tocsr().astype(float) if sp.issparse(M) else sp.csr_matrix(np.asarray(M, dtype=float))
            p, L, _ = _host_dtmc(P, p0, int(t), tol, integral, budget)
        else:
            p, L, _ = _host_uniformization(offdiagonal_host(chain), p0, float(t), tol, integral, budget)
        return p, L
    except _Unfinished:
        return _host_one(chain, p0, t, Squaring(), integral)


def _densified(chain):
    m = chain.matrix
    if sp.issparse(m):
        return type(chain)(jnp.asarray(m.toarray()))
    return type(chain)(jnp.asarray(m))


def _check_method(method):
    if method is not None and not isinstance(method, (Uniformization, Squaring)):
        raise TypeError(f"method={method!r}: expected Uniformization(), Squaring() or None (automatic)")
    if isinstance(method, Squaring) and (int(method.max_squarings) < 0):
        raise InvalidParameterError(f"Squaring.max_squarings={method.max_squarings!r}: expected an integer >= 0")
    if isinstance(method, Uniformization) and not (method.tol > 0):
        raise InvalidParameterError(f"Uniformization.tol={method.tol!r}: expected a tolerance > 0")


def _solve(chain, p0, t, method, integral: bool):
    """(p, L) for scalar or 1-D ``t``; array type follows the chain's matrix."""
    _check_method(method)
    chain = as_chain(chain)
    world = array_world(chain, p0, t)
    if world == "traced":
        if isinstance(method, Uniformization):
            raise TypeError("Uniformization() runs on the host; under jax transformations use Squaring()")
        return _jax_solve(chain, jnp.asarray(p0), jnp.asarray(t), method or Squaring(), integral, traced=True)
    chain = validate_chain(chain)
    p0h = check_distribution("p0", p0, chain.n)
    th = check_times("t", t, integer=isinstance(chain, DTMC))
    if world == "jax":
        if isinstance(method, Uniformization):
            p, L = _stack([_host_one(chain, p0h, float(tt), method, integral) for tt in th.reshape(-1)], th)
            return jnp.asarray(p), jnp.asarray(L)
        m = method or Squaring()
        for tt in th.reshape(-1):
            _squaring_plan(chain, float(tt), m)
        p, L = _jax_solve(chain, jnp.asarray(p0h), jnp.asarray(th), m, integral, traced=False)
        _check_finite_result(p, L, integral)
        return p, L
    p, L = _stack([_host_one(chain, p0h, float(tt), method, integral) for tt in th.reshape(-1)], th)
    _check_finite_result(p, L, integral)
    return p, L


def _stack(results, th):
    p = np.stack([r[0] for r in results])
    L = np.stack([r[1] for r in results])
    if th.ndim == 0:
        return p[0], L[0]
    return p, L


def _check_finite_result(p, L, integral):
    bad = not np.isfinite(np.asarray(p)).all() or (integral and not np.isfinite(np.asarray(L)).all())
    if bad:
        raise SolverError("transient solve produced a non-finite result (NaN or inf); "
                          "check the chain's rates and the horizon")


def transient_distribution(chain: Any, p0: Any, t: Any, *, method: Uniformization | Squaring | None = None):
    """The distribution at time ``t``: :math:`p(t) = p_0 e^{Q t}` (CTMC) or :math:`p_0 P^t` (DTMC).

    Uniformization throughout (see the module notes): no NaN at long horizons (a
    1,000-state chain over a year is fine), entries non-negative, rows summing to 1.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second;
            dense numpy/JAX or scipy.sparse).
        p0: initial distribution, shape ``(n,)``, summing to 1.
        t: time in seconds (CTMC) or number of steps (DTMC), >= 0; a scalar or a 1-D
            array of horizons (one row of the result per horizon).
        method: ``Squaring()`` (dense, JAX), ``Uniformization()`` (host, sparse-friendly)
            or ``None`` to choose (see the module notes).

    Returns:
        ``p(t)``, shape ``(n,)`` or ``(len(t), n)``: JAX for JAX input (and under
        ``jax.jit`` / ``jax.vmap`` / ``jax.grad``, where a horizon beyond
        ``max_squarings`` gives NaN), numpy for numpy or sparse input.

    Raises:
        InvalidChainError: the chain is not a valid generator / transition matrix.
        InvalidParameterError: ``p0`` not a distribution of the right length, ``t``
            negative or not finite (or not whole steps for a DTMC).
        SolverError: the horizon needs more squarings than allowed.

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
        >>> markovsim.transient_distribution(Q, np.array([1.0, 0.0]), 50.0).round(6).tolist()
        [0.666667, 0.333333]
    """
    p, _ = _solve(chain, p0, t, method, integral=False)
    return p


def expected_time_in_states(chain: Any, p0: Any, t: Any, *, method: Uniformization | Squaring | None = None):
    """Expected time spent in each state during ``[0, t]``: :math:`L(t) = \\int_0^t p(s)\\,ds`.

    For a DTMC, the expected number of visits to each state at steps ``0, ..., t-1``.
    The entries sum to ``t``.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second).
        p0: initial distribution, shape ``(n,)``.
        t: horizon in seconds (CTMC) or steps (DTMC), >= 0; scalar or 1-D.
        method: see :func:`transient_distribution`.

    Returns:
        ``L(t)`` in seconds (CTMC) or visits (DTMC), shape ``(n,)`` or ``(len(t), n)``.

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [0.0, 0.0]])
        >>> round(float(markovsim.expected_time_in_states(Q, np.array([1.0, 0.0]), 30.0)[0]), 9)
        1.0
    """
    _, L = _solve(chain, p0, t, method, integral=True)
    return L


def accumulated_reward(chain: Any, p0: Any, t: Any, rewards: Any, *,
                       method: Uniformization | Squaring | None = None):
    """Expected reward accumulated over ``[0, t]``: :math:`E\\int_0^t r(X_s)\\,ds = L(t)\\,r`.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second).
        p0: initial distribution, shape ``(n,)``.
        t: horizon in seconds (CTMC) or steps (DTMC), >= 0; scalar or 1-D.
        rewards: reward rate per state, shape ``(n,)`` (reward units per second; per step
            for a DTMC, counted at steps ``0, ..., t-1``).
        method: see :func:`transient_distribution`.

    Returns:
        The expected accumulated reward (reward units): a scalar, or one per horizon.

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [0.0, 0.0]])   # up, then down for good
        >>> round(float(markovsim.accumulated_reward(Q, np.array([1.0, 0.0]), 40.0, np.array([1.0, 0.0]))), 9)
        1.0
    """
    chain = as_chain(chain)
    world = array_world(chain, p0, t, rewards)
    if world != "traced":
        check_vector("rewards", rewards, chain.n)
    L = expected_time_in_states(chain, p0, t, method=method)
    if isinstance(L, jax.Array):
        return jnp.matmul(L, jnp.asarray(rewards, dtype=L.dtype), precision=_HIGHEST)
    return L @ np.asarray(rewards, dtype=float)
