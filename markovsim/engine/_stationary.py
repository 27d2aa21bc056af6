"""Stationary distributions, certified.

For an irreducible CTMC the stationary distribution is the unique row vector with
:math:`\\pi Q = 0`, :math:`\\sum_i \\pi_i = 1`; for a DTMC, :math:`\\pi P = \\pi`.

**A small residual does not prove a stationary vector.** Pinned sparse LU with residual
1e-16 put 73.6 % of the mass on a state whose probability is 1e-1607, and answered a
nearly decomposable chain 57 % off; a plain GTH back substitution puts all the mass in one
well of a two-well chain once the barrier underflows. So every solve here says what it
proved (:mod:`._certify` defines the stated accuracy and the bound):

- ``SUCCESS``: every probability >= 2.2e-308 proven to within ``error_bound <= rtol``
  relative (default 1e-6), smaller ones proven below 2.2e-308, ``log_pi`` holding them all;
- ``UNCERTIFIED``: an answer with a small residual that could not be proven (a warning from
  :func:`stationary_distribution`);
- ``UNDERFLOW``: an underflow cut a state off, or (under ``jit``) a rate, ratio or weight
  fell below 2.6e-290, so the proof does not apply;
- ``NOT_CONVERGED``, ``NONFINITE``, ``REDUCIBLE``: no answer (a :class:`SolverError`).

The algorithm behind every certified answer is GTH elimination (Grassmann, Taksar and
Heyman 1985): Gaussian elimination on the off-diagonal rates that never subtracts, whose
rounding errors are relative perturbations of rates, to which a stationary distribution is
componentwise well conditioned (O'Cinneide 1993) whatever the coupling between its parts,
nearly decomposable or not. That is why it, and not a second method or an a-posteriori
residual test, certifies: a residual test cannot see a 1e-15 coupling, and a second method
can share the first one's blind spot. Its paths:

- dense chains: JAX GTH (jit/vmap/grad-safe; under tracing the status comes back as an
  array, and :func:`stationary_distribution` NaN-fills an uncertified answer) or blocked
  numpy GTH on the host;
- sparse chains (the default above ``DENSE_LIMIT`` states): GTH on the band, in the natural
  order or reverse Cuthill-McKee (:mod:`._gth_host`), when ``n (w+1)^2`` fits: birth-death
  chains, clusters with spares, products of small components; bands of ``BLOCKED_FROM``
  states or more (inference fleets over instance-state counts) blocked on the host, with
  extended-precision pivots (:mod:`._gth_blocked`), when the envelope work and ``n w`` fit
  (``BLOCKED_WORK_LIMIT``, ``BLOCKED_MEMORY_LIMIT``);
- host back substitutions carry a separate power of two per probability, so 1e-1607 and
  a barrier of 1e-400 between two wells are no harder than 0.5.

Where the band is too wide even for the blocked elimination, ``SparseDirect`` falls back to
pinned LU and ``SparseIterative`` runs GMRES (:mod:`._pinned`): fast and normwise right, but
``UNCERTIFIED``.
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .._errors import MarkovsimWarning, ReducibleChainError, SolverError
from ._certify import DEFAULT_RTOL, FLOOR, SMALL, dense_error_bound, scaled_normalise
from ._chain import CTMC, DTMC
from ._gth_blocked import blocked_banded_gth, envelope_work
from ._gth_host import BAND_MEMORY_LIMIT, BAND_WORK_LIMIT, HostGTH, band_order, banded_gth, dense_gth
from ._pinned import pinned_stationary, residual, sparse_generator
from ._structure import recurrent_classes, validate_chain
from ._validate import is_traced

__all__ = [
    "GTH",
    "SparseDirect",
    "SparseIterative",
    "Status",
    "StationaryResult",
    "gth",
    "solve_stationary",
    "stationary_distribution",
    "stationary_distributions",
]

#: Dense chains up to this many states go to GTH; larger sparse ones to the sparse solver.
DENSE_LIMIT = 1000
_UNROLL_LIMIT = 24


class Status(enum.IntEnum):
    """Outcome of a solve; only ``SUCCESS`` is a certified answer."""

    SUCCESS = 0
    NOT_CONVERGED = 1
    REDUCIBLE = 2
    NONFINITE = 3
    INACCURATE = 4
    UNCERTIFIED = 5
    UNDERFLOW = 6

    @property
    def message(self) -> str:
        return {
            0: "solved and certified: every probability >= 2.2e-308 within error_bound relative",
            1: "the iterative solver did not reach its tolerance",
            2: "the chain is reducible (a zero pivot): no unique stationary distribution",
            3: "the solution is not finite",
            4: "the residual |pi Q| is above the solver's tolerance (an ill-conditioned solve)",
            5: "the answer could not be certified componentwise (a small residual proves nothing "
               "about small probabilities or weakly coupled parts)",
            6: "an underflow cut a state off (a zero weight or pivot), or under jit a rate, ratio "
               "or weight fell below 2.6e-290: the answer is not certified",
        }[int(self)]


@dataclasses.dataclass(frozen=True)
class GTH:
    """Dense GTH elimination; jit/vmap/grad-safe on JAX arrays.

    Attributes:
        rtol: relative accuracy to certify on every probability >= 2.2e-308 for SUCCESS.
    """

    rtol: float = DEFAULT_RTOL


@dataclasses.dataclass(frozen=True)
class SparseDirect:
    """Direct elimination of a sparse chain: certified GTH on the band when it fits (a
    sliding window below 256 states of bandwidth, blocked panels from there up to
    ``n (w+1)^2 = 1e11``), else pinned sparse LU (``UNCERTIFIED``).

    Attributes:
        rtol: relative accuracy to certify on every probability >= 2.2e-308 for SUCCESS.
    """

    rtol: float = DEFAULT_RTOL


@dataclasses.dataclass(frozen=True)
class SparseIterative:
    """GMRES on the pinned system with an incomplete-LU preconditioner.

    Its answers are never certified componentwise (status ``UNCERTIFIED`` when GMRES
    converged): use the default or :class:`SparseDirect` for a certified answer.

    Attributes:
        tol: tolerance on the normalised residual
            :math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|)`.
        maxiter: most GMRES restarts (of 50 iterations each).
    """

    tol: float = 1e-12
    maxiter: int = 1000


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class StationaryResult:
    """A stationary solve.

    Attributes:
        pi: the distribution (numpy, or JAX for JAX input).
        status: :class:`Status` (an integer array under ``jax.jit``).
        residual: :math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|)`.
        method: the algorithm that produced ``pi``.
        error_bound: proven relative error of every probability >= 2.2e-308 (``inf`` when
            nothing is proven); ``SUCCESS`` iff it is at most the method's ``rtol`` and no
            range check failed.
        log_pi: natural logarithm of every probability, the ones below 2.2e-308 too.
    """

    pi: Any
    status: Any
    residual: Any
    method: str
    error_bound: Any = float("inf")
    log_pi: Any = None

    def tree_flatten(self):
        return (self.pi, self.status, self.residual, self.error_bound, self.log_pi), self.method

    @classmethod
    def tree_unflatten(cls, method, children):
        pi, status, res, bound, log_pi = children
        return cls(pi, status, res, method, bound, log_pi)


# ----------------------------------------------------------------------------- dense GTH (JAX)


def _range_flag(raws, cols, rows, pivots, pi):
    """1.0 when the traced GTH left the range where its bound holds; computed once from
    the stacked factors (per-step checks cost 7x under vmap). Rows ``k`` of the
    ``(n-1, n)`` arrays hold step ``k``'s censored rates into (``raws``) and out of
    (``rows``) the eliminated state and its ratios (``cols``). Flags: a rate or ratio
    below :data:`SMALL` (XLA flushes subnormals to zero: a fill of 1e-320 vanishes); a
    ratio that underflowed (unless the pivot sum is infinite: a vanishing state); an
    update product that underflowed (the smallest is the product of the smallest
    factors); and a probability below :data:`SMALL` that is positive, has a source or
    feeds another (the plain back substitution cannot carry it: a two-well barrier).
    Conservative: such chains are refused under ``jit``; the host paths bound them."""
    small = jnp.any((raws > 0) & (raws < SMALL)) | jnp.any((rows > 0) & (rows < SMALL))
    ratio = jnp.any((raws > 0) & (cols < FLOOR) & jnp.isfinite(pivots)[:, None])
    product = jnp.any(_min_positive(cols) < FLOOR / _min_positive(rows))
    has_source = jnp.concatenate([jnp.any(cols > 0, axis=1), jnp.zeros(1, bool)])
    feeds = jnp.any(cols > 0, axis=0)
    weight = jnp.any((pi < SMALL) & ((pi > 0) | has_source | feeds))
    return (small | ratio | product | weight).astype(pi.dtype)


def _offdiag(A):
    n = A.shape[-1]
    return jnp.where(jnp.eye(n, dtype=bool), 0.0, A)


def _min_positive(v):
    return jnp.min(jnp.where(v > 0, v, jnp.inf), axis=-1)


def _gth_unrolled(A):
    """GTH with static slices, for small chains (unrolled at trace time).

    Step ``k`` reads column ``k`` below and row ``k`` right of the diagonal and updates
    only the trailing block, so the final ``A`` holds every step's censored rates: the
    range check reads them from there once (:func:`_factor_flag`) instead of from stacked
    per-step copies, which cost 3-5x the elimination itself under ``vmap``."""
    x, A = _eliminate_unrolled(A)
    return x, _factor_flag(A, x)


def _eliminate_unrolled(A):
    """``(pi, eliminated A)`` of :func:`_gth_unrolled`, without the range check."""
    n = A.shape[-1]
    cols = []
    for k in range(n - 1):
        row = A[k, k + 1:]
        s = jnp.sum(row)
        col = A[k + 1:, k] / s
        cols.append(col)
        A = A.at[k + 1:, k + 1:].add(jnp.outer(col, row))
    x = jnp.ones((1,), dtype=A.dtype)
    for k in range(n - 2, -1, -1):
        xk = jnp.dot(x, cols[k], precision=jax.lax.Precision.HIGHEST)
        x = jnp.concatenate([xk[None], x])
        x = x / jnp.sum(x)
    return x, A


def _factor_flag(A, x):
    """:func:`_range_flag` of the factors held in an eliminated ``A`` (step ``k``'s rates
    into state ``k`` below the diagonal in column ``k``, its rates out above in row
    ``k``), from per-step minima: the smallest ratio of step ``k`` is its smallest
    positive rate in over its pivot, its smallest update product that ratio times its
    smallest rate out. No ``(n-1, n)`` ratio array is formed."""
    n = A.shape[-1]
    lower = jnp.tri(n, k=-1, dtype=bool)
    pos = jnp.where(A > 0, A, jnp.inf)
    piv = jnp.sum(jnp.where(lower.T, A, 0.0), axis=-1)[:-1]
    min_in = jnp.min(jnp.where(lower, pos, jnp.inf), axis=0)[:-1]
    min_out = jnp.min(jnp.where(lower.T, pos, jnp.inf), axis=1)[:-1]
    small = (jnp.min(min_in) < SMALL) | (jnp.min(min_out) < SMALL)
    min_col = min_in / piv
    ratio = jnp.any((min_col < FLOOR) & jnp.isfinite(piv))
    product = jnp.any(min_col < FLOOR / min_out)
    has_source = jnp.concatenate([jnp.isfinite(min_in), jnp.zeros(1, bool)])
    feeds = jnp.any(lower & (A > 0), axis=1)
    weight = jnp.any((x < SMALL) & ((x > 0) | has_source | feeds))
    return (small | ratio | product | weight).astype(x.dtype)


_SEGMENTS = 8
#: Segments cost compile time (fwd ~1.2 s, grad ~5 s more than one loop) and save run time
#: (n = 500: 23 ms instead of 66 ms; n = 2,000: 2.9 s instead of 8.6 s); they pay off
#: within one call from about a thousand states.
_SEGMENT_FROM = 1024


def _gth_loop(A):
    """GTH with masked updates in fori_loops, for larger chains.

    From ``_SEGMENT_FROM`` states on, the n - 1 elimination steps run in ``_SEGMENTS``
    segments; each works on the trailing submatrix ``A[k0:, k0:]`` (a static slice), so
    the masked rank-1 updates touch about n^3/3 entries in all instead of n^3 (2,000
    states: 2.9 s instead of 8.6 s), while the compiled program stays ``_SEGMENTS`` small
    loops whatever n is.
    """
    n = A.shape[-1]
    steps = n - 1
    piv = jnp.ones(n, dtype=A.dtype)
    size = -(-steps // _SEGMENTS) if n >= _SEGMENT_FROM else steps
    for k0 in range(0, steps, size):
        k1 = min(k0 + size, steps)
        local = jnp.arange(n - k0)

        def eliminate(j, carry, local=local, k0=k0):
            T, piv = carry
            later = local > j
            row = jnp.where(later, T[j], 0.0)
            s = jnp.sum(row)
            col = jnp.where(later, T[:, j], 0.0) / s
            T = T + jnp.outer(col, row)
            return T.at[:, j].set(jnp.where(later, col, T[:, j])), piv.at[k0 + j].set(s)

        T, piv = jax.lax.fori_loop(0, k1 - k0, eliminate, (A[k0:, k0:], piv))
        A = A.at[k0:, k0:].set(T)
    idx = jnp.arange(n)

    def back(j, x):
        k = n - 2 - j
        xk = jnp.dot(jnp.where(idx > k, x, 0.0), A[:, k], precision=jax.lax.Precision.HIGHEST)
        x = x.at[k].set(xk)
        return x / jnp.sum(x)

    x0 = jnp.zeros(n, dtype=A.dtype).at[n - 1].set(1.0)
    x = jax.lax.fori_loop(0, n - 1, back, x0)
    C = jnp.tril(A, -1).T[:-1]  # row k: the ratios of step k
    W = jnp.triu(A, 1)[:-1]  # row k: the rates out of state k at its step
    return x, _range_flag(C * piv[:-1, None], C, W, piv[:-1], x)


#: Under ``vmap`` a batch of small chains is solved in chunks of at most about this many
#: bytes of generators (``lax.map`` over vmapped chunks): XLA on the CPU writes every
#: elimination step's intermediates for the whole batch, and chunks that stay in cache are
#: 2-3x faster than one pass (measured: 100,000 16-state chains, 0.15-0.16 s in 20 chunks
#: of 5,000 against 0.37-0.49 s in one).
_BATCH_CHUNK_BYTES = 10 * 2**20


def _offdiag_gth(Q):
    return _gth_unrolled(_offdiag(Q))


def _clear_of_range(A, x):
    """Per chain of a batch, True when no condition of :func:`_factor_flag` can hold: a
    sufficient test from two whole-matrix reductions instead of its per-step minima.

    ``A`` is the ``(batch, n, n)`` eliminated matrix, ``x`` the ``(batch, n)`` answers.
    ``lo`` is the smallest positive entry (``-inf`` when an entry is negative: such a
    chain is left to the exact check; the diagonal's sums of products take part, which
    can only lower ``lo``), and ``hi = (n - 1) max A`` bounds every pivot (a sum of at
    most ``n - 1`` entries; the factor ``1 + 2^-30`` covers a sum rounded in another
    order). Every censored rate in or out is then at least ``lo``, every ratio at least
    ``lo / hi`` and every update product at least ``lo^2 / hi``, so ``lo >= SMALL``,
    ``lo / hi >= FLOOR`` and ``lo / hi >= FLOOR / lo`` (rounded as :func:`_factor_flag`
    rounds them; rounding is monotone) rule out its rate, ratio and product conditions,
    and every probability at least ``SMALL`` rules out its weight condition. NaN fails
    the test (comparisons with NaN are false). Failing it refuses nothing: the exact
    check decides."""
    n = A.shape[-1]
    lo = jnp.min(jnp.where(A > 0, A, jnp.where(A < 0, -jnp.inf, jnp.inf)), axis=(-2, -1))
    hi = jnp.max(A, axis=(-2, -1)) * ((n - 1) * (1.0 + 2.0**-30))
    ratio = lo / hi
    return (lo >= SMALL) & (ratio >= FLOOR) & (ratio >= FLOOR / lo) & jnp.all(x >= SMALL, axis=-1)


def _batch_gth(Q):
    """``(pi, bad)`` of a ``(batch, n, n)`` stack, each chain as :func:`_offdiag_gth`.

    The exact range check (:func:`_factor_flag`: per-step minima over the eliminated
    matrix, a masked pass per condition) cost as much as the elimination itself under
    ``vmap`` (100,000 16-state chains: 0.50 s against 0.29 s without it). Here the
    batch first takes :func:`_clear_of_range`, and only a batch in which some chain fails
    it runs the exact check (a real branch: ``lax.cond`` on the whole batch), so every
    answer is checked, by the exact test wherever the cheap one cannot clear it."""
    x, A = jax.vmap(lambda q: _eliminate_unrolled(_offdiag(q)))(Q)
    bad = jax.lax.cond(jnp.all(_clear_of_range(A, x)), lambda: jnp.zeros(x.shape[:1], x.dtype),
                       lambda: jax.vmap(_factor_flag)(A, x))
    return x, bad


def _chunk_size(batch: int, max_chunk: int) -> int:
    """A chunk size that divides ``batch`` (a remainder costs a second code path and a
    concatenation), between half of ``max_chunk`` and ``max_chunk`` when there is one."""
    if batch <= max_chunk:
        return batch
    for size in range(max_chunk, max_chunk // 2, -1):
        if batch % size == 0:
            return size
    return max_chunk


@jax.custom_batching.custom_vmap
def _gth_chunked(Q):
    return _offdiag_gth(Q)


@_gth_chunked.def_vmap
def _gth_chunked_rule(axis_size, in_batched, Q):
    (batched,) = in_batched
    if not batched:
        return _offdiag_gth(Q), (False, False)
    n = Q.shape[-1]
    chunk = _chunk_size(axis_size, max(1, _BATCH_CHUNK_BYTES // (n * n * Q.dtype.itemsize)))
    if chunk >= axis_size:
        return _batch_gth(Q), (True, True)
    whole = axis_size - axis_size % chunk  # lax.map over chunks (by hand: older JAX
    body = Q[:whole].reshape((whole // chunk, chunk) + Q.shape[1:])  # lacks its batch_size)
    pi, bad = jax.lax.map(_batch_gth, body)
    pi = pi.reshape((whole,) + Q.shape[2:])
    bad = bad.reshape((whole,))
    if whole < axis_size:
        rest, rest_bad = _batch_gth(Q[whole:])
        pi = jnp.concatenate([pi, rest])
        bad = jnp.concatenate([bad, rest_bad])
    return (pi, bad), (True, True)


@jax.custom_jvp
def _gth_small(Q):
    """GTH of a small chain, with a chunked batching rule (values as ``_offdiag_gth``).

    ``custom_vmap`` functions are not differentiable, so derivatives come from this
    ``custom_jvp``: the forward-mode derivative of the plain elimination (reverse mode
    transposes it), exactly what differentiating ``_offdiag_gth`` gives.
    """
    return _gth_chunked(Q)


@_gth_small.defjvp
def _gth_small_jvp(primals, tangents):
    (x, bad), (dx, _) = jax.jvp(_offdiag_gth, primals, tangents)
    return (x, bad), (dx, jnp.zeros_like(bad))


def _gth_checked(Q, unroll: bool | None = None):
    """``(pi, bad)``: GTH and 1.0 where an elimination ratio or rate became subnormal."""
    Q = jnp.asarray(Q)
    if not jnp.issubdtype(Q.dtype, jnp.floating):
        Q = Q.astype(jnp.result_type(float))
    n = Q.shape[-1]
    if n == 1:
        return jnp.ones((1,), dtype=Q.dtype), jnp.zeros((), Q.dtype)
    small = n <= _UNROLL_LIMIT if unroll is None else bool(unroll)
    return _gth_small(Q) if small else _gth_loop(_offdiag(Q))


def gth(Q, *, unroll: bool | None = None):
    """Stationary distribution of an irreducible chain by GTH elimination (JAX, no checks).

    Only the off-diagonal entries of ``Q`` are read, so a transition matrix ``P`` works as
    well as a generator. Safe under ``jax.jit``, ``jax.vmap`` and ``jax.grad``; a reducible
    chain gives NaN (a zero pivot). This is the bare algorithm: it does not say whether
    the answer is certified (see :func:`solve_stationary`, which does, under ``jit`` too).

    Args:
        Q: ``(n, n)`` JAX or numpy array of rates (per second) or probabilities.
        unroll: ``None`` (default): chains up to 24 states are eliminated with the steps
            unrolled at trace time (fastest to run, batched above all), larger ones in a
            loop; ``False``: always the loop, whose compiled program does not grow with
            ``n`` (for a model solved once, where XLA's compile time dominates: 35 %
            less compile for the availability solver); ``True``: always unrolled.

    Returns:
        ``pi``, shape ``(n,)``, summing to 1.
    """
    return _gth_checked(Q, unroll)[0]


_gth_jit = jax.jit(_gth_checked)


def _traced_status(pi, bad, n: int, rtol: float):
    """Status of a traced GTH as an int32 array. Dense worst-case bound (static); underflow
    of a rate or ratio, or a probability computed from one below the float64 range (the
    plain back substitution cannot carry it), voids the certificate. Probabilities below
    2.2e-308 that feed no other are returned below it, as the stated accuracy allows."""
    finite = jnp.all(jnp.isfinite(pi))
    certified = dense_error_bound(n) <= rtol
    status = jnp.where(~finite, int(Status.NONFINITE),
                       jnp.where(bad > 0, int(Status.UNDERFLOW),
                                 int(Status.SUCCESS) if certified else int(Status.UNCERTIFIED)))
    return status.astype(jnp.int32)


def _traced_result(Q, rtol: float) -> StationaryResult:
    """GTH with its status, bound and residual as arrays (jit/vmap-safe)."""
    Q = jnp.asarray(Q)
    n = Q.shape[-1]
    pi, bad = _gth_checked(Q)
    M = _offdiag(Q)
    M = M - jnp.diag(jnp.sum(M, axis=-1))
    r = jnp.sum(jnp.abs(pi @ M)) / jnp.maximum(jnp.sum(jnp.abs(pi) @ jnp.abs(M)), FLOOR)
    return StationaryResult(pi, _traced_status(pi, bad, n, rtol), r, "GTH", jnp.asarray(dense_error_bound(n)),
                            jnp.log(pi))


# ----------------------------------------------------------------------------- host solves


def _from_host(gth_out: HostGTH, Q, rtol: float, name: str, n: int) -> StationaryResult:
    if not gth_out.finite:
        return StationaryResult(np.full(n, np.nan), Status.NONFINITE, float("nan"), name)
    pi, log_pi = scaled_normalise(gth_out.mantissa, gth_out.exponent)
    with np.errstate(over="ignore"):
        bound = float(np.expm1(gth_out.log_bound))
    if gth_out.underflow:
        status = Status.UNDERFLOW
    else:
        status = Status.SUCCESS if bound <= rtol else Status.UNCERTIFIED
    return StationaryResult(pi, status, residual(Q, pi), name, bound, log_pi)


def _solve_dense_host(chain, rtol: float) -> StationaryResult:
    m = chain.matrix
    if isinstance(m, jax.Array):
        pi, bad = _gth_jit(m)
        host = np.asarray(pi)
        if np.isfinite(host).all() and not float(bad) and host.min() >= FLOOR:
            bound = dense_error_bound(chain.n)
            Q = sparse_generator(chain)
            status = Status.SUCCESS if bound <= rtol else Status.UNCERTIFIED
            with np.errstate(divide="ignore"):
                log_pi = np.log(host)
            return StationaryResult(pi, status, residual(Q, host), "GTH", bound, jnp.asarray(log_pi))
        res = _from_host(dense_gth(np.asarray(m, dtype=float)), sparse_generator(chain), rtol, "GTH", chain.n)
        return dataclasses.replace(res, pi=jnp.asarray(res.pi),
                                   log_pi=None if res.log_pi is None else jnp.asarray(res.log_pi))
    return _from_host(dense_gth(chain.to_dense()), sparse_generator(chain), rtol, "GTH", chain.n)


#: Sparse chains up to this size retry on the dense host GTH when the banded one cannot certify.
_DENSE_FALLBACK = 3000
#: Bands at least this wide go to the blocked solver (:mod:`._gth_blocked`): on two cores the
#: sliding window and the blocked panels break even near w = 256 (a 66,560-state grid chain,
#: 6-7 s each), and at w = 400 the blocked one is twice as fast.
BLOCKED_FROM = 256
#: The blocked solver takes a chain when its work (:func:`._gth_blocked.envelope_work`, the
#: squared envelope fronts summed over the states) is at most this (about four minutes on
#: two cores) ...
BLOCKED_WORK_LIMIT = 2e12
#: ... and ``n w`` (its stored ratio columns, float64) at most this (4 GB). Pinned LU, the
#: path beyond, is no cheaper on such chains: on a 38,765-state inference fleet (w = 1,711)
#: it took 51 s and 1.4 GB and came back uncertified, the blocked GTH 12 s and 0.6 GB,
#: certified; on 96,339 states (w = 2,371) 270 s against 52 s and 2.0 GB; on 106,085 states
#: (w = 4,688, work 1.7e12) it had not finished after 15 minutes and 6.5 GB, the blocked
#: GTH took 176 s and 4.5 GB.
BLOCKED_MEMORY_LIMIT = 5e8


def _band_fits(n: int, w: int) -> bool:
    return n * (w + 1) ** 2 <= BAND_WORK_LIMIT and n * max(w, 1) <= BAND_MEMORY_LIMIT


def _blocked_fits(Q, perm, n: int, w: int) -> bool:
    if n * max(w, 1) > BLOCKED_MEMORY_LIMIT:
        return False
    # n w^2 bounds the work from above; the envelope (an O(nnz) pass) only where it must decide
    return n * float(w + 1) ** 2 <= BLOCKED_WORK_LIMIT or envelope_work(Q, perm, w) <= BLOCKED_WORK_LIMIT


def _blocked(Qp, perm, n: int, w: int, rtol: float) -> StationaryResult:
    res = _from_host(blocked_banded_gth(Qp, w), Qp, rtol, "SparseDirect[blocked banded GTH]", n)
    return _unpermuted(res, perm, n)


def _unpermuted(res: StationaryResult, perm, n: int) -> StationaryResult:
    if perm is None or res.log_pi is None:
        return res
    pi, log_pi = np.empty(n), np.empty(n)
    pi[perm], log_pi[perm] = res.pi, res.log_pi
    return dataclasses.replace(res, pi=pi, log_pi=log_pi)


def _solve_sparse(chain, method) -> StationaryResult:
    Q = sparse_generator(chain)
    n = Q.shape[0]
    if n == 1:
        return StationaryResult(np.ones(1), Status.SUCCESS, 0.0, type(method).__name__, 0.0, np.zeros(1))
    if isinstance(method, SparseDirect):
        perm, w = band_order(Q)  # GTH reads only the off-diagonal rates
        if n <= _DENSE_FALLBACK and n * (w + 1) ** 2 > n**3 / 30:
            # a wide band: dense blocked GTH (BLAS-3, n^3/3) is the faster elimination
            return _from_host(dense_gth(Q.toarray()), Q, method.rtol, "SparseDirect[dense GTH]", n)
        # every band the sliding window takes, the blocked solver takes too (its limits are wider)
        blocked_fits = _blocked_fits(Q, perm, n, w)
        if blocked_fits:
            Qp = Q if perm is None else Q[perm][:, perm].tocsr()
        if _band_fits(n, w) and w < BLOCKED_FROM:
            res = _unpermuted(_from_host(banded_gth(Qp, w), Qp, method.rtol, "SparseDirect[banded GTH]", n), perm, n)
            if res.status in (Status.UNCERTIFIED, Status.UNDERFLOW) and n <= _DENSE_FALLBACK:
                # XLA flushes subnormals to zero, so rates near 2.2e-308 widen the banded
                # bound; numpy underflows gradually and can still certify a small chain
                dense = _from_host(dense_gth(Q.toarray()), Q, method.rtol, "SparseDirect[dense GTH]", n)
                if dense.status == Status.SUCCESS:
                    return dense
            elif res.status == Status.UNCERTIFIED:
                # the bound of float64 pivot sums grows as n w^2; extended-precision pivots
                # (the blocked solver's) bring it down by a factor of about w
                blocked = _blocked(Qp, perm, n, w, method.rtol)
                if blocked.status == Status.SUCCESS:
                    return blocked
            return res
        if blocked_fits:
            return _blocked(Qp, perm, n, w, method.rtol)
        pi, converged, r = pinned_stationary(Q)
        name = "SparseDirect[pinned LU]"
    else:
        pi, converged, r = pinned_stationary(Q, gmres=(method.tol, method.maxiter))
        name = "SparseIterative"
    if not np.isfinite(pi).all():
        return StationaryResult(pi, Status.NONFINITE, r, name)
    status = Status.UNCERTIFIED if converged else Status.NOT_CONVERGED
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    return StationaryResult(pi, status, r, name, float("inf"), log_pi)


# ----------------------------------------------------------------------------- public


def _pick_method(chain, method):
    if method is not None:
        if not isinstance(method, (GTH, SparseDirect, SparseIterative)):
            raise TypeError(f"method={method!r}: expected GTH(), SparseDirect() or SparseIterative()")
        return method
    m = chain.matrix
    if sp.issparse(m) and chain.n > DENSE_LIMIT:
        return SparseDirect()
    return GTH()


def _solve_irreducible(chain, method) -> StationaryResult:
    if isinstance(method, GTH):
        return _solve_dense_host(chain, method.rtol)
    return _solve_sparse(chain, method)


def _restrict(chain, states: np.ndarray):
    m = chain.matrix
    if sp.issparse(m):
        sub = m.tocsr()[states][:, states]
    else:
        sub = np.asarray(m)[np.ix_(states, states)]
    return type(chain)(sub)


def _embed(sub: StationaryResult, cls: np.ndarray, n: int, as_jax: bool) -> StationaryResult:
    host = np.zeros(n)
    host[cls] = np.asarray(sub.pi)
    log_pi = None
    if sub.log_pi is not None:
        log_pi = np.full(n, -np.inf)
        log_pi[cls] = np.asarray(sub.log_pi)
    wrap = jnp.asarray if as_jax else (lambda a: a)
    return dataclasses.replace(sub, pi=wrap(host), log_pi=None if log_pi is None else wrap(log_pi))


def _method_of(chain_or_matrix):
    return chain_or_matrix.matrix if isinstance(chain_or_matrix, (CTMC, DTMC)) else chain_or_matrix


def solve_stationary(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None) -> StationaryResult:
    """Solve for the stationary distribution and report what was proven.

    Validates the chain on the host first. A chain with transient states and one
    recurrent class is solved on that class (zeros elsewhere). Several recurrent classes
    give :class:`ReducibleChainError`, which lists them (see
    :func:`stationary_distributions` for one distribution per class). Under ``jax.jit`` /
    ``jax.vmap`` (a traced dense chain) this runs GTH with no host checks and returns the
    result with ``status`` as an integer array; it never raises there.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator matrix (dense or sparse).
        method: ``GTH()`` (default up to 1,000 states), ``SparseDirect()`` (default for
            larger sparse chains) or ``SparseIterative(tol, maxiter)``.

    Returns:
        :class:`StationaryResult` with ``pi``, ``status`` (``SUCCESS`` only when every
        probability >= 2.2e-308 is proven within ``error_bound <= rtol``), ``residual``,
        the method's name, ``error_bound`` and ``log_pi``.
    """
    m = _method_of(chain)
    if is_traced(m):
        if method is not None and not isinstance(method, GTH):
            raise TypeError("only GTH() runs under jax transformations; sparse solvers run on the host")
        return _traced_result(m, (method or GTH()).rtol)
    chain = validate_chain(chain)
    method = _pick_method(chain, method)
    classes = recurrent_classes(chain)
    if len(classes) > 1:
        shown = "; ".join(_show_class(chain, c) for c in classes[:5])
        raise ReducibleChainError(
            f"the chain has {len(classes)} recurrent classes ({shown}{'; ...' if len(classes) > 5 else ''}), "
            "so it has no unique stationary distribution; use stationary_distributions() for one per class",
            [c.tolist() for c in classes],
        )
    cls = classes[0]
    if len(cls) == chain.n:
        return _solve_irreducible(chain, method)
    sub = _solve_irreducible(_restrict(chain, cls), method)
    return _embed(sub, cls, chain.n, isinstance(chain.matrix, jax.Array))


def _show_class(chain, c) -> str:
    labels = chain.labels
    items = [repr(labels[i]) if labels else str(int(i)) for i in c[:4]]
    return "{" + ", ".join(items) + (", ..." if len(c) > 4 else "") + "}"


#: Statuses whose answer is returned with a MarkovsimWarning rather than refused.
_WARN = (Status.UNCERTIFIED,)


def _check(result: StationaryResult, where: str):
    status = Status(int(result.status))
    if status == Status.SUCCESS:
        return
    text = (f"{where}: {status.message} (status {status.name}, residual {float(result.residual):.3g}, "
            f"error bound {float(result.error_bound):.3g}, method {result.method})")
    if status in _WARN:
        hint = ("; pass method=SparseDirect() (certified GTH on the band) or the default"
                if result.method == "SparseIterative" else
                "; a larger rtol (e.g. GTH(rtol=1e-4)) accepts the bound shown" if np.isfinite(
                    float(result.error_bound)) else "")
        warnings.warn(text + hint, MarkovsimWarning, stacklevel=3)
        return
    raise SolverError(text)


def stationary_distribution(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None):
    """The stationary distribution :math:`\\pi` (row vector, sums to 1).

    With a JAX array (or a :class:`CTMC` / :class:`DTMC` holding one) inside ``jax.jit``,
    ``jax.vmap`` or ``jax.grad`` this is GTH with no host checks: an answer that is not
    certified (a reducible chain, a probability or a ratio below the float64 range) comes
    back as NaN, never as a plausible-looking number; :func:`solve_stationary` gives the
    status. Outside tracing the chain is validated first and a failure raises.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second).
        method: see :func:`solve_stationary`.

    Returns:
        ``pi``: numpy for numpy or sparse input, JAX for JAX input. Probabilities below
        2.2e-308 come out below it (``solve_stationary(...).log_pi`` has them all).

    Raises:
        InvalidChainError: the matrix is not a generator / transition matrix.
        ReducibleChainError: several recurrent classes.
        SolverError: no answer, or one whose certificate failed (``UNDERFLOW``); the
            message gives status, residual, bound and method.

    Warns:
        MarkovsimWarning: an ``UNCERTIFIED`` answer (small residual, nothing proven).

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
        >>> markovsim.stationary_distribution(Q).round(6).tolist()
        [0.666667, 0.333333]
    """
    m = _method_of(chain)
    if is_traced(m):
        if method is not None and not isinstance(method, GTH):
            raise TypeError("only GTH() runs under jax transformations; sparse solvers run on the host")
        pi, bad = _gth_checked(m)
        status = _traced_status(pi, bad, m.shape[-1], (method or GTH()).rtol)
        return jnp.where(status == int(Status.SUCCESS), pi, jnp.nan)
    result = solve_stationary(chain, method=method)
    _check(result, "stationary_distribution")
    return result.pi


def stationary_distributions(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None) -> np.ndarray:
    """One stationary distribution per recurrent class, as rows of an ``(k, n)`` array.

    Row ``c`` is supported on the ``c``-th recurrent class (ordered by smallest state
    index, as :func:`recurrent_classes` returns them). Every stationary distribution of
    the chain is a convex combination of these rows. Each class is solved and checked as
    :func:`stationary_distribution` does.
    """
    chain = validate_chain(chain)
    method = _pick_method(chain, method)
    out = []
    for cls in recurrent_classes(chain):
        res = _solve_irreducible(_restrict(chain, cls), method)
        _check(res, f"stationary_distributions: class starting at state {int(cls[0])}")
        row = np.zeros(chain.n)
        row[cls] = np.asarray(res.pi)
        out.append(row)
    return np.array(out)
