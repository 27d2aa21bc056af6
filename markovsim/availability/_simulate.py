r"""The Monte-Carlo twin: a discrete-time-step simulation of a training job (Sim2Availability
style, S-SIM-3), the independent check of the analytic goodput.

Time advances in steps of ``dt`` seconds. In each step of running a fault strikes with
probability :math:`1 - e^{-\Lambda\,dt}` (:math:`\Lambda` the total fault rate); instead
of visiting every fault-free step, the simulator samples the geometric number of steps
to the next fault and moves the checkpoint schedule through them at once (whole
checkpoint cycles arithmetically). At a fault it samples the mode, predictive
maintenance, each tier's success, faults during the exposed recovery phases (which
restart them), the spare pool (actual repair timers, exponential or drawn from the pool's
phase-type repair distribution), the lost partial step, and applies
the rollback. ``lax.scan`` runs over chunks of fault events inside a run-until-done ``while_loop``,
``jax.vmap`` over replicas.

A mode with ``spare_nodes > 0`` takes one node from the pool per repair.

It follows the modelling assumptions of :mod:`markovsim.availability` (fault clocks run
in running time; degraded running is booked as a pause of the lost throughput) but none
of its formulas: no renewal argument, no dilation, no expected costs, and the spare pool
is simulated rather than approximated by a birth-death chain.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidParameterError, SolverError, check_integer, check_nonnegative, check_positive
from .._estimate import Estimate
from .._status import ResultStatus
from .._random import uniforms
from .._units import DAY
from ._model import AvailabilityModel, Rollback, SaveMode
from ._pool_chain import effective_repair

__all__ = ["SimulationResult", "simulate"]

_RNG = "threefry2x32"  # counter-based, reproducible across backends
_CHUNK = 8  # events per scan chunk inside the run-until-done loop
_PREDRAWN = 3  # exposed-phase attempts drawn with the event (more go to a loop)
_DRAWS = 6 + _PREDRAWN  # uniforms per event before the tiers' coverage draws
#: first stream (third counter word) of the phase-type repair draws, apart from the retry loop's
_REPAIR_STREAM = 0x40000000
#: the twin refuses models whose recoveries need more than about e^this attempts each
_MAX_LOG_ATTEMPTS = 30.0


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """Estimates from :func:`simulate`, each an :class:`~markovsim.availability.Estimate`
    (mean, standard error and 99 % confidence interval over the replicas).

    Attributes:
        goodput: durable work / wall time pooled over replicas, each replica stopped at its
            first durable save after the horizon.
        unavailability: fraction of wall time spent down (recovering or waiting), pooled.
        interruptions_per_day: interrupting faults per day of wall time, pooled.
        replica_goodput: per-replica goodput, shape ``(replicas,)``.
        replica_steps: simulated steps (wall time / dt) summed over replicas.
        status: :class:`~markovsim.ResultStatus`: ``OK`` when every replica completed a
            durable checkpoint and every estimate is finite and within [0, 1];
            ``NOT_CONVERGED`` when a replica completed none (lengthen the horizon).
    """

    goodput: Estimate
    unavailability: Estimate
    interruptions_per_day: Estimate
    replica_goodput: np.ndarray
    replica_steps: float
    status: ResultStatus = ResultStatus.OK


class _Credit(NamedTuple):
    """The goodput estimator's stopping point: the first durable save at or after the horizon."""

    work: jax.Array  #: durable work then (seconds)
    time: jax.Array  #: its wall time (-1 until reached)


class _Snapshot(NamedTuple):
    """The other estimators' stopping point: the first fault event that starts after the horizon."""

    down: jax.Array  #: wall time spent down until then
    interruptions: jax.Array  #: interrupting faults until then
    time: jax.Array  #: its wall time (-1 until reached)


class _Clock(NamedTuple):
    """Where a replica stands in its checkpoint schedule."""

    time: jax.Array  #: wall time (seconds)
    work: jax.Array  #: durable work credited so far (seconds)
    segment: jax.Array  #: index of the running segment
    position: jax.Array  #: running time already spent in it
    credit: _Credit


class _TwinState(NamedTuple):
    """The state one replica carries from fault event to fault event."""

    clock: _Clock
    spares_back: jax.Array  #: return time of each spare slot (-inf: free)
    interruptions: jax.Array  #: interrupting faults so far
    down: jax.Array  #: wall time spent down so far
    snapshot: _Snapshot
    events: jax.Array  #: fault events drawn (the counter of the random stream)


def _segments(model: AvailabilityModel):
    """The running segments of the checkpoint schedule (the same schedule the analytic
    model describes): lengths, successors, which completion makes work durable."""
    cp = model.checkpoint
    n = max(cp.memory_per_persistent, 1)
    has_mem = cp.memory_per_persistent > 0
    tau_m = cp.interval / n
    c_m = cp.memory_save_time if has_mem else 0.0
    lengths, nxt, reward = [], [], []
    if cp.save_mode is SaveMode.BLOCKING:
        for j in range(n):
            lengths.append(tau_m + c_m + (cp.save_time if j == n - 1 else 0.0))
            nxt.append((j + 1) % n)
            reward.append(j == n - 1)
        fresh, steady = 0, 0
    else:
        # 0: pending window (write running), 1: rest of first segment, 2: fresh first segment,
        # 3..: segments 1..n-1
        w = jnp.maximum(cp.write_time, 1e-9)
        first = tau_m + c_m + (cp.save_time if n == 1 else 0.0)
        after_first = 3 if n > 1 else 0
        lengths += [w, first - (1.0 - cp.write_interference) * w, first]
        nxt += [1, after_first, after_first]
        reward += [True, False, False]
        for j in range(1, n):
            lengths.append(tau_m + c_m + (cp.save_time if j == n - 1 else 0.0))
            nxt.append(j + 3 if j < n - 1 else 0)
            reward.append(False)
        fresh, steady = 2, 0
    L = jnp.stack([jnp.asarray(x, dtype=float) for x in lengths])
    cycle = jnp.sum(L) - (L[2] if cp.save_mode is SaveMode.BACKGROUND else 0.0)
    # offset of the credit inside a steady cycle started at `steady`
    credit_offset = cycle if cp.save_mode is SaveMode.BLOCKING else L[0]
    return (L, jnp.array(nxt), jnp.array(reward), fresh, steady, cycle, credit_offset)


def _phase_type_draw(ph, u, key_words, count, which):
    """One draw of the phase-type time ``ph`` (seconds): ``u`` picks the first phase (or the
    atom at zero), then the phase chain runs jump by jump, each jump with two uniforms of
    its own stream of the event's counter ``count`` (``_REPAIR_STREAM + 2 j + which``)."""
    k = ph.alpha.shape[-1]
    rate = -jnp.diagonal(ph.S)
    jumps = jnp.concatenate([ph.S - jnp.diag(jnp.diagonal(ph.S)), -jnp.sum(ph.S, axis=1, keepdims=True)], axis=1)
    cum = jnp.cumsum(jnp.clip(jumps, 0.0, None) / rate[:, None], axis=1)
    phase = jnp.minimum(jnp.searchsorted(jnp.cumsum(ph.alpha), u, side="right"), k)

    def more(c):
        return c[0] < k

    def jump(c):
        i, total, j = c
        v = uniforms(key_words, count, 2, stream=_REPAIR_STREAM + 2 * j + which)
        total = total - jnp.log(v[0]) / rate[i]
        nxt = jnp.minimum(jnp.searchsorted(cum[i], v[1] * cum[i, -1], side="right"), k)
        return nxt, total, j + 1

    return jax.lax.while_loop(more, jump, (phase, jnp.zeros(()), jnp.uint32(0)))[1]


def _simulate_one(model: AvailabilityModel, key, horizon, dt):
    cp = model.checkpoint
    has_mem = cp.memory_per_persistent > 0
    L, nxt, reward, fresh, steady, cycle, credit_offset = _segments(model)
    start = 1  # background: segment 1, the rest of the first segment after the write
    tiers = model.tiers
    K = len(tiers)
    D = jnp.stack([jnp.asarray(t.downtime(), dtype=float) for t in tiers])
    R = jnp.stack([jnp.asarray(t.restart_time(model.cards), dtype=float) for t in tiers])
    p = jnp.stack([jnp.asarray(t.coverage, dtype=float) for t in tiers])
    fb = jnp.array([t.fallback for t in tiers])
    takes = jnp.array([bool(t.takes_spare) for t in tiers])
    post = jnp.stack([jnp.asarray((1.0 - t.degraded_throughput) * t.degraded_time, dtype=float) for t in tiers])
    code = []
    for t in tiers:
        if t.rollback is Rollback.NONE:
            code.append(0)
        elif t.rollback is Rollback.STEP:
            code.append(1)
        elif t.rollback is Rollback.MEMORY and has_mem:
            code.append(2)
        else:
            code.append(3)
    code = jnp.array(code)
    lam = jnp.asarray(model.fault_rates, dtype=float)
    q = jnp.asarray(model.fault_predicted, dtype=float)
    interrupts = jnp.array([bool(x) for x in model.fault_interrupts])
    entry = jnp.array(model.fault_tier)
    rho = jnp.asarray(model.fault_degraded_throughput, dtype=float)
    tdet = jnp.asarray(model.fault_detection_time, dtype=float)
    spare = jnp.asarray(model.fault_spare_nodes, dtype=float) > 0
    lam_all = jnp.sum(lam)
    key_words = jax.random.key_data(key)
    lam_int = jnp.sum(lam * (1.0 - q) * interrupts)  # faults that restart an exposed phase
    cum = jnp.cumsum(lam)
    pool = model.spares
    n_slots = (pool.size + 1) if pool is not None else 1

    def repair_draw(u, count, which):
        """A node's repair time (seconds) from the uniform ``u`` (and, for phase-type repair,
        the event's own streams; ``which`` separates the event's two draws)."""
        if pool.repair is None:
            return -pool.repair_time * jnp.log(u)
        return _phase_type_draw(effective_repair(pool), u, key_words, count, which)

    def take_spare(slots, t, u, count, which):
        """Take a spare at wall time t (u: a uniform draw); returns (slots, wait)."""
        if pool is None:
            return slots, 0.0
        busy = slots > t
        n_busy = jnp.sum(busy)
        free = jnp.argmin(busy)
        back = t + repair_draw(u, count, which)
        slots = slots.at[free].set(back)
        empty = n_busy >= pool.size
        first = jnp.argmin(slots)
        wait = jnp.where(empty, slots[first] - t, 0.0)
        slots = jnp.where(empty, slots.at[first].set(-jnp.inf), slots)
        return slots, wait + pool.activation_time

    def advance(clock: _Clock, g) -> _Clock:
        """Run g seconds (running time) through the checkpoint schedule.

        ``clock.credit`` = (work, time) at the first durable save at or after the horizon:
        the estimator stops there (a stopping time of the save-to-save cycles). Later saves
        inside the same fault-free gap are not counted: they are known to be fault-free.
        """

        def cond(c):
            clock, g = c
            return g >= L[clock.segment] - clock.position

        def body(c):
            (t, work, seg, x, (rec_w, rec_t)), g = c
            # whole steady cycles at once; credits at t + (k - 1) cycle + offset, k = 1..ncyc
            at_start = (seg == steady) & (x == 0.0)
            ncyc = jnp.where(at_start, jnp.floor(g / cycle), 0.0)
            k_star = jnp.maximum(jnp.ceil((horizon - t - credit_offset) / cycle) + 1.0, 1.0)
            hit = (rec_t < 0) & (k_star <= ncyc)
            rec_w = jnp.where(hit, work + k_star * cp.interval, rec_w)
            rec_t = jnp.where(hit, t + (k_star - 1.0) * cycle + credit_offset, rec_t)
            work = work + ncyc * cp.interval
            t = t + ncyc * cycle
            g = g - ncyc * cycle
            # then one segment, if it completes
            done = g >= L[seg] - x
            step = jnp.where(done, L[seg] - x, 0.0)
            t = t + step
            g = g - step
            credit = done & reward[seg]
            work = work + jnp.where(credit, cp.interval, 0.0)
            hit = credit & (rec_t < 0) & (t >= horizon)
            rec_w = jnp.where(hit, work, rec_w)
            rec_t = jnp.where(hit, t, rec_t)
            seg2 = jnp.where(done, nxt[seg], seg)
            x = jnp.where(done, 0.0, x)
            return _Clock(t, work, seg2, x, _Credit(rec_w, rec_t)), g

        clock, g = jax.lax.while_loop(cond, body, (clock, g))
        return clock._replace(time=clock.time + g, position=clock.position + g)

    def event(state: _TwinState, _):
        t = state.clock.time
        slots, count = state.spares_back, state.events
        # stop once both estimators have their stopping point: the first durable save at or
        # after the horizon (goodput) and the first event that starts after it (the rest)
        take = (t >= horizon) & (state.snapshot.time < 0)
        snap = jax.tree_util.tree_map(lambda new, old: jnp.where(take, new, old),
                                      _Snapshot(state.down, state.interruptions, t), state.snapshot)
        state = state._replace(snapshot=snap)
        active = running(state)
        # one block of Philox draws per event, keyed by the replica and the event's number
        # (the draws dominate the cost); uniforms in (0, 1), never 0
        uni = uniforms(key_words, count, _DRAWS + K)
        u, u_mode, u_pred, u_spare, u_step, u_spare2 = (uni[j] for j in range(6))
        steps = jnp.floor(jnp.log(u) / (-lam_all * dt)) + 1.0
        g = steps * dt
        clock1 = advance(state.clock, g)
        t1 = clock1.time

        i = jnp.minimum(jnp.searchsorted(cum, u_mode * cum[-1]), len(model.fault_names) - 1)
        predicted = u_pred < q[i]
        # predictive maintenance: graceful migration (and a spare)
        slots_p, wait_p = take_spare(slots, t1, u_spare, count, 0)
        pred_cost = model.migration_time + jnp.where(spare[i], wait_p, 0.0)

        # tier ladder
        pre = jnp.where(interrupts[i], 0.0, (1.0 - rho[i]) * tdet[i])
        tier = entry[i]
        done = jnp.array(False)
        cost_down = 0.0
        final = tier
        for j in range(K):
            ok = (uni[_DRAWS + j] < p[tier]) | (fb[tier] < 0)
            now_final = (~done) & ok
            final = jnp.where(now_final, tier, final)
            fail = (~done) & (~ok)
            cost_down = cost_down + jnp.where(fail, D[tier] + R[tier], 0.0)
            tier = jnp.where(fail, fb[tier], tier)
            done = done | now_final
        slots_r, wait_r = take_spare(slots, t1 + pre + cost_down, u_spare2, count, 1)
        use_spare = spare[i] & takes[final]
        wait = jnp.where(use_spare, wait_r, 0.0)

        # exposed phases: a fault during them restarts them (after the unexposed ones). The
        # first _PREDRAWN attempts use draws from the event's block; the loop (its own draws)
        # only runs for the rare event that fails them all, so under vmap it is nearly
        # always skipped for the whole batch.
        rate = jnp.maximum(lam_int, 1e-300)
        exposed = jnp.zeros(())
        going = jnp.array(True)
        for j in range(_PREDRAWN):
            e = -jnp.log(uni[6 + j]) / rate
            hit = (e < R[final]) & (lam_int > 0)
            exposed = exposed + jnp.where(going, D[final] + jnp.where(hit, e, R[final]), 0.0)
            going = going & hit

        def rcond(c):
            return c[0]

        def rbody(c):
            _, total, j = c
            e = -jnp.log(uniforms(key_words, count, 1, stream=j)[0]) / rate
            hit = e < R[final]
            total = total + D[final] + jnp.where(hit, e, R[final])  # a retry repeats the downtime
            return hit, total, j + 1

        _, exposed, _ = jax.lax.while_loop(rcond, rbody, (going, exposed, jnp.uint32(1)))
        step_loss = jnp.where(code[final] == 1, model.step_time * u_step, 0.0)
        tier_cost = pre + cost_down + wait + exposed + post[final] + step_loss
        down_tier = cost_down + wait + exposed

        cost = jnp.where(predicted, pred_cost, tier_cost)
        down_add = jnp.where(predicted, pred_cost, down_tier)
        slots_new = jnp.where(predicted, jnp.where(spare[i], slots_p, slots),
                              jnp.where(use_spare, slots_r, slots))
        rb = jnp.where(predicted, 0, code[final])
        clock2 = clock1._replace(time=t1 + cost, segment=jnp.where(rb == 3, fresh, clock1.segment),
                                 position=jnp.where(rb >= 2, 0.0, clock1.position))
        counted = (~predicted) & interrupts[i]

        new = _TwinState(clock2, slots_new, state.interruptions + counted, state.down + down_add, snap, count + 1)
        state = jax.tree_util.tree_map(lambda a, b: jnp.where(active, a, b), new, state)
        return state, None

    zero = jnp.zeros(())
    # every replica starts just after a durable save (a renewal point of the save-to-save
    # cycles), so its first cycle is like the others and the pooled ratio has no start-up
    # bias: blocking, at the first segment; background, in the rest of the first segment
    # after a completed write (starting from a "fresh" segment biased goodput by -1/cycles)
    state = _TwinState(
        clock=_Clock(zero, zero, jnp.array(steady if cp.save_mode is SaveMode.BLOCKING else start), zero,
                     _Credit(zero, -jnp.ones(()))),
        spares_back=jnp.full((n_slots,), -jnp.inf), interruptions=zero, down=zero,
        snapshot=_Snapshot(zero, zero, -jnp.ones(())), events=jnp.uint32(0))

    # scan over chunks of events, until this replica has both stopping points (under vmap:
    # until the slowest replica has them; finished replicas are masked)
    def running(state: _TwinState):
        return (state.clock.credit.time < 0) | (state.snapshot.time < 0)

    def chunk(state):
        return jax.lax.scan(event, state, None, length=_CHUNK)[0]

    state = jax.lax.while_loop(running, chunk, state)
    return dict(t=state.clock.time, work=state.clock.credit.work, t_credit=state.clock.credit.time,
                n_int=state.snapshot.interruptions, down=state.snapshot.down, t_event=state.snapshot.time)


@jax.jit
def _run(model, keys, horizon, dt):
    return jax.vmap(lambda k: _simulate_one(model, k, horizon, dt))(keys)


def simulate(model: AvailabilityModel, *, replicas: int = 256, horizon: float = 30 * DAY,
             dt: float | None = None, seed: int = 0, throw: bool = True, warmup: float = 0.0) -> SimulationResult:
    """Simulate ``replicas`` independent runs of ``horizon`` seconds of wall time.

    Every replica starts just after a durable save with memoryless fault clocks, but with
    every spare of the pool free: a model with a spare pool forgets that start only on the
    time scale of the pool's repair time, and a short run then sees fewer waits for a spare
    than the long run the analytic goodput describes. ``warmup`` runs that long first and
    counts only what follows: each estimate is taken between the replica's stopping points
    after the warm-up and after warm-up + horizon (both renewal points, as without a
    warm-up). About five mean repair times (``5 * model.spares.repair_time``) leave less
    than 1 % of the start (e^-5).

    Args:
        model: the availability model (validated on the host).
        replicas: independent runs (vmapped).
        horizon: wall time per run, seconds (e.g. ``30 * markovsim.DAY``).
        dt: step length, seconds (default ``model.step_time``); faults land on step ends.
        seed: PRNG seed.
        throw: if true, raise :class:`~markovsim.SolverError` when a replica completed no
            durable checkpoint (lengthen the horizon); if false, return the status.
        warmup: wall time simulated before counting, seconds (default 0). The same
            replicas (the same random paths) are run to ``warmup`` and to
            ``warmup + horizon``; a replica with no durable save between the two stopping
            points makes the status ``NOT_CONVERGED``.

    Returns:
        A :class:`SimulationResult` with pooled estimates and 99 % confidence intervals
        (:meth:`Estimate.from_ratio`: renewal-reward ratios over the replicas).

    Raises:
        InvalidParameterError: a bad model or argument, or a model the twin cannot finish:
            exposed recovery phases so long against the fault rate that a recovery needs
            about :math:`e^{\\Lambda R}` attempts.
    """
    model.validate()
    replicas = check_integer("replicas", replicas, minimum=2)
    check_positive("horizon", horizon)
    dt = float(model.step_time) if dt is None else dt
    check_positive("dt", dt)
    check_nonnegative("warmup", warmup)
    lam_all = float(np.sum(np.asarray(model.fault_rates)))
    if lam_all <= 0:
        raise InvalidParameterError("fault_rates: all zero; nothing to simulate (goodput is the save overhead)")
    lam = np.asarray(model.fault_rates, dtype=float) * (1.0 - np.asarray(model.fault_predicted, dtype=float))
    lam_int = float(np.sum(lam * np.array(model.fault_interrupts, dtype=float)))
    for tier in model.tiers:
        attempts = lam_int * float(tier.restart_time(model.cards))
        if attempts > _MAX_LOG_ATTEMPTS:
            raise InvalidParameterError(
                f"tiers ({tier.name}).restart_time={float(tier.restart_time(model.cards)):.6g} s: with interrupting "
                f"faults at {lam_int:.6g} per second a recovery needs about e^{attempts:.3g} attempts; the twin "
                f"simulates each one and would not finish (expected at most e^{_MAX_LOG_ATTEMPTS}); the analytic "
                "goodput (analyze) handles it")
    keys = jax.random.split(jax.random.key(seed, impl=_RNG), replicas)
    out = {k: np.asarray(v) for k, v in _run(model, keys, float(warmup) + float(horizon), float(dt)).items()}
    if warmup > 0:
        start = {k: np.asarray(v) for k, v in _run(model, keys, float(warmup), float(dt)).items()}
        out = {k: out[k] - start[k] for k in ("work", "t_credit", "down", "t_event", "n_int")} | {"t": out["t"]}
    t = out["t"]
    work, t_credit = out["work"], out["t_credit"]
    status = ResultStatus.OK
    if (work == 0).any() or not (t_credit > 0).all():
        status = ResultStatus.NOT_CONVERGED
        if throw:
            bad = np.flatnonzero(work == 0)[:10].tolist()
            after = " after the warm-up" if warmup > 0 else ""
            raise SolverError(f"simulate: replicas {bad} completed no durable checkpoint{after} (status "
                              "NOT_CONVERGED); lengthen the horizon, or pass throw=False for the status")
        t_credit = np.where(t_credit > 0, t_credit, 1.0)
    t_event = out["t_event"]
    if not (t_event > 0).all():     # after a warm-up, a replica whose window holds no fault event
        status = ResultStatus.NOT_CONVERGED
        if throw:
            raise SolverError("simulate: a replica saw no fault event after the warm-up (status NOT_CONVERGED); "
                              "lengthen the horizon, or pass throw=False for the status")
        t_event = np.where(t_event > 0, t_event, 1.0)
    g = Estimate.from_ratio(work, t_credit)
    u = Estimate.from_ratio(out["down"], t_event)
    i = Estimate.from_ratio(out["n_int"] * DAY, t_event)
    fractions = np.array([g.mean, u.mean])
    if status is ResultStatus.OK and not (np.isfinite(fractions).all() and np.isfinite(i.mean)):
        status = ResultStatus.NON_FINITE
    elif status is ResultStatus.OK and not ((fractions >= 0).all() and (fractions <= 1).all() and i.mean >= 0):
        status = ResultStatus.OUT_OF_RANGE
    if throw and status is not ResultStatus.OK:
        raise SolverError(f"simulate: {status.message} (status {status.name})")
    return SimulationResult(goodput=g, unavailability=u, interruptions_per_day=i,
                            replica_goodput=work / t_credit, replica_steps=float(t.sum() / dt), status=status)
