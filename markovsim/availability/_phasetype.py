r"""Phase-type distributions: repair (and other) times that are not exponential.

A phase-type distribution :math:`\mathrm{PH}(\alpha, S)` is the time to absorption of a
continuous-time Markov chain with transient phases :math:`1..k` started in phase :math:`i`
with probability :math:`\alpha_i` and moving by the sub-generator :math:`S` (non-negative
off-diagonal, row sums :math:`\le 0`). Absorption leaves phase :math:`i` at the exit rate
:math:`s_i = -(S\mathbf 1)_i`. When :math:`\sum_i \alpha_i < 1` the rest is an atom at zero
(e.g. faults cleared at once). With :math:`T` the time,

.. math::
    P(T > t) = \alpha\, e^{S t}\, \mathbf 1, \qquad
    f(t) = \alpha\, e^{S t}\, s, \qquad
    E[T^n] = n!\, \alpha (-S)^{-n} \mathbf 1 .

This representation is what the availability chain expands: a state "down" becomes the
:math:`k` states "down in phase :math:`i`", entered with probabilities :math:`\alpha`, left by
:math:`S` and :math:`s`. The forms fitted here are

* hyperexponential :math:`H_k`: :math:`S = -\mathrm{diag}(\lambda)`, a mixture of exponentials
  (coefficient of variation :math:`\ge 1`; fitted by EM, censoring in the E-step);
* Coxian :math:`C_k`: phases in a row, phase :math:`i` exits at rate :math:`\lambda_i (1-p_i)`
  and moves on at :math:`\lambda_i p_i` (fitted by direct maximum likelihood).

Every :class:`PhaseType` is a small frozen pytree (float64 ``alpha`` and ``S``, per second),
so JAX code can take it through ``jit``, ``vmap`` and ``grad``; :meth:`PhaseType.sample` is
the twin's sampler (numpy, on the host).
"""

from __future__ import annotations

import dataclasses
import enum
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidParameterError, check_nonnegative, check_positive
from .._lazy import lazy_module
from ._common_cause import normal_root

linalg = lazy_module("scipy.linalg")
optimize = lazy_module("scipy.optimize")

__all__ = [
    "PhaseType",
    "PhaseForm",
    "PhaseTypeFit",
    "exponential",
    "hyperexponential",
    "coxian",
    "erlang",
    "fit_phase_type",
]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PhaseType:
    r"""A phase-type distribution :math:`\mathrm{PH}(\alpha, S)` (see the module docstring).

    Attributes:
        alpha: initial phase probabilities, shape ``(k,)``; ``1 - alpha.sum()`` is the atom at 0.
        S: sub-generator, shape ``(k, k)``, per second.

    The quantities (moments, zero mass, exit rates) are JAX arrays, except for a distribution
    whose two leaves are NumPy arrays (the fit's draws): NumPy computes them, on the host.
    """

    alpha: jax.Array
    S: jax.Array

    # -------------------------------------------------------------- JAX-safe quantities
    @property
    def phases(self) -> int:
        return int(jnp.shape(self.alpha)[-1])

    @property
    def exit_rates(self) -> jax.Array:
        """:math:`s = -S\\mathbf 1`, per second."""
        xp = _xp(self)
        return -xp.sum(self.S, axis=-1)

    @property
    def zero_mass(self) -> jax.Array:
        """Probability of a zero time (the atom at 0)."""
        xp = _xp(self)
        return xp.clip(1.0 - xp.sum(self.alpha), 0.0, 1.0)

    def moment(self, n: int = 1) -> jax.Array:
        """:math:`E[T^n]` in seconds to the ``n``."""
        xp = _xp(self)
        x = xp.ones_like(self.alpha)
        for _ in range(n):
            x = xp.linalg.solve(-self.S, x)
        return math.factorial(n) * xp.dot(self.alpha, x)

    def mean(self) -> jax.Array:
        """Mean time, seconds."""
        return self.moment(1)

    def scv(self) -> jax.Array:
        """Squared coefficient of variation :math:`\\mathrm{Var}\\,T / (E\\,T)^2`."""
        m1, m2 = self.moment(1), self.moment(2)
        return m2 / m1**2 - 1.0

    def sf(self, t) -> jax.Array:
        """:math:`P(T > t)` (``t`` in seconds, scalar). Uses ``expm``: keep ``|S| t`` under ~1e5."""
        return jnp.dot(self.alpha, jax.scipy.linalg.expm(self.S * t) @ jnp.ones_like(self.alpha))

    def cdf(self, t) -> jax.Array:
        """:math:`P(T \\le t)`."""
        return 1.0 - self.sf(t)

    # -------------------------------------------------------------- host-side (numpy) helpers
    def numpy(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.alpha, dtype=float), np.asarray(self.S, dtype=float)

    def validate(self) -> "PhaseType":
        """Check ``alpha`` and ``S`` on the host; raise naming the entry."""
        a, S = self.numpy()
        if a.ndim != 1 or S.shape != (a.size, a.size):
            raise ValueError(f"PhaseType: alpha shape {a.shape} and S shape {S.shape} do not match (k,) and (k, k)")
        check_nonnegative("alpha", a)
        if a.sum() > 1 + 1e-9:
            raise InvalidParameterError(f"alpha sums to {a.sum()!r}; expected at most 1 (the rest is an atom at 0)")
        off = S - np.diag(np.diag(S))
        check_nonnegative("S (off-diagonal)", off)
        exit_ = -S.sum(axis=1)
        if np.any(exit_ < -1e-12 * np.abs(np.diag(S)).max()):
            raise InvalidParameterError(f"S row sums {(-exit_).tolist()}: expected <= 0 (exit rates >= 0)")
        try:
            np.linalg.solve(-S, np.ones(a.size))
        except np.linalg.LinAlgError:
            raise InvalidParameterError("S is singular: some phase never reaches absorption") from None
        return self

    def _host(self) -> "_HostTables":
        """NumPy copies of the leaves and the sampler's tables, built once per distribution
        (host-side helpers run thousands of times on the same few distributions)."""
        tables = self.__dict__.get("_host_tables")
        if tables is None:
            tables = _HostTables.of(*self.numpy())
            object.__setattr__(self, "_host_tables", tables)   # a cache: not a field, not a leaf
        return tables

    def sf_many(self, t) -> np.ndarray:
        """:math:`P(T > t)` for an array of times (host, numpy)."""
        h = self._host()
        a, S = h.alpha, h.S
        t = np.asarray(t, dtype=float)
        return np.array([a @ linalg.expm(S * x) @ np.ones(a.size) for x in t.ravel()]).reshape(t.shape) \
            if not h.diagonal else (a * np.exp(np.multiply.outer(t, h.diag))).sum(-1)

    def cdf_many(self, t) -> np.ndarray:
        """:math:`P(T \\le t)` for an array of times (host, numpy)."""
        return 1.0 - self.sf_many(t)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile, seconds (0 when ``q`` falls in the atom at zero)."""
        if not 0 < q < 1:
            raise InvalidParameterError(f"q={q!r}: expected a probability in (0, 1)")
        a, _ = self.numpy()
        if q <= 1 - a.sum():
            return 0.0
        hi = float(self.mean()) or 1.0
        while self.cdf_many(np.array([hi]))[0] < q:
            hi *= 2.0
        return float(optimize.brentq(lambda x: self.cdf_many(np.array([x]))[0] - q, 0.0, hi, xtol=1e-9 * hi))

    def residual(self, elapsed: float) -> "PhaseType":
        """The remaining time of a draw known to exceed ``elapsed`` seconds (still open)."""
        a, S = self.numpy()
        v = a @ linalg.expm(S * elapsed)
        total = v.sum()
        if total <= 0:
            raise InvalidParameterError(f"elapsed={elapsed!r} s: survival underflows to 0")
        return PhaseType(jnp.asarray(v / total), jnp.asarray(S))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent draws, seconds (the twin's sampler: the phase chain simulated)."""
        h = self._host()
        k = h.alpha.size
        out = np.zeros(size)
        state = rng.choice(k + 1, size=size, p=h.start)
        active = state < k
        while active.any():
            idx = np.flatnonzero(active)
            s = state[idx]
            out[idx] += rng.exponential(h.mean_stay[s])
            u = rng.random(idx.size)
            nxt = (u[:, None] > h.cum_jump[s]).sum(axis=1)
            state[idx] = np.minimum(nxt, k)
            active[idx] = state[idx] < k
        return out


@dataclasses.dataclass(frozen=True)
class _HostTables:
    """A distribution's leaves as NumPy arrays, and what its host-side helpers derive from them."""

    alpha: np.ndarray
    S: np.ndarray
    diagonal: bool          # S diagonal: a mixture of exponentials
    diag: np.ndarray        # the diagonal of S
    start: np.ndarray       # first phase, then the atom at zero (index k)
    mean_stay: np.ndarray   # mean time per visit of each phase
    cum_jump: np.ndarray    # cumulative probabilities of the next phase, absorption last

    @classmethod
    def of(cls, a: np.ndarray, S: np.ndarray) -> "_HostTables":
        k = a.size
        p0 = max(1.0 - a.sum(), 0.0)
        start = np.append(a / max(a.sum() + p0, 1e-300), p0 / max(a.sum() + p0, 1e-300))
        jump = np.zeros((k, k + 1))
        for i in range(k):
            row = np.append(S[i].clip(min=0.0), max(-S[i].sum(), 0.0))
            row[i] = 0.0
            jump[i] = row / row.sum()
        diag = np.diag(S).copy()
        return cls(a, S, _is_diagonal(S), diag, start, 1.0 / -diag, np.cumsum(jump, axis=1))


def _is_diagonal(S: np.ndarray) -> bool:
    return bool(np.all(S - np.diag(np.diag(S)) == 0))


# ---------------------------------------------------------------------- constructors


def exponential(rate: float) -> PhaseType:
    """Exponential with ``rate`` per second (one phase)."""
    check_positive("rate", rate, unit="per second")
    return PhaseType(jnp.ones(1), -jnp.asarray([[float(rate)]]))


def hyperexponential(probabilities, rates, *, zero_mass: float = 0.0) -> PhaseType:
    """Mixture of exponentials: with probability ``probabilities[i]`` an exponential of ``rates[i]``.

    Args:
        probabilities: branch probabilities (summing to 1; scaled by ``1 - zero_mass``).
        rates: branch rates, per second.
        zero_mass: probability of a zero time.
    """
    p = np.asarray(probabilities, dtype=float)
    r = np.asarray(rates, dtype=float)
    check_nonnegative("probabilities", p)
    check_positive("rates", r, unit="per second")
    if p.shape != r.shape or abs(p.sum() - 1) > 1e-9:
        raise InvalidParameterError(f"probabilities={p.tolist()}: expected one per rate, summing to 1")
    return PhaseType(jnp.asarray(p * (1 - zero_mass)), jnp.asarray(-np.diag(r)))


def coxian(rates, continue_probabilities, *, zero_mass: float = 0.0) -> PhaseType:
    """Coxian: phase ``i`` lasts Exp(``rates[i]``) and moves on with ``continue_probabilities[i]``.

    Args:
        rates: phase rates, per second (``k`` of them).
        continue_probabilities: ``k - 1`` probabilities of moving to the next phase.
        zero_mass: probability of a zero time.
    """
    r = np.asarray(rates, dtype=float)
    c = np.asarray(continue_probabilities, dtype=float)
    check_positive("rates", r, unit="per second")
    if c.size != r.size - 1 or np.any((c < 0) | (c > 1)):
        raise InvalidParameterError(f"continue_probabilities={c.tolist()}: expected {r.size - 1} values in [0, 1]")
    a, S = _coxian_arrays(r, c, zero_mass)
    return PhaseType(jnp.asarray(a), jnp.asarray(S))


def _coxian_arrays(rates: np.ndarray, cont: np.ndarray, zero_mass: float) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, S)`` of a Coxian, unchecked (:func:`coxian` checks; the fit's likelihood
    calls this thousands of times)."""
    k = rates.size
    S = -np.diag(rates)
    S[np.arange(k - 1), np.arange(1, k)] = rates[:-1] * cont
    alpha = np.zeros(k)
    alpha[0] = 1.0 - zero_mass
    return alpha, S


def erlang(phases: int, rate: float) -> PhaseType:
    """Erlang: ``phases`` exponential phases of ``rate`` each, in a row (SCV ``1/phases``)."""
    return coxian(np.full(phases, float(rate)), np.ones(phases - 1))


# ---------------------------------------------------------------------- fitting


class PhaseForm(enum.Enum):
    """Which phase-type family to fit."""

    HYPEREXPONENTIAL = "hyperexponential"  #: mixture of exponentials, EM
    COXIAN = "coxian"  #: phases in series with exits, direct maximum likelihood


@dataclasses.dataclass(frozen=True)
class PhaseTypeFit:
    """A fitted phase-type distribution with its uncertainty.

    Attributes:
        distribution: the fitted :class:`PhaseType` (per second).
        form: :class:`PhaseForm`.
        phases: number of phases.
        loglik: maximised log-likelihood (densities in 1/s).
        aic: Akaike information criterion.
        bic: Bayesian information criterion.
        n: durations used; n_censored: of which right-censored; n_zero: exact zeros (the atom).
        theta: MLE on the unconstrained scale (logit zero mass, branch logits, log rates).
        covariance: inverse observed information of ``theta`` (Wald); NaN rows where singular.
        on_bound: names of parameters at a bound (e.g. ``"zero_mass"`` when no zeros).
        candidates: ``(phases, loglik, aic, bic)`` of every size tried.
    """

    distribution: PhaseType
    form: PhaseForm
    phases: int
    loglik: float
    aic: float
    bic: float
    n: int
    n_censored: int
    n_zero: int
    theta: np.ndarray
    covariance: np.ndarray
    on_bound: tuple[str, ...] = ()
    candidates: tuple[tuple[int, float, float, float], ...] = ()

    def interval(self, quantity, level: float = 0.9) -> tuple[float, float, float]:
        """Wald interval of ``quantity(distribution)`` by the delta method on ``theta``.

        Args:
            quantity: a function of a :class:`PhaseType` returning a positive float (e.g.
                ``lambda d: float(d.mean())``); the interval is built on its log.
            level: interval level.

        Returns:
            ``(estimate, low, high)``.
        """
        from scipy import stats as _stats

        has_zero = self.n_zero > 0

        def g(th):
            return math.log(quantity(PhaseType(*_unpack_arrays(self.form, self.phases, th, has_zero))))

        est = g(self.theta)
        grad = np.zeros(self.theta.size)
        for i in range(self.theta.size):
            h = 1e-5 * max(abs(self.theta[i]), 1.0)
            e = np.zeros(self.theta.size)
            e[i] = h
            grad[i] = (g(self.theta + e) - g(self.theta - e)) / (2 * h)
        cov = np.where(np.isfinite(self.covariance), self.covariance, 0.0)
        se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
        z = _stats.norm.ppf(0.5 + level / 2)
        return math.exp(est), math.exp(est - z * se), math.exp(est + z * se)

    def sample_distributions(self, rng: np.random.Generator, size: int) -> list[PhaseType]:
        """Draws of the distribution from the Wald normal of ``theta`` (parameter uncertainty).

        The draws are host objects: their ``alpha`` and ``S`` are NumPy arrays, and their
        moments and zero mass are computed by NumPy (they still go through ``jax.jit`` and
        ``vmap`` like any pytree)."""
        thetas = _mvn(rng, self.theta, self.covariance, size)
        return [PhaseType(*_unpack_arrays(self.form, self.phases, t, self.n_zero > 0)) for t in thetas]


def _xp(d: PhaseType):
    """The array module of ``d``'s quantities: NumPy when both leaves are NumPy arrays (the
    draws of :meth:`PhaseTypeFit.sample_distributions`, evaluated thousands of times on the
    host, where one JAX dispatch costs ~50x the arithmetic), else ``jax.numpy``."""
    return np if isinstance(d.alpha, np.ndarray) and isinstance(d.S, np.ndarray) else jnp


def _mvn(rng, mean, cov, size):
    return mean + rng.standard_normal((size, mean.size)) @ normal_root(cov).T


def _softmax(z):
    z = np.concatenate([[0.0], z])
    e = np.exp(z - z.max())
    return e / e.sum()


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _unpack_arrays(form: PhaseForm, k: int, theta: np.ndarray, has_zero: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, S)`` of the parameter vector ``theta``, as NumPy arrays (the likelihood is
    evaluated thousands of times per fit: no JAX arrays and no checks on this path)."""
    i = 0
    zero = 0.0
    if has_zero:
        zero, i = _sigmoid(theta[0]), 1
    if form is PhaseForm.HYPEREXPONENTIAL:
        p = _softmax(theta[i:i + k - 1])
        rates = np.exp(theta[i + k - 1:i + 2 * k - 1])
        alpha = p * (1 - zero) if has_zero else p / p.sum()
        return alpha, -np.diag(rates)
    return _coxian_arrays(np.exp(theta[i:i + k]), _sigmoid(theta[i + k:i + 2 * k - 1]), zero)


def _unpack(form: PhaseForm, k: int, theta: np.ndarray, has_zero: bool) -> PhaseType:
    if form is PhaseForm.HYPEREXPONENTIAL:
        alpha, S = _unpack_arrays(form, k, theta, has_zero)
        return PhaseType(jnp.asarray(alpha), jnp.asarray(S))
    i = 1 if has_zero else 0
    zero = _sigmoid(theta[0]) if has_zero else 0.0
    return coxian(np.exp(theta[i:i + k]), _sigmoid(theta[i + k:i + 2 * k - 1]), zero_mass=zero)  # checked


def _loglik_ph(a: np.ndarray, S: np.ndarray, t: np.ndarray, cens: np.ndarray, n_zero: int) -> float:
    if not (np.all(np.isfinite(S)) and np.all(np.diag(S) < 0)):
        return -np.inf   # a rate under- or overflowed: not a distribution
    zero = max(1.0 - a.sum(), 0.0)
    s = -S.sum(axis=1)
    if _is_diagonal(S):
        lam = -np.diag(S)
        e = np.exp(-np.outer(t, lam))
        dens = (e * (a * lam)).sum(1)
        surv = (e * a).sum(1)
    else:
        w, V = np.linalg.eig(S)
        if np.linalg.cond(V) < 1e8:
            Vi = np.linalg.inv(V)
            left = a @ V                      # (k,)
            right_s, right_1 = Vi @ s, Vi @ np.ones(a.size)
            E = np.exp(np.outer(t, w))
            dens = np.real(E @ (left * right_s))
            surv = np.real(E @ (left * right_1))
        else:
            M = [linalg.expm(S * x) for x in t]
            dens = np.array([a @ m @ s for m in M])
            surv = np.array([a @ m.sum(1) for m in M])
    val = np.where(cens, surv, dens)
    if np.any(val <= 0) or not np.all(np.isfinite(val)):
        return -np.inf
    ll = float(np.log(val).sum())
    if n_zero:
        ll += n_zero * math.log(zero) if zero > 0 else -np.inf
    return ll


def _em_hyperexponential(t, cens, k, iterations=5000, tol=1e-10):
    obs = ~cens
    qs = np.quantile(t, (np.arange(k) + 0.5) / k) if k > 1 else np.array([t.mean()])
    lam = 1.0 / np.maximum(qs, 1e-12 * t.max())
    p = np.full(k, 1.0 / k)
    last = -np.inf
    for _ in range(iterations):
        logf = np.log(np.maximum(p, 1e-300)) + np.where(obs[:, None], np.log(lam), 0.0) - np.outer(t, lam)
        top = logf.max(1, keepdims=True)
        r = np.exp(logf - top)
        norm = r.sum(1, keepdims=True)
        ll = float((np.log(norm) + top).sum())
        r /= norm
        p = r.mean(0)
        lam = (r * obs[:, None]).sum(0) / np.maximum((r * t[:, None]).sum(0), 1e-300)
        lam = np.maximum(lam, 1e-300)
        if ll - last < tol * abs(ll):
            break
        last = ll
    order = np.argsort(-lam)   # fastest phase first: a canonical order
    return p[order], lam[order]


def _hessian(f, x, rel=1e-4):
    n = x.size
    h = rel * np.maximum(np.abs(x), 1.0)
    H = np.zeros((n, n))
    f0 = f(x)
    for i in range(n):
        for j in range(i, n):
            if i == j:
                e = np.zeros(n)
                e[i] = h[i]
                H[i, i] = (f(x + e) - 2 * f0 + f(x - e)) / h[i] ** 2
            else:
                ei, ej = np.zeros(n), np.zeros(n)
                ei[i], ej[j] = h[i], h[j]
                H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * h[i] * h[j])
    return H


def _covariance(neg_ll, theta):
    H = _hessian(neg_ll, theta)
    if not np.all(np.isfinite(H)):
        return np.full_like(H, np.nan)
    w, v = np.linalg.eigh((H + H.T) / 2)
    if np.all(w > 1e-9 * max(abs(w).max(), 1.0)):
        return v @ np.diag(1.0 / w) @ v.T
    cov = np.full_like(H, np.nan)   # flat directions: not identified, reported as such
    return cov


def _fit_one(form, k, t, cens, n_zero, n_total):
    has_zero = n_zero > 0
    scale = float(np.mean(t))          # work in units of the mean (well-conditioned)
    ts = t / scale
    if form is PhaseForm.HYPEREXPONENTIAL:
        p, lam = _em_hyperexponential(ts, cens, k)
        p = np.clip(p, 1e-12, None)
        p = p / p.sum()
        theta = np.concatenate([np.log(p[1:] / p[0]), np.log(lam)])
    else:
        p, lam = _em_hyperexponential(ts, cens, k)  # start a Coxian from the same rates
        theta = np.concatenate([np.log(np.sort(lam)[::-1]), np.zeros(k - 1)])
    zero0 = n_zero / n_total
    if has_zero:
        theta = np.concatenate([[np.log(zero0 / (1 - zero0))], theta])

    def neg_ll(th):
        return -_loglik_ph(*_unpack_arrays(form, k, th, has_zero), ts, cens, n_zero)

    if form is PhaseForm.COXIAN or has_zero:
        # converged tightly: the Wald interval below is read at the optimum, and a loose stop
        # (BFGS's default gradient tolerance) moved it by a few percent between SciPy releases
        simplex = theta.size <= 3
        opts = {"maxiter": 20000, **({"xatol": 1e-10, "fatol": 1e-12} if simplex else {"gtol": 1e-9})}
        res = optimize.minimize(neg_ll, theta, method="Nelder-Mead" if simplex else "BFGS", options=opts)
        if np.isfinite(res.fun) and res.fun <= neg_ll(theta):
            theta = res.x
    ll_scaled = -neg_ll(theta)
    cov = _covariance(neg_ll, theta)
    # back to seconds: rates scale by 1/scale, the log-likelihood by -log(scale) per density
    n_obs = int((~cens).sum())
    ll = ll_scaled - n_obs * math.log(scale)
    i0 = 1 if has_zero else 0
    rate_slice = slice(i0 + k - 1, i0 + 2 * k - 1) if form is PhaseForm.HYPEREXPONENTIAL else slice(i0, i0 + k)
    theta = theta.copy()
    theta[rate_slice] -= math.log(scale)
    return theta, cov, ll


def fit_phase_type(durations, censored=None, *, phases: int | None = None,
                   form: PhaseForm = PhaseForm.HYPEREXPONENTIAL, max_phases: int = 4) -> PhaseTypeFit:
    r"""Fit a phase-type distribution to durations by maximum likelihood, censoring included.

    Observed durations contribute the density, right-censored ones the survival function,
    exact zeros the atom at zero. With ``phases=None`` every size from 1 to ``max_phases`` is
    fitted and the one with the smallest AIC kept (all are listed in ``candidates``).
    Intervals come from the observed information on the unconstrained scale (Wald).

    Args:
        durations: times in seconds (>= 0).
        censored: ``True`` where the duration is only a lower bound (still open at the end).
        phases: number of phases, or ``None`` to choose by AIC.
        form: :class:`PhaseForm`.
        max_phases: largest size tried when choosing.

    Raises:
        InvalidParameterError: negative or non-finite durations, or no uncensored positive one.
    """
    t = np.asarray(durations, dtype=float)
    cens = np.zeros(t.shape, bool) if censored is None else np.asarray(censored, dtype=bool)
    if t.ndim != 1 or cens.shape != t.shape:
        raise ValueError(f"durations shape {t.shape} and censored shape {cens.shape}: expected equal 1-d arrays")
    check_nonnegative("durations", t, unit="s")
    zero = (t == 0) & ~cens
    pos = ~zero
    if not np.any(pos & ~cens):
        raise InvalidParameterError("durations: no uncensored positive duration to fit")
    n_zero = int(zero.sum())
    sizes = [phases] if phases is not None else list(range(1, max_phases + 1))
    fits = []
    for k in sizes:
        if k < 1:
            raise InvalidParameterError(f"phases={k!r}: expected at least 1")
        theta, cov, ll = _fit_one(form, k, t[pos], cens[pos], n_zero, t.size)
        npar = theta.size
        fits.append((k, theta, cov, ll, -2 * ll + 2 * npar, -2 * ll + npar * math.log(t.size)))
    best = min(fits, key=lambda f: f[4])
    k, theta, cov, ll, aic, bic = best
    on_bound = () if n_zero else ("zero_mass",)
    distribution = _unpack(form, k, theta, n_zero > 0)
    a_best = distribution.numpy()[0]
    if form is PhaseForm.HYPEREXPONENTIAL and k > 1 and a_best.min() < 1e-8 * a_best.max():
        on_bound += ("branch probability",)
    return PhaseTypeFit(distribution=distribution, form=form, phases=k, loglik=ll,
                        aic=aic, bic=bic, n=int(t.size), n_censored=int(cens.sum()), n_zero=n_zero,
                        theta=theta, covariance=cov, on_bound=on_bound,
                        candidates=tuple((f[0], f[3], f[4], f[5]) for f in fits))
