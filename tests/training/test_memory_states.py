"""Model states per rank under ZeRO-3: the FP8 copy shards with the weights, and the
gather buffers hold two layers' BF16 weights (the layer computed and the one prefetched)."""

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest

from markovsim.training import Plan, Workload, load_hardware
from markovsim.training._inspect import memory_breakdown
from markovsim.training._workload import parameter_count

W = Workload("zero3-test", layers=16, hidden=2048, ffn_hidden=8192, heads=16, kv_heads=16, vocab=32000, seq_len=2048)
HW = load_hardware("h100_sxm")
PC = parameter_count(W)
ENDS = PC.embedding + PC.output  # no FP8 copy of these two: Megatron-core keeps them out of TE's FP8 layers


def _bytes(params, ends, precision):
    """BF16 weights: 2 bytes each; FP8 runs add an FP8 copy and its transpose (2 more) of all
    but the embedding and the output layer."""
    return 2.0 * params + (2.0 * (params - ends) if precision == "fp8" else 0.0)


def _weights(dp, zero, precision):
    plan = Plan(tp=1, pp=1, dp=dp, global_batch=dp, micro_batch=1, zero_stage=zero, precision=precision)
    return memory_breakdown(W, HW, plan).weights


@settings(max_examples=30, deadline=None)
@given(dp=st.sampled_from([2, 4, 8, 16, 64, 512]), precision=st.sampled_from(["bf16", "fp8"]))
def test_zero3_weights_are_the_shard_plus_two_gathered_layers(dp, precision):
    # ZeRO-1 holds every weight: 2 bytes each, 4 with the FP8 copy and its transpose
    whole = _weights(dp, 1, precision)
    assert whole == pytest.approx(_bytes(PC.total, ENDS, precision), rel=1e-12)
    expected = whole / dp + 2 * 2.0 * PC.total / W.layers
    assert _weights(dp, 3, precision) == pytest.approx(expected, rel=1e-12)


def test_zero3_fp8_weights_no_longer_count_an_unsharded_copy():
    """The bug this replaces: 64-way FSDP with FP8 counted an FP8 copy of every weight."""
    fp8, bf16 = _weights(64, 3, "fp8"), _weights(64, 3, "bf16")
    whole_bf16 = _weights(64, 1, "bf16")
    assert whole_bf16 == pytest.approx(2.0 * PC.total, rel=1e-12)
    assert fp8 - bf16 == pytest.approx(2.0 * (PC.total - ENDS) / 64, rel=1e-12)
    assert fp8 < 0.2 * whole_bf16


def test_fp8_weights_drop_the_bf16_copy_and_halve_the_weight_gather():
    """fp8_params (Megatron-core's fp8_param_gather): 2 bytes per weight (FP8 and its
    transpose) instead of 4 (the embedding and the output layer: 2 in BF16 either way), and
    the ZeRO weight all-gather moves half the bytes."""
    from markovsim import InvalidParameterError
    from markovsim.training import Efficiency, step_time

    plan = Plan(tp=1, pp=1, dp=8, global_batch=8, zero_stage=1, precision="fp8")
    copy, own = (memory_breakdown(W, HW, plan.replace(fp8_params=f)) for f in (False, True))
    assert copy.weights == pytest.approx(_bytes(PC.total, ENDS, "fp8"), rel=1e-12)
    assert own.weights == pytest.approx(2.0 * PC.total, rel=1e-12)
    assert own.gradients == copy.gradients and own.optimizer == copy.optimizer

    def gather(p):  # the exposed weight all-gather: exposed minus the same with it hidden
        shown = step_time(W, HW, p, efficiency=Efficiency(dp_overlap=0.0, param_gather_overlap=0.0))
        hidden = step_time(W, HW, p, efficiency=Efficiency(dp_overlap=0.0, param_gather_overlap=1.0))
        return shown.dp_exposed - hidden.dp_exposed

    # the bytes halve, the collective's latency (here about 1 % of it) stays
    half, whole = gather(plan.replace(fp8_params=True)), gather(plan)
    assert whole / 2 < half < 0.51 * whole
    z3 = plan.replace(zero_stage=3)
    assert memory_breakdown(W, HW, z3.replace(fp8_params=True)).weights < memory_breakdown(W, HW, z3).weights
    with pytest.raises(InvalidParameterError, match="fp8_params=True: FP8 weights need precision='fp8'"):
        step_time(W, HW, plan.replace(precision="bf16", fp8_params=True))


@settings(max_examples=20, deadline=None)
@given(pp=st.sampled_from([2, 4, 8]), zero=st.sampled_from([0, 1, 2]), precision=st.sampled_from(["bf16", "fp8"]))
def test_dualpipe_holds_two_copies_of_the_parameters(pp, zero, precision):
    """DeepSeek-AI 2024, Table 2: DualPipe's "Parameter 2x" (stage i and stage p-1-i on each
    rank): the rank holds stage 0 (its layers and the embedding) and stage p - 1 (its
    layers, the output layer and the final norm), weights and gradients of both; the
    optimizer states once for the two (the assumption the memory module states); the
    data-parallel gradient reduction moves both copies."""
    from markovsim.training import Efficiency, step_time

    plan = Plan(tp=1, pp=pp, dp=4, global_batch=4 * 4 * pp, micro_batch=1, zero_stage=zero, precision=precision,
                schedule="1f1b")
    dual = plan.replace(schedule="dualpipe")
    two = memory_breakdown(W, HW, dual)
    layers = (PC.total - ENDS - W.hidden) / pp
    first, last = layers + PC.embedding, layers + PC.output + W.hidden
    assert two.weights == pytest.approx(_bytes(first, PC.embedding, precision) + _bytes(last, PC.output, precision),
                                        rel=1e-12)
    assert two.gradients == pytest.approx(4.0 * (first + last) / (4 if zero >= 2 else 1), rel=1e-12)
    assert two.optimizer == pytest.approx(12.0 * (first + last) / 2 / (4 if zero >= 1 else 1), rel=1e-12)

    def grad_reduction(p):  # the exposed gradient reduction: nothing hidden, minus all hidden
        shown = step_time(W, HW, p, efficiency=Efficiency(dp_overlap=0.0, param_gather_overlap=1.0))
        hidden = step_time(W, HW, p, efficiency=Efficiency(dp_overlap=1.0, param_gather_overlap=1.0))
        return shown.dp_exposed - hidden.dp_exposed

    # twice the bytes; the collectives' latencies do not double (about 1 % here)
    single, double = grad_reduction(plan), grad_reduction(dual)
    assert 1.9 * single < double <= 2.0 * single * (1 + 1e-12)
