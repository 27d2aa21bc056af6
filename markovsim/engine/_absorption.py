"""First passage and absorption.

Take a set :math:`A` of states (absorbing or target states) and its complement :math:`T`.
Stopped on first entry into :math:`A`, the expected time :math:`m_i` to reach :math:`A`
from :math:`i \\in T` and the probability :math:`h_{ia}` that :math:`a \\in A` is the first
state of :math:`A` reached solve

.. math::

    (-Q_{TT})\\, m = \\mathbf 1, \\qquad (-Q_{TT})\\, H = Q_{TA}

(for a DTMC, :math:`I - P_{TT}` in place of :math:`-Q_{TT}` and times counted in steps).
The mean time to absorption from an initial distribution is :math:`p_{0,T}\\, m`.

:math:`-Q_{TT}` is a diagonally dominant M-matrix. It is solved by Gaussian elimination
in the GTH manner (Grassmann, Taksar and Heyman 1985; for M-matrices, Alfa, Xue and Ye
2002): the diagonal is never updated by subtraction but rebuilt at every step as the sum
of the remaining off-diagonal rates plus the rate of leaving :math:`T`, so every
operation adds, multiplies or divides non-negative numbers. The result is accurate in
every component even for stiff chains (a mean time to failure of 1e18 s from rates
1e-9 and 1e3 per second), where ``numpy.linalg.solve`` loses digits to cancellation in
the diagonal. The JAX version works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``;
scipy.sparse chains up to 1,000 states are solved the same way (densified), larger ones by
sparse LU on the host (accurate to the conditioning of :math:`-Q_{TT}`).

On concrete input the structure is checked first: states of :math:`T` that cannot reach
:math:`A` (or can reach a state that cannot) have an infinite mean time and a hitting
probability below one. Under tracing no such analysis is possible: every state outside
:math:`A` must then reach :math:`A`, or the result is NaN.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.sparse import csgraph

from .._errors import InvalidParameterError, SolverError
from ._chain import as_chain
from ._checks import array_world, check_distribution, offdiagonal_host, state_mask
from ._structure import validate_chain

__all__ = ["mean_time_to_absorption", "absorption_probabilities", "mean_first_passage_times"]

_HIGHEST = jax.lax.Precision.HIGHEST
#: scipy.sparse chains up to this many states are solved densely (subtraction-free);
#: larger ones by sparse LU (which can lose digits on stiff chains).
DENSE_LIMIT = 1000


# ----------------------------------------------------------------------------- JAX core


def _mmatrix_solve(R, e, B):
    """Solve :math:`(\\mathrm{diag}(R\\mathbf 1 + e) - R) X = B` without subtraction.

    Args:
        R: ``(n, n)`` non-negative off-diagonal rates (zero diagonal).
        e: ``(n,)`` non-negative exit rates (leaving the system).
        B: ``(n, m)`` right-hand sides.
    """
    n = R.shape[0]
    idx = jnp.arange(n)
    eye = jnp.eye(n, dtype=bool)

    def eliminate(k, carry):
        R, e, B, d = carry
        later = idx > k
        row = jnp.where(later, R[k], 0.0)
        dk = jnp.sum(row) + e[k]
        f = jnp.where(later, R[:, k], 0.0) / dk
        R = jnp.where(eye, 0.0, R + jnp.outer(f, row))
        e = e + f * e[k]
        B = B + f[:, None] * B[k][None, :]
        return R, e, B, d.at[k].set(dk)

    R, e, B, d = jax.lax.fori_loop(0, n, eliminate, (R, e, B, jnp.zeros(n, dtype=R.dtype)))

    def back(j, X):
        k = n - 1 - j
        upper = jnp.where(idx > k, R[k], 0.0)
        xk = (B[k] + jnp.matmul(upper, X, precision=_HIGHEST)) / d[k]
        return X.at[k].set(xk)

    return jax.lax.fori_loop(0, n, back, jnp.zeros_like(B))


def _masked_system(M, stop):
    """(R, e) restricted to the states outside ``stop``; stopped rows become x = 0 rows."""
    n = M.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    off = jnp.where(eye, 0.0, M)
    live = ~stop
    R = jnp.where(live[:, None] & live[None, :], off, 0.0)
    e = jnp.where(live, jnp.sum(jnp.where(stop[None, :], off, 0.0), axis=1), 1.0)
    return R, e


@jax.jit
def _hitting_times(M, stop):
    """Expected time to reach ``stop`` from every state (0 on ``stop``)."""
    M = jnp.asarray(M)
    M = M.astype(jnp.result_type(M.dtype, float))
    R, e = _masked_system(M, stop)
    rhs = jnp.where(stop, 0.0, 1.0).astype(M.dtype)[:, None]
    return _mmatrix_solve(R, e, rhs)[:, 0]


@jax.jit
def _hitting_probabilities(M, stop, absorbing_idx):
    """(n, k): probability that absorbing state ``absorbing_idx[c]`` is the first of ``stop`` hit."""
    M = jnp.asarray(M)
    M = M.astype(jnp.result_type(M.dtype, float))
    n = M.shape[-1]
    R, e = _masked_system(M, stop)
    off = jnp.where(jnp.eye(n, dtype=bool), 0.0, M)
    rhs = jnp.where(stop[:, None], 0.0, off[:, absorbing_idx])
    H = _mmatrix_solve(R, e, rhs)
    unit = (jnp.arange(n)[:, None] == absorbing_idx[None, :]).astype(M.dtype)
    return jnp.where(stop[:, None], unit, H)


@jax.jit
def _all_pairs(M):
    n = M.shape[-1]
    cols = jax.vmap(lambda j: _hitting_times(M, jnp.arange(n) == j))(jnp.arange(n))
    return cols.T


# ----------------------------------------------------------------------------- host structure


def _graph(chain) -> sp.csr_matrix:
    off = offdiagonal_host(chain)
    off.data = (off.data > 0).astype(float)
    off.eliminate_zeros()
    return off


def _reach(G: sp.csr_matrix, sources: np.ndarray) -> np.ndarray:
    """States reachable from ``sources`` (a mask) in the directed graph ``G`` (sources included)."""
    n = G.shape[0]
    if not sources.any():
        return np.zeros(n, dtype=bool)
    root = sp.csr_matrix((np.ones(int(sources.sum())), (np.zeros(int(sources.sum()), dtype=int),
                                                        np.flatnonzero(sources))), shape=(1, n))
    big = sp.bmat([[G, sp.csr_matrix((n, 1))], [root, sp.csr_matrix((1, 1))]], format="csr")
    order = csgraph.breadth_first_order(big, n, directed=True, return_predecessors=False)
    mask = np.zeros(n + 1, dtype=bool)
    mask[order] = True
    return mask[:n]


def _never_surely(G: sp.csr_matrix, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cannot, bad): states that cannot reach ``target``, and those that may never reach it.

    ``bad`` are the states outside ``target`` from which the hitting probability is below
    one: they can reach (without passing through ``target``) a state that cannot reach it.
    """
    GT = G.T.tocsr()
    can = _reach(GT, target)
    cannot = ~can
    keep = (~target).astype(float)
    G_stopped = sp.diags(keep) @ G  # no transitions out of the target set
    bad = _reach(G_stopped.T.tocsr(), cannot) & ~target
    return cannot, bad


def _name(chain, i: int) -> str:
    if chain.labels is not None:
        return f"state {i} ({chain.labels[i]!r})"
    return f"state {i}"


# ----------------------------------------------------------------------------- host sparse solve


def _sparse_solve(chain, stop: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve the stopped system on scipy's side: rows of ``stop`` give 0."""
    off = offdiagonal_host(chain)
    n = off.shape[0]
    live = np.flatnonzero(~stop)
    out = np.zeros((n,) + rhs.shape[1:])
    if len(live) == 0:
        return out
    exit_all = np.asarray(off.sum(axis=1)).ravel()
    sub = off[live][:, live]
    A = (sp.diags(exit_all[live]) - sub).tocsc()
    x = spla.splu(A).solve(np.ascontiguousarray(rhs[live]))
    out[live] = x
    return out


def _host_times(chain, stop: np.ndarray, world: str):
    """Expected hitting times of ``stop`` (which must be reached surely from live states)."""
    m = chain.matrix
    if world == "sparse":
        if chain.n > DENSE_LIMIT:
            return _sparse_solve(chain, stop, (~stop).astype(float))
        m = m.toarray()  # small enough for the subtraction-free dense elimination
    x = _hitting_times(jnp.asarray(m), jnp.asarray(stop))
    return x if world == "jax" else np.asarray(x)


# ----------------------------------------------------------------------------- public


def mean_time_to_absorption(chain: Any, p0: Any, absorbing: Any):
    """Mean time to absorption (MTTF): expected time until the chain first enters ``absorbing``.

    .. math::  \\mathrm{MTTA} = p_{0,T}\\,(-Q_{TT})^{-1}\\mathbf 1

    Transitions out of the absorbing states are ignored (the clock stops on first entry),
    so ``absorbing`` may be any target set, e.g. the "system down" states of a
    repairable system (mean time to first failure).

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` (time in steps) or a generator ``Q``
            (rates per second); dense numpy/JAX or scipy.sparse.
        p0: initial distribution, shape ``(n,)`` (mass on absorbing states counts 0).
        absorbing: boolean mask of length ``n`` or a sequence of state indices (concrete,
            not traced).

    Returns:
        The mean time in seconds (CTMC) or steps (DTMC): a JAX scalar for JAX input (works
        under ``jax.jit``, ``jax.vmap``, ``jax.grad``), a float for numpy or sparse input.

    Raises:
        InvalidParameterError: empty or out-of-range ``absorbing``, bad ``p0``, or the
            absorbing set is not reached with probability one from ``p0`` (infinite mean).
        InvalidChainError: the chain is not valid.

    Example:
        >>> import numpy as np, markovsim
        >>> lam = 1e-3                       # two parallel units, no repair
        >>> Q = np.array([[-2 * lam, 2 * lam, 0], [0, -lam, lam], [0, 0, 0]])
        >>> round(float(markovsim.mean_time_to_absorption(Q, np.array([1.0, 0, 0]), [2])), 6)
        1500.0
    """
    chain = as_chain(chain)
    world = array_world(chain, p0)
    n = chain.n
    mask = state_mask("absorbing", absorbing, n)
    if world == "traced":
        x = _hitting_times(jnp.asarray(chain.matrix), jnp.asarray(mask))
        return jnp.matmul(jnp.asarray(p0, dtype=x.dtype), x, precision=_HIGHEST)
    chain = validate_chain(chain)
    p = check_distribution("p0", p0, n)
    cannot, bad = _never_surely(_graph(chain), mask)
    start_bad = (p > 0) & bad
    if start_bad.any():
        i = int(np.argmax(start_bad))
        if cannot[i]:
            why = f"p0 puts mass on {_name(chain, i)}, which cannot reach the absorbing set"
        else:
            G_stopped = sp.diags((~mask).astype(float)) @ _graph(chain)
            seen = _reach(G_stopped.tocsr(), np.arange(n) == i) & cannot
            j = int(np.argmax(seen))
            why = (f"p0 puts mass on {_name(chain, i)}, from which the chain can reach "
                   f"{_name(chain, j)}, which cannot reach the absorbing set")
        raise InvalidParameterError(
            f"absorbing: {why}: absorption is not certain, so the mean time to absorption is "
            "infinite; add the missing transitions or change `absorbing`"
        )
    stop = mask | bad
    x = _host_times(chain, stop, world)
    if world == "jax":
        out = jnp.matmul(jnp.asarray(p), x, precision=_HIGHEST)
        value = float(out)
    else:
        out = float(p @ x)
        value = out
    if not np.isfinite(value):
        raise SolverError(f"mean_time_to_absorption: the solve gave {value!r}")
    return out


def absorption_probabilities(chain: Any, absorbing: Any):
    """Probability of each absorbing state being the first one reached, from every state.

    .. math::  H = (-Q_{TT})^{-1} Q_{TA}

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second).
        absorbing: boolean mask or state indices (concrete).

    Returns:
        ``H``, shape ``(n, k)`` with ``k`` absorbing states in increasing index order:
        ``H[i, c]`` is the probability that, started in state ``i``, the chain first enters
        the absorbing set at its ``c``-th state. Rows of absorbing states are unit vectors;
        rows of states that may never be absorbed sum to less than one (to zero for
        states that cannot reach the set; under tracing such chains give NaN).

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[0, 0, 0], [1.0, -3.0, 2.0], [0, 0, 0]])
        >>> markovsim.absorption_probabilities(Q, [0, 2]).round(6).tolist()
        [[1.0, 0.0], [0.333333, 0.666667], [0.0, 1.0]]
    """
    chain = as_chain(chain)
    world = array_world(chain)
    n = chain.n
    mask = state_mask("absorbing", absorbing, n)
    idx = np.flatnonzero(mask)
    if world == "traced":
        return _hitting_probabilities(jnp.asarray(chain.matrix), jnp.asarray(mask), jnp.asarray(idx))
    chain = validate_chain(chain)
    cannot, _ = _never_surely(_graph(chain), mask)
    stop = mask | cannot  # from states that cannot reach A, every probability is 0
    if world == "sparse" and n > DENSE_LIMIT:
        off = offdiagonal_host(chain)
        rhs = np.asarray(off[:, idx].toarray())
        rhs[stop] = 0.0
        H = _sparse_solve(chain, stop, rhs)
        H[idx, np.arange(len(idx))] = 1.0
    else:
        m = chain.matrix.toarray() if world == "sparse" else chain.matrix
        H = _hitting_probabilities(jnp.asarray(m), jnp.asarray(stop), jnp.asarray(idx))
        if world != "jax":
            H = np.asarray(H)
    if not np.isfinite(np.asarray(H)).all():
        raise SolverError("absorption_probabilities: the solve gave a non-finite result")
    return H


def mean_first_passage_times(chain: Any, targets: Any = None):
    """Mean first-passage times, to a target set or between every pair of states.

    With ``targets``, the vector :math:`m_i` = expected time to first reach the set from
    state ``i`` (0 for states in the set). Without, the matrix :math:`M_{ij}` = expected
    time to first reach ``j`` from ``i``, with :math:`M_{ii} = 0` (the time to reach, not
    the mean return time, which is :math:`1/(\\pi_i q_i)` for a CTMC and :math:`1/\\pi_i` for
    a DTMC). All pairs cost :math:`O(n^4)` for a dense chain (one elimination per target);
    sparse chains use one sparse LU per target.

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` (steps) or a generator ``Q`` (per second).
        targets: boolean mask or state indices, or ``None`` for all pairs.

    Returns:
        Times in seconds (CTMC) or steps (DTMC): ``(n,)`` with targets, ``(n, n)`` without.
        On concrete input, ``inf`` where the target may never be reached; under tracing
        such chains give NaN.

    Example:
        >>> import numpy as np, markovsim
        >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
        >>> markovsim.mean_first_passage_times(Q).tolist()
        [[0.0, 1.0], [0.5, 0.0]]
    """
    chain = as_chain(chain)
    world = array_world(chain)
    n = chain.n
    if targets is not None:
        mask = state_mask("targets", targets, n)
        if world == "traced":
            return _hitting_times(jnp.asarray(chain.matrix), jnp.asarray(mask))
        chain = validate_chain(chain)
        _, bad = _never_surely(_graph(chain), mask)
        x = _host_times(chain, mask | bad, world)
        if world == "jax":
            return jnp.where(jnp.asarray(bad), jnp.inf, x)
        x = np.array(x, dtype=float)
        x[bad] = np.inf
        return x
    if world == "traced":
        return _all_pairs(jnp.asarray(chain.matrix))
    chain = validate_chain(chain)
    G = _graph(chain)
    k, _ = csgraph.connected_components(G, directed=True, connection="strong")
    if world != "sparse" and k == 1:
        M = _all_pairs(jnp.asarray(chain.matrix))
        return M if world == "jax" else np.asarray(M)
    cols = []
    for j in range(n):
        mask = np.zeros(n, dtype=bool)
        mask[j] = True
        _, bad = _never_surely(G, mask)
        stop = mask | bad
        if world == "sparse":
            x = _sparse_solve(chain, stop, (~stop).astype(float))
        else:
            x = np.array(_hitting_times(jnp.asarray(chain.matrix), jnp.asarray(stop)), dtype=float)
        x[bad] = np.inf
        cols.append(x)
    M = np.stack(cols, axis=1)
    return jnp.asarray(M) if world == "jax" else M
