r"""Fault and incident logs: what a fleet or a job actually saw, read from JSON or CSV.

Two kinds of log:

:class:`FaultLog` (node level)
    One record per fault of one node: ``node``, ``start``, ``end`` (empty while the fault is
    still open at the end of the window: right-censored), ``class``. The node is down from
    ``start`` to ``end``; faults arrive only while it is up. The log covers the window
    :math:`[0, T]` and ``nodes`` nodes, counting those that never failed (they do not
    appear in the records).
:class:`IncidentLog` (job level)
    One record per job interruption: ``time``, ``cause``, ``downtime``, for a job of
    ``cards`` accelerators observed for a wall-clock window.

Times are read in the unit named by the column (``start_d``, ``time_h``, ``downtime_min``;
suffixes ``_s``, ``_min``, ``_h``, ``_d``) or by ``time_unit=``, and stored in seconds.

Statistics used by the fits and their checks (all on the log as observed):
per-node fault counts, daily fault counts, their dispersion index (variance / mean; 1 for a
Poisson process), the number of nodes down at once, and the exposure (node-seconds up).
"""

from __future__ import annotations

import csv
import dataclasses
import json
from importlib import resources
from pathlib import Path
from typing import Sequence

import numpy as np

from .._errors import InvalidParameterError, SpecError
from .._units import DAY, HOUR, MINUTE

__all__ = [
    "FaultLog",
    "IncidentLog",
    "read_fault_log",
    "read_incident_log",
    "infinitehbd_trace",
    "dispersion_index",
    "INFINITEHBD_NODES",
    "INFINITEHBD_WINDOW",
    "INFINITEHBD_REST",
]

_UNITS = {"s": 1.0, "min": MINUTE, "h": HOUR, "d": DAY}


def dispersion_index(counts) -> float:
    """Variance over mean of counts (sample variance, ``ddof=1``); 1 for Poisson counts.

    Raises:
        InvalidParameterError: fewer than two counts, or a zero mean.
    """
    c = np.asarray(counts, dtype=float)
    if c.size < 2 or c.mean() <= 0:
        raise InvalidParameterError(
            f"counts: need at least two counts with a positive mean for a dispersion index, got {c.size} "
            f"with mean {c.mean() if c.size else float('nan')!r}")
    return float(c.var(ddof=1) / c.mean())


@dataclasses.dataclass(frozen=True, eq=False)
class FaultLog:
    """A node-level fault log over the window ``[0, window]`` (seconds).

    Attributes:
        node: index into ``node_names`` of each fault's node, shape ``(n,)``.
        start: fault start, seconds from the window start.
        end: fault end (repair), seconds; equal to ``window`` where ``censored``.
        censored: ``True`` for faults still open at the end of the window.
        fault_class: index into ``classes`` of each fault.
        classes: fault class names.
        node_names: names of the nodes that appear (nodes that never failed do not).
        nodes: number of nodes observed, counting those that never failed.
        window: length of the observation window, seconds.
        source: where the log comes from.
    """

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    censored: np.ndarray
    fault_class: np.ndarray
    classes: tuple[str, ...]
    node_names: tuple[str, ...]
    nodes: int
    window: float
    source: str = ""

    def __post_init__(self):
        n = len(self.start)
        for name in ("node", "end", "censored", "fault_class"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"FaultLog.{name}: expected {n} entries like start, got {len(getattr(self, name))}")
        if self.nodes < len(self.node_names):
            raise InvalidParameterError(
                f"nodes={self.nodes}: fewer than the {len(self.node_names)} distinct nodes in the log; "
                f"give the number of nodes observed, counting those that never failed")
        if not np.isfinite(self.window) or self.window <= 0:
            raise InvalidParameterError(f"window={self.window!r}: expected a positive length in seconds")
        if n and (np.any(self.start < 0) or np.any(self.start > self.window)):
            i = int(np.flatnonzero((self.start < 0) | (self.start > self.window))[0])
            raise InvalidParameterError(
                f"start[{i}]={self.start[i]!r} s: outside the window [0, {self.window!r}] s")
        if n and np.any(self.end < self.start):
            i = int(np.flatnonzero(self.end < self.start)[0])
            raise InvalidParameterError(f"end[{i}]={self.end[i]!r} s: before its start {self.start[i]!r} s")

    # ------------------------------------------------------------------ basic views
    @property
    def n_faults(self) -> int:
        """Number of faults in the log."""
        return int(len(self.start))

    @property
    def duration(self) -> np.ndarray:
        """Repair time of each fault, seconds (time to the window end where censored)."""
        return self.end - self.start

    def class_counts(self) -> dict[str, int]:
        """Faults per class."""
        return {c: int(np.sum(self.fault_class == i)) for i, c in enumerate(self.classes)}

    def per_node_counts(self) -> np.ndarray:
        """Faults per node, shape ``(nodes,)``, nodes that never failed included as zeros."""
        counts = np.zeros(self.nodes)
        np.add.at(counts, self.node, 1)
        return counts

    def downtime_per_node(self) -> np.ndarray:
        """Seconds each node spent down inside the window (overlapping faults counted once)."""
        down = np.zeros(self.nodes)
        for k in range(len(self.node_names)):
            sel = self.node == k
            if sel.any():
                down[k] = _union_length(self.start[sel], self.end[sel])
        return down

    def exposure(self) -> float:
        """Node-seconds up in the window: ``nodes * window`` minus the downtime."""
        return float(self.nodes * self.window - self.downtime_per_node().sum())

    def daily_counts(self, period: float = DAY) -> np.ndarray:
        """Faults starting in each whole ``period`` of the window (a partial last period is dropped)."""
        return _period_counts(self.start, self.window, period)

    def nodes_down(self) -> tuple[np.ndarray, np.ndarray]:
        """Step function of the number of distinct nodes down: ``(times, count from that time on)``."""
        return nodes_down_path(self.node, self.start, self.end)

    def max_nodes_down(self) -> int:
        """Most nodes down at the same time in the window."""
        _, c = self.nodes_down()
        return int(c.max()) if len(c) else 0

    def with_classes(self, mapping: dict[str, str]) -> "FaultLog":
        """A copy with classes renamed or merged (``{"Fan": "other", "PSU": "power"}``); others kept."""
        names = [mapping.get(c, c) for c in self.classes]
        merged = tuple(dict.fromkeys(names))
        remap = np.array([merged.index(n) for n in names], dtype=int)
        return dataclasses.replace(self, fault_class=remap[self.fault_class], classes=merged)

    def after(self, cut: float) -> tuple["FaultLog", np.ndarray, np.ndarray]:
        """The window ``[cut, window]`` as its own log, and the faults open at the cut.

        Returns:
            ``(log, carried_node, carried_end)``: faults starting at or after ``cut`` with times
            shifted to start at 0; the nodes down at ``cut`` and when they come back (shifted).
        """
        if not 0 <= cut < self.window:
            raise InvalidParameterError(f"cut={cut!r} s: expected a time inside [0, {self.window!r}) s")
        later = self.start >= cut
        carried = (~later) & (self.end > cut)
        log = dataclasses.replace(self, node=self.node[later], start=self.start[later] - cut,
                                  end=self.end[later] - cut, censored=self.censored[later],
                                  fault_class=self.fault_class[later], window=float(self.window - cut))
        return log, self.node[carried], self.end[carried] - cut

    def truncated(self, window: float) -> "FaultLog":
        """The log as it would have been seen at ``window`` seconds (later faults dropped, open ones censored)."""
        if not 0 < window <= self.window:
            raise InvalidParameterError(f"window={window!r} s: expected a cut inside (0, {self.window!r}] s")
        keep = self.start < window
        end = np.minimum(self.end[keep], window)
        cens = self.censored[keep] | (self.end[keep] > window)
        return dataclasses.replace(self, node=self.node[keep], start=self.start[keep], end=end,
                                   censored=cens, fault_class=self.fault_class[keep], window=float(window))


def _period_counts(times: np.ndarray, window: float, period: float) -> np.ndarray:
    bins = int(np.floor(window / period + 1e-9))
    if bins < 1:
        raise InvalidParameterError(f"period={period!r} s: longer than the window {window!r} s")
    idx = np.floor(times / period).astype(int)
    return np.bincount(idx[idx < bins], minlength=bins).astype(float)


def _union_length(start: np.ndarray, end: np.ndarray) -> float:
    order = np.argsort(start)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in zip(start[order], end[order]):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return float(total)


def nodes_down_path(node: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct nodes down as a step function ``(times, counts)`` from fault intervals.

    A node with overlapping faults counts once. Ends sort before starts at the same time.
    """
    if len(start) == 0:
        return np.zeros(0), np.zeros(0, dtype=int)
    times = np.concatenate([start, end])
    delta = np.concatenate([np.ones(len(start), int), -np.ones(len(end), int)])
    who = np.concatenate([node, node])
    order = np.lexsort((delta, times))
    open_per_node: dict[int, int] = {}
    count, out_t, out_c = 0, [], []
    for t, d, k in zip(times[order], delta[order], who[order]):
        before = open_per_node.get(int(k), 0)
        after = before + d
        open_per_node[int(k)] = after
        if before == 0 and after > 0:
            count += 1
        elif before > 0 and after == 0:
            count -= 1
        out_t.append(t)
        out_c.append(count)
    return np.asarray(out_t, dtype=float), np.asarray(out_c, dtype=int)


@dataclasses.dataclass(frozen=True, eq=False)
class IncidentLog:
    """Job-level incidents (interruptions) over a wall-clock window.

    Attributes:
        time: incident times, seconds from the window start.
        cause: cause label of each incident.
        downtime: seconds the job was down after each incident (NaN where not recorded).
        window: wall-clock length of the observation, seconds.
        cards: accelerators in the job.
        source: where the log comes from.
    """

    time: np.ndarray
    cause: tuple[str, ...]
    downtime: np.ndarray
    window: float
    cards: int
    source: str = ""

    def __post_init__(self):
        n = len(self.time)
        if len(self.cause) != n or len(self.downtime) != n:
            raise ValueError(f"IncidentLog: time, cause and downtime need the same length ({n})")
        if not np.isfinite(self.window) or self.window <= 0:
            raise InvalidParameterError(f"window={self.window!r}: expected a positive wall-clock length in seconds")
        if self.cards < 1:
            raise InvalidParameterError(f"cards={self.cards!r}: expected a job of at least one card")
        if n and (np.any(self.time < 0) or np.any(self.time > self.window)):
            i = int(np.flatnonzero((self.time < 0) | (self.time > self.window))[0])
            raise InvalidParameterError(f"time[{i}]={self.time[i]!r} s: outside the window [0, {self.window!r}] s")
        d = self.downtime[np.isfinite(self.downtime)]
        if np.any(d < 0):
            raise InvalidParameterError(f"downtime: negative value {d[d < 0][0]!r} s; expected seconds >= 0")

    @property
    def n_incidents(self) -> int:
        return int(len(self.time))

    def running_time(self) -> float:
        """Wall-clock window minus the recorded downtime, seconds (the exposure for per-running rates)."""
        d = self.downtime[np.isfinite(self.downtime)]
        return float(max(self.window - d.sum(), 0.0))

    def cause_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.cause:
            out[c] = out.get(c, 0) + 1
        return out

    def daily_counts(self, period: float = DAY) -> np.ndarray:
        """Incidents in each whole ``period`` of the window (a partial last period is dropped)."""
        return _period_counts(self.time, self.window, period)


# ---------------------------------------------------------------------- readers


def _unit_factor(unit: str | None, where: str) -> float:
    if unit is None:
        raise SpecError(f"{where}: times carry no unit; name the column with a unit suffix "
                        f"(start_d, start_h, start_s, start_min) or pass time_unit='d'")
    if unit not in _UNITS:
        raise SpecError(f"{where}: time_unit={unit!r}; expected one of {', '.join(map(repr, _UNITS))}")
    return _UNITS[unit]


def _column(row_keys: Sequence[str], base: str, time_unit: str | None, where: str,
            required: bool = True) -> tuple[str | None, float | None]:
    """Find column ``base`` or ``base_<unit>``; return (key, factor to seconds)."""
    if base in row_keys:
        return base, _unit_factor(time_unit, f"{where}.{base}")
    for u, f in _UNITS.items():
        if f"{base}_{u}" in row_keys:
            return f"{base}_{u}", f
    if required:
        raise SpecError(f"{where}: no column {base!r} (or {base}_s/_min/_h/_d); columns: {', '.join(row_keys)}")
    return None, None


def _number(value, where: str) -> float:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return float("nan")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{where}={value!r}: expected a number") from None
    if not np.isfinite(x):
        raise SpecError(f"{where}={value!r}: expected a finite number")
    return x


def _records(path: Path) -> list[dict]:
    if not path.exists():
        raise SpecError(f"{path}: log file not found")
    if path.is_dir():
        raise SpecError(f"{path}: is a directory, expected a log file (.json or .csv)")
    try:
        return _read_records(path)
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file (expected a .json or .csv log)") from None


def _read_records(path: Path) -> list[dict]:
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path}: not valid JSON ({exc})") from None
        if isinstance(data, dict):
            for key in ("events", "faults", "incidents", "records"):
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise SpecError(f"{path}: expected a JSON list of records (objects)")
        return data
    if path.suffix.lower() == ".csv":
        with path.open(newline="") as fh:
            return list(csv.DictReader(fh))
    raise SpecError(f"{path}: unknown log format {path.suffix!r}; expected .json or .csv")


def read_fault_log(path: str | Path, *, nodes: int, window: float, time_unit: str | None = None,
                   source: str = "") -> FaultLog:
    """Read a node-level fault log (JSON or CSV).

    Two layouts are accepted:

    * one record per fault: ``node``, ``start``, ``end`` (empty or null while open at the
      window's end), ``class``;
    * one record per event (the InfiniteHBD trace): ``node_id``, ``event_time``,
      ``event_type`` (``fault_start`` / ``fault_end``) and ``fault_type`` with ``Class``;
      an end closes the earliest open fault of the same node, class and description.

    Args:
        path: ``.json`` or ``.csv`` file.
        nodes: nodes observed, counting those that never failed.
        window: end of the observation window, seconds; faults open then are right-censored.
        time_unit: unit of the times when the columns do not carry one (``"s"``, ``"min"``,
            ``"h"``, ``"d"``).
        source: label kept with the log.

    Raises:
        SpecError: a malformed file, naming the record and the field.
    """
    path = Path(path)
    recs = _records(path)
    where = str(path)
    if recs and "event_type" in recs[0]:
        return _from_events(recs, where, nodes=nodes, window=window, time_unit=time_unit, source=source)
    keys = list(recs[0].keys()) if recs else ["node", "start_s", "end_s", "class"]
    sk, sf = _column(keys, "start", time_unit, where)
    ek, ef = _column(keys, "end", time_unit, where)
    rows = []
    for i, r in enumerate(recs):
        w = f"{where}[{i}]"
        for k in ("node", "class"):
            if k not in r or r[k] in (None, ""):
                raise SpecError(f"{w}.{k}: required field is missing")
        s = _number(r.get(sk), f"{w}.{sk}") * sf
        if not np.isfinite(s):
            raise SpecError(f"{w}.{sk}: required field is missing")
        e = _number(r.get(ek), f"{w}.{ek}") * ef
        rows.append((str(r["node"]), s, e, str(r["class"])))
    return _build(rows, where, nodes=nodes, window=window, source=source)


def _from_events(recs, where, *, nodes, window, time_unit, source):
    factor = _unit_factor(time_unit, f"{where}.event_time")
    open_: dict[tuple, list[float]] = {}
    rows = []
    for i, r in enumerate(recs):
        w = f"{where}[{i}]"
        try:
            node, kind, ft = str(r["node_id"]), r["event_type"], r["fault_type"]
            cls, desc = str(ft["Class"]), str(ft.get("Desc", ""))
        except (KeyError, TypeError) as exc:
            raise SpecError(f"{w}: missing field {exc}; expected node_id, event_time, event_type, "
                            f"fault_type.Class") from None
        t = _number(r.get("event_time"), f"{w}.event_time") * factor
        key = (node, cls, desc)
        if kind == "fault_start":
            open_.setdefault(key, []).append(t)
        elif kind == "fault_end":
            if not open_.get(key):
                raise SpecError(f"{w}: fault_end of node {node!r} class {cls!r} without an open fault_start")
            rows.append((node, open_[key].pop(0), t, cls))
        else:
            raise SpecError(f"{w}.event_type={kind!r}: expected 'fault_start' or 'fault_end'")
    for (node, cls, _), starts in open_.items():
        rows.extend((node, s, float("nan"), cls) for s in starts)
    return _build(rows, where, nodes=nodes, window=window, source=source)


def _build(rows, where, *, nodes, window, source) -> FaultLog:
    window = float(window)
    rows.sort(key=lambda r: (r[1], r[0]))
    names = tuple(dict.fromkeys(r[0] for r in rows))
    classes = tuple(sorted(dict.fromkeys(r[3] for r in rows)))
    start = np.array([r[1] for r in rows], dtype=float)
    end = np.array([r[2] for r in rows], dtype=float)
    if np.any(start >= window):
        i = int(np.flatnonzero(start >= window)[0])
        raise SpecError(f"{where}: a fault starts at {start[i]!r} s, at or after the window end {window!r} s; "
                        f"pass the window that the log covers")
    late = np.isfinite(end) & (end > window)
    end[late] = window
    cens = ~np.isfinite(end) | late
    end[~np.isfinite(end)] = window
    name_idx = {n: k for k, n in enumerate(names)}
    return FaultLog(node=np.array([name_idx[r[0]] for r in rows], dtype=int), start=start, end=end,
                    censored=cens, fault_class=np.array([classes.index(r[3]) for r in rows], dtype=int),
                    classes=classes, node_names=names, nodes=int(nodes), window=window, source=source or where)


def read_incident_log(path: str | Path, *, window: float, cards: int, time_unit: str | None = None,
                      source: str = "") -> IncidentLog:
    """Read a job-level incident log (JSON or CSV): ``time``, ``cause``, ``downtime``.

    Args:
        path: ``.json`` or ``.csv`` file.
        window: wall-clock length of the observation, seconds.
        cards: accelerators in the job.
        time_unit: unit of ``time`` and ``downtime`` when the columns do not carry one.
        source: label kept with the log.
    """
    path = Path(path)
    recs = _records(path)
    where = str(path)
    keys = list(recs[0].keys()) if recs else ["time_s", "cause", "downtime_s"]
    tk, tf = _column(keys, "time", time_unit, where)
    dk, df = _column(keys, "downtime", time_unit, where, required=False)
    times, causes, downs = [], [], []
    for i, r in enumerate(recs):
        w = f"{where}[{i}]"
        t = _number(r.get(tk), f"{w}.{tk}")
        if not np.isfinite(t):
            raise SpecError(f"{w}.{tk}: required field is missing")
        times.append(t * tf)
        causes.append(str(r.get("cause") or "unknown"))
        downs.append(_number(r.get(dk), f"{w}.{dk}") * df if dk else float("nan"))
    order = np.argsort(times, kind="stable")
    return IncidentLog(time=np.asarray(times, dtype=float)[order], cause=tuple(causes[i] for i in order),
                       downtime=np.asarray(downs, dtype=float)[order], window=float(window), cards=int(cards),
                       source=source or where)


#: the shipped part of the InfiniteHBD trace: 400 nodes, first 209.39 days
INFINITEHBD_NODES = 400
INFINITEHBD_WINDOW = 209.39 * DAY
#: the part of the InfiniteHBD observation window kept back (348.98 - 209.39 days), seconds
INFINITEHBD_REST = (348.98 - 209.39) * DAY


def infinitehbd_trace() -> FaultLog:
    """The shipped first 60 % of the public InfiniteHBD GPU-server fault trace.

    400 GPU servers of an LLM pre-training cluster, faults from day 0 to day 209.39 of
    348.98 (stepfun-ai/InfiniteHBD-Trace, Apache-2.0; arXiv 2502.03885). Faults open at
    the cut are right-censored. The README and LICENSE ship next to the data in
    ``markovsim/data/infinitehbd/``.
    """
    path = resources.files("markovsim") / "data" / "infinitehbd" / "fault_trace_until_day_209.39.json"
    with resources.as_file(path) as p:
        return read_fault_log(p, nodes=INFINITEHBD_NODES, window=INFINITEHBD_WINDOW, time_unit="d",
                              source="InfiniteHBD trace (stepfun-ai/InfiniteHBD-Trace 7aacdc8), days 0-209.39")
