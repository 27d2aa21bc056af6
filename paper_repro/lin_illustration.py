"""S-LIN-4: "a 4K-card cluster at 80 % linearity does the work of 3.2K cards" (and the
target of more than 95 % at 10K cards); S-LIN-6: dynamic routing cut cross-node latency to
0.8 us (67 % lower).

Mechanism: linearity L = (T_N / N) / (T_N0 / N0), so N cards at linearity L deliver the
throughput of N x L baseline-efficient cards. The 10K-card target and the latency cut are
run through the Sim2Train step-time model of the Pangu Ultra 135B plan.
"""

from __future__ import annotations

from pathlib import Path

from markovsim.repro import Input, Row

IDS = ["S-LIN-4", "S-LIN-6"]


def run(out_dir: Path) -> list[Row]:
    cards = 4096  # source: S-LIN-4 "4K cards" (binary K, as in the cluster sizes of S-LIN-1..3)
    linearity = 0.80  # source: S-LIN-4
    effective = cards * linearity
    rows = [
        Row(
            id="S-LIN-4",
            quantity="effective cards of a 4K-card job at 80 % linearity",
            reported=3200.0,
            model=effective,
            unit="cards",
            tolerance=100.0,
            status="reproduced" if abs(effective - 3200.0) <= 100.0 else "inconsistent",
            inputs=[
                Input("cards", cards, "cards", "S-LIN-4"),
                Input("linearity", linearity, "1", "S-LIN-4"),
            ],
            note="4096 x 0.8 = 3277 (\"3.2K\" to two figures); with 4000 cards it is 3200 exactly",
        )
    ]
    more, at_10k = _target_and_latency()
    rows += more
    _plot(out_dir, cards, linearity, effective, at_10k)
    return rows


def _target_and_latency() -> tuple[list[Row], dict[str, float]]:
    import dataclasses

    from markovsim.training import LinkLevel, Scaling, load_plan, scaling_curve

    spec = load_plan("pangu_ultra_135b_8k")
    cards = [256, 10240]  # source: S-LIN-4 "10K-card scale"; 10240 = 160 replicas of TP 8 x PP 8
    # assumption: global batch 2560 (not 2048) so that 160 replicas get whole rounds of 8 micro-batches
    spec = dataclasses.replace(spec, plan=spec.plan.replace(global_batch=2560))
    curves = {mode: scaling_curve(spec.workload, spec.hardware, spec.plan, cards, scaling=mode,
                                  efficiency=spec.efficiency, jitter_cv=0.01)
              for mode in Scaling}
    fixed = float(curves[Scaling.FIXED_GLOBAL_BATCH].linearity[1])
    grown = float(curves[Scaling.FIXED_REPLICA_BATCH].linearity[1])
    rows = [Row(
        id="S-LIN-4", quantity="linearity of Pangu Ultra 135B at 10K cards (target > 95 %)",
        reported=0.95, model=fixed, unit="1", tolerance="> 0.95",
        status="explained",
        inputs=[Input("plan", "pangu_ultra_135b_8k", "", "models/plans (public_inputs.md)"),
                Input("rank jitter CV", 0.01, "1", "assumption: not published"),
                Input("global batch", 2560, "sequences", "assumption: 2048 does not tile 160 replicas")],
        note=(f"global batch 2560 held: {fixed:.4f} (below the target); global batch grown with the cards: {grown:.4f} (meets it). The target is "
              "reachable only if the global batch grows with the job."),
    )]
    # S-LIN-6: latency 0.8 us after a 67 % cut -> 2.42 us before; public_inputs quotes ~2 us Ethernet hops
    after, cut = 0.8e-6, 0.67  # source: S-LIN-6
    before = after / (1 - cut)
    quoted = 2e-6  # source: public_inputs.md "single-hop latency about 200 ns against 2 us on Ethernet"
    lv = spec.hardware.levels
    faster = dataclasses.replace(spec.hardware, levels=lv[:-1] + (dataclasses.replace(
        lv[-1], latency_s=lv[-1].latency_s * (1 - cut)),))
    base = scaling_curve(spec.workload, spec.hardware, spec.plan, cards, scaling=Scaling.FIXED_GLOBAL_BATCH,
                         efficiency=spec.efficiency).linearity[1]
    fast = scaling_curve(spec.workload, faster, spec.plan, cards, scaling=Scaling.FIXED_GLOBAL_BATCH,
                         efficiency=spec.efficiency).linearity[1]
    rows.append(Row(
        id="S-LIN-6", quantity="cross-node latency before the 67 % cut (0.8 us after)", reported=quoted * 1e6,
        model=before * 1e6, unit="us", tolerance=0.5, status="explained" if abs(before - quoted) <= 0.5e-6 else "inconsistent",
        inputs=[Input("latency after", 0.8, "us", "S-LIN-6"), Input("reduction", cut, "1", "S-LIN-6"),
                Input("Ethernet hop latency", 2.0, "us", "public_inputs.md (vendor claim)")],
        note=(f"0.8 us / (1 - 0.67) = {before * 1e6:.2f} us, close to the ~2 us quoted for Ethernet. In the "
              f"step-time model a 67 % lower scale-out latency moves the 10K-card linearity from {base:.5f} "
              f"to {fast:.5f}: latency is not what limits linearity at this message size (bandwidth and the "
              "bubble are). The 99.7 % stability figure belongs to the availability model."),
    ))
    return rows, {"global batch 2560 held": fixed, "global batch grown with the cards": grown}



def _plot(out_dir: Path, cards: int, linearity: float, effective: float, at_10k: dict[str, float]) -> None:
    """Effective cards N x L against cards at several linearities, with the S-LIN-4 points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = np.linspace(0, 11000, 200)
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    for i, lin in enumerate((1.0, 0.95, 0.9, 0.8, 0.6)):
        ax.plot(n, n * lin, color=f"C{i}", lw=1.2, label=f"linearity {lin:.0%}")
    ax.plot([cards], [effective], "o", color="k", ms=7, label=f"{cards:,} cards at {linearity:.0%}: {effective:,.0f}")
    ax.plot([cards], [3200.0], "x", color="C3", ms=9, mew=2, label="S-LIN-4 reported: 3.2K")
    for (name, lin), marker, colour in zip(at_10k.items(), ("s", "D"), ("C5", "C6")):
        ax.plot([10240], [10240 * lin], marker, color=colour, mfc="none", mew=1.5, ms=8,
                label=f"model, Pangu Ultra 135B, 10,240 cards,\n{name}: {lin:.2%}")
    ax.set_xlabel("cards in the job")
    ax.set_ylabel("effective cards N x L [cards]")
    ax.set_title("Effective cards = cards x linearity (S-LIN-4)")
    ax.set_xlim(0, 11000)
    ax.set_ylim(0, 11000)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    fig.savefig(out_dir / "lin_illustration.png", dpi=90)
    plt.close(fig)
