r"""Compute from operators: each transformer layer as a list of GEMMs, attention and
memory-bound kernels, each timed on the hardware's fitted :class:`KernelModel`.

Per micro-batch of :math:`b` sequences of :math:`s` tokens, one rank of a plan with tensor
parallelism :math:`t` and context parallelism :math:`c` holds :math:`T = b s / c` tokens.
Its operators, forward (the backward of a GEMM is its two transposed products, twice the
forward time, the same shape set):

======================  ===========================================================  =====
operator                shape :math:`M \times N \times K` (count)                     where
======================  ===========================================================  =====
QKV projection (GQA)    :math:`T \times (n_q + 2 n_{kv}) d / t \times h`               attn
output projection       :math:`T \times h \times n_q d_v / t`                          attn
MLA projections         :math:`T{\times}r_q{\times}h`, :math:`T{\times}n_q(d_n{+}d_r)/t{\times}r_q`,
                        :math:`T{\times}(r_{kv}{+}d_r){\times}h`, :math:`T{\times}n_q(d_n{+}d_v)/t{\times}r_{kv}`  attn
FFN in / out            :math:`T \times g f / t \times h`, :math:`T \times h \times f / t`  dense
router                  :math:`T/t \times E \times h`                                  MoE
routed experts          :math:`T k e / (t E) \times g f_e \times h` and back (x :math:`E/e`)  MoE
shared experts          :math:`T/t \times g f_e n_s \times h` and back                 MoE
logits                  :math:`T \times V / t \times h` (last stage)
======================  ===========================================================  =====

(:math:`g` = 2 for SwiGLU's gate and up projections, 1 for GELU.) Each GEMM costs
:math:`2MNK/(P e_\text{gemm}) + k_\text{traffic}\, b_e (MK+KN+MN)/B` (module ``_hardware``),
with :math:`P` the BF16 or, for ``precision = "fp8"``, the FP8 peak, :math:`e_\text{gemm}`
the BF16 or the FP8 GEMM fraction (``fp8_gemm_peak_fraction``; the BF16 one where not
fitted) and :math:`b_e` bytes per element. FP8 adds, as memory traffic, Transformer
Engine's cast-transpose of each FP8 GEMM's input in the forward (:math:`M \times K`) and
of its output gradient in the backward (:math:`M \times N`): the BF16 tensor read once,
its FP8 copy and FP8 transpose written, :data:`CAST_BYTES` = 4 bytes per element (no
fusion with the norm or the activation assumed); the output head (logits) and the MoE
router stay in BF16 in FP8 runs (:data:`HIGH_PRECISION_GEMMS`).

Attention core, per layer: FLOPs :math:`F = 2 b (s/c) s (n_q/t)(d_{qk}+d_v)`.

* ``flash``: forward :math:`\kappa F/(P e_\text{attn})`, backward
  :data:`~markovsim.training._plan.FLASH_BACKWARD_FLOPS` = 2.5 times that (the backward
  recomputes the scores: five matrix products to the forward's two), with
  :math:`\kappa` the share of the keys the kernel computes (it skips masked blocks):
  1/2 for a causal mask, 1 otherwise, less on sliding-window layers
  (:func:`~markovsim.training._workload.attended_keys`, averaged over the layers);
* ``unfused``: batched GEMMs :math:`QK^\top` (:math:`s/c \times s \times d_{qk}`) and
  :math:`PV` (:math:`s/c \times d_v \times s`) on the GEMM model (the full score matrix,
  windows or not), plus softmax, mask and
  dropout over the :math:`b (n_q/t)(s/c) s` scores as memory traffic: 4 bytes per score
  forward and 6 backward, 5 and 5 more with attention dropout.

Memory-bound operators, per token of the rank (with sequence parallelism the norms,
residuals and dropouts act on :math:`T/t` tokens): two norms 8h bytes, two residual adds
12h, hidden dropout 4h, the activation :math:`4f/t` (GELU) or :math:`6f/t` (SwiGLU), MoE
permutations :math:`8hk` and expert activations; cross-entropy 16 bytes per logit on the
last stage (forward and backward). Backward moves twice the forward bytes. All at
``memory_bandwidth_fraction`` of HBM bandwidth. These are fused kernels; a plan with
``elementwise = "eager"`` (PyTorch's eager operators) moves the bytes of
:data:`~markovsim.training._plan.EAGER_BYTES` instead: on a SwiGLU workload RMSNorm's FP32
steps, the rotary embedding of the queries and keys, GQA's key/value repeat and SwiGLU's two
kernels, and on every workload the attention output's layout copy.

Recomputation repeats, in the backward: ``selective`` the attention core's forward,
``full`` the whole layer's forward, ``selective-op`` (torchtitan's per-operator policy) the
share of each GEMM given by :func:`~markovsim.training._workload.op_recompute_shares` (every
other matrix multiplication, with its FP8 casts), every memory-bound operator's forward and,
for the unfused kernel only, the attention core (a fused kernel's output is saved).

All functions take dicts of arrays (``c``: workload and hardware constants, ``q``: plan
arrays) and the array namespace, so the same formulas serve the vectorised kernel
(``jax.numpy``) and :func:`operator_table` (``numpy``).
"""

from __future__ import annotations


import numpy as np

from ._hardware import Hardware, KernelModel
from ._plan import (ATTENTION_CODES, EAGER_BYTES, FLASH1_SPEED, FLASH_BACKWARD_FLOPS, AttentionKernel, Plan,
                    Precision, fused_attention, validate_plan)
from ._workload import Attention, FFNKind, Recompute, Workload, attended_keys, op_recompute_shares

__all__ = ["layer_times", "kernel_model_constants", "workload_operator_constants"]

_BF16 = 2.0
#: recompute codes (the order of :class:`Recompute`)
_REC = {r: i for i, r in enumerate(Recompute)}


def workload_operator_constants(w: Workload) -> dict:
    """Host-side scalars of a workload that the operator formulas need."""
    mla = w.mla
    gqa = mla is None
    d = w.d_head if gqa else 0
    moe = w.moe
    return dict(
        layers=float(w.layers), moe_layers=float(w.moe_layers), hidden=float(w.hidden),
        ffn=float(w.ffn_hidden), gate=2.0 if w.ffn_kind is FFNKind.SWIGLU else 1.0,
        act_bytes=6.0 if w.ffn_kind is FFNKind.SWIGLU else 4.0,
        heads=float(w.heads), kv_heads=float(w.kv_heads if gqa else w.heads),
        d_qk=float(d if gqa else mla.qk_nope_head_dim + mla.qk_rope_head_dim),
        d_v=float(d if gqa else mla.v_head_dim),
        mla=0.0 if gqa else 1.0,
        q_rank=0.0 if gqa else float(mla.q_lora_rank), kv_rank=0.0 if gqa else float(mla.kv_lora_rank),
        d_rope=0.0 if gqa else float(mla.qk_rope_head_dim), d_nope=0.0 if gqa else float(mla.qk_nope_head_dim),
        vocab=float(w.vocab), seq=float(w.seq_len),
        experts=float(moe.routed_experts) if moe else 1.0, top_k=float(moe.top_k) if moe else 0.0,
        expert_ffn=float(moe.expert_ffn) if moe else 0.0, shared=float(moe.shared_experts) if moe else 0.0,
        node_limit=float(moe.max_nodes_per_token) if moe else 0.0,
        dropout=1.0 if w.dropout else 0.0,
        # keys per query a fused kernel computes, the mean over the layers (sliding windows
        # and the causal mask skip the rest)
        attn_keys=attended_keys(w, w.seq_len, w.causal) / w.layers,
        # the share of each GEMM that recompute = "selective-op" repeats (keys op_<name>)
        **{f"op_{name}": share for name, share in op_recompute_shares(w).items()},
    )


def _gemms(c, q, xp):
    """Every forward GEMM of one layer of each type: ``(name, where, M, N, K, count)``;
    ``where`` is ``attn`` (every layer), ``dense`` (dense FFN), ``moe`` (MoE FFN) or
    ``logit`` (once per micro-batch on the last stage)."""
    t, cp, b = q["tp"], q["cp"], q["mb"]
    h, s = c["hidden"], c["seq"]
    T = b * s / cp
    Tm = T / t
    nq, nkv, dqk, dv = c["heads"], c["kv_heads"], c["d_qk"], c["d_v"]
    one = xp.ones_like(T)
    mla = c["mla"]
    g = c["gate"]
    e = q["ep"]
    k, E, fe, ns = c["top_k"], c["experts"], c["expert_ffn"], c["shared"]
    local = E / e
    Me = Tm * k / local
    return [
        ("qkv", "attn", T, (nq * dqk + nkv * (dqk + dv)) / t, h * one, one * (1 - mla)),
        ("q_down", "attn", T, c["q_rank"] * one, h * one, one * mla),
        ("q_up", "attn", T, nq * dqk / t, c["q_rank"] * one, one * mla),
        ("kv_down", "attn", T, (c["kv_rank"] + c["d_rope"]) * one, h * one, one * mla),
        ("kv_up", "attn", T, nq * (c["d_nope"] + dv) / t, c["kv_rank"] * one, one * mla),
        ("attn_out", "attn", T, h * one, nq * dv / t, one),
        ("ffn_in", "dense", T, g * c["ffn"] / t, h * one, one),
        ("ffn_out", "dense", T, h * one, c["ffn"] / t, one),
        ("router", "moe", Tm, E * one, h * one, one * (k > 0)),
        ("expert_in", "moe", Me, g * fe * one, h * one, local * (k > 0)),
        ("expert_out", "moe", Me, h * one, fe * one, local * (k > 0)),
        ("shared_in", "moe", Tm, g * fe * ns * one, h * one, one * (ns > 0)),
        ("shared_out", "moe", Tm, h * one, fe * ns * one, one * (ns > 0)),
        ("logits", "logit", T, c["vocab"] / t, h * one, one),
    ]


#: GEMMs that FP8 runs keep in BF16: the output head and the MoE router (DeepSeek-AI 2024,
#: arXiv 2412.19437 sec. 3.3.1: "the embedding module, the output head, MoE gating modules"
#: keep their original precision; Megatron-core's output layer is not a Transformer Engine
#: FP8 layer)
HIGH_PRECISION_GEMMS = frozenset({"logits", "router"})

#: Bytes of HBM traffic per element of an FP8 cast in training: Transformer Engine's fused
#: cast-transpose reads the BF16 tensor once and writes its FP8 copy and the FP8 transpose
#: the other GEMM of the backward needs (``fused_cast_transpose``: 2 + 1 + 1 bytes)
CAST_BYTES = 4.0


def cast_bytes(name, M, N, K, count):
    """HBM bytes of the FP8 casts of ``count`` GEMMs ``name`` of shape M x N x K:
    ``(forward, backward)``, the input's (:math:`M \\times K`) and the output gradient's
    (:math:`M \\times N`) cast-transpose at :data:`CAST_BYTES` per element; none for the
    GEMMs that stay in BF16 (:data:`HIGH_PRECISION_GEMMS`)."""
    if name in HIGH_PRECISION_GEMMS:
        return 0.0, 0.0
    return CAST_BYTES * count * M * K, CAST_BYTES * count * M * N


def _gemm_time(M, N, K, count, peak, c, elem_bytes, eff=None):
    """Seconds of ``count`` GEMMs of shape M x N x K (the smooth roofline) at the fraction
    ``eff`` of ``peak`` (default: the BF16 GEMM fraction)."""
    flops = 2.0 * M * N * K
    traffic = elem_bytes * (M * K + K * N + M * N)
    eff = c["e_gemm"] if eff is None else eff
    return count * (flops / (peak * eff) + c["k_traffic"] * traffic / c["hbm_bw"])


def gemm_precision(c, q, xp):
    """Peak, fraction of it and bytes per element of the plan's GEMMs (BF16 or FP8)."""
    fp8 = q["fp8"] > 0
    return (xp.where(fp8, c["peak_fp8"], c["peak"]), xp.where(fp8, c["e_gemm_fp8"], c["e_gemm"]),
            xp.where(fp8, 1.0, _BF16))


def gemm_seconds(name, M, N, K, count, c, precision):
    """:func:`_gemm_time` of the GEMM ``name`` at the plan's ``precision`` (the triple of
    :func:`gemm_precision`), or in BF16 for :data:`HIGH_PRECISION_GEMMS`."""
    if name in HIGH_PRECISION_GEMMS:
        return _gemm_time(M, N, K, count, c["peak"], c, _BF16)
    peak, eff, elem = precision
    return _gemm_time(M, N, K, count, peak, c, elem, eff)


def _attention_core(c, q, xp):
    """Forward seconds of the attention core of one layer: ``(gemm_or_kernel, memory)`` and
    the backward multiple of each."""
    t, cp, b = q["tp"], q["cp"], q["mb"]
    s = c["seq"]
    heads = c["heads"] / t
    sq = s / cp
    flops = 2.0 * b * sq * s * heads * (c["d_qk"] + c["d_v"])
    # the fused kernel skips masked blocks: c["attn_keys"] keys per query of the s
    # a first-generation kernel (flash1) runs at FLASH1_SPEED of the preset's flash fraction
    speed = xp.where(q["attn"] == ATTENTION_CODES[AttentionKernel.FLASH1], FLASH1_SPEED, 1.0)
    flash = flops * (c["attn_keys"] / s) / (c["peak"] * c["e_attn"] * speed)
    count = b * heads
    unfused = (_gemm_time(sq, s, c["d_qk"], count, c["peak"], c, _BF16)
               + _gemm_time(sq, c["d_v"], s, count, c["peak"], c, _BF16))
    scores = b * heads * sq * s
    fwd_bytes = scores * (4.0 + 5.0 * c["dropout"])
    bwd_bytes = scores * (6.0 + 5.0 * c["dropout"])
    is_flash = fused_attention(q)
    fwd = xp.where(is_flash, flash, unfused + fwd_bytes / c["mem_bw"])
    # the fused backward recomputes the scores (FLASH_BACKWARD_FLOPS x the forward's products);
    # the unfused one reads them back and runs twice the forward's batched products
    bwd = xp.where(is_flash, FLASH_BACKWARD_FLOPS * flash, 2.0 * unfused + bwd_bytes / c["mem_bw"])
    return fwd, bwd


def _eager_swiglu(c, q):
    """Where a plan runs a SwiGLU (RMSNorm, rotary) block eagerly; ``None`` when the arrays
    hold no ``eager`` (every plan fused: the compiled kernel's arrays, ``_jit_kernel``)."""
    return None if "eager" not in q else (q["eager"] > 0) & (c["gate"] > 1)


def norm_bytes(c, q, xp):
    """Forward bytes of one norm per element: 4 fused (read and write BF16), an eager RMSNorm's
    :data:`~markovsim.training._plan.EAGER_BYTES` on a SwiGLU workload with ``elementwise =
    "eager"``."""
    on = _eager_swiglu(c, q)
    return 4.0 if on is None else xp.where(on, EAGER_BYTES["rmsnorm"], 4.0)


def activation_bytes(c, q, xp):
    """Forward bytes of the FFN activation per element: the fused kernel's (``act_bytes``: 6
    SwiGLU, 4 GELU), or eager SwiGLU's two kernels (``EAGER_BYTES["swiglu"]``)."""
    on = _eager_swiglu(c, q)
    return c["act_bytes"] if on is None else xp.where(on, EAGER_BYTES["swiglu"], c["act_bytes"])


def eager_bytes(c, q, xp):
    """Forward bytes an eager PyTorch block moves beyond the fused count (zero for
    ``elementwise = "fused"``): ``(attention part, dense FFN, MoE FFN)`` of one layer on one
    rank, from :data:`~markovsim.training._plan.EAGER_BYTES`. The norms' share is in
    :func:`norm_bytes`. A SwiGLU workload (RMSNorm, rotary positions) adds the rotary
    embedding of the queries and keys (the rotary dimensions alone under MLA), GQA's key and
    value repeat and the attention output's layout copy, and runs its activation in two
    kernels; a GELU workload adds the layout copy alone."""
    if "eager" not in q:
        return 0.0, 0.0, 0.0
    eager = q["eager"] > 0
    llama = c["gate"] > 1
    t, cp, b = q["tp"], q["cp"], q["mb"]
    T = b * c["seq"] / cp
    nq, nkv, dqk, dv, mla = c["heads"], c["kv_heads"], c["d_qk"], c["d_v"], c["mla"]
    rotary = xp.where(mla > 0, (nq / t + 1.0) * c["d_rope"], (nq + nkv) * dqk / t)
    repeat = xp.where((mla == 0) & (nkv < nq), EAGER_BYTES["kv_repeat"] * (nkv + nq) * (dqk + dv) / t, 0.0)
    attn = T * (EAGER_BYTES["attention_out"] * nq * dv / t
                + xp.where(llama, EAGER_BYTES["rotary"] * rotary + repeat, 0.0))
    act = activation_bytes(c, q, xp) - c["act_bytes"]
    dense = T * act * c["ffn"] / t
    moe = T / t * act * c["expert_ffn"] * (c["top_k"] + c["shared"])
    return xp.where(eager, attn, 0.0), xp.where(eager, dense, 0.0), xp.where(eager, moe, 0.0)


def _elementwise_bytes(c, q, xp):
    """Forward bytes of the memory-bound operators of one layer: ``(common, dense_ffn,
    moe_ffn)`` and of the cross-entropy on the last stage (with :func:`eager_bytes` for
    ``elementwise = "eager"``)."""
    t, cp, b = q["tp"], q["cp"], q["mb"]
    h = c["hidden"]
    T = b * c["seq"] / cp
    Te = xp.where(q["sp"] > 0, T / t, T)
    eager_attn, eager_dense, eager_moe = eager_bytes(c, q, xp)
    common = Te * h * (2.0 * norm_bytes(c, q, xp) + 12.0 + 4.0 * c["dropout"]) + eager_attn
    dense = T * c["act_bytes"] * c["ffn"] / t + eager_dense
    Tm = T / t
    k = c["top_k"]
    moe = (Tm * k * (8.0 * h + c["act_bytes"] * c["expert_ffn"]) + Tm * c["act_bytes"] * c["expert_ffn"] * c["shared"]
           + eager_moe)
    logits = T * 16.0 * c["vocab"] / t
    return common, dense, moe, logits


def layer_times(c, q, xp):
    """Seconds per micro-batch on one rank: forward + backward (+ recomputation) of one
    dense layer, of one MoE layer, and of the last stage's logits and loss; and one forward
    of each kind of layer (``dense_forward``, ``moe_forward``)."""
    fp8 = q["fp8"] > 0
    precision = gemm_precision(c, q, xp)
    parts = {"attn": 0.0, "dense": 0.0, "moe": 0.0, "logit": 0.0}
    # FP8 cast bytes, forward and backward (none for the head and the router: cast_bytes)
    casts = {"attn": 0.0, "dense": 0.0, "moe": 0.0, "logit": 0.0}
    bwd_casts = dict(casts)
    # what recompute = "selective-op" repeats: its share of each GEMM (with its casts)
    op_gemm = {"attn": 0.0, "dense": 0.0, "moe": 0.0, "logit": 0.0}
    op_casts = dict(casts)
    # what the selective modules mla_up_proj and shared_experts repeat: their GEMMs and casts
    module = {"rm_mla": 0.0, "rm_shared": 0.0}
    of_module = dict(q_up="rm_mla", kv_up="rm_mla", shared_in="rm_shared", shared_out="rm_shared")
    for name, where, M, N, K, count in _gemms(c, q, xp):
        seconds = gemm_seconds(name, M, N, K, count, c, precision)
        parts[where] = parts[where] + seconds
        op_gemm[where] = op_gemm[where] + c[f"op_{name}"] * seconds
        fwd_cast, bwd_cast = cast_bytes(name, M, N, K, count)
        cast = xp.where(fp8, fwd_cast, 0.0)
        casts[where] = casts[where] + cast
        bwd_casts[where] = bwd_casts[where] + xp.where(fp8, bwd_cast, 0.0)
        op_casts[where] = op_casts[where] + c[f"op_{name}"] * cast
        if name in of_module:
            module[of_module[name]] = module[of_module[name]] + seconds + cast / c["mem_bw"]
    core_f, core_b = _attention_core(c, q, xp)
    common, dense_b, moe_b, logit_b = _elementwise_bytes(c, q, xp)
    bw = c["mem_bw"]
    # selective-op: the attention kernel's output is saved (an unfused core is not: its
    # softmax and batched products are recomputed); every element-wise operator is recomputed
    op_attn = op_gemm["attn"] + (common + op_casts["attn"]) / bw + xp.where(fused_attention(q), 0.0, core_f)
    op_dense = op_gemm["dense"] + (dense_b + op_casts["dense"]) / bw
    op_moe = op_gemm["moe"] + (moe_b + op_casts["moe"]) / bw
    attn_f = parts["attn"] + core_f + (common + casts["attn"]) / bw
    dense_f = parts["dense"] + (dense_b + casts["dense"]) / bw
    moe_f = parts["moe"] + (moe_b + casts["moe"]) / bw

    def forward_backward(where, elementwise):
        """GEMMs and element-wise bytes forward and backward (twice the forward), and the
        casts of both passes."""
        return 3.0 * (parts[where] + elementwise / bw) + (casts[where] + bwd_casts[where]) / bw

    attn_fb = forward_backward("attn", common) + core_f + core_b
    rec = q["rec"]
    per_op = rec == _REC[Recompute.SELECTIVE_OP]
    selective = rec == _REC[Recompute.SELECTIVE]
    # selective: the forward of each module in recompute_modules (core_attn alone by default);
    # layernorm re-reads and re-writes the two norms (4 bytes a token and hidden unit each),
    # moe_act the experts' activation function (its share of the MoE element-wise bytes)
    t_, cp_, b_ = q["tp"], q["cp"], q["mb"]
    tokens = b_ * c["seq"] / cp_
    norm_tokens = xp.where(q["sp"] > 0, tokens / t_, tokens)
    act = tokens / t_ * c["top_k"] * activation_bytes(c, q, xp) * c["expert_ffn"] / bw
    sel_attn = (q["rm_core"] * core_f + q["rm_mla"] * module["rm_mla"]
                + q["rm_ln"] * 2.0 * norm_bytes(c, q, xp) * norm_tokens * c["hidden"] / bw)
    sel_dense = q["rm_mlp"] * dense_f
    sel_moe = xp.where(q["rm_moe"] > 0, moe_f, q["rm_act"] * act + q["rm_shared"] * module["rm_shared"])
    extra_attn = xp.select([selective, rec == _REC[Recompute.FULL], per_op],
                           [sel_attn, attn_f, op_attn], default=0.0)
    full = rec == _REC[Recompute.FULL]
    dense_layer = attn_fb + extra_attn + forward_backward("dense", dense_b) + xp.select([full, per_op, selective],
                                                              [dense_f, op_dense, sel_dense], default=0.0)
    moe_layer = attn_fb + extra_attn + forward_backward("moe", moe_b) + xp.select([full, per_op, selective],
                                                                                  [moe_f, op_moe, sel_moe],
                                                                                  default=0.0)
    logit = 3.0 * parts["logit"] + logit_b / bw
    # one forward of each layer: what full recomputation adds to a layer that is not recomputed
    return dict(dense=dense_layer, moe=moe_layer, logit=logit, dense_forward=attn_f + dense_f,
                moe_forward=attn_f + moe_f)




def kernel_model_constants(hardware: Hardware, kernels: KernelModel) -> dict:
    """The hardware scalars of the operator formulas (host side)."""
    return dict(
        peak=float(hardware.peak_flop_per_s),
        peak_fp8=float(hardware.peak_fp8_flop_per_s or hardware.peak_flop_per_s),
        hbm_bw=float(hardware.hbm_bandwidth_bytes_per_s),
        mem_bw=float(hardware.hbm_bandwidth_bytes_per_s * kernels.memory_bandwidth_fraction),
        e_gemm=float(kernels.gemm_peak_fraction), k_traffic=float(kernels.gemm_traffic),
        e_gemm_fp8=float(kernels.fp8_gemm_peak_fraction or kernels.gemm_peak_fraction),
        e_attn=float(kernels.attention_peak_fraction),
    )


PRECISION_CODES = {p: i for i, p in enumerate(Precision)}
