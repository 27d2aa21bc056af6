"""Structure of chains: communicating and recurrent classes, transient states, period.

Hand-worked chains, plus brute-force references on random small graphs (reachability by
transitive closure; the period as the gcd of the lengths of closed walks through state 0,
read off boolean matrix powers).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import markovsim as ms


def _generator(R):
    R = np.array(R, dtype=float)
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


def _cycle(d: int) -> np.ndarray:
    P = np.zeros((d, d))
    P[np.arange(d), (np.arange(d) + 1) % d] = 1.0
    return P


# A chain with every kind of structure: {0, 1} closed, {2, 3} transient (feeds both closed
# classes), {4} absorbing, {5, 6, 7} closed, 8 transient on its own.
R_MIXED = np.zeros((9, 9))
for i, j in [(0, 1), (1, 0), (2, 3), (3, 2), (2, 0), (3, 4), (5, 6), (6, 7), (7, 5), (8, 2), (8, 6)]:
    R_MIXED[i, j] = 1.0 + i + 0.1 * j
Q_MIXED = _generator(R_MIXED)

FORMS = {
    "numpy": lambda M: M,
    "jax": jnp.asarray,
    "sparse": sp.csr_matrix,
    "CTMC": lambda M: ms.CTMC(M),
}


def _as_lists(classes):
    return [np.asarray(c).tolist() for c in classes]


@pytest.mark.parametrize("form", list(FORMS))
def test_classes_of_a_mixed_chain(form):
    chain = FORMS[form](Q_MIXED)
    assert _as_lists(ms.communicating_classes(chain)) == [[0, 1], [2, 3], [4], [5, 6, 7], [8]]
    assert _as_lists(ms.recurrent_classes(chain)) == [[0, 1], [4], [5, 6, 7]]
    assert np.asarray(ms.transient_states(chain)).tolist() == [2, 3, 8]
    assert not ms.is_irreducible(chain)


def test_irreducible_chain():
    Q = _generator(np.roll(np.eye(5), 1, axis=1) * 2.0)  # a directed 5-cycle
    assert ms.is_irreducible(Q)
    assert _as_lists(ms.communicating_classes(Q)) == [[0, 1, 2, 3, 4]]
    assert _as_lists(ms.recurrent_classes(Q)) == [[0, 1, 2, 3, 4]]
    assert ms.transient_states(Q).size == 0


def test_zero_rates_are_not_edges():
    """An explicitly stored zero rate (e.g. a rate parameter set to 0) connects nothing."""
    rows, cols, vals = [0, 0, 0, 1, 1, 2], [0, 1, 2, 0, 1, 2], [-1.0, 1.0, 0.0, 1.0, -1.0, 0.0]
    S = sp.csr_matrix((vals, (rows, cols)), shape=(3, 3))
    assert S.nnz == 6  # the zeros are stored
    assert _as_lists(ms.recurrent_classes(S)) == [[0, 1], [2]]
    assert _as_lists(ms.communicating_classes(S)) == [[0, 1], [2]]


@pytest.mark.parametrize("d", [2, 3, 4, 7])
def test_period_of_a_cycle(d):
    P = _cycle(d)
    assert ms.period(ms.DTMC(P)) == d
    assert not ms.is_aperiodic(ms.DTMC(P))


def test_period_with_branches():
    # cyclic classes {0}, {1, 2}, {3}: every closed walk has length divisible by 3
    P = np.zeros((4, 4))
    P[0, 1], P[0, 2], P[1, 3], P[2, 3], P[3, 0] = 0.25, 0.75, 1.0, 1.0, 1.0
    assert ms.period(ms.DTMC(P)) == 3
    # a shortcut 0 -> 3 adds closed walks of length 2: gcd(3, 2) = 1
    P[0] = [0.0, 0.25, 0.5, 0.25]
    assert ms.period(ms.DTMC(P)) == 1


def test_ehrenfest_has_period_two_and_lazy_version_one():
    N = 6
    P = np.zeros((N + 1, N + 1))
    for i in range(N + 1):
        if i:
            P[i, i - 1] = i / N
        if i < N:
            P[i, i + 1] = (N - i) / N
    assert ms.period(ms.DTMC(P)) == 2
    lazy = 0.5 * (P + np.eye(N + 1))
    assert ms.period(ms.DTMC(lazy)) == 1
    assert ms.is_aperiodic(ms.DTMC(sp.csr_matrix(lazy)))


def test_ctmc_is_aperiodic():
    assert ms.period(_generator(np.roll(np.eye(4), 1, axis=1))) == 1


def test_period_of_a_reducible_chain_is_an_error():
    P = np.eye(3)
    with pytest.raises(ms.InvalidChainError, match="reducible"):
        ms.period(ms.DTMC(P))


# ----------------------------------------------------------------------------- brute force


def _reach(adj: np.ndarray) -> np.ndarray:
    """Reflexive-transitive closure by repeated boolean squaring."""
    n = adj.shape[0]
    R = adj | np.eye(n, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(n)) + 1)):
        R = R | ((R.astype(int) @ R.astype(int)) > 0)
    return R


def _brute_classes(adj):
    R = _reach(adj)
    n = adj.shape[0]
    seen, classes = set(), []
    for i in range(n):
        if i not in seen:
            c = [j for j in range(n) if R[i, j] and R[j, i]]
            seen.update(c)
            classes.append(c)
    closed = [c for c in classes if set(np.flatnonzero(R[c[0]]).tolist()) <= set(c)]
    return classes, closed


@given(adj=st.integers(1, 9).flatmap(lambda n: arrays(bool, (n, n), elements=st.booleans())))
def test_classes_match_transitive_closure(adj):
    n = adj.shape[0]
    np.fill_diagonal(adj, False)
    Q = _generator(adj * 1.5)
    classes, closed = _brute_classes(adj)
    assert _as_lists(ms.communicating_classes(Q)) == classes
    assert _as_lists(ms.recurrent_classes(sp.csr_matrix(Q))) == closed
    transient = sorted(set(range(n)) - {i for c in closed for i in c})
    assert np.asarray(ms.transient_states(Q)).tolist() == transient
    assert ms.is_irreducible(Q) == (len(classes) == 1)


@given(adj=st.integers(1, 8).flatmap(lambda n: arrays(bool, (n, n), elements=st.booleans())),
       extra=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=3))
def test_period_matches_closed_walk_lengths(adj, extra):
    """For an irreducible DTMC, the period is gcd{k : (P^k)_{00} > 0}; k up to 2 n^2
    suffices (a closed walk through 0 of every residue appears by then)."""
    n = adj.shape[0]
    adj = adj.copy()
    adj[np.arange(n), (np.arange(n) + 1) % n] = True  # a Hamiltonian cycle: irreducible
    for a, b in extra:
        if a < n and b < n:
            adj[a, b] = True
    P = adj / adj.sum(axis=1, keepdims=True)
    B = adj.astype(int)
    M = np.eye(n, dtype=int)
    g = 0
    for k in range(1, 2 * n * n + 1):
        M = (M @ B > 0).astype(int)
        if M[0, 0]:
            g = math.gcd(g, k)
    assert ms.period(ms.DTMC(P)) == g
