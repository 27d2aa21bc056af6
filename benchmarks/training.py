"""Plan evaluations per second: one vectorised pass against a Python loop, one plan at a time.

Run: ``.venv/bin/python benchmarks/training.py``. Compile time is reported apart from run
time; run times are the median of repeats with ``block_until_ready``; the peer (the public
``step_time`` called plan by plan) is measured in the same run. The Pangu plan uses the
single-fraction compute model (Ascend has no fitted kernel model); a second row times the
operator model (GPT-3 175B on A100s, every GEMM, attention and memory-bound operator).
Also times a full plan search for 8,192 cards (dense and MoE), after compilation.
"""

from __future__ import annotations

import time

import jax
import numpy as np

import markovsim  # noqa: F401
from _timing import median_time
from markovsim.training import (RECOMPUTE_CODES, SCHEDULE_CODES, LayerSplit, Plan, Recompute, Schedule,
                                candidate_plans, evaluate_plans, load_plan, search_plans, step_time)


def main() -> None:
    spec = load_plan("pangu_ultra_135b_8k")
    w, hw, eff = spec.workload, spec.hardware, spec.efficiency
    plans, ok = candidate_plans(w, 8192, global_batch=2048)
    idx = np.flatnonzero(ok)
    n_vec = idx.size
    batch = {k: np.asarray(v)[idx] for k, v in plans.items()}
    t0 = time.perf_counter()
    jax.block_until_ready(evaluate_plans(w, hw, batch, efficiency=eff))
    compile_s = time.perf_counter() - t0
    vec_s = median_time(lambda: jax.block_until_ready(evaluate_plans(w, hw, batch, efficiency=eff)), 5)
    # a larger batch (all candidates, valid or not) for throughput
    t0 = time.perf_counter()
    jax.block_until_ready(evaluate_plans(w, hw, plans, efficiency=eff))
    compile_big = time.perf_counter() - t0
    big_s = median_time(lambda: jax.block_until_ready(evaluate_plans(w, hw, plans, efficiency=eff)), 5)
    gpt = load_plan("gpt3_175b_a100_1024")
    gplans, gok = candidate_plans(gpt.workload, 1024, global_batch=1536)
    t0 = time.perf_counter()
    jax.block_until_ready(evaluate_plans(gpt.workload, gpt.hardware, gplans, efficiency=gpt.efficiency))
    compile_ops = time.perf_counter() - t0
    ops_s = median_time(lambda: jax.block_until_ready(
        evaluate_plans(gpt.workload, gpt.hardware, gplans, efficiency=gpt.efficiency)), 5)
    # the peer: the public step_time, one plan at a time
    scheds, recs = list(SCHEDULE_CODES), list(RECOMPUTE_CODES)
    sample = idx[:: max(1, n_vec // 200)][:200]
    loop_plans = [Plan(tp=int(plans["tp"][i]), pp=int(plans["pp"][i]), dp=int(plans["dp"][i]), global_batch=2048,
                       micro_batch=int(plans["mb"][i]), virtual_stages=int(plans["v"][i]), ep=int(plans["ep"][i]),
                       cp=int(plans["cp"][i]), zero_stage=int(plans["zero"][i]), sequence_parallel=bool(plans["sp"][i]),
                       schedule=scheds[int(plans["sched"][i])], recompute=recs[int(plans["rec"][i])],
                       layer_split=LayerSplit.UNEVEN if plans["uneven"][i] else LayerSplit.EVEN) for i in sample]

    def loop():
        for p in loop_plans:
            try:
                step_time(w, hw, p, efficiency=eff)
            except markovsim.MarkovsimError:
                pass  # plans over the HBM limit: still evaluated

    loop()  # warm-up (compiles the scalar kernel)
    loop_s = median_time(loop, 3)
    rate_loop = len(loop_plans) / loop_s
    rows = [
        ("vectorised, valid plans", n_vec, vec_s, n_vec / vec_s, compile_s),
        ("vectorised, all candidates", ok.size, big_s, ok.size / big_s, compile_big),
        ("operator model, all candidates", gok.size, ops_s, gok.size / ops_s, compile_ops),
        ("Python loop of step_time", len(loop_plans), loop_s, rate_loop, float("nan")),
    ]
    print(f"{'method':30s} {'plans':>9s} {'run s':>9s} {'plans/s':>12s} {'vs loop':>9s} {'compile s':>10s}")
    for name, n, s, rate, comp in rows:
        print(f"{name:30s} {n:9d} {s:9.4f} {rate:12.0f} {rate / rate_loop:9.1f} {comp:10.3f}")
    print()
    for name in ("pangu_ultra_135b_8k", "pangu_ultra_moe_718b_a2_8k"):
        s = load_plan(name)
        search_plans(s.workload, s.hardware, 8192, global_batch=s.plan.global_batch, efficiency=s.efficiency)
        t = median_time(lambda: search_plans(s.workload, s.hardware, 8192, global_batch=s.plan.global_batch,
                                             efficiency=s.efficiency), 3)
        r = search_plans(s.workload, s.hardware, 8192, global_batch=s.plan.global_batch, efficiency=s.efficiency)
        print(f"full plan search, {s.workload.name}, 8192 cards: {r.candidates} candidates, {r.valid} valid, "
              f"{t:.3f} s (after compilation); best step {r.breakdown.step_time:.3f} s, MFU {r.breakdown.mfu:.3f}")


if __name__ == "__main__":
    main()
