"""Pangu Ultra 135B pipeline bubble: 30.45 % (1F1B) -> 6.8 % (interleaved, VPP 6).

Mechanism: bubble fraction = idle / total of the pipeline timeline, (p-1)/(m+p-1) for
1F1B and (p-1)/(v m + p-1) interleaved, with p = 8 stages and v = 6 virtual stages; the
explicit timeline simulator gives the same numbers block by block. The micro-batches per
replica m are not published (the micro-batch size is not, and the global batch changed
during training): m is solved from the 1F1B figure, and that value is then tested on the
interleaved figure.
"""

from __future__ import annotations

from pathlib import Path

from markovsim.repro import ModelValue, cited, fitted
from markovsim.training import pipeline_bubble_fraction, simulate_pipeline

IDS = ["PU-BUBBLE-1F1B", "PU-BUBBLE-VPP6"]

ONE_F_ONE_B = 0.3045  # source: public_inputs.md, Pangu Ultra 135B bubble with 1F1B


def run(out_dir: Path) -> list[ModelValue]:
    pp, vpp = 8, 6  # source: public_inputs.md, PP 8, VPP 6
    m = round((pp - 1) / ONE_F_ONE_B - (pp - 1))  # (p-1)/(m+p-1) = 30.45 %, whole micro-batches
    m_input = fitted("micro-batches per data-parallel replica", m, "1", on="PU-BUBBLE-1F1B",
                     how=f"solved (p-1)/(m+p-1) = 30.45 % for m ({(pp - 1) / ONE_F_ONE_B - (pp - 1):.3f}) and rounded; "
                         "it agrees with global batch 2048 / DP 128 at micro-batch 1, a micro-batch size the "
                         "report does not give")
    out = []
    for key, sched, v in (("PU-BUBBLE-1F1B", "1f1b", 1), ("PU-BUBBLE-VPP6", "interleaved", vpp)):
        closed = pipeline_bubble_fraction(sched, pp, m, virtual_stages=v)
        simulated = simulate_pipeline(sched, pp, m, virtual_stages=v).bubble_fraction
        inputs = [cited("pipeline stages", pp, "1", "public_inputs.md: PP 8"), m_input]
        if v > 1:
            inputs.append(cited("virtual stages", v, "1", "public_inputs.md: VPP 6"))
        out.append(ModelValue(
            key=key, model=float(closed), unit="1", quantity=f"bubble fraction, {sched} (p={pp}, v={v}, m={m})",
            inputs=inputs,
            note=f"closed form {float(closed):.5f}, timeline simulation {float(simulated):.5f} "
                 f"({'equal' if abs(float(simulated) - float(closed)) < 1e-12 else 'different'})."))
    _plot(out_dir, pp, m, vpp)
    return out


def _plot(out_dir: Path, pp: int, m: int, vpp: int) -> None:
    """Both published schedules' timelines, block by block, from the simulator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from markovsim.plotting import plot_timeline

    fig, axes = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    for ax, (sched, v) in zip(axes, (("1f1b", 1), ("interleaved", vpp))):
        timeline = simulate_pipeline(sched, pp, m, virtual_stages=v)
        names = {"F": "forward", "B": "backward", "W": "weight gradient", "BW": "backward"}
        bars = [(f"stage {b.stage}", float(b.start), float(b.end - b.start), names[b.kind])
                for b in timeline.blocks]
        plot_timeline(bars, unit="forward-block times", ax=ax)
        ax.set_title(f"{sched}, v={v}: bubble {timeline.bubble_fraction:.2%} (p={pp}, m={m})")
    fig.tight_layout()
    fig.savefig(out_dir / "training_bubble_timelines.png", dpi=90)
    plt.close(fig)
