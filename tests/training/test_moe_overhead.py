"""The optional MoE host term: ``kernels.moe_expert_overhead_s`` per local expert of each MoE
layer and micro-batch; the layer runs at the pace of the slower of device and host. Every
preset leaves it at 0 (no non-holdout MoE run to fit it on)."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import markovsim
from markovsim.training import Efficiency, KernelModel, Plan, Run, Workload, calibrate, load_hardware, step_time
from markovsim.training._calibrate import predict
from markovsim.training._spec import PlanSpec, hardware_from_document
from markovsim.training._workload import MoE

HW = load_hardware("b200")
MOE_W = Workload("moe-test", layers=8, hidden=2048, ffn_hidden=6144, ffn_kind="swiglu", heads=16, kv_heads=4,
                 vocab=32000, seq_len=4096, moe=MoE(routed_experts=64, shared_experts=0, top_k=4, expert_ffn=768, dense_layers=0))
DENSE_W = Workload("dense-test", layers=8, hidden=2048, ffn_hidden=8192, heads=16, kv_heads=16, vocab=32000,
                   seq_len=4096)
PLAN = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=64, micro_batch=1)


def _with(c):
    return HW.replace(kernels=dataclasses.replace(HW.kernels, moe_expert_overhead_s=c))


def test_every_preset_leaves_it_off():
    for name in ("a100_sxm_80gb", "h100_sxm", "h800_sxm", "h200_sxm", "b200", "gb200_nvl72", "b300", "gb300_nvl72", "tpu_v5p", "tpu_v5e"):
        assert load_hardware(name).kernels.moe_expert_overhead_s == 0.0


@settings(max_examples=20, deadline=None)
@given(c=st.floats(0.0, 0.05))
def test_a_dense_model_never_pays_it(c):
    plan = PLAN.replace(ep=1)
    assert step_time(DENSE_W, _with(c), plan).step_time == step_time(DENSE_W, HW, plan).step_time


def test_host_bound_layers_take_the_host_time_and_device_bound_ones_are_unchanged():
    base = step_time(MOE_W, HW, PLAN)
    tiny = step_time(MOE_W, _with(1e-9), PLAN)
    assert tiny.step_time == base.step_time  # the device is slower: nothing changes
    c, local = 0.05, 64 / 8  # 0.4 s per MoE layer: far above the device time
    slow = step_time(MOE_W, _with(c), PLAN)
    m = PLAN.global_batch / (PLAN.dp * PLAN.micro_batch)
    # every layer is an MoE layer: the compute is m x (layers x host time + the head's device time)
    head = base.compute / m - MOE_W.layers * _device_moe_layer_time()
    assert slow.compute == pytest.approx(m * (MOE_W.layers * c * local + head), rel=1e-9)


def _device_moe_layer_time():
    """One MoE layer's device time per micro-batch, from the difference of two models that
    differ by one layer (the head and embeddings identical)."""
    w9 = dataclasses.replace(MOE_W, layers=9)
    a = step_time(MOE_W, HW, PLAN.replace(pp=1)).compute
    b = step_time(w9, HW, PLAN.replace(pp=1)).compute
    return (b - a) / (PLAN.global_batch / (PLAN.dp * PLAN.micro_batch))


def test_calibrate_recovers_a_planted_value():
    truth = _with(4e-3)
    spec = PlanSpec("planted", MOE_W, truth, PLAN, Efficiency())
    value = predict(Run("planted", spec, "tokens_per_s_per_card", 1.0))
    run = Run("planted", PlanSpec("planted", MOE_W, HW, PLAN, Efficiency()), "tokens_per_s_per_card", value)
    cal = calibrate([run], ["moe_expert_overhead_s"], start=dataclasses.replace(HW.kernels, moe_expert_overhead_s=1e-2))
    assert cal.values[0] == pytest.approx(4e-3, rel=1e-6)


def test_the_reader_takes_a_time_and_refuses_a_negative_one():
    import tomllib
    from pathlib import Path
    doc = tomllib.loads(Path(markovsim.__file__).resolve().parents[1].joinpath("models", "hardware", "b200.toml").read_text())
    doc["kernels"]["moe_expert_overhead"] = "0.5 ms"
    assert hardware_from_document(doc).kernels.moe_expert_overhead_s == pytest.approx(5e-4)
    doc["kernels"]["moe_expert_overhead"] = "-1 ms"
    with pytest.raises(markovsim.MarkovsimError, match="moe_expert_overhead"):
        hardware_from_document(doc)
    with pytest.raises(markovsim.MarkovsimError, match="moe_expert_overhead_s"):
        KernelModel(moe_expert_overhead_s=float("nan")).validate()


def test_the_calibration_experiment_in_the_docs():
    """docs/background/scaling.md quotes this: calibrated on one 25.11 Qwen3-30B-A3B run per
    system (a copy marked as a fit), the host term's value and the other MoE rows' errors."""
    from pathlib import Path

    from markovsim.training import runs_from_cases
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "background" / "scaling.md").read_text()
    runs = [r for r in runs_from_cases(root / "models" / "cases" / "gpu_training_runs.toml", role="holdout")
            if r.spec.workload.moe is not None and "Megatron-Bridge" in r.name]
    for fit_name, value in [("25.11: Qwen3-30B-A3B on 8 B200", "0.515 ms"), ("25.11: Qwen3-30B-A3B on 8 GB200", "0.694 ms"),
                            ("25.11: Qwen3-30B-A3B on 16 H100", "1.717 ms")]:
        fit = [dataclasses.replace(r, role="fit") for r in runs if fit_name in r.name]
        start = dataclasses.replace(fit[0].spec.hardware.kernels, moe_expert_overhead_s=2e-3)
        cal = calibrate(fit, ["moe_expert_overhead_s"], start=start)
        assert f"{cal.values[0] * 1e3:.3f} ms" == value and value in page
        system = fit_name.split()[-1]
        for r in runs:
            if f" {system}," in r.name and fit_name not in r.name:
                k = dataclasses.replace(r.spec.hardware.kernels, moe_expert_overhead_s=cal.values[0])
                before, after = (100 * (predict(r, kk) / r.value - 1) for kk in (None, k))
                if abs(after - before) > 0.05:
                    assert f"{before:+.1f} -> {after:+.1f} %" in page, (r.name, before, after)
