"""Parallel plans: TP, PP (with virtual stages), DP (with ZeRO), EP, CP and batch sizes.

Rank order (innermost first): tensor parallel (stride 1), context parallel, data parallel,
pipeline parallel, so a TP group is ``tp`` consecutive accelerators, a DP group has stride
``tp * cp``, and pipeline neighbours are ``tp * cp * dp`` apart. Expert parallelism is
carved from the ``tp * cp * dp`` ranks of one pipeline stage (expert tensor parallelism 1,
as in Megatron-LM's MoE layers): an EP group is ``ep`` consecutive accelerators and the
expert weights are data-parallel over ``tp * cp * dp / ep`` ranks.
"""

from __future__ import annotations

import dataclasses
import enum

from .._errors import InvalidParameterError, check_integer
from ._pipeline import Schedule, _schedule
from ._workload import Attention, Recompute, Workload

__all__ = ["Plan", "LayerSplit", "AttentionKernel", "Elementwise", "EAGER_BYTES", "FLASH1_SPEED",
           "FLASH_BACKWARD_FLOPS", "Precision",
           "RECOMPUTE_MODULES", "EPDispatch", "ExpertRouting", "FP8Recipe", "validate_plan"]


class AttentionKernel(enum.Enum):
    """How attention is computed: ``flash`` (fused, scores never in HBM, causal blocks
    skipped; FlashAttention-2 and later kernels, at the hardware preset's
    ``attention_peak_fraction``), ``flash1`` (the same algorithm in a first-generation
    kernel: FlashAttention v1 or its Triton port, 2022-2023, e.g. MPT's
    ``attn_impl = 'triton'``; at :data:`FLASH1_SPEED` of the preset's fraction) or
    ``unfused`` (score matrix materialised; softmax, mask and dropout as memory-bound
    kernels, the Megatron-LM of 2021-2023 without ``--use-flash-attn``)."""

    FLASH = "flash"
    UNFUSED = "unfused"
    FLASH1 = "flash1"


class Elementwise(enum.Enum):
    """How the memory-bound operators of a layer run. ``fused``: one kernel each (a norm,
    the activation, a residual add), as Megatron-core and Transformer Engine, torch.compile
    and fused Triton or CUDA kernels run them. ``eager``: PyTorch's eager mode with the block
    written from primitive operators, as torchtitan without torch.compile and Hugging Face
    transformers write a Llama block: each operator reads and writes its tensor in HBM (the
    bytes are :data:`EAGER_BYTES`). The extra bytes are those of a SwiGLU workload (taken to
    have RMSNorm and rotary positions, as every SwiGLU preset has); a GELU workload
    (LayerNorm, one kernel in eager mode too) gains only the attention output's layout copy."""

    FUSED = "fused"
    EAGER = "eager"


#: Bytes an eager PyTorch Llama block moves per element, forward, beyond the fused count
#: (bf16 tensors 2 bytes, their FP32 copies 4), counted from torchtitan's model (models/
#: norms.py RMSNorm, models/llama/model.py apply_rotary_emb, repeat_kv, Attention and
#: FeedForward; the same operators as Hugging Face's LlamaRMSNorm): ``rmsnorm`` 36 a norm
#: (x.float() 2+4, pow 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2) against the
#: fused kernel's 4; ``rotary`` 20 per query and key element (float() 2+4, the complex
#: product 4+4, type_as 4+2; no fused count; Hugging Face's rotate_half form moves the same
#: 20: the negated half 1+1, cat 2+2, two products 2+2 each, the sum 4+2); ``kv_repeat`` per
#: key and value element of the repeated heads, 2 read per key/value head element and 2 written per query head element
#: (repeat_kv's expand and reshape copy, only with fewer key/value heads than query heads);
#: ``attention_out`` 4 per attention output element (transpose(1, 2).contiguous()); ``swiglu``
#: 10 per FFN element (silu 2+2, the product 2+2+2) against the fused 6. Backward moves twice
#: the forward bytes, as for every memory-bound operator.
EAGER_BYTES = {"rmsnorm": 36.0, "rotary": 20.0, "kv_repeat": 2.0, "attention_out": 4.0, "swiglu": 10.0}

#: the element-wise codes of the plan arrays (``eager``): fused 0, eager 1
ELEMENTWISE_CODES = {e: i for i, e in enumerate(Elementwise)}


#: Speed of a first-generation fused attention kernel (``flash1``) relative to the preset's
#: ``flash`` fraction: Dao 2023, FlashAttention-2 (arXiv 2307.08691) abstract: FlashAttention
#: reaches "only 25-40 %" of the A100's peak, FlashAttention-2 "around 2x" that, 50-73 %
#: (the presets take the low end, 0.5; 0.25 / 0.5 = 0.5). A measured ratio on the A100, applied
#: to every preset (an assumption beyond the A100).
FLASH1_SPEED = 0.5

#: Backward FLOPs of a fused (flash) attention kernel per forward FLOP. The forward runs two
#: matrix products per block (:math:`S = QK^\top`, :math:`O = PV`); the backward, which keeps
#: no score matrix, recomputes :math:`S` and runs four more (:math:`dV = P^\top dO`,
#: :math:`dP = dO\,V^\top`, :math:`dQ = dS\,K`, :math:`dK = dS^\top Q`): five products to the
#: forward's two. Dao 2023, FlashAttention-2 (arXiv 2307.08691) sec. 3.2 and its benchmarks,
#: which count the backward as 2.5x the forward FLOPs; the kernel fractions the presets cite
#: (FlashAttention-2/-3 papers) are measured on that count. An unfused backward stores the
#: scores and runs 2x the forward's batched products.
FLASH_BACKWARD_FLOPS = 2.5

#: the attention kernel codes of the plan arrays (``attn``): flash 0, unfused 1, flash1 2
ATTENTION_CODES = {a: i for i, a in enumerate(AttentionKernel)}


def fused_attention(q):
    """Whether each plan of the arrays ``q`` runs a fused kernel (flash or flash1: scores
    never in HBM), from its ``attn`` code."""
    return q["attn"] != ATTENTION_CODES[AttentionKernel.UNFUSED]


class Precision(enum.Enum):
    """Number format of GEMMs (and of the expert dispatch) or of gradient reduction."""

    BF16 = "bf16"
    FP8 = "fp8"
    FP32 = "fp32"

    @property
    def bytes(self) -> float:
        return {Precision.BF16: 2.0, Precision.FP8: 1.0, Precision.FP32: 4.0}[self]


class FP8Recipe(enum.Enum):
    """How an FP8 run scales its tensors (Transformer Engine's recipes), as far as it costs
    time beyond the GEMMs: ``delayed`` (``DelayedScaling``, Transformer Engine's default
    recipe, and NeMo's before 2025) scales each tensor by the amax history of earlier
    iterations and, with ``reduce_amax`` (its default), all-reduces the amaxes over the
    ``fp8_group`` at the end of each forward and backward of an ``fp8_autocast`` region;
    ``current`` (``Float8CurrentScaling``), ``mxfp8`` (``MXFP8BlockScaling``) and
    ``blockwise`` (DeepSeek-V3's tile- and block-wise scaling, ``Float8BlockScaling``) scale
    from the tensor itself and synchronise nothing across data-parallel ranks."""

    DELAYED = "delayed"
    CURRENT = "current"
    MXFP8 = "mxfp8"
    BLOCKWISE = "blockwise"


class LayerSplit(enum.Enum):
    """How layers are cut into pipeline chunks: ``even`` (``pp * virtual_stages`` must
    divide the layers) or ``uneven`` (some chunks hold one layer fewer, spread over the
    stages as evenly as whole chunks allow; the step runs at the pace of the fullest
    stage). Uneven allows up to ``layers + 2`` chunks: Megatron-core's
    ``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split``
    give the embedding and the loss a chunk slot each (126 layers on 16 x 8 chunks)."""

    EVEN = "even"
    UNEVEN = "uneven"


class EPDispatch(enum.Enum):
    """What the expert-parallel all-to-all moves per token: ``per-expert`` (one copy of the
    token for each of its ``top_k`` experts, permuted by expert before the all-to-all, as
    Megatron-core's ``alltoall`` token dispatcher does inside a node; the default) or ``per-rank`` (one copy per
    destination GPU, however many of its experts that GPU holds, and across nodes one copy
    per destination node, forwarded inside the node over NVLink; the combine returns one
    reduced copy per GPU: DeepEP, whose dispatch layout counts ``num_tokens_per_rank`` and
    ``is_token_in_rank``, and DeepSeek-V3's own dispatch, arXiv 2412.19437 sec. 3.2.2)."""

    PER_EXPERT = "per-expert"
    PER_RANK = "per-rank"


class ExpertRouting(enum.Enum):
    """Which experts a token goes to, for counting the destinations of a ``per-rank``
    dispatch (every pattern is balanced: each expert gets the same tokens): ``random`` (each
    token's ``top_k`` experts a uniformly random set, within the ``max_nodes_per_token``
    nodes where the workload limits them: a trained router's balanced routing, and
    Megatron-core's ``moe_router_force_load_balancing``; the default) or ``consecutive``
    (token ``i`` takes experts ``i k .. i k + k - 1`` modulo the experts: NeMo AutoModel's
    benchmark ``FakeBalancedGate``, which puts a token's experts on one or two neighbouring
    GPUs)."""

    RANDOM = "random"
    CONSECUTIVE = "consecutive"


@dataclasses.dataclass(frozen=True)
class Plan:
    """A parallel plan and the software choices of the run. ``global_batch`` and
    ``micro_batch`` count sequences.

    ``attention_kernel``: :class:`AttentionKernel`; ``elementwise``: :class:`Elementwise`
    (fused kernels, or PyTorch's eager operators); ``precision``: GEMM number format
    (``fp8`` runs GEMMs at the hardware's FP8 rate); ``ep_dispatch_precision``: the number
    format of what the expert all-to-all moves toward the experts (the forward dispatch and
    the backward's activation gradients before the down-projection), ``bf16`` (default:
    Megatron-core's ``alltoall``, DeepEP and HybridEP dispatchers move the BF16 hidden states
    and the experts' GEMMs quantize them, also in FP8 runs) or ``fp8`` (quantized before the
    transfer, as DeepSeek-V3 does, arXiv 2412.19437 sec. 3.3.3; needs ``precision = "fp8"``);
    the combines, forward and backward, move BF16 either way;
    ``grad_reduce``: the format gradients are reduced and accumulated in (Megatron-LM keeps
    FP32 main gradients by default with BF16 training). ``zero_shard_group``: hybrid sharding
    (HSDP; Megatron-core's distributed-optimizer instances, MaxText's FSDP inside a slice):
    ZeRO shards over groups of this many data-parallel ranks and the ``dp x cp / group``
    replicas all-reduce their shards across the outermost network level once per step; 0
    (default) shards over all of them. ``recompute_layers``: with ``recompute = "full"``,
    recompute only this many layers of each pipeline chunk and keep the others' activations
    (Megatron-core's ``--recompute-method block --recompute-num-layers``); 0 (default)
    recomputes every layer. ``fp8_params``: FP8 runs keep the weights in FP8 (Megatron-core's
    ``fp8_param_gather``): no BF16 copy beside the FP8 one, and the ZeRO all-gather of the
    updated weights moves 1 byte per weight instead of 2. ``offload_layers``: activation
    offloading (Megatron-core's ``cpu_offloading_num_layers``): this many layers of each
    pipeline chunk move their activations to host memory after their forward and back before
    their backward, over the hardware's ``host_link``; 0 (default) offloads none.
    ``recompute_modules``: with ``recompute = "selective"``, which parts of each layer are
    recomputed (Megatron-core's ``--recompute-modules``, names in :data:`RECOMPUTE_MODULES`);
    empty (default) is Megatron-core's default, ``("core_attn",)``. ``optimizer_moments``:
    the format of Adam's two moments, ``fp32`` (default) or ``bf16`` (Megatron-core's
    ``exp_avg_dtype`` / ``exp_avg_sq_dtype``; DeepSeek-AI 2024 sec. 3.3.3): 12 or 8 bytes
    of optimizer state per parameter with the FP32 master weights. ``ep_dispatch`` and
    ``expert_routing``: what the expert all-to-all moves (:class:`EPDispatch`) and, for a
    ``per-rank`` dispatch, the routing pattern that sets how many GPUs and nodes a token
    reaches (:class:`ExpertRouting`; :func:`markovsim.training.dispatch_copies`).
    ``expert_tp``: Megatron-core's ``expert_tensor_parallel_size`` as far as it places the
    expert-parallel group: its ``ep`` ranks sit ``expert_tp`` ranks apart (Megatron-core's
    expert rank order tp-ep-dp-pp), so the group spans ``ep x expert_tp`` consecutive ranks
    and a node holds ``node_size / expert_tp`` of them; 1 (default) keeps them adjacent, the
    setting of NVIDIA's current MoE recipes. Megatron-core's own default, when a run does not
    set it, is the plan's ``tp``. Only the all-to-all's placement follows it (the experts'
    compute is modelled as before). ``combined_1f1b``: Megatron-core's combined 1F1B
    schedule (``--overlap-moe-expert-parallel-comm``; Megatron-Bridge's ``moe_a2a_overlap``),
    for a 1F1B or interleaved plan with expert parallelism: the forward of one micro-batch runs
    beside the backward of another, and each one's expert all-to-all is hidden behind the
    other's computation; the warm-up and cool-down micro-batches, which have no partner, hide
    what an unpaired micro-batch hides (``efficiency.ep_overlap``). ``efficiency.ep_pair_overlap`` is the share of the partner's computation
    that can cover it, as under DualPipe. ``fp8_recipe``: with ``precision = "fp8"``, the
    scaling recipe (:class:`FP8Recipe`, default ``delayed``, Transformer Engine's default):
    under ``delayed`` each forward and each backward of a pipeline chunk ends with a blocking
    all-reduce of the amaxes over the ranks of its pipeline stage (Megatron-core's
    ``fp8_group``, the tensor-, context- and data-parallel ranks), charged in ``sync``.
    """

    tp: int
    pp: int
    dp: int
    global_batch: int
    micro_batch: int = 1
    virtual_stages: int = 1
    ep: int = 1
    cp: int = 1
    expert_tp: int = 1
    zero_stage: int = 1
    zero_shard_group: int = 0
    sequence_parallel: bool = True
    schedule: Schedule = Schedule.ONE_F_ONE_B
    recompute: Recompute = Recompute.NONE
    recompute_layers: int = 0
    offload_layers: int = 0
    fp8_params: bool = False
    recompute_modules: tuple[str, ...] = ()
    optimizer_moments: Precision = Precision.FP32
    layer_split: LayerSplit = LayerSplit.EVEN
    ep_dispatch: EPDispatch = EPDispatch.PER_EXPERT
    expert_routing: ExpertRouting = ExpertRouting.RANDOM
    ep_dispatch_precision: Precision = Precision.BF16
    combined_1f1b: bool = False
    fp8_recipe: FP8Recipe = FP8Recipe.DELAYED
    attention_kernel: AttentionKernel = AttentionKernel.FLASH
    elementwise: Elementwise = Elementwise.FUSED
    precision: Precision = Precision.BF16
    grad_reduce: Precision = Precision.FP32

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per data-parallel replica per step."""
        return self.global_batch // (self.dp * self.micro_batch)

    def replace(self, **changes) -> "Plan":
        return dataclasses.replace(self, **changes)


#: the parts of a layer that ``recompute = "selective"`` can repeat (Megatron-core's
#: ``--recompute-modules``): ``core_attn`` the attention core (the default), ``mla_up_proj``
#: MLA's query and key/value up-projections, ``layernorm`` the norms, ``mlp`` a dense layer's
#: feed-forward, ``moe`` an MoE layer's experts whole, ``moe_act`` the routed experts'
#: activation function, ``shared_experts`` an MoE layer's shared experts
RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "layernorm", "mlp", "moe", "moe_act", "shared_experts")


def _check_modules(w: Workload, modules) -> None:
    """Refuse a recompute module the workload does not have (a typo or a wrong model)."""
    for name in modules:
        if name == "mla_up_proj" and w.attention is not Attention.MLA:
            raise InvalidParameterError(
                f"plan.recompute_modules: 'mla_up_proj' needs multi-head latent attention ({w.name} has "
                f"{w.attention.value!r} attention); expected another module")
        if name in ("moe", "moe_act") and w.moe is None:
            raise InvalidParameterError(
                f"plan.recompute_modules: {name!r} needs a mixture-of-experts workload ({w.name} is dense)")
        if name == "shared_experts" and (w.moe is None or not w.moe.shared_experts):
            raise InvalidParameterError(
                f"plan.recompute_modules: 'shared_experts' needs shared experts ({w.name} has none)")


#: the plan's integer fields and its fields that name a member of an enumeration
_INTEGERS = ("tp", "pp", "dp", "global_batch", "micro_batch", "virtual_stages", "ep", "cp", "expert_tp",
             "zero_stage", "zero_shard_group", "recompute_layers", "offload_layers")
_MEMBERS = {"recompute": Recompute, "layer_split": LayerSplit, "attention_kernel": AttentionKernel,
            "elementwise": Elementwise,
            "precision": Precision, "grad_reduce": Precision, "optimizer_moments": Precision,
            "ep_dispatch": EPDispatch, "expert_routing": ExpertRouting, "ep_dispatch_precision": Precision,
            "fp8_recipe": FP8Recipe}


def member(name: str, value, kind: type[enum.Enum]) -> enum.Enum:
    """``value`` as a member of the enumeration ``kind`` (a member, or its value in any case);
    anything else is refused naming ``name`` and the choices."""
    if isinstance(value, kind):
        return value
    try:
        return kind(str(value).lower())
    except ValueError:
        raise InvalidParameterError(
            f"{name}={value!r}: expected one of {', '.join(repr(m.value) for m in kind)}") from None


def _normalised(plan: Plan) -> Plan:
    """``plan`` with its integer fields as ``int`` and its named choices as enumeration
    members; a string where a number belongs, a fractional degree or an unknown choice is
    refused naming the field (not a ``TypeError`` or ``ValueError`` from deep inside)."""
    changes = {}
    for name in _INTEGERS:
        value = getattr(plan, name)
        if isinstance(value, str):
            raise InvalidParameterError(f"plan.{name}={value!r}: expected an integer, got a string")
        changes[name] = check_integer(f"plan.{name}", value)
    for name, kind in _MEMBERS.items():
        changes[name] = member(f"plan.{name}", getattr(plan, name), kind)
    changes["schedule"] = _schedule(plan.schedule)
    return plan.replace(**changes)


def validate_plan(workload: Workload, plan: Plan, *, world_size: int | None = None) -> Plan:
    """Check that ``plan`` can run ``workload``; raise naming the violated constraint.

    Checks: positive integer degrees; TP divides the attention heads (and the KV heads, or
    is a multiple of them); ``pp * virtual_stages`` divides the layers (unless
    ``layer_split`` is uneven, when it must not exceed them plus two: Megatron-core can
    count the embedding and the loss as a layer each); EP divides the routed experts
    and the ``tp * cp * dp`` ranks of a stage; CP divides the sequence; the global batch is
    a whole number of micro-batches on every replica; the schedule's own domain; and, if
    ``world_size`` is given, that the plan tiles it exactly. (Memory is checked by
    :func:`markovsim.training.step_time` against the hardware.)
    """
    if not isinstance(plan, Plan):
        raise InvalidParameterError(f"plan={plan!r}: expected a Plan")
    plan = _normalised(plan)
    for name in ("tp", "pp", "dp", "global_batch", "micro_batch", "virtual_stages", "ep", "cp"):
        check_integer(f"plan.{name}", getattr(plan, name), minimum=1)
    z = check_integer("plan.zero_stage", plan.zero_stage, minimum=0)
    if z > 3:
        raise InvalidParameterError(f"plan.zero_stage={z}: expected 0, 1, 2 or 3")
    g = check_integer("plan.zero_shard_group", plan.zero_shard_group, minimum=0)
    if g:
        ranks = plan.dp * plan.cp
        if z == 0:
            raise InvalidParameterError(
                f"plan.zero_shard_group={g}: needs zero_stage >= 1 (ZeRO 0 shards nothing); "
                "expected 0 or a ZeRO stage")
        if ranks % g:
            raise InvalidParameterError(
                f"plan.zero_shard_group={g}: must divide the dp x cp = {ranks} data-parallel ranks "
                "(0: shard over all of them)")
    sched = _schedule(plan.schedule)
    rl = check_integer("plan.recompute_layers", plan.recompute_layers, minimum=0)
    if rl and Recompute(plan.recompute) is not Recompute.FULL:
        raise InvalidParameterError(
            f"plan.recompute_layers={rl}: recomputes whole layers, so it needs recompute='full' "
            f"(got recompute={Recompute(plan.recompute).value!r}); expected 0 or recompute='full'")
    check_integer("plan.offload_layers", plan.offload_layers, minimum=0)
    modules = plan.recompute_modules
    if isinstance(modules, str) or not isinstance(modules, (tuple, list)):
        raise InvalidParameterError(
            f"plan.recompute_modules={modules!r}: expected a list of module names from "
            f"{', '.join(RECOMPUTE_MODULES)}")
    for name in modules:
        if name not in RECOMPUTE_MODULES:
            raise InvalidParameterError(
                f"plan.recompute_modules: {name!r} is not a module; expected names from "
                f"{', '.join(RECOMPUTE_MODULES)} (Megatron-core's --recompute-modules)")
    if len(set(modules)) != len(modules):
        raise InvalidParameterError(f"plan.recompute_modules={list(modules)!r}: a module is named twice")
    if modules and Recompute(plan.recompute) is not Recompute.SELECTIVE:
        raise InvalidParameterError(
            f"plan.recompute_modules={list(modules)!r}: the modules choose what selective recomputation "
            f"repeats, so they need recompute='selective' (got recompute={Recompute(plan.recompute).value!r}); "
            "expected recompute_modules=[] or recompute='selective'")
    if Precision(plan.optimizer_moments) is Precision.FP8:
        raise InvalidParameterError("plan.optimizer_moments='fp8': expected 'fp32' or 'bf16'")
    AttentionKernel(plan.attention_kernel)
    if not isinstance(plan.fp8_params, (bool, int)) or plan.fp8_params not in (0, 1):
        raise InvalidParameterError(f"plan.fp8_params={plan.fp8_params!r}: expected true or false")
    if plan.fp8_params and Precision(plan.precision) is not Precision.FP8:
        raise InvalidParameterError(
            f"plan.fp8_params=True: FP8 weights need precision='fp8' (got precision="
            f"{Precision(plan.precision).value!r}); expected fp8_params=False or precision='fp8'")
    if Precision(plan.precision) is Precision.FP32:
        raise InvalidParameterError("plan.precision='fp32': expected 'bf16' or 'fp8' (the GEMM format)")
    if Precision(plan.grad_reduce) is Precision.FP8:
        raise InvalidParameterError("plan.grad_reduce='fp8': expected 'fp32' or 'bf16'")
    if not isinstance(plan.combined_1f1b, (bool, int)) or plan.combined_1f1b not in (0, 1):
        raise InvalidParameterError(f"plan.combined_1f1b={plan.combined_1f1b!r}: expected true or false")
    if plan.combined_1f1b and plan.ep < 2:
        raise InvalidParameterError(
            f"plan.combined_1f1b=True: the combined 1F1B schedule hides the expert all-to-all, so it needs "
            f"expert parallelism (got ep={plan.ep}); expected combined_1f1b=False or ep > 1")
    if plan.combined_1f1b and _schedule(plan.schedule) not in (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED):
        raise InvalidParameterError(
            f"plan.combined_1f1b=True: Megatron-core pairs the forward and backward micro-batches of the 1F1B "
            f"and interleaved schedules (got schedule={_schedule(plan.schedule).value!r}); expected schedule='1f1b' "
            "or 'interleaved' (DualPipe pairs them itself)")
    member("plan.fp8_recipe", plan.fp8_recipe, FP8Recipe)
    dispatch = Precision(plan.ep_dispatch_precision)
    if dispatch is Precision.FP32:
        raise InvalidParameterError("plan.ep_dispatch_precision='fp32': expected 'bf16' or 'fp8'")
    if dispatch is Precision.FP8 and Precision(plan.precision) is not Precision.FP8:
        raise InvalidParameterError(
            f"plan.ep_dispatch_precision='fp8': an FP8 dispatch feeds FP8 expert GEMMs, so it needs "
            f"precision='fp8' (got precision={Precision(plan.precision).value!r}); expected "
            "ep_dispatch_precision='bf16' or precision='fp8'")
    w = workload.validate()
    _check_modules(w, modules)
    if w.heads % plan.tp:
        raise InvalidParameterError(
            f"plan.tp={plan.tp}: tensor parallelism must divide the attention heads "
            f"({w.name}: heads={w.heads})")
    if w.attention is Attention.GQA and w.kv_heads % plan.tp and plan.tp % w.kv_heads:
        raise InvalidParameterError(
            f"plan.tp={plan.tp}: tensor parallelism must divide kv_heads={w.kv_heads} or be a "
            "multiple of it")
    chunks = plan.pp * plan.virtual_stages
    if LayerSplit(plan.layer_split) is LayerSplit.EVEN and w.layers % chunks:
        raise InvalidParameterError(
            f"plan.pp={plan.pp} x virtual_stages={plan.virtual_stages} = {chunks}: must divide "
            f"the layers ({w.name}: layers={w.layers}); use layer_split='uneven' for an uneven cut")
    # Megatron-core can count the embedding and the loss as one layer each in the split
    # (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split): up to
    # L + 2 chunks, the first and the last holding no transformer layer beside them
    if chunks > w.layers + 2:
        raise InvalidParameterError(
            f"plan.pp x virtual_stages = {chunks}: more pipeline chunks than layers ({w.layers}) "
            "plus the embedding and the loss (at most layers + 2)")
    most = -(-w.layers // chunks)
    if plan.recompute_layers > most:
        raise InvalidParameterError(
            f"plan.recompute_layers={plan.recompute_layers}: a pipeline chunk holds at most {most} layers "
            f"({w.name}: {w.layers} layers on pp x virtual_stages = {chunks} chunks); expected 0..{most}")
    if plan.offload_layers >= most:
        raise InvalidParameterError(
            f"plan.offload_layers={plan.offload_layers}: fewer than a pipeline chunk's {most} layers can offload "
            f"their activations (the last layer's backward starts at once; Megatron-core requires fewer "
            f"offloaded layers than layers); expected 0..{most - 1}")
    if plan.ep > 1:
        if w.moe is None:
            raise InvalidParameterError(f"plan.ep={plan.ep}: {w.name} is dense (no experts)")
        if w.moe.routed_experts % plan.ep:
            raise InvalidParameterError(
                f"plan.ep={plan.ep}: expert parallelism must divide the routed experts "
                f"({w.moe.routed_experts})")
        if (plan.tp * plan.cp * plan.dp) % plan.ep:
            raise InvalidParameterError(
                f"plan.ep={plan.ep}: expert parallelism must divide tp*cp*dp = "
                f"{plan.tp * plan.cp * plan.dp} (the ranks of one pipeline stage)")
    etp = check_integer("plan.expert_tp", plan.expert_tp, minimum=1)
    if etp > 1:
        if plan.ep == 1:
            raise InvalidParameterError(
                f"plan.expert_tp={etp}: places the expert-parallel group, so it needs ep > 1; expected 1")
        if (plan.tp * plan.cp * plan.dp) % (plan.ep * etp):
            raise InvalidParameterError(
                f"plan.expert_tp={etp}: ep x expert_tp = {plan.ep * etp} must divide tp*cp*dp = "
                f"{plan.tp * plan.cp * plan.dp} (the ranks of one pipeline stage)")
    if w.seq_len % plan.cp:
        raise InvalidParameterError(
            f"plan.cp={plan.cp}: context parallelism must divide seq_len={w.seq_len}")
    if plan.sequence_parallel and plan.tp > 1 and (w.seq_len // plan.cp) % plan.tp:
        raise InvalidParameterError(
            f"plan.sequence_parallel=True with tp={plan.tp}: a rank's {w.seq_len // plan.cp} tokens (seq_len="
            f"{w.seq_len} / cp={plan.cp}) must split evenly over the tensor-parallel ranks (sequence parallelism "
            f"scatters the sequence); expected seq_len a multiple of tp x cp = {plan.tp * plan.cp}, or "
            "sequence_parallel=false")
    if plan.global_batch % (plan.dp * plan.micro_batch):
        raise InvalidParameterError(
            f"plan.global_batch={plan.global_batch}: must be a multiple of dp x micro_batch = "
            f"{plan.dp * plan.micro_batch}")
    from ._pipeline import BlockTimes, _check  # the schedule's own domain

    _check(sched, plan.pp, plan.micro_batches, plan.virtual_stages, BlockTimes())
    if world_size is not None:
        n = check_integer("world_size", world_size, minimum=1)
        if n != plan.world_size:
            raise InvalidParameterError(
                f"world_size={n}: the plan does not tile it (tp x cp x dp x pp = {plan.tp} x "
                f"{plan.cp} x {plan.dp} x {plan.pp} = {plan.world_size})")
    return plan
