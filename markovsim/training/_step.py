r"""Step time, memory, MFU and HFU of one plan, in one vectorised kernel.

.. math::
    T_\text{step} = T_\text{compute} + T_\text{bubble} + \sum_k (1 - o_k)\, C_k
                   + T_\text{optimizer} + T_\text{straggler}

for the pipeline stage that holds the most layers:

* :math:`T_\text{compute}` = hardware FLOPs of the stage's share of one replica's tokens
  / (peak x ``efficiency.compute``);
* :math:`T_\text{bubble} = T_\text{compute}\, b / (m\,t)` with the per-stage idle time
  :math:`b` of the schedule (:func:`pipeline_bubble_time`, F:B:W = 1:1:1);
* communication :math:`C_k` of each kind, alpha-beta ring costs on the level of the link
  hierarchy each group spans (bandwidth x ``efficiency.bandwidth``), with the overlapped
  fraction :math:`o_k` hidden behind compute:

  - TP: 2 forward + 2 backward collectives per layer per micro-batch on the activation
    (:math:`b\,s\,h` BF16 values / cp), all-gather + reduce-scatter with sequence
    parallelism, all-reduce without (same ring volume); full recomputation repeats the
    2 forward ones; context parallelism (ring attention) adds, per layer and micro-batch,
    :math:`3 (cp-1)` transfers of a K/V block (counted with TP and its overlap);
  - EP: dispatch and combine all-to-alls, forward and backward, per MoE layer per
    micro-batch, of :math:`k` copies of the rank's tokens;
  - PP: a send and a receive of the stage-boundary activation per chunk per micro-batch,
    forward and backward;
  - DP: the BF16 gradients of the stage, reduce-scatter + all-gather (= all-reduce)
    over ``dp`` (dense weights) and over ``tp*cp*dp/ep`` (expert weights);

* :math:`T_\text{optimizer}`: an Adam update of the rank's (ZeRO-sharded) parameters,
  memory-bound: 28 bytes of HBM traffic per parameter (fp32 master, moments, BF16 grad and
  weight, read and written);
* :math:`T_\text{straggler}`: given (seconds), e.g. from
  :func:`markovsim.training.straggler_delay`.

Memory per rank (bytes): weights 2, gradients 2, optimizer states 12 per parameter
(sharded over data parallelism by ZeRO stages 3, 2 and 1 respectively), plus the
activations of the in-flight micro-batches on the first stage, per layer
:math:`s\,b\,h\,(34 + 5 a s / h)/t` without recomputation, :math:`34\,s\,b\,h/t` with
selective and :math:`2\,s\,b\,h/t` with full recomputation (Korthikanti et al. 2022, with
sequence parallelism), must fit in ``efficiency.usable_memory`` x HBM.

MFU = model FLOPs per second per card / peak; HFU the same with hardware FLOPs.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidParameterError, check_nonnegative
from ._hardware import Efficiency, Hardware
from ._pipeline import Schedule, _schedule
from ._plan import LayerSplit, Plan, validate_plan
from ._workload import Recompute, Workload, flops_per_token, parameter_count

__all__ = ["StepBreakdown", "step_time", "evaluate_plans", "workload_constants", "SCHEDULE_CODES",
           "RECOMPUTE_CODES"]

SCHEDULE_CODES = {s: i for i, s in enumerate(Schedule)}
RECOMPUTE_CODES = {r: i for i, r in enumerate(Recompute)}
_BF16 = 2.0
_ADAM_BYTES = 28.0


@dataclasses.dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes (seconds) and what it yields."""

    step_time: float
    compute: float
    bubble: float
    tp_exposed: float
    ep_exposed: float
    pp_exposed: float
    dp_exposed: float
    optimizer: float
    straggler: float
    memory_bytes: float
    tokens_per_s: float
    mfu: float
    hfu: float
    communication_total: float  # before overlap


def workload_constants(workload: Workload, hardware: Hardware, efficiency: Efficiency) -> dict:
    """The scalars the vectorised kernel needs (host-side, concrete)."""
    w = workload.validate()
    hardware.validate()
    efficiency.validate()
    pc = parameter_count(w)
    flops = {r: flops_per_token(w, recompute=r) for r in Recompute}
    lv = hardware.levels
    sizes = np.array([l.domain_size if l.domain_size else np.inf for l in lv], float)
    return dict(
        layers=float(w.layers), moe_layers=float(w.moe_layers), hidden=float(w.hidden),
        heads=float(w.heads), seq=float(w.seq_len),
        top_k=float(w.moe.top_k if w.moe else 0),
        kv_values_per_token=float(2 * w.kv_heads * w.d_head if w.mla is None else
                                  w.heads * (w.mla.qk_nope_head_dim + w.mla.qk_rope_head_dim + w.mla.v_head_dim)),
        dense_params=pc.total - pc.expert_total, expert_params=pc.expert_total,
        model_flops=flops[Recompute.NONE][0],
        hw_flops=np.array([flops[r][1] for r in Recompute], float),
        peak=hardware.peak_flop_per_s, hbm=hardware.hbm_bytes, hbm_bw=hardware.hbm_bandwidth_bytes_per_s,
        level_sizes=sizes, level_bw=np.array([l.bandwidth_bytes_per_s for l in lv], float),
        level_lat=np.array([l.latency_s for l in lv], float),
        eff_compute=efficiency.compute, eff_bw=efficiency.bandwidth,
        o_tp=efficiency.tp_overlap, o_dp=efficiency.dp_overlap, o_ep=efficiency.ep_overlap,
        o_pp=efficiency.pp_overlap, usable=efficiency.usable_memory,
    )


def _level(c, span):
    idx = jnp.sum(span[..., None] > c["level_sizes"], axis=-1)
    idx = jnp.minimum(idx, c["level_sizes"].shape[0] - 1)
    return c["level_bw"][idx] * c["eff_bw"], c["level_lat"][idx]


def _ring(size, n, bw, lat, factor):
    """factor 2 for all-reduce, 1 for reduce-scatter / all-gather / all-to-all."""
    return jnp.where(n > 1, factor * ((n - 1) * lat + (n - 1) / n * size / bw), 0.0)


def _bubble_over_work(code, p, m, v):
    """b / (m t) of each schedule, F:B:W = 1:1:1 (module ``_pipeline`` table)."""
    s = SCHEDULE_CODES
    per_stage = jnp.select(
        [code == s[Schedule.GPIPE], code == s[Schedule.ONE_F_ONE_B], code == s[Schedule.INTERLEAVED],
         code == s[Schedule.ZB_H1], code == s[Schedule.ZB_H2], code == s[Schedule.ZB_V]],
        [3.0 * (p - 1), 3.0 * (p - 1), 3.0 * (p - 1) / v, 1.0 * (p - 1), 1.0 * (p - 1), 0.5 * (p - 1)],
        default=1.0 * (p // 2 - 1),
    )
    return per_stage / (3.0 * m)


def _kernel(c: dict, q: dict) -> dict:
    """All plans at once: ``q`` holds arrays (tp, pp, dp, ep, cp, v, mb, gbs, zero, sp,
    sched, rec, uneven, straggler); returns arrays."""
    f = lambda k: jnp.asarray(q[k], dtype=float)  # noqa: E731
    tp, pp, dp, ep, cp, v = f("tp"), f("pp"), f("dp"), f("ep"), f("cp"), f("v")
    mb, gbs, zero, sp = f("mb"), f("gbs"), f("zero"), f("sp")
    sched, rec = jnp.asarray(q["sched"]), jnp.asarray(q["rec"])
    L, s, h = c["layers"], c["seq"], c["hidden"]
    chunks = pp * v
    per_chunk = jnp.where(f("uneven") > 0, jnp.ceil(L / chunks), L / chunks)
    stage_layers = per_chunk * v  # the fullest stage
    stage_share = stage_layers / L
    m = gbs / (dp * mb)
    tokens_replica = gbs * s / dp
    hw_flops = jnp.asarray(c["hw_flops"])[rec]
    compute = tokens_replica * hw_flops * stage_share / (tp * cp) / (c["peak"] * c["eff_compute"])
    bubble = compute * _bubble_over_work(sched, pp, m, v)
    # TP
    act = mb * s * h * _BF16 / cp
    bw, lat = _level(c, tp)
    n_tp = jnp.where(rec == RECOMPUTE_CODES[Recompute.FULL], 6.0, 4.0)
    tp_comm = stage_layers * m * n_tp * _ring(act, tp, bw, lat, 2.0)
    # CP (ring attention): each of cp-1 steps passes a K/V block, forward once, backward twice
    bw, lat = _level(c, tp * cp)
    kv_block = mb * (s / cp) * c["kv_values_per_token"] * _BF16 / tp
    tp_comm = tp_comm + stage_layers * m * 3.0 * (cp - 1) * (lat + kv_block / bw)
    # EP
    moe_stage = c["moe_layers"] * stage_share
    bw, lat = _level(c, ep)
    tokens_rank = mb * s / (tp * cp)
    a2a = tokens_rank * c["top_k"] * h * _BF16
    ep_comm = moe_stage * m * 4.0 * _ring(a2a, ep, bw, lat, 1.0)
    # PP
    bw, lat = _level(c, 2 * tp * cp * dp)
    boundary = act / jnp.where(sp > 0, tp, 1.0)
    pp_comm = jnp.where(pp > 1, 2.0 * m * v * (lat + boundary / bw), 0.0)
    # DP
    dense_rank = c["dense_params"] * stage_share / tp
    expert_rank = c["expert_params"] * stage_share / ep
    bw, lat = _level(c, tp * cp * dp)
    edp = tp * cp * dp / ep
    dp_comm = (_ring(dense_rank * _BF16, dp * cp, bw, lat, 2.0)
               + _ring(expert_rank * _BF16, edp, bw, lat, 2.0))
    exposed_tp = (1 - c["o_tp"]) * tp_comm
    exposed_ep = (1 - c["o_ep"]) * ep_comm
    exposed_pp = (1 - c["o_pp"]) * pp_comm
    exposed_dp = (1 - c["o_dp"]) * dp_comm
    # optimizer and memory
    shard1 = jnp.where(zero >= 1, dp * cp, 1.0)
    eshard1 = jnp.where(zero >= 1, edp, 1.0)
    params_opt = dense_rank / shard1 + expert_rank / eshard1
    optimizer = params_opt * _ADAM_BYTES / c["hbm_bw"]
    shard = lambda stage, d, e: dense_rank / jnp.where(zero >= stage, d, 1.0) + expert_rank / jnp.where(zero >= stage, e, 1.0)  # noqa: E731
    state_bytes = (_BF16 * shard(3, dp * cp, edp) + _BF16 * shard(2, dp * cp, edp)
                   + 12.0 * shard(1, dp * cp, edp))
    per_layer = jnp.select(
        [rec == RECOMPUTE_CODES[Recompute.NONE], rec == RECOMPUTE_CODES[Recompute.SELECTIVE]],
        [s * mb * h * (34.0 + 5.0 * c["heads"] * s / h) / (tp * cp), 34.0 * s * mb * h / (tp * cp)],
        default=2.0 * s * mb * h / (tp * cp),
    )
    sc = SCHEDULE_CODES
    in_flight = jnp.select(
        [sched == sc[Schedule.GPIPE], sched == sc[Schedule.INTERLEAVED], sched == sc[Schedule.ZB_H2],
         sched == sc[Schedule.DUALPIPE]],
        [m, pp * (1.0 + (pp - 1) / (pp * v)), 2 * pp - 1.0, pp + 1.0],
        default=pp,
    )
    in_flight = jnp.minimum(in_flight, m * jnp.where(sched == sc[Schedule.GPIPE], 1.0, v))
    act_bytes = in_flight * per_layer * stage_layers / jnp.where(sched == sc[Schedule.GPIPE], 1.0, 1.0)
    memory = state_bytes + act_bytes
    straggler = jnp.asarray(q["straggler"], dtype=float)
    step = compute + bubble + exposed_tp + exposed_ep + exposed_pp + exposed_dp + optimizer + straggler
    world = tp * pp * dp * cp
    tokens_per_s = gbs * s / step
    mfu = tokens_per_s * c["model_flops"] / (world * c["peak"])
    hfu = tokens_per_s * hw_flops / (world * c["peak"])
    return dict(step_time=step, compute=compute, bubble=bubble, tp_exposed=exposed_tp,
                ep_exposed=exposed_ep, pp_exposed=exposed_pp, dp_exposed=exposed_dp,
                optimizer=optimizer, straggler=straggler, memory_bytes=memory,
                tokens_per_s=tokens_per_s, mfu=mfu, hfu=hfu,
                communication_total=tp_comm + ep_comm + pp_comm + dp_comm,
                fits=memory <= c["usable"] * c["hbm"])


_jit_kernel = jax.jit(_kernel)


def _plan_arrays(plan: Plan, straggler: float) -> dict:
    return dict(tp=plan.tp, pp=plan.pp, dp=plan.dp, ep=plan.ep, cp=plan.cp, v=plan.virtual_stages,
                mb=plan.micro_batch, gbs=plan.global_batch, zero=plan.zero_stage,
                sp=int(bool(plan.sequence_parallel)), sched=SCHEDULE_CODES[_schedule(plan.schedule)],
                rec=RECOMPUTE_CODES[Recompute(plan.recompute)],
                uneven=int(LayerSplit(plan.layer_split) is LayerSplit.UNEVEN), straggler=straggler)


def _as_jax(c: dict) -> dict:
    return {k: jnp.asarray(v) for k, v in c.items()}


def step_time(workload: Workload, hardware: Hardware, plan: Plan, *,
              efficiency: Efficiency = Efficiency(), straggler_s: float = 0.0,
              world_size: int | None = None) -> StepBreakdown:
    """Time one training step of ``workload`` on ``hardware`` with ``plan``.

    Args:
        workload: the model.
        hardware: accelerator and link hierarchy.
        plan: the parallel plan (validated here; errors name the violated constraint).
        efficiency: achievable fractions and overlaps (named inputs, see
            :class:`Efficiency`).
        straggler_s: expected straggler delay per step, seconds.
        world_size: if given, the plan must tile it exactly.

    Returns:
        a :class:`StepBreakdown` (seconds, bytes, tokens per second, MFU, HFU).

    Raises:
        InvalidParameterError: a plan that breaks a divisibility rule or does not fit in
            the usable HBM.
    """
    validate_plan(workload, plan, world_size=world_size)
    check_nonnegative("straggler_s", straggler_s, unit="s")
    c = workload_constants(workload, hardware, efficiency)
    out = {k: float(v) for k, v in _jit_kernel(_as_jax(c), _plan_arrays(plan, straggler_s)).items()}
    if not out.pop("fits"):
        raise InvalidParameterError(
            f"plan does not fit in HBM: {out['memory_bytes'] / 2**30:.1f} GiB per card needed, "
            f"{efficiency.usable_memory * hardware.hbm_bytes / 2**30:.1f} GiB usable "
            f"({efficiency.usable_memory:.0%} of {hardware.hbm_bytes / 2**30:.0f} GiB on "
            f"{hardware.name}); raise tp/pp/zero_stage, use recomputation or a smaller micro_batch")
    return StepBreakdown(**out)


def evaluate_plans(workload: Workload, hardware: Hardware, plans: dict, *,
                   efficiency: Efficiency = Efficiency()) -> dict:
    """Evaluate many plans in one vectorised pass.

    Args:
        plans: arrays of equal shape under the keys ``tp, pp, dp, ep, cp, v, mb, gbs, zero,
            sp, sched, rec, uneven, straggler`` (``sched`` and ``rec`` as integer codes, see
            :data:`SCHEDULE_CODES` and :data:`RECOMPUTE_CODES`). No validity checks: the
            caller (e.g. :func:`markovsim.training.search_plans`) masks invalid plans.

    Returns:
        a dict of JAX arrays (the :class:`StepBreakdown` fields and ``fits``).
    """
    c = workload_constants(workload, hardware, efficiency)
    return _jit_kernel(_as_jax(c), {k: jnp.asarray(v) for k, v in plans.items()})
