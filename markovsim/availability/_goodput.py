r"""Goodput of a checkpointed job under a tiered recovery ladder, solved exactly as a
semi-Markov renewal process with the engine's stationary solver.

**Fault episodes.** Fault mode :math:`i` arrives at rate :math:`\lambda_i` per second of
running. A share :math:`q_i` is moved off gracefully by predictive maintenance (a pause of
``migration_time`` plus any wait for a spare). The rest enter tier :math:`t_i`; a tier
:math:`k` fails with probability :math:`1 - p_k`, losing its whole duration
:math:`D_k + R_k`, and hands over to its fallback. The expected visits follow by one pass
up the (acyclic) ladder. A successful tier :math:`k` costs, with :math:`\Lambda` the rate
of interrupting faults (which restart the exposed phases),

.. math::  W + D_k\,e^{\Lambda R_k} + \frac{e^{\Lambda R_k} - 1}{\Lambda},

where :math:`W` is the expected wait for a spare (a chain of the nodes in repair and the
job's phase, solved with GTH, :func:`markovsim.engine.gth`). Degrading faults add
:math:`(1 - \rho_i) T_i` for their undetected slow running, elastic tiers
:math:`(1 - \rho_k) T_k` for the reduced-card running after them.

**Checkpoint renewal.** Episodes whose tier rolls nothing back (or only the step in
flight) pause the job: every second of running carries :math:`\sum \lambda c` seconds of
pause in expectation (the *dilation* :math:`h`). Episodes that roll back to the in-memory
or the persistent checkpoint restart the segment. The job is then a semi-Markov process
over running segments (each a deterministic stretch of work and saves, cut short by the
first rolling-back fault), in-memory recoveries and persistent recoveries. Long-run time
fractions of a semi-Markov process depend only on its embedded jump chain and the mean
holding times: with :math:`\nu` the stationary vector of the jump chain :math:`P`
(GTH) and :math:`m` the mean holding times, the time share of :math:`x` is
:math:`\nu_x m_x / \sum_y \nu_y m_y` and completions of :math:`x` happen
:math:`\nu_x / \sum_y \nu_y m_y` times per second. That gives goodput (completed durable
work per second) and every lost-time share exactly. With one fault mode and one
job-restart tier it reduces to :func:`markovsim.availability.checkpoint_goodput`.

**Numerics.** Every time cost is carried multiplied by :math:`e^{-s}`, with :math:`s` the
largest :math:`\Lambda R_k` of a tier in use, so that a restart whose expected number of
attempts :math:`e^{\Lambda R}` overflows gives a goodput near 0, not NaN; the shares are
ratios and do not see the factor. GTH's anchor (the state eliminated last) is the segment
that makes a checkpoint durable, which every path revisits, so recovery states that no
fault reaches are transient with probability 0 rather than a zero pivot.

**Checks.** Every result carries a :class:`~markovsim.ResultStatus`: ``INVALID_INPUT``
(an input outside its domain, seen under ``jit``), ``NON_FINITE``, ``OUT_OF_RANGE`` (a
share outside [0, 1] or a breakdown that does not sum to 1 within 1e-9) or
``NOT_CONVERGED`` (the spare pool's fixed point), with NaN values; ``OK`` otherwise.

Assumptions (stated, not hidden): fault clocks run only while the job runs (and during
the exposed recovery phases); a fault during a pause or an unexposed phase is not
counted; degraded running is counted as full-speed running plus a pause of the lost
throughput; the spare pool is a birth-death chain of nodes in repair whose arrivals are
the spare-taking faults at their mean rate per second of wall time outside the pool's own
phases (the share of running time there is solved as a fixed point), which treats them as
Poisson: it ignores that they also stop during the other recoveries. The pool's own
phases are the wait for a spare and, after each spare-taking fault, a dead time of the
episode's mean length in which repairs progress but no fault can take the next spare:
every pause booked with that episode (the undetected slow running before it, the failed
tiers on its path, the activation, the downtime and restore, the degraded running and the
lost step after it), held as one exponential phase. Under heavy pool stress (the pool
empty for a large share of faults) this is an approximation: the random-model
cross-check against the twin measures how close.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._compile_cache import QUICK_COMPILE
from .._errors import InvalidParameterError
from .._status import ResultStatus, check_status
from .._units import DAY
from ..engine import gth
from ._checks import concrete
from ._model import AvailabilityModel, Rollback, SaveMode
from ._packed import ROLLBACK_CODE, PackedModel, as_packed, inputs_valid, pack
from ._pool_chain import effective_repair, pool_wait

__all__ = [
    "CAUSES",
    "GoodputResult",
    "analyze",
    "goodput",
    "goodput_sensitivities",
    "time_to_train",
]

#: the causes of lost time, in the order of :attr:`GoodputResult.lost`
CAUSES = ("checkpoint_save", "wasted_progress", "infrastructure_recovery", "restore",
          "waiting_for_spares", "degraded_running")
_INFRA, _RESTORE, _SPARES, _DEGRADED, _STEP = range(5)
#: a result is checked to this absolute tolerance (probabilities in [0, 1], breakdown sums to 1)
_TOL = 1e-9


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GoodputResult:
    """Outputs of :func:`analyze` (fractions of wall-clock time unless stated).

    Conventions: the model's fault rates are per second of *running* (fault clocks stop
    while the job is down); every output here is per unit of *wall-clock* time, except
    :attr:`job_mtbf` (running time). ``markovsim._units.per_wall_rate`` /
    ``per_running_rate`` convert a rate between the two with the availability.

    Attributes:
        goodput: durable useful work per second of wall time, in [0, 1].
        availability: fraction of wall time the job runs (computing or saving, maybe degraded).
        unavailability: fraction of wall time it is down (recovering or waiting), computed directly.
        interruptions_per_day: interrupting faults per day of wall time.
        lost_work_per_interruption: work thrown away per interrupting fault, seconds (``inf``
            when work is lost but no fault interrupts, 0 when neither).
        lost: lost-time fractions of wall time by cause, in the order of :data:`CAUSES`;
            ``goodput + sum(lost) == 1``.
        job_mtbf: mean running time between interrupting faults, seconds (``inf`` without any).
        status: :class:`~markovsim.ResultStatus` code (``int32``; one per batch element):
            ``OK`` when every fraction is finite, in [0, 1] and the breakdown sums to 1;
            otherwise the values are NaN.
    """

    goodput: jnp.ndarray
    availability: jnp.ndarray
    unavailability: jnp.ndarray
    interruptions_per_day: jnp.ndarray
    lost_work_per_interruption: jnp.ndarray
    lost: jnp.ndarray
    job_mtbf: jnp.ndarray
    status: jnp.ndarray

    def breakdown(self) -> dict[str, float]:
        """``{"useful": ..., cause: fraction, ...}`` as Python floats (sums to 1)."""
        out = {"useful": float(self.goodput)}
        out.update({c: float(v) for c, v in zip(CAUSES, self.lost)})
        return out


def _f(x):
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _expm1_over_scaled(x, scale_log):
    r"""``expm1(x) / x * exp(-scale_log)`` (limit ``exp(-scale_log)`` at 0) for ``0 <= x <= scale_log``
    or small ``x``, without overflow for large ``x`` (gradient-safe)."""
    big = x > 1.0
    xb = jnp.where(big, x, 1.0)
    xs = jnp.where(big | (x == 0.0), 1.0, x)
    small = jnp.where(x == 0.0, 1.0, jnp.expm1(xs) / xs) * jnp.exp(-scale_log)
    return jnp.where(big, (jnp.exp(xb - scale_log) - jnp.exp(-scale_log)) / xb, small)


def _one_minus_exp_over(a, length):
    """``(1 - exp(-a L)) / a`` with the limit ``L`` at ``a = 0``."""
    safe = jnp.where(a == 0.0, 1.0, a)
    return jnp.where(a == 0.0, length, -jnp.expm1(-safe * length) / safe)


def _spare_wait(model: PackedModel, birth_rate, recovery):
    r"""Expected wait for a spare per spare-taking repair (seconds), and P(pool empty).

    A CTMC over the nodes in repair :math:`k` and the job's phase: ``U`` (running, or down
    for reasons unrelated to the pool), ``S`` (the dead time of a spare-taking episode, the
    node in hand: no fault arrives, for a mean ``recovery`` + activation seconds) and ``W``
    (waiting for the first of the :math:`s + 1` nodes in repair to return). Arrivals at
    ``birth_rate`` per second of ``U``; repairs at :math:`k\mu`. Keeping the dead time
    after a spare-taking fault in the chain matters: during it the repairs progress but no
    fault can take the next spare, which a Poisson stream in wall time misses; so all of
    it belongs in ``S`` (``recovery`` holds the episode's pauses, see :func:`_episodes`),
    not in ``U``'s mean rate: left in ``U`` (the pauses before and after the recovery,
    the activation), it let the spare-taking faults bunch more than they can, and
    overstated the wait (a pool of 3, 6.7 h repairs, 32 min of slow running booked before
    most spare-taking faults: 180 s per fault against the twin's 123-133 s; 136 s now).

    With ``pool.repair`` (phase-type repair) the chain counts the nodes in repair per phase
    (:func:`markovsim.availability._pool_chain.pool_wait`); ``None`` keeps this
    exponential chain.
    """
    pool = model.spares
    if pool is None:
        return jnp.zeros(()), jnp.zeros(())
    if pool.repair is not None:  # phase-type repair: nodes in repair counted per phase
        wait, p_empty = pool_wait(effective_repair(pool), pool.size, birth_rate, recovery + pool.activation_time)
        return wait + pool.activation_time, p_empty
    s = pool.size
    mu = 1.0 / pool.repair_time
    b = jnp.maximum(birth_rate, 1e-300)
    back = 1.0 / jnp.clip(recovery + pool.activation_time, 1e-300, 1e300)
    n = 2 * (s + 1) + 1  # U_0..U_s, S_0..S_s, W
    U, S_, W = (lambda k: k), (lambda k: s + 1 + k), 2 * (s + 1)
    # every rate in one scatter (entry-by-entry updates unroll into 4 s ops to compile)
    k = np.arange(s + 1)
    up = k[1:]  # a repair returns a node: k -> k - 1, in U and in S
    rows = np.concatenate([U(up), S_(up), U(k), S_(k), [W]])
    cols = np.concatenate([U(up - 1), S_(up - 1), np.append(S_(k[:-1] + 1), W), U(k), [S_(s)]])
    ones = jnp.ones(s + 1)
    vals = jnp.concatenate([up * mu, up * mu, b * ones, back * ones, jnp.reshape((s + 1) * mu, (1,))])
    Q = jnp.zeros((n, n)).at[rows, cols].add(vals)
    Q = Q - jnp.diag(Q.sum(axis=1))
    # bare GTH: the certified traced solver NaNs a chain whose arrival rate sits at the
    # 1e-300 floor (the root search probes a zero running share); this chain has at most
    # 2 s + 3 states, every rate positive on its cycle, and the goodput it feeds is checked
    pi = gth(Q, unroll=False)  # one traced loop: a smaller program to compile
    p_empty = pi[U(s)] / jnp.sum(pi[: s + 1])  # PASTA within U: an arrival finds the pool empty
    return p_empty / ((s + 1) * mu) + pool.activation_time, p_empty


def _episodes(model: PackedModel, running_share=1.0):
    r"""Rates and cost components of pauses, in-memory and persistent rollbacks.

    ``running_share`` converts the spare pool's arrivals from running time to the wall time
    outside waits for a spare.
    Every time cost is returned multiplied by ``scale`` :math:`= e^{-s}`, with :math:`s`
    the largest :math:`\Lambda R_k` of a tier that faults reach: a restart whose expected
    number of attempts :math:`e^{\Lambda R}` overflows stays finite, and the time shares
    (ratios of costs) do not depend on the common factor.
    """
    tiers = model.tiers
    K, M = model.tier_rollback.shape[-1], model.fault_rates.shape[-1]
    lam = _f(model.fault_rates)
    q = _f(model.fault_predicted)
    lam_run = lam * (1.0 - q)
    lam_pred = lam * q
    interrupts = _f(model.fault_interrupts)
    Lam = jnp.sum(lam_run * interrupts)
    has_mem = model.checkpoint.memory_per_persistent > 0

    D = _f(tiers.downtime())
    R = _f(tiers.restart_time(model.cards))
    p = _f(tiers.coverage)
    fallback = _f(model.tier_fallback)
    escalates = fallback >= 0.0
    ladder = jnp.arange(K, dtype=float)

    V = (_f(model.fault_tier)[:, None] == ladder[None, :]).astype(float)  # (M, K): first tier of each mode
    visits = []  # (M,) visits of each tier, final after the pass over the lower tiers (fallbacks point up)
    ends = []
    A = jnp.zeros_like(V)  # (M, K): time in failed tiers before reaching tier k, times the visits
    ends_failed = []
    for k in range(K):
        visits.append(V[:, k])
        to_fallback = (1.0 - p[k]) * (ladder == fallback[k])[None, :]
        A = A + (A[:, k] + V[:, k] * (D[k] + R[k]))[:, None] * to_fallback
        V = V + V[:, k][:, None] * to_fallback
        ends.append(jnp.where(escalates[k], V[:, k] * p[k], V[:, k]))
        ends_failed.append(jnp.where(escalates[k], A[:, k] * p[k], A[:, k]))
    E = jnp.stack(ends, axis=1)  # (M, K): probability that mode i ends at tier k
    # (M, K): time in failed tiers of an episode of mode i, on the paths that end at tier k
    E_failed = jnp.stack(ends_failed, axis=1)
    Vis = jnp.stack(visits, axis=1)  # (M, K): expected visits of tier k by an episode of mode i

    x = Lam * R
    reached = jnp.sum(lam_run[:, None] * Vis, axis=0) > 0.0
    s = jax.lax.stop_gradient(jnp.maximum(jnp.max(jnp.where(reached, x, 0.0)), 0.0))
    scale = jnp.exp(-s)
    x = jnp.where(reached, x, jnp.minimum(x, s))  # tiers no fault reaches weigh 0: keep them finite
    fails = jnp.where(escalates, 1.0 - p, 0.0)
    failed = Vis @ (fails * (D + R)) * scale  # (M,) lost in failed tiers (whole duration)

    spare_nodes = _f(model.fault_spare_nodes)
    takes = _f(model.tier_takes_spare)
    ex = jnp.exp(x - s)
    restore = R * _expm1_over_scaled(x, s)  # (K,)
    rho = _f(model.fault_degraded_throughput)
    tdet = _f(model.fault_detection_time)
    pre_degraded = (1.0 - rho) * tdet * (1.0 - interrupts)  # (M,)
    post_degraded = _f((1.0 - tiers.degraded_throughput) * tiers.degraded_time)
    rollback = _f(model.tier_rollback)
    step_loss = jnp.where(rollback == ROLLBACK_CODE[Rollback.STEP], 0.5, 0.0) * model.step_time
    # spare-taking episodes per running second, and the mean time besides the wait during
    # which such an episode holds the job where no fault arrives: the tier ladder's downtime
    # and restore, and the pauses booked with it (the undetected slow running before it,
    # the degraded running after it, the step lost): the pool's dead time, in which its
    # repairs progress but no fault can take the next spare
    # (the failed tiers' time on the paths that take a spare, not the mode's mean over all paths)
    taking_rate = lam_run[:, None] * spare_nodes[:, None] * takes[None, :]  # (M, K)
    taking = taking_rate * E
    births = jnp.sum(taking) + jnp.sum(lam_pred * spare_nodes)
    down_scaled = (D[None, :] * ex[None, :] + restore[None, :]
                   + (pre_degraded[:, None] + post_degraded[None, :] + step_loss[None, :]) * scale)
    busy = (jnp.sum(taking * down_scaled) / scale + jnp.sum(taking_rate * E_failed)
            + jnp.sum(lam_pred * spare_nodes) * model.migration_time)
    recovery = jnp.where(births > 0.0, busy / jnp.where(births > 0.0, births, 1.0), 1.0)
    wait, p_empty = _spare_wait(model, births * running_share, recovery)

    # cost components C[i, k, cause] of an episode of mode i that ends at tier k (scaled)
    comp = jnp.zeros((M, K, 5))
    comp = comp.at[:, :, _INFRA].set(D[None, :] * ex[None, :] + failed[:, None])
    comp = comp.at[:, :, _RESTORE].set(jnp.broadcast_to(restore[None, :], (M, K)))
    comp = comp.at[:, :, _SPARES].set(wait * scale * spare_nodes[:, None] * takes[None, :])
    comp = comp.at[:, :, _DEGRADED].set((pre_degraded[:, None] + post_degraded[None, :]) * scale)
    comp = comp.at[:, :, _STEP].set(jnp.broadcast_to(step_loss[None, :], (M, K)) * scale)
    flow = lam_run[:, None] * E  # (M, K): rate of episodes of mode i ending at tier k
    weighted = flow[:, :, None] * comp

    # what an episode ending at each tier rolls back: nothing (a pause), to memory, to persistent
    pauses = (rollback == ROLLBACK_CODE[Rollback.NONE]) | (rollback == ROLLBACK_CODE[Rollback.STEP])
    memory = (rollback == ROLLBACK_CODE[Rollback.MEMORY]) & has_mem
    sel = [pauses.astype(float), memory.astype(float), (~pauses & ~memory).astype(float)]
    pause = jnp.einsum("ikc,k->c", weighted, sel[0])
    pred = jnp.zeros(5).at[_INFRA].add(jnp.sum(lam_pred) * model.migration_time * scale)
    pred = pred.at[_SPARES].add(jnp.sum(lam_pred * spare_nodes) * wait * scale)
    pause = pause + pred
    rates = [jnp.sum(flow * c[None, :]) for c in sel]
    costs = [jnp.einsum("ikc,k->c", weighted, c) for c in sel]
    step = jnp.sum(flow * (step_loss * sel[0])[None, :])  # unscaled: step time lost per running second
    return dict(h=scale + jnp.sum(pause), pause=pause, lam_m=rates[1], mem=costs[1],
                lam_p=rates[2], pers=costs[2], Lam=Lam, p_empty=p_empty, wait=wait, scale=scale, step=step,
                births=births, recovery=recovery)


def _mean_cost(total, rate):
    safe = jnp.where(rate == 0.0, 1.0, rate)
    return jnp.where(rate == 0.0, 1.0, jnp.sum(total) / safe)  # any positive holding when unreachable


_POOL_STEPS = 40
#: relative residual of the running share's fixed point above which the result is reported
#: NOT_CONVERGED (the Illinois steps usually reach 1e-15)
_POOL_TOL = 1e-9


def _illinois(h, _start):
    """A root of a decreasing ``h`` on [0, 1] with ``h(0) >= 0 >= h(1)`` (Illinois variant
    of regula falsi: bracketing, superlinear); one evaluation of ``h`` per step."""

    def body(k, st):
        a, ha, b, hb, side = st
        # steps 0 and 1 evaluate the ends; then false position with the Illinois halving
        d = hb - ha
        guess = jnp.where(d == 0.0, 0.5 * (a + b), (a * hb - b * ha) / jnp.where(d == 0.0, 1.0, d))
        x = jnp.where(k == 0, 0.0, jnp.where(k == 1, 1.0, jnp.clip(guess, a, b)))
        hx = h(x)
        first, second = k == 0, k == 1
        keep_b = (hx < 0.0) & ~first & ~second  # the root lies in [a, x]
        keep_a = (hx > 0.0) & ~first & ~second  # the root lies in [x, b]
        hit = (hx == 0.0) & ~first & ~second
        a2 = jnp.where(first | keep_a | hit, x, a)
        ha2 = jnp.where(first | keep_a | hit, hx, jnp.where(keep_b & (side == -1), 0.5 * ha, ha))
        b2 = jnp.where(second | keep_b | hit, x, b)
        hb2 = jnp.where(second | keep_b | hit, hx, jnp.where(keep_a & (side == 1), 0.5 * hb, hb))
        side2 = jnp.where(keep_b, -1, jnp.where(keep_a, 1, side))
        return a2, ha2, b2, hb2, side2

    def step(carry):
        k, st, _ = carry
        new = body(k, st)
        # from step 2 on a step depends on the state alone: a state that a step leaves
        # unchanged stays so, and stopping there returns what the full run would
        moved = jnp.logical_or(k < 2, ~jnp.all(jnp.stack([jnp.all(x == y) for x, y in zip(new, st)])))
        return k + 1, new, moved

    zero = jnp.zeros(())
    start = (zero, zero, zero + 1.0, zero, jnp.zeros((), jnp.int32))
    _, (a, ha, b, hb, _), _ = jax.lax.while_loop(lambda c: (c[0] < _POOL_STEPS) & c[2], step,
                                                 (jnp.zeros((), jnp.int32), start, jnp.array(True)))
    return jnp.where(jnp.abs(ha) <= jnp.abs(hb), a, b)


def _solve(model) -> GoodputResult:
    """The checked result (status and NaN-fill) for one model (an :class:`AvailabilityModel`
    or its :class:`PackedModel`); jit/vmap/grad-safe."""
    model = as_packed(model)
    if model.spares is None:
        result, _ = _solve_given(model, 1.0)
        converged = jnp.array(True)
    else:
        # the pool sees spare-taking faults per second of wall time outside its waits: that
        # share of running time s is the root of h(s) = G(s) - s in [0, 1] (h(0) >= 0 >= h(1), G decreasing), found by
        # the Illinois method (bracketing: the simple iteration s <- G(s) oscillates when the
        # pool saturates) and differentiated implicitly (custom_root)
        share = jax.lax.custom_root(lambda sh: _solve_given(model, sh)[1] - sh, jnp.asarray(1.0),
                                    _illinois, lambda g, y: y / g(jnp.ones_like(y)))
        result, last = _solve_given(model, share)
        converged = jnp.abs(last - share) <= _POOL_TOL * jnp.maximum(jnp.abs(share), 1e-300)
    return _checked(result, inputs_valid(model), converged)


def _checked(r: GoodputResult, valid, converged) -> GoodputResult:
    fractions = jnp.concatenate([jnp.stack([r.goodput, r.availability, r.unavailability]), r.lost])
    finite = jnp.all(jnp.isfinite(fractions)) & jnp.isfinite(r.interruptions_per_day)
    in_range = (jnp.all((fractions >= -_TOL) & (fractions <= 1.0 + _TOL))
                & (jnp.abs(r.goodput + jnp.sum(r.lost) - 1.0) <= _TOL) & (r.interruptions_per_day >= 0.0))
    status = jnp.select([~valid, ~finite, ~in_range, ~converged],
                        [ResultStatus.INVALID_INPUT, ResultStatus.NON_FINITE, ResultStatus.OUT_OF_RANGE,
                         ResultStatus.NOT_CONVERGED], ResultStatus.OK).astype(jnp.int32)
    ok = status == ResultStatus.OK
    nan_fill = lambda v: jnp.where(ok, v, jnp.nan)  # noqa: E731
    return dataclasses.replace(jax.tree_util.tree_map(nan_fill, dataclasses.replace(r, status=None)),
                               status=status)


def _solve_given(model: PackedModel, running_share):
    r"""Goodput of the semi-Markov renewal process (unchecked), and the share of running
    time in the wall time not spent waiting for a spare (what scales the spare pool's
    arrivals: no fault arrives while the job waits, and the pool's chain already stops
    arrivals in its waiting state).

    The embedded jump chain :math:`P` over running segments, in-memory recoveries and
    persistent recoveries is solved with GTH for its stationary vector :math:`\nu`; time
    shares are :math:`\nu_x m_x / \sum_y \nu_y m_y` with :math:`m` the mean holding times.
    The last state (GTH's anchor) is the segment that makes a checkpoint durable, which
    every path revisits: states that no fault reaches (no rollback tier in use) are then
    transient with probability 0, not a zero pivot.
    """
    ep = _episodes(model, running_share)
    cp = model.checkpoint
    n = max(cp.memory_per_persistent, 1)
    has_mem = cp.memory_per_persistent > 0
    background = cp.save_mode is SaveMode.BACKGROUND
    tau_m = cp.interval / n
    c_m = cp.memory_save_time if has_mem else 0.0
    lam_m, lam_p, h, scale = ep["lam_m"], ep["lam_p"], ep["h"], ep["scale"]
    a = lam_m + lam_p

    # running states: (name, length, work part at the start, interference share, next, reward)
    run = []
    for j in range(n):
        length = tau_m + c_m + (cp.save_time if j == n - 1 else 0.0)
        nxt = f"S{j + 1}" if j < n - 1 else ("S0a" if background else "S0")
        if background and j == 0:
            w = jnp.maximum(cp.write_time, 1e-9)
            done = (1.0 - cp.write_interference) * w
            nxt0 = "S1" if n > 1 else "S0a"
            run.append(("S0a", w, w, cp.write_interference, "S0b", True))
            run.append(("S0b", length - done, tau_m - done, 0.0, nxt0, False))
            run.append(("S0", length, tau_m, 0.0, nxt0, False))  # fresh, after a persistent rollback
        else:
            run.append((f"S{j}", length, tau_m, 0.0, nxt, (not background) and j == n - 1))
    anchor = "S0a" if background else f"S{n - 1}"
    names = ["F"] + ([f"M_{r[0]}" for r in run] if has_mem else []) + [r[0] for r in run if r[0] != anchor]
    names.append(anchor)
    idx = {st: i for i, st in enumerate(names)}
    N = len(names)
    P = jnp.zeros((N, N))
    hold = jnp.zeros(N)  # mean holding times, scaled
    ell = jnp.zeros(N)  # running time per visit (running states), unscaled
    work = jnp.zeros(N)
    saving = jnp.zeros(N)
    reward = jnp.zeros(N)
    hold = hold.at[idx["F"]].set(_mean_cost(ep["pers"], lam_p))
    P = P.at[idx["F"], idx["S0"]].set(1.0)
    safe_a = jnp.where(a == 0.0, 1.0, a)
    # all running segments at once (one scatter per kind of entry: a Python loop over the
    # segments traced ~10 scatters per segment, most of a warm CLI run's tracing time)
    rows = np.array([idx[r[0]] for r in run])
    length = jnp.stack([jnp.asarray(r[1], dtype=float) for r in run])
    wpart = jnp.stack([jnp.asarray(r[2], dtype=float) for r in run])
    interf = jnp.stack([jnp.asarray(r[3], dtype=float) for r in run])
    surv = jnp.exp(-a * length)
    hit = -jnp.expm1(-a * length)
    ell_i = _one_minus_exp_over(a, length)
    ell = ell.at[rows].set(ell_i)
    hold = hold.at[rows].set(h * ell_i)
    P = P.at[rows, np.array([idx[r[4]] for r in run])].add(surv)
    P = P.at[rows, idx["F"]].add(jnp.where(a == 0.0, 0.0, lam_p / safe_a) * hit)
    if has_mem:
        mem = np.array([idx[f"M_{r[0]}"] for r in run])
        P = P.at[rows, mem].set(jnp.where(a == 0.0, 0.0, lam_m / safe_a) * hit)
        hold = hold.at[mem].set(_mean_cost(ep["mem"], lam_m))
        P = P.at[mem, rows].set(1.0)
    # share of the running time of an attempt spent in its work part
    wf = _one_minus_exp_over(a, wpart) / ell_i
    work = work.at[rows].set(ell_i * wf * (1.0 - interf))
    saving = saving.at[rows].set(ell_i * (1.0 - wf + wf * interf))
    reward = reward.at[rows].set(jnp.where(np.array([r[5] for r in run]), surv, 0.0))
    # reads the off-diagonal entries: self-loops (one segment per interval) drop out; the
    # loop form compiles in a third less time than the unrolled one and runs as fast here
    nu = gth(P, unroll=False)
    T = nu @ hold
    L_run = nu @ ell
    good = cp.interval * scale * (nu @ reward) / T
    running = scale * L_run / T
    work_time = scale * (nu @ work) / T
    save_time = scale * (nu @ saving) / T

    def split(total, weight):
        s = jnp.sum(weight)
        return total * jnp.where(s == 0.0, 0.0, weight / jnp.where(s == 0.0, 1.0, s))

    pause_c = ep["pause"] * L_run / T
    mem_rows = jnp.array([st.startswith("M_") for st in names], dtype=float)
    mem_c = split((nu * mem_rows) @ hold / T, ep["mem"]) if has_mem else jnp.zeros(5)
    pers_c = split(nu[idx["F"]] * hold[idx["F"]] / T, ep["pers"])
    c = pause_c + mem_c + pers_c
    lost = jnp.stack([
        save_time,
        work_time - good + c[_STEP],
        c[_INFRA],
        c[_RESTORE],
        c[_SPARES],
        c[_DEGRADED],
    ])
    unavailability = c[_INFRA] + c[_RESTORE] + c[_SPARES]
    Lam = ep["Lam"]
    interruptions = Lam * running
    # per interruption: the common factor scale / T cancels (no underflow)
    num = (nu @ work - cp.interval * (nu @ reward)) + ep["step"] * L_run
    den = Lam * L_run
    lost_work = jnp.where(den > 0.0, num / jnp.where(den > 0.0, den, 1.0),
                          jnp.where(num > 0.0, jnp.inf, 0.0))
    safe_lam = jnp.where(Lam == 0.0, 1.0, Lam)
    return GoodputResult(
        goodput=good,
        availability=1.0 - unavailability,
        unavailability=unavailability,
        interruptions_per_day=interruptions * DAY,
        lost_work_per_interruption=lost_work,
        lost=lost,
        job_mtbf=jnp.where(Lam == 0.0, jnp.inf, 1.0 / safe_lam),
        status=jnp.zeros((), jnp.int32),
    ), _unrelated_share(running, c[_SPARES] + jnp.minimum(ep["births"] * running * ep["recovery"], 1.0))


def _unrelated_share(running, pool_time):
    """Running time per second of wall time outside the pool's own phases (waits, and
    recoveries from spare-taking faults)."""
    rest = 1.0 - pool_time
    return jnp.clip(jnp.where(rest > 0.0, running / jnp.where(rest > 0.0, rest, 1.0), 1.0), 0.0, 1.0)


_solve_jit = jax.jit(_solve, compiler_options=QUICK_COMPILE)
_solve_batch = jax.jit(jax.vmap(_solve))


def _batched(model: AvailabilityModel) -> bool:
    return jnp.ndim(model.fault_rates) == 2


def _element(model: AvailabilityModel, index):
    return jax.tree_util.tree_map(lambda v: np.asarray(v)[index], model)


def _invalid_detail(model: AvailabilityModel, index, status) -> str:
    """Name the field of an invalid input at ``index`` (host check of that element)."""
    if status != ResultStatus.INVALID_INPUT or not concrete(model):
        return ""
    try:
        (_element(model, index) if index else model).validate()
    except InvalidParameterError as exc:
        return str(exc)
    return ""


def analyze(model: AvailabilityModel, *, throw: bool = True) -> GoodputResult:
    """Goodput, availability, interruptions per day and the lost-time breakdown.

    Args:
        model: the availability model; or a batch of models, every numeric leaf with one
            leading batch axis (e.g. ``jax.tree_util.tree_map(lambda *v: jnp.stack(v), *models)``),
            solved with ``jax.vmap``.
        throw: if true (default), a concrete model is validated on the host first (an
            :class:`~markovsim.InvalidParameterError` names the field) and a result that
            fails its checks raises after the computation, naming the batch indices. If
            false, nothing is raised for values: check :attr:`GoodputResult.status`.
            Under ``jit`` / ``vmap`` / ``grad`` nothing can be raised either way: the status
            says what went wrong and the values are NaN.

    Returns:
        A :class:`GoodputResult` (JAX scalars, or arrays over the batch).

    Raises:
        InvalidParameterError: a bad input (or a bad structure: fallbacks, tier indices,
            shapes, whatever ``throw``).
        SolverError: a result that is not finite or not in [0, 1], with ``throw=True``.
    """
    return run_checked(model, _solve, _solve_jit, _solve_batch, throw=throw, what="analyze",
                       detail=lambda result, i, st: _invalid_detail(model, i, st))


def run_checked(model: AvailabilityModel, solve, single, batch, *, throw: bool, what: str, detail):
    """The public wrappers' common path: structure checks always, value checks on the host
    with ``throw`` (named errors), ``single(model)`` (compiled; a concrete model padded to
    its buckets), ``batch(model)`` for a batch of models, or ``solve(model)`` traced into the
    caller's program; then :func:`check_status` on the result with ``throw``."""
    model.check_structure()
    batched = _batched(model)
    if throw and not batched and concrete(model):
        model.validate()
    if batched:
        result = batch(model)
    elif concrete(model):  # padded to its buckets: programs shared by models of the same structure
        result = single(pack(model, pad=True))
    else:
        result = solve(model)
    if throw and concrete(result.status):
        check_status(result.status, what=what, detail=lambda i, st: detail(result, i, st))
    return result


def goodput(model: AvailabilityModel, *, throw: bool = True):
    """Long-run goodput (durable useful work per second of wall time) of ``model``.

    Differentiable: ``jax.grad(goodput)(model)`` gives its derivative with respect to
    every numeric input (fault rates, tier phases, coverages, checkpoint settings).
    ``throw`` as in :func:`analyze`; NaN where the result failed its checks.
    """
    return analyze(model, throw=throw).goodput


def goodput_sensitivities(model: AvailabilityModel, *, relative: bool = True) -> dict[str, float]:
    r"""Derivative of goodput with respect to every numeric input, by name.

    The model's fault rates are inputs of their own, so ``cards`` alone moves only the
    communication set-up that grows with the job (its sensitivity is tiny). The effect of
    the job's size is reported as ``"job size (fault rates ∝ cards)"``: every fault rate
    scaled in proportion to the cards along with them, :math:`\sum_i \partial \ln G/\partial
    \ln \lambda_i + \partial \ln G / \partial \ln N` (exact for per-card components, the
    first-order effect of a job whose fault rates grow linearly with it).

    Args:
        model: the availability model (validated on the host).
        relative: if true, the elasticity :math:`\partial \ln G / \partial \ln x`
            (the % change of goodput per % change of the input); else :math:`\partial G/\partial x`
            in goodput per unit of the input (per second, per (1/s), per card, ...).

    Returns:
        ``{"fault_rates[optical single lane]": ..., "tiers[job restart].detection": ..., ...}``.
        An input held at infinity (a tier's bandwidth without state to move) is left out.
    """
    analyze(model)  # validates and checks the value
    g, grads = _value_and_grad(pack(model, pad=True))  # a PackedModel of gradients
    out: dict[str, float] = {}
    names = model.fault_names
    elasticity: dict[str, float] = {}

    def add(label, value, d):
        value, d = float(jnp.asarray(value)), float(jnp.asarray(d))
        if not np.isfinite(value):
            return
        e = 0.0 if d == 0.0 else d * value / float(g)
        elasticity[label] = e
        out[label] = e if relative else d

    for field in ("fault_rates", "fault_degraded_throughput", "fault_detection_time", "fault_spare_nodes",
                  "fault_predicted"):
        for i, nm in enumerate(names):
            add(f"{field}[{nm}]", getattr(model, field)[i], getattr(grads, field)[i])
    for k, t in enumerate(model.tiers):
        for f in dataclasses.fields(t):
            if not f.metadata.get("static"):
                add(f"tiers[{t.name}].{f.name}", getattr(t, f.name), getattr(grads.tiers, f.name)[k])
    for f in dataclasses.fields(model.checkpoint):
        if not f.metadata.get("static"):
            add(f"checkpoint.{f.name}", getattr(model.checkpoint, f.name), getattr(grads.checkpoint, f.name))
    if model.spares is not None:
        for f in ("repair_time", "activation_time"):
            add(f"spares.{f}", getattr(model.spares, f), getattr(grads.spares, f))
    for f in ("cards", "migration_time", "step_time"):
        add(f, getattr(model, f), getattr(grads, f))
    size = sum(elasticity[f"fault_rates[{nm}]"] for nm in names) + elasticity["cards"]
    out["job size (fault rates ∝ cards)"] = size if relative else size * float(g) / float(model.cards)
    return out


def _goodput_and_gradient(model):
    r"""Goodput and its gradient for the sensitivities: the derivative ``jax.grad`` takes
    through :func:`_solve` (whose spare-pool fixed point is differentiated implicitly by
    ``custom_root``), in a smaller program. With the pool's running share :math:`s^*` the
    root of :math:`h(\theta, s) = S(\theta, s) - s` and goodput :math:`G(\theta, s)`,
    :math:`dG/d\theta = \partial_\theta G - (\partial_s G / \partial_s h)\,\partial_\theta h`:
    one forward evaluation at :math:`s^*` and one backward pass for both rows."""
    model = as_packed(model)
    if model.spares is None:
        return jax.value_and_grad(lambda m: _solve_given(m, 1.0)[0].goodput)(model)
    share = jax.lax.stop_gradient(_illinois(lambda sh: _solve_given(model, sh)[1] - sh, None))

    def rows(m, s):
        r, out = _solve_given(m, s)
        return jnp.stack([r.goodput, out - s])

    value, back = jax.vjp(rows, model, share)
    d_model, d_share = jax.vmap(back)(jnp.eye(2))
    k = d_share[0] / d_share[1]
    return value[0], jax.tree_util.tree_map(lambda d: d[0] - k * d[1], d_model)


_value_and_grad = jax.jit(_goodput_and_gradient, compiler_options=QUICK_COMPILE)


def time_to_train(model: AvailabilityModel, work, *, throw: bool = True):
    """Expected wall time (seconds) to complete ``work`` seconds of failure-free training.

    In the long run (``work`` much larger than a checkpoint interval) this is
    ``work / goodput``.
    """
    return jnp.asarray(work, dtype=float) / goodput(model, throw=throw)
