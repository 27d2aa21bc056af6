r"""Stragglers: a synchronous step waits for its slowest rank.

Two mechanisms, added (a stated approximation; the exact expectation of the maximum of
both would be at most their sum):

* *jitter*: each rank's step time is :math:`T (1 + c\, Z_i)` with i.i.d. standard normal
  :math:`Z_i` and coefficient of variation :math:`c`; the step takes the maximum, so the
  expected delay is :math:`T c\, \mathbb{E}[\max_{i \le N} Z_i]`, which grows like
  :math:`\sqrt{2 \ln N}`;
* *slow nodes*: each node alternates between healthy and slow as a two-state Markov
  process (rate ``slow_rate_per_s`` into slow, ``recovery_rate_per_s`` back); a slow node
  runs ``slowdown`` times slower and the whole step with it. With the stationary
  probability :math:`q` of the slow state (from the engine's ``stationary_distribution``)
  and :math:`K` nodes, the expected delay is :math:`T (s - 1) (1 - (1 - q)^K)`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import log_ndtr

from .._errors import InvalidParameterError, check_integer, check_nonnegative, check_positive
from ..engine import stationary_distribution

__all__ = ["SlowNodes", "expected_max_standard_normal", "slow_node_probability", "straggler_delay"]

_GRID = np.linspace(-12.0, 12.0, 48001)


def expected_max_standard_normal(n) -> np.ndarray:
    r""":math:`\mathbb{E}[\max(Z_1..Z_n)]` of i.i.d. standard normals (quadrature error below
    1e-9): :math:`a + \int_a^\infty (1 - \Phi^n)\,dx` with :math:`a = -12`.

    >>> round(float(expected_max_standard_normal(2)), 6)  # 1/sqrt(pi)
    0.56419
    """
    n = np.asarray(n, dtype=float)
    if np.any(n < 1) or np.any(n != np.floor(n)):
        raise InvalidParameterError(f"n={n!r}: expected integers >= 1")
    x = _GRID  # E[max] = a + int_a^inf (1 - Phi^n), a = -12 (Phi(-12)^n < 1e-32)
    survival = -np.expm1(n[..., None] * log_ndtr(x))
    return x[0] + np.trapezoid(survival, x, axis=-1)


@dataclasses.dataclass(frozen=True)
class SlowNodes:
    """Per-node healthy/slow Markov process (rates per second) and the slowdown factor."""

    slow_rate_per_s: float
    recovery_rate_per_s: float
    slowdown: float


def slow_node_probability(slow: SlowNodes) -> float:
    """Stationary probability that one node is slow."""
    check_nonnegative("slow.slow_rate_per_s", slow.slow_rate_per_s, unit="/s")
    check_positive("slow.recovery_rate_per_s", slow.recovery_rate_per_s, unit="/s")
    if slow.slow_rate_per_s == 0:
        return 0.0
    a, b = slow.slow_rate_per_s, slow.recovery_rate_per_s
    Q = np.array([[-a, a], [b, -b]])
    return float(np.asarray(stationary_distribution(Q))[1])


def straggler_delay(step_time_s: float, ranks: int, *, jitter_cv: float = 0.0,
                    slow: SlowNodes | None = None, ranks_per_node: int = 8) -> float:
    """Expected extra time per synchronous step from stragglers (seconds).

    Args:
        step_time_s: the step time without stragglers, seconds.
        ranks: synchronised ranks :math:`N`.
        jitter_cv: coefficient of variation of one rank's step time.
        slow: the healthy/slow process of a node, or ``None``.
        ranks_per_node: ranks per node (slow nodes are counted per node).
    """
    check_nonnegative("step_time_s", step_time_s, unit="s")
    n = check_integer("ranks", ranks, minimum=1)
    check_nonnegative("jitter_cv", jitter_cv)
    per = check_integer("ranks_per_node", ranks_per_node, minimum=1)
    delay = step_time_s * jitter_cv * float(expected_max_standard_normal(n)) if jitter_cv else 0.0
    if slow is not None:
        if slow.slowdown < 1:
            raise InvalidParameterError(f"slow.slowdown={slow.slowdown!r}: expected >= 1")
        q = slow_node_probability(slow)
        nodes = -(-n // per)
        delay += step_time_s * (slow.slowdown - 1.0) * -np.expm1(nodes * np.log1p(-q))
    return float(delay)
