"""Shared input handling of the engine's analysis functions (transient, absorption, rewards,
simulation): which array world a call lives in, and host checks of the arguments that are
not the chain itself (initial distributions, times, reward vectors, state sets).

Every check here runs on concrete values only; under JAX tracing the callers skip them.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import scipy.sparse as sp

from .._errors import InvalidParameterError
from ._chain import CTMC, DTMC, as_chain
from ._validate import host_matrix, is_traced, require_finite

#: Tolerance on the sum of an initial distribution.
P0_ATOL = 1e-9


def any_traced(*values: Any) -> bool:
    """True when any value (or a leaf of it) is a JAX tracer."""
    for v in values:
        if v is None:
            continue
        for leaf in jax.tree_util.tree_leaves(v):
            if is_traced(leaf):
                return True
    return False


def array_world(chain: CTMC | DTMC, *others: Any) -> str:
    """``"traced"``, ``"sparse"``, ``"jax"`` or ``"numpy"``: how a call is computed.

    ``traced``: something is a tracer (no host checks, JAX code only). ``sparse``: the
    chain holds a scipy.sparse matrix (host solvers). ``jax``: concrete JAX matrix (checks,
    then JAX code, JAX result). ``numpy``: everything else (checks, numpy result).
    """
    m = chain.matrix
    if any_traced(m, *others):
        if sp.issparse(m):
            raise TypeError("a scipy.sparse chain cannot be used under jax transformations; "
                            "pass a dense JAX array")
        return "traced"
    if sp.issparse(m):
        return "sparse"
    if isinstance(m, jax.Array):
        return "jax"
    return "numpy"


def chain_of(chain: Any) -> CTMC | DTMC:
    """:func:`as_chain` (a raw matrix is a generator)."""
    return as_chain(chain)


def check_distribution(name: str, p: Any, n: int) -> np.ndarray:
    """A probability row vector of length ``n`` on the host, or an error naming ``name``."""
    arr = _finite_vector(name, p, n, "probabilities", "probability")
    if (arr < 0).any():
        i = int(np.argmax(arr < 0))
        raise InvalidParameterError(f"{name}[{i}]={float(arr[i])!r}: expected a probability >= 0")
    total = float(arr.sum())
    if abs(total - 1.0) > P0_ATOL:
        raise InvalidParameterError(f"{name} sums to {total!r}: expected a probability vector "
                                    f"summing to 1 (within {P0_ATOL})")
    return arr


def _finite_vector(name: str, v: Any, n: int, plural: str, singular: str) -> np.ndarray:
    """A finite float vector of shape ``(n,)`` on the host, or an error naming ``name``."""
    try:
        arr = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}: expected a numeric vector of {n} {plural}, "
                                    f"got {type(v).__name__}") from None
    if arr.shape != (n,):
        raise InvalidParameterError(f"{name}: got shape {arr.shape}, expected ({n},) "
                                    f"(one {singular} per state of the {n}-state chain)")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidParameterError(f"{name}[{i}]={float(arr[i])!r}: expected a finite {singular}")
    return arr


def check_times(name: str, t: Any, *, integer: bool) -> np.ndarray:
    """A scalar or 1-D array of times >= 0 (seconds), or of step counts when ``integer``."""
    try:
        arr = np.asarray(t, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name}: expected a number, got {type(t).__name__}") from None
    if arr.ndim > 1:
        raise InvalidParameterError(f"{name}: got shape {arr.shape}, expected a scalar or a 1-D array")
    flat = arr.reshape(-1)
    unit = "steps" if integer else "seconds"
    for i, v in enumerate(flat.tolist()):
        where = name if arr.ndim == 0 else f"{name}[{i}]"
        if not np.isfinite(v):
            raise InvalidParameterError(f"{where}={v!r}: expected a finite time ({unit})")
        if v < 0:
            raise InvalidParameterError(f"{where}={v!r}: expected a time >= 0 ({unit})")
        if integer and v != np.floor(v):
            raise InvalidParameterError(f"{where}={v!r}: a DTMC moves in whole steps; "
                                        f"expected an integer number of steps")
    return arr


def check_vector(name: str, r: Any, n: int) -> np.ndarray:
    """A finite vector of length ``n`` (e.g. rewards per state)."""
    return _finite_vector(name, r, n, "values", "value")


def check_square(name: str, c: Any, n: int):
    """A finite ``(n, n)`` matrix, dense (returned as ndarray) or scipy.sparse (CSR)."""
    m = host_matrix(c, InvalidParameterError, f"{name}: expected a numeric ({n}, {n}) matrix")
    if m.shape != (n, n):
        raise InvalidParameterError(f"{name}: got shape {m.shape}, expected ({n}, {n}) (one value per transition)")
    require_finite(m, name, InvalidParameterError, "expected a finite number")
    return m


def state_mask(name: str, states: Any, n: int, *, allow_empty: bool = False) -> np.ndarray:
    """A boolean mask of length ``n`` from a mask or a sequence of state indices.

    The set is structure, not a value to differentiate: it must be concrete (not traced).
    """
    if any_traced(states):
        raise TypeError(f"{name}: the set of states must be concrete (a boolean mask or state "
                        "indices known outside jax.jit), not a traced value")
    arr = np.asarray(states)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise InvalidParameterError(f"{name}: boolean mask of shape {arr.shape}, expected ({n},)")
        mask = arr.copy()
    else:
        if arr.size == 0:
            mask = np.zeros(n, dtype=bool)
        else:
            if arr.ndim > 1 or not np.issubdtype(arr.dtype, np.number):
                raise InvalidParameterError(f"{name}={states!r}: expected a boolean mask of length {n} "
                                            "or a sequence of state indices")
            idx = arr.reshape(-1)
            if not np.all(idx == np.floor(idx)):
                raise InvalidParameterError(f"{name}={states!r}: state indices must be integers")
            idx = idx.astype(np.int64)
            out = (idx < 0) | (idx >= n)
            if out.any():
                raise InvalidParameterError(f"{name}: state index {int(idx[np.argmax(out)])} is out of "
                                            f"range for a {n}-state chain (expected 0..{n - 1})")
            mask = np.zeros(n, dtype=bool)
            mask[idx] = True
    if not allow_empty and not mask.any():
        raise InvalidParameterError(f"{name}: empty set of states; expected at least one state")
    return mask


def offdiagonal_host(chain: CTMC | DTMC):
    """Off-diagonal rates (CTMC) or probabilities (DTMC) as CSR, diagonal dropped."""
    m = chain.matrix
    m = m.tocsr().astype(float) if sp.issparse(m) else sp.csr_matrix(np.asarray(m, dtype=float))
    m = m - sp.diags(m.diagonal())
    m.eliminate_zeros()
    return m.tocsr()


__all__ = [
    "any_traced", "array_world", "chain_of", "check_distribution", "check_times", "check_vector",
    "check_square", "state_mask", "offdiagonal_host", "P0_ATOL",
]
