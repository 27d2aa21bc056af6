"""Pangu Ultra 135B MFU: about 43 % after pipeline tuning -> 52 % after fused operators and
overlap of tensor-parallel communication with compute (public_inputs.md).

Mechanism: the step-time model of the published plan. Two changes are named by the
report: TP communication hidden behind compute (``tp_overlap``) and fused operators, which
raise the fraction of peak the kernels reach (``efficiency.compute``). Neither input is
published. The script finds the kernel efficiency that gives 43 % with no TP overlap,
then shows what TP overlap alone gives and which kernel-efficiency gain the fused
operators must bring for 52 %: an explanation with named assumptions, not a reproduction.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scipy.optimize import brentq

from markovsim.repro import Input, Row
from markovsim.training import load_plan, step_time

IDS = ["PU-MFU"]

TP_OVERLAP_AFTER = 0.8  # assumption: most TP all-gather/reduce-scatter hidden behind matmuls after the change


def _mfu(spec, compute, tp_overlap):
    eff = dataclasses.replace(spec.efficiency, compute=compute, tp_overlap=tp_overlap)
    return step_time(spec.workload, spec.hardware, spec.plan, efficiency=eff).mfu


def run(out_dir: Path) -> list[Row]:
    spec = load_plan("pangu_ultra_135b_8k")
    before, after = 0.43, 0.52  # source: public_inputs.md "MFU about 43 % ... (52 %)"
    e0 = brentq(lambda e: _mfu(spec, e, 0.0) - before, 0.2, 1.0, xtol=1e-10)
    overlap_only = _mfu(spec, e0, TP_OVERLAP_AFTER)
    e1 = brentq(lambda e: _mfu(spec, e, TP_OVERLAP_AFTER) - after, 0.2, 1.0, xtol=1e-10)
    r0 = step_time(spec.workload, spec.hardware, spec.plan,
                   efficiency=dataclasses.replace(spec.efficiency, compute=e0, tp_overlap=0.0))
    model = _mfu(spec, e1, TP_OVERLAP_AFTER)
    _plot(out_dir, before, overlap_only, model, after, e0, e1)
    return [Row(
        id="PU-MFU", quantity="Pangu Ultra 135B MFU after fused operators and TP overlap (from 43 %)",
        reported=after, model=model, unit="1", tolerance=0.005, status="explained",
        inputs=[
            Input("plan", "pangu_ultra_135b_8k", "", "models/plans/pangu_ultra_135b_8k.toml (public_inputs.md)"),
            Input("MFU before", before, "1", "public_inputs.md: MFU about 43 % after pipeline tuning"),
            Input("kernel efficiency before", round(e0, 4), "1",
                  "fitted on the 43 % figure (not published); used only to explain the 52 %"),
            Input("TP overlap after", TP_OVERLAP_AFTER, "1", "assumption: not published"),
            Input("kernel efficiency after", round(e1, 4), "1", "solved for 52 % (the named unknown)"),
        ],
        note=(f"Exposed TP communication is {r0.tp_exposed / r0.step_time:.1%} of the step before; hiding "
              f"{TP_OVERLAP_AFTER:.0%} of it alone lifts MFU from 43 % to {overlap_only:.1%}. The rest must "
              f"come from fused operators raising kernel efficiency from {e0:.3f} to {e1:.3f} "
              f"(x{e1 / e0:.3f}); bubble {r0.bubble / r0.step_time:.1%} of the step (VPP 6)."),
    )]


def _plot(out_dir: Path, before: float, overlap_only: float, model: float, reported: float,
          e0: float, e1: float) -> None:
    """Waterfall of the MFU steps 43 % -> TP overlap -> fused operators -> 52 %."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["before\n(reported, fitted)", f"+ TP overlap {TP_OVERLAP_AFTER:.0%}\n(assumption)",
             f"+ fused operators\n(kernel eff. {e0:.3f} -> {e1:.3f})", "after\n(model)"]
    bottoms = [0.0, before, overlap_only, 0.0]
    heights = [before, overlap_only - before, model - overlap_only, model]
    colours = ["C7", "C0", "C2", "C1"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    ax.bar(range(4), [100 * h for h in heights], bottom=[100 * b for b in bottoms], color=colours, width=0.6)
    for i, (b, h) in enumerate(zip(bottoms, heights)):
        text = f"{100 * (b + h):.1f} %" if i in (0, 3) else f"+{100 * h:.1f} pt"
        ax.annotate(text, (i, 100 * (b + h)), xytext=(0, 3), textcoords="offset points", ha="center",
                    fontsize="small")
    ax.axhline(100 * reported, color="C3", ls="--", lw=1, label=f"reported after: {reported:.0%}")
    ax.set_xticks(range(4), names)
    ax.set_ylabel("MFU [%] (axis starts at 30 %)")
    ax.set_ylim(30, 100 * reported + 6)
    ax.set_title("Pangu Ultra 135B MFU: 43 % -> 52 % (step-time model)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    fig.savefig(out_dir / "training_mfu.png", dpi=90)
    plt.close(fig)
