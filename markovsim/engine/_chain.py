"""Markov chains as small frozen objects, and the ways to build them.

A continuous-time chain (CTMC) is given by its generator :math:`Q` (off-diagonal rates
:math:`q_{ij} \\ge 0` per second, rows summing to 0); a discrete-time chain (DTMC) by its
transition matrix :math:`P` (rows summing to 1). Probabilities are row vectors:
:math:`\\pi Q = 0`, :math:`\\pi P = \\pi`.

A raw array passed to an engine function is read as a CTMC generator; wrap a transition
matrix in :class:`DTMC` to say it is one. Matrices may be numpy arrays, JAX arrays (which
flow through ``jax.jit``, ``jax.vmap`` and ``jax.grad``) or ``scipy.sparse`` matrices
(large chains, solved on scipy's side).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from typing import Any, Callable, Hashable, Iterable, Sequence

import jax
import numpy as np
import scipy.sparse as sp

from .._errors import InvalidChainError, InvalidTypeError
from ._validate import is_traced, validate_generator, validate_transition_matrix

__all__ = ["CTMC", "DTMC", "kronecker_sum", "kronecker_product", "is_traced", "as_chain"]


def _is_sparse(x: Any) -> bool:
    return sp.issparse(x)


class _Chain:
    """What CTMC and DTMC share: the matrix, labels, pytree protocol and builders.

    Subclasses name their matrix field (``_field``), what a transition carries
    (``_weight``: a rate or a probability) and how a matrix of transition weights becomes
    theirs (``_complete``: a generator gets its diagonal).
    """

    _field = ""
    _weight = ""

    @property
    def matrix(self):
        """The generator ``Q`` (CTMC) or the transition matrix ``P`` (DTMC)."""
        return getattr(self, self._field)

    @property
    def n(self) -> int:
        """Number of states."""
        return int(self.matrix.shape[-1])

    def tree_flatten(self):
        return (self.matrix,), self.labels

    @classmethod
    def tree_unflatten(cls, labels, children):
        return cls(children[0], labels)

    def index(self, label: Hashable) -> int:
        """The row of the state with this label."""
        if self.labels is None:
            raise InvalidChainError("this chain has no state labels")
        try:
            return self.labels.index(label)
        except ValueError:
            raise InvalidChainError(f"no state labelled {label!r}") from None

    def to_dense(self) -> np.ndarray:
        """The matrix as a dense numpy array."""
        m = self.matrix
        return m.toarray() if _is_sparse(m) else np.asarray(m)

    @staticmethod
    def _complete(M: sp.csr_matrix) -> sp.csr_matrix:
        return M

    @classmethod
    def _from_triples(cls, labels, rows, cols, vals):
        n = len(labels)
        M = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
        return cls(cls._complete(M).tocsr(), tuple(labels))

    @classmethod
    def from_transitions(cls, transitions: Iterable[tuple[Hashable, Hashable, float]],
                         states: Sequence[Hashable] | None = None):
        """A chain from ``(from, to, weight)`` triples over labelled states (sparse result).

        The weight is a rate per second (CTMC) or a probability (DTMC). Weights of repeated
        pairs add up. ``states`` fixes the order (and may name states with no
        transitions); otherwise states are numbered in order of appearance.
        """
        return cls._from_triples(*_collect(transitions, states, cls._weight))

    @classmethod
    def explore(cls, initial: Hashable, successors: Callable[[Hashable], Iterable[tuple[Hashable, float]]],
                *, max_states: int = 10_000_000):
        """Build the chain reachable from ``initial`` (sparse), the way model checkers do.

        Args:
            initial: the initial state (any hashable label).
            successors: ``state -> iterable of (next_state, weight)``, the weight a rate
                per second (CTMC) or a probability (DTMC).
            max_states: stop with an error past this many states.
        """
        return cls._from_triples(*_explore(initial, successors, max_states, cls._weight))


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class CTMC(_Chain):
    """A continuous-time Markov chain with generator ``Q`` (rates per second).

    Build it with :meth:`from_matrix` (validated), :meth:`from_transitions`,
    :meth:`explore` or :func:`kronecker_sum`; the plain constructor does no checks (it is
    what JAX calls when it rebuilds the object from tracers).

    Attributes:
        Q: generator, shape ``(n, n)``: dense (numpy or JAX) or ``scipy.sparse``.
        labels: optional state labels, one per row.
    """

    Q: Any
    labels: tuple | None = None

    kind = "ctmc"
    _field = "Q"
    _weight = "rate"

    @staticmethod
    def _complete(M: sp.csr_matrix) -> sp.csr_matrix:
        return M - sp.diags(np.asarray(M.sum(axis=1)).ravel())

    @classmethod
    def from_matrix(cls, Q, labels: Sequence | None = None, *, rtol: float = 1e-9) -> "CTMC":
        """A validated CTMC from a generator matrix (see :func:`validate_generator`)."""
        validate_generator(Q, rtol=rtol)
        return cls(Q, _labels(labels, Q.shape[0]))


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class DTMC(_Chain):
    """A discrete-time Markov chain with transition matrix ``P`` (rows sum to 1).

    Build it with :meth:`from_matrix` (validated), :meth:`from_transitions`,
    :meth:`explore` or :func:`kronecker_product`.

    Attributes:
        P: transition matrix ``(n, n)``: dense (numpy or JAX) or ``scipy.sparse``.
        labels: optional state labels.
    """

    P: Any
    labels: tuple | None = None

    kind = "dtmc"
    _field = "P"
    _weight = "probability"

    @classmethod
    def from_matrix(cls, P, labels: Sequence | None = None, *, rtol: float = 1e-9) -> "DTMC":
        """A validated DTMC (see :func:`validate_transition_matrix`)."""
        validate_transition_matrix(P, rtol=rtol)
        return cls(P, _labels(labels, P.shape[0]))


def _labels(labels, n):
    if labels is None:
        return None
    labels = tuple(labels)
    if len(labels) != n:
        raise InvalidChainError(f"labels: got {len(labels)} labels for {n} states")
    return labels


def _check_weight(value, what, src, dst):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidChainError(f"transition {src!r} -> {dst!r}: {what}={value!r}, expected a number >= 0") from None
    if not np.isfinite(v) or v < 0:
        raise InvalidChainError(f"transition {src!r} -> {dst!r}: {what}={value!r}, expected a finite value >= 0")
    if what == "probability" and v > 1:
        raise InvalidChainError(f"transition {src!r} -> {dst!r}: probability={value!r}, expected <= 1")
    return v


def _collect(transitions, states, what):
    index: dict = {}
    labels: list = []
    if states is not None:
        for s in states:
            if s in index:
                raise InvalidChainError(f"states: {s!r} appears twice")
            index[s] = len(labels)
            labels.append(s)
    rows, cols, vals = [], [], []
    for item in transitions:
        try:
            src, dst, w = item
        except (TypeError, ValueError):
            raise InvalidChainError(f"transition {item!r}: expected a (from, to, {what}) triple") from None
        w = _check_weight(w, what, src, dst)
        for s in (src, dst):
            if s not in index:
                if states is not None:
                    raise InvalidChainError(f"transition {src!r} -> {dst!r}: state {s!r} is not in `states`")
                index[s] = len(labels)
                labels.append(s)
        if src == dst and what == "rate":
            raise InvalidChainError(f"transition {src!r} -> {dst!r}: a self-loop has no meaning in a CTMC")
        rows.append(index[src])
        cols.append(index[dst])
        vals.append(w)
    if not labels:
        raise InvalidChainError("transitions: empty chain (no states)")
    return labels, np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(vals, dtype=float)


def _explore(initial, successors, max_states, what):
    probability = what == "probability"
    index = {initial: 0}
    labels = [initial]
    queue = deque([initial])
    rows, cols, vals = [], [], []
    while queue:
        s = queue.popleft()
        i = index[s]
        for item in successors(s):
            try:
                t, w = item
            except (TypeError, ValueError):
                raise InvalidChainError(f"successors({s!r}) yielded {item!r}: expected (next_state, {what})") from None
            # the common case checked inline (a call per transition was a sixth of the time
            # to explore a 38,765-state fleet); anything else goes to the full check
            try:
                v = float(w)
            except (TypeError, ValueError):
                v = math.nan
            if not 0.0 < v < math.inf or (probability and v > 1.0):
                if v == 0.0:
                    continue
                v = _check_weight(w, what, s, t)  # raises: not finite, negative or above 1
            w = v
            if t == s and what == "rate":
                continue  # a self-loop does not change a CTMC
            j = index.get(t)
            if j is None:
                j = index[t] = len(labels)
                labels.append(t)
                queue.append(t)
                if len(labels) > max_states:
                    raise InvalidChainError(f"explore: more than max_states={max_states} reachable states")
            rows.append(i)
            cols.append(j)
            vals.append(w)
    return labels, np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64), np.asarray(vals, dtype=float)


def _as_sparse(m):
    return m.tocsr() if _is_sparse(m) else sp.csr_matrix(np.asarray(m))


def kronecker_sum(*chains: CTMC) -> CTMC:
    """The CTMC of independent components running together: :math:`Q = Q_1 \\oplus Q_2 \\oplus \\dots`.

    State ``(i1, i2, ...)`` is numbered in row-major order (the last component varies
    fastest); labels are tuples of the components' labels (or indices).
    """
    if not chains:
        raise InvalidChainError("kronecker_sum: needs at least one chain")
    Q = None
    labels: list = [()]
    for c in chains:
        if not isinstance(c, CTMC):
            c = CTMC(c)
        Qc = _as_sparse(c.Q)
        n = Qc.shape[0]
        if Q is None:
            Q = Qc
        else:
            Q = sp.kron(Q, sp.identity(n, format="csr")) + sp.kron(sp.identity(Q.shape[0], format="csr"), Qc)
        lab = c.labels if c.labels is not None else tuple(range(n))
        labels = [a + (b,) for a in labels for b in lab]
    return CTMC(Q.tocsr(), tuple(labels))


def kronecker_product(*chains: DTMC) -> DTMC:
    """The DTMC of independent components stepping together: :math:`P = P_1 \\otimes P_2 \\otimes \\dots`."""
    if not chains:
        raise InvalidChainError("kronecker_product: needs at least one chain")
    P = None
    labels: list = [()]
    for c in chains:
        if not isinstance(c, DTMC):
            c = DTMC(c)
        Pc = _as_sparse(c.P)
        P = Pc if P is None else sp.kron(P, Pc)
        lab = c.labels if c.labels is not None else tuple(range(Pc.shape[0]))
        labels = [a + (b,) for a in labels for b in lab]
    return DTMC(P.tocsr(), tuple(labels))


def as_chain(chain) -> CTMC | DTMC:
    """A CTMC or DTMC object from what a user passed (a raw matrix is read as a generator)."""
    if isinstance(chain, (CTMC, DTMC)):
        return chain
    if _is_sparse(chain) or hasattr(chain, "shape") or isinstance(chain, (list, tuple)):
        if isinstance(chain, (list, tuple)):
            try:
                chain = np.asarray(chain, dtype=float)
            except (TypeError, ValueError) as err:
                raise InvalidChainError(f"Q: expected a numeric square matrix (rates per second), got {err}") from None
        return CTMC(chain)
    raise InvalidTypeError(f"chain={chain!r:.60}: expected a CTMC, a DTMC or a generator matrix, "
                           f"got {type(chain).__name__}")
