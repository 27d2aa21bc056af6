r"""Common-cause and burst terms: faults that arrive together, and rates that swing.

Two pieces, both fitted by maximum likelihood:

Shocks (compound Poisson)
    Faults of one class whose starts lie within ``burst_window`` of each other (single
    linkage) form one *shock*. A shock of class :math:`c` takes :math:`K` nodes at once, with
    a zero-inflated geometric size

    .. math::  P(K = 1) = 1 - \phi_c, \qquad
               P(K = 1 + j) = \phi_c (1 - \theta_c)\,\theta_c^{\,j-1}, \quad j \ge 1,

    so :math:`\phi_c` is the burst probability and :math:`1/(1-\theta_c)` the mean number of
    extra nodes in a burst. :math:`E[K_c] = 1 + \phi_c/(1-\theta_c)`. The *correlated share*
    of class :math:`c` is :math:`(E[K_c]-1)/E[K_c]`: the faults that came with another.
Modulation (Markov-modulated Poisson process, MMPP)
    Shocks of all classes arrive at rate :math:`\eta_{J(t)}` where :math:`J` is a two-state
    Markov chain (calm, storm) with switching rates :math:`a` (calm to storm) and :math:`b`
    (back). Its likelihood is the forward product

    .. math::  L = \pi_0 \Big[\prod_{i} e^{(Q-\Lambda)\Delta_i}\Lambda\Big] e^{(Q-\Lambda)(T-\tau_n)}\mathbf 1,

    with :math:`Q` the generator of :math:`J`, :math:`\Lambda = \mathrm{diag}(\eta)`,
    :math:`\pi_0` its stationary law, :math:`\Delta_i` the gaps between shocks.

Intervals are Wald intervals from the observed information on log / logit scales.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._errors import InvalidParameterError
from .._lazy import lazy_module
from .._units import DAY
from ._logs import FaultLog

optimize = lazy_module("scipy.optimize")
stats = lazy_module("scipy.stats")

__all__ = [
    "Shocks",
    "cluster_shocks",
    "BurstSizes",
    "fit_burst_sizes",
    "MarkovModulatedPoisson",
    "MMPPFit",
    "fit_mmpp",
]


@dataclasses.dataclass(frozen=True, eq=False)
class Shocks:
    """Faults grouped into shocks (see the module docstring).

    Attributes:
        time: start of each shock (its first fault), seconds, sorted.
        fault_class: class index of each shock.
        size: faults in each shock.
        members: for each fault of the log, the index of its shock.
        window: the linkage window, seconds.
    """

    time: np.ndarray
    fault_class: np.ndarray
    size: np.ndarray
    members: np.ndarray
    window: float


def cluster_shocks(log: FaultLog, window: float) -> Shocks:
    """Group the faults of each class whose starts lie within ``window`` seconds of the previous one.

    Args:
        log: the fault log.
        window: linkage window, seconds (0: only faults starting at the same instant).
    """
    if not np.isfinite(window) or window < 0:
        raise InvalidParameterError(f"burst_window={window!r} s: expected a time >= 0")
    member = np.full(log.n_faults, -1)
    times, classes, sizes = [], [], []
    for c in range(len(log.classes)):
        idx = np.flatnonzero(log.fault_class == c)
        if idx.size == 0:
            continue
        idx = idx[np.argsort(log.start[idx], kind="stable")]
        gaps = np.diff(log.start[idx])
        new = np.concatenate([[True], gaps > window])
        gid = np.cumsum(new) - 1
        base = len(times)
        member[idx] = base + gid
        firsts = idx[new]
        times.extend(log.start[firsts])
        classes.extend([c] * len(firsts))
        sizes.extend(np.bincount(gid))
    order = np.argsort(times, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Shocks(time=np.asarray(times, float)[order], fault_class=np.asarray(classes, int)[order],
                  size=np.asarray(sizes, int)[order], members=rank[member] if member.size else member,
                  window=float(window))


@dataclasses.dataclass(frozen=True)
class BurstSizes:
    """Zero-inflated geometric shock sizes per class.

    Attributes:
        burst_probability: :math:`\\phi_c`, per class.
        continuation: :math:`\\theta_c`, per class (0 where no burst was seen).
        shocks: shocks seen per class; bursts: of which with more than one fault;
        extra: extra faults (beyond the first) per class.
    """

    burst_probability: np.ndarray
    continuation: np.ndarray
    shocks: np.ndarray
    bursts: np.ndarray
    extra: np.ndarray

    def mean_size(self) -> np.ndarray:
        """:math:`E[K_c]`."""
        return 1.0 + self.burst_probability / (1.0 - self.continuation)

    def sample(self, rng: np.random.Generator, c: np.ndarray) -> np.ndarray:
        """Sizes of shocks of classes ``c``."""
        c = np.asarray(c, dtype=int)
        burst = rng.random(c.size) < self.burst_probability[c]
        extra = rng.geometric(np.clip(1.0 - self.continuation[c], 1e-12, 1.0))
        return 1 + np.where(burst, extra, 0)

    def draw(self, rng: np.random.Generator) -> "BurstSizes":
        """Parameters drawn from their Wald normals on the logit scale (bounds stay put)."""
        phi, th = self.burst_probability.copy(), self.continuation.copy()
        ok = (self.bursts > 0) & (self.bursts < self.shocks)
        z = np.log(phi[ok] / (1 - phi[ok])) + rng.standard_normal(ok.sum()) / np.sqrt(
            self.shocks[ok] * phi[ok] * (1 - phi[ok]))
        phi[ok] = 1 / (1 + np.exp(-z))
        ok2 = (self.bursts > 0) & (th > 0)
        z = np.log(th[ok2] / (1 - th[ok2])) + rng.standard_normal(ok2.sum()) / np.sqrt(self.bursts[ok2] * th[ok2])
        th[ok2] = 1 / (1 + np.exp(-z))
        return dataclasses.replace(self, burst_probability=phi, continuation=th)

    def intervals(self, level: float = 0.9) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Wald intervals (logit scale) of ``burst_probability`` and ``continuation``: (lo, hi, lo, hi)."""
        z = stats.norm.ppf(0.5 + level / 2)
        phi, th = self.burst_probability, self.continuation

        def logit_ci(p, se, ok):
            lo, hi = p.copy(), p.copy()
            x = np.log(p[ok] / (1 - p[ok]))
            lo[ok] = 1 / (1 + np.exp(-(x - z * se[ok])))
            hi[ok] = 1 / (1 + np.exp(-(x + z * se[ok])))
            return lo, hi

        ok = (self.bursts > 0) & (self.bursts < self.shocks)
        se = np.where(ok, 1 / np.sqrt(np.maximum(self.shocks * phi * (1 - phi), 1e-300)), 0.0)
        plo, phi_hi = logit_ci(phi, se, ok)
        ok2 = (self.bursts > 0) & (th > 0)
        se2 = np.where(ok2, 1 / np.sqrt(np.maximum(self.bursts * th, 1e-300)), 0.0)
        tlo, thi = logit_ci(th, se2, ok2)
        return plo, phi_hi, tlo, thi


def fit_burst_sizes(shocks: Shocks, n_classes: int) -> BurstSizes:
    """Maximum-likelihood zero-inflated geometric sizes per class (closed form).

    :math:`\\hat\\phi_c` = bursts / shocks; :math:`\\hat\\theta_c = 1 - B_c / \\sum_b (K_b - 1)`.
    """
    n = np.bincount(shocks.fault_class, minlength=n_classes).astype(float)
    big = shocks.size > 1
    b = np.bincount(shocks.fault_class[big], minlength=n_classes).astype(float)
    extra = np.bincount(shocks.fault_class, weights=shocks.size - 1.0, minlength=n_classes)
    phi = np.divide(b, n, out=np.zeros(n_classes), where=n > 0)
    theta = np.where(b > 0, 1.0 - np.divide(b, extra, out=np.ones(n_classes), where=extra > 0), 0.0)
    return BurstSizes(burst_probability=phi, continuation=theta, shocks=n, bursts=b, extra=extra)


@dataclasses.dataclass(frozen=True)
class MarkovModulatedPoisson:
    """A two-state Markov-modulated Poisson process (rates per second).

    Attributes:
        rates: arrival rate in each state (calm first), per second.
        switch: ``(a, b)``: calm -> storm and storm -> calm rates, per second.
    """

    rates: np.ndarray
    switch: np.ndarray

    def stationary(self) -> np.ndarray:
        a, b = self.switch
        return np.array([b, a]) / (a + b) if a + b > 0 else np.array([1.0, 0.0])

    def mean_rate(self) -> float:
        """Long-run arrival rate, per second."""
        return float(self.stationary() @ self.rates)

    def scaled(self, factor: float) -> "MarkovModulatedPoisson":
        return dataclasses.replace(self, rates=self.rates * factor)

    def sample_times(self, rng: np.random.Generator, duration: float, p0=None) -> np.ndarray:
        """Arrival times in ``[0, duration]``, the state at 0 drawn from ``p0`` (default stationary)."""
        p0 = self.stationary() if p0 is None else np.asarray(p0, dtype=float)
        s = int(rng.random() < p0[1])
        t, out = 0.0, []
        while t < duration:
            rate_out = self.switch[s]
            stay = rng.exponential(1.0 / rate_out) if rate_out > 0 else np.inf
            end = min(t + stay, duration)
            k = rng.poisson(self.rates[s] * (end - t))
            out.append(t + (end - t) * rng.random(k))
            t, s = end, 1 - s
        return np.sort(np.concatenate(out)) if out else np.zeros(0)


@dataclasses.dataclass(frozen=True)
class MMPPFit:
    """A fitted MMPP with its uncertainty.

    Attributes:
        process: the fitted :class:`MarkovModulatedPoisson`.
        theta: log of ``(rate_calm, rate_storm, a, b)`` in per-day units.
        covariance: inverse observed information of ``theta``.
        loglik: maximised log-likelihood; poisson_loglik: that of a plain Poisson process.
        lr_pvalue: likelihood-ratio p-value of MMPP against Poisson (chi-square, 3 degrees of
            freedom; conservative at the boundary).
        end_state: filtered probabilities of (calm, storm) at the end of the window.
        on_bound: parameters at a bound.
    """

    process: MarkovModulatedPoisson
    theta: np.ndarray
    covariance: np.ndarray
    loglik: float
    poisson_loglik: float
    lr_pvalue: float
    end_state: np.ndarray
    on_bound: tuple[str, ...] = ()

    def draw(self, rng: np.random.Generator) -> MarkovModulatedPoisson:
        """A process drawn from the Wald normal of ``theta``."""
        th = self.theta + normal_root(self.covariance) @ rng.standard_normal(self.theta.size)
        return _unpack(th)


def normal_root(cov: np.ndarray) -> np.ndarray:
    r"""A square root :math:`R` of a Wald covariance (:math:`R R^\top = \Sigma`), the same on
    every machine: the Cholesky factor (unique) where :math:`\Sigma` is positive definite with
    its smallest eigenvalue above :math:`10^{-10}` of the largest, else the eigen-decomposition
    with each eigenvector's sign fixed (its first largest component positive) and negative eigenvalues
    clipped to 0. Non-finite entries (parameters not
    identified) count as 0. Seeded draws ``mean + R z`` then do not depend on the LAPACK
    build: an eigenvector's sign is arbitrary, and flipping it changed the 2,000 seeded draws
    and so the interval quantiles by up to 3 % between NumPy releases."""
    cov = np.where(np.isfinite(cov), cov, 0.0)
    cov = (cov + cov.T) / 2
    w, v = np.linalg.eigh(cov)
    if w.size and w.min() > 1e-10 * max(w.max(), 1e-300):  # well inside the definite cone
        return np.linalg.cholesky(cov)
    # the sign: the first component within rounding of the largest in size is positive (ties
    # between a component and its negative, common in symmetric covariances, go to the first)
    mag = np.abs(v)
    pivot = (mag >= (1 - 1e-8) * mag.max(axis=0)).argmax(axis=0)
    v = v * np.where(v[pivot, np.arange(v.shape[1])] < 0, -1.0, 1.0)
    return v * np.sqrt(np.clip(w, 0.0, None))


def _unpack(theta) -> MarkovModulatedPoisson:
    e = np.exp(np.asarray(theta, dtype=float)) / DAY
    rates = np.sort(e[:2]) if e[0] > e[1] else e[:2]
    switch = e[2:] if e[0] <= e[1] else e[2:][::-1]
    return MarkovModulatedPoisson(rates=rates, switch=switch)


def _mmpp_loglik(theta, gaps_d, tail_d, return_end=False):
    eta = np.exp(theta[:2])
    a, b = np.exp(theta[2:])
    Q = np.array([[-a, a], [b, -b]])
    D = Q - np.diag(eta)
    w, V = np.linalg.eig(D)
    w, V = np.real(w), np.real(V)
    Vi = np.linalg.inv(V)
    p = np.array([b, a]) / (a + b)
    ll = 0.0
    E = np.einsum("ij,nj,jk->nik", V, np.exp(np.outer(gaps_d, w)), Vi)
    # the scaled forward filter, on Python floats: two states, hundreds of gaps and thousands
    # of likelihood calls per fit, where NumPy's per-call overhead on 2-vectors dominated
    e0, e1 = float(eta[0]), float(eta[1])
    p0, p1 = float(p[0]), float(p[1])
    log = math.log
    for m00, m01, m10, m11 in E.reshape(-1, 4).tolist():
        q0 = (p0 * m00 + p1 * m10) * e0
        q1 = (p0 * m01 + p1 * m11) * e1
        s = q0 + q1
        if not s > 0:
            return (-np.inf, None) if return_end else -np.inf
        ll += log(s)
        p0, p1 = q0 / s, q1 / s
    p = np.array([p0, p1])
    last = p @ (V @ np.diag(np.exp(w * tail_d)) @ Vi)
    s = last.sum()
    if not s > 0:
        return (-np.inf, None) if return_end else -np.inf
    ll += math.log(s)
    return (ll, last / s) if return_end else ll


def fit_mmpp(times, duration: float, *, starts: int = 6, seed: int = 0) -> MMPPFit:
    """Fit a two-state MMPP to arrival times in ``[0, duration]`` by direct maximum likelihood.

    Several starting points are tried (calm/storm ratios and sojourns from days to months);
    the best optimum is kept. Rates are reported per second.

    Args:
        times: arrival times, seconds, sorted.
        duration: observation window, seconds.
        starts: number of starting points.
        seed: seed of the random part of the starting points.
    """
    t = np.sort(np.asarray(times, dtype=float)) / DAY
    T = float(duration) / DAY
    if t.size < 5:
        raise InvalidParameterError(f"times: {t.size} arrivals; an MMPP needs at least 5")
    gaps = np.diff(np.concatenate([[0.0], t]))
    tail = T - t[-1]
    rbar = t.size / T
    pois = t.size * math.log(rbar) - rbar * T
    rng = np.random.default_rng(seed)

    def neg(th):
        v = _mmpp_loglik(th, gaps, tail)
        return -v if np.isfinite(v) else 1e300

    best = None
    for k in range(starts):
        ratio = [3.0, 10.0, 30.0][k % 3] * math.exp(0.2 * rng.standard_normal())
        calm = [60.0, 20.0][k // 3 % 2] * math.exp(0.3 * rng.standard_normal())
        storm = calm / 4
        lo = rbar / (1 + (ratio - 1) * storm / (calm + storm))
        th0 = np.log([lo, lo * ratio, 1 / calm, 1 / storm])
        res = optimize.minimize(neg, th0, method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-7, "fatol": 1e-9})
        if best is None or res.fun < best.fun:
            best = res
    theta = best.x
    if theta[0] > theta[1]:
        theta = theta[[1, 0, 3, 2]]
    ll, end = _mmpp_loglik(theta, gaps, tail, return_end=True)
    H = _num_hessian(lambda x: -_mmpp_loglik(x, gaps, tail), theta)
    w, v = np.linalg.eigh((H + H.T) / 2)
    cov = v @ np.diag(1 / w) @ v.T if np.all(w > 1e-9) else np.full((4, 4), np.nan)
    on_bound = ("rates equal (no modulation)",) if abs(theta[1] - theta[0]) < 1e-3 else ()
    lr = max(2 * (ll - pois), 0.0)
    return MMPPFit(process=_unpack(theta), theta=theta, covariance=cov, loglik=ll, poisson_loglik=pois,
                   lr_pvalue=float(stats.chi2.sf(lr, 3)), end_state=end, on_bound=on_bound)


def _num_hessian(f, x, h=1e-4):
    n = x.size
    H = np.zeros((n, n))
    f0 = f(x)
    for i in range(n):
        for j in range(i, n):
            ei, ej = np.zeros(n), np.zeros(n)
            ei[i], ej[j] = h, h
            if i == j:
                H[i, i] = (f(x + ei) - 2 * f0 + f(x - ei)) / h**2
            else:
                H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * h * h)
    return H
