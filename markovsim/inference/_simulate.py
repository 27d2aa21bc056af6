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

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import check_integer
from .._units import DAY
from ._fleet import Fleet, InstanceState as S
from ._tiers import RecoveryTiers

__all__ = ["SimulationResult", "Estimate", "simulate_fleet"]

_Z99 = 2.5758293035489004  # two-sided 99 % normal quantile


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A Monte-Carlo mean with its 99 % confidence interval ``[low, high]``."""

    mean: float
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """Monte-Carlo estimates (each an :class:`Estimate`) over the replicas.

    Attributes:
        slo_unavailability: fraction of time in which requests are lost.
        capacity_unavailability: fraction of time with serving capacity below demand.
        expected_capacity: mean serving capacity (full instances).
        requests_lost_per_day: requests lost per day.
        requests_retried_per_day: requests held or retried per day.
        simulated_time: total simulated seconds over all replicas.
    """

    slo_unavailability: Estimate
    capacity_unavailability: Estimate
    expected_capacity: Estimate
    requests_lost_per_day: Estimate
    requests_retried_per_day: Estimate
    simulated_time: float


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


@partial(jax.jit, static_argnames=("K", "E", "spares", "switch", "events"))
def _run(key, p, *, K, E, spares, switch, events):
    (lam, soft, demand, rps, inflight, retry_cov, retry_t, el_cov, mig_t, reint_t, deg_cap,
     sw_cov, sw_t, man_t, fast_cov, fast_t, slow_t, repair_t) = p
    unlimited = spares < 0
    up, deg = int(S.UP), int(S.DEGRADED)

    completion = jnp.zeros(10).at[S.RETRY].set(_rate(retry_t)).at[S.MIGRATE].set(_rate(mig_t))
    completion = completion.at[S.DETECT].set(_rate(sw_t)).at[S.MANUAL].set(_rate(man_t))
    completion = completion.at[S.RESTART_FAST].set(_rate(fast_t)).at[S.RESTART_SLOW].set(1.0 / slow_t)
    cap_of = jnp.zeros(10).at[up].set(1.0).at[deg].set(deg_cap)
    serving = jnp.zeros(10, bool).at[jnp.array([up, deg])].set(True)
    held_m = jnp.zeros(10, bool).at[jnp.array([S.RETRY, S.MIGRATE])].set(True)
    down = jnp.array([S.RESTART_FAST, S.RESTART_SLOW, S.WAIT_CARD, S.WAIT_TWO_CARDS])
    dead_m = jnp.zeros(10, bool).at[jnp.array([S.DETECT, S.MANUAL])].set(True)
    switched_m = jnp.zeros(10, bool)
    if switch:
        switched_m = switched_m.at[down].set(True)
    else:
        dead_m = dead_m.at[down].set(True)

    def restart_entry(u):
        return jnp.where(u < fast_cov, int(S.RESTART_FAST), int(S.RESTART_SLOW))

    def outage(need, f, u):
        ok = unlimited | (f >= need)
        nxt_ok = int(S.DETECT) if switch else restart_entry(u)
        owed = need - f
        nxt = jnp.where(ok, nxt_ok, jnp.where(owed == 1, int(S.WAIT_CARD), int(S.WAIT_TWO_CARDS)))
        nf = jnp.where(unlimited, f, jnp.where(ok, f - need, 0))
        return nxt, nf

    def observe(inst):
        counts = jnp.zeros(10).at[inst].add(1.0)
        cap = counts @ cap_of
        n_rot = K - jnp.sum(jnp.where(switched_m, counts, 0.0))
        share = jnp.where(n_rot > 0, demand / jnp.maximum(n_rot, 1.0), 0.0)
        lost_r = jnp.sum(jnp.where(dead_m, counts, 0.0)) * share
        held = jnp.sum(jnp.where(held_m, counts, 0.0)) * share
        live = jnp.sum(jnp.where(serving, counts, 0.0)) * share
        served = jnp.minimum(live, cap)
        lost = jnp.where(n_rot > 0, lost_r + live - served, demand)
        return cap, lost, held

    def step(carry, _):
        inst, f, key, acc = carry
        key, k_t, k_e, k_u1, k_u2 = jax.random.split(key, 5)
        is_up = inst == up
        is_deg = inst == deg
        cards = jnp.where(is_up, E, jnp.where(is_deg, E - 1, 0))
        soft_r = cards * lam * soft
        hard_r = cards * lam * (1.0 - soft)
        comp_r = completion[inst]
        reint_r = jnp.where(is_deg & (unlimited | (f >= 1)), _rate(reint_t), 0.0)
        missing = jnp.sum(is_deg) + jnp.sum(inst == S.MIGRATE) + jnp.sum(inst == S.WAIT_CARD) \
            + 2 * jnp.sum(inst == S.WAIT_TWO_CARDS)
        in_repair = jnp.where(unlimited, 0, spares + missing - f)
        repair_r = in_repair / repair_t
        rates = jnp.concatenate([soft_r, hard_r, comp_r, reint_r, jnp.array([repair_r])])
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

        # kind 0: soft fault, 1: hard fault, 2: completion, 3: reintegration, 4: repair
        def soft_fault():
            to_retry = (s_i == up) & (u1 < retry_cov)
            need = jnp.where(s_i == up, 0, 1)
            nxt, nf = outage(need, f, u2)
            nxt = jnp.where(to_retry, int(S.RETRY), nxt)
            nf = jnp.where(to_retry, f, nf)
            retried = jnp.where(to_retry, inflight, ret_sw)
            lost_i = jnp.where(to_retry, 0.0, inflight * cap_i - ret_sw)
            return inst.at[i].set(nxt), nf, retried, lost_i

        def hard_fault():
            to_mig = (s_i == up) & (u1 < el_cov)
            need = jnp.where(s_i == up, 1, 2)
            nxt, nf = outage(need, f, u2)
            nxt = jnp.where(to_mig, int(S.MIGRATE), nxt)
            nf = jnp.where(to_mig, f, nf)
            retried = jnp.where(to_mig, inflight, ret_sw)
            lost_i = jnp.where(to_mig, 0.0, inflight * cap_i - ret_sw)
            return inst.at[i].set(nxt), nf, retried, lost_i

        def complete():
            nxt = jnp.select(
                [s_i == S.RETRY, s_i == S.MIGRATE, s_i == S.DETECT, s_i == S.MANUAL],
                [up, deg, jnp.where(u1 < sw_cov, restart_entry(u2), int(S.MANUAL)), restart_entry(u2)],
                up)
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
            kind, [soft_fault, hard_fault, complete, reintegrate, repair])
        acc = acc + jnp.array([dt, dt * (lost > 1e-12 * demand), dt * (cap < demand - 1e-12),
                               dt * cap, dt * lost, dt * held, retried, lost_i])
        return (inst2, f2, key, acc), None

    inst0 = jnp.zeros(K, dtype=jnp.int32)
    f0 = jnp.asarray(max(spares, 0), dtype=jnp.int32)
    (_, _, _, acc), _ = jax.lax.scan(step, (inst0, f0, key, jnp.zeros(8)), None, length=events)
    T = acc[0]
    return jnp.array([
        acc[1] / T, acc[2] / T, acc[3] / T,
        DAY * (rps * acc[4] + acc[7]) / T,
        DAY * (rps * acc[5] + acc[6]) / T,
        T,
    ])


def simulate_fleet(fleet: Fleet, tiers: RecoveryTiers, *, events: int = 20_000, replicas: int = 128,
                   seed: int = 0) -> SimulationResult:
    """Simulate the fleet instance by instance and estimate its long-run figures.

    Each replica starts with every instance up and the spare pool full and runs
    ``events`` events; the estimates are time averages over each replica, and the
    confidence interval is the normal 99 % interval over replicas.

    Args:
        fleet: the instance pool.
        tiers: the recovery ladder.
        events: events per replica (the start-up bias falls as ``1/events``).
        replicas: independent replicas (``jax.vmap``).
        seed: the random seed.

    Returns:
        :class:`SimulationResult`.
    """
    fleet = fleet.validate()
    tiers = tiers.validate()
    events = check_integer("events", events, minimum=1)
    replicas = check_integer("replicas", replicas, minimum=2)
    p = _params(fleet, tiers)
    keys = jax.random.split(jax.random.PRNGKey(seed), replicas)
    spares = -1 if fleet.spare_cards is None else int(fleet.spare_cards)
    run = partial(_run, K=int(fleet.instances), E=int(fleet.cards_per_instance), spares=spares,
                  switch=tiers.traffic_switch is not None, events=events)
    out = np.asarray(jax.vmap(run, in_axes=(0, None))(keys, p))

    def est(col):
        x = out[:, col]
        m = float(x.mean())
        h = _Z99 * float(x.std(ddof=1)) / np.sqrt(len(x))
        return Estimate(m, m - h, m + h)

    return SimulationResult(est(0), est(1), est(2), est(3), est(4), float(out[:, 5].sum()))
