r"""Checkpoint intervals and the expected time of a checkpointed segment.

A job saves a checkpoint after every ``interval`` :math:`\tau` seconds of work; a save
costs ``save_time`` :math:`C` seconds (the job is stopped while it saves). Failures are
a Poisson process of rate :math:`\lambda = 1/M` (``mtbf`` :math:`M`) that runs while the
job computes, saves or restarts. After a failure the job waits ``downtime`` :math:`D`
(no failures counted: the machine is being replaced), then restarts for
``restart_time`` :math:`R` (failures during the restart force a new restart), then
repeats the segment from the last checkpoint.

**Exact segment time** (renewal argument; Daly 2006, eq. 13). The expected wall time to
complete one segment of :math:`\tau` work plus its save is

.. math::  T(\tau) = (M + D)\, e^{R/M} \left(e^{(\tau + C)/M} - 1\right).

**Exact optimum.** The useful fraction :math:`\tau / T(\tau)` is largest where
:math:`e^{\lambda(\tau + C)}(1 - \lambda\tau) = 1`, that is

.. math::  \tau^\star = M \left(1 + W_0\!\left(-e^{-1 - C/M}\right)\right),

independent of :math:`R` and :math:`D`. For small :math:`c = C/M`,
:math:`\tau^\star/M = \sqrt{2c} - 2c/3 + \sqrt{2}\,c^{3/2}/18 + 2c^2/135 + O(c^{5/2})`.

**Young (1974)**: :math:`\tau_Y = \sqrt{2CM}` (first order; overestimates).
**Daly (2006), higher order**: :math:`\tau_D = \sqrt{2CM}\,[1 + \tfrac13\sqrt{C/2M} +
\tfrac19 (C/2M)] - C` for :math:`C < 2M`, else :math:`M`; it matches the exact series
through :math:`c^{3/2}` and underestimates by :math:`2c^2M/135`.

**First-order expected ETTR** (the approximation of recent cluster-reliability studies,
e.g. Kokolis et al. 2024, "Revisiting reliability in large-scale ML research clusters"):
each failure costs the restart, the downtime and on average half a segment,

.. math::  \mathrm{ETTR} \approx \frac{\tau}{\tau + C}\left(1 - \frac{R + D + (\tau + C)/2}{M}\right).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import _checks
from ._lambertw import one_plus_w0_of_neg_exp, with_w0_pair

__all__ = [
    "young_interval",
    "daly_interval",
    "optimal_interval",
    "expected_segment_time",
    "checkpoint_goodput",
    "optimal_interval_and_goodput",
    "expected_ettr_first_order",
]


def _f(x):
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _segment_args(interval, save_time, mtbf, restart_time, downtime):
    """Check the arguments of a checkpointed segment (named in any error) and make them float."""
    _checks.positive("interval", interval)
    _checks.nonnegative("save_time", save_time)
    _checks.positive("mtbf", mtbf)
    _checks.nonnegative("restart_time", restart_time)
    _checks.nonnegative("downtime", downtime)
    return tuple(map(_f, (interval, save_time, mtbf, restart_time, downtime)))


def young_interval(save_time, mtbf):
    r"""Young's first-order checkpoint interval :math:`\sqrt{2 C M}`.

    Args:
        save_time: time of one checkpoint save :math:`C`, seconds (> 0).
        mtbf: mean time between failures of the job :math:`M`, seconds (> 0).

    Returns:
        Work between checkpoints, seconds (array, broadcast shape).

    >>> import markovsim
    >>> from markovsim.availability import young_interval
    >>> float(young_interval(50.0, 3600.0))
    600.0
    """
    _checks.positive("save_time", save_time)
    _checks.positive("mtbf", mtbf)
    return jnp.sqrt(2.0 * _f(save_time) * _f(mtbf))


def daly_interval(save_time, mtbf):
    r"""Daly's higher-order checkpoint interval (Daly 2006, eq. 37).

    :math:`\sqrt{2CM}\,[1 + \tfrac13\sqrt{C/2M} + \tfrac19 (C/2M)] - C` when
    :math:`C < 2M`, else :math:`M`.

    Args:
        save_time: time of one save :math:`C`, seconds (> 0).
        mtbf: job MTBF :math:`M`, seconds (> 0).

    Returns:
        Work between checkpoints, seconds.
    """
    _checks.positive("save_time", save_time)
    _checks.positive("mtbf", mtbf)
    c, m = _f(save_time), _f(mtbf)
    r = c / (2.0 * m)
    tau = jnp.sqrt(2.0 * c * m) * (1.0 + jnp.sqrt(r) / 3.0 + r / 9.0) - c
    return jnp.where(c < 2.0 * m, tau, m)


def optimal_interval(save_time, mtbf):
    r"""Exact optimal checkpoint interval :math:`M\,(1 + W_0(-e^{-1-C/M}))`.

    Maximises :math:`\tau / T(\tau)` of :func:`expected_segment_time` (for any restart
    time and downtime). Computed with a JAX Lambert-W solver: vectorised, differentiable.

    Args:
        save_time: time of one save :math:`C`, seconds (> 0).
        mtbf: job MTBF :math:`M`, seconds (> 0).

    Returns:
        Work between checkpoints, seconds; always below :func:`young_interval` and just
        above :func:`daly_interval`.

    >>> import markovsim
    >>> from markovsim.availability import optimal_interval
    >>> round(float(optimal_interval(50.0, 3600.0)), 1)
    567.1
    """
    _checks.positive("save_time", save_time)
    _checks.positive("mtbf", mtbf)
    return _optimal(_f(save_time), _f(mtbf))


@jax.jit
def _optimal(c, m):
    return m * one_plus_w0_of_neg_exp(c / m)


def expected_segment_time(interval, save_time, mtbf, restart_time, downtime=0.0):
    r"""Exact expected wall time of one checkpointed segment, :math:`(M+D)e^{R/M}(e^{(\tau+C)/M}-1)`.

    Args:
        interval: work between checkpoints :math:`\tau`, seconds (> 0).
        save_time: save time :math:`C`, seconds (>= 0); failures can strike during a save.
        mtbf: job MTBF :math:`M`, seconds (> 0).
        restart_time: restart time :math:`R`, seconds (>= 0); failures can strike during it.
        downtime: time from a failure to the start of the restart :math:`D`, seconds
            (>= 0); no failures are counted during it.

    Returns:
        Expected wall time, seconds, to complete :math:`\tau` of work and its save.
    """
    tau, c, m, r, d = _segment_args(interval, save_time, mtbf, restart_time, downtime)
    return (m + d) * jnp.exp(r / m) * jnp.expm1((tau + c) / m)


def checkpoint_goodput(interval, save_time, mtbf, restart_time, downtime=0.0):
    r"""Exact long-run useful fraction :math:`\tau / T(\tau)` of a checkpointed job.

    Arguments as :func:`expected_segment_time`. Returns a value in (0, 1).
    """
    t = expected_segment_time(interval, save_time, mtbf, restart_time, downtime)
    return _f(interval) / t


def optimal_interval_and_goodput(save_time, mtbf, restart_time, downtime=0.0):
    r"""The exact optimal interval and the goodput it gives, in one vectorised pass.

    At the optimum :math:`e^{(\tau^\star + C)/M} = 1/(1 - x)` with
    :math:`x = \tau^\star/M = 1 + W_0(-e^{-1-C/M})`, so the goodput of
    :func:`checkpoint_goodput` simplifies to

    .. math::  \frac{\tau^\star}{T(\tau^\star)} = \frac{M (1 - x)}{(M + D)\, e^{R/M}},

    one exponential per configuration. Same values as
    ``checkpoint_goodput(optimal_interval(C, M), C, M, R, D)`` (to rounding), cheaper; works
    under ``jit``, ``vmap`` and ``grad``.

    Args:
        save_time: save time :math:`C`, seconds (> 0).
        mtbf: job MTBF :math:`M`, seconds (> 0).
        restart_time: restart time :math:`R`, seconds (>= 0).
        downtime: downtime before the restart :math:`D`, seconds (>= 0).

    Returns:
        ``(interval, goodput)``: seconds of work between saves, and the long-run useful
        fraction in (0, 1), each of the broadcast shape.

    >>> import markovsim
    >>> from markovsim.availability import optimal_interval_and_goodput
    >>> tau, good = optimal_interval_and_goodput(50.0, 3600.0, 300.0)
    >>> round(float(tau), 1), round(float(good), 4)
    (567.1, 0.7751)
    """
    _checks.positive("save_time", save_time)
    _checks.positive("mtbf", mtbf)
    _checks.nonnegative("restart_time", restart_time)
    _checks.nonnegative("downtime", downtime)
    return _optimal_pair(*map(_f, (save_time, mtbf, restart_time, downtime)))


@jax.jit
def _optimal_pair(c, m, r, d):
    return with_w0_pair(c / m, lambda x, one_minus_x: (m * x, m * one_minus_x / ((m + d) * jnp.exp(r / m))))


def expected_ettr_first_order(interval, save_time, mtbf, restart_time, downtime=0.0):
    r"""First-order expected effective-training-time ratio (see the module docstring).

    :math:`\frac{\tau}{\tau + C}\left(1 - \frac{R + D + (\tau + C)/2}{M}\right)`; it can go
    negative when failures are frequent (the approximation then no longer applies).
    Arguments as :func:`expected_segment_time`.
    """
    tau, c, m, r, d = _segment_args(interval, save_time, mtbf, restart_time, downtime)
    return tau / (tau + c) * (1.0 - (r + d + 0.5 * (tau + c)) / m)
