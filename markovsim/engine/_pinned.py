"""Pinned sparse solves of :math:`\\pi Q = 0`: LU (LAPACK banded or SuperLU) and GMRES.

These are fast and normwise accurate (small :math:`\\lVert\\pi Q\\rVert_1 / (|\\pi|\\,|Q|)`), but
a small residual does not prove a stationary vector: LU computes pivots as differences and
loses the components that depend on small rates (a nearly decomposable chain, a two-well
chain, a probability of 1e-1607 pinned as the largest one). markovsim uses them only where
the certified banded GTH does not fit, and reports their answers as ``UNCERTIFIED``.

One probability is pinned and its equation replaced by ``pi[pin] = 1`` (a row of ones would
fill the LU in to O(n^2)). The pin goes where the probability is (pinning a rarely visited
state makes the system nearly singular; see :func:`pinned_stationary`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ._chain import DTMC

__all__ = ["sparse_generator", "residual", "pinned_stationary"]


def sparse_generator(chain) -> sp.csr_matrix:
    m = chain.matrix
    m = m.tocsr().astype(float) if sp.issparse(m) else sp.csr_matrix(np.asarray(m, dtype=float))
    if isinstance(chain, DTMC):
        m = m - sp.identity(m.shape[0], format="csr")
    else:
        # rebuild the diagonal from the rates so rounding in a given diagonal cannot bias pi
        off = m - sp.diags(m.diagonal())
        m = off - sp.diags(np.asarray(off.sum(axis=1)).ravel())
    return m.tocsr()


def residual(Q: sp.csr_matrix, pi: np.ndarray) -> float:
    r = Q.T @ pi
    scale = abs(Q).T @ np.abs(pi)
    return float(np.abs(r).sum() / max(scale.sum(), np.finfo(float).tiny))


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


def _pinned_solve(Q: sp.csr_matrix, pin: int, gmres: tuple[float, int] | None,
                  band: _Band | None) -> tuple[np.ndarray, bool]:
    """Solve pi Q = 0 with pi[pin] = 1.

    Direct solves replace equation ``pin`` of ``Q^T x = 0`` by ``x[pin] = 1``: the same
    system as dropping the equation and moving the pinned unknown to the right side, but
    it keeps the band (or the sparsity) of ``Q^T`` with no re-indexing (a CSR ``Q`` is
    ``Q^T`` in CSC form at no cost). GMRES works on the reduced system.
    """
    n = Q.shape[0]
    rhs = np.zeros(n)
    rhs[pin] = 1.0
    if gmres is not None:
        return _pinned_gmres(Q, pin, *gmres)
    if band is not None:
        ab = band.ab.copy()
        js = np.arange(max(0, pin - band.kl), min(n, pin + band.ku + 1))
        ab[band.ku + pin - js, js] = 0.0
        ab[band.ku, pin] = 1.0
        x = sla.solve_banded((band.kl, band.ku), ab, rhs, overwrite_ab=True, overwrite_b=True,
                             check_finite=False)
        return x, True
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
    return x, True


def _pin_ok(x: np.ndarray, pin: int) -> bool:
    """Finite, non-negative up to round-off, and the pinned state not negligible."""
    if not np.isfinite(x).all():
        return False
    big = float(np.max(np.abs(x)))
    return bool(x.min() >= -1e-12 * big and x[pin] >= _PIN_RATIO * big)


def _pinned_gmres(Q: sp.csr_matrix, pin: int, tol: float, maxiter: int) -> tuple[np.ndarray, bool]:
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
        chunk = min(1 if done == 0 else 5, maxiter - done)
        y, _ = spla.gmres(B, rhs, x0=y, M=M, rtol=min(tol, 1e-14), atol=0.0, restart=50, maxiter=chunk)
        done += chunk
        x[:pin] = y[:pin]
        x[pin] = 1.0
        x[pin + 1:] = y[pin:]
        if not _pin_ok(x, pin):
            return x, False
        pi = np.clip(x, 0.0, None)
        if residual(Q, pi / pi.sum()) <= tol:
            return x, True
        if done >= maxiter:
            return x, False


def pinned_stationary(Q: sp.csr_matrix, *, gmres: tuple[float, int] | None = None
                      ) -> tuple[np.ndarray, bool, float]:
    """Pinned sparse solve with a pin choice that keeps the system well conditioned.

    Pinning state ``p`` leaves the generator of the chain killed at ``p``, whose
    condition number grows like :math:`1/\\pi_p`: pinning a rarely visited state gives
    garbage (a 270k-state cluster chain pinned at a state of probability 1e-26 came out
    with residual 6e-2). The solution of such a nearly singular system is dominated by
    its near-null vector, which is :math:`\\pi` up to sign and scale, so the state where
    ``|x|`` is largest is a well-visited one: re-pin there. A solve is accepted when it
    is finite, non-negative up to round-off, and the pinned state holds at least
    ``_PIN_RATIO`` of the largest probability.

    Args:
        Q: the generator (CSR), diagonal included.
        gmres: ``(tol, maxiter)`` for GMRES, None for a direct LU.

    Returns:
        ``(pi, converged, residual)``; ``pi`` is all NaN when the solve broke down.
    """
    n = Q.shape[0]
    if n == 1:
        return np.ones(1), True, 0.0
    band = None if gmres is not None else _band_storage(Q)
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
            x, converged = _pinned_solve(Q, pin, gmres, band)
        except (np.linalg.LinAlgError, RuntimeError):  # an exactly singular pinned system
            x, converged = np.full(n, np.nan), False
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
        return np.full(n, np.nan), False, float("nan")
    x = np.clip(x, 0.0, None)  # round-off can leave -1e-17 entries
    pi = x / x.sum()
    return pi, converged, residual(Q, pi)
