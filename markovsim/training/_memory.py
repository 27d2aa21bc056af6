r"""Memory per rank: model states under ZeRO and activations from Korthikanti et al. (2022).

Model states, bytes per parameter held by the rank (its share of the dense weights after
tensor and pipeline parallelism, of the expert weights after expert parallelism):

* weights: 2 (BF16), sharded over data parallelism with ZeRO-3; FP8 runs keep an FP8 copy
  and its transpose of the weights the rank holds, 2 more (sharded too under ZeRO-3), or,
  with ``fp8_params`` (FP8 weights, Megatron-core's ``fp8_param_gather``), only those 2;
  ZeRO-3 adds its gather buffers: two layers' weights in BF16 (the layer computed and the
  one prefetched; a layer's share is the stage's weights over its layers, embeddings
  included);
* gradients: 4 (FP32 main gradients) or 2 (``grad_reduce = "bf16"``), sharded with ZeRO-2
  and ZeRO-3;
* optimizer: 12 (FP32 master weights, Adam's two moments), 8 with BF16 moments
  (``optimizer_moments``), sharded with ZeRO-1 and up (Megatron-LM's distributed optimizer
  is ZeRO-1).

The parameters are those of the rank's end of the pipeline (``_step.stage_parameters``): the
first stage's layers and the input embedding, the last stage's layers, the output layer (a
copy of the embedding when tied), the final norm and the multi-token-prediction modules; no
FP8 copy of the embedding and the output layer (``plain_rank``).

DualPipe holds two stages per rank, one per direction: weights and gradients count twice
(DeepSeek-AI 2024, Table 2, "Parameter 2x"), the optimizer states once (an assumption: the
two copies are one parameter to the optimizer; the report does not say).

Tied embeddings are held once on the first and once on the last stage (the copy counted with
the last stage's parameters).

Activations of one layer for one micro-batch of :math:`b` sequences (Korthikanti et al.
2022, sec. 4, generalised to GQA, SwiGLU, MoE and models without dropout), in bytes per
token:

* attention: :math:`2h` (QKV input) + :math:`2 n_q d_{qk} + 2 n_{kv}(d_{qk} + d_v)` (Q, K,
  V) + :math:`2 n_q d_v` (output-projection input) + :math:`h` (dropout mask, with dropout)
  + :math:`5 n_q s` (unfused scores: softmax output 2, dropout mask 1, dropout output 2;
  :math:`2 n_q s` without dropout; none for flash attention, which keeps :math:`4 n_q`
  of log-sum-exp);
* dense MLP: :math:`2h` + GELU :math:`4f` or SwiGLU :math:`6f` + :math:`h` (dropout mask);
  MoE MLP: :math:`2h + k(4h + a f_e) + a f_e n_s` with :math:`a` = 4 (GELU) or 6 (SwiGLU);
* two norms: :math:`4h`.

For GPT-3-style layers (:math:`n_{kv} = n_q`, :math:`f = 4h`, dropout) this is the paper's
:math:`34h + 5 a s`. FP8 runs hold the inputs of their FP8 GEMMs (QKV and MLP inputs,
the output projection's and the second MLP matrix's inputs) at 1 byte:
:math:`2h + n_q d_v + f` fewer bytes per token, and in an MoE layer the experts' too
(Transformer Engine's FP8 grouped linear layers): :math:`k(h + f_e) + f_e n_s` fewer. With tensor parallelism :math:`t` and sequence parallelism everything is divided by
:math:`t`; without sequence parallelism the norms' inputs, the QKV and MLP
inputs and the dropout masks (:math:`10h`, :math:`8h` without dropout) are replicated.
Context parallelism divides by :math:`c`. ``selective`` recomputation drops the scores, or
what its ``recompute_modules`` name: ``mla_up_proj`` MLA's Q, K and V (:math:`2 n_q d_{qk} +
2 n_{kv}(d_{qk} + d_v)`, keeping the latents, :math:`2(r_q + r_{kv} + d_{rope})`),
``layernorm`` the norms' outputs (:math:`4h`, BF16 runs), ``mlp`` a dense layer's MLP,
``moe`` an MoE layer's expert part, ``moe_act`` the experts' activation outputs
(:math:`2 k f_e`, BF16 runs), ``shared_experts`` the shared experts' part;
``selective-op`` (torchtitan's per-operator policy) keeps the layer's input (:math:`2h`), the
BF16 outputs of the GEMMs it does not recompute and the attention kernel's output and
log-sum-exp (:math:`2 n_q d_v + 4 n_q`), an MoE layer's expert part whole;
``full`` keeps only each layer's input, :math:`2h` (divided by :math:`t` with sequence
parallelism); with ``recompute_layers`` = :math:`k` only :math:`k` layers of each pipeline
chunk do, the others keeping everything (Megatron-core's block method).

The first pipeline stage holds the activations of :math:`p` micro-batches of its
:math:`L/p` layers under 1F1B (:math:`L` layers' worth), times :math:`1 + (p-1)/(p v)`
interleaved (the paper's eq. for interleaving), :math:`m` micro-batches under GPipe, and the
input embedding's dropout masks (sec. 4.3: :math:`sbh/t` per micro-batch in flight). The
last stage holds its layers for :func:`last_stage_in_flight` micro-batches and the output
layer and the loss (sec. 4.3: :math:`4sbh(1 + v/h)/t`, the logits in FP32) of one
micro-batch (all :math:`m` under GPipe), with each multi-token-prediction module's layer and
head. The memory is the fuller of the two; with one stage, or under DualPipe (its first rank
holds the last stage too), their sum.

The result is a number and a ``fits`` flag against ``usable_memory`` x HBM: a plan that
does not fit is reported, not refused.
"""

from __future__ import annotations


import numpy as np

from ._pipeline import SCHEDULE_CODES, Schedule
from ._plan import fused_attention
from ._workload import Recompute

__all__ = ["activation_bytes_per_layer", "blended_activation_bytes", "embedding_mask_bytes", "head_activation_bytes",
           "in_flight", "last_stage_in_flight", "parameter_copies", "state_bytes", "zero_group"]

_REC = {r: i for i, r in enumerate(Recompute)}
_BF16_BYTES = 2.0


def activation_bytes_per_layer(c, q, xp):
    """Bytes of activations of one (dense, MoE) layer for one micro-batch on one rank."""
    t, cp, b = q["tp"], q["cp"], q["mb"]
    h, s = c["hidden"], c["seq"]
    T = b * s / cp
    nq, nkv, dqk, dv = c["heads"], c["kv_heads"], c["d_qk"], c["d_v"]
    drop = c["dropout"]
    flash = fused_attention(q)
    scores = xp.where(flash, 4.0 * nq / s, nq * (2.0 + 3.0 * drop)) * s
    attn_sharded = 2 * nq * dqk + 2 * nkv * (dqk + dv) + 2 * nq * dv + scores
    replicated = h * (2.0 + 4.0 + 2.0 + 2.0 * drop)  # QKV input, norm inputs, MLP input, masks
    a = c["act_bytes"]
    dense_mlp = a * c["ffn"]
    k = c["top_k"]
    moe_mlp = k * (4.0 * h + a * c["expert_ffn"]) + a * c["expert_ffn"] * c["shared"]
    # FP8 runs keep the inputs of their FP8 GEMMs for the weight gradients as FP8 (1 byte,
    # not 2): QKV and MLP inputs, the output projection's input, the second MLP matrix's
    # input (Transformer Engine's FP8 linear layers; DeepSeek-AI 2024 sec. 3.3.4)
    fp8 = q["fp8"] > 0
    replicated = replicated - xp.where(fp8, 2.0 * h, 0.0)
    attn_sharded = attn_sharded - xp.where(fp8, nq * dv, 0.0)
    dense_mlp = dense_mlp - xp.where(fp8, c["ffn"], 0.0)
    # ... and so do the experts' grouped GEMMs: each routed copy's first-matrix input (h) and
    # second-matrix input (f_e), and the shared experts' second-matrix input
    moe_mlp = moe_mlp - xp.where(fp8, k * (h + c["expert_ffn"]) + c["expert_ffn"] * c["shared"], 0.0)
    rec = q["rec"]
    selective = rec == _REC[Recompute.SELECTIVE]
    # selective recomputation drops what its modules recompute (Megatron-core's
    # recompute_modules; core_attn alone by default): the scores; MLA's up-projected Q, K, V
    # (the latents they come from kept instead); the norms' outputs, which feed the QKV and MLP
    # GEMMs (in BF16 runs: FP8 runs keep those inputs as FP8 copies anyway); a dense layer's
    # feed-forward, an MoE layer's experts or their activation outputs (the second expert
    # matrix's inputs, BF16 runs) or the shared experts, their input kept
    def on(key):
        return selective & (q[key] > 0)

    mla = c["mla"]
    latents = 2.0 * (c["q_rank"] + c["kv_rank"] + c["d_rope"]) * mla
    up = (2 * nq * dqk + 2 * nkv * (dqk + dv)) * mla
    attn_sharded = attn_sharded - xp.where(on("rm_core"), scores, 0.0) - xp.where(on("rm_mla"), up, 0.0)
    replicated = (replicated + xp.where(on("rm_mla"), latents, 0.0)
                  - xp.where(on("rm_ln") & ~fp8, 4.0 * h, 0.0))
    dense_mlp = xp.where(on("rm_mlp"), 0.0, dense_mlp)
    shared_part = c["expert_ffn"] * c["shared"] * (a - xp.where(fp8, 1.0, 0.0))
    moe_mlp = (moe_mlp - xp.where(on("rm_act") & ~fp8, 2.0 * k * c["expert_ffn"], 0.0)
               - xp.where(on("rm_shared"), shared_part, 0.0))
    moe_mlp = xp.where(on("rm_moe"), 0.0, moe_mlp)
    sp = q["sp"] > 0

    def per_token(mlp):
        sharded = attn_sharded + mlp
        return xp.where(sp, (sharded + replicated) / t, sharded / t + replicated)

    full = rec == _REC[Recompute.FULL]
    inputs = xp.where(sp, 2.0 * h / t, 2.0 * h)
    # selective-op keeps the layer's input, the BF16 outputs of the GEMMs it does not
    # recompute (shares op_<name>) and the attention kernel's output with its log-sum-exp;
    # an MoE layer's expert part is kept whole (its grouped GEMMs are saved)
    o = {name: 1.0 - c[f"op_{name}"] for name in ("qkv", "q_down", "q_up", "kv_down", "kv_up", "attn_out",
                                                  "ffn_in", "ffn_out")}
    mla = c["mla"]
    kept_attn = ((1.0 - mla) * o["qkv"] * (nq * dqk + nkv * (dqk + dv))
                 + mla * (o["q_down"] * c["q_rank"] + o["q_up"] * nq * dqk + o["kv_down"] * (c["kv_rank"] + c["d_rope"])
                          + o["kv_up"] * nq * (c["d_nope"] + dv))
                 + o["attn_out"] * h)
    op_attn = 2.0 * kept_attn + 2.0 * nq * dv + xp.where(flash, 4.0 * nq, 0.0)
    op_dense = 2.0 * (o["ffn_in"] * c["gate"] * c["ffn"] + o["ffn_out"] * h)
    per_op = rec == _REC[Recompute.SELECTIVE_OP]
    dense = T * xp.select([full, per_op], [inputs, inputs + (op_attn + op_dense) / t], default=per_token(dense_mlp))
    moe = T * xp.select([full, per_op], [inputs, inputs + (op_attn + moe_mlp) / t], default=per_token(moe_mlp))
    return dense, moe


def blended_activation_bytes(c, q_kept, q_full, phi, xp):
    """:func:`activation_bytes_per_layer` under partial recomputation: the layers kept plus
    the share ``phi`` recomputed (the arrays of ``recompute_split`` in ``_step``)."""
    (dense_k, moe_k), (dense_f, moe_f) = (activation_bytes_per_layer(c, x, xp) for x in (q_kept, q_full))
    return dense_k + phi * (dense_f - dense_k), moe_k + phi * (moe_f - moe_k)


def in_flight(q, m, xp):
    """Micro-batches whose activations the first stage holds, in units of one micro-batch
    through the stage's layers."""
    sc = SCHEDULE_CODES
    sched, pp, v = q["sched"], q["pp"], q["v"]
    n = xp.select(
        [sched == sc[Schedule.GPIPE], sched == sc[Schedule.INTERLEAVED], sched == sc[Schedule.ZB_H2],
         sched == sc[Schedule.DUALPIPE]],
        [m, pp * (1.0 + (pp - 1) / (pp * v)), 2 * pp - 1.0, pp + 1.0],
        default=pp,
    )
    return xp.minimum(n, m * xp.where(sched == sc[Schedule.GPIPE], 1.0, v))


def last_stage_in_flight(q, m, xp):
    """Micro-batches whose activations the last pipeline stage holds, in units of one
    micro-batch through the stage's layers: 1 under 1F1B (each forward is followed by its
    backward), :math:`((v - 1) p + 1)/v` interleaved (Megatron-core's warm-up of the last rank,
    :math:`(v - 1) p` chunk forwards, plus the one in flight), :math:`m` under GPipe, :math:`p`
    under ZB-H2 (an assumption: its extra warm-up forwards, counted like 1F1B's first stage)."""
    sc = SCHEDULE_CODES
    sched, pp, v = q["sched"], q["pp"], q["v"]
    n = xp.select([sched == sc[Schedule.GPIPE], sched == sc[Schedule.INTERLEAVED], sched == sc[Schedule.ZB_H2]],
                  [m, ((v - 1.0) * pp + 1.0) / v, pp], default=1.0)
    return xp.minimum(n, m * xp.where(sched == sc[Schedule.GPIPE], 1.0, v))


def head_activation_bytes(c, q, xp):
    """Activations of the output layer and the loss for one micro-batch on the rank holding
    the last stage (Korthikanti et al. 2022, sec. 4.3): the final norm's input and the output
    projection's input, :math:`4h` per token (divided by :math:`t` with sequence parallelism),
    and the logits kept in FP32 for the cross-entropy's backward, :math:`4v/t` (the output
    layer is split over the vocabulary); each multi-token-prediction module has its own."""
    t = q["tp"]
    tokens = q["mb"] * c["seq"] / q["cp"]
    hidden = xp.where(q["sp"] > 0, 4.0 * c["hidden"] / t, 4.0 * c["hidden"])
    return tokens * (1.0 + c["mtp"]) * (hidden + 4.0 * c["vocab"] / t)


def embedding_mask_bytes(c, q, xp):
    """The input embedding's dropout mask for one micro-batch on the first stage, 1 byte per
    element (Korthikanti et al. 2022, sec. 4.3: :math:`sbh/t` per micro-batch in flight); 0
    without dropout."""
    t = q["tp"]
    tokens = q["mb"] * c["seq"] / q["cp"]
    return tokens * c["dropout"] * xp.where(q["sp"] > 0, c["hidden"] / t, c["hidden"])


def zero_group(q, xp):
    """Data-parallel ranks one ZeRO shard group spans: ``zero_shard_group``, or every one of
    the ``dp x cp`` ranks when it is 0."""
    return xp.where(q["shard"] > 0, q["shard"], q["dp"] * q["cp"])


def state_bytes(c, q, dense_rank, expert_rank, edp, xp, stage_layers=None, plain_rank=0.0):
    """Weights, gradients and optimizer states of one rank, bytes (three arrays).

    ``stage_layers``: layers of the rank's stage, for the ZeRO-3 gather buffers (two layers'
    weights, gathered in BF16: the layer being computed and the one prefetched); ``None``
    leaves them out. ``plain_rank``: the part of ``dense_rank`` no FP8 GEMM reads (the
    embedding and the output layer, which Megatron-core keeps out of Transformer Engine's
    FP8 layers): no FP8 copy of it, and with ``fp8_params`` it stays in BF16 (2 bytes, as the
    FP8 pair it would otherwise be)."""
    zero = q["zero"]
    dp = zero_group(q, xp)

    def shard(stage, params, d):
        return params / xp.where(zero >= stage, d, 1.0)

    def both(stage):
        return shard(stage, dense_rank, dp) + shard(stage, expert_rank, edp)

    # the FP8 copy (and transpose) is made of the weights the rank holds: its shard under ZeRO-3;
    # with FP8 weights (fp8_params) that pair is all there is, no BF16 copy beside it
    fp8_only = q["fp8_params"] > 0
    copy = xp.where((q["fp8"] > 0) & ~fp8_only, 2.0, 1.0)
    weights = 2.0 * (both(3) * copy - shard(3, plain_rank, dp) * (copy - 1.0))
    if stage_layers is not None:
        per = xp.where(fp8_only, 1.0, _BF16_BYTES)  # gathered in FP8 with fp8_params
        gathered = 2.0 * per * (dense_rank + expert_rank) / xp.maximum(stage_layers, 1.0)
        weights = weights + xp.where(zero >= 3, gathered, 0.0)
    grads = q["grad_bytes"] * both(2)
    optimizer = q["opt_bytes"] * both(1)
    # each copy of the parameters has its gradient buffer; one set of optimizer states (the
    # copies are one parameter)
    copies = parameter_copies(q, xp)
    return copies * weights, copies * grads, optimizer


def parameter_copies(q, xp):
    """Copies of its stage's parameters a rank holds: 2 under DualPipe, which places stage
    :math:`i` and stage :math:`p-1-i` on each rank, one per direction (DeepSeek-AI 2024,
    Table 2: "Parameter 2x"); 1 otherwise."""
    return xp.where(q["sched"] == SCHEDULE_CODES[Schedule.DUALPIPE], 2.0, 1.0)


