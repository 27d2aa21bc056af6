"""Monte-Carlo twin of the fleet: a JAX next-event simulation of K individual instances.

It follows every instance on its own (no counting, no truncation) and re-implements the
tier rules and the serving definitions independently of the chain builder, so that the
two can check each other. Replicas run in parallel under ``jax.vmap``; each runs a fixed
number of events under ``jax.lax.scan`` and reports time averages (ratio estimators);
the 99 % confidence intervals come from the spread over replicas.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import SolverError, check_integer
from .._estimate import Estimate
from .._status import ResultStatus
from .._units import DAY
from ._fleet import Fleet, InstanceState as S
from ._tiers import RecoveryTiers

__all__ = ["SimulationResult", "simulate_fleet"]


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """Monte-Carlo estimates (each an :class:`~markovsim.inference.Estimate`: mean, standard
    error, 99 % Student-t interval over the replicas' time averages).

    Attributes:
        slo_unavailability: fraction of time in which requests are lost.
        capacity_unavailability: fraction of time with serving capacity below demand.
        expected_capacity: mean serving capacity (full instances).
        requests_lost_per_day: requests lost per day.
        requests_retried_per_day: requests held or retried per day.
        simulated_time: total simulated seconds over all replicas.
        status: :class:`~markovsim.ResultStatus`: ``OK`` when every estimate is finite and
            every fraction within [0, 1].
    """

    slo_unavailability: Estimate
    capacity_unavailability: Estimate
    expected_capacity: Estimate
    requests_lost_per_day: Estimate
    requests_retried_per_day: Estimate
    simulated_time: float
    status: ResultStatus = ResultStatus.OK


class _Totals(NamedTuple):
    """Time integrals and counts a replica accumulates after its warm-up."""

    time: jax.Array  #: seconds
    slo_down: jax.Array  #: seconds in which some request is lost
    capacity_short: jax.Array  #: seconds with capacity below demand
    capacity: jax.Array  #: integral of the serving capacity (instance-seconds)
    demand_lost: jax.Array  #: integral of the demand lost (instance-seconds)
    demand_held: jax.Array  #: integral of the demand held on stalled instances
    retried: jax.Array  #: in-flight requests retried at faults
    inflight_lost: jax.Array  #: in-flight requests lost at faults


class _FleetState(NamedTuple):
    """What one replica carries from event to event."""

    instances: jax.Array  #: the InstanceState of every instance, shape (K,)
    free_spares: jax.Array  #: free spare cards
    key: jax.Array  #: PRNG key
    totals: _Totals


def _params(fleet: Fleet, tiers: RecoveryTiers) -> jnp.ndarray:
    E = fleet.cards_per_instance
    inf = jnp.inf
    r, fr, sw, el = tiers.token_retry, tiers.fast_restart, tiers.traffic_switch, tiers.elastic
    deg_cap = (E - 1) / E if (el is None or el.degraded_capacity is None) else el.degraded_capacity
    vals = [
        fleet.card_fault_rate, fleet.soft_fault_share, fleet.demand, fleet.requests_per_s,
        fleet.inflight_requests,
        0.0 if r is None else r.coverage, inf if r is None else r.stall_time,
        0.0 if el is None else el.coverage, inf if el is None else el.migration_time,
        inf if el is None else el.reintegration_time, deg_cap,
        0.0 if sw is None else sw.coverage, inf if sw is None else sw.switch_time,
        inf if sw is None else sw.manual_time,
        0.0 if fr is None else fr.coverage, inf if fr is None else fr.restart_time,
        tiers.restart.restart_time, tiers.repair.repair_time,
    ]
    return jnp.asarray([float(v) for v in vals], dtype=jnp.float64)


def _rate(mean_time):
    return jnp.where(jnp.isfinite(mean_time), 1.0 / mean_time, 0.0)


@partial(jax.jit, static_argnames=("K", "spares", "switch", "events", "warmup"))
def _run(key, p, E, *, K, spares, switch, events, warmup):
    (lam, soft, demand, rps, inflight, retry_cov, retry_t, el_cov, mig_t, reint_t, deg_cap,
     sw_cov, sw_t, man_t, fast_cov, fast_t, slow_t, repair_t) = p
    unlimited = spares < 0
    up, deg = int(S.UP), int(S.DEGRADED)

    n_states = len(S)
    fast_states = jnp.array([S.DETECT_FAST, S.MANUAL_FAST, S.RESTART_FAST])
    slow_states = jnp.array([S.DETECT_SLOW, S.MANUAL_SLOW, S.RESTART_SLOW])
    # a stall or a restart ends (the restart runs whether or not the switch has happened)
    completion = jnp.zeros(n_states).at[S.RETRY].set(_rate(retry_t)).at[S.MIGRATE].set(_rate(mig_t))
    completion = completion.at[fast_states].set(_rate(fast_t)).at[slow_states].set(1.0 / slow_t)
    # the automatic / manual switch of a routed, restarting instance ends
    switching = jnp.zeros(n_states).at[jnp.array([S.DETECT_FAST, S.DETECT_SLOW])].set(_rate(sw_t))
    switching = switching.at[jnp.array([S.MANUAL_FAST, S.MANUAL_SLOW])].set(_rate(man_t))
    cap_of = jnp.zeros(n_states).at[up].set(1.0).at[deg].set(deg_cap)
    serving = jnp.zeros(n_states, bool).at[jnp.array([up, deg])].set(True)
    held_m = jnp.zeros(n_states, bool).at[jnp.array([S.RETRY, S.MIGRATE])].set(True)
    down = jnp.array([S.RESTART_FAST, S.RESTART_SLOW, S.WAIT_CARD, S.WAIT_TWO_CARDS])
    dead_m = jnp.zeros(n_states, bool).at[jnp.array([S.DETECT_FAST, S.DETECT_SLOW, S.MANUAL_FAST,
                                                     S.MANUAL_SLOW])].set(True)
    switched_m = jnp.zeros(n_states, bool)
    if switch:
        switched_m = switched_m.at[down].set(True)
    else:
        dead_m = dead_m.at[down].set(True)

    def restart_entry(u):
        return jnp.where(u < fast_cov, int(S.RESTART_FAST), int(S.RESTART_SLOW))

    def outage(need, f, u):
        ok = unlimited | (f >= need)
        # with the switch tier the restart starts at once and the switch runs alongside
        nxt_ok = jnp.where(u < fast_cov, int(S.DETECT_FAST), int(S.DETECT_SLOW)) if switch else restart_entry(u)
        owed = need - f
        nxt = jnp.where(ok, nxt_ok, jnp.where(owed == 1, int(S.WAIT_CARD), int(S.WAIT_TWO_CARDS)))
        nf = jnp.where(unlimited, f, jnp.where(ok, f - need, 0))
        return nxt, nf

    def observe(inst):
        counts = jnp.zeros(n_states).at[inst].add(1.0)
        cap = counts @ cap_of
        n_rot = K - jnp.sum(jnp.where(switched_m, counts, 0.0))
        share = jnp.where(n_rot > 0, demand / jnp.maximum(n_rot, 1.0), 0.0)
        lost_r = jnp.sum(jnp.where(dead_m, counts, 0.0)) * share
        held = jnp.sum(jnp.where(held_m, counts, 0.0)) * share
        live = jnp.sum(jnp.where(serving, counts, 0.0)) * share
        served = jnp.minimum(live, cap)
        lost = jnp.where(n_rot > 0, lost_r + live - served, demand)
        return cap, lost, held

    def step(state: _FleetState, n):
        inst, f, key, acc = state
        key, k_t, k_e, k_u1, k_u2 = jax.random.split(key, 5)
        is_up = inst == up
        is_deg = inst == deg
        cards = jnp.where(is_up, E, jnp.where(is_deg, E - 1, 0))
        soft_r = cards * lam * soft
        hard_r = cards * lam * (1.0 - soft)
        comp_r = completion[inst]
        switch_r = switching[inst]
        reint_r = jnp.where(is_deg & (unlimited | (f >= 1)), _rate(reint_t), 0.0)
        missing = jnp.sum(is_deg) + jnp.sum(inst == S.MIGRATE) + jnp.sum(inst == S.WAIT_CARD) \
            + 2 * jnp.sum(inst == S.WAIT_TWO_CARDS)
        in_repair = jnp.where(unlimited, 0, spares + missing - f)
        repair_r = in_repair / repair_t
        rates = jnp.concatenate([soft_r, hard_r, comp_r, switch_r, reint_r, jnp.array([repair_r])])
        total = jnp.sum(rates)
        dt = jax.random.exponential(k_t) / total
        cap, lost, held = observe(inst)
        ev = jax.random.choice(k_e, rates.shape[0], p=rates / total)
        kind, i = ev // K, ev % K
        u1 = jax.random.uniform(k_u1)
        u2 = jax.random.uniform(k_u2)
        s_i = inst[jnp.minimum(i, K - 1)]
        cap_i = jnp.where(s_i == deg, deg_cap, 1.0)
        ret_sw = jnp.where(switch, sw_cov, 0.0) * inflight * cap_i

        # kind 0: soft fault, 1: hard fault, 2: stall or restart ends, 3: switch ends,
        # 4: reintegration, 5: repair
        def fault(coverage, quick_state, need_up):
            # a fault on a serving instance: its quick tier (token retry for a soft fault,
            # elastic migration for a hard one) with probability ``coverage``, otherwise an
            # outage needing ``need_up`` cards (one more on a degraded instance)
            quick = (s_i == up) & (u1 < coverage)
            nxt, nf = outage(jnp.where(s_i == up, need_up, need_up + 1), f, u2)
            nxt = jnp.where(quick, int(quick_state), nxt)
            nf = jnp.where(quick, f, nf)
            retried = jnp.where(quick, inflight, ret_sw)
            lost_i = jnp.where(quick, 0.0, inflight * cap_i - ret_sw)
            return inst.at[i].set(nxt), nf, retried, lost_i

        def soft_fault():
            return fault(retry_cov, S.RETRY, 0)

        def hard_fault():
            return fault(el_cov, S.MIGRATE, 1)

        def complete():
            return inst.at[i].set(jnp.where(s_i == S.MIGRATE, deg, up)), f, 0.0, 0.0

        def switched():
            fast = (s_i == S.DETECT_FAST) | (s_i == S.MANUAL_FAST)
            restart = jnp.where(fast, int(S.RESTART_FAST), int(S.RESTART_SLOW))
            manual = jnp.where(fast, int(S.MANUAL_FAST), int(S.MANUAL_SLOW))
            automatic = (s_i == S.DETECT_FAST) | (s_i == S.DETECT_SLOW)
            nxt = jnp.where(automatic & (u1 >= sw_cov), manual, restart)
            return inst.at[i].set(nxt), f, 0.0, 0.0

        def reintegrate():
            return inst.at[i].set(up), jnp.where(unlimited, f, f - 1), 0.0, 0.0

        def repair():
            w1 = inst == S.WAIT_CARD
            w2 = inst == S.WAIT_TWO_CARDS
            j1 = jnp.argmax(w1)
            j2 = jnp.argmax(w2)
            new = jnp.where(jnp.any(w1), inst.at[j1].set(restart_entry(u2)),
                            jnp.where(jnp.any(w2), inst.at[j2].set(int(S.WAIT_CARD)), inst))
            nf = jnp.where(jnp.any(w1) | jnp.any(w2), f, f + 1)
            return new, nf, 0.0, 0.0

        inst2, f2, retried, lost_i = jax.lax.switch(
            kind, [soft_fault, hard_fault, complete, switched, reintegrate, repair])
        counted = n >= warmup
        add = _Totals(time=dt, slo_down=dt * (lost > 1e-12 * demand), capacity_short=dt * (cap < demand - 1e-12),
                      capacity=dt * cap, demand_lost=dt * lost, demand_held=dt * held, retried=retried,
                      inflight_lost=lost_i)
        acc = jax.tree_util.tree_map(lambda a, b: a + jnp.where(counted, b, 0.0), acc, add)
        return _FleetState(inst2, f2, key, acc), None

    zero = jnp.zeros(())
    state = _FleetState(instances=jnp.zeros(K, dtype=jnp.int32),
                        free_spares=jnp.asarray(max(spares, 0), dtype=jnp.int32), key=key,
                        totals=_Totals(*([zero] * len(_Totals._fields))))
    acc = jax.lax.scan(step, state, jnp.arange(warmup + events))[0].totals
    T = acc.time
    return jnp.array([
        acc.slo_down / T, acc.capacity_short / T, acc.capacity / T,
        DAY * (rps * acc.demand_lost + acc.inflight_lost) / T,
        DAY * (rps * acc.demand_held + acc.retried) / T,
        T,
    ])


def simulate_fleet(fleet: Fleet, tiers: RecoveryTiers, *, events: int = 20_000, replicas: int = 128,
                   seed: int = 0, warmup: int | None = None, throw: bool = True) -> SimulationResult:
    """Simulate the fleet instance by instance and estimate its long-run figures.

    Each replica starts with every instance up and the spare pool full and runs
    ``events`` events; the estimates are time averages over each replica, and the
    confidence interval is the 99 % Student-t interval over replicas.

    Args:
        fleet: the instance pool.
        tiers: the recovery ladder.
        events: events per replica counted in the estimates.
        warmup: events run first and not counted, so that the replicas forget their start
            (all up, pool full); default ``events // 5``. What bias is left falls as
            ``1/events``.
        replicas: independent replicas (``jax.vmap``).
        seed: the random seed.
        throw: if true, raise :class:`~markovsim.SolverError` for a result that fails its
            checks; if false, return it with its status.

    Returns:
        :class:`SimulationResult`.
    """
    fleet = fleet.validate()
    tiers = tiers.validate()
    events = check_integer("events", events, minimum=1)
    warmup = events // 5 if warmup is None else check_integer("warmup", warmup, minimum=0)
    replicas = check_integer("replicas", replicas, minimum=2)
    p = _params(fleet, tiers)
    keys = jax.random.split(jax.random.PRNGKey(seed), replicas)
    spares = -1 if fleet.spare_cards is None else int(fleet.spare_cards)
    run = partial(_run, K=int(fleet.instances), spares=spares,
                  switch=tiers.traffic_switch is not None, events=events, warmup=warmup)
    out = np.asarray(jax.vmap(run, in_axes=(0, None, None))(keys, p, jnp.asarray(float(fleet.cards_per_instance))))

    est = [Estimate.from_samples(out[:, col]) for col in range(5)]
    means = np.array([e.mean for e in est])
    status = ResultStatus.OK
    if not np.isfinite(means).all():
        status = ResultStatus.NON_FINITE
    elif not ((means[:2] >= 0).all() and (means[:2] <= 1).all() and (means[2:] >= 0).all()):
        status = ResultStatus.OUT_OF_RANGE
    if throw and status is not ResultStatus.OK:
        raise SolverError(f"simulate_fleet: {status.message} (status {status.name}); "
                          "pass throw=False for the status")
    return SimulationResult(*est, float(out[:, 5].sum()), status)
