"""S-HW-1: optical-link fault tolerance turns a 4 % module AFR into 0.4 % effective (and S-HW-2).

Mechanism: a module's faults split into single-lane faults (S-MTBF-3: 90 %) and the rest.
Lane grouping with link-level retransmission and rerouting keeps the link up through a
single-lane fault, so only the remaining faults reach the job:

    effective AFR = AFR x (1 - share_single_lane x coverage_single_lane)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from markovsim.repro import ModelValue, assumed, cited, sweep

IDS = ["S-HW-1", "S-HW-2"]

AFR = 0.04  # source: S-HW-1 / S-MTBF-3, conventional optical-module AFR
SINGLE_LANE = 0.90  # source: S-MTBF-3, 90 % of optical interruptions are single-lane


def _effective(coverage):
    return AFR * (1.0 - SINGLE_LANE * coverage)


def run(out_dir: Path) -> list[ModelValue]:
    coverages = tuple(float(c) for c in np.linspace(0.99, 1.0, 11))
    _plot(out_dir)
    return [
        ModelValue(
            key="S-HW-1", model=_effective(1.0), unit="1/module-year",
            quantity="AFR x (1 - single-lane share x coverage of single-lane faults)",
            inputs=[cited("optical-module AFR", AFR, "1/module-year", "S-HW-1, S-MTBF-3"),
                    cited("share of single-lane faults", SINGLE_LANE, "1", "S-MTBF-3"),
                    assumed("coverage of single-lane faults", "1 (0.99 to 1)", "1",
                            "S-HW-1's '>99 % of optical flash faults tolerated' read as the coverage of single-lane "
                            "faults (flash faults and single-lane faults are not said to be the same)")],
            sweep=sweep(_effective, coverage=coverages),
            note="the claim's own arithmetic: 4 % x (1 - 0.9) = 0.4 %; with 99 % coverage 0.436 %."),
        ModelValue(key="S-HW-2", model=None, unit="-",
                   note="MIG-level isolation and a separate heartbeat network are design choices; their effect "
                        "(smaller blast radius, faster detection) enters the models only as tier inputs."),
    ]


def _plot(out_dir: Path) -> None:
    """Effective AFR against the coverage of single-lane faults, with the claimed 0.4 %."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = np.linspace(0.0, 1.0, 101)
    fig, ax = plt.subplots(figsize=(7.0, 4.5), layout="constrained")
    for i, sh in enumerate((0.8, SINGLE_LANE, 0.95)):
        style = dict(lw=2.0) if sh == SINGLE_LANE else dict(lw=1.0, ls=":")
        ax.plot(c * 100, 100 * AFR * (1 - sh * c), color=f"C{i}",
                label=f"single-lane share {sh:.0%}" + (" (S-MTBF-3)" if sh == SINGLE_LANE else " (other shares)"),
                **style)
    ax.axhline(0.4, color="C3", ls="--", lw=1, label="S-HW-1 reported: 0.4 %")
    ax.set_xlabel("coverage of single-lane faults by lane grouping [%]")
    ax.set_ylabel("effective optical-module AFR [%/year]")
    ax.set_title(f"Optical-module AFR {AFR:.0%} -> effective AFR with lane-group fault tolerance")
    ax.set_ylim(0, 100 * AFR * 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    fig.savefig(out_dir / "hw_optical.png", dpi=90)
    plt.close(fig)
