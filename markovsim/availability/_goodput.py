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

where :math:`W` is the expected wait for a spare (a birth-death chain of nodes in repair,
solved with :func:`markovsim.engine.stationary_distribution`). Degrading faults add
:math:`(1 - \rho_i) T_i` for their undetected slow running, elastic tiers
:math:`(1 - \rho_k) T_k` for the reduced-card running after them.

**Checkpoint renewal.** Episodes whose tier rolls nothing back (or only the step in
flight) pause the job: every second of running carries :math:`\sum \lambda c` seconds of
pause in expectation (the *dilation* :math:`h`). Episodes that roll back to the in-memory
or the persistent checkpoint restart the segment. The job is then a semi-Markov process
over running segments (each a deterministic stretch of work and saves, cut short by the
first rolling-back fault), in-memory recoveries and persistent recoveries. Long-run time
fractions of a semi-Markov process depend only on its embedded jump chain and the mean
holding times, so the CTMC with rates :math:`P_{xy} / m_x` has the same time fractions
and transition frequencies; its stationary distribution gives goodput (completed durable
work per second) and every lost-time share exactly. With one fault mode and one
job-restart tier it reduces to :func:`markovsim.availability.checkpoint_goodput`.

Assumptions (stated, not hidden): fault clocks run only while the job runs (and during
the exposed recovery phases); a fault during a pause or an unexposed phase is not
counted; degraded running is counted as full-speed running plus a pause of the lost
throughput; the spare pool is a birth-death chain whose arrivals are the spare-taking
faults per second of wall time (found by a few fixed-point sweeps over the running share),
which ignores that arrivals stop while the job waits.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from .._units import DAY
from ..engine import stationary_distribution
from ._model import AvailabilityModel, Rollback, SaveMode

__all__ = [
    "CAUSES",
    "GoodputResult",
    "analyze",
    "goodput",
    "goodput_sensitivities",
    "optimal_checkpoint_interval",
    "time_to_train",
]

#: the causes of lost time, in the order of :attr:`GoodputResult.lost`
CAUSES = ("checkpoint_save", "wasted_progress", "infrastructure_recovery", "restore",
          "waiting_for_spares", "degraded_running")
_INFRA, _RESTORE, _SPARES, _DEGRADED, _STEP = range(5)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GoodputResult:
    """Outputs of :func:`analyze` (fractions of wall-clock time unless stated).

    Attributes:
        goodput: durable useful work per second of wall time, in (0, 1].
        availability: fraction of time the job runs (computing or saving, maybe degraded).
        unavailability: fraction of time it is down (recovering or waiting), computed directly.
        interruptions_per_day: interrupting faults per day of wall time.
        lost_work_per_interruption: work thrown away per interruption, seconds.
        lost: lost-time fractions by cause, in the order of :data:`CAUSES`.
        job_mtbf: mean running time between interrupting faults, seconds.
    """

    goodput: jnp.ndarray
    availability: jnp.ndarray
    unavailability: jnp.ndarray
    interruptions_per_day: jnp.ndarray
    lost_work_per_interruption: jnp.ndarray
    lost: jnp.ndarray
    job_mtbf: jnp.ndarray

    def breakdown(self) -> dict[str, float]:
        """``{"useful": ..., cause: fraction, ...}`` as Python floats (sums to 1)."""
        out = {"useful": float(self.goodput)}
        out.update({c: float(v) for c, v in zip(CAUSES, self.lost)})
        return out


def _expm1_over(x, scale):
    """``scale * expm1(x) / x`` with the limit ``scale`` at ``x = 0`` (gradient-safe)."""
    safe = jnp.where(x == 0.0, 1.0, x)
    return jnp.where(x == 0.0, scale, scale * jnp.expm1(safe) / safe)


def _one_minus_exp_over(a, length):
    """``(1 - exp(-a L)) / a`` with the limit ``L`` at ``a = 0``."""
    safe = jnp.where(a == 0.0, 1.0, a)
    return jnp.where(a == 0.0, length, -jnp.expm1(-safe * length) / safe)


def _spare_wait(model: AvailabilityModel, birth_rate):
    """Expected wait for a spare per spare-taking repair (seconds), and P(pool empty)."""
    pool = model.spares
    if pool is None:
        return jnp.zeros(()), jnp.zeros(())
    s = pool.size
    mu = 1.0 / pool.repair_time
    b = jnp.maximum(birth_rate, 1e-300)
    n = s + 2  # nodes in repair: 0..s+1 (the job waits while s+1 are out)
    Q = jnp.zeros((n, n))
    for k in range(n - 1):
        Q = Q.at[k, k + 1].set(b)
        Q = Q.at[k + 1, k].set((k + 1) * mu)
    Q = Q - jnp.diag(Q.sum(axis=1))
    pi = stationary_distribution(Q)
    p_empty = pi[s] / jnp.sum(pi[: s + 1])  # PASTA: an arrival finds the pool empty
    return p_empty / ((s + 1) * mu) + pool.activation_time, p_empty


def _episodes(model: AvailabilityModel, running_share=1.0):
    """Rates and cost components of pauses, in-memory and persistent rollbacks.

    ``running_share`` converts the spare pool's arrivals from running time to wall time.
    """
    tiers = model.tiers
    K, M = len(tiers), len(model.fault_names)
    lam = jnp.asarray(model.fault_rates, dtype=float)
    q = jnp.asarray(model.fault_predicted, dtype=float)
    lam_run = lam * (1.0 - q)
    lam_pred = lam * q
    interrupts = jnp.array([bool(x) for x in model.fault_interrupts], dtype=float)
    Lam = jnp.sum(lam_run * interrupts)
    has_mem = model.checkpoint.memory_per_persistent > 0

    D = jnp.stack([jnp.asarray(t.downtime(), dtype=float) for t in tiers])
    R = jnp.stack([jnp.asarray(t.restart_time(model.cards), dtype=float) for t in tiers])
    p = jnp.stack([jnp.asarray(t.coverage, dtype=float) for t in tiers])

    V = jnp.zeros((M, K)).at[jnp.arange(M), jnp.array(model.fault_tier, dtype=int)].set(1.0)
    failed = jnp.zeros(M)
    ends = []
    for k, t in enumerate(tiers):
        if t.fallback >= 0:
            miss = V[:, k] * (1.0 - p[k])
            V = V.at[:, t.fallback].add(miss)
            failed = failed + miss * (D[k] + R[k])
            ends.append(V[:, k] * p[k])
        else:
            ends.append(V[:, k])
    E = jnp.stack(ends, axis=1)  # (M, K): probability that mode i ends at tier k

    spare_nodes = jnp.asarray(model.fault_spare_nodes, dtype=float)
    takes = jnp.array([bool(t.takes_spare) for t in tiers], dtype=float)
    births = jnp.sum(lam_run * spare_nodes * (E @ takes)) + jnp.sum(lam_pred * spare_nodes)
    wait, p_empty = _spare_wait(model, births * running_share)

    x = Lam * R
    ex = jnp.exp(x)
    restore = jax.vmap(_expm1_over)(x, R)  # (K,)
    rho = jnp.asarray(model.fault_degraded_throughput, dtype=float)
    tdet = jnp.asarray(model.fault_detection_time, dtype=float)
    pre_degraded = (1.0 - rho) * tdet * (1.0 - interrupts)  # (M,)
    post_degraded = jnp.stack([jnp.asarray((1.0 - t.degraded_throughput) * t.degraded_time, dtype=float)
                               for t in tiers])
    step_loss = jnp.array([0.5 if t.rollback is Rollback.STEP else 0.0 for t in tiers]) * model.step_time

    # cost components C[i, k, cause] of an episode of mode i that ends at tier k
    comp = jnp.zeros((M, K, 5))
    comp = comp.at[:, :, _INFRA].set(D[None, :] * ex[None, :] + failed[:, None])
    comp = comp.at[:, :, _RESTORE].set(jnp.broadcast_to(restore[None, :], (M, K)))
    comp = comp.at[:, :, _SPARES].set(wait * spare_nodes[:, None] * takes[None, :])
    comp = comp.at[:, :, _DEGRADED].set(pre_degraded[:, None] + post_degraded[None, :])
    comp = comp.at[:, :, _STEP].set(jnp.broadcast_to(step_loss[None, :], (M, K)))
    weighted = (lam_run[:, None] * E)[:, :, None] * comp  # rate x cost

    def cls(k):
        rb = tiers[k].rollback
        if rb in (Rollback.NONE, Rollback.STEP):
            return 0
        return 1 if (rb is Rollback.MEMORY and has_mem) else 2

    classes = [cls(k) for k in range(K)]
    sel = [jnp.array([c == j for c in classes], dtype=float) for j in range(3)]
    pause = jnp.einsum("ikc,k->c", weighted, sel[0])
    pred = jnp.zeros(5).at[_INFRA].add(jnp.sum(lam_pred) * model.migration_time)
    pred = pred.at[_SPARES].add(jnp.sum(lam_pred * spare_nodes) * wait)
    pause = pause + pred
    rates = [jnp.sum(lam_run[:, None] * E * s[None, :]) for s in sel]
    costs = [jnp.einsum("ikc,k->c", weighted, s) for s in sel]
    return dict(h=1.0 + jnp.sum(pause), pause=pause, lam_m=rates[1], mem=costs[1],
                lam_p=rates[2], pers=costs[2], Lam=Lam, p_empty=p_empty, wait=wait)


def _mean_cost(total, rate):
    safe = jnp.where(rate == 0.0, 1.0, rate)
    return jnp.where(rate == 0.0, 1.0, jnp.sum(total) / safe)  # any positive holding when unreachable


def _solve(model: AvailabilityModel):
    if model.spares is None:
        return _solve_given(model, 1.0)[0]
    # the pool sees spare-taking faults per second of wall time: a few fixed-point sweeps
    share = jax.lax.fori_loop(0, _POOL_SWEEPS - 1, lambda _, sh: _solve_given(model, sh)[1],
                              jnp.asarray(1.0))
    return _solve_given(model, share)[0]


_POOL_SWEEPS = 5


def _solve_given(model: AvailabilityModel, running_share):
    ep = _episodes(model, running_share)
    cp = model.checkpoint
    n = max(cp.memory_per_persistent, 1)
    has_mem = cp.memory_per_persistent > 0
    background = cp.save_mode is SaveMode.BACKGROUND
    tau_m = cp.interval / n
    c_m = cp.memory_save_time if has_mem else 0.0
    lam_m, lam_p, h = ep["lam_m"], ep["lam_p"], ep["h"]
    a = lam_m + lam_p

    # running states: (name, length, work part at the start, interference share, next, reward)
    run = []
    last = f"S{n - 1}"
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
    del last
    names = ["F"] + ([f"M_{r[0]}" for r in run] if has_mem else []) + [r[0] for r in run]
    idx = {s: i for i, s in enumerate(names)}
    N = len(names)
    P = jnp.zeros((N, N))
    hold = jnp.zeros(N)
    rec_m = _mean_cost(ep["mem"], lam_m)
    rec_p = _mean_cost(ep["pers"], lam_p)
    hold = hold.at[idx["F"]].set(rec_p)
    P = P.at[idx["F"], idx["S0"]].set(1.0)
    reward_flow = []
    work_frac, save_frac = {}, {}
    safe_a = jnp.where(a == 0.0, 1.0, a)
    for name, length, work, interf, nxt, reward in run:
        i = idx[name]
        surv = jnp.exp(-a * length)
        hit = -jnp.expm1(-a * length)
        hold = hold.at[i].set(h * _one_minus_exp_over(a, length))
        P = P.at[i, idx[nxt]].set(surv)
        P = P.at[i, idx["F"]].add(jnp.where(a == 0.0, 0.0, lam_p / safe_a) * hit)
        if has_mem:
            P = P.at[i, idx[f"M_{name}"]].set(jnp.where(a == 0.0, 0.0, lam_m / safe_a) * hit)
            hold = hold.at[idx[f"M_{name}"]].set(rec_m)
            P = P.at[idx[f"M_{name}"], i].set(1.0)
        # share of the running time of an attempt spent in its work part
        wf = _one_minus_exp_over(a, work) / _one_minus_exp_over(a, length)
        work_frac[name] = wf * (1.0 - interf)
        save_frac[name] = 1.0 - wf + wf * interf
        if reward:
            reward_flow.append((i, surv))
    Q = P / hold[:, None]
    Q = Q - jnp.diag(jnp.sum(Q, axis=1))
    pi = stationary_distribution(Q)
    freq = sum(pi[i] * s / hold[i] for i, s in reward_flow)
    good = freq * cp.interval

    run_wall = sum(pi[idx[r[0]]] for r in run)
    running = run_wall / h
    work_time = sum(pi[idx[r[0]]] * work_frac[r[0]] for r in run) / h
    save_time = sum(pi[idx[r[0]]] * save_frac[r[0]] for r in run) / h
    pause_time = run_wall - running

    def split(total, weight):
        s = jnp.sum(weight)
        return total * jnp.where(s == 0.0, 0.0, weight / jnp.where(s == 0.0, 1.0, s))

    pause_c = split(pause_time, ep["pause"])
    mem_c = split(sum(pi[idx[f"M_{r[0]}"]] for r in run) if has_mem else 0.0, ep["mem"])
    pers_c = split(pi[idx["F"]], ep["pers"])
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
    interruptions = ep["Lam"] * running
    lost_work = (work_time - good + c[_STEP]) / jnp.where(interruptions == 0.0, 1.0, interruptions)
    return GoodputResult(
        goodput=good,
        availability=1.0 - unavailability,
        unavailability=unavailability,
        interruptions_per_day=interruptions * DAY,
        lost_work_per_interruption=lost_work,
        lost=lost,
        job_mtbf=1.0 / ep["Lam"],
    ), running


_solve_jit = jax.jit(_solve)


def analyze(model: AvailabilityModel) -> GoodputResult:
    """Goodput, availability, interruptions per day and the lost-time breakdown.

    Args:
        model: the availability model (validated on the host when its values are concrete).

    Returns:
        A :class:`GoodputResult` (JAX scalars; works under ``jax.vmap`` over models).
    """
    _maybe_validate(model)
    return _solve_jit(model)


def _maybe_validate(model):
    from ._checks import concrete

    if concrete(model):
        model.validate()


def goodput(model: AvailabilityModel):
    """Long-run goodput (durable useful work per second of wall time) of ``model``.

    Differentiable: ``jax.grad(goodput)(model)`` gives its derivative with respect to
    every numeric input (fault rates, tier phases, coverages, checkpoint settings).
    """
    _maybe_validate(model)
    return _solve_jit(model).goodput


def goodput_sensitivities(model: AvailabilityModel, *, relative: bool = True) -> dict[str, float]:
    r"""Derivative of goodput with respect to every numeric input, by name.

    Args:
        model: the availability model.
        relative: if true, the elasticity :math:`\partial \ln G / \partial \ln x`
            (the % change of goodput per % change of the input); else :math:`\partial G/\partial x`
            in goodput per unit of the input (per second, per (1/s), ...).

    Returns:
        ``{"fault_rates[optical single lane]": ..., "tiers[job restart].detection": ..., ...}``.
    """
    _maybe_validate(model)
    g, grads = _value_and_grad(model)
    out: dict[str, float] = {}
    names = model.fault_names

    def add(label, value, d):
        value, d = jnp.asarray(value), jnp.asarray(d)
        s = d * value / g if relative else d
        out[label] = float(s)

    for field in ("fault_rates", "fault_degraded_throughput", "fault_detection_time", "fault_spare_nodes",
                  "fault_predicted"):
        for i, nm in enumerate(names):
            add(f"{field}[{nm}]", getattr(model, field)[i], getattr(grads, field)[i])
    for t, gt in zip(model.tiers, grads.tiers):
        for f in dataclasses.fields(t):
            if not f.metadata.get("static"):
                add(f"tiers[{t.name}].{f.name}", getattr(t, f.name), getattr(gt, f.name))
    for f in dataclasses.fields(model.checkpoint):
        if not f.metadata.get("static"):
            add(f"checkpoint.{f.name}", getattr(model.checkpoint, f.name), getattr(grads.checkpoint, f.name))
    if model.spares is not None:
        for f in ("repair_time", "activation_time"):
            add(f"spares.{f}", getattr(model.spares, f), getattr(grads.spares, f))
    for f in ("cards", "migration_time", "step_time"):
        add(f, getattr(model, f), getattr(grads, f))
    return out


_value_and_grad = jax.jit(jax.value_and_grad(lambda m: _solve(m).goodput))


def _with_interval(model, interval):
    cp = dataclasses.replace(model.checkpoint, interval=interval)
    return dataclasses.replace(model, checkpoint=cp)


@jax.jit
def _optimal_interval(model):
    ep = _episodes(model)
    rate = jnp.maximum(ep["lam_m"] + ep["lam_p"], 1e-12)
    cp = model.checkpoint
    cost = jnp.maximum(cp.save_time + cp.memory_save_time, 1e-3)
    guess = jnp.sqrt(2.0 * cost / rate)
    lo = jnp.log(guess) - math.log(1e3)
    hi = jnp.log(guess) + math.log(1e3)
    if cp.save_mode is SaveMode.BACKGROUND:
        n = max(cp.memory_per_persistent, 1)
        lo = jnp.maximum(lo, jnp.log(2.0 * n * (1.0 - cp.write_interference) * cp.write_time + 1e-9))
    f = lambda s: -_solve(_with_interval(model, jnp.exp(s))).goodput  # noqa: E731
    g = (math.sqrt(5.0) - 1.0) / 2.0

    def body(_, state):
        a, b, c, d, fc, fd = state
        left = fc < fd
        a2 = jnp.where(left, a, c)
        b2 = jnp.where(left, d, b)
        c2 = b2 - g * (b2 - a2)
        d2 = a2 + g * (b2 - a2)
        x_new = jnp.where(left, c2, d2)
        f_new = f(x_new)
        fc2 = jnp.where(left, f_new, fd)
        fd2 = jnp.where(left, fc, f_new)
        return a2, b2, jnp.where(left, c2, d), jnp.where(left, c, d2), fc2, fd2

    c0 = hi - g * (hi - lo)
    d0 = lo + g * (hi - lo)
    a, b, *_ = jax.lax.fori_loop(0, 90, body, (lo, hi, c0, d0, f(c0), f(d0)))
    return jnp.exp(0.5 * (a + b))


def optimal_checkpoint_interval(model: AvailabilityModel):
    """The persistent checkpoint interval (seconds of work) that maximises the goodput of
    the whole tiered model (golden-section search on :math:`\\log \\tau`, in JAX).

    The in-memory level keeps its ``memory_per_persistent`` ratio.
    """
    _maybe_validate(model)
    return _optimal_interval(model)


def time_to_train(model: AvailabilityModel, work):
    """Expected wall time (seconds) to complete ``work`` seconds of failure-free training.

    In the long run (``work`` much larger than a checkpoint interval) this is
    ``work / goodput``.
    """
    return jnp.asarray(work, dtype=float) / goodput(model)
