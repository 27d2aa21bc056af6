"""Validation and structure of chains: communicating classes, recurrent classes, period.

All of these work on concrete values on the host (numpy / scipy): they are the checks a
public function runs before it hands a chain to compiled code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .._errors import InvalidChainError
from ._chain import CTMC, DTMC, as_chain, is_traced

__all__ = [
    "validate_generator",
    "validate_transition_matrix",
    "validate_chain",
    "communicating_classes",
    "recurrent_classes",
    "transient_states",
    "is_irreducible",
    "period",
    "is_aperiodic",
]


def _host(matrix: Any, name: str):
    """(sparse CSR or dense float64 ndarray) on the host, with shape checks."""
    if is_traced(matrix):
        raise InvalidChainError(f"{name}: cannot validate a traced value (call outside jax.jit)")
    if sp.issparse(matrix):
        m = matrix.tocsr().astype(float)
        data = m.data
    else:
        try:
            m = np.asarray(matrix, dtype=float)
        except (TypeError, ValueError):
            raise InvalidChainError(f"{name}: expected a numeric square matrix, got {type(matrix).__name__}") from None
        data = m
    if m.ndim != 2:
        raise InvalidChainError(f"{name}: expected a 2-D square matrix, got shape {m.shape}")
    if m.shape[0] != m.shape[1]:
        raise InvalidChainError(f"{name}: expected a square matrix, got shape {m.shape}")
    if m.shape[0] == 0:
        raise InvalidChainError(f"{name}: empty matrix (a chain needs at least one state)")
    bad = ~np.isfinite(data)
    if bad.any():
        if sp.issparse(m):
            coo = m.tocoo()
            k = int(np.argmax(~np.isfinite(coo.data)))
            i, j, v = coo.row[k], coo.col[k], coo.data[k]
        else:
            i, j = map(int, np.argwhere(bad)[0])
            v = m[i, j]
        raise InvalidChainError(f"{name}[{i}, {j}]={float(v)!r}: expected finite entries (no NaN or inf)")
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


def validate_chain(chain: Any, *, rtol: float = 1e-9) -> CTMC | DTMC:
    """Validate a CTMC, DTMC or raw generator; return the chain object."""
    chain = as_chain(chain)
    if isinstance(chain, DTMC):
        validate_transition_matrix(chain.P, rtol=rtol)
    else:
        validate_generator(chain.Q, rtol=rtol)
    return chain


def _graph(chain) -> sp.csr_matrix:
    chain = as_chain(chain)
    m = chain.matrix
    m = m.tocsr() if sp.issparse(m) else sp.csr_matrix(np.asarray(m, dtype=float))
    m = m.tocoo()
    keep = (m.row != m.col) & (m.data > 0)
    n = m.shape[0]
    return sp.csr_matrix((np.ones(int(keep.sum())), (m.row[keep], m.col[keep])), shape=(n, n))


def communicating_classes(chain: Any) -> list[np.ndarray]:
    """The communicating classes (strongly connected components), each a sorted index array."""
    g = _graph(chain)
    k, lab = csgraph.connected_components(g, directed=True, connection="strong")
    order = np.argsort(lab, kind="stable")
    bounds = np.searchsorted(lab[order], np.arange(k + 1))
    classes = [np.sort(order[bounds[c]:bounds[c + 1]]) for c in range(k)]
    classes.sort(key=lambda c: int(c[0]))
    return classes


def recurrent_classes(chain: Any) -> list[np.ndarray]:
    """The closed (recurrent) communicating classes: no transition leaves them."""
    g = _graph(chain)
    k, lab = csgraph.connected_components(g, directed=True, connection="strong")
    coo = g.tocoo()
    leaving = np.zeros(k, dtype=bool)
    cross = lab[coo.row] != lab[coo.col]
    leaving[lab[coo.row[cross]]] = True
    classes = [np.flatnonzero(lab == c) for c in range(k) if not leaving[c]]
    classes.sort(key=lambda c: int(c[0]))
    return classes


def transient_states(chain: Any) -> np.ndarray:
    """Indices of the states in no recurrent class."""
    n = as_chain(chain).n
    rec = np.zeros(n, dtype=bool)
    for c in recurrent_classes(chain):
        rec[c] = True
    return np.flatnonzero(~rec)


def is_irreducible(chain: Any) -> bool:
    """True when every state reaches every other."""
    g = _graph(chain)
    k, _ = csgraph.connected_components(g, directed=True, connection="strong")
    return k == 1


def period(chain: Any) -> int:
    """The period of an irreducible DTMC (1 for aperiodic; CTMCs are always aperiodic).

    Computed as the gcd, over every edge ``u -> v``, of ``level(u) + 1 - level(v)`` where
    ``level`` is the breadth-first distance from state 0.
    """
    chain = as_chain(chain)
    if isinstance(chain, CTMC):
        return 1
    if not is_irreducible(chain):
        raise InvalidChainError("period: the chain is reducible; the period is defined per class")
    P = chain.P
    m = P.tocsr() if sp.issparse(P) else sp.csr_matrix(np.asarray(P, dtype=float))
    coo = m.tocoo()
    keep = coo.data > 0
    rows, cols = coo.row[keep], coo.col[keep]
    level = csgraph.shortest_path(sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=m.shape),
                                  unweighted=True, indices=0)
    diffs = np.abs(level[rows] + 1 - level[cols]).astype(np.int64)
    return int(np.gcd.reduce(diffs)) if len(diffs) else 1


def is_aperiodic(chain: Any) -> bool:
    """True when the period is 1."""
    return period(chain) == 1
