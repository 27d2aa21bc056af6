"""Benchmarks of markovsim.availability against the obvious peers, measured in one run.

1. Goodput plus the exact optimal checkpoint interval for 1,000,000 configurations
   (save time, MTBF, restart time, downtime), vectorised in JAX
   (``optimal_interval_and_goodput``: the Lambert-W optimum as a 30-term series in
   sqrt(2 C/M), and the goodput at the optimum in closed form), against a Python loop
   calling ``scipy.optimize.minimize_scalar`` per configuration (timed on a subset,
   extrapolated per configuration). The composition a user might write first,
   ``checkpoint_goodput(optimal_interval(...), ...)``, is timed as well.
2. The Monte-Carlo twin (``markovsim.availability.simulate``) in simulated replica-steps
   per second (1-second steps) against a SimPy discrete-event simulation of the same
   scenario (checkpointed job, exponential failures while running or restarting, downtime
   and restart), measured in the same run.

Compile time is reported apart from run time; run times are the median of repeats after
``block_until_ready``. Usage: ``.venv/bin/python benchmarks/availability.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

import markovsim  # noqa: F401  (float64)
from _timing import median_time
from markovsim import DAY
from markovsim.availability import (
    analyze,
    checkpoint_goodput,
    optimal_interval,
    optimal_interval_and_goodput,
    simulate,
    single_tier_model,
)


def configurations(n, seed=0):
    rng = np.random.default_rng(seed)
    save = 10 ** rng.uniform(0.5, 3, n)  # 3 s .. 17 min
    mtbf = 10 ** rng.uniform(3.5, 6.5, n)  # 1 h .. 37 days
    restart = 10 ** rng.uniform(1, 3.5, n)
    down = 10 ** rng.uniform(0, 3, n)
    return save, mtbf, restart, down


_batch = jax.jit(optimal_interval_and_goodput)


@jax.jit
def _composed(save, mtbf, restart, down):
    tau = optimal_interval(save, mtbf)
    return tau, checkpoint_goodput(tau, save, mtbf, restart, down)


def _scipy_one(save, mtbf, restart, down):
    def neg(tau):
        return -tau / ((mtbf + down) * math.exp(restart / mtbf) * math.expm1((tau + save) / mtbf))

    young = math.sqrt(2 * save * mtbf)
    res = scipy.optimize.minimize_scalar(neg, bounds=(1e-3 * young, min(10 * young, 50 * mtbf)), method="bounded",
                                         options={"xatol": 1e-6 * young})
    return res.x, -res.fun


def bench_optimum(n, n_loop):
    save, mtbf, restart, down = (jnp.asarray(a) for a in configurations(n))
    t0 = time.perf_counter()
    jax.block_until_ready(_batch(save, mtbf, restart, down))
    compile_s = time.perf_counter() - t0
    run_s = median_time(lambda: jax.block_until_ready(_batch(save, mtbf, restart, down)), 21, warmup=10)
    tau, good = (np.asarray(a) for a in _batch(save, mtbf, restart, down))
    jax.block_until_ready(_composed(save, mtbf, restart, down))
    composed_s = median_time(lambda: jax.block_until_ready(_composed(save, mtbf, restart, down)), 21, warmup=10)
    good_composed = np.asarray(_composed(save, mtbf, restart, down)[1])
    cfg = [np.asarray(a)[:n_loop] for a in (save, mtbf, restart, down)]
    t0 = time.perf_counter()
    ref = [_scipy_one(*map(float, c)) for c in zip(*cfg)]
    loop_s = time.perf_counter() - t0
    ref_tau = np.array([r[0] for r in ref])
    ref_good = np.array([r[1] for r in ref])
    per_loop = loop_s / n_loop
    return dict(n=n, compile_s=compile_s, run_s=run_s, per_config_jax=run_s / n, per_config_loop=per_loop,
                speedup=per_loop * n / run_s, composed_s=composed_s, composed_speedup=per_loop * n / composed_s,
                max_rel_composed=float(np.max(np.abs(good_composed - good) / good)),
                max_rel_goodput_gap=float(np.max((good[:n_loop] - ref_good) / ref_good)),
                max_rel_tau_diff=float(np.max(np.abs(tau[:n_loop] - ref_tau) / tau[:n_loop])))


def simpy_run(mtbf, interval, save, restart, down, horizon, seed):
    """One replica as a SimPy discrete-event simulation; returns (durable work, time of last save)."""
    import simpy

    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    state = {"exposed": False, "work": 0.0, "t_credit": 0.0}

    def job(env):
        while state["t_credit"] < horizon:
            try:  # run a segment: work then save
                state["exposed"] = True
                yield env.timeout(interval + save)
                state["work"] += interval
                state["t_credit"] = env.now
            except simpy.Interrupt:
                while True:  # recover: downtime (no failures), then restart (failures restart it)
                    state["exposed"] = False
                    yield env.timeout(down)
                    try:
                        state["exposed"] = True
                        yield env.timeout(restart)
                        break
                    except simpy.Interrupt:
                        continue

    def failures(env, proc):
        while True:
            yield env.timeout(rng.exponential(mtbf))
            if state["exposed"] and proc.is_alive:
                proc.interrupt()

    proc = env.process(job(env))
    env.process(failures(env, proc))
    env.run(until=proc)
    return state["work"], state["t_credit"]


def bench_twin(replicas, horizon, simpy_replicas):
    interval, save, mtbf, restart, down = 3000.0, 100.0, 20000.0, 300.0, 60.0
    model = single_tier_model(interval, save, mtbf, restart, down)
    t0 = time.perf_counter()
    simulate(model, replicas=replicas, horizon=horizon, dt=1.0, seed=0)
    first = time.perf_counter() - t0
    results = []
    run_s = median_time(lambda: results.append(simulate(model, replicas=replicas, horizon=horizon, dt=1.0, seed=1)), 3)
    r = results[-1]
    steps_jax = r.replica_steps / run_s
    t0 = time.perf_counter()
    sims = [simpy_run(mtbf, interval, save, restart, down, horizon, seed) for seed in range(simpy_replicas)]
    simpy_s = time.perf_counter() - t0
    simpy_steps = sum(t for _, t in sims) / 1.0
    g_simpy = np.mean([w / t for w, t in sims])
    return dict(replicas=replicas, horizon_days=horizon / DAY, compile_s=first - run_s, run_s=run_s,
                steps_per_s_jax=steps_jax, steps_per_s_simpy=simpy_steps / simpy_s,
                speedup=steps_jax / (simpy_steps / simpy_s), goodput_twin=r.goodput.mean, goodput_ci=r.goodput.ci,
                goodput_simpy=g_simpy, goodput_exact=float(analyze(model).goodput))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = p.parse_args()
    n, n_loop = (100_000, 200) if args.quick else (1_000_000, 2_000)
    reps, horizon, simpy_reps = (256, 30 * DAY, 4) if args.quick else (16384, 30 * DAY, 64)
    print(f"jax {jax.__version__}, devices {jax.devices()}")
    o = bench_optimum(n, n_loop)
    t = bench_twin(reps, horizon, simpy_reps)
    rows = [
        ("goodput + exact optimum", f"{o['n']:,} configs", f"{o['run_s']:.3f} s (compile {o['compile_s']:.2f} s)",
         f"{o['per_config_loop'] * o['n']:.0f} s (scipy loop, extrapolated from {n_loop:,})", f"{o['speedup']:,.0f}x"),
        ("  same, composed: checkpoint_goodput(optimal_interval)", f"{o['n']:,} configs", f"{o['composed_s']:.3f} s",
         "same loop", f"{o['composed_speedup']:,.0f}x"),
        ("Monte-Carlo twin", f"{t['replicas']:,} x {t['horizon_days']:.0f} d, 1-s steps",
         f"{t['steps_per_s_jax']:.3e} steps/s (compile {t['compile_s']:.1f} s)",
         f"{t['steps_per_s_simpy']:.3e} steps/s (SimPy DES)", f"{t['speedup']:,.0f}x"),
    ]
    widths = [max(len(r[i]) for r in rows + [("benchmark", "size", "markovsim", "peer", "ratio")]) for i in range(5)]
    head = ("benchmark", "size", "markovsim", "peer", "ratio")
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print()
    print(f"checks: scipy's bounded search never beats the Lambert-W optimum by more than "
          f"{o['max_rel_goodput_gap']:.1e} (relative goodput); interval agreement {o['max_rel_tau_diff']:.1e}; "
          f"closed-form goodput vs composed {o['max_rel_composed']:.1e}")
    print(f"        goodput exact {t['goodput_exact']:.5f}, twin {t['goodput_twin']:.5f} "
          f"(99 % CI {t['goodput_ci'][0]:.5f}-{t['goodput_ci'][1]:.5f}), SimPy {t['goodput_simpy']:.5f}")


if __name__ == "__main__":
    main()
