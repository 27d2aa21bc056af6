"""Building chains: from transitions, by exploration, and as Kronecker sums and products.

References: hand-built matrices, and the product form of independent components (the
stationary distribution of the product chain is the outer product of the components').
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import markovsim as ms


def _generator(R):
    R = np.array(R, dtype=float)
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


# ----------------------------------------------------------------------------- from_transitions


def test_from_transitions_labels_in_order_of_appearance():
    chain = ms.CTMC.from_transitions([("up", "degraded", 1e-5), ("degraded", "down", 1e-3), ("down", "up", 1 / 600),
                                      ("degraded", "up", 2e-3)])
    assert chain.labels == ("up", "degraded", "down")
    assert sp.issparse(chain.Q)
    expected = _generator([[0, 1e-5, 0], [2e-3, 0, 1e-3], [1 / 600, 0, 0]])
    np.testing.assert_array_equal(chain.Q.toarray(), expected)
    assert chain.index("down") == 2


def test_from_transitions_with_a_fixed_state_order():
    chain = ms.CTMC.from_transitions([("a", "b", 1.0), ("b", "a", 2.0)], states=["b", "a", "c"])
    assert chain.labels == ("b", "a", "c")
    np.testing.assert_array_equal(chain.Q.toarray(), [[-2.0, 2.0, 0.0], [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]])


def test_duplicate_transitions_add_up():
    """Two fault modes taking the same state to the same state: their rates add."""
    chain = ms.CTMC.from_transitions([("up", "down", 1e-4), ("up", "down", 3e-4), ("down", "up", 1e-2)])
    Q = chain.Q.toarray()
    assert Q[0, 1] == pytest.approx(4e-4, rel=1e-15)
    assert Q[0, 0] == pytest.approx(-4e-4, rel=1e-15)
    np.testing.assert_allclose(ms.stationary_distribution(chain), [1e-2 / (1e-2 + 4e-4), 4e-4 / (1e-2 + 4e-4)],
                               rtol=1e-14)


def test_self_loop_in_a_ctmc_is_an_error():
    with pytest.raises(ms.InvalidChainError, match="'up' -> 'up'.*self-loop"):
        ms.CTMC.from_transitions([("up", "up", 1.0), ("up", "down", 1.0)])


def test_self_loop_in_a_dtmc_is_a_probability():
    chain = ms.DTMC.from_transitions([("a", "a", 0.75), ("a", "b", 0.25), ("b", "a", 1.0)])
    np.testing.assert_array_equal(chain.P.toarray(), [[0.75, 0.25], [1.0, 0.0]])
    np.testing.assert_allclose(ms.stationary_distribution(chain), [0.8, 0.2], rtol=1e-15)


@pytest.mark.parametrize("bad, match", [
    ([("a", "b", -1.0)], r"'a' -> 'b': rate=-1\.0"),
    ([("a", "b", float("nan"))], r"'a' -> 'b': rate=nan"),
    ([("a", "b")], "triple"),
    ([], "empty"),
])
def test_from_transitions_bad_input(bad, match):
    with pytest.raises(ms.InvalidChainError, match=match):
        ms.CTMC.from_transitions(bad)


def test_from_transitions_unknown_state_when_states_are_given():
    with pytest.raises(ms.InvalidChainError, match="'c' is not in `states`"):
        ms.CTMC.from_transitions([("a", "c", 1.0)], states=["a", "b"])


def test_dtmc_probability_above_one():
    with pytest.raises(ms.InvalidChainError, match="probability=1.5"):
        ms.DTMC.from_transitions([("a", "b", 1.5)])


# ----------------------------------------------------------------------------- explore

LAM, MU = 1e-3, 5e-2


def _cluster_successors(state):
    """(up, spares) of a 3-node cluster with 1 spare: failures, spare swap, repair."""
    up, spares = state
    if up > 0:
        yield (up - 1, spares), up * LAM
    if up < 3 and spares > 0:
        yield (up + 1, spares - 1), 1.0  # swap in the spare
    if up + spares < 4:
        yield (up, spares + 1) if up == 3 else (up + 1, spares), MU  # a repaired unit
    yield (up, spares), 7.0  # a self-loop: no effect on a CTMC
    yield (99, 99), 0.0  # a zero rate: the state is never reached


def test_explore_finds_reachable_states_only():
    chain = ms.CTMC.explore((3, 1), _cluster_successors)
    assert chain.labels[0] == (3, 1)  # the initial state is state 0
    assert (99, 99) not in chain.labels
    # by hand: from (3, 1) failures lower `up`; spares swap back; repairs refill
    expected = {(3, 1), (2, 1), (3, 0), (1, 1), (2, 0), (0, 1), (1, 0), (0, 0)}
    assert set(chain.labels) == expected


def test_explore_matches_a_hand_built_matrix():
    chain = ms.CTMC.explore((3, 1), _cluster_successors)
    n = len(chain.labels)
    R = np.zeros((n, n))
    for s in chain.labels:
        for t, rate in _cluster_successors(s):
            if t != s and rate > 0:
                R[chain.index(s), chain.index(t)] += rate
    np.testing.assert_allclose(chain.Q.toarray(), _generator(R), rtol=1e-15, atol=0)
    assert ms.is_irreducible(chain)


def test_explore_breadth_first_order():
    """A birth-death walk explored from 0: states appear in breadth-first order."""
    chain = ms.CTMC.explore(0, lambda k: [(k + 1, 1.0)] * (k < 4) + [(k - 1, 2.0)] * (k > 0))
    assert chain.labels == (0, 1, 2, 3, 4)
    assert chain.Q.shape == (5, 5)


def test_explore_limits_the_number_of_states():
    with pytest.raises(ms.InvalidChainError, match="max_states=10"):
        ms.CTMC.explore(0, lambda k: [(k + 1, 1.0)], max_states=10)


def test_explore_bad_successor_output():
    with pytest.raises(ms.InvalidChainError, match=r"successors\(0\) yielded 5"):
        ms.CTMC.explore(0, lambda k: [5])


@pytest.mark.parametrize("weight, expected", [
    (-1.0, r"rate=-1.0, expected a finite value >= 0"),
    (float("nan"), r"rate=nan, expected a finite value >= 0"),
    (float("inf"), r"rate=inf, expected a finite value >= 0"),
    (np.float64(-2.0), r"rate=np.float64\(-2.0\), expected a finite value >= 0"),
])
def test_explore_refuses_a_bad_rate_naming_the_transition(weight, expected):
    succ = lambda k: [(k + 1, 1.0)] * (k < 3) + [(k - 1, weight if k == 2 else 1.0)] * (k > 0)
    with pytest.raises(ms.InvalidChainError, match=r"transition 2 -> 1: " + expected):
        ms.CTMC.explore(0, succ)


def test_explore_bad_weights_of_other_types_and_zeros():
    with pytest.raises(ms.InvalidChainError, match=r"transition 0 -> 1: rate='fast', expected a number >= 0"):
        ms.CTMC.explore(0, lambda k: [(1, "fast")])
    with pytest.raises(ms.InvalidChainError, match=r"transition 0 -> 1: rate=None, expected a number >= 0"):
        ms.CTMC.from_transitions([(0, 1, None), (1, 0, 1.0)])
    with pytest.raises(ms.InvalidChainError, match=r"transition 'a' -> 'b': probability=1.5, expected <= 1"):
        ms.DTMC.explore("a", lambda s: [("b", 1.5)])
    # a zero rate is no transition; integer and numpy rates are taken as floats
    chain = ms.CTMC.explore(0, lambda k: [(1 - k, np.int64(2) if k == 0 else 3), (5, 0.0)])
    np.testing.assert_array_equal(chain.Q.toarray(), [[-2.0, 2.0], [3.0, -3.0]])


def test_dtmc_explore():
    chain = ms.DTMC.explore("a", lambda s: {"a": [("a", 0.5), ("b", 0.5)], "b": [("a", 1.0)]}[s])
    np.testing.assert_array_equal(chain.P.toarray(), [[0.5, 0.5], [1.0, 0.0]])


# ----------------------------------------------------------------------------- Kronecker


def _unit(lam, mu, labels=("up", "down")):
    return ms.CTMC.from_matrix(np.array([[-lam, lam], [mu, -mu]]), labels=labels)


def test_kronecker_sum_matrix_by_enumeration():
    """Q[(i, j), (k, l)] = Q1[i, k] [j == l] + Q2[j, l] [i == k], state (i, j) -> i n2 + j."""
    Q1 = _generator([[0, 1, 2], [3, 0, 0], [0, 4, 0]])
    Q2 = _generator([[0, 5], [6, 0]])
    Q = ms.kronecker_sum(ms.CTMC(Q1), ms.CTMC(Q2)).Q.toarray()
    expected = np.zeros((6, 6))
    for i, j, k, l in itertools.product(range(3), range(2), range(3), range(2)):
        expected[i * 2 + j, k * 2 + l] = Q1[i, k] * (j == l) + Q2[j, l] * (i == k)
    np.testing.assert_array_equal(Q, expected)


def test_kronecker_sum_stationary_is_the_outer_product():
    units = [_unit(1e-4, 1e-2), _unit(3e-5, 2e-3, labels=("ok", "bad")), _unit(0.2, 0.7)]
    chain = ms.kronecker_sum(*units)
    assert chain.labels[0] == ("up", "ok", "up") and chain.labels[-1] == ("down", "bad", "down")
    pi = ms.stationary_distribution(chain)
    parts = [ms.stationary_distribution(u) for u in units]
    expected = np.einsum("i,j,k->ijk", *parts).ravel()
    np.testing.assert_allclose(pi, expected, rtol=1e-13)
    # the probability that all three units are down, read by label
    assert pi[chain.index(("down", "bad", "down"))] == pytest.approx(np.prod([p[1] for p in parts]), rel=1e-13)


def test_kronecker_sum_of_one_chain_is_the_chain():
    Q = _generator([[0, 1], [2, 0]])
    np.testing.assert_array_equal(ms.kronecker_sum(ms.CTMC(Q)).Q.toarray(), Q)


def test_kronecker_product_of_dtmcs():
    P1 = np.array([[0.9, 0.1], [0.4, 0.6]])
    P2 = np.array([[0.2, 0.5, 0.3], [0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    chain = ms.kronecker_product(ms.DTMC(P1), ms.DTMC(P2))
    P = chain.P.toarray()
    for i, j, k, l in itertools.product(range(2), range(3), range(2), range(3)):
        assert P[i * 3 + j, k * 3 + l] == pytest.approx(P1[i, k] * P2[j, l], rel=1e-15)
    pi = ms.stationary_distribution(chain)
    expected = np.outer(ms.stationary_distribution(ms.DTMC(P1)), ms.stationary_distribution(ms.DTMC(P2))).ravel()
    np.testing.assert_allclose(pi, expected, rtol=1e-13)


def test_kronecker_needs_a_chain():
    with pytest.raises(ms.InvalidChainError, match="at least one"):
        ms.kronecker_sum()
    with pytest.raises(ms.InvalidChainError, match="at least one"):
        ms.kronecker_product()
