"""Collective costs against hand-derived alpha-beta cases."""

import pytest

import markovsim
from markovsim.training import Hardware, LinkLevel, alpha_beta_time, collective_time

HW = Hardware("toy", 1e15, 64 * 2**30, 1e12, (
    LinkLevel("node", 4, 100e9, 1e-6),
    LinkLevel("net", 0, 10e9, 10e-6),
))


@pytest.mark.parametrize("kind, algorithm, n, expected", [
    # ring all-reduce of M=8 GB on 4 ranks at 1 GB/s, alpha=1 s: 2*3*1 + 2*(3/4)*8 = 18
    ("all-reduce", "ring", 4, 18.0),
    # tree all-reduce: 2*log2(4)*(1 + 8) = 36
    ("all-reduce", "tree", 4, 36.0),
    # ring reduce-scatter / all-gather: 3*1 + (3/4)*8 = 9
    ("reduce-scatter", "ring", 4, 9.0),
    ("all-gather", "ring", 4, 9.0),
    # recursive halving: 2*1 + (3/4)*8 = 8
    ("reduce-scatter", "tree", 4, 8.0),
    # pairwise all-to-all: 3*1 + (3/4)*8 = 9; Bruck: 2*(1 + 4) = 10
    ("all-to-all", "ring", 4, 9.0),
    ("all-to-all", "tree", 4, 10.0),
    ("p2p", "ring", 2, 9.0),
    ("all-reduce", "ring", 1, 0.0),
    # non-power-of-two tree: ceil(log2 5) = 3 rounds
    ("all-reduce", "tree", 5, 54.0),
])
def test_alpha_beta_by_hand(kind, algorithm, n, expected):
    t = alpha_beta_time(kind, 8e9, n, latency_s=1.0, bandwidth_bytes_per_s=1e9, algorithm=algorithm)
    assert float(t) == pytest.approx(expected, rel=1e-12)


def test_levels_chosen_by_span():
    # 4 ranks stride 1 stay in the node: 2*3*1e-6 + 2*(3/4)*1e9/1e11
    t = collective_time("all-reduce", 1e9, 4, HW)
    assert t == pytest.approx(6e-6 + 1.5e9 / 100e9)
    # stride 4 crosses nodes: the slow level
    t = collective_time("all-reduce", 1e9, 4, HW, stride=4)
    assert t == pytest.approx(6 * 10e-6 + 1.5e9 / 10e9)


def test_hierarchical_all_reduce_by_hand():
    # 8 ranks = 2 nodes x 4: RS in node (3a1 + 3/4 M/b1) + AR across (2 a2 + 2*(1/2)*(M/4)/b2) + AG in node
    M = 1e9
    inner = 3 * 1e-6 + 0.75 * M / 100e9
    outer = 2 * 1 * 10e-6 + 2 * 0.5 * (M / 4) / 10e9
    assert collective_time("all-reduce", M, 8, HW, algorithm="hierarchical") == pytest.approx(2 * inner + outer)
    flat = collective_time("all-reduce", M, 8, HW, algorithm="ring")
    assert collective_time("all-reduce", M, 8, HW, algorithm="hierarchical") < flat


def test_bad_collective_inputs():
    with pytest.raises(markovsim.MarkovsimError, match="point-to-point"):
        collective_time("p2p", 1.0, 3, HW)
    with pytest.raises(markovsim.MarkovsimError, match="ranks"):
        collective_time("all-reduce", 1.0, 0, HW)
    with pytest.raises(ValueError):
        collective_time("broadcast", 1.0, 2, HW)
    with pytest.raises(markovsim.MarkovsimError, match="size_bytes"):
        collective_time("all-reduce", -1.0, 2, HW)
