"""IHBD-REST: the fitted InfiniteHBD fault model's prediction of the trace's held-back months.

The public InfiniteHBD trace covers 400 GPU servers for 348.98 days; the project ships the
first 209.39 days and fits its fault model on them (``infinitehbd_fit``: per-class shock
rates, bursts, rate classes of nodes, phase-type repair). This script states what that model
predicts for days 209.39 to 348.98 of the same 400 nodes (``infinitehbd_rest_prediction``):
simulated windows that start where the shipped log ends (nodes still down keep their
residual repair, each node its posterior rate class, the burst environment its filtered
state), each with its own parameter draw. These rows are predictions: nothing is compared
until the held-back days are read (``markovsim.availability.window_statistics`` on them).
"""

from __future__ import annotations

from pathlib import Path

from _common import INFINITEHBD

from markovsim import DAY, MarkovsimError
from markovsim.availability import INFINITEHBD_REST, INFINITEHBD_WINDOW, infinitehbd_rest_prediction, infinitehbd_trace
from markovsim.availability import window_statistics
from markovsim.repro import ModelValue, assumed, cited, load_expectations

IDS = ["IHBD-REST"]
SIMULATIONS = 1000


def run(out_dir: Path) -> list[ModelValue]:
    p = infinitehbd_rest_prediction(simulations=SIMULATIONS, seed=0)
    seen = window_statistics(infinitehbd_trace())
    start, end = INFINITEHBD_WINDOW / DAY, (INFINITEHBD_WINDOW + INFINITEHBD_REST) / DAY
    inputs = [
        cited("fault model", "fit_fault_log defaults", "", "fitted on " + INFINITEHBD),
        cited("window predicted", f"days {start:.2f} to {end:.2f} ({INFINITEHBD_REST / DAY:.2f} days), 400 nodes", "",
              "the trace's README: 400 GPU servers, 348.98 days from 2024-03-30; the project ships the first 60 %"),
        assumed("the fleet and its fault processes stay as fitted", "same 400 nodes, same rates and repair", "",
                "a prediction from one window to the next assumes no change of fleet, software or repair practice; "
                "the parameter draws carry the fit's uncertainty, not such changes"),
        assumed("simulated windows", f"{SIMULATIONS}, seed 0", "",
                "a computational choice: with 1000 windows the interval ends move by a few per cent between seeds")]
    level = p.faults.level
    shipped = f"{INFINITEHBD_WINDOW / DAY:.2f} shipped days"

    def value(key, band, unit, quantity, note):
        return ModelValue(key=key, model=band.median, unit=unit, quantity=quantity, inputs=inputs,
                          interval=(band.low, band.high), level=level, note=note)

    classes = load_expectations()["IHBD-REST/faults-by-class"].at   # the order the expectations file lists
    if sorted(classes) != sorted(p.faults_by_class):
        raise MarkovsimError(f"IHBD-REST/faults-by-class: the expectations list the classes {classes}, the fit has "
                             f"{list(p.faults_by_class)}")
    out = [ModelValue(
        key="IHBD-REST/faults-by-class", model=[p.faults_by_class[c].median for c in classes], unit="faults",
        quantity="faults starting in the held-back window, per class: median", inputs=inputs,
        interval=[(p.faults_by_class[c].low, p.faults_by_class[c].high) for c in classes], level=level,
        note=("in the " + shipped + ": "
              + ", ".join(f"{c} {seen['faults by class'].get(c, 0)}" for c in classes) + ".")),
        value("IHBD-REST/faults", p.faults, "faults", "faults starting in the held-back window, all classes",
              f"{seen['faults']} faults in the {shipped}."),
        value("IHBD-REST/repair-median", p.repair_median_days, "days",
              "Kaplan-Meier median repair time of the window's faults",
              f"{seen['repair median d']:.3g} days in the {shipped}; the model's own median is "
              f"{p.model_repair_median_days}."),
        value("IHBD-REST/repair-p90", p.repair_p90_days, "days",
              "Kaplan-Meier 90th percentile of the repair time of the window's faults",
              f"{seen['repair p90 d']:.3g} days in the {shipped}; the model's own 90th percentile is "
              f"{p.model_repair_p90_days}."),
        value("IHBD-REST/max-nodes-down", p.max_nodes_down, "nodes", "most nodes down at once in the window",
              f"{seen['max nodes down']} in the {shipped}; time-average nodes down predicted {p.mean_nodes_down} "
              f"({seen['mean nodes down']:.3g} in the shipped days); share of the window with at least 5 % of the "
              f"nodes down {p.time_share_5pct_down}."),
        value("IHBD-REST/node-days-lost", p.node_days_lost, "node-days",
              "node-days down inside the window (faults open at its start included)",
              f"{seen['node-days lost']:.0f} node-days in the {shipped}.")]
    return out
