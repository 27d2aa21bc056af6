"""Model files: parameter counts against the published totals; FLOPs per token; errors."""

import math
from pathlib import Path

import pytest

import markovsim
from markovsim.training import (FFNKind, FlopConvention, MoE, Recompute, Workload, flops_per_token,
                                load_hardware, load_plan, load_workload, model_flops_per_token, parameter_count)

WORKLOADS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "models" / "workloads").glob("*.toml"))


@pytest.mark.parametrize("name", WORKLOADS)
def test_parameter_count_matches_published(name):
    w = load_workload(name)
    pc = parameter_count(w)
    tol = w.reported_params_tolerance
    assert w.reported_total_params is not None
    assert pc.total == pytest.approx(w.reported_total_params, rel=tol)
    if w.reported_active_params is not None:
        assert pc.active == pytest.approx(w.reported_active_params, rel=tol)


@pytest.mark.parametrize("name", WORKLOADS)
def test_flops_per_token_is_six_n_plus_attention(name):
    # independent reference: 6 x (active weights used in matmuls) + 6 x attention core
    w = load_workload(name)
    pc = parameter_count(w)
    model, hardware = flops_per_token(w)
    assert model == hardware
    norms = (2 * w.layers + 1) * w.hidden
    if w.mla is not None:
        norms += w.layers * (w.mla.q_lora_rank + w.mla.kv_lora_rank)
        dqk, dv = w.mla.qk_nope_head_dim + w.mla.qk_rope_head_dim, w.mla.v_head_dim
    else:
        dqk = dv = w.hidden // w.heads
    # the output head is a matrix multiplication even when tied to the embedding
    six_n = 6 * (pc.active - pc.embedding - pc.output + w.vocab * w.hidden - norms)
    # PaLM: 6N + 12 L H Q T (Q = head dim, T = sequence), with (qk + v) / 2 for Q
    attention = 12 * w.layers * w.heads * (dqk + dv) / 2 * w.seq_len
    assert model == pytest.approx(six_n + attention, rel=1e-12)
    double, _ = flops_per_token(w, seq_len=2 * w.seq_len)
    assert double - model == pytest.approx(attention, rel=1e-12)
    _, sel = flops_per_token(w, recompute=Recompute.SELECTIVE)
    _, fullr = flops_per_token(w, recompute=Recompute.FULL)
    assert model < sel < fullr == pytest.approx(model * 4 / 3)


def test_dense_counts_by_hand():
    # tiny GQA model: h=8, 2 heads of 4, 1 kv head, ffn 16 swiglu, vocab 10, 2 layers
    w = Workload("tiny", layers=2, hidden=8, ffn_hidden=16, heads=2, kv_heads=1, vocab=10, seq_len=4)
    attn = 8 * 8 + 8 * 4 * 2 + 8 * 8
    layer = attn + 3 * 8 * 16 + 2 * 8
    assert parameter_count(w).total == 2 * layer + 2 * 10 * 8 + 8
    matmul = 2 * (attn + 3 * 8 * 16) + 10 * 8  # output head is a matmul, the input embedding is not
    core = 2 * 2 * 4 * 2 * (4 + 4)
    assert flops_per_token(w)[0] == 3 * (2 * matmul + core)


def test_moe_active_counts_top_k():
    w = Workload("tinymoe", layers=3, hidden=8, ffn_hidden=16, heads=2, kv_heads=2, vocab=10, seq_len=4,
                 moe=MoE(routed_experts=4, shared_experts=1, top_k=2, expert_ffn=4, dense_layers=1))
    pc = parameter_count(w)
    one = 3 * 8 * 4
    assert pc.total - pc.active == 2 * (4 - 2) * one
    assert pc.expert_total == 2 * 4 * one


def test_hardware_and_plans_load():
    hw = load_hardware("atlas_800t_a2")
    assert hw.levels[0].domain_size == 8 and hw.levels[-1].bandwidth_bytes_per_s == 25e9
    for name in ("pangu_ultra_135b_8k", "pangu_ultra_moe_718b_a2_8k", "pangu_ultra_moe_718b_cm384_4k"):
        spec = load_plan(name)
        assert spec.plan.world_size in (8192, 4096)


def test_flop_conventions_by_hand():
    # tiny MHA model: matmul weights per token and the attention core computed by hand
    w = Workload("tiny", layers=2, hidden=8, ffn_hidden=16, heads=2, kv_heads=2, vocab=10, seq_len=4,
                 ffn_kind=FFNKind.GELU)
    matmul = 2 * (4 * 8 * 8 + 2 * 8 * 16) + 10 * 8
    core = 2 * 2 * 4 * 2 * (4 + 4)  # layers x 2 s n_q (d_qk + d_v)
    assert model_flops_per_token(w, "six_n") == 6 * matmul
    assert model_flops_per_token(w, "palm") == 6 * matmul + 3 * core
    assert model_flops_per_token(w, FlopConvention.CAUSAL) == 6 * matmul + 1.5 * core
    assert model_flops_per_token(w, "megatron") == 4 * (2 * matmul - 2 * 10 * 8 + core) + 3 * 2 * 10 * 8
    # the Megatron form is eq. 3 of Narayanan et al. 2021 for a GPT layer (no biases here)
    g = Workload("gpt", layers=3, hidden=64, ffn_hidden=256, heads=4, kv_heads=4, vocab=96, seq_len=32,
                 ffn_kind=FFNKind.GELU, tied_embeddings=True)
    L, h, s, V = 3, 64, 32, 96
    eq3 = 96 * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h)) / s  # per token (B s tokens)
    assert model_flops_per_token(g, "megatron") == pytest.approx(eq3, rel=1e-12)
    assert flops_per_token(g, causal=True)[0] < flops_per_token(g)[0]


def test_tied_embeddings_count_once():
    kw = dict(layers=2, hidden=8, ffn_hidden=16, heads=2, kv_heads=2, vocab=10, seq_len=4)
    tied, untied = Workload("t", tied_embeddings=True, **kw), Workload("u", **kw)
    assert parameter_count(untied).total - parameter_count(tied).total == 10 * 8
    assert flops_per_token(tied) == flops_per_token(untied)


def test_spec_errors_name_the_file_and_key(tmp_path):
    bad = tmp_path / "w.toml"
    bad.write_text('name = "x"\nlayers = 2\nhidden = 8\nffn_hidden = 16\nheads = 2\nkv_heads = 1\n'
                   'vocab = 10\nseq_len = 4\nwidth = 3\n')
    with pytest.raises(markovsim.SpecError, match="width"):
        load_workload(bad)
    bad.write_text('name = "h"\npeak = 3\nhbm = "64 GiB"\nhbm_bandwidth = "1 TB/s"\n')
    with pytest.raises(markovsim.SpecError, match="peak"):
        load_hardware(bad)
    bad.write_text('name = "h"\nhbm = "64 GiB"\nhbm_bandwidth = "1 TB/s"\n[peak_dense]\nbf16 = "1 TFLOP/s"\n'
                   '[[levels]]\nname = "x"\ndomain_size = 0\nbandwidth = "1 GB/s"\nlatency = "1 us"\n')
    with pytest.raises(markovsim.SpecError, match="direction"):
        load_hardware(bad)
