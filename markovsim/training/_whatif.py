r"""What-if transforms for the optimisations Sim2Train names (S-SIM-1).

AdaptPack (balancing variable-length micro-batches)
    Packed sequences of different lengths give micro-batches of unequal work (attention
    grows with the square of each sequence's length). In a synchronous pipeline the
    timeline then stretches: a heavy micro-batch holds up the stages behind it. With
    micro-batch work :math:`w_i` (mean 1, lognormal with coefficient of variation
    :math:`c`), the gain of balancing is
    :math:`\mathbb{E}[T(w)] / T(\bar w) - 1`, both timelines simulated block by block
    (:func:`pipeline_makespans`) with the same total work.

AdaptS/R (sends and receives scheduled against compute)
    Hiding a fraction :math:`h` of the exposed communication :math:`E` cuts the step by
    :math:`h E / T`. The pair of seed figures (exposed communication -89.84 %, step
    -3.25 %) therefore fixes the unpublished share :math:`E/T = 3.25/89.84`.

AdaptExpert (expert placement under skewed routing)
    With routing popularity :math:`\propto r^{-s}` (Zipf exponent :math:`s`) over the
    routed experts and ``experts/devices`` experts per EP device, the MoE layer runs at the
    pace of the most loaded device: the imbalance :math:`I` = max / mean device load.
    Random placement gives :math:`I_0`; AdaptExpert's placement (greedy
    longest-processing-time, heaviest expert to the least loaded device) gives
    :math:`I_1`. With the share :math:`\phi` of the step spent in expert compute and
    all-to-all at perfect balance, the end-to-end gain is
    :math:`(1 + \phi (I_0 - 1)) / (1 + \phi (I_1 - 1)) - 1`.
"""

from __future__ import annotations

import heapq

import numpy as np

from .._errors import InvalidParameterError, check_finite, check_integer, check_nonnegative, check_probability, check_size
from ._pipeline import _BLOCK_BYTES, _MAX_TIMELINE_BYTES, BlockTimes, Schedule, _check, _durations, _Layout, _orders_1f1b, _orders_gpipe, \
    _orders_interleaved, _run_orders, _schedule

__all__ = ["pipeline_makespans", "adapt_pack_gain", "adapt_sr_effect", "implied_exposed_share",
           "expert_imbalance", "adapt_expert_gain"]


def pipeline_makespans(schedule, pp, micro_batches, work, *, virtual_stages=1) -> np.ndarray:
    """Makespans of one iteration whose micro-batch ``i`` has work ``work[..., i]``
    (forward 1 x work, fused backward 2 x work, per whole stage), for GPipe, 1F1B and
    interleaved 1F1B; vectorised over the leading axes of ``work``."""
    sched = _schedule(schedule)
    if sched not in (Schedule.GPIPE, Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED):
        raise InvalidParameterError(
            f"schedule={sched.value!r}: variable micro-batch work is simulated for gpipe, 1f1b "
            "and interleaved")
    times = BlockTimes(1.0, 1.0, 1.0)
    p, m, v = _check(sched, pp, micro_batches, virtual_stages, times)
    check_size("pipeline_makespans", 3 * p * m * v, item_bytes=_BLOCK_BYTES, what="blocks (3 x pp x "
               "micro_batches x virtual_stages)", limit_bytes=_MAX_TIMELINE_BYTES)
    check_finite("work", work)
    work = np.asarray(work, float)
    if work.shape[-1] != m:
        raise InvalidParameterError(f"work: last axis {work.shape[-1]} != micro_batches={m}")
    check_nonnegative("work", work)
    layout = _Layout(sched, p, m, v)
    orders = {Schedule.GPIPE: lambda: _orders_gpipe(p, m), Schedule.ONE_F_ONE_B: lambda: _orders_1f1b(p, m),
              Schedule.INTERLEAVED: lambda: _orders_interleaved(p, m, v)}[sched]()
    # a topological order of the blocks, from one exact run
    sequence = _run_orders(orders, layout, _durations(sched, v, times), True)
    n = layout.chunks
    shape = work.shape[:-1]
    end: dict = {}
    free = [np.zeros(shape) for _ in range(p)]
    for blk in sequence:
        kind, mb, c, s = blk.kind, blk.micro_batch, blk.chunk, blk.stage
        if kind == "F":
            dep = end.get(("F", mb, c - 1)) if c > 0 else None
            dur = work[..., mb] / v
        else:
            dep = end[("BW", mb, c + 1)] if c < n - 1 else end[("F", mb, c)]
            dur = 2.0 * work[..., mb] / v
        start = free[s] if dep is None else np.maximum(free[s], dep)
        end[(kind, mb, c)] = free[s] = start + dur
    return np.max(np.stack(free), axis=0)


def adapt_pack_gain(pp, micro_batches, work_cv, *, schedule="1f1b", virtual_stages=1,
                    draws=400, seed=0) -> float:
    """Throughput gain of balancing micro-batch work whose coefficient of variation is
    ``work_cv`` (lognormal, mean 1), averaged over ``draws`` random iterations."""
    check_nonnegative("work_cv", work_cv)
    if work_cv > 1e150:
        raise InvalidParameterError(f"work_cv={work_cv!r}: expected a coefficient of variation <= 1e150 "
                                    "(its square must be a finite float64)")
    m = check_integer("micro_batches", micro_batches, minimum=1)
    if work_cv == 0:
        return 0.0
    sigma = np.sqrt(np.log1p(work_cv**2))
    z = np.random.default_rng(seed).standard_normal((check_integer("draws", draws, minimum=1), m))
    w = np.exp(sigma * z - sigma**2 / 2)
    uneven = pipeline_makespans(schedule, pp, m, w, virtual_stages=virtual_stages)
    even = pipeline_makespans(schedule, pp, m, np.repeat(w.mean(axis=1, keepdims=True), m, axis=1),
                              virtual_stages=virtual_stages)
    return float(np.mean(uneven) / np.mean(even) - 1.0)


def adapt_sr_effect(exposed_share, hidden_fraction) -> float:
    """Step-time cut (fraction) when ``hidden_fraction`` of an exposed communication that
    takes ``exposed_share`` of the step is hidden behind compute."""
    check_probability("exposed_share", exposed_share)
    check_probability("hidden_fraction", hidden_fraction)
    return float(exposed_share * hidden_fraction)


def implied_exposed_share(step_cut, exposed_cut) -> float:
    """The exposed-communication share of the step that a pair (step cut, exposed cut)
    implies: ``step_cut / exposed_cut``."""
    check_probability("step_cut", step_cut)
    check_probability("exposed_cut", exposed_cut)
    if exposed_cut == 0:
        raise InvalidParameterError("exposed_cut=0: no communication was hidden")
    return float(step_cut / exposed_cut)


def expert_imbalance(experts, devices, zipf_exponent, *, balanced=False, draws=200, seed=0) -> float:
    """Max / mean device load for Zipf-skewed routing over ``experts`` on ``devices``.

    ``balanced=False``: random placement (mean over ``draws``); ``balanced=True``:
    AdaptExpert-style greedy placement (heaviest expert to the least-loaded device, with
    ``experts/devices`` slots each)."""
    e = check_integer("experts", experts, minimum=1)
    d = check_integer("devices", devices, minimum=1)
    if e % d:
        raise InvalidParameterError(f"devices={d}: must divide experts={e}")
    check_nonnegative("zipf_exponent", zipf_exponent)
    pop = np.arange(1, e + 1, dtype=float) ** -float(zipf_exponent)
    pop /= pop.sum()
    slots = e // d
    if balanced:
        heap = [(0.0, i, 0) for i in range(d)]
        loads = np.zeros(d)
        for x in pop:  # already sorted, heaviest first
            load, i, k = heapq.heappop(heap)
            loads[i] = load + x
            if k + 1 < slots:
                heapq.heappush(heap, (loads[i], i, k + 1))
        return float(loads.max() * d)
    rng = np.random.default_rng(seed)
    perms = np.argsort(rng.random((check_integer("draws", draws, minimum=1), e)), axis=1)
    loads = pop[perms].reshape(-1, d, slots).sum(axis=2)
    return float(np.mean(loads.max(axis=1)) * d)


def adapt_expert_gain(moe_share, imbalance_before, imbalance_after) -> float:
    """End-to-end gain of reducing the expert imbalance (module docstring)."""
    check_probability("moe_share", moe_share)
    if imbalance_before < 1 or imbalance_after < 1:
        raise InvalidParameterError(
            f"imbalance_before={imbalance_before!r}, imbalance_after={imbalance_after!r}: "
            "expected max/mean loads >= 1")
    return float((1 + moe_share * (imbalance_before - 1)) / (1 + moe_share * (imbalance_after - 1)) - 1)
