r"""Calibrate a fault catalogue to a job's incident log, and check a catalogue against a
published run.

:func:`calibrate_catalogue`
    Fits scales on the catalogue's rates to an :class:`~markovsim.availability.IncidentLog`
    by maximum likelihood. Incidents of a job of :math:`N` cards are a Poisson process in
    *running* time with rate :math:`s\,\Lambda(N)` (one scale for all modes) or
    :math:`\sum_k s_k \Lambda_k(N)` (a scale per component, incidents assigned to components by
    their cause). With :math:`n` incidents in running time :math:`T`,
    :math:`\hat s = n / (\Lambda T)`; its interval is the profile-likelihood interval
    :math:`2[\ell(\hat s) - \ell(s)] \le \chi^2_{1,\text{level}}`. Then the checks that the fit
    did not use (cause shares, daily dispersion, exponential gaps), each marked ``fitted``
    or not.
:func:`published_run_check`
    A catalogue's predicted interruption count for a published run (cards, days) against
    the count the run reported, with the per-running to per-wall-clock conversion made
    explicit: :math:`n = \lambda_\text{run}\, A\, t_\text{wall}`
    (:func:`markovsim.per_wall_rate`), :math:`A` the chain's availability.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._errors import InvalidParameterError
from .._lazy import lazy_module
from .._units import DAY, HOUR, per_wall_rate
from ._faults import Effect, FaultCatalogue, mode_rates
from ._fit import FittedValue
from ._gof import CheckRow
from ._logs import IncidentLog, dispersion_index
from ._topology import ClusterShape

optimize = lazy_module("scipy.optimize")
stats = lazy_module("scipy.stats")

__all__ = ["CalibrationResult", "calibrate_catalogue", "PublishedRunCheck", "published_run_check",
           "poisson_rate_interval"]

_PROFILE = "profile likelihood (Poisson process in running time)"


def poisson_rate_interval(count: int, exposure: float, level: float = 0.9) -> tuple[float, float, float]:
    """MLE and profile-likelihood interval of a Poisson rate: ``(rate, low, high)`` per unit exposure."""
    if exposure <= 0:
        raise InvalidParameterError(f"exposure={exposure!r}: expected a positive running time")
    q = stats.chi2.ppf(level, 1)
    n = float(count)
    est = n / exposure
    if n == 0:
        return 0.0, 0.0, q / 2 / exposure

    def gap(r):
        return 2 * (n * math.log(est / r) - (est - r) * exposure) - q

    lo = optimize.brentq(gap, est * 1e-12, est)
    hi = optimize.brentq(gap, est, est * 1e3 + 10 / exposure)
    return est, lo, hi


@dataclasses.dataclass(frozen=True)
class CalibrationResult:
    """A catalogue fitted to an incident log.

    Attributes:
        catalogue: the catalogue with its component rates scaled by the fitted values.
        fitted: the fitted values (scales, job MTBF, interruption rate) with intervals.
        checks: checks against the fitted model; ``fitted=True`` rows were fitted directly and
            are no evidence.
        running_time: exposure used, seconds of running.
        method: how the intervals were obtained.
    """

    catalogue: FaultCatalogue
    fitted: tuple[FittedValue, ...]
    checks: tuple[CheckRow, ...]
    running_time: float
    method: str = _PROFILE

    def table(self) -> str:
        lines = ["fitted values:"]
        for v in self.fitted:
            lines.append(f"  {v.name:38s} {v.estimate:10.4g} [{v.low:.4g}, {v.high:.4g}] {v.unit}"
                         f"{'  (on bound)' if v.on_bound else ''}")
        lines.append("checks against the fitted model:")
        for r in self.checks:
            lines.append(f"  {r.statistic:38s} observed {r.observed:8.4g}  model {r.model:8.4g} "
                         f"[{r.low:.4g}, {r.high:.4g}]  {'ok' if r.passed else 'MISS'}"
                         f"{'  (fitted output)' if r.fitted else ''}")
        return "\n".join(lines)


def calibrate_catalogue(catalogue: FaultCatalogue, shape: ClusterShape, incidents: IncidentLog, *,
                        scale: str = "all", cause_map: dict[str, str] | None = None,
                        availability: float | None = None, level: float = 0.9,
                        simulations: int = 2000, seed: int = 0) -> CalibrationResult:
    """Fit scales on a catalogue's interrupting rates to a job's incident log.

    Args:
        catalogue: the fault catalogue (its ``INTERRUPT`` modes are the ones incidents count).
        shape: the cluster shape (component counts for the job's cards).
        incidents: the job's incidents; ``incidents.cards`` is the job size.
        scale: ``"all"`` (one scale on every rate) or ``"component"`` (one per component;
            needs ``cause_map``).
        cause_map: incident cause -> component name (for per-cause checks, and required
            with ``scale="component"``).
        availability: share of the window the job ran, used when the log records no
            downtimes (running time = ``availability x window``).
        level: interval level.
        simulations: simulated logs for the dispersion check.
        seed: random seed.

    Raises:
        InvalidParameterError: unknown ``scale``, unmapped causes, or no way to get the
            running time.
    """
    if scale not in ("all", "component"):
        raise InvalidParameterError(f"scale={scale!r}: expected 'all' or 'component'")
    down = incidents.downtime
    if incidents.n_incidents and np.all(np.isfinite(down)):
        T = incidents.running_time()
        if availability is not None:
            raise InvalidParameterError("availability: the log records every downtime; leave availability unset")
    elif availability is not None:
        if not 0 < availability <= 1:
            raise InvalidParameterError(f"availability={availability!r}: expected a share in (0, 1]")
        T = availability * incidents.window
    else:
        raise InvalidParameterError("incidents.downtime: not recorded for every incident; pass availability= "
                                    "(share of the window the job ran) to get the running time")
    if T <= 0:
        raise InvalidParameterError(f"running time {T!r} s: the recorded downtime fills the whole window")
    rates = mode_rates(catalogue, shape, incidents.cards)
    inter = np.array([m.effect is Effect.INTERRUPT for m in catalogue.modes])
    comp_of_mode = [m.component for m in catalogue.modes]
    comp_names = [c.name for c in catalogue.components]
    lam = {c: float(rates[[i for i, m in enumerate(comp_of_mode) if m == c and inter[i]]].sum()) for c in comp_names}
    total = sum(lam.values())
    if total <= 0:
        raise InvalidParameterError("catalogue: no interrupting mode has a positive rate for this job")
    causes = incidents.cause_counts()
    if cause_map is not None:
        unknown = sorted(set(causes) - set(cause_map))
        if unknown:
            raise InvalidParameterError(f"cause_map: no component for cause(s) {unknown}; map every cause "
                                        f"to one of {comp_names}")
        bad = sorted({v for v in cause_map.values() if v not in lam})
        if bad:
            raise InvalidParameterError(f"cause_map: unknown component(s) {bad}; expected names from {comp_names}")
    elif scale == "component":
        raise InvalidParameterError("cause_map: required with scale='component' (incident cause -> component)")
    n = incidents.n_incidents
    fitted, factors = [], {}
    if scale == "all":
        s, lo, hi = poisson_rate_interval(n, total * T, level)
        fitted.append(FittedValue("rate scale (all modes)", s, lo, hi, "x catalogue", level, _PROFILE, n == 0))
        factors = {c: s for c in comp_names}
    else:
        per = {c: 0 for c in comp_names}
        for cause, k in causes.items():
            per[cause_map[cause]] += k
        for c in comp_names:
            if lam[c] <= 0:
                factors[c] = 1.0
                continue
            s, lo, hi = poisson_rate_interval(per[c], lam[c] * T, level)
            factors[c] = s
            fitted.append(FittedValue(f"rate scale {c}", s, lo, hi, "x catalogue", level, _PROFILE, per[c] == 0))
    r, rlo, rhi = poisson_rate_interval(n, T, level)
    fitted.append(FittedValue("interruption rate (running)", r * DAY, rlo * DAY, rhi * DAY, "per day of running",
                              level, _PROFILE, n == 0))
    fitted.append(FittedValue("job MTBF (running)", (1 / r if r else math.inf) / HOUR, (1 / rhi) / HOUR,
                              (1 / rlo if rlo else math.inf) / HOUR, "hours", level, _PROFILE, n == 0))
    new = catalogue
    for c in comp_names:
        new = new.replace_rate(c, new.component(c).rate * factors[c])
    fitted_rate = sum(lam[c] * factors[c] for c in comp_names)
    checks = _checks(incidents, T, fitted_rate, lam, factors, causes, cause_map, scale, level, simulations, seed)
    return CalibrationResult(catalogue=new, fitted=tuple(fitted), checks=tuple(checks), running_time=T)


def _checks(incidents, T, fitted_rate, lam, factors, causes, cause_map, scale, level, simulations, seed):
    rng = np.random.default_rng(seed)
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    n = incidents.n_incidents
    mean = fitted_rate * T
    lo, hi = stats.poisson.ppf([lo_q, hi_q], mean)
    rows = [CheckRow("incidents", n, mean, float(lo), float(hi), "inside", bool(lo <= n <= hi), fitted=True)]
    if cause_map is not None:
        per = {c: 0 for c in lam}
        for cause, k in causes.items():
            per[cause_map[cause]] += k
        for c, k in per.items():
            if lam[c] <= 0 and k == 0:
                continue
            mu = lam[c] * factors[c] * T
            lo, hi = stats.poisson.ppf([lo_q, hi_q], mu)
            rows.append(CheckRow(f"incidents: {c}", k, mu, float(lo), float(hi), "inside", bool(lo <= k <= hi),
                                 fitted=scale == "component"))
    days = int(np.floor(incidents.window / DAY + 1e-9))
    if days >= 2 and n > 0:
        obs = dispersion_index(incidents.daily_counts())
        share = T / incidents.window
        sims = rng.poisson(fitted_rate * share * DAY, size=(simulations, days))
        ok = sims.sum(1) > 0
        disp = sims[ok].var(axis=1, ddof=1) / sims[ok].mean(axis=1)
        lo, hi = np.quantile(disp, [lo_q, hi_q])
        rows.append(CheckRow("daily dispersion", obs, float(disp.mean()), float(lo), float(hi), "inside",
                             bool(lo <= obs <= hi)))
    if n >= 5:
        gaps = np.diff(np.concatenate([[0.0], incidents.time]))
        ks = stats.kstest(gaps, "expon", args=(0, incidents.window / max(n, 1))).statistic
        crit = stats.kstwo.ppf(level, gaps.size)
        rows.append(CheckRow("gaps: KS to exponential", 0.0, float(ks), 0.0, float(crit), f"ks <= {crit:.3g}",
                             bool(ks <= crit)))
    return rows


@dataclasses.dataclass(frozen=True)
class PublishedRunCheck:
    """A catalogue's prediction for a published run.

    Attributes:
        predicted: interruptions predicted over the run's wall-clock days.
        reported: interruptions the run reported.
        relative_error: ``predicted / reported - 1``.
        running_rate_per_day: catalogue interruption rate per day of running.
        availability: the chain's availability used for the conversion.
        predicted_range: predictions at availability ``(low, 1)`` (``low`` as given).
    """

    predicted: float
    reported: float
    relative_error: float
    running_rate_per_day: float
    availability: float
    predicted_range: tuple[float, float]


def published_run_check(catalogue: FaultCatalogue, shape: ClusterShape, *, cards: int, days: float,
                        reported: float, availability: float, availability_low: float | None = None
                        ) -> PublishedRunCheck:
    """Predicted interruptions of a run of ``cards`` for ``days`` of wall-clock time.

    ``predicted = per_wall_rate(interruption rate, availability) x days``.

    Args:
        catalogue: fault catalogue (rates per running time).
        shape: cluster shape.
        cards: cards of the run.
        days: wall-clock days of the run.
        reported: the published count (only compared with, never used).
        availability: share of wall time the job ran (e.g. from :func:`analyze`).
        availability_low: a lower bound of the availability for the range (default: the value).
    """
    rates = mode_rates(catalogue, shape, cards)
    inter = np.array([m.effect is Effect.INTERRUPT for m in catalogue.modes])
    run = float(rates[inter].sum())
    pred = per_wall_rate(run, availability) * days * DAY
    low = availability if availability_low is None else availability_low
    return PublishedRunCheck(predicted=pred, reported=float(reported), relative_error=pred / reported - 1.0,
                             running_rate_per_day=run * DAY, availability=float(availability),
                             predicted_range=(per_wall_rate(run, low) * days * DAY, run * days * DAY))
