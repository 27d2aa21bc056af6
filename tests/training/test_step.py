"""Step time, plan validation, stragglers, linearity, search and what-ifs."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, strategies as st

import markovsim
from markovsim.training import (Efficiency, Plan, Scaling, Schedule, SlowNodes, adapt_expert_gain,
                                adapt_pack_gain, candidate_plans, effective_throughput,
                                expected_max_standard_normal, expert_imbalance, implied_exposed_share,
                                linearity, load_plan, pipeline_bubble_fraction, pipeline_makespans,
                                scaling_curve, search_plans, slow_node_probability, step_time,
                                straggler_delay, validate_plan)

PU = load_plan("pangu_ultra_135b_8k")
MOE = load_plan("pangu_ultra_moe_718b_a2_8k")


def test_breakdown_sums_and_bubble_matches_schedule():
    r = step_time(PU.workload, PU.hardware, PU.plan, efficiency=PU.efficiency, straggler_s=0.5)
    parts = (r.compute + r.bubble + r.tp_exposed + r.ep_exposed + r.pp_exposed + r.dp_exposed
             + r.optimizer + r.straggler)
    assert r.step_time == pytest.approx(parts, rel=1e-12)
    beta = pipeline_bubble_fraction("interleaved", 8, 16, virtual_stages=6)
    assert r.bubble / (r.bubble + r.compute) == pytest.approx(beta, rel=1e-12)
    assert r.straggler == 0.5
    assert 0 < r.mfu < r.hfu < 1
    assert r.tokens_per_s == pytest.approx(2048 * 4096 / r.step_time)


@pytest.mark.parametrize("change, match", [
    (dict(tp=64), "heads"),
    (dict(tp=3), "heads"),
    (dict(pp=16, dp=64, virtual_stages=1, layer_split="even", schedule="1f1b"), "divide the layers"),
    (dict(global_batch=2000), "multiple of dp"),
    (dict(ep=2), "dense"),
    (dict(micro_batch=1, global_batch=128 * 12), "multiple of pp"),
])
def test_bad_plans_name_the_constraint(change, match):
    plan = dataclasses.replace(PU.plan, **change)
    with pytest.raises(markovsim.MarkovsimError, match=match):
        step_time(PU.workload, PU.hardware, plan, efficiency=PU.efficiency)


def test_world_size_and_memory_errors():
    with pytest.raises(markovsim.MarkovsimError, match="does not tile"):
        validate_plan(PU.workload, PU.plan, world_size=8000)
    huge = PU.plan.replace(tp=1, pp=1, dp=8192, virtual_stages=1, schedule=Schedule.ONE_F_ONE_B,
                           global_batch=8192, zero_stage=0)
    with pytest.raises(markovsim.MarkovsimError, match="does not fit in HBM"):
        step_time(PU.workload, PU.hardware, huge, efficiency=PU.efficiency)
    with pytest.raises(markovsim.MarkovsimError, match="expert parallelism must divide"):
        validate_plan(MOE.workload, MOE.plan.replace(ep=3))


@given(o1=st.floats(0, 1), o2=st.floats(0, 1), kind=st.sampled_from(["tp_overlap", "dp_overlap",
                                                                     "ep_overlap", "pp_overlap"]))
def test_more_overlap_never_slows_a_step(o1, o2, kind):
    lo, hi = sorted((o1, o2))
    e_lo = dataclasses.replace(MOE.efficiency, **{kind: lo})
    e_hi = dataclasses.replace(MOE.efficiency, **{kind: hi})
    t_lo = step_time(MOE.workload, MOE.hardware, MOE.plan, efficiency=e_lo).step_time
    t_hi = step_time(MOE.workload, MOE.hardware, MOE.plan, efficiency=e_hi).step_time
    assert t_hi <= t_lo * (1 + 1e-12)


def test_expected_max_normal_references():
    # exact small cases: E[max of 2] = 1/sqrt(pi), of 3 = 3/(2 sqrt(pi))
    got = expected_max_standard_normal([1, 2, 3])
    assert got == pytest.approx([0.0, 1 / np.sqrt(np.pi), 1.5 / np.sqrt(np.pi)], abs=1e-9)
    # Monte Carlo for n = 1000, 99 % CI
    z = np.random.default_rng(1).standard_normal((4000, 1000)).max(axis=1)
    half = 2.576 * z.std(ddof=1) / np.sqrt(z.size)
    assert abs(float(expected_max_standard_normal(1000)) - z.mean()) < half


def test_slow_node_process():
    slow = SlowNodes(slow_rate_per_s=1 / 3600, recovery_rate_per_s=1 / 600, slowdown=2.0)
    q = slow_node_probability(slow)
    assert q == pytest.approx((1 / 3600) / (1 / 3600 + 1 / 600), rel=1e-10)
    d = straggler_delay(10.0, 16, slow=slow, ranks_per_node=8)
    assert d == pytest.approx(10.0 * 1.0 * (1 - (1 - q) ** 2), rel=1e-10)
    assert straggler_delay(10.0, 4096, jitter_cv=0.02) > straggler_delay(10.0, 256, jitter_cv=0.02)


@given(base=st.sampled_from([256, 512]), factor=st.sampled_from([2, 4, 8, 16]),
       cv=st.floats(0, 0.03), mode=st.sampled_from(list(Scaling)), dp_overlap=st.floats(0, 1))
def test_linearity_at_most_one(base, factor, cv, mode, dp_overlap):
    # without ZeRO (which shards the optimizer step over dp, a genuine superlinear term)
    eff = dataclasses.replace(PU.efficiency, dp_overlap=dp_overlap)
    c = scaling_curve(PU.workload, PU.hardware, PU.plan.replace(zero_stage=0), [base, base * factor],
                      scaling=mode, efficiency=eff, jitter_cv=cv)
    assert c.linearity[0] == pytest.approx(1.0)
    assert c.linearity[1] <= 1.0 + 1e-12


@given(cv=st.floats(0, 0.03), dp_overlap=st.floats(0, 1))
def test_linearity_non_increasing_at_fixed_global_batch(cv, dp_overlap):
    eff = dataclasses.replace(PU.efficiency, dp_overlap=dp_overlap)
    c = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 512, 1024, 2048, 4096, 8192],
                      scaling=Scaling.FIXED_GLOBAL_BATCH, efficiency=eff, jitter_cv=cv)
    assert np.all(np.diff(c.linearity) <= 1e-12)


def test_goodput_hook():
    c = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], efficiency=PU.efficiency,
                      goodput=lambda n: 1.0 - n / 1e5)
    assert c.effective_linearity[1] == pytest.approx(c.linearity[1] * (1 - 4096 / 1e5) / (1 - 256 / 1e5) * (1 - 256 / 1e5))
    assert effective_throughput(100.0, 8, 0.9) == pytest.approx(90.0)
    assert linearity(90.0, 8, 100.0, 8) == pytest.approx(0.9)
    with pytest.raises(markovsim.MarkovsimError, match="goodput"):
        effective_throughput(1.0, 8, 1.5)


def test_search_finds_best_valid_plan_and_beats_published():
    r = search_plans(PU.workload, PU.hardware, 8192, global_batch=2048, efficiency=PU.efficiency)
    validate_plan(PU.workload, r.plan, world_size=8192)
    direct = step_time(PU.workload, PU.hardware, r.plan, efficiency=PU.efficiency)
    assert direct.step_time == pytest.approx(r.breakdown.step_time, rel=1e-12)
    published = step_time(PU.workload, PU.hardware, PU.plan, efficiency=PU.efficiency).step_time
    assert r.breakdown.step_time <= published
    # brute force over the valid candidates, one by one, on a small sample
    plans, ok = candidate_plans(PU.workload, 8192, global_batch=2048)
    assert ok.sum() > 1000 and r.valid <= ok.sum()


def test_whatif_mechanisms():
    # equal work: the simulated makespan is the closed form (m + p - 1) * 3 blocks
    assert float(pipeline_makespans("1f1b", 8, 16, np.ones(16))) == pytest.approx(23 * 3)
    # balancing never hurts and helps more with more variable work
    g1, g2 = adapt_pack_gain(4, 8, 0.05, draws=50), adapt_pack_gain(4, 8, 0.2, draws=50)
    assert 0 <= g1 < g2
    assert implied_exposed_share(0.0325, 0.8984) == pytest.approx(0.0325 / 0.8984)
    i0 = expert_imbalance(16, 4, 0.5, draws=50)
    i1 = expert_imbalance(16, 4, 0.5, balanced=True)
    assert 1 <= i1 <= i0
    assert expert_imbalance(16, 4, 0.0) == pytest.approx(1.0)
    assert adapt_expert_gain(0.5, i0, i1) >= 0
