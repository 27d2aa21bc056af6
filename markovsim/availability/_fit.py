r"""Fault models fitted to node-level fault logs by maximum likelihood, with intervals.

The generative model (:class:`FaultModel`) of a cluster of :math:`M` nodes:

1. **Rate classes (heterogeneity).** Node :math:`i` belongs to rate class :math:`z_i` with
   probability :math:`\pi_r` and then faults with weight :math:`w_r` (:math:`\sum_r \pi_r w_r = 1`):
   "lemon" nodes are the class with the largest weight. Fitted on the per-node counts
   :math:`n_i` with their up-time :math:`E_i` as a Poisson mixture,
   :math:`n_i \sim \sum_r \pi_r\,\mathrm{Poisson}(\lambda_r E_i)` (EM, then the observed information).
2. **Shocks and bursts (common cause).** Faults arrive in shocks
   (:mod:`markovsim.availability._common_cause`): shock arrivals follow a two-state MMPP,
   a shock is of class :math:`c` with probability :math:`q_c` and takes :math:`K` distinct up
   nodes, the first chosen with probability proportional to :math:`w_{z_i}` among all nodes (a
   shock whose first node is down is lost: rates are per node-second *up*), the rest among
   the other up nodes with the same weights.
3. **Repair.** Each fault keeps its node down for a phase-type time
   (:mod:`markovsim.availability._phasetype`), one distribution per class with enough
   closed repairs, a pooled one for the rest. Faults of one shock are often repaired
   together: each fault after the first shares the first one's repair time with probability
   :math:`\rho` (estimated as the share of such faults whose closed repair ends within
   ``max(1 %, 15 min)`` of an earlier one of the same shock; binomial interval).

Per-class rates are per node-second up (running time):
:math:`r_c = \bar\eta\, q_c\, E[K_c] / M`, with :math:`\bar\eta` the MMPP's long-run shock rate
for a cluster whose nodes are all up (the fitted rate divided by the observed up share).

Uncertainty: each block's MLE has a Wald normal from its observed information on the
log / logit scale (class shares: Dirichlet draws on the shock counts, since classes seen
once or twice break the normal approximation). Intervals of derived values, and the
parameter uncertainty in predictions, come from draws of all blocks together
(:meth:`FaultModelFit.sample_models`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._errors import InvalidParameterError
from .._lazy import lazy_module
from .._units import DAY, HOUR
from ._common_cause import (BurstSizes, MarkovModulatedPoisson, MMPPFit, Shocks, cluster_shocks,
                            fit_burst_sizes, fit_mmpp, normal_root)
from ._logs import FaultLog, dispersion_index
from ._phasetype import PhaseForm, PhaseType, PhaseTypeFit, _covariance, fit_phase_type

stats = lazy_module("scipy.stats")

__all__ = [
    "FaultModel",
    "FittedValue",
    "RateClassFit",
    "FaultModelFit",
    "fit_rate_classes",
    "fit_fault_log",
]


@dataclasses.dataclass(frozen=True)
class FaultModel:
    """A cluster fault process (see the module docstring). Rates per second.

    Attributes:
        classes: fault class names.
        nodes: nodes of the cluster it describes.
        shocks: shock arrivals of the whole cluster with every node up.
        class_shares: probability of each class per shock.
        sizes: shock sizes per class.
        rate_class_shares: :math:`\\pi_r`.
        rate_class_weights: :math:`w_r` (mean 1 under ``rate_class_shares``).
        repair: repair time per class (:class:`PhaseType`, seconds).
        burst_window: linkage window the shocks were defined with, seconds.
        repair_shared: probability that a fault after the first of its shock comes back with
            the first one (batch repair: one repair time for both), else it draws its own.
    """

    classes: tuple[str, ...]
    nodes: int
    shocks: MarkovModulatedPoisson
    class_shares: np.ndarray
    sizes: BurstSizes
    rate_class_shares: np.ndarray
    rate_class_weights: np.ndarray
    repair: tuple[PhaseType, ...]
    burst_window: float = HOUR
    repair_shared: float = 0.0

    def class_rates(self) -> np.ndarray:
        """Faults per node-second up, per class."""
        return self.shocks.mean_rate() * self.class_shares * self.sizes.mean_size() / self.nodes

    def node_rate(self) -> float:
        """Faults per node-second up, all classes (the mean over rate classes)."""
        return float(self.class_rates().sum())

    def correlated_share(self) -> float:
        """Share of faults that arrive with another (beyond the first of their shock)."""
        per_shock = self.class_shares * self.sizes.mean_size()
        return float((self.class_shares * (self.sizes.mean_size() - 1)).sum() / per_shock.sum())

    def mean_repair(self) -> float:
        """Mean repair time over faults, seconds."""
        w = self.class_rates()
        return float(sum(wi * float(r.mean()) for wi, r in zip(w, self.repair)) / w.sum())

    def repair_cdf(self, t) -> np.ndarray:
        """CDF of the repair time of a random fault (classes mixed by their rates)."""
        w = self.class_rates() / self.class_rates().sum()
        return sum(wi * r.cdf_many(t) for wi, r in zip(w, self.repair) if wi > 0)


@dataclasses.dataclass(frozen=True)
class FittedValue:
    """One fitted value with its interval.

    Attributes:
        name: what it is (``"rate GPU"``, ``"lemon share"``).
        estimate: maximum-likelihood value.
        low: lower end of the interval.
        high: upper end.
        unit: unit of the three numbers.
        level: interval level (e.g. 0.9).
        method: how the interval was obtained.
        on_bound: whether the estimate sits on a bound of its domain.
    """

    name: str
    estimate: float
    low: float
    high: float
    unit: str
    level: float
    method: str
    on_bound: bool = False


@dataclasses.dataclass(frozen=True)
class RateClassFit:
    """Poisson mixture of per-node rates.

    Attributes:
        shares: :math:`\\pi_r` (ascending rate order: the last class is the lemons).
        rates: :math:`\\lambda_r`, faults per node-second up.
        theta: ``(logit shares..., log rates...)`` at the MLE.
        covariance: inverse observed information of ``theta``.
        loglik: maximised log-likelihood; loglik_one_class: that of a single rate.
        posterior: per node, probability of each class given its count.
    """

    shares: np.ndarray
    rates: np.ndarray
    theta: np.ndarray
    covariance: np.ndarray
    loglik: float
    loglik_one_class: float
    posterior: np.ndarray

    @property
    def weights(self) -> np.ndarray:
        return self.rates / float(self.shares @ self.rates)

    def draw(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(shares, weights) from the Wald normal of ``theta``."""
        th = self.theta + normal_root(self.covariance) @ rng.standard_normal(self.theta.size)
        shares, rates = _unpack_mixture(th, self.shares.size)
        return shares, rates / float(shares @ rates)


def _unpack_mixture(theta, R):
    z = np.concatenate([[0.0], theta[:R - 1]])
    shares = np.exp(z - z.max())
    shares /= shares.sum()
    return shares, np.exp(theta[R - 1:])


def _mixture_loglik(theta, n, E, R):
    shares, rates = _unpack_mixture(theta, R)
    lp = np.log(shares)[None, :] + stats.poisson.logpmf(n[:, None], rates[None, :] * E[:, None])
    top = lp.max(1, keepdims=True)
    return float((np.log(np.exp(lp - top).sum(1)) + top[:, 0]).sum())


def fit_rate_classes(counts, exposure, *, classes: int = 2, iterations: int = 5000) -> RateClassFit:
    """Fit a Poisson mixture of per-node fault rates by EM (then the observed information).

    Args:
        counts: faults per node.
        exposure: seconds up per node.
        classes: number of rate classes (2: normal and lemon).
        iterations: EM iterations at most.
    """
    n = np.asarray(counts, dtype=float)
    E = np.asarray(exposure, dtype=float)
    if n.shape != E.shape or np.any(E <= 0):
        raise InvalidParameterError("exposure: expected one positive up-time per node, like counts")
    R = int(classes)
    lam = n.sum() / E.sum()
    rates = lam * np.geomspace(0.3, 4.0, R) if R > 1 else np.array([lam])
    shares = np.full(R, 1.0 / R)
    last = -np.inf
    for _ in range(iterations):
        lp = np.log(np.maximum(shares, 1e-300)) + stats.poisson.logpmf(n[:, None], rates * E[:, None])
        top = lp.max(1, keepdims=True)
        r = np.exp(lp - top)
        ll = float((np.log(r.sum(1)) + top[:, 0]).sum())
        r /= r.sum(1, keepdims=True)
        shares = r.mean(0)
        rates = np.maximum((r * n[:, None]).sum(0) / (r * E[:, None]).sum(0), 1e-300)
        if ll - last < 1e-12 * abs(ll):
            break
        last = ll
    order = np.argsort(rates)
    shares, rates, r = shares[order], rates[order], r[:, order]
    theta = np.concatenate([np.log(shares[1:] / shares[0]), np.log(rates)])
    scale = 1.0 / lam                        # Hessian in well-scaled rate units
    theta_s = theta.copy()
    theta_s[R - 1:] += math.log(scale)
    cov = _covariance(lambda th: -_mixture_loglik(th, n, E / scale, R), theta_s)
    one = float(stats.poisson.logpmf(n, lam * E).sum())
    return RateClassFit(shares=shares, rates=rates, theta=theta, covariance=cov,
                        loglik=_mixture_loglik(theta, n, E, R), loglik_one_class=one, posterior=r)


@dataclasses.dataclass(frozen=True)
class FaultModelFit:
    """A :class:`FaultModel` fitted to a log, with the pieces needed for intervals and checks.

    Attributes:
        model: the fitted model (maximum likelihood).
        log: the log it was fitted on.
        shocks: the log's faults grouped into shocks.
        arrivals: the MMPP fit of shock arrivals (rates per second with the nodes' up share).
        up_share: observed share of node-time up, weighted by each node's expected rate-class
            weight (the arrival rates are divided by it).
        rate_classes: the per-node mixture fit.
        repair_fits: phase-type fit of each class (pooled classes share one).
        repair_pooled_classes: classes repaired by the pooled distribution.
        level: interval level.
        shared_counts: (faults repaired with an earlier one of their shock, faults after the
            first of a shock), closed repairs only.
    """

    model: FaultModel
    log: FaultLog
    shocks: Shocks
    arrivals: MMPPFit
    up_share: float
    rate_classes: RateClassFit
    repair_fits: tuple[PhaseTypeFit, ...]
    repair_pooled_classes: tuple[str, ...]
    level: float = 0.9
    shared_counts: tuple[int, int] = (0, 0)

    METHOD = ("Wald (observed information) on log/logit scales; derived values from 2000 joint "
              "draws of that normal; class shares from Dirichlet draws on the shock counts; the "
              "shared-repair share from Jeffreys beta draws")

    def sample_models(self, rng: np.random.Generator, size: int) -> list[FaultModel]:
        """Models drawn from the parameters' approximate sampling distribution (see module docstring)."""
        shock_counts = self.sizes_fit.shocks
        repair_draws = [f.sample_distributions(rng, size) for f in self.repair_fits]
        out = []
        for k in range(size):
            proc = self.arrivals.draw(rng).scaled(1.0 / self.up_share)
            shares = rng.dirichlet(np.maximum(shock_counts, 1e-3))
            pi, w = self.rate_classes.draw(rng)
            repair = tuple(repair_draws[self._repair_index[c]][k] for c in range(len(self.model.classes)))
            k_sh, n_sh = self.shared_counts
            rho = rng.beta(k_sh + 0.5, n_sh - k_sh + 0.5) if n_sh else 0.0
            out.append(dataclasses.replace(self.model, shocks=proc, class_shares=shares,
                                           sizes=self.sizes_fit.draw(rng), rate_class_shares=pi,
                                           rate_class_weights=w, repair=repair, repair_shared=rho))
        return out

    @property
    def sizes_fit(self) -> BurstSizes:
        return self.model.sizes

    @property
    def _repair_index(self) -> list[int]:
        idx = []
        pooled_at = len(self.repair_fits) - 1
        per_class = [c for c in self.model.classes if c not in self.repair_pooled_classes]
        for c in self.model.classes:
            idx.append(per_class.index(c) if c in per_class else pooled_at)
        return idx

    def values(self, *, draws: int = 2000, seed: int = 0) -> list[FittedValue]:
        """Every fitted value with its interval at ``level``, as a table."""
        rng = np.random.default_rng(seed)
        models = self.sample_models(rng, draws)
        lo_q, hi_q = (1 - self.level) / 2, (1 + self.level) / 2
        out: list[FittedValue] = []

        def add(name, est, samples, unit, on_bound=False, method=self.METHOD):
            s = np.asarray(samples, dtype=float)
            out.append(FittedValue(name, float(est), float(np.quantile(s, lo_q)), float(np.quantile(s, hi_q)),
                                   unit, self.level, method, on_bound))

        m = self.model
        rates = np.array([x.class_rates() for x in models]) * DAY * 1000
        for i, c in enumerate(m.classes):
            add(f"rate {c}", m.class_rates()[i] * DAY * 1000, rates[:, i], "per 1000 node-days up")
        add("rate all classes", m.node_rate() * DAY * 1000, rates.sum(1), "per 1000 node-days up")
        pi = np.array([x.rate_class_shares[-1] for x in models])
        mix_bound = bool(m.rate_class_shares.min() < 1e-6 or
                         m.rate_class_weights[-1] < (1 + 1e-6) * m.rate_class_weights[0])
        add("lemon share", m.rate_class_shares[-1], pi, "share of nodes", on_bound=mix_bound)
        ratio = np.array([x.rate_class_weights[-1] / x.rate_class_weights[0] for x in models])
        add("lemon rate ratio", m.rate_class_weights[-1] / m.rate_class_weights[0], ratio, "lemon / normal rate")
        add("shared repair share", m.repair_shared, [x.repair_shared for x in models],
            "faults repaired with an earlier one of their shock", on_bound=self.shared_counts[0] in (0, self.shared_counts[1]))
        add("correlated share", m.correlated_share(), [x.correlated_share() for x in models],
            f"share of faults in a shock after its first (window {m.burst_window / HOUR:g} h)")
        proc = m.shocks
        add("shock rate calm", proc.rates[0] * DAY, [x.shocks.rates[0] * DAY for x in models], "per day (cluster)")
        add("shock rate storm", proc.rates[1] * DAY, [x.shocks.rates[1] * DAY for x in models], "per day (cluster)",
            on_bound=bool(self.arrivals.on_bound))
        add("mean calm spell", 1 / proc.switch[0] / DAY, [1 / x.shocks.switch[0] / DAY for x in models], "days")
        add("mean storm spell", 1 / proc.switch[1] / DAY, [1 / x.shocks.switch[1] / DAY for x in models], "days")
        plo, phi_hi, tlo, thi = m.sizes.intervals(self.level)
        for i, c in enumerate(m.classes):
            ob = m.sizes.bursts[i] == 0 or m.sizes.bursts[i] == m.sizes.shocks[i]
            out.append(FittedValue(f"burst probability {c}", float(m.sizes.burst_probability[i]), float(plo[i]),
                                   float(phi_hi[i]), "per shock", self.level, "Wald (observed information), logit scale",
                                   bool(ob)))
            if m.sizes.bursts[i] > 0:
                mean_extra = 1 / (1 - m.sizes.continuation[i])
                out.append(FittedValue(f"mean extra nodes per burst {c}", float(mean_extra), float(1 / (1 - tlo[i])),
                                       float(1 / (1 - thi[i])), "nodes", self.level,
                                       "Wald (observed information), logit scale", bool(m.sizes.continuation[i] == 0)))
        for f, name in zip(self.repair_fits, self._repair_names()):
            ds = f.sample_distributions(rng, draws)
            add(f"repair mean {name}", float(f.distribution.mean()) / DAY, [float(d.mean()) / DAY for d in ds], "days")
            add(f"repair zero share {name}", float(f.distribution.zero_mass), [float(d.zero_mass) for d in ds],
                "share of repairs", on_bound=f.n_zero == 0)
        meds = [_quantile_mixture(x, 0.5) / DAY for x in models[:200]]
        p90 = [_quantile_mixture(x, 0.9) / DAY for x in models[:200]]
        add("repair median", _quantile_mixture(m, 0.5) / DAY, meds, "days",
            method=self.METHOD.replace("2000", "200"))
        add("repair 90th percentile", _quantile_mixture(m, 0.9) / DAY, p90, "days",
            method=self.METHOD.replace("2000", "200"))
        return out

    def _repair_names(self) -> list[str]:
        per_class = [c for c in self.model.classes if c not in self.repair_pooled_classes]
        names = list(per_class)
        if len(self.repair_fits) > len(per_class):
            names.append("pooled (" + ", ".join(self.repair_pooled_classes) + ")")
        return names


def _quantile_mixture(model: FaultModel, q: float) -> float:
    from scipy import optimize as _opt
    hi = max(model.mean_repair(), 1.0)
    while model.repair_cdf(np.array([hi]))[0] < q:
        hi *= 2
    if model.repair_cdf(np.array([0.0]))[0] >= q:
        return 0.0
    return float(_opt.brentq(lambda x: model.repair_cdf(np.array([x]))[0] - q, 0.0, hi, xtol=1e-6 * hi))


def fit_fault_log(log: FaultLog, *, burst_window: float = HOUR, rate_classes: int = 2,
                  repair_phases: int | None = None, repair_min_per_class: int = 20,
                  repair_form: PhaseForm = PhaseForm.HYPEREXPONENTIAL, level: float = 0.9,
                  seed: int = 0) -> FaultModelFit:
    """Fit the whole fault model to a node-level log: one call.

    Args:
        log: the fault log (:func:`markovsim.availability.read_fault_log`).
        burst_window: faults of one class starting within this many seconds of each other
            form one shock (default one hour; a stated choice, not fitted).
        rate_classes: number of node rate classes (2: normal and lemon).
        repair_phases: phases of each repair distribution (``None``: chosen by AIC, 1 to 4).
        repair_min_per_class: classes with fewer closed repairs share a pooled distribution.
        repair_form: phase-type family of the repair distributions.
        level: interval level of :meth:`FaultModelFit.values`.
        seed: seed of the MMPP fit's starting points.

    Returns:
        A :class:`FaultModelFit`; ``.model`` is the point estimate, ``.values()`` the table of
        fitted values with intervals.
    """
    if log.n_faults < 10:
        raise InvalidParameterError(f"log: {log.n_faults} faults; a fault model needs at least 10")
    shocks = cluster_shocks(log, burst_window)
    C = len(log.classes)
    sizes = fit_burst_sizes(shocks, C)
    arrivals = fit_mmpp(shocks.time, log.window, seed=seed)
    exposure_node = log.window - log.downtime_per_node()
    mix = fit_rate_classes(log.per_node_counts(), exposure_node, classes=rate_classes)
    # share of the fault weight that was up: a shock whose first node is down is lost, and
    # lemons are down more often than their share of nodes
    weight = mix.posterior @ mix.weights
    up_share = float((weight * exposure_node).sum() / (weight.sum() * log.window))
    closed = ~log.censored
    per_class = [c for i, c in enumerate(log.classes) if np.sum((log.fault_class == i) & closed) >= repair_min_per_class]
    pooled = tuple(c for c in log.classes if c not in per_class)
    fits = []
    for c in per_class:
        sel = log.fault_class == log.classes.index(c)
        fits.append(fit_phase_type(log.duration[sel], log.censored[sel], phases=repair_phases, form=repair_form))
    if pooled:
        sel = np.isin(log.fault_class, [log.classes.index(c) for c in pooled])
        if not np.any(sel & closed & (log.duration > 0)):
            sel = np.ones(log.n_faults, bool)
        fits.append(fit_phase_type(log.duration[sel], log.censored[sel], phases=repair_phases, form=repair_form))
    repair = tuple(fits[per_class.index(c)] if c in per_class else fits[-1] for c in log.classes)
    shared, extra = _shared_repairs(log, shocks)
    model = FaultModel(classes=log.classes, nodes=log.nodes, shocks=arrivals.process.scaled(1.0 / up_share),
                       class_shares=sizes.shocks / sizes.shocks.sum(), sizes=sizes,
                       rate_class_shares=mix.shares, rate_class_weights=mix.weights,
                       repair=tuple(f.distribution for f in repair), burst_window=float(burst_window),
                       repair_shared=shared / extra if extra else 0.0)
    return FaultModelFit(model=model, log=log, shocks=shocks, arrivals=arrivals, up_share=up_share,
                         rate_classes=mix, repair_fits=tuple(fits), repair_pooled_classes=pooled, level=level,
                         shared_counts=(shared, extra))


def _shared_repairs(log: FaultLog, shocks: Shocks) -> tuple[int, int]:
    """(faults after the first of their shock repaired with an earlier one, such faults), closed only."""
    shared = extra = 0
    order = np.argsort(log.start, kind="stable")
    seen: dict[int, list[float]] = {}
    for i in order:
        k = int(shocks.members[i])
        if log.censored[i]:
            seen.setdefault(k, [])
            continue
        d = float(log.duration[i])
        if k in seen:
            extra += 1
            tol = lambda x: max(0.01 * x, 900.0)  # noqa: E731
            shared += any(abs(d - x) <= tol(x) for x in seen[k])
            seen[k].append(d)
        else:
            seen[k] = [d]
    return shared, extra


def observed_statistics(log: FaultLog) -> dict[str, float]:
    """The statistics the goodness-of-fit checks compare (on the log as observed)."""
    n = log.per_node_counts()
    top = np.sort(n)[::-1][: max(1, int(round(0.1 * log.nodes)))].sum() / max(n.sum(), 1)
    return {"faults": float(log.n_faults), "per-node dispersion": dispersion_index(n),
            "daily dispersion": dispersion_index(log.daily_counts()), "max nodes down": float(log.max_nodes_down()),
            "top 10% nodes share": float(top), "node-days lost": float(log.duration.sum() / DAY)}
