"""S-HW-1: optical-link fault tolerance turns a 4 % module AFR into 0.4 % effective.

Mechanism: a module's faults split into single-lane faults (S-MTBF-3: 90 %) and the rest.
Lane grouping with link-level retransmission and rerouting keeps the link up through a
single-lane fault, so only the remaining faults interrupt the job:

    effective AFR = AFR x (1 - share_single_lane x coverage_single_lane)
"""

from __future__ import annotations

from pathlib import Path

from markovsim.repro import Input, Row

IDS = ["S-HW-1"]


def run(out_dir: Path) -> list[Row]:
    afr = 0.04  # source: S-HW-1 / S-MTBF-3, conventional optical-module AFR
    share_single_lane = 0.90  # source: S-MTBF-3, 90 % of optical interruptions are single-lane
    coverage = 1.0  # assumption: every single-lane fault is absorbed by lane grouping (S-HW-1 ">99 %")
    effective = afr * (1.0 - share_single_lane * coverage)
    # The claim says ">99 % of flash faults tolerated": with coverage 0.99 the figure moves
    # to 4 % x (1 - 0.9 x 0.99) = 0.436 %, still "0.4 %" to one significant figure.
    low = afr * (1.0 - share_single_lane * 0.99)
    inputs = [
        Input("optical-module AFR", afr, "1/unit-year", "S-HW-1, S-MTBF-3"),
        Input("share of single-lane faults", share_single_lane, "1", "S-MTBF-3"),
        Input("coverage of single-lane faults", coverage, "1",
              "assumption: lane grouping absorbs every single-lane fault (S-HW-1 says >99 %)"),
    ]
    return [
        Row(
            id="S-HW-1",
            quantity="effective optical-module AFR after lane-group fault tolerance",
            reported=0.004,
            model=effective,
            unit="1/unit-year",
            tolerance=0.0005,
            status="reproduced" if abs(effective - 0.004) <= 0.0005 else "inconsistent",
            inputs=inputs,
            note=f"with 99 % coverage of single-lane faults the model gives {low:.4%}",
        )
    ]
