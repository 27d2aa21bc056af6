"""``elementwise = "eager"``: PyTorch's eager operators of a Llama block (torchtitan without
torch.compile). The reference is the byte count of each operator written out here from the
operator sequence of torchtitan's model code (read and write bytes per element, BF16 2 and
FP32 4), and the layer's shapes applied by hand; the model's tables must agree with it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._errors import SpecError
from markovsim.training import (EAGER_BYTES, Elementwise, Plan, Workload, load_hardware, operator_table,
                                search_plans, step_time)
from markovsim.training._spec import plan_from_document
from markovsim.training._workload import MLA, MoE

HW = load_hardware("a100_sxm_80gb")
BW = HW.hbm_bandwidth_bytes_per_s * HW.kernels.memory_bandwidth_fraction

# (read, write) bytes per element of each eager kernel, in program order
RMSNORM = [(2, 4),   # x.float()
           (4, 4),   # pow(2)
           (4, 0),   # mean over the hidden dimension (a vector out)
           (4, 4),   # x * rsqrt(...) (the rsqrt of the mean: a vector)
           (4, 2),   # .type_as(x)
           (2, 2)]   # * weight
ROTARY = [(2, 4),    # xq.float() (view_as_complex is a view)
          (4, 4),    # the complex product with freqs_cis
          (4, 2)]    # view_as_real is a view; .type_as(xq)
SWIGLU = [(2, 2),    # silu(w1 x)
          (4, 2)]    # silu(.) * w3 x
FUSED_NORM, FUSED_SWIGLU = 4, 6  # one kernel: read and write BF16; read two, write one


def _bytes(ops):
    return sum(r + w for r, w in ops)


def test_the_eager_byte_counts_are_the_operators_of_the_block():
    assert EAGER_BYTES["rmsnorm"] == _bytes(RMSNORM) == 36
    assert EAGER_BYTES["rotary"] == _bytes(ROTARY) == 20
    assert EAGER_BYTES["swiglu"] == _bytes(SWIGLU) == 10
    assert EAGER_BYTES["attention_out"] == 2 + 2  # transpose(1, 2).contiguous(): one copy
    assert EAGER_BYTES["kv_repeat"] == 2  # expand + reshape: a BF16 read per source, a write per copy


GQA = Workload("gqa-swiglu", layers=8, hidden=2048, ffn_hidden=5632, heads=32, kv_heads=8, vocab=32000,
               seq_len=4096)
MHA_GELU = Workload("mha-gelu", layers=8, hidden=2048, ffn_hidden=8192, heads=32, kv_heads=32, vocab=32000,
                    seq_len=4096, ffn_kind="gelu")
MLA_SWIGLU = Workload("mla-swiglu", layers=8, hidden=2048, ffn_hidden=5632, heads=16, kv_heads=16, vocab=32000,
                      seq_len=4096, attention="mla",
                      mla=MLA(q_lora_rank=512, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32,
                              v_head_dim=64))


def _forward_bytes_by_hand(w, tp, mb, sp):
    """Extra forward bytes of one eager layer on one rank, from the operator lists."""
    T = mb * w.seq_len
    norm_tokens = T / tp if sp else T
    if w.ffn_kind.value == "gelu":  # nn.LayerNorm and F.gelu are one kernel each in eager mode too
        return T * w.heads * w.d_head / tp * EAGER_BYTES["attention_out"]
    extra = 2 * norm_tokens * w.hidden * (_bytes(RMSNORM) - FUSED_NORM)
    extra += T * w.ffn_hidden / tp * (_bytes(SWIGLU) - FUSED_SWIGLU)
    if w.mla is None:
        d = w.d_head
        extra += T * (w.heads + w.kv_heads) * d / tp * _bytes(ROTARY)
        # keys and values each: the kv heads read, the query heads written
        extra += 2 * T * (w.kv_heads * 2 + w.heads * 2) * d / tp
        extra += T * w.heads * d / tp * 4
    else:
        m = w.mla
        extra += T * (w.heads / tp + 1) * m.qk_rope_head_dim * _bytes(ROTARY)  # one shared rotary key head
        extra += T * w.heads * m.v_head_dim / tp * 4
    return extra


def _elementwise_forward(w, plan):
    return sum(o.forward_s for o in operator_table(w, HW, plan) if o.where == "elementwise"
               and o.name != "cross_entropy")


@pytest.mark.parametrize("w", [GQA, MHA_GELU, MLA_SWIGLU], ids=lambda w: w.name)
@pytest.mark.parametrize("tp,sp", [(1, False), (2, True), (4, False)])
def test_the_operator_table_moves_the_bytes_counted_by_hand(w, tp, sp):
    fused = Plan(tp=tp, pp=1, dp=1, global_batch=2, micro_batch=2, sequence_parallel=sp)
    eager = fused.replace(elementwise="eager")
    extra = _elementwise_forward(w, eager) - _elementwise_forward(w, fused)
    assert extra == pytest.approx(_forward_bytes_by_hand(w, tp, 2, sp) / BW, rel=1e-9)
    # every other operator is timed as before
    others = {o.name: o for o in operator_table(w, HW, fused) if o.where != "elementwise"}
    assert others == {o.name: o for o in operator_table(w, HW, eager) if o.where != "elementwise"}


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 8]), mb=st.sampled_from([1, 2]),
       recompute=st.sampled_from(["none", "selective", "selective-op", "full"]))
def test_eager_operators_only_add_time_and_the_default_is_fused(tp, dp, mb, recompute):
    plan = Plan(tp=tp, pp=1, dp=dp, global_batch=dp * mb * 2, micro_batch=mb, recompute=recompute)
    fused = step_time(GQA, HW, plan)
    assert Plan(tp=1, pp=1, dp=1, global_batch=1).elementwise is Elementwise.FUSED
    assert step_time(GQA, HW, plan.replace(elementwise="fused")).step_time == fused.step_time
    eager = step_time(GQA, HW, plan.replace(elementwise="eager"))
    assert eager.compute > fused.compute
    assert eager.step_time - fused.step_time == pytest.approx(eager.compute - fused.compute, rel=1e-6)
    assert eager.tp_exposed == fused.tp_exposed and eager.dp_exposed == fused.dp_exposed


def test_a_search_holding_eager_operators_times_its_plans_eager():
    held = Plan(tp=1, pp=1, dp=1, global_batch=1, elementwise="eager")
    found = search_plans(GQA, HW, 16, global_batch=64, max_pp=2, numerics=held)
    assert Elementwise(found.plan.elementwise) is Elementwise.EAGER
    assert found.breakdown.step_time == pytest.approx(step_time(GQA, HW, found.plan).step_time, rel=1e-9)
    fused = search_plans(GQA, HW, 16, global_batch=64, max_pp=2)
    assert Elementwise(fused.plan.elementwise) is Elementwise.FUSED
    assert found.breakdown.step_time > fused.breakdown.step_time


def test_a_plan_file_names_it_and_a_wrong_value_is_refused_with_the_choices():
    doc = {"workload": "llama3_8b", "hardware": "a100_sxm_80gb", "tp": 1, "pp": 1, "dp": 8, "global_batch": 8}
    assert plan_from_document(doc).plan.elementwise is Elementwise.FUSED
    assert plan_from_document({**doc, "elementwise": "Eager"}).plan.elementwise is Elementwise.EAGER
    with pytest.raises(SpecError, match=r"elementwise.*'compiled'.*'fused', 'eager'"):
        plan_from_document({**doc, "elementwise": "compiled"})


def test_the_caveat_asks_a_plan_off_megatron_to_state_how_its_operators_run():
    """Said with both steps (the library's step_time) when eager operators would move a fused
    plan by more than 5 % and nothing says how they run; not for a plan that writes
    elementwise, runs eager, runs Megatron-core (an H100 plan naming no stack takes it) or
    whose eager operators barely matter (a GELU model: only the output copy)."""
    from markovsim.training import plan_caveats
    from markovsim.training._outputs import ELEMENTWISE_SENSITIVITY, elementwise_caveat

    doc = {"workload": "llama3_8b", "hardware": "a100_sxm_80gb", "tp": 1, "pp": 1, "dp": 64, "global_batch": 64}
    bare = plan_from_document(doc)
    base = step_time(bare.workload, bare.hardware, bare.plan, efficiency=bare.efficiency).step_time
    eager = step_time(bare.workload, bare.hardware, bare.plan.replace(elementwise="eager"),
                      efficiency=bare.efficiency).step_time
    assert eager / base - 1 > ELEMENTWISE_SENSITIVITY == 0.05
    notes = elementwise_caveat(bare)
    assert len(notes) == 1 and notes[0] in plan_caveats(bare)
    assert f"{100 * (eager / base - 1):+.0f} % ({eager:.3g} s against {base:.3g} s)" in notes[0]
    for quiet in ({**doc, "elementwise": "fused"}, {**doc, "elementwise": "eager"},
                  {**doc, "hardware": "h100_sxm"}, {**doc, "workload": "gpt3_175b", "tp": 8, "pp": 8, "dp": 1,
                                                     "global_batch": 8}):
        assert elementwise_caveat(plan_from_document(quiet)) == [], quiet
    # on the H100 a plan that names the library's stack (PyTorch, not Megatron) is asked
    assert elementwise_caveat(plan_from_document({**doc, "hardware": "h100_sxm",
                                                  "efficiency": {"stack": "default"}}))


@pytest.mark.parametrize("elementwise, per_norm", [("fused", FUSED_NORM), ("eager", _bytes(RMSNORM))])
def test_recomputing_the_norms_repeats_what_the_norms_move(elementwise, per_norm):
    """recompute_modules = ["layernorm"] repeats both norms' forward in the backward: per
    layer 2 norms x their bytes per element x tokens x hidden, eager or fused."""
    plan = Plan(tp=1, pp=1, dp=1, global_batch=1, micro_batch=1, elementwise=elementwise)
    none = step_time(GQA, HW, plan).compute
    norms = step_time(GQA, HW, plan.replace(recompute="selective", recompute_modules=("layernorm",))).compute
    assert norms - none == pytest.approx(GQA.layers * 2 * per_norm * GQA.seq_len * GQA.hidden / BW, rel=1e-9)


def test_on_a_tpu_no_plan_is_asked_and_eager_operators_are_refused():
    """TPU programs run through XLA (graph_compiler = "xla" in the TPU presets, and only
    there): a TPU plan is not asked how its element-wise operators run, and eager ones are
    refused by step_time, the linearity table and the search, naming the compiler."""
    from markovsim._errors import InvalidParameterError
    from markovsim.training import FixedGlobalBatch, scaling_curve
    from markovsim.training._outputs import elementwise_caveat
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "models" / "hardware"
    compilers = {p.stem: load_hardware(p.stem).graph_compiler for p in root.glob("*.toml")}
    assert {k for k, v in compilers.items() if v} == {"tpu_v4", "tpu_v5e", "tpu_v5p"}
    assert {v for v in compilers.values()} == {"", "xla"}
    import dataclasses
    with pytest.raises(InvalidParameterError, match=r"graph_compiler='tvm': expected one of '', 'xla'"):
        dataclasses.replace(load_hardware("tpu_v5p"), graph_compiler="tvm").validate()
    doc = {"workload": "llama3_8b", "hardware": "tpu_v5p", "tp": 1, "pp": 1, "dp": 64, "global_batch": 64}
    spec = plan_from_document(doc)
    on_gpu = plan_from_document({**doc, "hardware": "a100_sxm_80gb"})
    assert elementwise_caveat(on_gpu) and elementwise_caveat(spec) == []
    eager = spec.plan.replace(elementwise="eager")
    with pytest.raises(InvalidParameterError, match=r"elementwise='eager'.*Google TPU v5p.*XLA.*expected 'fused'"):
        step_time(spec.workload, spec.hardware, eager)
    with pytest.raises(InvalidParameterError, match="XLA"):
        scaling_curve(spec.workload, spec.hardware, eager, [64, 128], batch=FixedGlobalBatch(64))
    with pytest.raises(InvalidParameterError, match="XLA"):
        search_plans(spec.workload, spec.hardware, 64, global_batch=64, numerics=eager)


MOE_MLA = Workload("moe-mla", layers=4, hidden=1024, ffn_hidden=2816, heads=16, kv_heads=16, vocab=32000,
                   seq_len=2048, attention="mla",
                   mla=MLA(q_lora_rank=384, kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=32, v_head_dim=64),
                   moe=MoE(routed_experts=8, top_k=2, expert_ffn=704, shared_experts=1, dense_layers=1))


@settings(max_examples=20, deadline=None)
@given(w=st.sampled_from([GQA, MHA_GELU, MLA_SWIGLU, MOE_MLA]), tp=st.sampled_from([1, 2]),
       ep=st.sampled_from([1, 2]), recompute=st.sampled_from(["none", "selective", "selective-op", "full"]),
       modules=st.sampled_from([(), ("layernorm",), ("moe_act",)]))
def test_eager_steps_are_finite_slower_and_leave_memory_alone(w, tp, ep, recompute, modules):
    if w.moe is None:
        ep, modules = 1, tuple(m for m in modules if m != "moe_act")
    plan = Plan(tp=tp, pp=1, dp=4, ep=ep, global_batch=8, micro_batch=1, recompute=recompute,
                recompute_modules=modules if recompute == "selective" else ())
    fused = step_time(w, HW, plan)
    eager = step_time(w, HW, plan.replace(elementwise="eager"))
    assert all(map(np.isfinite, (eager.step_time, eager.compute, eager.memory_bytes)))
    assert eager.compute > fused.compute
    assert eager.memory_bytes == fused.memory_bytes
