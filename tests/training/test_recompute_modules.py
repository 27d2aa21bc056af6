"""``recompute = "selective"`` with ``recompute_modules`` (Megatron-core's
``--recompute-modules``) and ``optimizer_moments = "bf16"``. References: the modules' forward
FLOPs and kept bytes written out by hand from the layer's shapes, the operator table's
forward times, and subset order (recomputing more never holds more or runs faster)."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import markovsim
from markovsim.training import Plan, Workload, load_hardware, load_workload, operator_table, step_time
from markovsim.training._inspect import memory_breakdown
from markovsim.training._plan import RECOMPUTE_MODULES
from markovsim.training._spec import plan_from_document
from markovsim.training._workload import MLA, MoE, module_recompute_flops

HW = load_hardware("h100_sxm")
MLA_MOE = Workload("mla-moe", layers=6, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=16, vocab=32000,
                   seq_len=2048, attention="mla",
                   mla=MLA(q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64),
                   moe=MoE(routed_experts=8, top_k=2, expert_ffn=512, shared_experts=1, dense_layers=2))
ALL = tuple(RECOMPUTE_MODULES)


def _plan(modules=(), **kw):
    base = dict(tp=1, pp=1, dp=8, ep=8, global_batch=16, micro_batch=1, recompute="selective",
                recompute_modules=tuple(modules))
    base.update(kw)
    return Plan(**base)


def test_no_modules_is_megatrons_default_core_attn():
    """An empty list is Megatron-core's default, ["core_attn"]: the same step and memory."""
    a, b = step_time(MLA_MOE, HW, _plan()), step_time(MLA_MOE, HW, _plan(["core_attn"]))
    assert a == b
    ma, mb = memory_breakdown(MLA_MOE, HW, _plan()), memory_breakdown(MLA_MOE, HW, _plan(["core_attn"]))
    assert ma == mb


def test_the_mla_up_projection_drops_q_k_v_and_keeps_the_latents():
    """Per token of one layer (BF16, no TP): Q (n_q d_qk) and K, V (n_q (d_qk + d_v)) at 2 bytes
    out, the two latents (r_q + r_kv + d_rope) at 2 bytes in; its forward FLOPs are the two
    up-projections'."""
    w, m = MLA_MOE, MLA_MOE.mla
    dqk = m.qk_nope_head_dim + m.qk_rope_head_dim
    out = 2 * w.heads * dqk + 2 * w.heads * (dqk + m.v_head_dim)
    kept = 2 * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)
    a = memory_breakdown(w, HW, _plan(["core_attn"])).activations
    b = memory_breakdown(w, HW, _plan(["core_attn", "mla_up_proj"])).activations
    assert a - b == pytest.approx(w.layers * w.seq_len * (out - kept), rel=1e-12)
    up = m.q_lora_rank * w.heads * dqk + m.kv_lora_rank * w.heads * (m.qk_nope_head_dim + m.v_head_dim)
    assert module_recompute_flops(w)["mla_up_proj"] == pytest.approx(2 * w.layers * up, rel=1e-12)


def test_the_up_projection_time_is_its_gemms_forward():
    """Against the operator table: the extra compute per layer and micro-batch is the forward
    of q_up and kv_up."""
    plan = _plan(["core_attn"], ep=1)
    rows = {r.name: r for r in operator_table(MLA_MOE, HW, plan)}
    a = step_time(MLA_MOE, HW, plan)
    b = step_time(MLA_MOE, HW, plan.replace(recompute_modules=("core_attn", "mla_up_proj")))
    m = 16 // 8
    per_layer = (b.compute - a.compute) / (m * MLA_MOE.layers)
    assert per_layer == pytest.approx(rows["q_up"].forward_s + rows["kv_up"].forward_s, rel=1e-9)


def test_the_experts_and_the_dense_mlp():
    """``moe`` repeats the router, top_k routed and the shared experts' GEMMs; ``mlp`` the
    dense layers' FFN; ``shared_experts`` the shared ones alone (FLOPs per token, all layers)."""
    w, e = MLA_MOE, MLA_MOE.moe
    h, g = w.hidden, 3  # SwiGLU: three matrices
    f = module_recompute_flops(w)
    assert f["mlp"] == pytest.approx(2 * e.dense_layers * g * h * w.ffn_hidden)
    shared = g * h * e.expert_ffn * e.shared_experts
    assert f["shared_experts"] == pytest.approx(2 * w.moe_layers * shared)
    assert f["moe"] == pytest.approx(2 * w.moe_layers * (h * e.routed_experts + g * h * e.expert_ffn * e.top_k + shared))
    assert f["layernorm"] == f["moe_act"] == 0.0


def test_hardware_flops_add_the_modules_forward():
    """HFU counts what is recomputed: (hfu - mfu) x step time x tokens/s-per-FLOP is the
    modules' forward FLOPs per token."""
    w = MLA_MOE
    f = module_recompute_flops(w)
    for mods in (["core_attn"], ["mla_up_proj"], ["mla_up_proj", "mlp"], ["moe"], ["shared_experts"]):
        b = step_time(w, HW, _plan(mods))
        extra = sum(f[n] for n in mods)
        # hfu and mfu share the time and the tokens: their ratio is the FLOPs' ratio
        from markovsim.training import flops_per_token
        model = flops_per_token(w)[0]
        assert b.hfu / b.mfu == pytest.approx((model + extra) / model, rel=1e-9), mods


def test_bf16_moments_hold_8_bytes_per_parameter():
    for zero in (0, 1):
        a = memory_breakdown(MLA_MOE, HW, _plan(zero_stage=zero))
        b = memory_breakdown(MLA_MOE, HW, _plan(zero_stage=zero, optimizer_moments="bf16"))
        assert b.optimizer == pytest.approx(a.optimizer * 8 / 12, rel=1e-12)
        assert (b.weights, b.gradients, b.activations) == (a.weights, a.gradients, a.activations)
    a, b = step_time(MLA_MOE, HW, _plan()), step_time(MLA_MOE, HW, _plan(optimizer_moments="bf16"))
    assert b.optimizer == pytest.approx(a.optimizer * 22 / 30, rel=1e-12)  # Adam's bytes moved: 30 -> 22


SUBSETS = [s for n in range(len(ALL) + 1) for s in itertools.combinations(ALL, n)]


@settings(max_examples=30, deadline=None)
@given(small=st.sampled_from(SUBSETS), extra=st.sampled_from(SUBSETS), tp=st.sampled_from([1, 2]),
       fp8=st.booleans())
def test_recomputing_more_holds_no_more_and_runs_no_faster(small, extra, tp, fp8):
    big = tuple(dict.fromkeys(small + extra))
    kw = dict(tp=tp, sequence_parallel=tp > 1, precision="fp8" if fp8 else "bf16",
              recompute="selective" if small else "none")
    p_small = _plan(small, **kw)
    p_big = _plan(big, **dict(kw, recompute="selective" if big else "none"))
    if not small:
        p_small = p_small.replace(recompute="none")
    a, b = step_time(MLA_MOE, HW, p_small), step_time(MLA_MOE, HW, p_big)
    ma, mb = (memory_breakdown(MLA_MOE, HW, p).activations for p in (p_small, p_big))
    assert mb <= ma * (1 + 1e-12)
    assert b.step_time >= a.step_time * (1 - 1e-12)
    # full recomputation holds less than any module set, and none more (the same tensor
    # parallelism and precision: the output layer's logits, split over the TP ranks, are held
    # in every mode)
    full = memory_breakdown(MLA_MOE, HW, _plan(**dict(kw, recompute="full"))).activations
    none = memory_breakdown(MLA_MOE, HW, _plan(**dict(kw, recompute="none"))).activations
    assert full <= mb <= none * (1 + 1e-12)


@pytest.mark.parametrize("changes, match", [
    (dict(recompute_modules=("attention",)), "not a module"),
    (dict(recompute_modules="mlp"), "list of module names"),
    (dict(recompute_modules=("mlp", "mlp")), "named twice"),
    (dict(recompute="full"), "need recompute='selective'"),
    (dict(optimizer_moments="fp8"), "optimizer_moments='fp8'"),
])
def test_bad_plans_are_refused_by_name(changes, match):
    plan = _plan(["mlp"]).replace(**changes)
    with pytest.raises(markovsim.InvalidParameterError, match=match):
        step_time(MLA_MOE, HW, plan)


def test_modules_the_workload_lacks_are_refused():
    dense = load_workload("llama3_8b")
    plan = Plan(tp=1, pp=1, dp=8, global_batch=16, recompute="selective")
    for name, match in (("mla_up_proj", "multi-head latent attention"), ("moe", "mixture-of-experts"),
                        ("moe_act", "mixture-of-experts"), ("shared_experts", "shared experts")):
        with pytest.raises(markovsim.InvalidParameterError, match=match):
            step_time(dense, HW, plan.replace(recompute_modules=(name,)))
    assert step_time(dense, HW, plan.replace(recompute_modules=("layernorm", "mlp"))).step_time > 0


def test_the_plan_reader_takes_them_and_names_a_typo():
    doc = {"workload": "deepseek_v3", "hardware": "h100_sxm", "tp": 1, "pp": 16, "dp": 64, "ep": 64,
           "global_batch": 1024, "layer_split": "uneven", "recompute": "selective",
           "recompute_modules": ["mla_up_proj", "layernorm"], "optimizer_moments": "bf16"}
    spec = plan_from_document(doc)
    assert spec.plan.recompute_modules == ("mla_up_proj", "layernorm")
    assert spec.plan.optimizer_moments.value == "bf16"
    with pytest.raises(markovsim.SpecError, match=r"recompute_modules.*'mla_up'.*not a module"):
        plan_from_document(dict(doc, recompute_modules=["mla_up"]))
    with pytest.raises(markovsim.SpecError, match="recompute_modules"):
        plan_from_document(dict(doc, recompute_modules="mla_up_proj"))


def test_the_search_proposes_the_recipes_module_sets_for_mla_and_moe_only():
    """MLA and MoE workloads get the module sets NVIDIA's DeepSeek-V3 and gpt-oss recipes use
    as extra candidates; the array path agrees with the Plan path on them; a dense GQA
    workload's candidates are unchanged."""
    from markovsim.training import candidate_plans, evaluate_plans, plan_modules
    from markovsim.training._search import SEARCH_MODULES

    plans, ok = candidate_plans(MLA_MOE, 16, global_batch=32, max_pp=2, virtual_stages=(1,), context_parallel=(1,),
                                micro_batches=(1,), zero_stages=(1,))
    seen = {plan_modules(plans, i) for i in range(ok.size)}
    assert seen == {(), SEARCH_MODULES["mla"], SEARCH_MODULES["moe"]}
    out = evaluate_plans(MLA_MOE, HW, plans)
    for names in (SEARCH_MODULES["mla"], SEARCH_MODULES["moe"]):
        i = next(j for j in range(ok.size) if ok[j] and plan_modules(plans, j) == names)
        plan = Plan(tp=int(plans["tp"][i]), pp=int(plans["pp"][i]), dp=int(plans["dp"][i]), ep=int(plans["ep"][i]),
                    global_batch=32, sequence_parallel=bool(plans["sp"][i]), recompute="selective",
                    recompute_modules=names, zero_stage=1,
                    layer_split="uneven" if plans["uneven"][i] else "even")
        assert float(out["step_time"][i]) == pytest.approx(step_time(MLA_MOE, HW, plan).step_time, rel=1e-9)
    dense = load_workload("llama3_8b")
    p, o = candidate_plans(dense, 16, global_batch=32)
    assert {plan_modules(p, i) for i in range(o.size)} == {()}
    p0, o0 = candidate_plans(dense, 16, global_batch=32, partial_recompute=())
    assert o.size == o0.size * 4 // 3  # none, selective, full + the one partial share: nothing added
