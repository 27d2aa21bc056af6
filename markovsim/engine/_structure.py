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
from ._chain import CTMC, DTMC, as_chain
from ._validate import validate_generator, validate_transition_matrix

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
