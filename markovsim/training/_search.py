"""Plan search: every valid plan for a model on N cards, evaluated in one vectorised pass.

Candidates: every combination of TP (powers of two up to ``max_tp``), PP (divisors of
the cards up to ``max_pp``), virtual stages, EP (divisors of the routed experts), CP,
micro-batch, ZeRO stage, recomputation (none, selective, full, and full recomputation of a
share of each pipeline chunk's layers, ``partial_recompute``; for MLA and MoE workloads also
the selective module sets NVIDIA's recipes use, :data:`SEARCH_MODULES`) and schedule. Validity (the rules of
:func:`validate_plan`, the schedule's domain, and the HBM limit) is a mask computed with
numpy and the kernel; the best plan is the valid one with the shortest step.

The plan's numerics are not searched but held: GEMM precision, FP8 weights, the attention
kernel, and the formats of the gradient reduction and the Adam moments are those of
``numerics`` (a :class:`Plan`, e.g. the plan file's), by default BF16 GEMMs with BF16
weights, flash attention, FP32 gradient reduction and FP32 moments (:data:`NUMERICS`); so
are the expert dispatch, its routing and format, and Megatron-core's combined 1F1B, which a
candidate carries only where it applies (expert parallelism, a 1F1B or interleaved schedule).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._errors import InvalidParameterError, check_integer
from ._hardware import Efficiency, Hardware
from ._pipeline import Schedule
from ._plan import EPDispatch, ExpertRouting, LayerSplit, Plan
from ._step import DISPATCH_CODES, MODULE_KEYS, RECOMPUTE_CODES, ROUTING_CODES, SCHEDULE_CODES, StepBreakdown, \
    breakdown_from, check_elementwise, evaluate_plans, kernel_constants, module_flags, numerics_values
from ._workload import Attention, Recompute, Workload

__all__ = ["SearchResult", "candidate_plans", "search_plans", "plan_modules", "SEARCH_MODULES", "NUMERICS",
           "plan_numerics"]

#: the plan fields the search holds at one value rather than exploring (its numerics)
NUMERICS = ("precision", "fp8_params", "attention_kernel", "grad_reduce", "optimizer_moments", "ep_dispatch",
            "expert_routing", "ep_dispatch_precision", "combined_1f1b", "fp8_recipe", "elementwise")


def plan_numerics(plan: Plan | None) -> dict:
    """``{field: value}`` of :data:`NUMERICS` of ``plan`` (the defaults of :class:`Plan` for
    ``None``), the values the search holds."""
    if plan is not None and not isinstance(plan, Plan):
        raise InvalidParameterError(f"plan={plan!r}: expected a Plan (its precision and formats) or None")
    p = Plan(tp=1, pp=1, dp=1, global_batch=1) if plan is None else plan  # the defaults
    return {name: getattr(p, name) for name in NUMERICS}


def _numerics_arrays(numerics: dict, shape) -> dict:
    """The kernel's arrays for the held numerics (see :func:`evaluate_plans`)."""
    values = numerics_values(**{k: numerics[k] for k in ("precision", "fp8_params", "attention_kernel", "grad_reduce",
                                                          "optimizer_moments", "ep_dispatch_precision",
                                                          "fp8_recipe", "elementwise")})
    return dict({k: np.full(shape, v) for k, v in values.items()},
                ep_disp=np.full(shape, DISPATCH_CODES[EPDispatch(numerics["ep_dispatch"])]),
                ep_route=np.full(shape, ROUTING_CODES[ExpertRouting(numerics["expert_routing"])]),
                c1f1b=np.full(shape, float(bool(numerics["combined_1f1b"]))))

_SCHEDULES = list(SCHEDULE_CODES)


def _held_for(held: dict, ep: int, schedule: Schedule) -> dict:
    """The held numerics as one candidate can carry them: a held combined 1F1B only where the
    candidate has expert parallelism and a 1F1B or interleaved schedule (the kernel applies it
    there alone)."""
    pairs = ep > 1 and schedule in (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED)
    return dict(held, combined_1f1b=bool(held["combined_1f1b"]) and pairs)


# the search explores Megatron-LM's modes; torchtitan's per-operator policy (the last code) is
# evaluated when a plan names it, not proposed
_RECOMPUTES = [r for r in RECOMPUTE_CODES if r is not Recompute.SELECTIVE_OP]
#: the selective module sets the search adds (``recompute_modules``): MLA's up-projections
#: for latent-attention models (NVIDIA's DeepSeek-V3 recipes), the norms and the experts'
#: activation for MoE models (NVIDIA's gpt-oss-120b recipes)
SEARCH_MODULES = {"mla": ("mla_up_proj",), "moe": ("layernorm", "moe_act")}


def plan_modules(plans: dict, i: int) -> tuple[str, ...]:
    """The ``recompute_modules`` of candidate ``i`` of :func:`candidate_plans` (empty: the
    default, the attention core alone, or no selective recomputation)."""
    if int(plans["rec"][i]) != RECOMPUTE_CODES[Recompute.SELECTIVE] or "rm_core" not in plans:
        return ()
    names = tuple(name for name, key in MODULE_KEYS.items() if plans[key][i] > 0)
    return () if names == ("core_attn",) else names


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """The best plan, its breakdown, and how many candidates were considered / valid (and
    fitting). ``near_fits``: the valid candidates over the modelled memory by at most
    :data:`NEAR_FIT_EXCESS`, which the search does not rank (the memory model is
    pessimistic by up to :data:`PUBLISHED_DENSE_EXCESS` on published runs); ``near_fit`` and
    ``near_fit_breakdown``: the fastest of them (``None`` when there is none)."""

    plan: Plan
    breakdown: StepBreakdown
    candidates: int
    valid: int
    near_fits: int = 0
    near_fit: Plan | None = None
    near_fit_breakdown: StepBreakdown | None = None


#: the largest memory / usable memory of a published dense plan that ran (Llama 3 405B on
#: 8,192-16,384 H100, models/cases/gpu_training_runs.toml): the model's memory is pessimistic by
#: that much on real runs (docs/background/accuracy.md); a test recomputes it
PUBLISHED_DENSE_EXCESS = 1.19
#: how far over the modelled memory a valid plan may be and still be named as a near fit:
#: that excess, rounded up
NEAR_FIT_EXCESS = 0.2


def near_fit_mask(out: dict, usable_bytes: float):
    """Which evaluated plans exceed ``usable_bytes`` by at most :data:`NEAR_FIT_EXCESS`
    (``out``: :func:`evaluate_plans`'s result)."""
    memory = np.asarray(out["memory_bytes"])
    return ~np.asarray(out["fits"]).astype(bool) & (memory <= (1.0 + NEAR_FIT_EXCESS) * usable_bytes)


def candidate_plans(workload: Workload, cards: int, *, global_batch: int, max_tp: int = 8,
                    max_pp: int = 64, virtual_stages=(1, 2, 3, 4, 6, 8), context_parallel=(1, 2),
                    micro_batches=(1, 2, 4), zero_stages=(0, 1, 2, 3),
                    partial_recompute=(0.5,), numerics: Plan | None = None) -> tuple[dict, np.ndarray]:
    """All combinations as arrays, and the mask of those that obey the divisibility and
    schedule rules (memory is checked by the kernel). ``partial_recompute``: shares of each
    pipeline chunk's layers recomputed in full (Megatron-core's block method; rounded to
    whole layers, at least one and one fewer than the chunk holds), each one more mode
    beside none, selective and full. ``numerics``: the plan whose precision, FP8 weights,
    attention kernel and gradient and moment formats every candidate takes
    (:data:`NUMERICS`; default BF16, flash attention, FP32 gradients and moments)."""
    w = workload.validate()
    if numerics is not None and not isinstance(numerics, Plan):
        raise InvalidParameterError(f"numerics={numerics!r}: expected a Plan (its precision and formats) or None")
    held = plan_numerics(numerics)
    try:
        shares = tuple(float(x) for x in partial_recompute)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"partial_recompute={partial_recompute!r}: expected a sequence of shares "
                                    "strictly between 0 and 1") from None
    if any(not 0.0 < x < 1.0 for x in shares):
        raise InvalidParameterError(f"partial_recompute={partial_recompute!r}: expected shares strictly between 0 and 1")
    modes = ([(RECOMPUTE_CODES[r], 0.0, ()) for r in _RECOMPUTES]
             + [(RECOMPUTE_CODES[Recompute.FULL], x, ()) for x in shares])
    if w.attention is Attention.MLA:
        modes.append((RECOMPUTE_CODES[Recompute.SELECTIVE], 0.0, SEARCH_MODULES["mla"]))
    if w.moe is not None:
        modes.append((RECOMPUTE_CODES[Recompute.SELECTIVE], 0.0, SEARCH_MODULES["moe"]))
    n = check_integer("cards", cards, minimum=1)
    gbs = check_integer("global_batch", global_batch, minimum=1)
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max_tp]
    pps = [p for p in range(1, max_pp + 1) if n % p == 0]
    eps = [1] if w.moe is None else [e for e in range(1, w.moe.routed_experts + 1)
                                     if w.moe.routed_experts % e == 0]
    grids = np.meshgrid(tps, pps, list(virtual_stages), eps, list(context_parallel), list(micro_batches),
                        list(zero_stages), range(len(modes)), range(len(_SCHEDULES)), indexing="ij")
    tp, pp, v, ep, cp, mb, zero, mode, sched = (g.ravel() for g in grids)
    rec = np.array([code for code, _, _ in modes])[mode]
    share = np.array([x for _, x, _ in modes])[mode]
    flags = [module_flags(names) for _, _, names in modes]
    module_arrays = {key: np.array([f[key] for f in flags])[mode] for key in MODULE_KEYS.values()}
    most = -(-w.layers // (pp * v))  # the fullest chunk's layers
    rec_layers = np.where(share > 0, np.clip(np.rint(share * most), 1, np.maximum(most - 1, 1)), 0).astype(int)
    unit = tp * pp * cp
    dp = np.where(n % unit == 0, n // np.maximum(unit, 1), 0)
    ok = (dp >= 1) & (n % unit == 0)
    ok &= w.heads % tp == 0
    if w.attention is Attention.GQA:
        ok &= (w.kv_heads % tp == 0) | (tp % w.kv_heads == 0)
    ok &= pp * v <= w.layers
    ok &= (share == 0) | (most >= 2)  # a partial share needs a chunk of two layers or more
    ok &= (tp * cp * np.maximum(dp, 1)) % ep == 0
    ok &= w.seq_len % cp == 0
    ok &= (tp == 1) | ((w.seq_len // cp) % tp == 0)  # sequence parallelism (on with tp > 1) splits the sequence
    dpm = np.maximum(dp, 1) * mb
    ok &= gbs % dpm == 0
    m = gbs // dpm
    s = SCHEDULE_CODES
    il, zbv, dual = sched == s[Schedule.INTERLEAVED], sched == s[Schedule.ZB_V], sched == s[Schedule.DUALPIPE]
    ok &= np.where(il, (v >= 2) & (m % pp == 0), np.where(zbv, v == 2, v == 1))
    ok &= np.where(sched == s[Schedule.ZB_H1], m >= pp, True)
    ok &= np.where(sched == s[Schedule.ZB_H2], m >= 2 * pp - 1, True)
    ok &= np.where(zbv, m >= 2 * pp, True)
    ok &= np.where(dual, (pp % 2 == 0) & (m % 2 == 0) & (m >= 3 * pp), True)
    # a pipeline schedule only matters with pp > 1: keep 1F1B alone there
    ok &= (pp > 1) | (sched == s[Schedule.ONE_F_ONE_B])
    uneven = (w.layers % (pp * v) != 0).astype(int)
    plans = dict(tp=tp, pp=pp, dp=np.maximum(dp, 1), ep=ep, cp=cp, v=v, mb=mb,
                 gbs=np.full_like(tp, gbs), zero=zero, sp=(tp > 1).astype(int), sched=sched, rec=rec,
                 rec_layers=rec_layers, uneven=uneven, straggler=np.zeros(tp.shape), shard=np.zeros(tp.shape),
                 **_numerics_arrays(held, tp.shape), **module_arrays)
    return plans, ok


def search_plans(workload: Workload, hardware: Hardware, cards: int, *, global_batch: int,
                 efficiency: Efficiency | None = None, max_tp: int = 8, max_pp: int = 64,
                 numerics: Plan | None = None) -> SearchResult:
    """The fastest valid plan for ``workload`` on ``cards`` accelerators under the HBM
    limit, at ``global_batch`` sequences per step, with the precision and formats of
    ``numerics`` (:func:`candidate_plans`); the plan returned carries them. ``efficiency``
    ``None``: the hardware's (:meth:`Hardware.efficiency`).

    Raises:
        InvalidParameterError: when no candidate is valid and fits in memory.
    """
    efficiency = hardware.efficiency(efficiency)
    if numerics is not None:
        check_elementwise(hardware, numerics)
    plans, ok = candidate_plans(workload, cards, global_batch=global_batch, max_tp=max_tp, max_pp=max_pp,
                                numerics=numerics)
    out = evaluate_plans(workload, hardware, plans, efficiency=efficiency)
    fits = np.asarray(out["fits"])
    times = np.asarray(out["step_time"])
    usable = efficiency.usable_memory * hardware.hbm_bytes
    near = np.flatnonzero(ok & near_fit_mask(out, usable))
    j = int(near[np.argmin(times[near])]) if near.size else None
    step = np.where(ok & fits, times, np.inf)
    i = int(np.argmin(step))
    if not np.isfinite(step[i]):
        raise InvalidParameterError(
            f"cards={cards}, global_batch={global_batch}: no valid plan fits in {usable / 2**30:.1f} GiB per card"
            + ("" if j is None else
               f"; {near.size} exceed it by at most {100 * NEAR_FIT_EXCESS:.0f} % (the memory model runs up to "
               f"{PUBLISHED_DENSE_EXCESS:.2f}x over on published plans that ran), the fastest "
               f"{_short(_plan_at(plans, j, global_batch, numerics))} at "
               f"{float(out['memory_bytes'][j]) / 2**30:.1f} GiB"))
    c = kernel_constants(workload, hardware, efficiency)
    return SearchResult(_plan_at(plans, i, global_batch, numerics), breakdown_from(out, c, plans["straggler"], i),
                        int(ok.size), int((ok & fits).sum()), near_fits=int(near.size),
                        near_fit=None if j is None else _plan_at(plans, j, global_batch, numerics),
                        near_fit_breakdown=None if j is None else breakdown_from(out, c, plans["straggler"], j))


def plan_layout(tp, pp, dp, ep, cp, virtual_stages, micro_batch, zero_stage, schedule, recompute) -> str:
    """A plan's layout in one phrase (for messages): the degrees, the schedule and the
    recomputation as text."""
    return (f"tp {tp} pp {pp} dp {dp}" + (f" ep {ep}" if ep > 1 else "") + (f" cp {cp}" if cp > 1 else "")
            + f" v {virtual_stages} mb {micro_batch} zero {zero_stage} {schedule} {recompute}")


def _short(p: Plan) -> str:
    return plan_layout(p.tp, p.pp, p.dp, p.ep, p.cp, p.virtual_stages, p.micro_batch, p.zero_stage,
                       p.schedule.value, p.recompute.value)


def _plan_at(plans: dict, i: int, global_batch: int, numerics: Plan | None) -> Plan:
    """Candidate ``i`` of :func:`candidate_plans` as a :class:`Plan` carrying the held numerics."""
    return Plan(tp=int(plans["tp"][i]), pp=int(plans["pp"][i]), dp=int(plans["dp"][i]),
                global_batch=global_batch, micro_batch=int(plans["mb"][i]), virtual_stages=int(plans["v"][i]),
                ep=int(plans["ep"][i]), cp=int(plans["cp"][i]), zero_stage=int(plans["zero"][i]),
                sequence_parallel=bool(plans["sp"][i]), schedule=_SCHEDULES[int(plans["sched"][i])],
                recompute=_RECOMPUTES[int(plans["rec"][i])], recompute_layers=int(plans["rec_layers"][i]),
                recompute_modules=plan_modules(plans, i),
                layer_split=LayerSplit.UNEVEN if plans["uneven"][i] else LayerSplit.EVEN,
                **_held_for(plan_numerics(numerics), int(plans["ep"][i]), _SCHEDULES[int(plans["sched"][i])]))
