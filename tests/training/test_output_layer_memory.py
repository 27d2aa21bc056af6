"""The input and output layers' activations (Korthikanti et al. 2022, sec. 4.3): the last
stage keeps the final norm's and the output layer's inputs and the logits in FP32 for the
loss, :math:`4 s b h (1 + v/h)/t` per micro-batch between its forward and its backward; the
first stage keeps the embedding's dropout masks, :math:`s b h/t` per micro-batch in flight.
The memory is the fuller of the first and the last stage. Each expected value below is
written from those formulas and the schedules' in-flight counts, not read from the model.

With full recomputation each layer keeps only its input, :math:`2 s b h` bytes (divided by
:math:`t` with sequence parallelism), which makes the per-stage sums exact and small."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim.training import Plan, Workload, load_hardware, memory_breakdown, step_time

HW = load_hardware("h100_sxm")
# a Llama-3-8B-like model: a 128K vocabulary against a 4K hidden size
W = Workload("head-test", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256,
             seq_len=8192)
S, H, V, L = W.seq_len, W.hidden, W.vocab, W.layers


def act(plan, workload=W):
    return step_time(workload, HW, plan).activations_bytes


def full(**kw):
    base = dict(tp=1, pp=1, dp=8, global_batch=64, micro_batch=1, recompute="full")
    base.update(kw)
    return Plan(**base)


def test_one_stage_holds_its_layers_and_the_head():
    # no pipeline: L layer inputs and the head of the one micro-batch in flight
    assert act(full()) == pytest.approx(L * 2 * S * H + 4 * S * H * (1 + V / H), rel=1e-12)


@pytest.mark.parametrize("sp", [True, False])
def test_tensor_parallelism_splits_the_logits_over_the_vocabulary(sp):
    t = 4
    plan = full(tp=t, dp=2, sequence_parallel=sp)
    layers = L * 2 * S * H / (t if sp else 1)
    head = S * ((4 * H / t if sp else 4 * H) + 4 * V / t)
    assert act(plan) == pytest.approx(layers + head, rel=1e-12)


def test_the_last_stage_can_be_the_fullest():
    """Full recomputation, 1F1B on 4 stages: the first stage holds 4 micro-batches of its 8
    layers' inputs (1.1 GB), the last one micro-batch of them and the 4.2 GB head."""
    p = 4
    layer_mb = (L // p) * 2 * S * H
    first, last = p * layer_mb, layer_mb + 4 * S * H * (1 + V / H)
    assert last > first
    assert act(full(pp=p, dp=2)) == pytest.approx(last, rel=1e-12)


def test_the_breakdown_names_the_stage_its_numbers_are_of():
    """The fuller end: the last stage under full recomputation (above), the first without
    recomputation (4 micro-batches of every activation against one and the head), and both
    where one rank holds both ends (no pipeline; DualPipe)."""
    def stage(plan):
        return memory_breakdown(W, HW, plan).stage

    assert stage(full(pp=4, dp=2)) == "last"
    assert stage(full(pp=4, dp=2, recompute="none")) == "first"
    assert stage(full()) == "both"
    assert stage(full(pp=4, dp=2, schedule="dualpipe")) == "both"


def test_gpipe_keeps_every_micro_batchs_head():
    p, m = 2, 8
    plan = full(pp=p, dp=4, global_batch=4 * m, schedule="gpipe")
    layer_mb = (L // p) * 2 * S * H
    assert act(plan) == pytest.approx(m * layer_mb + m * 4 * S * H * (1 + V / H), rel=1e-12)


def test_interleaving_holds_the_last_ranks_warm_up():
    """Megatron-core's interleaved schedule: the last rank runs (v - 1) p chunk forwards before
    its first backward, so it holds ((v - 1) p + 1) / v micro-batches of its layers."""
    p, v = 4, 2
    plan = full(pp=p, dp=2, virtual_stages=v, schedule="interleaved", global_batch=2 * 8)
    stage_mb = (L // p) * 2 * S * H
    first = p * (1 + (p - 1) / (p * v)) * stage_mb
    last = ((v - 1) * p + 1) / v * stage_mb + 4 * S * H * (1 + V / H)
    assert act(plan) == pytest.approx(max(first, last), rel=1e-12)


def test_dropout_adds_the_embedding_mask_on_the_first_stage():
    w = dataclasses.replace(W, dropout=True)
    p = 2
    stage_mb = (L // p) * 2 * S * H
    first = p * (stage_mb + S * H)  # a one-byte mask per element of each micro-batch in flight
    last = stage_mb + 4 * S * H * (1 + V / H)
    assert act(full(pp=p, dp=4), w) == pytest.approx(max(first, last), rel=1e-12)
    assert act(full(), w) - act(full()) == pytest.approx(S * H, rel=1e-12)


def test_each_multi_token_prediction_module_has_its_layer_and_head():
    w = dataclasses.replace(W, mtp_layers=1)
    assert act(full(), w) - act(full()) == pytest.approx(2 * S * H + 4 * S * H * (1 + V / H), rel=1e-12)


@settings(max_examples=15, deadline=None)
@given(extra=st.integers(1, 200_000), tp=st.sampled_from([1, 2, 8]), mb=st.sampled_from([1, 2]))
def test_the_logits_grow_with_the_vocabulary_at_four_bytes(extra, tp, mb):
    """Without a pipeline every added vocabulary entry costs 4 bytes per token of the micro-batch,
    split over the tensor-parallel ranks, and nothing else moves."""
    plan = full(tp=tp, dp=8 // tp if tp < 8 else 1, global_batch=8 * mb, micro_batch=mb)
    grown = dataclasses.replace(W, vocab=V + extra)
    assert act(plan, grown) - act(plan) == pytest.approx(4 * mb * S * extra / tp, rel=1e-9)


# ------------------------------------------------------------------ the ends' parameters


def test_the_last_stage_holds_the_output_layer_and_the_first_the_embedding():
    """Eight stages, full recomputation, no ZeRO: the last stage (the fuller: its head
    outweighs the first stage's in-flight inputs) holds its 4 layers' weights, the untied
    output layer and the final norm, 2 bytes each in BF16; not an eighth of the whole model."""
    from markovsim.training._workload import parameter_count
    pc = parameter_count(W)
    layers = pc.total - pc.embedding - pc.output - H
    p = 8
    b = step_time(W, HW, full(pp=p, dp=1, global_batch=8, zero_stage=0))
    assert b.weights_bytes == pytest.approx(2 * (layers / p + V * H + H), rel=1e-12)
    assert b.weights_bytes > 2 * pc.total / p * 1.35  # the even share misses 39 % of it
    # the first stage, fuller once the head is small: its layers and the input embedding
    small = dataclasses.replace(W, vocab=512)
    ps = parameter_count(small)
    b = step_time(small, HW, full(pp=p, dp=1, global_batch=8, zero_stage=0))
    assert b.weights_bytes == pytest.approx(2 * ((ps.total - 2 * 512 * H - H) / p + 512 * H), rel=1e-12)


def test_one_stage_holds_every_parameter_with_the_prediction_modules():
    from markovsim.training._workload import parameter_count
    w = dataclasses.replace(W, mtp_layers=1)
    pc = parameter_count(w)
    b = step_time(w, HW, full(zero_stage=0))
    assert b.weights_bytes == pytest.approx(2 * (pc.total + pc.mtp), rel=1e-12)
    assert b.weights_bytes - step_time(W, HW, full(zero_stage=0)).weights_bytes == pytest.approx(2 * pc.mtp, rel=1e-9)


@pytest.mark.parametrize("fp8_params", [False, True])
def test_fp8_runs_copy_the_layers_weights_not_the_embedding_and_the_output_layer(fp8_params):
    """Megatron-core's FP8 layers are the transformer's linear layers: an FP8 copy and its
    transpose (2 bytes more) of every weight but the embedding's and the output layer's; with
    FP8 weights (fp8_params) the pair is all there is, and those two stay BF16 (2 bytes)."""
    from markovsim.training._workload import parameter_count
    pc = parameter_count(W)
    ends = pc.embedding + pc.output
    b = step_time(W, HW, full(zero_stage=0, precision="fp8", fp8_params=fp8_params))
    per = 2 if fp8_params else 4
    assert b.weights_bytes == pytest.approx(per * (pc.total - ends) + 2 * ends, rel=1e-12)
