r"""Workloads: decoder-only transformer architectures, their parameter counts and FLOPs.

Parameter count (weights only; biases none, RMSNorm scales counted)
    * embedding :math:`V h` and an untied output head :math:`V h`;
    * attention, GQA: :math:`h (n_q d) + 2 h (n_{kv} d) + (n_q d) h` with :math:`d = h/n_q`
      unless ``head_dim`` is given; MLA (DeepSeek-V2/V3 form): query down/up
      :math:`h r_q + r_q n_q (d_{nope} + d_{rope})`, key-value down :math:`h (r_{kv} + d_{rope})`,
      key-value up :math:`r_{kv} n_q (d_{nope} + d_v)`, output :math:`n_q d_v h`, plus the
      two low-rank norms;
    * FFN: SwiGLU :math:`3 h f`, GELU :math:`2 h f`; an MoE layer has
      :math:`(E + E_s)` expert FFNs of width :math:`f_e` and a router :math:`h E`;
    * two norms per layer and a final norm.

    *Active* parameters count the ``top_k`` routed experts and the shared experts of each
    MoE layer instead of all of them. With ``tied_embeddings`` the output head is the input
    embedding matrix (counted once; its matrix multiplication still costs FLOPs). Multi-token-prediction (MTP) modules are reported
    separately (:attr:`ParameterCount.mtp`) and are not part of the headline totals, as in
    the DeepSeek-V3 and Pangu Ultra MoE reports.

FLOPs per token (the model-FLOPs convention of PaLM / Megatron-LM)
    Forward: :math:`2 N_{mm}` for the matrix multiplications, where :math:`N_{mm}` is the
    active parameter count less the input embedding (a lookup) and the norms, plus the
    attention scores and values :math:`2 \cdot 2\, s\, n_q (d_{qk} + d_v)/2` per layer,
    counted without the causal mask (as PaLM and Megatron-LM do) unless ``causal=True``,
    which halves it (the FLOPs a causal kernel actually computes). Layers with a sliding
    window (``attention_window`` = :math:`w`, on ``window_layers`` of them, all by default)
    attend to :math:`w` keys instead of :math:`s` (:func:`attended_keys`). Training (model FLOPs)
    = 3 x forward. Hardware FLOPs add recomputation: ``full`` one more forward, ``selective``
    one more attention-core forward (Korthikanti et al. 2022). MFU uses model FLOPs, HFU
    hardware FLOPs.

Conventions (:class:`FlopConvention`), all per token of training
    ``palm``: :math:`6 N_{mm}` + attention without the mask (PaLM's MFU, MegaScale, Llama 3);
    ``causal``: the same with causal attention halved (DeepSeek-V3's and torchtitan's
    causal variants); ``six_n``: :math:`6 N_{mm}` alone; ``megatron``: 4 x forward for the
    transformer layers and 3 x for the logit layer (Narayanan et al. 2021, eq. 3:
    :math:`96 B s l h^2 (1 + s/6h + V/16lh)`, the FLOPs of a run with full recomputation
    whatever the run recomputed, so its TFLOP/s compare across recomputation settings).
"""

from __future__ import annotations

import dataclasses
import enum

from .._errors import InvalidParameterError, check_integer

__all__ = ["Attention", "FFNKind", "MLA", "MoE", "Workload", "ParameterCount", "Recompute",
           "FlopConvention", "parameter_count", "flops_per_token", "model_flops_per_token", "op_recompute_shares"]


class FFNKind(enum.Enum):
    SWIGLU = "swiglu"
    GELU = "gelu"

    @property
    def matrices(self) -> int:
        return 3 if self is FFNKind.SWIGLU else 2


class Attention(enum.Enum):
    GQA = "gqa"  # multi-head / grouped-query attention (MHA when kv_heads == heads)
    MLA = "mla"  # multi-head latent attention


class FlopConvention(enum.Enum):
    """How model FLOPs are counted for MFU and TFLOP/s (module docstring)."""

    PALM = "palm"
    CAUSAL = "causal"
    SIX_N = "six_n"
    MEGATRON = "megatron"


class Recompute(enum.Enum):
    """Activation recomputation: ``none``, ``selective`` (Megatron-LM: the attention core),
    ``full`` (the whole layer), or ``selective-op`` (torchtitan's per-operator policy: the
    outputs of every other matrix multiplication and of the attention kernel are saved, the
    other matrix multiplications and every element-wise operator recomputed; see
    :func:`op_recompute_shares`)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    SELECTIVE_OP = "selective-op"


@dataclasses.dataclass(frozen=True)
class MLA:
    """Multi-head latent attention dimensions."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclasses.dataclass(frozen=True)
class MoE:
    """Mixture-of-experts FFN: ``routed_experts`` of width ``expert_ffn``, ``top_k`` used per
    token, ``shared_experts`` always used; the first ``dense_layers`` layers are dense.
    ``max_nodes_per_token``: node-limited routing (DeepSeek-V3: each token's experts lie on
    at most 4 nodes; 0 = unlimited)."""

    routed_experts: int
    shared_experts: int
    top_k: int
    expert_ffn: int
    dense_layers: int
    max_nodes_per_token: int = 0


@dataclasses.dataclass(frozen=True)
class Workload:
    """A decoder-only transformer and the sequence length it is trained at."""

    name: str
    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int
    vocab: int
    seq_len: int
    ffn_kind: FFNKind = FFNKind.SWIGLU
    attention: Attention = Attention.GQA
    head_dim: int | None = None
    mla: MLA | None = None
    moe: MoE | None = None
    mtp_layers: int = 0
    reported_total_params: float | None = None  # as published, for checks
    reported_active_params: float | None = None
    reported_params_tolerance: float = 0.02
    tied_embeddings: bool = False  # output head shares the input embedding matrix
    dropout: bool = False  # attention and hidden dropout in training (GPT-3-era models)
    causal: bool = True  # causal (decoder) attention mask
    attention_window: int = 0  # sliding-window (local, banded) attention span in tokens; 0 = none
    window_layers: int = 0  # layers that use the window (0 with a window: every layer)

    def __post_init__(self):
        # the enum fields take their values as strings too ("swiglu", "mla"), as the files do
        for name, kind in (("ffn_kind", FFNKind), ("attention", Attention)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(str(value).lower()))
                except ValueError:
                    raise InvalidParameterError(
                        f"{self.name}.{name}={value!r}: expected one of {', '.join(k.value for k in kind)}"
                    ) from None

    def validate(self) -> "Workload":
        """Check the architecture (concrete values); returns ``self``."""
        for name in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len"):
            check_integer(f"{self.name}.{name}", getattr(self, name), minimum=1)
        check_integer(f"{self.name}.attention_window", self.attention_window, minimum=0)
        wl = check_integer(f"{self.name}.window_layers", self.window_layers, minimum=0)
        if wl > self.layers:
            raise InvalidParameterError(
                f"{self.name}.window_layers={wl}: expected 0..layers={self.layers}")
        if wl and not self.attention_window:
            raise InvalidParameterError(
                f"{self.name}.window_layers={wl}: needs attention_window (the window's span in tokens); "
                "expected 0 without a window")
        if self.attention is Attention.GQA:
            if self.heads % self.kv_heads:
                raise InvalidParameterError(
                    f"{self.name}.kv_heads={self.kv_heads}: must divide heads={self.heads}")
            if self.head_dim is None and self.hidden % self.heads:
                raise InvalidParameterError(
                    f"{self.name}.heads={self.heads}: must divide hidden={self.hidden} "
                    "(or give head_dim)")
        elif self.mla is None:
            raise InvalidParameterError(f"{self.name}.mla: MLA attention needs its dimensions")
        if self.moe is not None:
            moe = self.moe
            if not 1 <= moe.top_k <= moe.routed_experts:
                raise InvalidParameterError(
                    f"{self.name}.moe.top_k={moe.top_k}: expected 1..routed_experts={moe.routed_experts}")
            if not 0 <= moe.dense_layers <= self.layers:
                raise InvalidParameterError(
                    f"{self.name}.moe.dense_layers={moe.dense_layers}: expected 0..layers={self.layers}")
        return self

    @property
    def d_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def moe_layers(self) -> int:
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers


@dataclasses.dataclass(frozen=True)
class ParameterCount:
    """Parameter counts of a workload (numbers of weights)."""

    total: float
    active: float
    embedding: float  # input embedding
    output: float  # output head (0 when tied to the embedding)
    attention_per_layer: float
    dense_ffn_per_layer: float
    moe_per_layer: float  # all experts + router of one MoE layer
    moe_active_per_layer: float
    expert_total: float  # all routed-expert weights in the model (what EP shards)
    mtp: float
    mtp_expert: float = 0.0  # the routed-expert weights of the MTP modules (part of mtp)


def _attention_params(w: Workload) -> float:
    h = w.hidden
    if w.attention is Attention.GQA:
        d = w.d_head
        return 2 * h * w.heads * d + 2 * h * w.kv_heads * d
    a = w.mla
    q = h * a.q_lora_rank + a.q_lora_rank * w.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
    kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * w.heads * (
        a.qk_nope_head_dim + a.v_head_dim)
    out = w.heads * a.v_head_dim * h
    return q + kv + out + a.q_lora_rank + a.kv_lora_rank


def parameter_count(workload: Workload) -> ParameterCount:
    """Count the weights of ``workload`` from its architecture (see the module docstring)."""
    w = workload.validate()
    h = w.hidden
    attn = _attention_params(w)
    norms = 2 * h
    dense_ffn = w.ffn_kind.matrices * h * w.ffn_hidden
    if w.moe is not None:
        e = w.moe
        one = w.ffn_kind.matrices * h * e.expert_ffn
        moe_all = (e.routed_experts + e.shared_experts) * one + h * e.routed_experts
        moe_act = (e.top_k + e.shared_experts) * one + h * e.routed_experts
        expert_total = w.moe_layers * e.routed_experts * one
        mtp_expert = w.mtp_layers * e.routed_experts * one
    else:
        moe_all = moe_act = expert_total = mtp_expert = 0.0
    emb = w.vocab * h
    heads = 1 if w.tied_embeddings else 2
    body = w.layers * (attn + norms) + w.dense_layers * dense_ffn
    total = emb * heads + h + body + w.moe_layers * moe_all
    active = emb * heads + h + body + w.moe_layers * moe_act
    # an MTP module: a projection of two hidden states, two norms, one (MoE if any) layer
    mtp_layer = attn + norms + (moe_all if w.moe is not None else dense_ffn)
    mtp = w.mtp_layers * (2 * h * h + 2 * h + mtp_layer)
    return ParameterCount(float(total), float(active), float(emb), float(emb if heads == 2 else 0.0), float(attn),
                          float(dense_ffn), float(moe_all), float(moe_act), float(expert_total),
                          float(mtp), float(mtp_expert))


def attended_keys(w: Workload, seq_len: int, causal: bool) -> float:
    r"""Keys a query attends to, summed over the layers: :math:`s` per full-attention layer
    (:math:`s/2` with the causal mask); with a sliding window of :math:`w < s` tokens,
    :math:`w` per windowed layer (:math:`w - w^2/(2s)` causal: the mean of
    :math:`\min(i, w)` over the positions, continuous form, :math:`s/2` at :math:`w = s`)."""
    s = float(seq_len)
    full = s * (0.5 if causal else 1.0)
    windowed = w.window_layers or (w.layers if w.attention_window else 0)
    span = float(w.attention_window)
    if not windowed or span >= s:
        return w.layers * full
    band = span - span * span / (2.0 * s) if causal else span
    return (w.layers - windowed) * full + windowed * band


def _attention_core_flops(w: Workload, seq_len: int, causal: bool = False) -> float:
    """Forward FLOPs per token of the attention scores and weighted values, all layers."""
    if w.attention is Attention.GQA:
        dqk = dv = w.d_head
    else:
        dqk = w.mla.qk_nope_head_dim + w.mla.qk_rope_head_dim
        dv = w.mla.v_head_dim
    return 2 * attended_keys(w, seq_len, causal) * w.heads * (dqk + dv)


def _matmul_weights(w: Workload) -> float:
    """Weights used in matrix multiplications per token (output head included, input
    embedding lookup and norms excluded)."""
    pc = parameter_count(w)
    matmul = pc.active - pc.embedding - pc.output + w.vocab * w.hidden - (2 * w.layers + 1) * w.hidden
    if w.attention is Attention.MLA:
        matmul -= w.layers * (w.mla.q_lora_rank + w.mla.kv_lora_rank)
    return float(matmul)


def flops_per_token(workload: Workload, *, recompute: Recompute = Recompute.NONE,
                    seq_len: int | None = None, causal: bool = False) -> tuple[float, float]:
    """Training FLOPs per token: ``(model_flops, hardware_flops)``.

    Args:
        workload: the model.
        recompute: activation recomputation (adds to hardware FLOPs only).
        seq_len: tokens per sequence (default: the workload's).
        causal: count the attention core with the causal mask (half), as a causal kernel
            computes it; default ``False``, the PaLM / Megatron-LM convention.

    Returns:
        model FLOPs (3 x forward) and hardware FLOPs (with recomputation), per token.
    """
    w = workload.validate()
    s = w.seq_len if seq_len is None else check_integer("seq_len", seq_len, minimum=1)
    matmul = _matmul_weights(w)
    core = _attention_core_flops(w, s, causal)
    forward = 2 * matmul + core
    model = 3 * forward
    rec = Recompute(recompute)
    extra = {Recompute.NONE: 0.0, Recompute.SELECTIVE: core, Recompute.FULL: forward,
             Recompute.SELECTIVE_OP: _op_recompute_flops(w)}[rec]
    return float(model), float(model + extra)


def op_recompute_shares(workload: Workload) -> dict[str, float]:
    """Share of each forward GEMM of a layer that ``recompute = "selective-op"`` recomputes.

    torchtitan's per-operator checkpoint policy (``selective_ac_option = "op"``,
    ``torchtitan/models/llama3/infra/parallelize.py``) counts the matrix multiplications
    (``aten.mm``) of each transformer block in program order and saves the output of the
    odd-numbered ones, recomputing the even-numbered ones; the attention kernel's output is
    saved, every element-wise operator (norms, activations, residual adds) recomputed. In the
    order of torchtitan's blocks: ``wq, wk, wv, wo`` (GQA; MLA: ``wq_a, wq_b, wkv_a, wkv_b,
    wo``), then the FFN ``w1, w3, w2`` (SwiGLU; GELU: ``w1, w2``) or, in an MoE layer, the
    router, the routed experts and the shared experts' ``w1, w3, w2``. Keys are the operator
    names of the layer's GEMM list (``_operators``; ``qkv`` is ``wq, wk, wv`` fused, of which
    ``wk`` is recomputed). Assumption: the routed experts' grouped GEMMs are not ``aten.mm``
    and are saved (share 0). The output head is outside the blocks (share 0).
    """
    w = workload.validate()
    gated = w.ffn_kind is FFNKind.SWIGLU
    if w.attention is Attention.GQA:
        d = w.d_head
        shares = dict(qkv=w.kv_heads * d / ((w.heads + 2 * w.kv_heads) * d), q_down=0.0, q_up=0.0,
                      kv_down=0.0, kv_up=0.0, attn_out=1.0)
        a = 4  # wq, wk, wv, wo
    else:
        shares = dict(qkv=0.0, q_down=0.0, q_up=1.0, kv_down=0.0, kv_up=1.0, attn_out=0.0)
        a = 5  # wq_a, wq_b, wkv_a, wkv_b, wo

    def even(i: int) -> float:
        return 1.0 if i % 2 == 0 else 0.0

    g = 2 if gated else 1
    # the FFN's first projection: w1 and w3 (one of each parity) or w1 alone
    shares.update(ffn_in=0.5 if gated else even(a + 1), ffn_out=even(a + g + 1), router=even(a + 1),
                  expert_in=0.0, expert_out=0.0, shared_in=0.5 if gated else even(a + 2),
                  shared_out=even(a + g + 2), logits=0.0)
    return shares


def _op_recompute_flops(w: Workload) -> float:
    """Forward GEMM FLOPs per token that ``selective-op`` recomputes, all layers."""
    r = op_recompute_shares(w)
    h = w.hidden
    g = 2 if w.ffn_kind is FFNKind.SWIGLU else 1
    if w.attention is Attention.GQA:
        d = w.d_head
        attn = (r["qkv"] * h * (w.heads + 2 * w.kv_heads) * d + r["attn_out"] * w.heads * d * h)
    else:
        m = w.mla
        dqk = m.qk_nope_head_dim + m.qk_rope_head_dim
        attn = (r["q_up"] * m.q_lora_rank * w.heads * dqk
                + r["kv_up"] * m.kv_lora_rank * w.heads * (m.qk_nope_head_dim + m.v_head_dim))
    dense = (r["ffn_in"] * g + r["ffn_out"]) * h * w.ffn_hidden
    moe = 0.0
    if w.moe is not None:
        e = w.moe
        moe = r["router"] * h * e.routed_experts + (r["shared_in"] * g + r["shared_out"]) * h * e.expert_ffn * e.shared_experts
    return 2.0 * (w.layers * attn + w.dense_layers * dense + w.moe_layers * moe)


def module_recompute_flops(workload: Workload) -> dict[str, float]:
    """Forward FLOPs per token, all layers, that each selective-recomputation module repeats
    (``Plan.recompute_modules``): ``core_attn`` the attention core, ``mla_up_proj`` the query
    and key/value up-projections, ``mlp`` the dense layers' feed-forward, ``moe`` the MoE
    layers' router, routed (``top_k`` per token) and shared experts, ``shared_experts`` the
    shared experts alone; ``layernorm`` and ``moe_act`` repeat element-wise operators only (0)."""
    w = workload.validate()
    h = w.hidden
    g = 2 if w.ffn_kind is FFNKind.SWIGLU else 1
    up = 0.0
    if w.attention is Attention.MLA:
        m = w.mla
        up = (m.q_lora_rank * w.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
              + m.kv_lora_rank * w.heads * (m.qk_nope_head_dim + m.v_head_dim))
    moe = shared = 0.0
    if w.moe is not None:
        e = w.moe
        shared = (g + 1) * h * e.expert_ffn * e.shared_experts
        moe = h * e.routed_experts + (g + 1) * h * e.expert_ffn * e.top_k + shared
    return dict(core_attn=float(_attention_core_flops(w, w.seq_len)), mla_up_proj=2.0 * w.layers * up,
                layernorm=0.0, mlp=2.0 * w.dense_layers * (g + 1) * h * w.ffn_hidden,
                moe=2.0 * w.moe_layers * moe, moe_act=0.0, shared_experts=2.0 * w.moe_layers * shared)


def model_flops_per_token(workload: Workload, convention: FlopConvention = FlopConvention.PALM, *,
                          seq_len: int | None = None) -> float:
    """Model FLOPs per trained token under ``convention`` (module docstring).

    >>> from markovsim.training import Workload
    >>> w = Workload("tiny", layers=2, hidden=8, ffn_hidden=16, heads=2, kv_heads=2, vocab=10, seq_len=4)
    >>> model_flops_per_token(w, "megatron") > 4 / 3 * model_flops_per_token(w, "six_n")
    True
    """
    w = workload.validate()
    conv = FlopConvention(convention)
    s = w.seq_len if seq_len is None else check_integer("seq_len", seq_len, minimum=1)
    matmul = _matmul_weights(w)
    core = _attention_core_flops(w, s)
    if conv is FlopConvention.SIX_N:
        return 6.0 * matmul
    if conv is FlopConvention.CAUSAL:
        return 6.0 * matmul + 3.0 * _attention_core_flops(w, s, causal=True)
    if conv is FlopConvention.MEGATRON:
        logits = 2.0 * w.vocab * w.hidden  # the logit layer is not recomputed
        return 4.0 * (2 * matmul - logits + core) + 3.0 * logits
    return 6.0 * matmul + 3.0 * core
