"""Stationary distributions.

For an irreducible CTMC the stationary distribution is the unique row vector with
:math:`\\pi Q = 0`, :math:`\\sum_i \\pi_i = 1`; for a DTMC, :math:`\\pi P = \\pi`.

Dense chains are solved by GTH elimination (Grassmann, Taksar and Heyman 1985): a
variant of Gaussian elimination that uses only off-diagonal rates and sums of positive
numbers, so there is no subtraction and no cancellation. It is accurate to a few ulps in
every component even for stiff and nearly decomposable chains, where ``np.linalg.solve``
loses digits. The back substitution is rescaled at every step so the unnormalised weights
never overflow (a 2,000-state birth-death chain of a repairable cluster passes 1e308
otherwise).

Large sparse chains are solved on scipy's side with one probability pinned and its
equation replaced by ``pi[pin] = 1`` (a row of ones would fill the LU in to O(n^2)):
LAPACK's banded LU when ``Q`` has a narrow band (birth-death chains: O(n)), else
SuperLU, or GMRES with an incomplete-LU preconditioner. The pin goes where the
probability is (pinning a rarely visited state makes the system nearly singular; see
:func:`_solve_sparse`). Every solve reports a status and the normalised residual
:math:`\\lVert \\pi Q \\rVert_1 / (|\\pi|\\,|Q|)`.
"""

from __future__ import annotations

import dataclasses
import enum
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.linalg as sla
import scipy.sparse.linalg as spla

from .._errors import InvalidChainError, ReducibleChainError, SolverError
from ._chain import CTMC, DTMC, as_chain, is_traced
from ._structure import recurrent_classes, validate_chain

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
    """Outcome of a solve."""

    SUCCESS = 0
    NOT_CONVERGED = 1
    REDUCIBLE = 2
    NONFINITE = 3
    INACCURATE = 4

    @property
    def message(self) -> str:
        return {
            0: "solved",
            1: "the iterative solver did not reach its tolerance",
            2: "the chain is reducible (a zero pivot): no unique stationary distribution",
            3: "the solution is not finite",
            4: "the residual |pi Q| is above the solver's tolerance (an ill-conditioned solve)",
        }[int(self)]


@dataclasses.dataclass(frozen=True)
class GTH:
    """Dense GTH elimination; jit/vmap/grad-safe on JAX arrays."""


@dataclasses.dataclass(frozen=True)
class SparseDirect:
    """Sparse LU (SuperLU) of the generator with one probability pinned."""


@dataclasses.dataclass(frozen=True)
class SparseIterative:
    """GMRES on the pinned system with an incomplete-LU preconditioner.

    Attributes:
        tol: tolerance on the normalised residual
            :math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|)`.
        maxiter: most GMRES restarts (of 50 iterations each).
    """

    tol: float = 1e-12
    maxiter: int = 1000


@dataclasses.dataclass(frozen=True)
class StationaryResult:
    """A stationary solve: the distribution, a status, the residual and the method used."""

    pi: Any
    status: Status
    residual: float
    method: str


# ----------------------------------------------------------------------------- dense GTH (JAX)


def _offdiag(A):
    n = A.shape[-1]
    return jnp.where(jnp.eye(n, dtype=bool), 0.0, A)


def _gth_unrolled(A):
    """GTH with static slices, for small chains (unrolled at trace time)."""
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
    return x


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
    size = -(-steps // _SEGMENTS) if n >= _SEGMENT_FROM else steps
    for k0 in range(0, steps, size):
        k1 = min(k0 + size, steps)
        local = jnp.arange(n - k0)

        def eliminate(j, T, local=local):
            later = local > j
            row = jnp.where(later, T[j], 0.0)
            s = jnp.sum(row)
            col = jnp.where(later, T[:, j], 0.0) / s
            T = T + jnp.outer(col, row)
            return T.at[:, j].set(jnp.where(later, col, T[:, j]))

        A = A.at[k0:, k0:].set(jax.lax.fori_loop(0, k1 - k0, eliminate, A[k0:, k0:]))
    idx = jnp.arange(n)

    def back(j, x):
        k = n - 2 - j
        xk = jnp.dot(jnp.where(idx > k, x, 0.0), A[:, k], precision=jax.lax.Precision.HIGHEST)
        x = x.at[k].set(xk)
        return x / jnp.sum(x)

    x0 = jnp.zeros(n, dtype=A.dtype).at[n - 1].set(1.0)
    return jax.lax.fori_loop(0, n - 1, back, x0)


#: Under ``vmap`` a batch of small chains is solved in chunks of at most about this many
#: bytes of generators (``lax.map`` over vmapped chunks): XLA on the CPU writes every
#: elimination step's intermediates for the whole batch, and chunks that stay in cache are
#: 2-3x faster than one pass (measured: 100,000 16-state chains, 0.15-0.16 s in 20 chunks
#: of 5,000 against 0.37-0.49 s in one).
_BATCH_CHUNK_BYTES = 10 * 2**20


def _offdiag_gth(Q):
    return _gth_unrolled(_offdiag(Q))


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
        return _offdiag_gth(Q), False
    n = Q.shape[-1]
    chunk = _chunk_size(axis_size, max(1, _BATCH_CHUNK_BYTES // (n * n * Q.dtype.itemsize)))
    if chunk >= axis_size:
        return jax.vmap(_offdiag_gth)(Q), True
    whole = axis_size - axis_size % chunk  # lax.map over vmapped chunks (by hand: older JAX
    body = Q[:whole].reshape((whole // chunk, chunk) + Q.shape[1:])  # lacks its batch_size)
    pi = jax.lax.map(jax.vmap(_offdiag_gth), body).reshape((whole,) + Q.shape[2:])
    if whole < axis_size:
        pi = jnp.concatenate([pi, jax.vmap(_offdiag_gth)(Q[whole:])])
    return pi, True


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
    return jax.jvp(_offdiag_gth, primals, tangents)


def gth(Q):
    """Stationary distribution of an irreducible chain by GTH elimination (JAX, no checks).

    Only the off-diagonal entries of ``Q`` are read, so a transition matrix ``P`` works as
    well as a generator. Safe under ``jax.jit``, ``jax.vmap`` and ``jax.grad``; a reducible
    chain gives NaN (a zero pivot), never a plausible-looking number.

    Args:
        Q: ``(n, n)`` JAX or numpy array of rates (per second) or probabilities.

    Returns:
        ``pi``, shape ``(n,)``, summing to 1.
    """
    Q = jnp.asarray(Q)
    if not jnp.issubdtype(Q.dtype, jnp.floating):
        Q = Q.astype(jnp.result_type(float))
    n = Q.shape[-1]
    if n == 1:
        return jnp.ones((1,), dtype=Q.dtype)
    return _gth_small(Q) if n <= _UNROLL_LIMIT else _gth_loop(_offdiag(Q))


_gth_jit = jax.jit(gth)


_PANEL = 64


def _gth_numpy(Q: np.ndarray) -> np.ndarray:
    """GTH on the host (numpy), the same algorithm as :func:`gth`, blocked for speed.

    Right-looking elimination in panels of ``_PANEL`` states: inside a panel each step
    updates only the panel's columns and rows (rank-1, O(n b)); the rest of the matrix
    gets the whole panel at once as one matrix product ``C @ R`` with ``C, R >= 0``.
    Every update still adds products of non-negative numbers, so the method stays
    subtraction-free (GTH's accuracy), and the O(n^3/3) work runs in BLAS-3: a
    2,000-state chain takes a fraction of a second instead of several seconds.
    """
    A = np.array(Q, dtype=float, copy=True)
    n = A.shape[0]
    np.fill_diagonal(A, 0.0)
    for k0 in range(0, n - 1, _PANEL):
        k1 = min(k0 + _PANEL, n - 1)
        for k in range(k0, k1):
            s = A[k, k + 1:].sum()
            if not s > 0:
                return np.full(n, np.nan)
            col = A[k + 1:, k]
            col /= s
            row = A[k, k + 1:k1]
            if row.size:
                A[k + 1:, k + 1:k1] += np.outer(col, row)  # the panel's columns, every row below
            if k + 1 < k1:
                A[k + 1:k1, k1:] += np.outer(col[:k1 - k - 1], A[k, k1:])  # the panel's rows
        if k1 < n:
            A[k1:, k1:] += A[k1:, k0:k1] @ A[k0:k1, k1:]
    x = np.zeros(n)
    x[n - 1] = 1.0
    for k in range(n - 2, -1, -1):
        x[k] = x[k + 1:] @ A[k + 1:, k]
        x[k:] /= x[k:].sum()
    return x


# ----------------------------------------------------------------------------- sparse


def _sparse_generator(chain) -> sp.csr_matrix:
    m = chain.matrix
    m = m.tocsr().astype(float) if sp.issparse(m) else sp.csr_matrix(np.asarray(m, dtype=float))
    if isinstance(chain, DTMC):
        m = m - sp.identity(m.shape[0], format="csr")
    else:
        # rebuild the diagonal from the rates so rounding in a given diagonal cannot bias pi
        off = m - sp.diags(m.diagonal())
        m = off - sp.diags(np.asarray(off.sum(axis=1)).ravel())
    return m.tocsr()


def _residual(Q: sp.csr_matrix, pi: np.ndarray) -> float:
    r = Q.T @ pi
    scale = abs(Q).T @ np.abs(pi)
    return float(np.abs(r).sum() / max(scale.sum(), np.finfo(float).tiny))


#: A sparse solve whose relative residual is above this is reported as INACCURATE.
_SPARSE_RESIDUAL_TOL = 1e-10
#: ``Q^T`` with lower + upper bandwidth up to this goes to LAPACK's banded LU (O(n)).
_BAND_LIMIT = 16
#: A pin is accepted when its probability is at least this fraction of the largest one.
_PIN_RATIO = 1e-3


@dataclasses.dataclass(frozen=True)
class _Band:
    """``Q^T`` in LAPACK band storage: ``ab[ku + i - j, j] = Q^T[i, j]``."""

    ab: np.ndarray
    kl: int
    ku: int


def _band_storage(Q: sp.csr_matrix) -> _Band | None:
    """``Q^T`` in band storage when its bandwidth is at most ``_BAND_LIMIT``, else None."""
    coo = Q.tocoo()
    i, j = coo.col, coo.row  # entry (i, j) of Q^T
    d = j.astype(np.int64) - i
    ku = max(int(d.max(initial=0)), 0)
    kl = max(int(-d.min(initial=0)), 0)
    if kl + ku > _BAND_LIMIT:
        return None
    ab = np.zeros((kl + ku + 1, Q.shape[0]))
    ab[ku + i - j, j] = coo.data
    return _Band(ab, kl, ku)


def _guess_pin(Q: sp.csr_matrix, sweeps: int = 64) -> int:
    """A state likely to carry much probability: damped Jacobi sweeps on pi Q = 0.

    ``x <- (x + x R / out) / 2`` from the uniform vector (``R`` the off-diagonal rates,
    ``out`` the total outflows) has pi as its fixed point; a few dozen sweeps (one sparse
    product each) usually move the largest entry into the bulk of the distribution.
    """
    out = -Q.diagonal()
    out = np.where(out > 0, out, 1.0)
    RT = (Q - sp.diags(Q.diagonal())).T.tocsr()
    x = np.ones(Q.shape[0])
    for _ in range(sweeps):
        x = 0.5 * (x + (RT @ x) / out)
        x /= x.max()
    return int(np.argmax(x))


def _pinned_solve(Q: sp.csr_matrix, pin: int, method, band: _Band | None) -> tuple[np.ndarray, Status]:
    """Solve pi Q = 0 with pi[pin] = 1.

    Direct solves replace equation ``pin`` of ``Q^T x = 0`` by ``x[pin] = 1``: the same
    system as dropping the equation and moving the pinned unknown to the right side, but
    it keeps the band (or the sparsity) of ``Q^T`` with no re-indexing (a CSR ``Q`` is
    ``Q^T`` in CSC form at no cost). GMRES works on the reduced system.
    """
    n = Q.shape[0]
    rhs = np.zeros(n)
    rhs[pin] = 1.0
    if isinstance(method, SparseIterative):
        return _pinned_gmres(Q, pin, method)
    if band is not None:
        ab = band.ab.copy()
        js = np.arange(max(0, pin - band.kl), min(n, pin + band.ku + 1))
        ab[band.ku + pin - js, js] = 0.0
        ab[band.ku, pin] = 1.0
        x = sla.solve_banded((band.kl, band.ku), ab, rhs, overwrite_ab=True, overwrite_b=True,
                             check_finite=False)
        return x, Status.SUCCESS
    data = Q.data.copy()
    data[Q.indices == pin] = 0.0
    A = sp.csc_matrix((data, Q.indices, Q.indptr), shape=(n, n))  # Q^T with row `pin` cleared
    lo, hi = Q.indptr[pin], Q.indptr[pin + 1]
    diag = lo + np.flatnonzero(Q.indices[lo:hi] == pin)
    if len(diag):
        data[diag[0]] = 1.0
    else:
        A = (A + sp.csc_matrix(([1.0], ([pin], [pin])), shape=(n, n))).tocsc()
    x = spla.splu(A, permc_spec="COLAMD").solve(rhs)
    return x, Status.SUCCESS


def _pin_ok(x: np.ndarray, pin: int) -> bool:
    """Finite, non-negative up to round-off, and the pinned state not negligible."""
    if not np.isfinite(x).all():
        return False
    big = float(np.max(np.abs(x)))
    return bool(x.min() >= -1e-12 * big and x[pin] >= _PIN_RATIO * big)


def _pinned_gmres(Q: sp.csr_matrix, pin: int, method: "SparseIterative") -> tuple[np.ndarray, Status]:
    """GMRES with an incomplete-LU preconditioner on ``Q^T`` without row and column ``pin``.

    Runs in chunks of a few restarts and stops on markovsim's own criterion, the
    normalised residual :math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|) \\le` ``tol``:
    GMRES's test is relative to the right side (the rates into the pinned state), which
    a well-converged answer can miss by orders of magnitude. A pin that turns out
    negligible ends the solve early so the caller can re-pin.
    """
    n = Q.shape[0]
    coo = Q.T.tocoo()
    r, c, v = coo.row, coo.col, coo.data
    at_pin = (c == pin) & (r != pin)
    rhs = np.zeros(n - 1)
    rr = r[at_pin]
    rhs[rr - (rr > pin)] = -v[at_pin]
    keep = (r != pin) & (c != pin)
    r, c, v = r[keep], c[keep], v[keep]
    B = sp.csc_matrix((v, (r - (r > pin), c - (c > pin))), shape=(n - 1, n - 1))
    try:
        ilu = spla.spilu(B, drop_tol=1e-8, fill_factor=10)
        M = spla.LinearOperator(B.shape, ilu.solve)
    except RuntimeError:
        M = None
    y = None
    done = 0
    x = np.empty(n)
    while True:
        chunk = min(1 if done == 0 else 5, method.maxiter - done)
        y, _ = spla.gmres(B, rhs, x0=y, M=M, rtol=min(method.tol, 1e-14), atol=0.0, restart=50, maxiter=chunk)
        done += chunk
        x[:pin] = y[:pin]
        x[pin] = 1.0
        x[pin + 1:] = y[pin:]
        if not _pin_ok(x, pin):
            return x, Status.NOT_CONVERGED
        pi = np.clip(x, 0.0, None)
        if _residual(Q, pi / pi.sum()) <= method.tol:
            return x, Status.SUCCESS
        if done >= method.maxiter:
            return x, Status.NOT_CONVERGED


def _solve_sparse(chain, method) -> StationaryResult:
    """Pinned sparse solve with a pin choice that keeps the system well conditioned.

    Pinning state ``p`` leaves the generator of the chain killed at ``p``, whose
    condition number grows like :math:`1/\\pi_p`: pinning a rarely visited state gives
    garbage (a 270k-state cluster chain pinned at a state of probability 1e-26 came out
    with residual 6e-2). The solution of such a nearly singular system is dominated by
    its near-null vector, which is :math:`\\pi` up to sign and scale, so the state where
    ``|x|`` is largest is a well-visited one: re-pin there. A solve is accepted when it
    is finite, non-negative up to round-off, and the pinned state holds at least
    ``_PIN_RATIO`` of the largest probability; the final residual decides the status.
    """
    Q = _sparse_generator(chain)
    n = Q.shape[0]
    name = type(method).__name__
    if n == 1:
        return StationaryResult(np.ones(1), Status.SUCCESS, 0.0, name)
    band = None if isinstance(method, SparseIterative) else _band_storage(Q)
    if band is not None:
        # a banded solve costs about as much as a few sparse products: guess cheaply
        out = -Q.diagonal()
        pin = int(np.argmin(np.where(out > 0, out, np.inf)))
    else:
        pin = _guess_pin(Q)
    tried = set()
    for _ in range(4):
        tried.add(pin)
        try:
            x, status = _pinned_solve(Q, pin, method, band)
        except (np.linalg.LinAlgError, RuntimeError):  # an exactly singular pinned system
            x, status = np.full(n, np.nan), Status.NONFINITE
        if _pin_ok(x, pin):
            break
        if np.isfinite(x).any():
            new_pin = int(np.argmax(np.where(np.isfinite(x), np.abs(x), -1.0)))
        else:
            new_pin = _guess_pin(Q)
        if new_pin in tried:
            break
        pin = new_pin
    if not np.isfinite(x).all():
        return StationaryResult(np.full(n, np.nan), Status.NONFINITE, float("nan"), name)
    x = np.clip(x, 0.0, None)  # round-off can leave -1e-17 entries
    pi = x / x.sum()
    residual = _residual(Q, pi)
    if status == Status.SUCCESS and not residual <= _SPARSE_RESIDUAL_TOL:
        status = Status.INACCURATE
    return StationaryResult(pi, status, residual, name)


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


def _dense_residual(chain, pi) -> float:
    M = chain.to_dense().astype(float)
    if isinstance(chain, DTMC):
        M = M - np.eye(M.shape[0])
    else:
        np.fill_diagonal(M, 0.0)
        np.fill_diagonal(M, -M.sum(axis=1))
    r = pi @ M
    scale = np.abs(pi) @ np.abs(M)
    return float(np.abs(r).sum() / max(scale.sum(), np.finfo(float).tiny))


def _solve_irreducible(chain, method) -> StationaryResult:
    if isinstance(method, GTH):
        m = chain.matrix
        if isinstance(m, jax.Array):
            pi = _gth_jit(m)
            host = np.asarray(pi)
        else:
            host = _gth_numpy(chain.to_dense())
            pi = host
        if not np.isfinite(host).all():
            return StationaryResult(pi, Status.NONFINITE, float("nan"), "GTH")
        return StationaryResult(pi, Status.SUCCESS, _dense_residual(chain, host), "GTH")
    return _solve_sparse(chain, method)


def _restrict(chain, states: np.ndarray):
    m = chain.matrix
    if sp.issparse(m):
        sub = m.tocsr()[states][:, states]
    else:
        sub = np.asarray(m)[np.ix_(states, states)]
    return type(chain)(sub)


def solve_stationary(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None) -> StationaryResult:
    """Solve for the stationary distribution and report how the solve went.

    Validates the chain on the host first. A chain with transient states and one
    recurrent class is solved on that class (zeros elsewhere). Several recurrent classes
    give :class:`ReducibleChainError`, which lists them (see
    :func:`stationary_distributions` for one distribution per class).

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator matrix (dense or sparse).
        method: ``GTH()`` (default up to 1,000 states), ``SparseDirect()`` (default for
            larger sparse chains) or ``SparseIterative(tol, maxiter)``.

    Returns:
        :class:`StationaryResult` with ``pi``, ``status``, ``residual``
        (:math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|)`) and the method's name.
    """
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
    host = np.zeros(chain.n)
    host[cls] = np.asarray(sub.pi)
    pi = jnp.asarray(host) if isinstance(chain.matrix, jax.Array) else host
    return StationaryResult(pi, sub.status, sub.residual, sub.method)


def _show_class(chain, c) -> str:
    labels = chain.labels
    items = [repr(labels[i]) if labels else str(int(i)) for i in c[:4]]
    return "{" + ", ".join(items) + (", ..." if len(c) > 4 else "") + "}"


def stationary_distribution(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None):
    """The stationary distribution :math:`\\pi` (row vector, sums to 1).

    With a JAX array (or a :class:`CTMC` / :class:`DTMC` holding one) inside ``jax.jit``,
    ``jax.vmap`` or ``jax.grad`` this is :func:`gth`: no host checks, NaN for a reducible
    chain. Outside tracing the chain is validated first and a failure raises.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second).
        method: see :func:`solve_stationary`.

    Returns:
        ``pi``: numpy for numpy or sparse input, JAX for JAX input.

    Raises:
        InvalidChainError: the matrix is not a generator / transition matrix.
        ReducibleChainError: several recurrent classes.
        SolverError: the solver failed (the message gives status and residual).

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
        >>> markovsim.stationary_distribution(Q).round(6).tolist()
        [0.666667, 0.333333]
    """
    m = chain.matrix if isinstance(chain, (CTMC, DTMC)) else chain
    if is_traced(m):
        if method is not None and not isinstance(method, GTH):
            raise TypeError("only GTH() runs under jax transformations; sparse solvers run on the host")
        return gth(m)
    result = solve_stationary(chain, method=method)
    if result.status != Status.SUCCESS:
        raise SolverError(
            f"stationary_distribution: {result.status.message} (status {result.status.name}, "
            f"residual {result.residual:.3g}, method {result.method})"
        )
    return result.pi


def stationary_distributions(chain: Any, *, method: GTH | SparseDirect | SparseIterative | None = None) -> np.ndarray:
    """One stationary distribution per recurrent class, as rows of an ``(k, n)`` array.

    Row ``c`` is supported on the ``c``-th recurrent class (ordered by smallest state
    index, as :func:`recurrent_classes` returns them). Every stationary distribution of
    the chain is a convex combination of these rows.
    """
    chain = validate_chain(chain)
    method = _pick_method(chain, method)
    out = []
    for cls in recurrent_classes(chain):
        res = _solve_irreducible(_restrict(chain, cls), method)
        if res.status != Status.SUCCESS:
            raise SolverError(f"stationary_distributions: class starting at state {int(cls[0])}: {res.status.message}")
        row = np.zeros(chain.n)
        row[cls] = np.asarray(res.pi)
        out.append(row)
    return np.array(out)
