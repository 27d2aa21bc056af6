"""Step time, plan validation, memory status, stragglers, linearity, search and what-ifs."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import markovsim
from markovsim.training import (Efficiency, FixedGlobalBatch, FixedReplicaBatch, GlobalBatches, Plan, Scaling,
                                Schedule, SlowNodes, StepBreakdown, adapt_expert_gain, adapt_pack_gain,
                                candidate_plans, effective_throughput, evaluate_plans, expected_max_standard_normal,
                                expert_imbalance, implied_exposed_share, linearity, linearity_band, load_plan,
                                memory_breakdown, pipeline_bubble_fraction, pipeline_makespans, scaling_curve,
                                search_plans, slow_node_probability, step_time, straggler_delay, validate_plan)

PU = load_plan("pangu_ultra_135b_8k")
MOE = load_plan("pangu_ultra_moe_718b_a2_8k")
GPT = load_plan("gpt3_175b_a100_1024")


@pytest.mark.parametrize("spec", [PU, MOE, GPT], ids=["legacy", "legacy-moe", "operators"])
def test_breakdown_sums_and_bubble_matches_schedule(spec):
    r = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency, straggler_s=0.5)
    assert r.step_time == pytest.approx(sum(getattr(r, p) for p in StepBreakdown.PARTS), rel=1e-12)
    p, m, v = spec.plan.pp, spec.plan.micro_batches, spec.plan.virtual_stages
    beta = pipeline_bubble_fraction(spec.plan.schedule, p, m, virtual_stages=v)
    assert r.bubble / (r.bubble + r.compute) == pytest.approx(beta, rel=1e-12)
    assert r.straggler == 0.5
    assert 0 < r.mfu < r.hfu < 1
    assert r.tokens_per_s == pytest.approx(spec.plan.global_batch * spec.workload.seq_len / r.step_time)
    assert r.tflops_per_gpu == pytest.approx(r.mfu * spec.hardware.peak_flop_per_s / 1e12)
    assert r.mfu_6n < r.mfu_causal < r.mfu < r.mfu_megatron


def test_pangu_bubbles_still_come_out():
    # source: public_inputs.md, Pangu Ultra 135B: 30.45 % (1F1B) -> 6.8 % (interleaved, VPP 6)
    for sched, v, want in ((Schedule.ONE_F_ONE_B, 1, 7 / 23), (Schedule.INTERLEAVED, 6, 7 / 103)):
        r = step_time(PU.workload, PU.hardware, PU.plan.replace(schedule=sched, virtual_stages=v),
                      efficiency=PU.efficiency)
        assert r.bubble / (r.bubble + r.compute) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("change, match", [
    (dict(tp=64), "heads"),
    (dict(tp=3), "heads"),
    (dict(pp=16, dp=64, virtual_stages=1, layer_split="even", schedule="1f1b"), "divide the layers"),
    (dict(global_batch=2000), "multiple of dp"),
    (dict(ep=2), "dense"),
    (dict(micro_batch=1, global_batch=128 * 12), "multiple of pp"),
    (dict(precision="fp32"), "precision"),
    (dict(grad_reduce="fp8"), "grad_reduce"),
])
def test_bad_plans_name_the_constraint(change, match):
    plan = dataclasses.replace(PU.plan, **change)
    with pytest.raises(markovsim.MarkovsimError, match=match):
        step_time(PU.workload, PU.hardware, plan, efficiency=PU.efficiency)


def test_world_size_errors_and_memory_is_a_status():
    with pytest.raises(markovsim.MarkovsimError, match="does not tile"):
        validate_plan(PU.workload, PU.plan, world_size=8000)
    huge = PU.plan.replace(tp=1, pp=1, dp=8192, virtual_stages=1, schedule=Schedule.ONE_F_ONE_B,
                           global_batch=8192, zero_stage=0)
    r = step_time(PU.workload, PU.hardware, huge, efficiency=PU.efficiency)  # no error: a number and a status
    m = memory_breakdown(PU.workload, PU.hardware, huge, efficiency=PU.efficiency)
    assert not r.fits and not m.fits and r.memory_bytes == pytest.approx(m.total, rel=1e-12)
    assert m.total == pytest.approx(m.weights + m.gradients + m.optimizer + m.activations, rel=1e-12)
    assert r.usable_memory_bytes == pytest.approx(m.usable_bytes) and m.total > m.usable_bytes
    with pytest.raises(markovsim.MarkovsimError, match="expert parallelism must divide"):
        validate_plan(MOE.workload, MOE.plan.replace(ep=3))
    with pytest.raises(markovsim.MarkovsimError, match="does not fit in HBM"):
        scaling_curve(PU.workload, PU.hardware, huge, [8192], batch=FixedGlobalBatch(), efficiency=PU.efficiency)


def test_hardware_without_kernel_model_needs_a_compute_fraction():
    with pytest.raises(markovsim.MarkovsimError, match="efficiency.compute"):
        step_time(PU.workload, PU.hardware, PU.plan, efficiency=Efficiency())


@settings(max_examples=25)
@given(o1=st.floats(0, 1), o2=st.floats(0, 1), kind=st.sampled_from(["tp_overlap", "dp_overlap", "ep_overlap",
                                                                     "pp_overlap", "param_gather_overlap"]))
def test_more_overlap_never_slows_a_step(o1, o2, kind):
    lo, hi = sorted((o1, o2))
    for spec in (MOE, GPT):
        e_lo = dataclasses.replace(spec.efficiency, **{kind: lo})
        e_hi = dataclasses.replace(spec.efficiency, **{kind: hi})
        t_lo = step_time(spec.workload, spec.hardware, spec.plan, efficiency=e_lo).step_time
        t_hi = step_time(spec.workload, spec.hardware, spec.plan, efficiency=e_hi).step_time
        assert t_hi <= t_lo * (1 + 1e-12)


def test_evaluate_plans_matches_step_time():
    plans, ok = candidate_plans(PU.workload, 8192, global_batch=2048)
    idx = np.flatnonzero(ok)[::97][:20]
    batch = {k: np.asarray(v)[idx] for k, v in plans.items()}
    out = evaluate_plans(PU.workload, PU.hardware, batch, efficiency=PU.efficiency)
    for j, i in enumerate(idx):
        p = Plan(tp=int(plans["tp"][i]), pp=int(plans["pp"][i]), dp=int(plans["dp"][i]), global_batch=2048,
                 micro_batch=int(plans["mb"][i]), virtual_stages=int(plans["v"][i]), cp=int(plans["cp"][i]),
                 zero_stage=int(plans["zero"][i]), sequence_parallel=bool(plans["sp"][i]),
                 schedule=list(Schedule)[int(plans["sched"][i])],
                 recompute=["none", "selective", "full"][int(plans["rec"][i])],
                 recompute_layers=int(plans["rec_layers"][i]),
                 layer_split="uneven" if plans["uneven"][i] else "even")
        r = step_time(PU.workload, PU.hardware, p, efficiency=PU.efficiency)
        assert float(out["step_time"][j]) == pytest.approx(r.step_time, rel=1e-12)
        assert bool(out["fits"][j]) == r.fits


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


# ------------------------------------------------------------------ linearity


@settings(max_examples=30, deadline=None)
@given(base=st.sampled_from([256, 512]), factor=st.sampled_from([2, 4, 8, 16]), cv=st.floats(0, 0.03),
       zero=st.sampled_from([0, 1, 2, 3]), dp_overlap=st.floats(0, 1), gather=st.floats(0, 1),
       fixed_global=st.booleans())
def test_linearity_bounded_for_every_zero_stage(base, factor, cv, zero, dp_overlap, gather, fixed_global):
    """Issue 11 item 9: the ZeRO superlinear term is bounded (and absent with ZeRO off)."""
    eff = dataclasses.replace(PU.efficiency, dp_overlap=dp_overlap, param_gather_overlap=gather)
    plan = PU.plan.replace(zero_stage=zero)
    rule = FixedGlobalBatch(2048) if fixed_global else FixedReplicaBatch(16)
    c = scaling_curve(PU.workload, PU.hardware, plan, [base, base * factor], batch=rule, efficiency=eff,
                      jitter_cv=cv, require_fit=False)
    assert c.linearity[0] == pytest.approx(1.0)
    if fixed_global or zero == 0:
        assert c.linearity[1] <= 1.0 + 1e-12
    assert c.linearity[1] <= c.superlinear_bound()[1] + 1e-12
    assert (c.superlinear_bound()[1] == 1.0) == (zero == 0)


def test_superlinear_term_exists_with_zero_and_is_within_its_bound():
    eff = dataclasses.replace(PU.efficiency, dp_overlap=1.0, param_gather_overlap=1.0)
    c = scaling_curve(PU.workload, PU.hardware, PU.plan.replace(zero_stage=1), [256, 4096],
                      batch=FixedReplicaBatch(16), efficiency=eff)
    assert 1.0 < c.linearity[1] <= c.superlinear_bound()[1] < 1.01


@settings(max_examples=15, deadline=None)
@given(cv=st.floats(0, 0.03), dp_overlap=st.floats(0, 1))
def test_linearity_non_increasing_at_fixed_global_batch(cv, dp_overlap):
    eff = dataclasses.replace(PU.efficiency, dp_overlap=dp_overlap)
    c = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 512, 1024, 2048, 4096, 8192],
                      batch=FixedGlobalBatch(2048), efficiency=eff, jitter_cv=cv)
    assert np.all(np.diff(c.linearity) <= 1e-12)


def test_batch_rules_are_explicit_and_mean_one_thing():
    kw = dict(efficiency=PU.efficiency)
    with pytest.raises(markovsim.MarkovsimError, match="explicit"):
        scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], **kw)
    g = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=FixedGlobalBatch(2048), **kw)
    r = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=FixedReplicaBatch(), **kw)
    lst = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=GlobalBatches((64, 1024)), **kw)
    assert list(g.global_batch) == [2048, 2048]
    assert list(r.global_batch) == [64, 1024]  # the plan's 16 sequences per replica at 4 and 64 replicas
    assert lst.linearity[1] == pytest.approx(r.linearity[1], rel=1e-12)
    # the legacy spelling keeps its documented meaning: the plan's batch held at the baseline
    legacy = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], scaling=Scaling.FIXED_REPLICA_BATCH, **kw)
    assert list(legacy.global_batch) == [2048, 32768]
    with pytest.raises(markovsim.MarkovsimError, match="one per size"):
        scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=GlobalBatches((64,)), **kw)
    # a held batch too small for the larger size is refused naming that size and the rule
    dp = 4096 // (PU.plan.tp * PU.plan.pp * PU.plan.cp)
    with pytest.raises(markovsim.MarkovsimError,
                       match=rf"^cards=4096 \(dp={dp}, global batch 64 under the fixed-global batch rule\): "):
        scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=FixedGlobalBatch(64), **kw)


def test_linearity_band_sweeps_an_unpublished_batch():
    rules = [FixedGlobalBatch(g) for g in (1024, 2048, 3000, 4096)]  # 3000 does not split: left out
    band = linearity_band(PU.workload, PU.hardware, PU.plan, 256, 4096, batches=rules, efficiency=PU.efficiency)
    assert len(band.values) == 3 and band.low == band.values[0] and band.high == band.values[-1]
    assert all(np.diff(band.values) > 0)  # a larger held batch keeps the bubble smaller at 4096 cards


def test_goodput_hook():
    c = scaling_curve(PU.workload, PU.hardware, PU.plan, [256, 4096], batch=FixedGlobalBatch(),
                      efficiency=PU.efficiency, goodput=lambda n: 1.0 - n / 1e5)
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
    assert direct.mfu_megatron == pytest.approx(r.breakdown.mfu_megatron, rel=1e-12)
    published = step_time(PU.workload, PU.hardware, PU.plan, efficiency=PU.efficiency).step_time
    assert r.breakdown.step_time <= published
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


def test_sequence_parallelism_needs_a_sequence_that_splits_over_tp():
    """With sequence parallelism a rank's seq_len / cp tokens scatter over the TP ranks:
    8190 tokens (2 x 4095) split over TP 2 without context parallelism but not over TP 2
    with CP 2 (4095 each). The reader refuses the plan naming the field, the search never
    proposes it, and without sequence parallelism the plan stands."""
    from markovsim.training import validate_plan

    odd = dataclasses.replace(PU.workload, seq_len=8190)
    base = Plan(tp=2, pp=1, dp=4, global_batch=8, micro_batch=1, cp=1, sequence_parallel=True)
    validate_plan(odd, base)
    with pytest.raises(markovsim.MarkovsimError, match=r"plan.sequence_parallel=True with tp=2: a rank's 4095 tokens"):
        validate_plan(odd, base.replace(cp=2, dp=2))
    validate_plan(odd, base.replace(cp=2, dp=2, sequence_parallel=False))
    plans, ok = candidate_plans(odd, 16, global_batch=16, max_pp=1)
    tp, cp = plans["tp"][ok], plans["cp"][ok]
    assert ok.any() and not np.any((tp > 1) & ((8190 // cp) % tp != 0))
    assert np.any((tp == 2) & (cp == 1)) and not np.any((tp > 1) & (cp == 2))


@pytest.mark.parametrize("change, match", [
    ({"tp": "4"}, r"^plan.tp='4': expected an integer, got a string$"),
    ({"micro_batch": 1.5}, r"^plan.micro_batch=1.5: expected an integer$"),
    ({"precision": "fp16"}, r"^plan.precision='fp16': expected one of 'bf16', 'fp8', 'fp32'$"),
    ({"recompute": "some"}, r"^plan.recompute='some': expected one of 'none', 'selective', 'full'"),
    ({"attention_kernel": "fast"}, r"^plan.attention_kernel='fast': expected one of"),
    ({"layer_split": 3}, r"^plan.layer_split=3: expected one of 'even', 'uneven'$"),
])
def test_a_plan_built_in_python_is_checked_field_by_field(change, match):
    """A Plan built in a notebook can hold anything: a string where a degree belongs used to
    surface as "unsupported operand type(s) for %" and an unknown precision as a bare
    ValueError. Each is refused naming the field; a whole-number float and a choice given
    as its string are read as the plan file would read them (the same step)."""
    s = load_plan("llama3_70b_h100_64")
    with pytest.raises(markovsim.MarkovsimError, match=match):
        step_time(s.workload, s.hardware, s.plan.replace(**change), efficiency=s.efficiency)
    want = step_time(s.workload, s.hardware, s.plan, efficiency=s.efficiency).step_time
    loose = s.plan.replace(tp=4.0, precision="fp8", recompute="none", schedule="interleaved")
    assert step_time(s.workload, s.hardware, loose, efficiency=s.efficiency).step_time == pytest.approx(want, rel=1e-15)
