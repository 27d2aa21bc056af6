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

**Young (1974)**: :math:`\tau_Y = \sqrt{2CM}` (first order; overestimates: by 34 % at
:math:`C/M = 1/3`). **Daly (2006)**: his first-order estimate is :math:`\sqrt{2CM} - C`;
his higher-order one (eq. 37), :math:`\tau_D = \sqrt{2CM}\,[1 + \tfrac13\sqrt{C/2M} +
\tfrac19 (C/2M)] - C` for :math:`C < 2M`, else :math:`M`, matches the exact series
through :math:`c^{3/2}` and underestimates by :math:`2c^2M/135`.

**First-order expected ETTR**: each failure costs the restart, the downtime and on
average half a segment,

.. math::  \mathrm{ETTR} \approx \frac{\tau}{\tau + C}\left(1 - \frac{R + D + (\tau + C)/2}{M}\right).

With :math:`C = 0` this is the first-order estimate of recent cluster-reliability studies
(Kokolis et al. 2024, "Revisiting reliability in large-scale ML research clusters"),
which leave the save cost out; the factor :math:`\tau/(\tau + C)` and the :math:`C/2` in
the lost half-segment are this project's extension to a blocking save, not theirs.

**When the approximations are trusted.** The first-order formulas warn
(:class:`~markovsim.MarkovsimWarning`, eager calls only) when they are far off the exact
answer computed alongside: :func:`young_interval` and :func:`daly_interval` when the
interval is more than 10 % off :func:`optimal_interval` (Young passes 10 % at
:math:`C/M \approx 0.039`, about 1/26; Daly's higher-order estimate stays within 6 %
everywhere), :func:`expected_ettr_first_order` when it is more than 1 % off
:func:`checkpoint_goodput` (an error of 1 % of goodput changes decisions; the interval's
10 % costs far less goodput, the optimum being flat). Under ``jit`` nothing can warn: the
exact functions are the ones to use there.

**Invalid inputs** raise an :class:`~markovsim.InvalidParameterError` naming the argument
on concrete values; under ``jit`` / ``vmap`` / ``grad`` (tracers, which cannot be checked)
the result is NaN wherever an argument lies outside its domain, never a plausible number.
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


_YOUNG_TRUST = 0.10  #: relative interval error above which the interval formulas warn
_ETTR_TRUST = 0.01  #: relative goodput error above which the first-order ETTR warns


def _f(x):
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _segment_args(interval, save_time, mtbf, restart_time, downtime):
    """Check the arguments of a checkpointed segment (named in any error); float values and
    the mask of valid entries (``True`` when concrete)."""
    return _checks.domain(("interval", interval, "positive"), ("save_time", save_time, "nonnegative"),
                          ("mtbf", mtbf, "positive"), ("restart_time", restart_time, "nonnegative"),
                          ("downtime", downtime, "nonnegative"))


def _save_mtbf(save_time, mtbf):
    return _checks.domain(("save_time", save_time, "positive"), ("mtbf", mtbf, "positive"))


def young_interval(save_time, mtbf):
    r"""Young's first-order checkpoint interval :math:`\sqrt{2 C M}`.

    Warns (:class:`~markovsim.MarkovsimWarning`) when it is more than 10 % above the exact
    optimum :func:`optimal_interval` (:math:`C/M > 0.039`; 34 % at :math:`C/M = 1/3`).

    Args:
        save_time: time of one checkpoint save :math:`C`, seconds (> 0).
        mtbf: mean time between failures of the job :math:`M`, seconds (> 0).

    Returns:
        Work between checkpoints, seconds (array, broadcast shape; NaN under ``jit`` where
        an argument is invalid).

    >>> import markovsim
    >>> from markovsim.availability import young_interval
    >>> float(young_interval(50.0, 3600.0))
    600.0
    """
    (c, m), valid = _save_mtbf(save_time, mtbf)
    tau = _checks.nan_where_invalid(valid, jnp.sqrt(2.0 * c * m))
    if _checks.concrete(tau):
        _checks.warn_if_far("young_interval", tau, _optimal(c, m), _YOUNG_TRUST,
                            "use optimal_interval (exact, as cheap)")
    return tau


def daly_interval(save_time, mtbf):
    r"""Daly's higher-order checkpoint interval (Daly 2006, eq. 37).

    :math:`\sqrt{2CM}\,[1 + \tfrac13\sqrt{C/2M} + \tfrac19 (C/2M)] - C` when
    :math:`C < 2M`, else :math:`M`. Warns when more than 10 % off :func:`optimal_interval`
    (it stays within 6 %).

    Args:
        save_time: time of one save :math:`C`, seconds (> 0).
        mtbf: job MTBF :math:`M`, seconds (> 0).

    Returns:
        Work between checkpoints, seconds.
    """
    (c, m), valid = _save_mtbf(save_time, mtbf)
    r = c / (2.0 * m)
    tau = jnp.sqrt(2.0 * c * m) * (1.0 + jnp.sqrt(r) / 3.0 + r / 9.0) - c
    tau = _checks.nan_where_invalid(valid, jnp.where(c < 2.0 * m, tau, m))
    if _checks.concrete(tau):
        _checks.warn_if_far("daly_interval", tau, _optimal(c, m), _YOUNG_TRUST,
                            "use optimal_interval (exact, as cheap)")
    return tau


def optimal_interval(save_time, mtbf):
    r"""Exact optimal checkpoint interval :math:`M\,(1 + W_0(-e^{-1-C/M}))`.

    Maximises :math:`\tau / T(\tau)` of :func:`expected_segment_time` (for any restart
    time and downtime) over the whole feasible range :math:`\tau > 0`; the optimum is
    always interior (:math:`0 < \tau^\star < M`). Computed with a JAX Lambert-W solver:
    vectorised, differentiable.

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
    (c, m), valid = _save_mtbf(save_time, mtbf)
    return _checks.nan_where_invalid(valid, _optimal(c, m))


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
        Expected wall time, seconds, to complete :math:`\tau` of work and its save
        (``inf`` when it overflows: a restart far longer than the MTBF).
    """
    (tau, c, m, r, d), valid = _segment_args(interval, save_time, mtbf, restart_time, downtime)
    return _checks.nan_where_invalid(valid, (m + d) * jnp.exp(r / m) * jnp.expm1((tau + c) / m))


def checkpoint_goodput(interval, save_time, mtbf, restart_time, downtime=0.0):
    r"""Exact long-run useful fraction :math:`\tau / T(\tau)` of a checkpointed job.

    Arguments as :func:`expected_segment_time`. Returns a value in [0, 1) (0 where the
    segment time overflows), computed as
    :math:`\tfrac{\tau}{M + D}\, e^{-R/M} / \mathrm{expm1}((\tau + C)/M)`.
    """
    (tau, c, m, r, d), valid = _segment_args(interval, save_time, mtbf, restart_time, downtime)
    return _checks.nan_where_invalid(valid, tau / (m + d) * jnp.exp(-r / m) / jnp.expm1((tau + c) / m))


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
        fraction in [0, 1), each of the broadcast shape (NaN under ``jit`` where an argument
        is invalid).

    >>> import markovsim
    >>> from markovsim.availability import optimal_interval_and_goodput
    >>> tau, good = optimal_interval_and_goodput(50.0, 3600.0, 300.0)
    >>> round(float(tau), 1), round(float(good), 4)
    (567.1, 0.7751)
    """
    (c, m, r, d), valid = _checks.domain(("save_time", save_time, "positive"), ("mtbf", mtbf, "positive"),
                                         ("restart_time", restart_time, "nonnegative"),
                                         ("downtime", downtime, "nonnegative"))
    tau, good = _optimal_pair(c, m, r, d)
    return _checks.nan_where_invalid(valid, tau), _checks.nan_where_invalid(valid, good)


@jax.jit
def _optimal_pair(c, m, r, d):
    return with_w0_pair(c / m, lambda x, one_minus_x: (m * x, m * one_minus_x / (m + d) * jnp.exp(-r / m)))


def expected_ettr_first_order(interval, save_time, mtbf, restart_time, downtime=0.0):
    r"""First-order expected effective-training-time ratio (see the module docstring).

    :math:`\frac{\tau}{\tau + C}\left(1 - \frac{R + D + (\tau + C)/2}{M}\right)`. With
    :math:`C = 0` it is the estimate of Kokolis et al. (2024); the save terms are this
    project's extension. Warns when it is more than 1 % off the exact
    :func:`checkpoint_goodput`; where the expansion goes negative (failures too frequent
    for it) the result is NaN, not a negative goodput. Arguments as
    :func:`expected_segment_time`.
    """
    (tau, c, m, r, d), valid = _segment_args(interval, save_time, mtbf, restart_time, downtime)
    value = tau / (tau + c) * (1.0 - (r + d + 0.5 * (tau + c)) / m)
    if _checks.concrete(value):
        exact = tau / (m + d) * jnp.exp(-r / m) / jnp.expm1((tau + c) / m)
        _checks.warn_if_far("expected_ettr_first_order", value, exact, _ETTR_TRUST,
                            "use checkpoint_goodput (exact); negative estimates are returned as NaN")
    return _checks.nan_where_invalid(valid, jnp.where(value >= 0.0, value, jnp.nan))
