"""The operator list and its kernel model against hand-derived shapes, FLOPs and the
published activation-memory formulas (Korthikanti et al. 2022)."""

import dataclasses

import numpy as np
import pytest

from markovsim.training import (FLASH_BACKWARD_FLOPS, AttentionKernel, Efficiency, FFNKind, Hardware, KernelModel,
                                LinkLevel, Plan, Precision, Recompute, Schedule, Workload, flops_per_token, load_plan, memory_breakdown,
                                operator_table, parameter_count, step_time)

KM = KernelModel(gemm_peak_fraction=0.7, gemm_traffic=1.5, attention_peak_fraction=0.5,
                 memory_bandwidth_fraction=0.8, collective_bandwidth_fraction=0.8)
HW = Hardware("toy", 300e12, 80e9, 2e12, (LinkLevel("node", 8, 300e9, 5e-6), LinkLevel("net", 0, 25e9, 1e-5)),
              peak_fp8_flop_per_s=600e12, kernels=KM)
GPT = Workload("gpt", layers=4, hidden=1024, ffn_hidden=4096, heads=16, kv_heads=16, vocab=8192, seq_len=2048,
               ffn_kind=FFNKind.GELU, dropout=True, tied_embeddings=True)
LLAMA = Workload("llama", layers=4, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=4, vocab=8192, seq_len=2048)


def _ops(w, plan):
    return {o.name: o for o in operator_table(w, HW, plan)}


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("w", [GPT, LLAMA], ids=["gpt", "llama"])
def test_gemm_flops_are_the_matmul_weights(w, tp):
    plan = Plan(tp=tp, pp=1, dp=1, global_batch=2, micro_batch=2, sequence_parallel=tp > 1)
    ops = _ops(w, plan)
    tokens = 2 * w.seq_len
    pc = parameter_count(w)
    layer = sum(o.flops for o in ops.values() if o.where in ("attn", "dense") and o.shape)
    assert layer == pytest.approx(2 * tokens * (pc.attention_per_layer + pc.dense_ffn_per_layer) / tp, rel=1e-12)
    assert ops["logits"].flops == pytest.approx(2 * tokens * w.vocab * w.hidden / tp, rel=1e-12)
    core = 2 * 2 * w.seq_len * w.seq_len * (w.heads // tp) * 2 * w.d_head
    assert ops["attention_core"].flops == pytest.approx(core, rel=1e-12)


def test_gemm_time_is_the_smooth_roofline():
    plan = Plan(tp=2, pp=1, dp=1, global_batch=1)
    o = _ops(GPT, plan)["ffn_in"]
    M, N, K = o.shape
    assert (M, N, K) == (2048, 4096 / 2, 1024)
    want = 2 * M * N * K / (300e12 * 0.7) + 1.5 * 2 * (M * K + K * N + M * N) / 2e12
    assert o.forward_s == pytest.approx(want, rel=1e-12) and o.backward_s == pytest.approx(2 * want, rel=1e-12)
    # the achieved fraction of peak rises with size towards gemm_peak_fraction
    eff = [2 * n**3 / (2 * n**3 / (300e12 * 0.7) + 1.5 * 2 * 3 * n * n / 2e12) / 300e12 for n in (256, 2048, 16384)]
    assert eff[0] < eff[1] < eff[2] < 0.7


def test_flash_attention_skips_masked_blocks_and_fp8_is_faster():
    plan = Plan(tp=1, pp=1, dp=1, global_batch=1)
    causal = _ops(LLAMA, plan)["attention_core"]
    full = _ops(dataclasses.replace(LLAMA, causal=False), plan)["attention_core"]
    assert causal.forward_s == pytest.approx(full.forward_s / 2, rel=1e-12)
    assert causal.forward_s == pytest.approx(causal.flops / 2 / (300e12 * 0.5), rel=1e-12)
    unfused = _ops(LLAMA, plan.replace(attention_kernel=AttentionKernel.UNFUSED))["attention_core"]
    assert unfused.forward_s > full.forward_s  # scores through HBM
    fp8 = _ops(LLAMA, plan.replace(precision=Precision.FP8))
    bf16 = _ops(LLAMA, plan)
    assert fp8["ffn_in"].forward_s < bf16["ffn_in"].forward_s
    s8 = step_time(LLAMA, HW, plan.replace(precision=Precision.FP8))
    s16 = step_time(LLAMA, HW, plan)
    assert s8.compute < s16.compute and s8.mfu > s16.mfu


@pytest.mark.parametrize("kernel", [AttentionKernel.FLASH, AttentionKernel.FLASH1])
def test_a_fused_attention_backward_recomputes_the_scores(kernel):
    """A flash backward runs five block products to the forward's two (S = QK^T again, dV,
    dP, dQ, dK): 2.5x the forward's time at the same fraction of peak; an unfused backward
    reads the stored scores back and runs two products per forward one."""
    plan = Plan(tp=1, pp=1, dp=1, global_batch=1, attention_kernel=kernel)
    core = _ops(LLAMA, plan)["attention_core"]
    assert core.backward_s == pytest.approx(2.5 * core.forward_s, rel=1e-12)
    assert FLASH_BACKWARD_FLOPS == 2.5
    unfused = _ops(LLAMA, plan.replace(attention_kernel=AttentionKernel.UNFUSED))["attention_core"]
    # unfused (no dropout): forward = products + 4 bytes a score, backward = 2 x products
    # + 6 bytes a score, so backward - 2 x forward = -2 bytes a score at the HBM rate
    scores = LLAMA.heads * LLAMA.seq_len ** 2
    assert unfused.backward_s - 2 * unfused.forward_s == pytest.approx(-2 * scores / (2e12 * 0.8), rel=1e-9)


def test_moe_operators_and_multi_token_prediction():
    spec = load_plan("deepseek_v3_h800_2048")
    ops = {o.name: o for o in operator_table(spec.workload, spec.hardware, spec.plan)}
    moe = spec.workload.moe
    tokens = spec.plan.micro_batch * spec.workload.seq_len
    local = moe.routed_experts // spec.plan.ep
    assert ops["expert_in"].count == local
    assert ops["expert_in"].shape[0] == pytest.approx(tokens * moe.top_k / local)
    assert {"q_down", "kv_up", "shared_in", "router"} <= set(ops) and "qkv" not in ops
    with_mtp = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    without = step_time(dataclasses.replace(spec.workload, mtp_layers=0), spec.hardware, spec.plan,
                        efficiency=spec.efficiency)
    assert with_mtp.compute > without.compute


def test_communication_cores_slow_the_compute_they_overlap():
    spec = load_plan("deepseek_v3_h800_2048")
    free = step_time(spec.workload, spec.hardware, spec.plan,
                     efficiency=dataclasses.replace(spec.efficiency, comm_sm_fraction=0.0))
    taxed = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    f = spec.efficiency.comm_sm_fraction
    assert free.compute < taxed.compute <= free.compute / (1 - f) * (1 + 1e-12)


# ------------------------------------------------------------------ memory (Korthikanti et al. 2022, sec. 4)


def _activations_per_layer(w, plan):
    """One micro-batch through one layer: the one stage of a pp=1 1F1B plan holds one, and
    the input and output layers of sec. 4.3 (p = 1), taken off: the embedding's dropout mask,
    s b h / t, and the final norm's and output layer's inputs with the FP32 logits,
    4 s b h (1 + v/h) / t (the norm's part replicated without sequence parallelism)."""
    m = memory_breakdown(w, HW, plan)
    t, tokens = plan.tp, w.seq_len * plan.micro_batch
    sp = plan.sequence_parallel
    ends = tokens * (w.hidden * (1 if w.dropout else 0) / (t if sp else 1)
                     + 4 * w.hidden / (t if sp else 1) + 4 * w.vocab / t)
    return (m.activations - ends) / w.layers


@pytest.mark.parametrize("t", [1, 2, 8])
def test_korthikanti_activation_formulas(t):
    s, b, h, a = GPT.seq_len, 2, GPT.hidden, GPT.heads
    sbh = s * b * h
    plan = Plan(tp=t, pp=1, dp=1, global_batch=b, micro_batch=b, sequence_parallel=False,
                attention_kernel=AttentionKernel.UNFUSED)
    # no parallelism shortcuts: eq. 2 (t = 1) and eq. 3 (tensor parallel, no sequence parallel)
    assert _activations_per_layer(GPT, plan) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-12)
    # eq. 4: tensor and sequence parallel
    sp = plan.replace(sequence_parallel=True)
    assert _activations_per_layer(GPT, sp) == pytest.approx(sbh / t * (34 + 5 * a * s / h), rel=1e-12)
    # selective recomputation drops the 5as/h term; full keeps each layer's input
    sel = sp.replace(recompute=Recompute.SELECTIVE)
    assert _activations_per_layer(GPT, sel) == pytest.approx(sbh / t * 34, rel=1e-12)
    full = sp.replace(recompute=Recompute.FULL)
    assert _activations_per_layer(GPT, full) == pytest.approx(2 * sbh / t, rel=1e-12)


def test_first_stage_holds_the_in_flight_micro_batches():
    # a vocabulary small enough that the last stage's head (4 s h (1 + v/h) per micro-batch)
    # leaves the first stage the fullest
    w = dataclasses.replace(GPT, layers=8, vocab=256)
    base = Plan(tp=1, pp=4, dp=1, global_batch=16, micro_batch=1, recompute=Recompute.FULL)
    one = memory_breakdown(w, HW, base)
    per_layer_mb = 2 * GPT.seq_len * GPT.hidden
    mask = GPT.seq_len * GPT.hidden  # the embedding's dropout mask, one byte per element
    # p micro-batches x (L/p layers and the mask)
    assert one.activations == pytest.approx(4 * (2 * per_layer_mb + mask), rel=1e-12)
    inter = memory_breakdown(w, HW, base.replace(schedule=Schedule.INTERLEAVED, virtual_stages=2))
    assert inter.activations == pytest.approx(one.activations * (1 + 3 / 8), rel=1e-12)  # 1 + (p-1)/(p v)


def test_zero_stages_shard_the_states():
    plan = Plan(tp=1, pp=1, dp=8, global_batch=8)
    n = parameter_count(GPT).total
    z = [memory_breakdown(GPT, HW, plan.replace(zero_stage=k)) for k in range(4)]
    assert z[0].weights == pytest.approx(2 * n) and z[0].gradients == pytest.approx(4 * n)
    assert z[0].optimizer == pytest.approx(12 * n)
    assert z[1].optimizer == pytest.approx(12 * n / 8) and z[1].gradients == pytest.approx(4 * n)
    assert z[2].gradients == pytest.approx(4 * n / 8) and z[2].weights == pytest.approx(2 * n)
    # ZeRO-3: the shard, plus the gather buffers of two layers (the stage's weights per layer)
    assert z[3].weights == pytest.approx(2 * n / 8 + 2 * 2 * n / GPT.layers)
    bf16 = memory_breakdown(GPT, HW, plan.replace(grad_reduce=Precision.BF16))
    assert bf16.gradients == pytest.approx(2 * n)
    assert all(a.total > b.total for a, b in zip(z, z[1:]))


def test_legacy_single_fraction_ignores_the_kernel_model():
    plan = Plan(tp=1, pp=1, dp=1, global_batch=1)
    legacy = step_time(GPT, HW, plan, efficiency=Efficiency(compute=0.5))
    hw_flops = flops_per_token(GPT)[1]
    assert legacy.compute == pytest.approx(GPT.seq_len * hw_flops / (300e12 * 0.5), rel=1e-12)
    assert legacy.overhead == 0.0
    # the compute term does not depend on whether the hardware has a kernel model
    bare = step_time(GPT, HW.replace(kernels=None), plan, efficiency=Efficiency(compute=0.5))
    assert bare.compute == pytest.approx(legacy.compute, rel=1e-12)
    assert np.isfinite(step_time(GPT, HW, plan).step_time)


def test_fp8_gemms_run_at_their_own_fraction_and_the_head_stays_bf16():
    """An FP8 GEMM takes 2MNK / (P_fp8 e_fp8) + traffic at 1 byte per element; an unfitted
    FP8 fraction (0) is the BF16 one; the logits stay on the BF16 peak in FP8 runs."""
    plan = Plan(tp=2, pp=1, dp=1, global_batch=1, precision=Precision.FP8)
    hw8 = HW.replace(kernels=dataclasses.replace(KM, fp8_gemm_peak_fraction=0.5))
    ops = {o.name: o for o in operator_table(GPT, hw8, plan)}
    M, N, K = ops["ffn_in"].shape
    want = 2 * M * N * K / (600e12 * 0.5) + 1.5 * 1 * (M * K + K * N + M * N) / 2e12
    assert ops["ffn_in"].forward_s == pytest.approx(want, rel=1e-12)
    M, N, K = ops["logits"].shape
    bf16_logits = 2 * M * N * K / (300e12 * 0.7) + 1.5 * 2 * (M * K + K * N + M * N) / 2e12
    assert ops["logits"].forward_s == pytest.approx(bf16_logits, rel=1e-12)
    unset = {o.name: o for o in operator_table(GPT, HW, plan)}["ffn_in"]
    M, N, K = unset.shape
    assert unset.forward_s == pytest.approx(2 * M * N * K / (600e12 * 0.7) + 1.5 * (M * K + K * N + M * N) / 2e12,
                                            rel=1e-12)
    # the step kernel uses the same fraction: a lower FP8 fraction is a slower FP8 step, a BF16 step is unchanged
    fast, slow = (step_time(GPT, HW.replace(kernels=dataclasses.replace(KM, fp8_gemm_peak_fraction=e)), plan)
                  for e in (0.7, 0.5))
    assert slow.compute > fast.compute
    bf = plan.replace(precision=Precision.BF16)
    assert step_time(GPT, hw8, bf).step_time == step_time(GPT, HW, bf).step_time
    with pytest.raises(Exception, match="fp8_gemm_peak_fraction"):
        dataclasses.replace(KM, fp8_gemm_peak_fraction=1.5).validate()


@pytest.mark.parametrize("t,sp", [(1, False), (4, True), (4, False)])
def test_fp8_holds_its_gemm_inputs_at_one_byte(t, sp):
    """FP8 saves 2h + n_q d_v + f bytes per token and layer (QKV and MLP inputs, the output
    projection's and the second MLP matrix's inputs at 1 byte instead of 2), divided by t
    where those tensors are sharded; full recomputation keeps only the layer input (BF16)."""
    b, s, h = 2, LLAMA.seq_len, LLAMA.hidden
    plan = Plan(tp=t, pp=1, dp=1, global_batch=b, micro_batch=b, sequence_parallel=sp)
    saved = (_activations_per_layer(LLAMA, plan) - _activations_per_layer(LLAMA, plan.replace(precision=Precision.FP8)))
    sharded = LLAMA.heads * LLAMA.d_head + LLAMA.ffn_hidden
    want = b * s * ((2 * h + sharded) / t if sp else 2 * h + sharded / t)
    assert saved == pytest.approx(want, rel=1e-12)
    full = plan.replace(recompute=Recompute.FULL)
    assert _activations_per_layer(LLAMA, full) == _activations_per_layer(LLAMA, full.replace(precision=Precision.FP8))


@pytest.mark.parametrize("t,shared", [(1, 0), (1, 1), (2, 2)])
def test_fp8_holds_the_experts_gemm_inputs_at_one_byte_too(t, shared):
    """An MoE layer saves, beyond the attention's and the MLP input's FP8 bytes, each routed
    copy's first-matrix input (h) and second-matrix input (f_e) and the shared experts'
    second-matrix input (f_e n_s), over t with sequence parallelism."""
    from markovsim.training._workload import MoE
    w = Workload("moe-fp8", layers=4, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=4, vocab=32000,
                 seq_len=2048, moe=MoE(routed_experts=8, top_k=2, expert_ffn=512, shared_experts=shared,
                                       dense_layers=0))
    b, s, h, k, fe = 2, w.seq_len, w.hidden, 2, 512
    plan = Plan(tp=t, pp=1, dp=8 // t, ep=2, global_batch=16, micro_batch=b, sequence_parallel=t > 1)
    saved = _activations_per_layer(w, plan) - _activations_per_layer(w, plan.replace(precision=Precision.FP8))
    attention_and_input = 2 * h + w.heads * w.d_head
    want = b * s * (attention_and_input + k * (h + fe) + fe * shared) / t
    assert saved == pytest.approx(want, rel=1e-12)


def test_dualpipe_runs_the_head_for_half_the_micro_batches():
    """DualPipe feeds micro-batches from both ends (DeepSeek-AI 2024 sec. 3.2.1): the rank with
    the output head runs the last stage for half of them, so a larger head costs it half of
    what it costs the last stage of 1F1B."""
    plan = Plan(tp=1, pp=4, dp=1, global_batch=16, micro_batch=1)
    big = dataclasses.replace(LLAMA, vocab=4 * LLAMA.vocab)
    extra = {}
    for sched in (Schedule.ONE_F_ONE_B, Schedule.DUALPIPE):
        p = plan.replace(schedule=sched)
        extra[sched] = step_time(big, HW, p).compute - step_time(LLAMA, HW, p).compute
    assert extra[Schedule.ONE_F_ONE_B] > 0
    assert extra[Schedule.DUALPIPE] == pytest.approx(extra[Schedule.ONE_F_ONE_B] / 2, rel=1e-9)


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("w", [GPT, LLAMA], ids=["gpt", "llama"])
def test_fp8_casts_are_cast_transposes_of_each_gemm_input_and_output_gradient(w, tp):
    """Transformer Engine's cast-transpose, 4 bytes per element (the BF16 tensor read, its FP8
    copy and FP8 transpose written), of each FP8 GEMM's input in the forward and of its output
    gradient in the backward, at the memory-bound rate; the head stays BF16 (no casts), BF16
    plans have none. Shapes written out by hand."""
    plan = Plan(tp=tp, pp=1, dp=1, global_batch=2, micro_batch=2, sequence_parallel=tp > 1,
                precision=Precision.FP8)
    ops = _ops(w, plan)
    T, h, d, f = 2 * w.seq_len, w.hidden, w.d_head, w.ffn_hidden
    gate = 1 if w.ffn_kind == FFNKind.GELU else 2
    bw = 2e12 * 0.8
    # attention: QKV (input h, output (n_q + 2 n_kv) d / t), output projection (n_q d / t -> h)
    attn_in, attn_grad = h + w.heads * d / tp, (w.heads + 2 * w.kv_heads) * d / tp + h
    # MLP: in (h -> gate f / t), out (f / t -> h)
    mlp_in, mlp_grad = h + f / tp, gate * f / tp + h
    assert ops["fp8_casts_attention"].forward_s == pytest.approx(4 * T * attn_in / bw, rel=1e-12)
    assert ops["fp8_casts_attention"].backward_s == pytest.approx(4 * T * attn_grad / bw, rel=1e-12)
    assert ops["fp8_casts_mlp"].forward_s == pytest.approx(4 * T * mlp_in / bw, rel=1e-12)
    assert ops["fp8_casts_mlp"].backward_s == pytest.approx(4 * T * mlp_grad / bw, rel=1e-12)
    assert not any(name.startswith("fp8_casts") for name in _ops(w, plan.replace(precision=Precision.BF16)))


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("tp,sp", [(1, False), (2, True), (4, False)])
@pytest.mark.parametrize("w", [GPT, LLAMA], ids=["gpt", "llama"])
def test_the_operator_table_adds_up_to_the_step_compute(w, tp, sp, precision):
    """Every compute term is a row of the table: one micro-batch of a one-stage plan is the
    layer's rows (forward + backward) times the layers, plus the head's rows."""
    plan = Plan(tp=tp, pp=1, dp=1, global_batch=2, micro_batch=2, sequence_parallel=sp, precision=precision)
    rows = operator_table(w, HW, plan)
    head = {"logits", "cross_entropy"}
    layer = sum(r.forward_s + r.backward_s for r in rows if r.name not in head)
    tail = sum(r.forward_s + r.backward_s for r in rows if r.name in head)
    assert step_time(w, HW, plan).compute == pytest.approx(w.layers * layer + tail, rel=1e-12)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("shared", [0, 1])
def test_the_operator_table_adds_up_for_a_mixture_of_experts(precision, shared):
    """The same with dense and MoE layers (one expert-parallel group inside a rank, ep = 1, so
    no all-to-all): the attention rows in every layer, the dense rows in the dense layers, the
    expert rows (router, experts, shared experts, their casts and permutations) in the MoE
    layers."""
    from markovsim.training._workload import MoE
    w = Workload("moe-table", layers=4, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=4, vocab=8192,
                 seq_len=2048, moe=MoE(routed_experts=8, top_k=2, expert_ffn=512, shared_experts=shared,
                                       dense_layers=1))
    plan = Plan(tp=1, pp=1, dp=1, global_batch=2, micro_batch=2, precision=precision)
    rows = operator_table(w, HW, plan)
    attn_names = {"attention_core", "norms_residuals_dropout", "fp8_casts_attention"}
    dense_names = {"activation", "fp8_casts_mlp"}
    moe_names = {"moe_permute_activation", "fp8_casts_moe"}

    def total(pick):
        return sum(r.forward_s + r.backward_s for r in rows if pick(r))

    attn = total(lambda r: r.where == "attn" or r.name in attn_names)
    dense = total(lambda r: r.where == "dense" or r.name in dense_names)
    moe = total(lambda r: r.where == "moe" or r.name in moe_names)
    head = total(lambda r: r.name in ("logits", "cross_entropy"))
    assert {r.name for r in rows} <= attn_names | dense_names | moe_names | {"logits", "cross_entropy"} | {
        r.name for r in rows if r.shape is not None}
    want = w.layers * attn + (w.layers - w.moe_layers) * dense + w.moe_layers * moe + head
    assert step_time(w, HW, plan).compute == pytest.approx(want, rel=1e-12)


def test_a_first_generation_flash_kernel_takes_twice_the_attention_core_and_nothing_else():
    """flash1 (FlashAttention v1 or its Triton port) runs the fused algorithm at FLASH1_SPEED
    of the preset's fraction: its attention core is 1 / 0.5 times flash's, every other
    operator and the activation memory are flash's, and the step grows by exactly the
    difference of the cores (forward, backward and, with full recomputation, the repeat)."""
    from markovsim.training import FLASH1_SPEED
    assert FLASH1_SPEED == 0.5  # Dao 2023 (arXiv 2307.08691) abstract: 25-40 % against 50-73 % of the A100's peak
    w = dataclasses.replace(LLAMA, seq_len=16384)
    for recompute, forwards in ((Recompute.NONE, 0), (Recompute.FULL, 1)):
        plan = Plan(tp=1, pp=1, dp=1, global_batch=1, recompute=recompute)
        one = _ops(w, plan.replace(attention_kernel=AttentionKernel.FLASH1))
        two = _ops(w, plan)
        core1, core2 = one.pop("attention_core"), two.pop("attention_core")
        assert core1.forward_s == pytest.approx(core1.flops / 2 / (300e12 * 0.5 * FLASH1_SPEED), rel=1e-12)
        assert core1.backward_s == pytest.approx(FLASH_BACKWARD_FLOPS * core1.forward_s, rel=1e-12)
        assert {k: (o.forward_s, o.backward_s) for k, o in one.items()} == \
            {k: (o.forward_s, o.backward_s) for k, o in two.items()}
        s1 = step_time(w, HW, plan.replace(attention_kernel=AttentionKernel.FLASH1))
        s2 = step_time(w, HW, plan)
        # one micro-batch, no pipeline: the step differs by the cores' forward and backward (and
        # the recomputed forward) x layers
        want = (core1.forward_s + core1.backward_s - core2.forward_s - core2.backward_s
                + forwards * (core1.forward_s - core2.forward_s)) * w.layers
        assert s1.compute - s2.compute == pytest.approx(want, rel=1e-9)
        m1 = memory_breakdown(w, HW, plan.replace(attention_kernel=AttentionKernel.FLASH1))
        assert m1 == memory_breakdown(w, HW, plan)
