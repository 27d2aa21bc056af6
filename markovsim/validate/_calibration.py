"""Calibration files: fit a fault catalogue's rates to a log, for ``markovsim validate --calibrate``.

A calibration file (TOML) names a cluster (its fault catalogue is what gets fitted) and a
log, and calls :func:`markovsim.availability.calibrate_catalogue`::

    [calibrate]
    cluster = "gpu_8x_16k"        # cluster file or preset; its catalogue's rates are scaled
    incidents = "incidents.csv"   # a job-level incident log (time, cause, downtime), relative
    window = "30 d"               #   to this file; the wall-clock window it covers
    cards = 8192                  #   and the job's size
    time_unit = "h"               # optional: unit of time columns without one
    scale = "all"                 # "all" (one scale) or "component" (one per component)
    availability = 0.95           # share of the window the job ran (logs without downtimes)
    level = 0.9                   # interval level
    simulations = 2000            # simulated logs for the dispersion check
    seed = 0
    [calibrate.cause_map]         # incident cause -> catalogue component
    gpu = "gpu"

Instead of ``incidents``, a node-level fault log can stand for the incidents of one job
that spans every node (each fault start interrupts it once; downtimes are not recorded, so
``availability`` is needed): ``fault_log = "logs/faults.json"`` with ``nodes`` and
``window`` (and ``time_unit``), or ``fault_log = "infinitehbd"``, the shipped first 60 % of
the InfiniteHBD trace (400 nodes, 209.39 days). ``cards_per_node`` (default: the cluster's)
sets the job's cards.

The report lists the fitted values with their intervals, then the checks against the
fitted model; a check whose statistic was fitted directly is marked ``(fitted output)``
and is no evidence. It passes when every check that was not fitted passes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import SpecError
from .._io import Table, read_document, resolve
from .._units import DAY

__all__ = ["CalibrationReport", "run_calibration"]

_LEVELS = ("all", "component")


@dataclasses.dataclass(frozen=True)
class CalibrationReport:
    """The result of a calibration file.

    Attributes:
        path: the calibration file.
        cluster: the cluster whose catalogue was fitted.
        log: what the incidents came from.
        result: the :class:`~markovsim.availability.CalibrationResult` (fitted catalogue,
            fitted values with intervals, checks marked ``fitted``).
    """

    path: str
    cluster: str
    log: str
    result: Any

    @property
    def passed(self) -> bool:
        """Every check that was not fitted directly passes (fitted ones are no evidence)."""
        return all(r.passed for r in self.result.checks if not r.fitted)

    def format_table(self) -> str:
        head = [f"calibration: {self.path}", f"  catalogue of {self.cluster}, fitted to {self.log}",
                f"  running time {self.result.running_time / DAY:.4g} d; intervals: {self.result.method}"]
        return "\n".join(head + [self.result.table()])

    def to_dict(self) -> dict:
        r = self.result
        return {
            "path": self.path, "cluster": self.cluster, "log": self.log, "running_time_s": r.running_time,
            "method": r.method, "passed": self.passed,
            "fitted": [dict(dataclasses.asdict(v), fitted=True) for v in r.fitted],
            "checks": [dataclasses.asdict(c) for c in r.checks],
        }


def _incidents_from_fault_log(log, cards: int):
    """Each fault start of a node-level log as one incident of a job on every node."""
    from ..availability import IncidentLog

    order = np.argsort(log.start, kind="stable")
    return IncidentLog(time=np.asarray(log.start, dtype=float)[order],
                       cause=tuple(log.classes[int(c)] for c in np.asarray(log.fault_class)[order]),
                       downtime=np.full(log.n_faults, np.nan), window=float(log.window), cards=int(cards),
                       source=f"{log.source} (each fault start: one incident of a job on all {log.nodes} nodes)")


def run_calibration(path: str | Path) -> CalibrationReport:
    """Read a calibration file (module docstring) and fit its cluster's catalogue to its log.

    Raises:
        SpecError: a missing or unknown key, or a file it names that does not exist.
        InvalidParameterError: what :func:`~markovsim.availability.calibrate_catalogue` refuses.
    """
    from ..availability import (INFINITEHBD_NODES, INFINITEHBD_WINDOW, calibrate_catalogue, infinitehbd_trace,
                                load_cluster, read_fault_log, read_incident_log)

    path = Path(path)
    doc = read_document(path)
    base = path.parent
    top = Table(dict(doc), str(path))
    t = top.table("calibrate", doc="the calibration: a cluster's catalogue fitted to a log")
    top.finish()
    cluster_ref = t.text("cluster", doc="cluster file or preset whose fault catalogue is fitted")
    shape, catalogue = load_cluster(resolve(cluster_ref, folder="clusters", base=base, where="calibrate.cluster"))
    time_unit = t.text("time_unit", None, doc="unit of time columns that carry none")
    if ("incidents" in t) == ("fault_log" in t):
        raise SpecError(f"{path}: calibrate: expected exactly one of 'incidents' (a job's incident log) or "
                        "'fault_log' (a node-level fault log, or \"infinitehbd\")")
    if "incidents" in t:
        ref = base / t.text("incidents", doc="job-level incident log (JSON or CSV), relative to this file")
        window = t.quantity("window", "time", strictly_positive=True, doc="wall-clock window of the log")
        cards = t.integer("cards", minimum=1, doc="cards of the job")
        incidents = read_incident_log(ref, window=window, cards=cards, time_unit=time_unit)
        log_name = str(ref)
    else:
        name = t.text("fault_log", doc="node-level fault log (JSON or CSV), or \"infinitehbd\" (shipped trace)")
        per_node = t.integer("cards_per_node", shape.cards_per_node, minimum=1, doc="cards per node of the job")
        if name == "infinitehbd":
            log = infinitehbd_trace()
            nodes = INFINITEHBD_NODES
            if "nodes" in t or "window" in t:
                raise SpecError(f"{path}: calibrate: 'nodes' and 'window' are fixed for the shipped InfiniteHBD "
                                f"trace ({INFINITEHBD_NODES} nodes, {INFINITEHBD_WINDOW / DAY:.2f} d); remove them")
        else:
            nodes = t.integer("nodes", minimum=1, doc="nodes observed, counting those that never failed")
            window = t.quantity("window", "time", strictly_positive=True, doc="window of the fault log")
            log = read_fault_log(base / name, nodes=nodes, window=window, time_unit=time_unit)
        incidents = _incidents_from_fault_log(log, nodes * per_node)
        log_name = incidents.source
    scale = t.text("scale", "all", choices=_LEVELS, doc="one scale on every rate, or one per component")
    cause_map = None
    if "cause_map" in t:
        cm = t.table("cause_map", doc="incident cause -> catalogue component")
        cause_map = {k: cm.text(k) for k in list(cm.keys())}
        cm.finish()
    availability = t.quantity("availability", "ratio", None, minimum=0.0, maximum=1.0,
                              doc="share of the window the job ran (logs without downtimes)")
    level = t.quantity("level", "ratio", 0.9, minimum=0.0, maximum=1.0, doc="interval level")
    simulations = t.integer("simulations", 2000, minimum=10, doc="simulated logs for the dispersion check")
    seed = t.integer("seed", 0, minimum=0, doc="random seed")
    t.finish()
    result = calibrate_catalogue(catalogue, shape, incidents, scale=scale, cause_map=cause_map,
                                 availability=availability, level=level, simulations=simulations, seed=seed)
    return CalibrationReport(path=str(path), cluster=cluster_ref, log=log_name, result=result)
