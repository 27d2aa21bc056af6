"""Pangu Ultra MFU: about 43 % after pipeline tuning -> 52 % after fused operators and
overlap of tensor-parallel communication with compute (135B), and 30.0 % on 6K NPUs (MoE 718B).

Mechanism: the step-time model of the published plans. The fraction of peak the kernels
reach (``efficiency.compute``) is not published: it is fitted on the 43 % figure (TP
communication not yet overlapped, as the report says), so that row is a fit, and the fitted
value is then tested on the two other figures: the 52 % after the change (with the TP
overlap and the fused operators' gain swept over stated ranges) and the MoE model's 30 %
on the same hardware (its unpublished global batch and TP overlap swept).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scipy.optimize import brentq

from markovsim.repro import ModelValue, assumed, cited, fitted, inputs_from_model_file, sweep
from markovsim.training import load_plan, scale_plan, step_time

IDS = ["PU-MFU", "PU-MOE-MFU"]
ROOT = Path(__file__).resolve().parent.parent
BEFORE, AFTER = 0.43, 0.52  # source: public_inputs.md "MFU about 43 % ... (52 %)"


def _mfu(spec, compute, tp_overlap, plan=None):
    eff = dataclasses.replace(spec.efficiency, compute=compute, tp_overlap=tp_overlap)
    return float(step_time(spec.workload, spec.hardware, plan or spec.plan, efficiency=eff).mfu)


def run(out_dir: Path) -> list[ModelValue]:
    spec = load_plan("pangu_ultra_135b_8k")
    plan_inputs = inputs_from_model_file(ROOT / "models/plans/pangu_ultra_135b_8k.toml", root=ROOT, summary=True)
    e0 = brentq(lambda e: _mfu(spec, e, 0.0) - BEFORE, 0.2, 1.0, xtol=1e-10)
    kernel = fitted("kernel efficiency (fraction of peak)", round(e0, 4), "1", on="PU-MFU/before",
                    how="solved so that the model's MFU is 43 % with no TP overlap")
    no_overlap = cited("TP overlap before", 0.0, "1", "public_inputs: TP overlap came with the later change")
    out = [ModelValue(key="PU-MFU/before", model=_mfu(spec, e0, 0.0), unit="1",
                      quantity="MFU of the 135B plan at the fitted kernel efficiency",
                      inputs=plan_inputs + [kernel, no_overlap],
                      note=f"the kernel efficiency that gives 43 % is {e0:.4f}.")]

    def after(tp_overlap, fused_gain):
        return _mfu(spec, min(1.0, e0 * fused_gain), tp_overlap)

    r0 = step_time(spec.workload, spec.hardware, spec.plan,
                   efficiency=dataclasses.replace(spec.efficiency, compute=e0, tp_overlap=0.0))
    out.append(ModelValue(
        key="PU-MFU/after", model=after(0.8, 1.0), unit="1",
        quantity="MFU of the 135B plan with TP communication overlapped and fused operators",
        inputs=plan_inputs + [
            fitted("kernel efficiency before", round(e0, 4), "1", on="PU-MFU/before", how="solved for 43 %"),
            assumed("TP overlap after", "0.8 (0.5 to 1)", "1", "not published"),
            assumed("kernel-efficiency gain of the fused operators", "1 (1 to 1.2)", "x",
                    "not published; fusion saves memory traffic of small operators, up to a fifth taken")],
        sweep=sweep(after, tp_overlap=(0.5, 0.8, 1.0), fused_gain=(1.0, 1.05, 1.1, 1.15, 1.2)),
        mechanism=f"exposed TP communication is {r0.tp_exposed / r0.step_time:.1%} of the step before; hiding it "
                  "and a fused-operator gain within the swept ranges do not reach 52 %",
        note=f"TP overlap alone (0.8) gives {after(0.8, 1.0):.1%}; the bubble is {r0.bubble / r0.step_time:.1%} "
             "of the step (VPP 6)."))

    moe = load_plan("pangu_ultra_moe_718b_a2_8k")
    moe_inputs = inputs_from_model_file(ROOT / "models/plans/pangu_ultra_moe_718b_a2_8k.toml", root=ROOT, summary=True)
    cards = 6144

    def moe_mfu(global_batch, tp_overlap):
        plan = scale_plan(moe.plan, cards).replace(global_batch=global_batch)
        return _mfu(moe, e0, tp_overlap, plan)

    out.append(ModelValue(
        key="PU-MOE-MFU", model=moe_mfu(moe.plan.global_batch, moe.efficiency.tp_overlap), unit="1",
        quantity="MFU of the 718B MoE plan on 6,144 NPUs at the kernel efficiency fitted on the 135B's 43 %",
        inputs=moe_inputs + [
            cited("cards", cards, "cards", "public_inputs 'on 6K NPUs'"),
            fitted("kernel efficiency", round(e0, 4), "1", on="PU-MFU/before", how="solved for the 135B's 43 %"),
            assumed("global batch", "3072 (1536 to 6144)", "sequences", "not published"),
            assumed("TP overlap", f"{moe.efficiency.tp_overlap} (0 to 0.8)", "1", "not published")],
        sweep=sweep(moe_mfu, global_batch=(1536, 3072, 6144), tp_overlap=(0.0, 0.5, 0.8)),
        mechanism="MoE expert matmuls are smaller and less efficient than the dense model's, and the 135B "
                  "kernel efficiency overstates them; the all-to-all the model leaves exposed is small",
        note="the same hardware and software generation as the 135B's 43 % is assumed."))
    _plot(out_dir, out)
    return out


def _plot(out_dir: Path, values) -> None:
    """Model bands against the three MFU figures."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reported = {"PU-MFU/before": BEFORE, "PU-MFU/after": AFTER, "PU-MOE-MFU": 0.30}  # source: public_inputs.md
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    for i, v in enumerate(values):
        pts = [v.model] + (list(v.sweep.values) if v.sweep else [])
        ax.plot([i, i], [100 * min(pts), 100 * max(pts)], lw=6, alpha=0.4, color="C0")
        ax.plot(i, 100 * v.model, "o", color="C0")
        ax.errorbar(i + 0.12, 100 * reported[v.key], yerr=1.0, fmt="x", color="C3", ms=9, capsize=4)
    ax.set_xticks(range(len(values)), [v.key for v in values])
    ax.set_ylabel("MFU [%]")
    ax.set_title("MFU: model band (bar), central (o), published +- 1 pt (x)")
    ax.grid(True, axis="y", alpha=0.3)
    fig.savefig(out_dir / "training_mfu.png", dpi=90)
    plt.close(fig)
