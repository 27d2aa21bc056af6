"""Hybrid sharding (``zero_shard_group``, HSDP): ZeRO inside groups, replicas all-reduce the
shards over the outermost level, once per step (ZeRO 1-2) or once per layer (ZeRO-3)."""

import dataclasses

import pytest

import markovsim
from markovsim.training import Efficiency, Plan, Workload, load_hardware, step_time
from markovsim.training._inspect import memory_breakdown
from markovsim.training._spec import plan_from_document
from markovsim.training._step import kernel_constants

W = Workload("hsdp-test", layers=8, hidden=2048, ffn_hidden=8192, heads=16, kv_heads=16, vocab=32000, seq_len=2048)
HW = load_hardware("h100_sxm")  # 8 GPUs per NVLink node, one 400 Gb/s port per GPU across nodes
EXPOSED = Efficiency(dp_overlap=0.0, param_gather_overlap=0.0)
BASE = Plan(tp=1, pp=1, dp=32, global_batch=64, micro_batch=1, zero_stage=1)


def _with_outer_bandwidth(hw, bandwidth):
    levels = hw.levels[:-1] + (dataclasses.replace(hw.levels[-1], bandwidth_bytes_per_s=bandwidth),)
    return dataclasses.replace(hw, levels=levels)


def test_a_group_of_every_rank_is_plain_zero():
    full = step_time(W, HW, BASE.replace(zero_shard_group=32), efficiency=EXPOSED)
    plain = step_time(W, HW, BASE, efficiency=EXPOSED)
    assert full.step_time == pytest.approx(plain.step_time, rel=1e-12)
    assert full.memory_bytes == pytest.approx(plain.memory_bytes, rel=1e-12)


@pytest.mark.parametrize("group", [2, 4, 8])
def test_optimizer_and_its_memory_shard_over_the_group(group):
    """Adam's time and the optimizer states scale with 1/group instead of 1/dp."""
    hsdp = BASE.replace(zero_shard_group=group)
    a, b = step_time(W, HW, hsdp, efficiency=EXPOSED), step_time(W, HW, BASE, efficiency=EXPOSED)
    assert a.optimizer == pytest.approx(b.optimizer * 32 / group, rel=1e-9)
    ma, mb = memory_breakdown(W, HW, hsdp, efficiency=EXPOSED), memory_breakdown(W, HW, BASE, efficiency=EXPOSED)
    assert ma.optimizer == pytest.approx(mb.optimizer * 32 / group, rel=1e-9)
    assert ma.weights == pytest.approx(mb.weights, rel=1e-12)  # ZeRO-1: weights whole either way


def test_the_replicas_all_reduce_their_shard_over_the_outermost_level():
    """Groups of 8 ranks fill a node (NVLink); the 4 replicas all-reduce 1/8 of the FP32
    gradients across nodes: changing only the scale-out bandwidth changes the exposed
    data-parallel time by the ring all-reduce volume 2 (r-1)/r x size over that bandwidth."""
    plan = BASE.replace(zero_shard_group=8)
    fraction = kernel_constants(W, HW, EXPOSED)["eff_bw"]
    b1, b2 = 50e9, 10e9
    slow = step_time(W, _with_outer_bandwidth(HW, b2), plan, efficiency=EXPOSED)
    fast = step_time(W, _with_outer_bandwidth(HW, b1), plan, efficiency=EXPOSED)
    size = kernel_constants(W, HW, EXPOSED)["dense_params"] / 8 * 4.0  # the shard's FP32 gradients
    volume = 2 * 3 / 4 * size
    expected = volume / (b2 * fraction) - volume / (b1 * fraction)
    assert slow.dp_exposed - fast.dp_exposed == pytest.approx(expected, rel=1e-9)
    # ZeRO-3 over all 32 ranks gathers across nodes in every micro-batch (4 here); in groups
    # of a node only the once-per-step replica all-reduce crosses them
    z3 = BASE.replace(zero_stage=3, global_batch=128)
    slow_hw = _with_outer_bandwidth(HW, b2)
    assert (step_time(W, slow_hw, z3, efficiency=EXPOSED).dp_exposed
            > 2 * step_time(W, slow_hw, z3.replace(zero_shard_group=8), efficiency=EXPOSED).dp_exposed)


def _with_outer_latency(hw, latency):
    levels = hw.levels[:-1] + (dataclasses.replace(hw.levels[-1], latency_s=latency),)
    return dataclasses.replace(hw, levels=levels)


@pytest.mark.parametrize("zero, per", [(1, 1), (3, W.layers)])
def test_the_replica_all_reduce_pays_the_ring_latency_once_per_step_or_per_layer(zero, per):
    """ZeRO 1-2 all-reduce the replicas' shards once per step; FSDP (ZeRO-3) layer by layer
    (MaxText's scanned layers, PyTorch FSDP's per-layer units): the outer level's latency is
    paid 2 (r - 1) times per collective, once or L times per step; the volume is the same."""
    plan = BASE.replace(zero_stage=zero, zero_shard_group=8)  # 4 replicas
    a, b = 1e-3, 3e-3
    slow = step_time(W, _with_outer_latency(HW, b), plan, efficiency=EXPOSED)
    fast = step_time(W, _with_outer_latency(HW, a), plan, efficiency=EXPOSED)
    assert slow.dp_exposed - fast.dp_exposed == pytest.approx(per * 2 * 3 * (b - a), rel=1e-6)


@pytest.mark.parametrize("zero", [1, 3])
def test_replica_overlap_hides_that_share_of_the_replica_all_reduce(zero):
    """``replica_overlap`` hides its share of the replicas' all-reduce and nothing else;
    absent, that all-reduce is hidden like the rest of the gradients (dp_overlap)."""
    plan = BASE.replace(zero_stage=zero, zero_shard_group=8)

    def exposed(o, dp=0.0, p=plan):
        eff = dataclasses.replace(EXPOSED, dp_overlap=dp, replica_overlap=o)
        return step_time(W, HW, p, efficiency=eff).dp_exposed

    whole = exposed(0.0) - exposed(1.0)  # the replicas' all-reduce alone
    assert whole > 0
    assert exposed(0.25) == pytest.approx(exposed(1.0) + 0.75 * whole, rel=1e-9)
    assert exposed(None, dp=0.4) == pytest.approx(exposed(0.4, dp=0.4), rel=1e-12)
    assert exposed(0.3, p=BASE) == pytest.approx(exposed(None, p=BASE), rel=1e-12)  # no groups: no effect


def test_replica_overlap_is_checked_by_name():
    with pytest.raises(markovsim.MarkovsimError, match="replica_overlap"):
        step_time(W, HW, BASE, efficiency=dataclasses.replace(EXPOSED, replica_overlap=1.5))
    doc = {"workload": "llama3_8b", "hardware": "h100_sxm", "tp": 1, "pp": 1, "dp": 64, "global_batch": 128,
           "zero_stage": 3, "zero_shard_group": 8, "efficiency": {"replica_overlap": "25 %"}}
    assert plan_from_document(doc).efficiency.replica_overlap == pytest.approx(0.25)


@pytest.mark.parametrize("changes, needle", [
    (dict(zero_shard_group=5), "must divide"),
    (dict(zero_shard_group=8, zero_stage=0), "zero_stage >= 1"),
    (dict(zero_shard_group=-1), "zero_shard_group"),
])
def test_bad_groups_are_refused_by_name(changes, needle):
    with pytest.raises(markovsim.MarkovsimError, match="zero_shard_group") as err:
        step_time(W, HW, BASE.replace(**changes))
    assert needle in str(err.value)


def test_the_plan_file_key():
    doc = {"workload": "llama3_8b", "hardware": "h100_sxm", "tp": 1, "pp": 1, "dp": 64, "global_batch": 128,
           "zero_stage": 3, "zero_shard_group": 8}
    assert plan_from_document(doc).plan.zero_shard_group == 8

