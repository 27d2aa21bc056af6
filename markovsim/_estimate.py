r"""One type for every Monte-Carlo estimate: a mean with its confidence interval.

Every simulator in markovsim (the availability twin, the fleet twin, and the engine's path
simulators once they adopt it) reports each figure as an :class:`Estimate`. Two ways to
build one from independent replicas:

* :meth:`Estimate.from_samples`: the mean of per-replica values, with the Student-t
  interval :math:`\bar x \pm t_{1-\alpha/2,\,r-1}\, s/\sqrt r`.
* :meth:`Estimate.from_ratio`: a pooled ratio :math:`\sum_j a_j / \sum_j b_j` over replicas
  (a renewal-reward rate: work per wall second, events per day), with the delta-method
  interval :math:`\hat\rho \pm t\, \mathrm{sd}(a_j - \hat\rho b_j) / (\sqrt r\, \bar b)`.
  The pooled ratio is consistent for the long-run rate; the mean of per-replica ratios
  carries an :math:`O(1/\text{cycles})` bias.

A base module: it imports nothing from markovsim but :mod:`markovsim._errors`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ._errors import InvalidParameterError

__all__ = ["Estimate"]


def _t_quantile(level: float, dof: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2.0, dof))


def _check(level: float, replicas: int) -> None:
    if not 0.0 < float(level) < 1.0:
        raise InvalidParameterError(f"level={level!r}: expected a confidence level in (0, 1), e.g. 0.99")
    if replicas < 2:
        raise InvalidParameterError(f"replicas={replicas}: a confidence interval needs at least 2 replicas")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo mean with its confidence interval ``[low, high]``.

    Attributes:
        mean: the estimate (the sample mean, or the pooled ratio).
        stderr: its standard error.
        low: lower end of the confidence interval.
        high: upper end of the confidence interval.
        level: the confidence level, e.g. 0.99.
        replicas: independent replicas behind it.
    """

    mean: float
    stderr: float
    low: float
    high: float
    level: float = 0.99
    replicas: int = 0

    @classmethod
    def from_samples(cls, samples, *, level: float = 0.99) -> "Estimate":
        """The mean of independent per-replica values with its Student-t interval.

        Args:
            samples: one value per replica, shape ``(replicas,)``.
            level: confidence level in (0, 1).
        """
        x = np.asarray(samples, dtype=float).ravel()
        _check(level, len(x))
        mean = float(x.mean())
        stderr = float(x.std(ddof=1)) / math.sqrt(len(x))
        half = _t_quantile(level, len(x) - 1) * stderr
        return cls(mean, stderr, mean - half, mean + half, float(level), len(x))

    @classmethod
    def from_ratio(cls, numerators, denominators, *, level: float = 0.99) -> "Estimate":
        """The pooled ratio ``sum(numerators) / sum(denominators)`` with its delta-method interval.

        Args:
            numerators: per-replica totals (e.g. durable work, seconds), shape ``(replicas,)``.
            denominators: per-replica totals they are divided by (e.g. wall time, seconds),
                all positive.
            level: confidence level in (0, 1).
        """
        a = np.asarray(numerators, dtype=float).ravel()
        b = np.asarray(denominators, dtype=float).ravel()
        if a.shape != b.shape:
            raise InvalidParameterError(
                f"numerators {a.shape} and denominators {b.shape}: expected one of each per replica")
        _check(level, len(a))
        if not (b > 0).all():
            raise InvalidParameterError("denominators: expected positive per-replica totals")
        ratio = float(a.sum() / b.sum())
        stderr = float((a - ratio * b).std(ddof=1)) / (math.sqrt(len(a)) * float(b.mean()))
        half = _t_quantile(level, len(a) - 1) * stderr
        return cls(ratio, stderr, ratio - half, ratio + half, float(level), len(a))

    @property
    def ci(self) -> tuple[float, float]:
        """``(low, high)``."""
        return (self.low, self.high)

    @property
    def half_width(self) -> float:
        """Half the width of the confidence interval."""
        return 0.5 * (self.high - self.low)

    def contains(self, value: float, *, widen: float = 1.0) -> bool:
        """True when ``value`` lies inside the interval (its half-width times ``widen``)."""
        mid = 0.5 * (self.low + self.high)
        return bool(abs(float(value) - mid) <= self.half_width * widen)

    def __float__(self) -> float:
        return float(self.mean)

    def __format__(self, spec: str) -> str:
        """A format spec formats the mean (``f"{e:.4f}"``); without one, the repr."""
        return format(float(self.mean), spec) if spec else repr(self)
