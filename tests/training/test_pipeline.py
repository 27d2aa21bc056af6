"""Closed-form bubble fractions against the explicit timeline simulator."""

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

import markovsim
from markovsim.training import (BlockTimes, Schedule, pipeline_bubble_fraction, pipeline_bubble_time,
                                simulate_pipeline)


def _agree(schedule, p, m, v=1, times=BlockTimes()):
    tl = simulate_pipeline(schedule, p, m, virtual_stages=v, block_times=times)
    closed = pipeline_bubble_fraction(schedule, p, m, virtual_stages=v, block_times=times)
    assert tl.bubble_fraction == pytest.approx(closed, rel=1e-12, abs=1e-15)
    # every stage idles the closed-form time (in units of a whole-stage block)
    idle = tl.idle_per_stage
    expected = pipeline_bubble_time(schedule, p, m, virtual_stages=v, block_times=times)
    assert [float(i) for i in idle] == pytest.approx([expected] * p, rel=1e-12, abs=1e-12)
    return tl


def test_pangu_ultra_bubble_pair_exact():
    # source: public_inputs.md, 7/23 and 7/103 for p=8, m=16, v=6
    assert pipeline_bubble_fraction("1f1b", 8, 16) == pytest.approx(7 / 23, rel=1e-15)
    assert pipeline_bubble_fraction("interleaved", 8, 16, virtual_stages=6) == pytest.approx(7 / 103, rel=1e-15)
    tl = simulate_pipeline("1f1b", 8, 16)
    assert Fraction(tl.stages * tl.makespan - sum(tl.busy)) / (tl.stages * tl.makespan) == Fraction(7, 23)
    tl = simulate_pipeline(Schedule.INTERLEAVED, 8, 16, virtual_stages=6)
    assert Fraction(tl.stages * tl.makespan - sum(tl.busy)) / (tl.stages * tl.makespan) == Fraction(7, 103)


@given(p=st.integers(1, 6), m=st.integers(1, 12), f=st.integers(1, 3), b=st.integers(1, 3), w=st.integers(1, 3))
def test_gpipe_and_1f1b_match_simulation(p, m, f, b, w):
    for sched in ("gpipe", "1f1b"):
        _agree(sched, p, m, times=BlockTimes(f, b, w))


@given(p=st.integers(1, 5), k=st.integers(1, 3), v=st.integers(1, 4), f=st.integers(1, 2), b=st.integers(1, 3))
def test_interleaved_matches_simulation(p, k, v, f, b):
    _agree("interleaved", p, k * p, v, BlockTimes(f, b, 1))


@given(p=st.integers(2, 6), extra=st.integers(0, 8), f=st.integers(1, 3), b=st.integers(1, 3), w=st.integers(1, 3))
def test_zb_h1_matches_simulation(p, extra, f, b, w):
    if w > b:
        w, b = b, w
    f = f * w  # the stated domain: forward a whole multiple of the weight-gradient block
    tl = _agree("zb-h1", p, p + extra, times=BlockTimes(f, b, w))
    # ZB-H1 keeps 1F1B's activation memory: stage s holds at most p - s activations for B
    assert max(tl.idle_per_stage) == min(tl.idle_per_stage)


@given(p=st.integers(2, 6), extra=st.integers(0, 8))
def test_zb_h2_and_zb_v_match_simulation(p, extra):
    _agree("zb-h2", p, 2 * p - 1 + extra)
    _agree("zb-v", p, 2 * p + extra, 2)


@given(half=st.integers(1, 4), extra=st.integers(0, 4))
def test_dualpipe_matches_simulation(half, extra):
    p = 2 * half
    _agree("dualpipe", p, 3 * p + 2 * extra)


def test_lower_bound_of_synchronous_pipeline():
    # the last stage waits (p-1) forward blocks for its first input: nothing beats that
    for p, m in [(4, 8), (6, 18)]:
        for sched in ("zb-h1", "zb-h2"):
            assert pipeline_bubble_time(sched, p, m) >= (p - 1) * 1.0
        assert pipeline_bubble_time("1f1b", p, m) > pipeline_bubble_time("zb-h1", p, m)


def test_dependencies_respected_in_timeline():
    tl = simulate_pipeline("dualpipe", 4, 12)
    end = {(b.kind, b.micro_batch, b.chunk): b.end for b in tl.blocks}
    start = {(b.kind, b.micro_batch, b.chunk): b.start for b in tl.blocks}
    n = 4
    for (kind, mb, c), s in start.items():
        if kind == "F" and c > 0:
            assert s >= end[("F", mb, c - 1)]
        if kind == "B":
            assert s >= (end[("B", mb, c + 1)] if c < n - 1 else end[("F", mb, c)])
        if kind == "W":
            assert s >= end[("B", mb, c)]
    # one block at a time per stage
    for s in range(4):
        blocks = sorted((b.start, b.end) for b in tl.blocks if b.stage == s)
        assert all(a[1] <= b[0] for a, b in zip(blocks, blocks[1:]))


@given(p=st.integers(2, 16), m=st.integers(1, 64), v=st.integers(1, 8))
def test_bubble_falls_with_micro_batches_and_virtual_stages(p, m, v):
    assert pipeline_bubble_fraction("1f1b", p, m + 1) < pipeline_bubble_fraction("1f1b", p, m)
    mm = m * p
    assert (pipeline_bubble_fraction("interleaved", p, mm, virtual_stages=v + 1)
            < pipeline_bubble_fraction("interleaved", p, mm, virtual_stages=v))
    assert (pipeline_bubble_fraction("interleaved", p, mm + p, virtual_stages=v)
            < pipeline_bubble_fraction("interleaved", p, mm, virtual_stages=v))


@pytest.mark.parametrize("args, match", [
    (("pipedream", 4, 8), "schedule"),
    (("interleaved", 4, 6), "multiple of pp"),
    (("1f1b", 4, 8, 2), "virtual_stages"),
    (("dualpipe", 3, 9), "even pp"),
    (("zb-h1", 8, 4), "at least"),
    (("1f1b", 0, 4), "pp"),
])
def test_bad_arguments_raise(args, match):
    schedule, p, m, *v = args
    with pytest.raises(markovsim.MarkovsimError, match=match):
        pipeline_bubble_fraction(schedule, p, m, virtual_stages=v[0] if v else 1)


def test_enum_and_names_agree():
    for s in Schedule:
        p, m, v = 4, 12, 2 if s in (Schedule.INTERLEAVED, Schedule.ZB_V) else 1
        assert pipeline_bubble_fraction(s, p, m, virtual_stages=v) == pipeline_bubble_fraction(
            s.value, p, m, virtual_stages=v)
