r"""Goodness of fit of a fault model: the fitted model against the log it was fitted on.

Each statistic is computed the same way on the observed log and on logs simulated from the
fitted model (:func:`~markovsim.availability.simulate_fault_log`), with parameter uncertainty
(each simulation of the interval uses a model drawn from the fit's sampling distribution);
the "model" value is the mean over simulations of the fitted (maximum-likelihood) model.
The comparison says, per statistic, which criterion it is held to:

``inside``    the observed value lies inside the central ``level`` interval of the simulations;
``relative``  the simulations' mean is within a relative tolerance of the observed value;
``ks``        Kolmogorov-Smirnov distance between the model's CDF and the Kaplan-Meier
              estimate of the log (censoring included) at most a bound.

Statistics: faults per class and in all, per-node dispersion (variance / mean of faults per
node), daily dispersion (of faults per day), the most nodes down at once and the share of
time with at least 5 % of the nodes down (the concurrency tail), the share of faults on the
worst 10 % of nodes, node-days lost, and the repair-time distribution.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._units import DAY
from ._faultsim import InitialState, simulate_fault_log
from ._fit import FaultModel, FaultModelFit
from ._logs import FaultLog, dispersion_index, nodes_down_path

__all__ = ["kaplan_meier", "ks_distance", "window_statistics", "CheckRow", "GoodnessOfFit", "goodness_of_fit"]


def kaplan_meier(durations, censored) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan-Meier estimate of the CDF: ``(times, F(times))`` at each distinct observed time."""
    t = np.asarray(durations, dtype=float)
    c = np.asarray(censored, dtype=bool)
    times, deaths = np.unique(t[~c], return_counts=True)
    at_risk = t.size - np.searchsorted(np.sort(t), times, side="left")   # durations >= each time
    surv = np.cumprod(1.0 - deaths / at_risk)
    return times, 1.0 - surv


def km_quantile(durations, censored, q: float) -> float:
    """The ``q`` quantile of the Kaplan-Meier estimate; ``inf`` when it never reaches ``q``."""
    times, F = kaplan_meier(durations, censored)
    hit = np.flatnonzero(F >= q - 1e-12)
    return float(times[hit[0]]) if hit.size else float("inf")


def ks_distance(cdf, durations, censored) -> float:
    """Largest gap between ``cdf`` (a vectorised callable, seconds) and the Kaplan-Meier CDF."""
    times, F = kaplan_meier(durations, censored)
    if times.size == 0:
        return float("nan")
    model = cdf(times)
    before = np.concatenate([[0.0], F[:-1]])
    # the KM step jumps at each time: compare with the value on both sides of the jump
    model_left = cdf(np.maximum(times - 1e-9 * np.maximum(times, 1.0), 0.0))
    return float(max(np.max(np.abs(model - F)), np.max(np.abs(model_left - before))))


def window_statistics(log: FaultLog, *, carried_node=None, carried_end=None) -> dict[str, object]:
    """Statistics of one window of a fault log (observed or simulated).

    Args:
        log: faults starting in the window (times from the window start).
        carried_node: nodes already down at the window start (faults open at the cut).
        carried_end: when each of those comes back, seconds from the window start
            (``log.window`` or later if still open at the end).

    Returns:
        ``faults`` (int), ``faults by class`` (dict), ``per-node dispersion``,
        ``daily dispersion``, ``max nodes down``, ``mean nodes down``, ``time share >= 5% nodes
        down`` (the concurrency tail), ``top 10% nodes share``,
        ``node-days lost`` (node-days down inside the window, carried faults included),
        ``repair median d`` and ``repair p90 d`` (Kaplan-Meier over the faults starting in
        the window; ``inf`` if censoring keeps it from reaching the level).
    """
    cn = np.zeros(0, int) if carried_node is None else np.asarray(carried_node, dtype=int)
    ce = np.zeros(0) if carried_end is None else np.minimum(np.asarray(carried_end, dtype=float), log.window)
    node = np.concatenate([cn, log.node])
    start = np.concatenate([np.zeros(cn.size), log.start])
    end = np.concatenate([ce, log.end])
    t, c = nodes_down_path(node, start, end)
    tail_at = int(np.ceil(0.05 * log.nodes))
    if t.size:
        seg = np.diff(np.append(t, log.window).clip(max=log.window))
        mean_down = float((c * seg).sum() / log.window)
        lost = float((c * seg).sum() / DAY)
        peak = int(c.max())
        tail = float(seg[c >= tail_at].sum() / log.window)
    else:
        mean_down, lost, peak, tail = 0.0, 0.0, 0, 0.0
    n = log.per_node_counts()
    top = np.sort(n)[::-1][: max(1, int(round(0.1 * log.nodes)))].sum() / max(n.sum(), 1.0)
    daily = log.daily_counts()
    return {
        "faults": int(log.n_faults),
        "faults by class": log.class_counts(),
        "per-node dispersion": dispersion_index(n) if n.sum() > 0 else 0.0,
        "daily dispersion": dispersion_index(daily) if daily.size > 1 and daily.sum() > 0 else 0.0,
        "max nodes down": peak,
        "mean nodes down": mean_down,
        "time share >= 5% nodes down": tail,
        "top 10% nodes share": float(top),
        "node-days lost": lost,
        "repair median d": km_quantile(log.duration, log.censored, 0.5) / DAY if log.n_faults else float("inf"),
        "repair p90 d": km_quantile(log.duration, log.censored, 0.9) / DAY if log.n_faults else float("inf"),
    }


@dataclasses.dataclass(frozen=True)
class CheckRow:
    """One statistic: observed against the fitted model.

    Attributes:
        statistic: name.
        observed: value on the log.
        model: mean over simulations of the fitted model (for ``ks``: the KS distance itself).
        low: lower end of the central interval of simulations with parameter uncertainty.
        high: upper end.
        criterion: ``"inside"``, ``"relative <= x"`` or ``"ks <= x"``.
        passed: whether the criterion holds.
        fitted: whether the statistic was fitted directly (so its agreement is no evidence).
    """

    statistic: str
    observed: float
    model: float
    low: float
    high: float
    criterion: str
    passed: bool
    fitted: bool = False

    @property
    def relative_difference(self) -> float:
        return (self.model - self.observed) / self.observed if self.observed else float("nan")


@dataclasses.dataclass(frozen=True)
class GoodnessOfFit:
    """The checks of a fitted fault model against its log.

    Attributes:
        rows: one :class:`CheckRow` per statistic.
        simulations: number of simulated logs.
        level: interval level.
        parameter_uncertainty: whether each simulation drew its own parameters.
        exponential_ks: KS distance of an exponential repair with the same mean (for contrast).
    """

    rows: tuple[CheckRow, ...]
    simulations: int
    level: float
    parameter_uncertainty: bool
    exponential_ks: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    def row(self, statistic: str) -> CheckRow:
        for r in self.rows:
            if r.statistic == statistic:
                return r
        raise KeyError(statistic)

    def table(self) -> str:
        """Plain-text table."""
        lines = [f"{'statistic':34s} {'observed':>10s} {'model':>10s} {'interval':>21s}  criterion         ok"]
        for r in self.rows:
            lines.append(f"{r.statistic:34s} {r.observed:10.4g} {r.model:10.4g} [{r.low:8.4g}, {r.high:8.4g}]  "
                         f"{r.criterion:16s}  {'yes' if r.passed else 'NO'}{'  (fitted)' if r.fitted else ''}")
        return "\n".join(lines)


def simulate_statistics(models: list[FaultModel], duration: float, rng: np.random.Generator, *,
                        initial: InitialState | None = None) -> list[dict]:
    """:func:`window_statistics` of one simulated log per model."""
    out = []
    for m in models:
        log = simulate_fault_log(m, duration, rng, initial=initial)
        carried = None if initial is None else (initial.down_node, initial.down_until)
        out.append(window_statistics(log, carried_node=None if carried is None else carried[0],
                                     carried_end=None if carried is None else carried[1]))
    return out


def goodness_of_fit(fit: FaultModelFit, *, simulations: int = 400, level: float = 0.9,
                    parameter_uncertainty: bool = True, dispersion_tolerance: float = 0.2,
                    ks_bound: float = 0.10, seed: int = 0) -> GoodnessOfFit:
    """Check a fitted fault model against the log it was fitted on.

    Criteria (the issue's acceptance): faults per class and in all inside the ``level``
    interval; per-node and daily dispersion within ``dispersion_tolerance`` (relative, on
    the simulations' mean); the most nodes down at once inside the interval; repair-time KS
    distance to the Kaplan-Meier estimate at most ``ks_bound``. Node-days lost and the
    worst-10 % share are reported against the interval as well.

    Args:
        fit: the fit (:func:`markovsim.availability.fit_fault_log`).
        simulations: simulated logs.
        level: interval level.
        parameter_uncertainty: draw each simulation's parameters from the fit.
        dispersion_tolerance: relative tolerance of the two dispersion indices.
        ks_bound: bound on the repair KS distance.
        seed: random seed.
    """
    rng = np.random.default_rng(seed)
    log = fit.log
    point = simulate_statistics([fit.model] * simulations, log.window, rng)
    pred = simulate_statistics(fit.sample_models(rng, simulations), log.window, rng) \
        if parameter_uncertainty else point
    obs = window_statistics(log)
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    rows = []

    def band(get):
        m = float(np.mean([get(s) for s in point]))
        v = np.asarray([get(s) for s in pred], dtype=float)
        return m, float(np.quantile(v, lo_q)), float(np.quantile(v, hi_q))

    for c in log.classes:
        m, lo, hi = band(lambda s: s["faults by class"].get(c, 0))
        o = obs["faults by class"][c]
        rows.append(CheckRow(f"faults: {c}", o, m, lo, hi, "inside", lo <= o <= hi))
    m, lo, hi = band(lambda s: s["faults"])
    rows.append(CheckRow("faults: all classes", obs["faults"], m, lo, hi, "inside", lo <= obs["faults"] <= hi))
    for key in ("per-node dispersion", "daily dispersion"):
        m, lo, hi = band(lambda s: s[key])
        rows.append(CheckRow(key, obs[key], m, lo, hi, f"relative <= {dispersion_tolerance:g}",
                             abs(m - obs[key]) <= dispersion_tolerance * obs[key]))
    for key in ("max nodes down", "time share >= 5% nodes down", "node-days lost", "top 10% nodes share"):
        m, lo, hi = band(lambda s: s[key])
        rows.append(CheckRow(key, obs[key], m, lo, hi, "inside", lo <= obs[key] <= hi))
    ks = ks_distance(fit.model.repair_cdf, log.duration, log.censored)
    rows.append(CheckRow("repair time KS distance", 0.0, ks, 0.0, ks_bound, f"ks <= {ks_bound:g}", ks <= ks_bound,
                         fitted=True))
    mean = float(np.mean(log.duration[~log.censored]))
    exp_ks = ks_distance(lambda x: 1 - np.exp(-np.asarray(x) / mean), log.duration, log.censored)
    return GoodnessOfFit(rows=tuple(rows), simulations=simulations, level=level,
                         parameter_uncertainty=parameter_uncertainty, exponential_ks=exp_ks)
