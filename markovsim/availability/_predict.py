r"""Predictions with uncertainty from a fitted fault model.

:func:`predict_next_window`
    From a fit on one window, the next window of the same cluster: faults per class,
    node-days lost, nodes down at once, the repair median and 90th percentile. Each is a
    prediction interval from simulations that start where the log ends (nodes still down
    keep their residual repair time, drawn from the phase-type distribution conditioned on
    the time already spent; each node keeps its posterior rate class; the burst environment
    starts from its filtered state) and propagate parameter uncertainty (each simulation
    draws its own parameters, :meth:`~markovsim.availability.FaultModelFit.sample_models`).
:func:`training_distributions`
    Time to train and rolling-window goodput of a checkpointed job as distributions, from a
    run-level simulation of the job under the fault model.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._errors import InvalidParameterError
from .._units import DAY, HOUR
from ._faultsim import InitialState
from ._fit import FaultModel, FaultModelFit, _quantile_mixture
from ._gof import simulate_statistics
from ._phasetype import PhaseType

__all__ = ["Band", "WindowPrediction", "predict_next_window", "TrainingJob", "TrainingDistributions",
           "training_distributions"]


@dataclasses.dataclass(frozen=True)
class Band:
    """A predicted quantity: mean, median and a central interval.

    Attributes:
        mean: mean over simulations.
        median: median.
        low: lower end of the central ``level`` interval.
        high: upper end.
        level: interval level.
    """

    mean: float
    median: float
    low: float
    high: float
    level: float

    @classmethod
    def of(cls, values, level: float) -> "Band":
        v = np.asarray(values, dtype=float)
        finite = v[np.isfinite(v)]
        if finite.size < v.size / 2:
            raise InvalidParameterError(f"prediction: {v.size - finite.size} of {v.size} simulations undefined")
        lo, hi = np.quantile(v, [(1 - level) / 2, (1 + level) / 2])
        return cls(float(finite.mean()), float(np.median(v)), float(lo), float(hi), level)

    def __str__(self) -> str:
        return f"{self.median:.4g} [{self.low:.4g}, {self.high:.4g}]"


@dataclasses.dataclass(frozen=True)
class WindowPrediction:
    """Prediction of the next window of a cluster's fault log.

    Attributes:
        start: start of the window, seconds from the fitted log's origin.
        duration: window length, seconds.
        nodes: nodes of the cluster.
        simulations: simulated windows.
        faults_by_class: faults starting in the window, per class.
        faults: all faults.
        node_days_lost: node-days down inside the window (faults open at the start included).
        max_nodes_down: most nodes down at once.
        mean_nodes_down: time-average nodes down.
        time_share_5pct_down: share of the window with at least 5 % of the nodes down.
        repair_median_days: Kaplan-Meier median repair time of the window's faults, days.
        repair_p90_days: Kaplan-Meier 90th percentile, days (``inf`` draws: censoring hid it).
        model_repair_median_days: the model's median repair time, days (parameter interval).
        model_repair_p90_days: the model's 90th percentile, days (parameter interval).
        parameter_uncertainty: whether simulations drew their own parameters.
    """

    start: float
    duration: float
    nodes: int
    simulations: int
    faults_by_class: dict[str, Band]
    faults: Band
    node_days_lost: Band
    max_nodes_down: Band
    mean_nodes_down: Band
    time_share_5pct_down: Band
    repair_median_days: Band
    repair_p90_days: Band
    model_repair_median_days: Band
    model_repair_p90_days: Band
    parameter_uncertainty: bool

    def as_dict(self) -> dict[str, object]:
        """Flat dictionary of ``{quantity: (median, low, high)}`` for reports and reproduction rows."""
        out: dict[str, object] = {f"faults {c}": (b.median, b.low, b.high) for c, b in self.faults_by_class.items()}
        for name in ("faults", "node_days_lost", "max_nodes_down", "mean_nodes_down", "time_share_5pct_down",
                     "repair_median_days",
                     "repair_p90_days", "model_repair_median_days", "model_repair_p90_days"):
            b = getattr(self, name)
            out[name.replace("_", " ")] = (b.median, b.low, b.high)
        return out

    def table(self) -> str:
        lines = [f"window: day {self.start / DAY:.2f} to {(self.start + self.duration) / DAY:.2f} "
                 f"({self.nodes} nodes, {self.simulations} simulations, median [{self.faults.level:.0%} interval])"]
        for k, (m, lo, hi) in self.as_dict().items():
            lines.append(f"  {k:34s} {m:10.4g}  [{lo:.4g}, {hi:.4g}]")
        return "\n".join(lines)


def _initial_state(fit: FaultModelFit, model: FaultModel, rng: np.random.Generator) -> InitialState:
    log = fit.log
    open_ = np.flatnonzero(log.censored)
    until = np.empty(open_.size)
    for j, i in enumerate(open_):
        elapsed = log.window - log.start[i]
        ph = model.repair[log.fault_class[i]]
        try:
            until[j] = ph.residual(elapsed).sample(rng, 1)[0]
        except InvalidParameterError:
            until[j] = ph.sample(rng, 1)[0]      # survival underflow: fall back to a fresh repair
    return InitialState(node_class_probabilities=fit.rate_classes.posterior, down_node=log.node[open_],
                        down_class=log.fault_class[open_], down_until=until, environment=fit.arrivals.end_state)


def predict_next_window(fit: FaultModelFit, duration: float, *, simulations: int = 1000, level: float = 0.9,
                        parameter_uncertainty: bool = True, seed: int = 0) -> WindowPrediction:
    """Predict the window that follows the fitted log, with prediction intervals.

    Args:
        fit: a fit (:func:`markovsim.availability.fit_fault_log`).
        duration: length of the next window, seconds.
        simulations: simulated windows.
        level: interval level.
        parameter_uncertainty: draw each simulation's parameters from the fit.
        seed: random seed.

    Example:
        >>> import markovsim.availability as av                        # doctest: +SKIP
        >>> fit = av.fit_fault_log(av.infinitehbd_trace())             # doctest: +SKIP
        >>> av.predict_next_window(fit, av.INFINITEHBD_REST).table()   # doctest: +SKIP
    """
    if not np.isfinite(duration) or duration <= 0:
        raise InvalidParameterError(f"duration={duration!r} s: expected a positive window length")
    rng = np.random.default_rng(seed)
    models = fit.sample_models(rng, simulations) if parameter_uncertainty else [fit.model] * simulations
    stats = []
    for m in models:
        init = _initial_state(fit, m, rng)
        stats.extend(simulate_statistics([m], duration, rng, initial=init))
    by_class = {c: Band.of([s["faults by class"].get(c, 0) for s in stats], level) for c in fit.model.classes}
    few = models[: min(200, len(models))]
    return WindowPrediction(
        start=fit.log.window, duration=float(duration), nodes=fit.model.nodes, simulations=simulations,
        faults_by_class=by_class, faults=Band.of([s["faults"] for s in stats], level),
        node_days_lost=Band.of([s["node-days lost"] for s in stats], level),
        max_nodes_down=Band.of([s["max nodes down"] for s in stats], level),
        mean_nodes_down=Band.of([s["mean nodes down"] for s in stats], level),
        time_share_5pct_down=Band.of([s["time share >= 5% nodes down"] for s in stats], level),
        repair_median_days=Band.of([s["repair median d"] for s in stats], level),
        repair_p90_days=Band.of([s["repair p90 d"] for s in stats], level),
        model_repair_median_days=Band.of([_quantile_mixture(m, 0.5) / DAY for m in few], level),
        model_repair_p90_days=Band.of([_quantile_mixture(m, 0.9) / DAY for m in few], level),
        parameter_uncertainty=parameter_uncertainty)


# ---------------------------------------------------------------------- training runs


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    """A checkpointed training job, as the run-level simulation sees it. Times in seconds.

    Attributes:
        nodes: nodes the job spans.
        work: useful compute the job needs.
        checkpoint_interval: work between checkpoints.
        checkpoint_save_time: blocking time of one save (work is durable when it ends).
        restart_time: downtime after an interruption (detection, restart, reload): a
            :class:`PhaseType` or a fixed number of seconds.
    """

    nodes: int
    work: float
    checkpoint_interval: float
    checkpoint_save_time: float = 0.0
    restart_time: PhaseType | float = 600.0

    def validate(self) -> "TrainingJob":
        if self.nodes < 1:
            raise InvalidParameterError(f"nodes={self.nodes!r}: expected at least one node")
        for name in ("work", "checkpoint_interval"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise InvalidParameterError(f"{name}={v!r} s: expected a positive time")
        if not np.isfinite(self.checkpoint_save_time) or self.checkpoint_save_time < 0:
            raise InvalidParameterError(f"checkpoint_save_time={self.checkpoint_save_time!r} s: expected >= 0")
        return self


@dataclasses.dataclass(frozen=True)
class TrainingDistributions:
    """Time to train and rolling-window goodput as distributions.

    Attributes:
        time_to_train_days: wall-clock days to finish the work (over runs).
        goodput: durable work / wall time of whole runs.
        rolling_goodput: goodput over windows of ``window`` (all windows of all runs).
        interruptions: interruptions per run.
        window: rolling window length, seconds.
        runs: simulated runs.
        percentiles: ``{p: time to train in days}`` for p in 10, 50, 90, 99.
        rolling_percentiles: ``{p: rolling goodput}`` for p in 1, 5, 50.
    """

    time_to_train_days: Band
    goodput: Band
    rolling_goodput: Band
    interruptions: Band
    window: float
    runs: int
    percentiles: dict[int, float]
    rolling_percentiles: dict[int, float]


def _job_interruptions(model: FaultModel, nodes: int, horizon: float, rng: np.random.Generator) -> np.ndarray:
    M = model.nodes
    times = model.shocks.scaled(max(nodes, M) / M).sample_times(rng, horizon)
    if nodes >= M or times.size == 0:
        return times
    cls = rng.choice(len(model.classes), size=times.size, p=model.class_shares / model.class_shares.sum())
    k = model.sizes.sample(rng, cls)
    frac = nodes / M
    touch = 1.0 - (1.0 - frac) ** k        # first node or one of the others in the job
    return times[rng.random(times.size) < touch]


def training_distributions(model: FaultModel, job: TrainingJob, *, runs: int = 500, window: float = 7 * DAY,
                           level: float = 0.9, seed: int = 0) -> TrainingDistributions:
    """Simulate a checkpointed job under a fault model: time to train and rolling goodput.

    Interruptions are the shocks that touch the job's nodes (the model scaled to the job's
    size when the job is larger than the fitted cluster, keeping its burst environment);
    shocks during downtime do not count (per-running convention). An interruption loses the
    work since the last completed save and costs ``restart_time``.

    Args:
        model: a fault model (e.g. ``fit.model``).
        job: the :class:`TrainingJob`.
        runs: simulated runs.
        window: rolling-window length, seconds.
        level: interval level of the bands.
        seed: random seed.
    """
    job.validate()
    rng = np.random.default_rng(seed)
    cycle = job.checkpoint_interval + job.checkpoint_save_time
    ttt, goodputs, rolling, counts = [], [], [], []
    for _ in range(runs):
        horizon = 2.0 * job.work * cycle / job.checkpoint_interval + 30 * DAY
        arrivals = _job_interruptions(model, job.nodes, horizon, rng)
        t, durable, i, n_int = 0.0, 0.0, 0, 0
        seg_start, seg_durable = [], []
        while True:
            need = job.work - durable
            cycles_needed = int(np.ceil(need / job.checkpoint_interval - 1e-12))
            finish = t + need + cycles_needed * job.checkpoint_save_time
            while i < arrivals.size and arrivals[i] < t:
                i += 1
            if i >= arrivals.size:
                extra = _job_interruptions(model, job.nodes, horizon, rng) + arrivals[-1] if arrivals.size else \
                    _job_interruptions(model, job.nodes, horizon, rng)
                arrivals = np.concatenate([arrivals, extra])
                continue
            seg_start.append(t)
            seg_durable.append(durable)
            nxt = arrivals[i]
            if nxt >= finish:
                t = finish
                durable = job.work
                break
            done_cycles = int((nxt - t) // cycle)
            durable += done_cycles * job.checkpoint_interval
            restart = job.restart_time if not isinstance(job.restart_time, PhaseType) else \
                float(job.restart_time.sample(rng, 1)[0])
            t = nxt + restart
            n_int += 1
            i += 1
        ttt.append(t / DAY)
        goodputs.append(job.work / t)
        counts.append(n_int)
        # rolling goodput on an hourly grid: durable(t) piecewise from the segments
        ss, sd = np.asarray(seg_start), np.asarray(seg_durable)
        grid = np.arange(0.0, t + HOUR, HOUR)
        k = np.searchsorted(ss, grid, side="right") - 1
        ends = np.append(ss[1:], t)
        within = np.minimum(grid, ends[k]) - ss[k]
        dur = sd[k] + np.minimum((within // cycle) * job.checkpoint_interval, job.work - sd[k])
        dur[grid >= t] = job.work
        w = int(round(window / HOUR))
        if grid.size > w:
            rolling.append((dur[w:] - dur[:-w]) / window)
    roll = np.concatenate(rolling) if rolling else np.zeros(0)
    if roll.size == 0:
        raise InvalidParameterError(f"window={window!r} s: longer than every simulated run; pick a shorter window")
    return TrainingDistributions(
        time_to_train_days=Band.of(ttt, level), goodput=Band.of(goodputs, level),
        rolling_goodput=Band.of(roll, level), interruptions=Band.of(counts, level), window=float(window),
        runs=runs, percentiles={p: float(np.percentile(ttt, p)) for p in (10, 50, 90, 99)},
        rolling_percentiles={p: float(np.percentile(roll, p)) for p in (1, 5, 50)})
