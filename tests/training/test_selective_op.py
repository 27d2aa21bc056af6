"""``recompute = "selective-op"``: torchtitan's per-operator checkpoint policy. The reference
here is the policy's rule applied by hand: the matrix multiplications of a block in program
order, the even-numbered ones recomputed, the attention kernel's output saved, every
element-wise operator recomputed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim.training import Plan, Workload, flops_per_token, load_hardware, operator_table, step_time
from markovsim.training._inspect import memory_breakdown
from markovsim.training._search import _RECOMPUTES
from markovsim.training._spec import plan_from_document
from markovsim.training._workload import MLA, MoE, Recompute, op_recompute_shares

HW = load_hardware("a100_sxm_80gb")


def _block_mms(w):
    """(name, weights per token) of each aten.mm of one block, torchtitan's order."""
    h, f = w.hidden, w.ffn_hidden
    if w.mla is None:
        d = w.d_head
        attn = [("wq", h * w.heads * d), ("wk", h * w.kv_heads * d), ("wv", h * w.kv_heads * d), ("wo", w.heads * d * h)]
    else:
        m = w.mla
        dqk = m.qk_nope_head_dim + m.qk_rope_head_dim
        attn = [("wq_a", h * m.q_lora_rank), ("wq_b", m.q_lora_rank * w.heads * dqk),
                ("wkv_a", h * (m.kv_lora_rank + m.qk_rope_head_dim)),
                ("wkv_b", m.kv_lora_rank * w.heads * (m.qk_nope_head_dim + m.v_head_dim)), ("wo", w.heads * m.v_head_dim * h)]
    ffn = [("w1", h * f), ("w3", h * f), ("w2", f * h)] if w.ffn_kind.value == "swiglu" else [("w1", h * f), ("w2", f * h)]
    return attn + ffn


def _recomputed_weights(w):
    return sum(size for i, (_, size) in enumerate(_block_mms(w), start=1) if i % 2 == 0)


DENSE = [
    Workload("gqa-swiglu", layers=8, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=4, vocab=32000, seq_len=2048),
    Workload("mha-gelu", layers=8, hidden=1024, ffn_hidden=4096, heads=16, kv_heads=16, vocab=32000, seq_len=2048,
             ffn_kind="gelu"),
    Workload("mla-swiglu", layers=8, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=16, vocab=32000, seq_len=2048, attention="mla",
             mla=MLA(q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)),
    Workload("mla-gelu", layers=8, hidden=1024, ffn_hidden=4096, heads=16, kv_heads=16, vocab=32000, seq_len=2048, attention="mla",
             ffn_kind="gelu",
             mla=MLA(q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64)),
]


@pytest.mark.parametrize("w", DENSE, ids=lambda w: w.name)
def test_recomputed_flops_are_the_even_numbered_matmuls(w):
    model, none = flops_per_token(w)
    _, op = flops_per_token(w, recompute="selective-op")
    assert none == model
    assert op - model == pytest.approx(2.0 * w.layers * _recomputed_weights(w), rel=1e-12)
    _, full = flops_per_token(w, recompute="full")
    assert model < op < full


def test_the_shares_of_a_llama_block():
    """wq, wk, wv, wo, w1, w3, w2: wk, wo and w3 are recomputed."""
    w = DENSE[0]
    r = op_recompute_shares(w)
    assert r["attn_out"] == 1.0 and r["ffn_in"] == 0.5 and r["ffn_out"] == 0.0
    assert r["qkv"] == pytest.approx(4 / (16 + 8))
    assert r["expert_in"] == r["expert_out"] == r["logits"] == 0.0


def _plan(rec, **kw):
    return Plan(tp=1, pp=1, dp=8, global_batch=16, micro_batch=1, recompute=rec, zero_stage=3, **kw)


@pytest.mark.parametrize("w", DENSE[:2], ids=lambda w: w.name)
def test_the_extra_time_is_the_recomputed_operators_forward(w):
    """Against the operator table: the shares of the GEMMs' forward times plus every
    element-wise operator's forward, per layer and micro-batch; the fused attention core is
    not repeated."""
    rows = {r.name: r for r in operator_table(w, HW, _plan("none"))}
    shares = op_recompute_shares(w)
    gemms = sum(shares[name] * r.forward_s for name, r in rows.items() if name in shares)
    elementwise = rows["norms_residuals_dropout"].forward_s + rows["activation"].forward_s
    none, op = step_time(w, HW, _plan("none")), step_time(w, HW, _plan("selective-op"))
    m = 16 // 8
    assert (op.compute - none.compute) / (m * w.layers) == pytest.approx(gemms + elementwise, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(w=st.sampled_from(DENSE), tp=st.sampled_from([1, 2]), mb=st.sampled_from([1, 2]),
       attn=st.sampled_from(["flash", "unfused"]))
def test_selective_op_lies_between_none_and_full(w, tp, mb, attn):
    base = Plan(tp=tp, pp=1, dp=4, global_batch=8 * mb, micro_batch=mb, attention_kernel=attn,
                sequence_parallel=tp > 1)
    b = {r: step_time(w, HW, base.replace(recompute=r)) for r in ("none", "selective-op", "full")}
    m = {r: memory_breakdown(w, HW, base.replace(recompute=r)).activations for r in b}
    assert b["none"].step_time < b["selective-op"].step_time < b["full"].step_time
    assert m["full"] < m["selective-op"] < m["none"]
    # the model FLOPs do not depend on recomputation; the hardware FLOPs do
    assert b["none"].mfu * b["none"].step_time == pytest.approx(b["selective-op"].mfu * b["selective-op"].step_time)
    assert b["selective-op"].hfu * b["selective-op"].step_time > b["none"].hfu * b["none"].step_time


def test_kept_activations_of_a_llama_layer():
    """Per token (no TP): the input 2h, the outputs of wq, wv, w1 and w2 in BF16 and the
    attention output with its log-sum-exp; the output layer's inputs and FP32 logits, 4h + 4v,
    on top (Korthikanti et al. 2022, sec. 4.3)."""
    w = DENSE[0]
    h, f, d = w.hidden, w.ffn_hidden, w.d_head
    per_token = 2 * h + 2 * (w.heads * d + w.kv_heads * d + f + h) + 2 * w.heads * d + 4 * w.heads
    plan = _plan("selective-op").replace(zero_stage=1)
    assert plan.tp == 1 and plan.pp == 1 and plan.micro_batch == 1 and not w.dropout
    got = memory_breakdown(w, HW, plan).activations
    assert got == pytest.approx(w.seq_len * (w.layers * per_token + 4 * h + 4 * w.vocab), rel=1e-12)


def test_an_moe_layer_keeps_its_experts_and_repeats_the_rest():
    w = Workload("moe", layers=4, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=4, vocab=32000, seq_len=2048,
                 moe=MoE(routed_experts=8, top_k=2, expert_ffn=1408, shared_experts=1, dense_layers=0))
    plan = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=16, micro_batch=1)
    b = {r: step_time(w, HW, plan.replace(recompute=r)) for r in ("none", "selective-op", "full")}
    assert b["none"].step_time < b["selective-op"].step_time < b["full"].step_time
    model, hw = flops_per_token(w, recompute="selective-op")
    r = op_recompute_shares(w)
    # router (5th mm: saved), shared w1 (6th), w3 (7th), w2 (8th): w1 and w2 recomputed
    assert r["router"] == 0.0 and r["shared_in"] == 0.5 and r["shared_out"] == 1.0
    attn = w.hidden * w.kv_heads * w.d_head + w.heads * w.d_head * w.hidden
    shared = 2 * w.hidden * 1408
    assert hw - model == pytest.approx(2 * w.layers * (attn + shared), rel=1e-12)


def test_the_plan_reader_takes_it_and_the_search_does_not_propose_it():
    doc = {"workload": "llama3_8b", "hardware": "a100_sxm_80gb", "tp": 1, "pp": 1, "dp": 64, "global_batch": 64,
           "zero_stage": 3, "recompute": "selective-op"}
    assert plan_from_document(doc).plan.recompute is Recompute.SELECTIVE_OP
    assert Recompute.SELECTIVE_OP not in _RECOMPUTES
    assert np.isfinite(step_time(*_spec_args(plan_from_document(doc))).step_time)


def _spec_args(spec):
    return spec.workload, spec.hardware, spec.plan
