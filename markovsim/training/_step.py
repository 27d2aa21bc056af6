r"""Step time, memory, MFU and HFU of one plan, in one vectorised kernel.

.. math::
    T_\text{step} = T_\text{compute} + T_\text{bubble} + \sum_k E_k
                   + T_\text{optimizer} + T_\text{grad norm} + T_\text{sync}
                   + T_\text{overhead} + T_\text{data} + T_\text{straggler}

for the pipeline stage that holds the most layers (the fullest stage, with the logits):

* :math:`T_\text{compute} = m\, t_\text{mb}`, with :math:`t_\text{mb}` one micro-batch's
  forward, backward and recomputation through the stage's layers (and, on the last stage,
  the logits, the loss and any multi-token-prediction modules; under DualPipe, which feeds
  micro-batches from both ends, the rank holding the last stage runs it for half of them,
  so half of these), timed operator by operator
  (module ``_operators``) on the hardware's fitted kernel model; with ``efficiency.compute``
  given instead, every hardware FLOP at that fraction of peak (the single-scalar model,
  kept for hardware without a fitted kernel model); each MoE layer adds the kernel
  model's ``moe_expert_overhead_s`` per local expert (launches and host synchronisation of
  the dropless path; 0 in every preset). Communication hidden behind compute
  takes ``comm_sm_fraction`` of the cores: the compute it overlaps runs
  :math:`1/(1-f)` slower;
  With ``recompute_layers`` (partial full recomputation, Megatron-core's block method),
  every per-layer quantity (time, FLOPs, TP and EP transfers, activations) is that of the
  layers kept plus the share :math:`\phi` of recomputed layers times the difference to full
  recomputation (:func:`recompute_split`);
* :math:`T_\text{bubble} = t_\text{mb}\, b/3`, the per-stage idle time :math:`b` of the
  schedule in block units (:func:`~markovsim.training._pipeline.idle_per_stage`,
  F:B:W = 1:1:1);
* exposed communication :math:`E_k` of each kind, alpha-beta costs
  (:mod:`~markovsim.training._collectives`) on the level of the link hierarchy each group
  spans, at the collective bandwidth fraction:

  - TP: 2 forward + 2 backward collectives per layer per micro-batch on the activation
    (:math:`b\,s\,h` BF16 values / cp), all-gather + reduce-scatter with sequence
    parallelism, all-reduce without (same ring volume); full recomputation repeats the
    2 forward ones; context parallelism (ring attention) adds :math:`3 (cp-1)` transfers
    of a K/V block per layer and micro-batch (counted with TP and its overlap);
  - EP: dispatch and combine all-to-alls, forward and backward, per MoE layer per
    micro-batch, of copies of the rank's tokens (the transfers toward the experts, the
    forward dispatch and the backward's gradients, in ``ep_dispatch_precision``, BF16 by
    default; the combines in BF16): :math:`k`
    per token with the default ``per-expert`` dispatch, one per destination GPU with
    ``per-rank`` (module ``_dispatch``, which also counts the copies across nodes). When the
    group spans several nodes, each token crosses the scale-out network once per remote node
    it is routed to (:math:`\min(k, M)(1 - 1/N)` per expert with node-limited routing to
    :math:`M` of the :math:`N` nodes) and is forwarded to its experts inside the node; the
    two legs run concurrently. Exposed: :math:`(1 - o_{ep})\,C_{ep}`; under DualPipe, whose paired
    forward and backward chunks hide each other's all-to-all,
    :math:`\max(0, C_{ep} - o_{pair} T_\text{compute})` (``ep_pair_overlap``); with Megatron-core's combined 1F1B
    (``combined_1f1b``, 1F1B or interleaved) the same for the share :math:`\pi` of the
    micro-batches that have a partner, the rest as unpaired ones:
    :math:`(1 - \pi)(1 - o_{ep}) C_{ep} + \pi \max(0, C_{ep} - o_{pair} T_\text{compute})`, with
    :math:`\pi = 1 - w / (m v)` and :math:`w` the first stage's warm-up forwards
    (:math:`p - 1`; interleaved :math:`2(p - 1) + (v - 1)p`; 1 without a pipeline);
  - PP: a send and a receive of the stage-boundary activation per chunk per micro-batch,
    forward and backward, split over the TP ranks (the scatter/gather optimisation of
    Narayanan et al. 2021, sec. 4.1, which sequence parallelism also gives);
  - DP: gradients in the ``grad_reduce`` format, all-reduced (ZeRO 0) or reduce-scattered
    (ZeRO 1-2; per micro-batch with ZeRO-3), hidden by ``dp_overlap``; ZeRO 1-2 then
    all-gather the updated BF16 weights (FP8 with ``fp8_params``), hidden by
    ``param_gather_overlap``, ZeRO-3
    gathers them twice per micro-batch (hidden by ``dp_overlap``); DualPipe's two stages
    per rank reduce and gather both copies (module ``_memory``). Each 40M-parameter
    bucket pays the collective's latency (ring or tree, whichever is less). With hybrid
    sharding (``zero_shard_group`` = :math:`g`) these run inside groups of :math:`g` ranks,
    the optimizer and the memory shard over :math:`g`, and the :math:`dp\,cp/g` replicas
    all-reduce their :math:`1/g` of the gradients over the outermost level (a ring; hidden
    by ``replica_overlap``, which defaults to ``dp_overlap``): once per step with ZeRO 1-2,
    once per layer of the stage with ZeRO-3 (FSDP reduces its gradients layer by layer, so
    each layer's all-reduce pays the ring latency :math:`2(n-1)\alpha` of the outer level);

* :math:`T_\text{optimizer}`: Adam over the rank's (ZeRO-sharded) parameters, memory-bound:
  30 bytes of HBM traffic per parameter (FP32 master, two moments and main gradient read;
  master and moments written, BF16 weight written);
* :math:`T_\text{grad norm}`: reading the rank's gradient shard, plus an all-reduce of one
  number over all ranks, :math:`2\lceil\log_2 N\rceil\alpha` (grows with scale);
* :math:`T_\text{sync}`: the loss all-reduce over all ranks (the same latency), with
  tied embeddings over pipeline stages the embedding-gradient all-reduce between the
  first and last stage, and under FP8 delayed scaling (``Plan.fp8_recipe``) Transformer
  Engine's blocking amax all-reduce at the end of each pipeline chunk's forward and
  backward over the stage's :math:`tp \cdot cp \cdot dp` ranks, :math:`2 m v` of them;
* :math:`T_\text{overhead}`: the kernel model's fixed per-step cost (launches,
  synchronisation), fitted; :math:`T_\text{data}`: exposed data loading, given;
* :math:`T_\text{straggler}`: given (seconds), e.g. from
  :func:`markovsim.training.straggler_delay`.

Memory per rank: module ``_memory`` (a number and ``fits``, never an error).

Outputs: tokens per second; MFU (over the dense BF16 peak, FP8 plans too, as reports
quote it) in the PaLM convention (:math:`6N` + attention without the mask), with causal attention (``mfu_causal``), :math:`6N` alone (``mfu_6n``) and
Megatron-LM's recomputation form (``mfu_megatron``, 4 x forward); HFU with the FLOPs the
plan computes; TFLOP/s per GPU in the PaLM and Megatron conventions.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidParameterError, check_nonnegative
from ._collectives import Algorithm, Collective, _one_level
from ._hardware import Efficiency, Hardware, KernelModel
from ._memory import blended_activation_bytes, embedding_mask_bytes, head_activation_bytes, in_flight, \
    last_stage_in_flight, parameter_copies, state_bytes, zero_group
from ._operators import kernel_model_constants, layer_times, workload_operator_constants
from ._pipeline import SCHEDULE_CODES, Schedule, _schedule, idle_per_stage
from ._plan import ATTENTION_CODES, ELEMENTWISE_CODES, AttentionKernel, Elementwise, EPDispatch, ExpertRouting, \
    FP8Recipe, LayerSplit, Plan, Precision, validate_plan
from ._dispatch import copies_array
from ._workload import FlopConvention, Recompute, Workload, flops_per_token, model_flops_per_token, \
    module_recompute_flops, parameter_count

__all__ = ["StepBreakdown", "step_time", "evaluate_plans", "breakdown_from", "kernel_constants",
           "SCHEDULE_CODES", "RECOMPUTE_CODES", "PLAN_KEYS"]

RECOMPUTE_CODES = {r: i for i, r in enumerate(Recompute)}
_BF16 = 2.0
_ADAM_BYTES = 30.0
_BUCKET_PARAMS = 40e6
#: the plan-array key of each selective-recomputation module (``Plan.recompute_modules``)
MODULE_KEYS = dict(core_attn="rm_core", mla_up_proj="rm_mla", layernorm="rm_ln", mlp="rm_mlp", moe="rm_moe",
                   moe_act="rm_act", shared_experts="rm_shared")
#: the keys of the plan arrays :func:`evaluate_plans` takes
PLAN_KEYS = ("tp", "pp", "dp", "ep", "cp", "v", "mb", "gbs", "zero", "shard", "sp", "sched", "rec", "rec_layers",
             "fp8_params", "uneven", "straggler", "attn", "fp8", "disp_bytes", "grad_bytes", "offload", "opt_bytes",
             "ep_in", "ep_remote", "etp", "c1f1b", "amax", "eager", *MODULE_KEYS.values())


def module_flags(modules: tuple[str, ...]) -> dict:
    """The 0/1 plan arrays of the selective-recomputation modules: ``modules``, or
    ``core_attn`` alone when it names none (Megatron-core's default)."""
    chosen = set(modules) or {"core_attn"}
    return {key: float(name in chosen) for name, key in MODULE_KEYS.items()}


@dataclasses.dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes (seconds), what it yields, and its memory.

    The step is the sum of ``compute``, ``bubble``, the four communication ``*_exposed``
    terms, ``optimizer``, ``grad_norm``, ``sync``, ``overhead``, ``data_loading``,
    ``straggler`` and ``offload_exposed`` (activation offloading's transfers that compute does
    not hide). ``fits``: ``memory_bytes`` within the usable HBM. ``memory_bytes`` is the sum of
    ``weights_bytes`` (the weight copies, with ZeRO-3's gather buffers), ``gradients_bytes``,
    ``optimizer_state_bytes`` (master weights and Adam's moments) and ``activations_bytes``
    (what the fullest stage holds for its micro-batches in flight; module ``_memory``).
    """

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
    grad_norm: float = 0.0
    sync: float = 0.0
    overhead: float = 0.0
    data_loading: float = 0.0
    mfu_causal: float = 0.0
    mfu_6n: float = 0.0
    mfu_megatron: float = 0.0
    tflops_per_gpu: float = 0.0  # PaLM convention, 1e12 FLOP/s
    tflops_per_gpu_megatron: float = 0.0
    usable_memory_bytes: float = 0.0
    fits: bool = True
    offload_exposed: float = 0.0  # activation offloading's transfers not hidden behind compute
    weights_bytes: float = 0.0
    gradients_bytes: float = 0.0
    optimizer_state_bytes: float = 0.0
    activations_bytes: float = 0.0

    #: the time terms that add up to ``step_time``
    PARTS = ("compute", "bubble", "tp_exposed", "ep_exposed", "pp_exposed", "dp_exposed", "optimizer",
             "grad_norm", "sync", "overhead", "data_loading", "straggler", "offload_exposed")


def kernel_constants(workload: Workload, hardware: Hardware, efficiency: Efficiency | None = None) -> dict:
    """The scalars the vectorised kernel needs (host-side, concrete); ``efficiency`` ``None``:
    the hardware's (:meth:`Hardware.efficiency`).

    Raises:
        InvalidParameterError: the hardware has no fitted kernel model and the efficiency
            gives no single compute fraction.
    """
    w = workload.validate()
    hardware.validate()
    efficiency = hardware.efficiency(efficiency).validate()
    legacy = efficiency.compute is not None
    if hardware.kernels is None and not legacy:
        raise InvalidParameterError(
            f"{hardware.name}: no fitted kernel model ([kernels] in the hardware file) and no "
            "efficiency.compute: give one (a single fraction of peak, stated as an assumption) or "
            "fit the kernel model with markovsim.training.calibrate")
    kernels = hardware.kernels or KernelModel()
    pc = parameter_count(w)
    hw_flops = np.array([flops_per_token(w, recompute=r)[1] for r in Recompute], float)
    rmf = module_recompute_flops(w)
    lv = hardware.levels
    sizes = np.array([l.domain_size if l.domain_size else np.inf for l in lv], float)
    eff_bw = efficiency.bandwidth if efficiency.bandwidth is not None else kernels.collective_bandwidth_fraction
    c = workload_operator_constants(w)
    c.update(kernel_model_constants(hardware, kernels))
    c.update(
        dense_params=pc.total - pc.expert_total, expert_params=pc.expert_total,
        embed_params=pc.embedding, output_params=pc.output, mtp_dense=pc.mtp - pc.mtp_expert,
        mtp_expert=pc.mtp_expert,
        tied=1.0 if w.tied_embeddings else 0.0,
        flops_palm=model_flops_per_token(w, FlopConvention.PALM),
        flops_causal=model_flops_per_token(w, FlopConvention.CAUSAL),
        flops_6n=model_flops_per_token(w, FlopConvention.SIX_N),
        flops_megatron=model_flops_per_token(w, FlopConvention.MEGATRON),
        hw_flops=hw_flops, hbm=hardware.hbm_bytes,
        **{f"rmf_{k[3:]}": rmf[name] for name, k in MODULE_KEYS.items()},
        level_sizes=sizes, level_bw=np.array([l.bandwidth_bytes_per_s for l in lv], float),
        level_lat=np.array([l.latency_s for l in lv], float), node_size=float(hardware.node_size),
        eff_bw=float(eff_bw), legacy=1.0 if legacy else 0.0,
        e_compute=float(efficiency.compute if legacy else 1.0),
        o_tp=efficiency.tp_overlap, o_dp=efficiency.dp_overlap, o_ep=efficiency.ep_overlap,
        o_pair=efficiency.ep_pair_overlap,
        o_pp=efficiency.pp_overlap, o_pg=efficiency.param_gather_overlap, usable=efficiency.usable_memory,
        o_rep=efficiency.dp_overlap if efficiency.replica_overlap is None else efficiency.replica_overlap,
        step_overhead=kernels.step_overhead_s if not legacy else 0.0, data_loading=efficiency.data_loading_s,
        comm_sm=efficiency.comm_sm_fraction,
        eta_interleave=float(kernels.interleave_efficiency if not legacy else 1.0), mtp=float(w.mtp_layers), mtp_moe=1.0 if w.moe is not None else 0.0,
        moe_expert_s=float(kernels.moe_expert_overhead_s if not legacy else 0.0),
        host_bw=float(hardware.host_bandwidth_bytes_per_s or 0.0),
    )
    return c


def offloaded_share(q, sh, xp=jnp):
    """The share of the fullest stage's layers whose activations are offloaded to host memory
    (``offload_layers`` of each pipeline chunk)."""
    chunk_layers = sh["stage_layers"] / q["v"]
    return xp.minimum(q["offload"], chunk_layers) / xp.maximum(chunk_layers, 1e-300)


def activation_bytes(c, q, sh, q_kept, q_full, phi, m, xp=jnp):
    """Activations of the fullest stage: the bytes of one micro-batch that offloading moves to
    host memory, and the bytes the fuller of the first and the last stage holds in HBM (its
    micro-batches in flight, the offloaded layers' share left out; the first stage with the
    input embedding's dropout masks, the last with the output layer and the loss)."""
    dense, moe = blended_activation_bytes(c, q_kept, q_full, phi, xp)
    one = dense * (sh["stage_layers"] - sh["moe_stage"]) + moe * sh["moe_stage"]
    share = offloaded_share(q, sh, xp)
    held = one * (1.0 - share)
    first = in_flight(q, m, xp) * (held + embedding_mask_bytes(c, q, xp))
    # the last stage: its layers' micro-batches in flight, and the output layer, the loss and
    # any multi-token-prediction modules (their layers and heads) of the micro-batches between
    # their forward and their backward (all m under GPipe, one otherwise)
    heads = (xp.where(q["sched"] == SCHEDULE_CODES[Schedule.GPIPE], m, 1.0)
             * (head_activation_bytes(c, q, xp) + c["mtp"] * xp.where(c["mtp_moe"] > 0, moe, dense)))
    last = last_stage_in_flight(q, m, xp) * held + heads
    # one stage, or DualPipe's rank holding the first and the last stage, holds both
    single = holds_both_ends(q)
    both = first + heads
    return share * one, xp.where(single, both, first), xp.where(single, both, last)


def holds_both_ends(q):
    """Whether one rank holds the first and the last stage: no pipeline, or DualPipe (whose
    first rank runs stage 0 and stage p - 1)."""
    return (q["pp"] <= 1) | (q["sched"] == SCHEDULE_CODES[Schedule.DUALPIPE])


def stage_parameters(c, q, sh, xp=jnp):
    """Dense and expert parameters of the ranks holding the first and the last stage, for
    the memory: the layers' share of the stage, and on the first stage the input embedding,
    on the last the output layer (a copy of the embedding when the two are tied and there
    is a pipeline), the final norm and the multi-token-prediction modules. One rank holding
    both ends (no pipeline; DualPipe, counted as its two copies of a stage, module
    ``_memory``) holds all of them. Also the embedding's and the output layer's share of each
    (no FP8 copy of them). The times keep the layers' even share (``stage_shares``)."""
    single = holds_both_ends(q)
    dual = q["sched"] == SCHEDULE_CODES[Schedule.DUALPIPE]

    def ends(first, last, whole):
        # one rank with both ends holds the whole; under DualPipe as two stages' worth, which
        # state_bytes's copies factor doubles
        both = xp.where(dual, (first + last) / 2.0, whole)
        return xp.where(single, both, first), xp.where(single, both, last)

    share, t, emb, out = sh["stage_share"], q["tp"], c["embed_params"], c["output_params"]
    layers = (c["dense_params"] - emb - out - c["hidden"]) * share
    head = xp.where(out > 0, out, emb)
    dense = ends(layers + emb, layers + head + c["hidden"] + c["mtp_dense"], c["dense_params"] + c["mtp_dense"])
    mtp_e = c["mtp_expert"] / q["ep"]
    expert = ends(0.0, mtp_e, mtp_e)
    # the embedding and the output layer: no FP8 copy (``state_bytes``'s ``plain_rank``)
    plain = ends(emb, head, emb + out)
    return (dense[0] / t, sh["expert_rank"] + expert[0], dense[1] / t, sh["expert_rank"] + expert[1],
            plain[0] / t, plain[1] / t)


def stage_memory(c, q, sh, q_kept, q_full, phi, m, xp=jnp):
    """The memory of the fuller of the first and the last stage's rank: its weights,
    gradients, optimizer states and activations (bytes), their total, the bytes of one
    micro-batch that offloading moves, and ``first`` (whether the first stage's rank is the
    fuller, the tie included)."""
    moved, act_first, act_last = activation_bytes(c, q, sh, q_kept, q_full, phi, m, xp)
    d_f, e_f, d_l, e_l, p_f, p_l = stage_parameters(c, q, sh, xp)
    # the two ends as one leading axis (one set of operations to trace, not two)
    parts = state_bytes(c, q, xp.stack([d_f, d_l]), xp.stack([e_f, e_l]), sh["edp"], xp, sh["stage_layers"],
                        xp.stack([p_f, p_l])) + (xp.stack([act_first, act_last]),)
    totals = sum(parts)
    take_first = totals[0] >= totals[1]
    parts = tuple(xp.where(take_first, a[0], a[1]) for a in parts)
    return dict(weights=parts[0], grads=parts[1], optimizer=parts[2], activations=parts[3],
                total=xp.maximum(totals[0], totals[1]), moved=moved, first=take_first)


def check_elementwise(hardware: Hardware, plan: Plan) -> None:
    """Refuse eager element-wise operators on hardware whose programs all run through a graph
    compiler (:attr:`Hardware.graph_compiler`: XLA on TPUs), where no eager mode exists."""
    if Elementwise(plan.elementwise) is Elementwise.EAGER and hardware.graph_compiler:
        raise InvalidParameterError(
            f"plan.elementwise='eager': {hardware.name} runs every program through "
            f"{hardware.graph_compiler.upper()} (graph_compiler), which fuses element-wise operators; "
            "expected 'fused'")


def check_offload(hardware: Hardware, plan: Plan) -> None:
    """Refuse a plan that offloads activations to a card whose host link is not described."""
    if plan.offload_layers and hardware.host_bandwidth_bytes_per_s is None:
        raise InvalidParameterError(
            f"plan.offload_layers={plan.offload_layers}: {hardware.name} has no host_link (its bandwidth to "
            "host memory), which offloaded activations cross; expected offload_layers = 0 or a [host_link] "
            "table in the hardware file")


def _level(c, span, xp=jnp):
    """(bandwidth at the collective fraction, latency) of the outermost level ``span``
    consecutive ranks cross."""
    idx = xp.sum(span[..., None] > c["level_sizes"], axis=-1)
    idx = xp.minimum(idx, c["level_sizes"].shape[0] - 1)
    return c["level_bw"][idx] * c["eff_bw"], c["level_lat"][idx]


def _ring(kind, size, n, bw, lat):
    return _one_level(kind, size, n, lat, bw, Algorithm.RING)


def _grouped(c, kind, size, n, stride, xp=jnp):
    r"""One collective among ``n`` ranks placed ``stride`` apart in the rank order, on a
    rail-optimised cluster (one scale-out port per accelerator).

    The :math:`n_\text{in} = \min(n, \lfloor g/\text{stride} \rfloor)` members that share
    an innermost domain of :math:`g` accelerators (a node) work on the buffer together, and
    each drives its own scale-out port with :math:`1/n_\text{in}` of it across the
    :math:`n_\text{out} = n/n_\text{in}` domains (the hierarchical algorithm of the
    ``_collectives`` module; NCCL's rings and trees reach the same bound by running one
    channel per port). All-reduce: reduce-scatter inside + all-reduce across + all-gather
    inside, the across phase at the smaller of the ring latency :math:`2(n_\text{out}-1)\alpha`
    and the tree's :math:`2\lceil\log_2 n_\text{out}\rceil\alpha` (NCCL's double binary tree,
    all-reduce only); reduce-scatter and all-gather: rings only (NCCL has no tree for them),
    the inner phase on the full buffer plus the outer on :math:`1/n_\text{in}`. One member
    per domain: the flat ring on the scale-out level; the whole group in one domain: the ring
    on that level. Zero for :math:`n = 1`."""
    node = c["level_sizes"][0]
    n_in = xp.where(xp.isfinite(node), xp.clip(xp.floor(node / stride), 1.0, n), n)
    n_out = xp.maximum(n / n_in, 1.0)
    bw_in, lat_in = _level(c, stride * n_in, xp)
    bw_out, lat_out = _level(c, stride * n, xp)
    outer = _ring(kind, size / n_in, n_out, bw_out, lat_out)
    if kind is Collective.ALL_REDUCE:
        inner = (_ring(Collective.REDUCE_SCATTER, size, n_in, bw_in, lat_in)
                 + _ring(Collective.ALL_GATHER, size, n_in, bw_in, lat_in))
        steps = xp.minimum(n_out - 1.0, xp.ceil(xp.log2(xp.maximum(n_out, 1.0)) - 1e-12))
        outer = outer - xp.where(n_out > 1, 2.0 * (n_out - 1.0 - steps) * lat_out, 0.0)
    else:
        inner = _ring(kind, size, n_in, bw_in, lat_in)
    return inner + outer


def _bucketed(c, kind, params, bytes_per, n, stride, overlap, xp=jnp):
    """Gradient or weight collectives of ``params`` parameters in buckets, each a
    :func:`_grouped` collective paying its own latency. Megatron-LM's rule (megatron/core
    distributed ``DistributedDataParallelConfig.bucket_size``): with the gradient reduction
    overlapped, buckets of :math:`\\max(4\\cdot 10^7, 10^6 n)` parameters ("larger DP sizes
    need larger buckets to ensure collectives do not become latency-bound"); without overlap,
    one collective on the whole buffer."""
    bucket = xp.maximum(_BUCKET_PARAMS, 1e6 * n)
    buckets = xp.where(overlap > 0, xp.maximum(xp.ceil(params / bucket), 1.0), 1.0)
    return buckets * _grouped(c, kind, params * bytes_per / buckets, n, stride, xp)


def stage_shares(c, q, xp=jnp):
    r"""Layers and parameters of the fullest pipeline stage and its rank. An uneven split
    gives :math:`r = L \bmod (p v)` chunks one layer more than the others, spread over the
    stages: the fullest holds :math:`v \lfloor L/(p v) \rfloor + \lceil r/p \rceil` layers."""
    L = c["layers"]
    chunks = q["pp"] * q["v"]
    small = xp.floor(L / chunks)
    bigger = L - small * chunks  # chunks with one layer more
    uneven_stage = q["v"] * small + xp.ceil(bigger / q["pp"])
    stage_layers = xp.where(q["uneven"] > 0, uneven_stage, L / q["pp"])
    share = stage_layers / L
    return dict(stage_layers=stage_layers, stage_share=share, moe_stage=c["moe_layers"] * share,
                dense_rank=c["dense_params"] * share / q["tp"], expert_rank=c["expert_params"] * share / q["ep"],
                edp=q["tp"] * q["cp"] * q["dp"] / q["ep"])


def recompute_split(c, q, sh, xp=jnp):
    r"""Partial full recomputation (``recompute_layers``, Megatron-core's block method): the
    plan arrays for the layers kept (``rec`` none where only some layers are recomputed),
    the arrays with every layer recomputed, and the share :math:`\phi` of the fullest
    stage's layers that are recomputed (0 unless ``recompute_layers`` is set); a quantity
    per layer is then ``kept + phi (full - kept)``."""
    full_code, none_code = float(RECOMPUTE_CODES[Recompute.FULL]), float(RECOMPUTE_CODES[Recompute.NONE])
    chunk_layers = sh["stage_layers"] / q["v"]
    partial = (q["rec"] == full_code) & (q["rec_layers"] > 0)
    phi = xp.where(partial, xp.minimum(q["rec_layers"], chunk_layers) / xp.maximum(chunk_layers, 1e-300), 0.0)
    kept = dict(q, rec=xp.where(partial, none_code, q["rec"]))
    full = dict(q, rec=xp.full_like(q["rec"], full_code))
    return kept, full, phi


def _kernel(c: dict, q: dict, legacy: bool = False, moe: bool = True) -> dict:
    """All plans at once: ``q`` holds arrays under :data:`PLAN_KEYS`; returns arrays.
    Static switches: ``legacy``, the single-scalar compute model instead of the operators;
    ``moe``, whether the workload has experts (without, the expert terms are left out)."""
    f = lambda k: jnp.asarray(q[k], dtype=float)  # noqa: E731
    q = {k: f(k) for k in PLAN_KEYS if k in q or k != "eager"}  # no eager: all fused (_jit_kernel)
    tp, pp, dp, ep, cp, v = q["tp"], q["pp"], q["dp"], q["ep"], q["cp"], q["v"]
    mb, gbs, zero, sp = q["mb"], q["gbs"], q["zero"], q["sp"]
    s, h = c["seq"], c["hidden"]
    sh = stage_shares(c, q)
    # partial recomputation: each per-layer quantity is kept + phi (full - kept)
    q_kept, q_full, phi = recompute_split(c, q, sh)
    sched, rec = q["sched"], q_kept["rec"].astype(int)
    m = gbs / (dp * mb)
    world = tp * pp * dp * cp
    # compute: operators, or one scalar efficiency
    hw_all = jnp.asarray(c["hw_flops"])
    # selective recomputation repeats the forward FLOPs of its modules (core_attn alone by default)
    sel = rec == RECOMPUTE_CODES[Recompute.SELECTIVE]
    modules = (q["rm_core"] * c["rmf_core"] + q["rm_mla"] * c["rmf_mla"] + q["rm_mlp"] * c["rmf_mlp"]
               + q["rm_moe"] * c["rmf_moe"] + (1.0 - q["rm_moe"]) * q["rm_shared"] * c["rmf_shared"])
    hw_base = jnp.where(sel, hw_all[RECOMPUTE_CODES[Recompute.NONE]] + modules, hw_all[rec])
    hw_flops = hw_base + phi * (hw_all[RECOMPUTE_CODES[Recompute.FULL]] - hw_base)
    if legacy:
        t_mb = mb * s * hw_flops * sh["stage_share"] / (tp * cp) / (c["peak"] * c["e_compute"])
    else:
        # the layers kept are not recomputed where phi > 0: recomputing adds one forward
        lt = layer_times(c, q_kept, jnp)
        lt = dict(lt, dense=lt["dense"] + phi * lt["dense_forward"], moe=lt["moe"] + phi * lt["moe_forward"])
        t_mtp = c["mtp"] * (jnp.where(c["mtp_moe"] > 0, lt["moe"], lt["dense"]) + lt["logit"])
        # DualPipe feeds micro-batches from both ends: the rank holding the last stage runs it
        # for half of them and the first stage (no head) for the other half
        head = jnp.where(sched == SCHEDULE_CODES[Schedule.DUALPIPE], 0.5, 1.0) * (lt["logit"] + t_mtp)
        # the dropless MoE layer's host cost per local expert (kernels.moe_expert_overhead_s):
        # the layer runs at the pace of the slower of the device and the host
        moe_layer = jnp.maximum(lt["moe"], c["moe_expert_s"] * c["experts"] / ep)
        t_mb = (sh["stage_layers"] - sh["moe_stage"]) * lt["dense"] + sh["moe_stage"] * moe_layer + head
    compute = m * t_mb
    one = jnp.ones_like(tp)
    bubble = t_mb * idle_per_stage(sched, pp, v, one, one, one, xp=jnp) / 3.0
    # the interleaved schedule realises a share eta of its ideal bubble reduction
    lost = 1.0 + (1.0 - c["eta_interleave"]) * (v - 1.0)
    bubble = jnp.where(sched == SCHEDULE_CODES[Schedule.INTERLEAVED], bubble * lost, bubble)
    # TP (+ CP ring attention)
    act = mb * s * h * _BF16 / cp
    bw, lat = _level(c, tp)
    n_tp = jnp.where(rec == RECOMPUTE_CODES[Recompute.FULL], 6.0, 4.0) + 2.0 * phi
    tp_comm = sh["stage_layers"] * m * n_tp * _ring(Collective.ALL_REDUCE, act, tp, bw, lat)
    bw, lat = _level(c, tp * cp)
    kv_block = mb * (s / cp) * c["kv_heads"] * (c["d_qk"] + c["d_v"]) * _BF16 / tp
    tp_comm = tp_comm + sh["stage_layers"] * m * 3.0 * (cp - 1) * (lat + kv_block / bw)
    # EP all-to-all, node-limited routing across nodes; the group's ranks sit expert_tp apart,
    # so a node holds node_size / expert_tp of them (ep_node_size) and the group spans ep x etp
    tokens = mb * s / (tp * cp)
    etp = q["etp"]
    n0 = ep_node_size(c["node_size"], etp, xp=jnp)
    bw_in, lat_in = _level(c, jnp.minimum(ep, n0) * etp)
    bw_out, lat_out = _level(c, ep * etp)
    nodes = jnp.ceil(ep / n0)
    # copies of a token inside the node and across nodes (module _dispatch: k and the remote
    # nodes per expert, or the distinct GPUs and nodes of a per-rank dispatch)
    copies, remote = q["ep_in"], q["ep_remote"]
    disp = q["disp_bytes"]  # the format of the transfers toward the experts (ep_dispatch_precision)

    def a2a(copies_bytes):
        inside = _ring(Collective.ALL_TO_ALL, tokens * copies * copies_bytes, jnp.minimum(ep, n0), bw_in, lat_in)
        across = tokens * remote * copies_bytes / bw_out + (nodes - 1.0) * lat_out
        return jnp.where(ep > n0, jnp.maximum(inside, across), inside)

    if moe:
        # the two transfers toward the experts (the forward dispatch, the backward's gradients
        # before the down-projection) in the dispatch format, the two combines in BF16
        ep_layer = 2.0 * a2a(h * disp) + 2.0 * a2a(h * _BF16)
        repeat = a2a(h * disp) + a2a(h * _BF16)  # full recomputation repeats the forward's pair
        again = (rec == RECOMPUTE_CODES[Recompute.FULL]) | ((rec == RECOMPUTE_CODES[Recompute.SELECTIVE])
                                                            & (q["rm_moe"] > 0))  # the "moe" module too
        ep_layer = jnp.where(again, ep_layer + repeat, ep_layer) + phi * repeat
        ep_comm = jnp.where(ep > 1, sh["moe_stage"] * m * ep_layer, 0.0)
    else:
        ep_comm = jnp.zeros_like(tp)
    # PP point-to-point
    bw, lat = _level(c, 2 * tp * cp * dp)
    boundary = act / tp  # scatter/gather over the TP ranks (Narayanan et al. 2021 sec. 4.1)
    pp_comm = jnp.where(pp > 1, 2.0 * m * v * (lat + boundary / bw), 0.0)
    # DP: gradients, then (ZeRO 1-2) the updated weights
    dense_rank, expert_rank, edp = sh["dense_rank"], sh["expert_rank"], sh["edp"]
    n_dp = dp * cp
    # hybrid sharding: ZeRO groups of n_sh ranks; their n_dp / n_sh replicas all-reduce the
    # shards once per step across the outermost level
    n_sh = zero_group(q, jnp)
    gb = q["grad_bytes"]
    ar, rs, ag = Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER
    o_dp, o_pg = c["o_dp"], c["o_pg"]
    # DualPipe's two stages per rank (module _memory): both copies' gradients are reduced and
    # both copies' weights gathered
    copies = parameter_copies(q, jnp)
    gb_dp = gb * copies
    grad_ar = _bucketed(c, ar, dense_rank, gb_dp, n_dp, tp, o_dp)
    grad_rs = _bucketed(c, rs, dense_rank, gb_dp, n_sh, tp, o_dp)
    w_bytes = jnp.where(q["fp8_params"] > 0, 1.0, _BF16) * copies  # the weights gathered: FP8 or BF16
    z3 = zero >= 3
    # the gather is bucketed by the overlap that hides it: ZeRO-3's per-micro-batch gathers
    # by dp_overlap, ZeRO 1-2's one gather after the optimizer step by param_gather_overlap
    o_gather = jnp.where(z3, o_dp, o_pg)
    gather = _bucketed(c, ag, dense_rank, w_bytes, n_sh, tp, o_gather)
    replicas = n_dp / n_sh
    bw_out, lat_out = _level(c, jnp.full_like(n_dp, jnp.inf))  # the outermost level
    # FSDP (ZeRO-3) reduces its gradients layer by layer: the replicas' all-reduce of the
    # shards is one collective per layer of the stage, each paying the ring's latency
    n_rep = jnp.where(zero >= 3, sh["stage_layers"], 1.0)
    replica_ar = jnp.where(replicas > 1, n_rep * _ring(ar, dense_rank / n_sh * gb_dp / n_rep, replicas, bw_out, lat_out),
                           0.0)
    if moe:
        grad_ar = grad_ar + _bucketed(c, ar, expert_rank, gb_dp, edp, ep, o_dp)
        grad_rs = grad_rs + _bucketed(c, rs, expert_rank, gb_dp, edp, ep, o_dp)
        gather = gather + _bucketed(c, ag, expert_rank, w_bytes, edp, ep, o_gather)
    dp_grad = jnp.where(zero == 0, grad_ar, jnp.where(z3, m * grad_rs, grad_rs))
    dp_param = jnp.where(zero == 0, 0.0, jnp.where(z3, 2.0 * m * gather, gather))
    exposed_tp = (1 - c["o_tp"]) * tp_comm
    ep_dual = jnp.maximum(ep_comm - c["o_pair"] * compute, 0.0)
    exposed_ep = jnp.where(sched == SCHEDULE_CODES[Schedule.DUALPIPE], ep_dual, (1 - c["o_ep"]) * ep_comm)
    # Megatron-core's combined 1F1B (combined_1f1b): each micro-batch's all-to-all hides behind
    # the computation of the one paired with it, as under DualPipe; the first stage's warm-up
    # forwards (Megatron's count: pp - 1, interleaved 2 (pp - 1) + (v - 1) pp; without a
    # pipeline the first forward) and as many cool-down backwards have no partner and hide
    # the unpaired fraction ep_overlap
    inter = sched == SCHEDULE_CODES[Schedule.INTERLEAVED]
    warm = jnp.where(pp > 1, jnp.where(inter, 2.0 * (pp - 1.0) + (v - 1.0) * pp, pp - 1.0), 1.0)
    paired = jnp.clip(1.0 - warm / (m * jnp.where(inter, v, 1.0)), 0.0, 1.0)
    combined = ((1.0 - paired) * (1 - c["o_ep"]) * ep_comm
                + jnp.maximum(paired * (ep_comm - c["o_pair"] * compute), 0.0))
    pairs = (q["c1f1b"] > 0) & (ep > 1) & (inter | (sched == SCHEDULE_CODES[Schedule.ONE_F_ONE_B]))
    exposed_ep = jnp.where(pairs, combined, exposed_ep)
    exposed_pp = (1 - c["o_pp"]) * pp_comm
    exposed_dp = ((1 - c["o_dp"]) * dp_grad + jnp.where(z3, 1 - c["o_dp"], 1 - c["o_pg"]) * dp_param
                  + (1 - c["o_rep"]) * replica_ar)  # the replicas' all-reduce, hidden by its own overlap
    dp_grad = dp_grad + replica_ar
    # communication kernels hidden behind compute take SMs from it
    hidden = (tp_comm - exposed_tp) + (ep_comm - exposed_ep) + (pp_comm - exposed_pp) + (dp_grad + dp_param - exposed_dp)
    compute = compute + jnp.minimum(hidden, compute) * c["comm_sm"] / (1.0 - c["comm_sm"])
    # per-step terms
    shard1 = jnp.where(zero >= 1, n_sh, 1.0)
    eshard1 = jnp.where(zero >= 1, edp, 1.0)
    params_opt = dense_rank / shard1 + expert_rank / eshard1
    # Adam reads the gradient and the states and writes the states and the weight: 30 bytes per
    # parameter with FP32 moments, 22 with BF16 ones
    optimizer = params_opt * (_ADAM_BYTES - 2.0 * (12.0 - q["opt_bytes"])) / c["mem_bw"]
    _, lat_world = _level(c, world)
    reduce_scalar = 2.0 * jnp.ceil(jnp.log2(jnp.maximum(world, 1.0)) - 1e-12) * lat_world
    norm_read = params_opt * gb / c["mem_bw"]
    grad_norm = norm_read + reduce_scalar
    bw_pp, _ = _level(c, 2 * tp * cp * dp)
    embedding_sync = jnp.where((pp > 1) & (c["tied"] > 0), c["vocab"] * h / tp * gb / bw_pp, 0.0)
    # FP8 delayed scaling (fp8_recipe = "delayed"): Transformer Engine all-reduces the amaxes of
    # an fp8_autocast region, blocking, at the end of its forward and of its backward, over
    # Megatron-core's fp8_group (the tp x cp x dp ranks of one pipeline stage, consecutive in
    # the rank order); the region is a pipeline chunk: two latency-bound all-reduces per
    # micro-batch and chunk (three FP32 amaxes of each of a layer's four GEMMs)
    amax_bytes = 48.0 * sh["stage_layers"] / v
    amax_sync = q["amax"] * 2.0 * m * v * _grouped(c, ar, amax_bytes, tp * cp * dp, one)
    sync = reduce_scalar + embedding_sync + amax_sync
    overhead = c["step_overhead"]
    data_loading = c["data_loading"]
    straggler = q["straggler"]
    # activation offloading: the offloaded layers' activations of each micro-batch go to host
    # memory during its forward and come back during its backward (a third and two thirds of
    # the micro-batch's compute), each direction hidden behind the phase it runs in
    mem = stage_memory(c, q, sh, q_kept, q_full, phi, m, jnp)
    moved = mem["moved"]
    transfer = moved / jnp.maximum(c["host_bw"], 1e-300)
    offload = jnp.where(q["offload"] > 0, m * (jnp.maximum(transfer - t_mb / 3.0, 0.0)
                                               + jnp.maximum(transfer - 2.0 * t_mb / 3.0, 0.0)), 0.0)
    step = (compute + bubble + exposed_tp + exposed_ep + exposed_pp + exposed_dp + optimizer + grad_norm + sync
            + overhead + data_loading + straggler + offload)
    # memory
    weights, grads, opt_states, act_bytes = mem["weights"], mem["grads"], mem["optimizer"], mem["activations"]
    memory = mem["total"]
    tokens_per_s = gbs * s / step
    per_gpu = tokens_per_s / world
    return dict(step_time=step, compute=compute, bubble=bubble, tp_exposed=exposed_tp,
                ep_exposed=exposed_ep, pp_exposed=exposed_pp, dp_exposed=exposed_dp,
                optimizer=optimizer, grad_norm=grad_norm, sync=sync, offload_exposed=offload, memory_bytes=memory,
                weights_bytes=weights, gradients_bytes=grads, optimizer_state_bytes=opt_states,
                activations_bytes=act_bytes,
                tokens_per_s=tokens_per_s, mfu=per_gpu * c["flops_palm"] / c["peak"],
                hfu=per_gpu * hw_flops / c["peak"],
                communication_total=tp_comm + ep_comm + pp_comm + dp_grad + dp_param,
                fits=memory <= c["usable"] * c["hbm"], sharded=optimizer + norm_read)


_jit = jax.jit(_kernel, static_argnames=("legacy", "moe"))


def _jit_kernel(c: dict, q: dict) -> dict:
    """The compiled kernel, with the compute model and the expert terms chosen by the
    constants (``c`` as :func:`kernel_constants` returns them: jit converts the Python and
    NumPy values in one call, where ``jnp.asarray`` on the hundred-odd constants one by one
    took most of a single plan's evaluation). Plans that are all fused (``eager`` 0, every
    plan but a PyTorch-eager one) are traced without the eager operators' terms (the arrays
    without ``eager``: a kernel a third of a second quicker to compile, the first answer's
    wait)."""
    if "eager" in q and not np.any(np.asarray(q["eager"]) > 0):
        q = {k: v for k, v in q.items() if k != "eager"}
    return _jit(c, q, legacy=bool(c["legacy"]), moe=bool(c["moe_layers"] > 0))


def ep_node_size(node_size, expert_tp, xp=np):
    """Ranks of one expert-parallel group inside a node: the node's ranks over the stride
    ``expert_tp`` between them (at least one); the one rule for the kernel (``xp=jnp``) and
    the dispatch copies."""
    return xp.maximum(xp.floor(node_size / expert_tp), 1.0)


def numerics_values(precision, fp8_params, attention_kernel, grad_reduce, optimizer_moments,
                    ep_dispatch_precision, fp8_recipe=FP8Recipe.DELAYED, elementwise=Elementwise.FUSED) -> dict:
    """The kernel's values of a plan's number formats and attention kernel (``fp8``,
    ``fp8_params``, ``attn``, ``disp_bytes``, ``grad_bytes``, ``opt_bytes``): the one
    translation for a single plan and for the search's held numerics."""
    fp8 = Precision(precision) is Precision.FP8
    return dict(fp8=float(fp8), fp8_params=float(bool(fp8_params)),
                amax=float(fp8 and FP8Recipe(fp8_recipe) is FP8Recipe.DELAYED),
                attn=float(ATTENTION_CODES[AttentionKernel(attention_kernel)]),
                eager=float(ELEMENTWISE_CODES[Elementwise(elementwise)]),
                disp_bytes=Precision(ep_dispatch_precision).bytes, grad_bytes=Precision(grad_reduce).bytes,
                opt_bytes=4.0 + 2.0 * Precision(optimizer_moments).bytes)


def _plan_arrays(plan: Plan, straggler: float, workload: Workload, hardware: Hardware) -> dict:
    inside, across = copies_array(workload, int(ep_node_size(hardware.node_size, plan.expert_tp)), plan.ep,
                                  EPDispatch(plan.ep_dispatch), ExpertRouting(plan.expert_routing))
    return dict(ep_in=float(inside), ep_remote=float(across), etp=plan.expert_tp,
                tp=plan.tp, pp=plan.pp, dp=plan.dp, ep=plan.ep, cp=plan.cp, v=plan.virtual_stages,
                mb=plan.micro_batch, gbs=plan.global_batch, zero=plan.zero_stage, shard=plan.zero_shard_group,
                sp=int(bool(plan.sequence_parallel)), sched=SCHEDULE_CODES[_schedule(plan.schedule)],
                rec=RECOMPUTE_CODES[Recompute(plan.recompute)], rec_layers=plan.recompute_layers,
                offload=plan.offload_layers,
                uneven=int(LayerSplit(plan.layer_split) is LayerSplit.UNEVEN), straggler=straggler,
                c1f1b=float(bool(plan.combined_1f1b)),
                **numerics_values(plan.precision, plan.fp8_params, plan.attention_kernel, plan.grad_reduce,
                                  plan.optimizer_moments, plan.ep_dispatch_precision, plan.fp8_recipe,
                                  plan.elementwise),
                **module_flags(plan.recompute_modules))


def step_time(workload: Workload, hardware: Hardware, plan: Plan, *,
              efficiency: Efficiency | None = None, straggler_s: float = 0.0,
              world_size: int | None = None) -> StepBreakdown:
    """Time one training step of ``workload`` on ``hardware`` with ``plan``.

    Args:
        workload: the model.
        hardware: accelerator, link hierarchy and fitted kernel model.
        plan: the parallel plan (validated here; errors name the violated constraint).
        efficiency: overlaps and usable memory (see :class:`Efficiency`); ``None``: the
            hardware's :attr:`~Hardware.default_stack` overlaps over the library's defaults
            (:meth:`Hardware.efficiency`), as a plan file that states none gets.
        straggler_s: expected straggler delay per step, seconds.
        world_size: if given, the plan must tile it exactly.

    Returns:
        a :class:`StepBreakdown` (seconds, bytes, tokens per second, MFU, HFU); a plan over
        the usable HBM comes back with ``fits=False`` and its ``memory_bytes``.

    Raises:
        InvalidParameterError: a plan that breaks a divisibility rule, or hardware without
            a kernel model and no ``efficiency.compute``.
    """
    plan = validate_plan(workload, plan, world_size=world_size)
    check_offload(hardware, plan)
    check_elementwise(hardware, plan)
    check_nonnegative("straggler_s", straggler_s, unit="s")
    c = kernel_constants(workload, hardware, efficiency)
    out = _jit_kernel(c, _plan_arrays(plan, straggler_s, workload, hardware))
    return breakdown_from(out, c, straggler_s)


def breakdown_from(out: dict, c: dict, straggler, index=()) -> StepBreakdown:
    """The :class:`StepBreakdown` of one plan (``index``) of a kernel result, with the terms
    the kernel does not return per plan (constants, and MFU in other conventions, which are
    multiples of the PaLM one) filled in from the constants ``c``."""
    v = {k: float(np.asarray(out[k])[index]) for k in _CORE}
    mfu = v["mfu"]
    ratio = lambda key: float(c[key]) / float(c["flops_palm"])  # noqa: E731
    peak_t = float(c["peak"]) / 1e12
    return StepBreakdown(
        **v, straggler=float(np.asarray(straggler)[index]) if np.ndim(straggler) else float(straggler),
        overhead=float(c["step_overhead"]), data_loading=float(c["data_loading"]),
        mfu_causal=mfu * ratio("flops_causal"), mfu_6n=mfu * ratio("flops_6n"),
        mfu_megatron=mfu * ratio("flops_megatron"), tflops_per_gpu=mfu * peak_t,
        tflops_per_gpu_megatron=mfu * ratio("flops_megatron") * peak_t,
        usable_memory_bytes=float(c["usable"]) * float(c["hbm"]), fits=bool(np.asarray(out["fits"])[index]))


#: the fields :func:`evaluate_plans` returns per plan
_CORE = ("step_time", "compute", "bubble", "tp_exposed", "ep_exposed", "pp_exposed", "dp_exposed", "optimizer",
         "grad_norm", "sync", "offload_exposed", "memory_bytes", "tokens_per_s", "mfu", "hfu", "communication_total",
         "weights_bytes", "gradients_bytes", "optimizer_state_bytes", "activations_bytes")


def evaluate_plans(workload: Workload, hardware: Hardware, plans: dict, *,
                   efficiency: Efficiency | None = None) -> dict:
    """Evaluate many plans in one vectorised pass.

    Args:
        plans: arrays of equal shape under :data:`PLAN_KEYS` (``sched`` and ``rec`` as
            integer codes, see :data:`SCHEDULE_CODES` and :data:`RECOMPUTE_CODES`; ``attn``
            1 for unfused attention, ``fp8`` 1 for FP8 GEMMs, ``disp_bytes`` 2 or 1 (the
            expert dispatch's format), ``grad_bytes`` 4 or 2,
            ``shard`` the ZeRO shard group, ``rec_layers`` the layers per chunk recomputed
            under full recomputation, ``fp8_params`` 1 for FP8 weights, ``opt_bytes`` the
            optimizer state per parameter (12 or 8), ``c1f1b`` 1 for Megatron-core's combined
            1F1B (``Plan.combined_1f1b``; applied where the plan has ``ep > 1`` and a 1F1B or
            interleaved schedule), ``amax`` 1 where delayed FP8 scaling all-reduces its amaxes
            (``Plan.fp8_recipe``; defaults to ``fp8``, delayed scaling being the default
            recipe), ``eager`` 1 for PyTorch's eager element-wise operators
            (``Plan.elementwise``), the 0/1 module flags of :data:`MODULE_KEYS` under selective recomputation; these default to flash, BF16,
            a BF16 dispatch, FP32, all ranks, every layer, BF16 weights, no combined 1F1B, 12
            bytes, fused element-wise kernels and ``core_attn`` alone when absent). No validity checks: the
            caller (e.g. :func:`markovsim.training.search_plans`) masks invalid plans.

    Returns:
        a dict of JAX arrays, one value per plan: ``step_time``, ``compute``, ``bubble``, the
        four ``*_exposed`` terms, ``optimizer``, ``grad_norm``, ``sync``, ``memory_bytes``,
        ``tokens_per_s``, ``mfu``, ``hfu``, ``communication_total``, ``fits`` and ``sharded``
        (the per-step seconds ZeRO shards over data parallelism). The constant terms and the
        other MFU conventions: :func:`breakdown_from` (or :func:`step_time` for one plan).
    """
    c = kernel_constants(workload, hardware, efficiency)
    shape = np.shape(plans["tp"])
    full = dict(attn=np.zeros(shape), fp8=np.zeros(shape), disp_bytes=np.full(shape, _BF16), etp=np.ones(shape), grad_bytes=np.full(shape, 4.0), shard=np.zeros(shape),
                rec_layers=np.zeros(shape), fp8_params=np.zeros(shape), offload=np.zeros(shape),
                c1f1b=np.zeros(shape), opt_bytes=np.full(shape, 12.0), eager=np.zeros(shape),
                **{k: np.full(shape, v) for k, v in module_flags(()).items()})
    full.update(plans)
    full.setdefault("amax", full["fp8"])  # FP8 plans default to delayed scaling (Plan.fp8_recipe)
    if "ep_in" not in plans:  # the dispatch copies from the held dispatch and routing (codes)
        full["ep_in"], full["ep_remote"] = dispatch_arrays(workload, hardware, plans["ep"], plans.get("ep_disp"),
                                                           plans.get("ep_route"))
    return _jit_kernel(c, {k: jnp.asarray(full[k]) for k in PLAN_KEYS})


#: the codes of the plan arrays ``ep_disp`` and ``ep_route``
DISPATCH_CODES = {d: i for i, d in enumerate(EPDispatch)}
ROUTING_CODES = {r: i for i, r in enumerate(ExpertRouting)}


def dispatch_arrays(workload: Workload, hardware: Hardware, ep, disp=None, route=None):
    """``(ep_in, ep_remote)`` arrays for EP degrees ``ep`` and the dispatch and routing codes
    ``disp``, ``route`` (arrays of :data:`DISPATCH_CODES` / :data:`ROUTING_CODES`, ``None``
    for per-expert / random): :func:`~markovsim.training._dispatch.dispatch_copies`."""
    ep = np.asarray(ep)
    disp = np.zeros(ep.shape, int) if disp is None else np.broadcast_to(np.asarray(disp, int), ep.shape)
    route = np.zeros(ep.shape, int) if route is None else np.broadcast_to(np.asarray(route, int), ep.shape)
    inside, remote = np.empty(ep.shape), np.empty(ep.shape)
    for d, r in {(int(a), int(b)) for a, b in zip(disp.ravel(), route.ravel())}:
        where = (disp == d) & (route == r)
        i, o = copies_array(workload, hardware.node_size, ep[where], list(EPDispatch)[d], list(ExpertRouting)[r])
        inside[where], remote[where] = i, o
    return inside, remote
