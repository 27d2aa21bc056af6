"""Validation of generator and transition matrices on the host, and the tracer test.

The lowest layer of the engine: it imports nothing from the engine, so the chain classes
(:mod:`._chain`) and the structure functions (:mod:`._structure`) both build on it
without an import circle.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import scipy.sparse as sp

from .._errors import InvalidChainError

__all__ = ["is_traced", "validate_generator", "validate_transition_matrix", "host_matrix", "require_finite"]


def is_traced(x: Any) -> bool:
    """True when ``x`` is a JAX tracer (inside jit, vmap or grad): no host checks possible."""
    return isinstance(x, jax.core.Tracer)


def host_matrix(x: Any, error: type, what: str):
    """``x`` as a CSR float matrix (sparse input) or a float ndarray, or ``error(what)``."""
    if sp.issparse(x):
        return x.tocsr().astype(float)
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{what}, got {type(x).__name__}") from None


def require_finite(m, name: str, error: type, expected: str) -> None:
    """Raise ``error`` naming the first NaN or inf entry of a 2-D matrix, if any."""
    if sp.issparse(m):
        if np.isfinite(m.data).all():
            return
        coo = m.tocoo()
        k = int(np.argmax(~np.isfinite(coo.data)))
        i, j, v = int(coo.row[k]), int(coo.col[k]), float(coo.data[k])
    else:
        bad = ~np.isfinite(m)
        if not bad.any():
            return
        i, j = map(int, np.argwhere(bad)[0])
        v = float(m[i, j])
    raise error(f"{name}[{i}, {j}]={v!r}: {expected}")


def _host(matrix: Any, name: str):
    """(sparse CSR or dense float64 ndarray) on the host, with shape checks."""
    if is_traced(matrix):
        raise InvalidChainError(f"{name}: cannot validate a traced value (call outside jax.jit)")
    m = host_matrix(matrix, InvalidChainError, f"{name}: expected a numeric square matrix")
    if m.ndim != 2:
        raise InvalidChainError(f"{name}: expected a 2-D square matrix, got shape {m.shape}")
    if m.shape[0] != m.shape[1]:
        raise InvalidChainError(f"{name}: expected a square matrix, got shape {m.shape}")
    if m.shape[0] == 0:
        raise InvalidChainError(f"{name}: empty matrix (a chain needs at least one state)")
    require_finite(m, name, InvalidChainError, "expected finite entries (no NaN or inf)")
    return m


def _offdiag_negative(m):
    if sp.issparse(m):
        coo = m.tocoo()
        mask = (coo.row != coo.col) & (coo.data < 0)
        if mask.any():
            k = int(np.argmax(mask))
            return int(coo.row[k]), int(coo.col[k]), float(coo.data[k])
        return None
    off = m.copy()
    np.fill_diagonal(off, 0.0)
    neg = np.argwhere(off < 0)
    if len(neg):
        i, j = map(int, neg[0])
        return i, j, float(m[i, j])
    return None


def _row_stats(m):
    if sp.issparse(m):
        sums = np.asarray(m.sum(axis=1)).ravel()
        scale = np.asarray(abs(m).sum(axis=1)).ravel()
    else:
        sums = m.sum(axis=1)
        scale = np.abs(m).sum(axis=1)
    return sums, scale


def validate_generator(Q: Any, *, rtol: float = 1e-9) -> None:
    """Raise :class:`InvalidChainError` unless ``Q`` is a CTMC generator.

    Checks: 2-D, square, non-empty, finite, off-diagonal entries >= 0, and every row sums
    to 0 within ``rtol`` times the sum of the row's absolute entries.

    Args:
        Q: generator matrix (rates per second).
        rtol: relative tolerance of the row sums.
    """
    m = _host(Q, "Q")
    neg = _offdiag_negative(m)
    if neg:
        i, j, v = neg
        raise InvalidChainError(f"Q[{i}, {j}]={v!r}: off-diagonal rates must be >= 0 (a rate per second)")
    sums, scale = _row_stats(m)
    bad = np.abs(sums) > rtol * np.maximum(scale, np.finfo(float).tiny)
    bad &= scale > 0
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidChainError(
            f"Q row {i} sums to {float(sums[i])!r}: generator rows must sum to 0 (within rtol={rtol}); "
            f"set the diagonal to minus the sum of the row's rates"
        )


def validate_transition_matrix(P: Any, *, rtol: float = 1e-9) -> None:
    """Raise :class:`InvalidChainError` unless ``P`` is a stochastic matrix.

    Checks: 2-D, square, non-empty, finite, entries in [0, 1], rows sum to 1 within ``rtol``.
    """
    m = _host(P, "P")
    data = m.data if sp.issparse(m) else m
    if (data < 0).any() or (data > 1 + rtol).any():
        if sp.issparse(m):
            coo = m.tocoo()
            k = int(np.argmax((coo.data < 0) | (coo.data > 1 + rtol)))
            i, j, v = coo.row[k], coo.col[k], coo.data[k]
        else:
            i, j = map(int, np.argwhere((m < 0) | (m > 1 + rtol))[0])
            v = m[i, j]
        raise InvalidChainError(f"P[{i}, {j}]={float(v)!r}: transition probabilities must lie in [0, 1]")
    sums, _ = _row_stats(m)
    bad = np.abs(sums - 1.0) > rtol * max(1, m.shape[0]) ** 0.5
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidChainError(f"P row {i} sums to {float(sums[i])!r}: rows of a transition matrix must sum to 1")
