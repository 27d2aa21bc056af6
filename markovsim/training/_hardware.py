r"""Hardware: one accelerator's peak rates and memory, its links, and its fitted kernel model.

A :class:`LinkLevel` is one tier of the network: ``domain_size`` accelerators share it
(8 in an HGX node, 72 in a GB200 NVL72 rack, the whole cluster for the scale-out network),
each with ``bandwidth_bytes_per_s`` of its own to the others at that level **in one
direction** and a per-message latency ``latency_s``. Model files must say which direction a
quoted bandwidth is (``direction = "per-direction"`` or ``"bidirectional"``, the latter
halved on reading): vendor sheets quote NVLink as the sum of both directions, NICs per
direction, and mixing the two is a silent factor of 2. Levels are ordered from the
innermost; the last one must cover the whole cluster (``domain_size=0`` means unbounded).

Peak rates are **dense** tensor-core rates (2:4 structured-sparsity figures, twice these on
NVIDIA and AMD sheets, are never used): ``peak_flop_per_s`` for BF16/FP16 and
``peak_fp8_flop_per_s`` for FP8 (``None`` where the accelerator has no FP8 rate above BF16).

The :class:`KernelModel` turns operators into seconds (module ``_operators``): a GEMM of
shape :math:`M \times N \times K` takes

.. math:: t = \frac{2MNK}{P\,e_\text{gemm}} + k_\text{traffic}\,\frac{b\,(MK + KN + MN)}{B}

(peak :math:`P`, HBM bandwidth :math:`B`, :math:`b` bytes per element), a smooth roofline
whose achieved fraction of peak falls for small or thin matrices; fused attention runs at
``attention_peak_fraction`` of peak; memory-bound operators at ``memory_bandwidth_fraction``
of the HBM bandwidth; collectives at ``collective_bandwidth_fraction`` of the link
bandwidth. Its values are **fitted** (:func:`markovsim.training.calibrate`) on published
runs and written into the hardware preset with their spread, never typed in.
"""

from __future__ import annotations

import dataclasses

from .._errors import InvalidParameterError, check_positive, check_probability

__all__ = ["LinkLevel", "Hardware", "Efficiency", "KernelModel", "KERNEL_PARAMETERS", "SOFTWARE_STACKS", "OVERLAP_KEYS",
           "STACK_OVERLAPS"]


@dataclasses.dataclass(frozen=True)
class LinkLevel:
    """One level of the link hierarchy (bandwidth per accelerator, one direction)."""

    name: str
    domain_size: int  # accelerators in one domain of this level (0: unbounded)
    bandwidth_bytes_per_s: float  # per accelerator, one direction
    latency_s: float  # per message (the alpha of the alpha-beta model)


@dataclasses.dataclass(frozen=True)
class KernelModel:
    """Fitted constants that time operators on one accelerator (dimensionless).

    Attributes:
        gemm_peak_fraction: :math:`e_\\text{gemm}`, the fraction of peak a large GEMM reaches.
        gemm_traffic: :math:`k_\\text{traffic}`, HBM traffic of a GEMM in units of its
            operand and result sizes (tile re-reads and imperfect overlap; 0 = pure compute).
        attention_peak_fraction: fraction of peak reached by a fused (flash) attention
            kernel, forward and backward together, on the FLOPs it actually computes (the
            backward recomputes the scores: :data:`~markovsim.training.FLASH_BACKWARD_FLOPS`
            = 2.5x the forward's, the count the kernel papers measure on).
        memory_bandwidth_fraction: fraction of HBM bandwidth reached by memory-bound
            operators (norms, activations, softmax, optimizer).
        collective_bandwidth_fraction: fraction of a link's bandwidth a collective reaches.
        step_overhead_s: fixed host-side cost of one step (launches, synchronisation,
            bookkeeping) that the operators do not cover, seconds.
        interleave_efficiency: :math:`\\eta`, the share of the interleaved schedule's ideal
            bubble reduction that the software stack realises: the bubble of ``v`` virtual
            stages is :math:`(p-1)\\,t_\\text{mb}\\,[1 - \\eta (1 - 1/v)]`, from the plain
            1F1B bubble (:math:`\\eta = 0`) to Narayanan et al. 2021's :math:`(p-1)t_\\text{mb}/v`
            (:math:`\\eta = 1`, the default). A property of the pipeline implementation
            (chunk switches, blocking point-to-point, stage imbalance), fitted with the
            other constants.
        fp8_gemm_peak_fraction: the fraction of the **FP8** peak a large FP8 GEMM reaches
            (``precision = "fp8"``); FP8 tensor cores are fed from the same memory and
            registers at twice the rate, so it need not equal the BF16 fraction. ``0``: not
            fitted, FP8 GEMMs use ``gemm_peak_fraction``.
        moe_expert_overhead_s: fixed cost per local expert of one MoE layer for one
            micro-batch, forward and backward together, seconds: the per-expert kernel
            launches and the host synchronisation of a dropless MoE layer (token counts read
            back to size the all-to-all and the grouped GEMMs), which do not scale with the
            tokens. ``0`` (every preset): not modelled. For calibration on one's own MoE run;
            no preset fits it, because every published MoE run in the suites is a holdout
            (docs/background/scaling.md).
    """

    gemm_peak_fraction: float = 0.8
    gemm_traffic: float = 1.0
    attention_peak_fraction: float = 0.5
    memory_bandwidth_fraction: float = 0.7
    collective_bandwidth_fraction: float = 0.8
    step_overhead_s: float = 0.0
    interleave_efficiency: float = 1.0
    fp8_gemm_peak_fraction: float = 0.0
    moe_expert_overhead_s: float = 0.0

    def validate(self, where: str = "kernels") -> "KernelModel":
        for name in ("gemm_peak_fraction", "attention_peak_fraction", "memory_bandwidth_fraction",
                     "collective_bandwidth_fraction"):
            check_probability(f"{where}.{name}", getattr(self, name))
            check_positive(f"{where}.{name}", getattr(self, name))
        check_probability(f"{where}.interleave_efficiency", self.interleave_efficiency)
        check_probability(f"{where}.fp8_gemm_peak_fraction", self.fp8_gemm_peak_fraction)
        for name in ("gemm_traffic", "step_overhead_s", "moe_expert_overhead_s"):
            v = getattr(self, name)
            if not (v == v and 0 <= v < float("inf")):
                raise InvalidParameterError(f"{where}.{name}={v!r}: expected a finite value >= 0")
        return self


#: the names of the fittable kernel constants, in :class:`KernelModel` order
KERNEL_PARAMETERS = tuple(f.name for f in dataclasses.fields(KernelModel))


#: the values of :attr:`Hardware.graph_compiler`: none (eager execution exists), XLA
GRAPH_COMPILERS = ("", "xla")


@dataclasses.dataclass(frozen=True)
class Hardware:
    """An accelerator, its links and (when fitted) its kernel model.

    ``peak_flop_per_s`` is the dense BF16/FP16 tensor rate; ``peak_fp8_flop_per_s`` the dense
    FP8 rate (``None``: no FP8 above BF16); ``kernels`` the fitted :class:`KernelModel`
    (``None``: not fitted; a plan must then give ``efficiency.compute``);
    ``host_bandwidth_bytes_per_s`` the link between one accelerator and host memory, one
    direction (PCIe, NVLink-C2C), which activation offloading (``Plan.offload_layers``) moves
    over (``None``: not described; such plans are refused); ``default_stack`` the software
    stack (:data:`SOFTWARE_STACKS`) whose communication overlaps a plan file on this hardware
    that names no stack gets for the overlaps it does not write (``"default"``: the library's
    :class:`Efficiency` defaults; a preset names the stack its kernel constants were fitted
    under); ``graph_compiler`` the compiler every program on this hardware runs through
    (``"xla"`` on TPUs, which fuses element-wise operators: no eager mode to ask a plan about),
    ``""`` where eager execution exists (GPUs, Ascend).
    """

    name: str
    peak_flop_per_s: float  # dense BF16
    hbm_bytes: float
    hbm_bandwidth_bytes_per_s: float
    levels: tuple[LinkLevel, ...]
    peak_fp8_flop_per_s: float | None = None
    kernels: KernelModel | None = None
    host_bandwidth_bytes_per_s: float | None = None  # accelerator <-> host memory, one direction
    default_stack: str = "default"
    graph_compiler: str = ""

    def validate(self) -> "Hardware":
        check_positive(f"{self.name}.peak_flop_per_s", self.peak_flop_per_s)
        if self.default_stack not in SOFTWARE_STACKS:
            raise InvalidParameterError(f"{self.name}.default_stack={self.default_stack!r}: expected one of "
                                        f"{', '.join(map(repr, SOFTWARE_STACKS))}")
        if self.graph_compiler not in GRAPH_COMPILERS:
            raise InvalidParameterError(f"{self.name}.graph_compiler={self.graph_compiler!r}: expected one of "
                                        f"{', '.join(map(repr, GRAPH_COMPILERS))}")
        if self.host_bandwidth_bytes_per_s is not None:
            check_positive(f"{self.name}.host_bandwidth_bytes_per_s", self.host_bandwidth_bytes_per_s)
        if self.peak_fp8_flop_per_s is not None:
            check_positive(f"{self.name}.peak_fp8_flop_per_s", self.peak_fp8_flop_per_s)
            if self.peak_fp8_flop_per_s < self.peak_flop_per_s:
                raise InvalidParameterError(
                    f"{self.name}.peak_fp8_flop_per_s={self.peak_fp8_flop_per_s!r}: expected at "
                    f"least the BF16 rate {self.peak_flop_per_s!r} (omit it when there is no FP8 rate)")
        check_positive(f"{self.name}.hbm_bytes", self.hbm_bytes)
        check_positive(f"{self.name}.hbm_bandwidth_bytes_per_s", self.hbm_bandwidth_bytes_per_s)
        if self.kernels is not None:
            self.kernels.validate(f"{self.name}.kernels")
        if not self.levels:
            raise InvalidParameterError(f"{self.name}.levels: expected at least one link level")
        prev = 1
        for i, lv in enumerate(self.levels):
            check_positive(f"{self.name}.levels[{i}].bandwidth_bytes_per_s", lv.bandwidth_bytes_per_s)
            if lv.latency_s < 0:
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].latency_s={lv.latency_s!r}: expected >= 0")
            last = i == len(self.levels) - 1
            if lv.domain_size == 0 and not last:
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].domain_size=0 (unbounded) is only allowed for the "
                    "outermost level")
            if lv.domain_size and (lv.domain_size <= prev and i or lv.domain_size % prev):
                raise InvalidParameterError(
                    f"{self.name}.levels[{i}].domain_size={lv.domain_size}: expected a multiple "
                    f"of the inner level's {prev}, larger than it")
            prev = lv.domain_size or prev
        if self.levels[-1].domain_size != 0:
            raise InvalidParameterError(
                f"{self.name}.levels[-1].domain_size={self.levels[-1].domain_size}: the outermost "
                "level must be unbounded (0), the scale-out network")
        return self

    def efficiency(self, given: "Efficiency | None" = None) -> "Efficiency":
        """``given``, else this hardware's :attr:`default_stack` overlaps over the library's
        defaults: what the training functions use when no efficiency is passed, the same a
        plan file on this hardware gets when its ``[efficiency]`` is empty.

        >>> from markovsim.training import load_hardware
        >>> load_hardware("h100_sxm").efficiency().tp_overlap
        0.8
        """
        return Efficiency.for_stack(self.default_stack) if given is None else given

    @property
    def node_size(self) -> int:
        """Accelerators in the innermost level's domain (a server or a rack)."""
        return self.levels[0].domain_size or 1

    def level_for_span(self, span: int) -> int:
        """Index of the innermost level whose domain holds ``span`` consecutive accelerators."""
        for i, lv in enumerate(self.levels):
            if lv.domain_size == 0 or span <= lv.domain_size:
                return i
        return len(self.levels) - 1  # pragma: no cover

    def replace(self, **changes) -> "Hardware":
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class Efficiency:
    """Software settings of a run: overlaps, usable memory, and two optional overrides.

    Attributes:
        compute: ``None`` (default): operators are timed by the hardware's fitted
            :class:`KernelModel`. A number: the single-scalar model instead, every FLOP at
            ``compute`` x peak (for hardware without a fitted kernel model, e.g. the Ascend
            presets, whose plans state it as an assumption).
        bandwidth: ``None``: the kernel model's collective fraction (0.8 without one); a
            number overrides it.
        tp_overlap, dp_overlap, ep_overlap, pp_overlap: fraction of each communication kind
            hidden behind compute (0 = fully exposed); ``ep_overlap`` for the expert
            all-to-all of micro-batches that are not paired.
        ep_pair_overlap: under a schedule that pairs the forward of one micro-batch with the
            backward of another (DualPipe; ``plan.combined_1f1b``, Megatron-core's combined
            1F1B), the share of the paired micro-batch's computation available to hide the
            all-to-all behind; 1 (default): all of it (DeepSeek-AI 2024 sec. 3.2.1, "both
            all-to-all and PP communication can be fully hidden"; Megatron-core's guide: a
            micro-batch's dispatch and combine are hidden by the other's attention and MLP).
        param_gather_overlap: fraction of the ZeRO parameter all-gather after the optimizer
            step hidden behind the next forward (Megatron's ``overlap_param_gather``).
        usable_memory: fraction of HBM available to weights, optimizer states and
            activations (the rest: framework workspace, fragmentation, buffers).
        data_loading_s: exposed data-loading time per step, seconds.
        comm_sm_fraction: share of the accelerator's cores (SMs) given to communication
            kernels while communication is hidden behind compute; that compute runs
            :math:`1/(1-f)` slower (DeepSeek-V3: 20 of 132 SMs).
        replica_overlap: with hybrid sharding (``plan.zero_shard_group``), fraction of the
            replicas' gradient all-reduce over the outermost network level hidden behind
            compute; ``None`` (default): ``dp_overlap``. MaxText across TPU slices: 0
            (fitted with the DCN latency on the v5e calibration series).
    """

    compute: float | None = None
    bandwidth: float | None = None
    tp_overlap: float = 0.0
    dp_overlap: float = 0.9
    ep_overlap: float = 0.0
    ep_pair_overlap: float = 1.0
    pp_overlap: float = 0.0
    param_gather_overlap: float = 0.0
    usable_memory: float = 0.9
    data_loading_s: float = 0.0
    comm_sm_fraction: float = 0.0
    replica_overlap: float | None = None

    def validate(self) -> "Efficiency":
        for name in ("compute", "bandwidth"):
            v = getattr(self, name)
            if v is not None:
                check_probability(f"efficiency.{name}", v)
                check_positive(f"efficiency.{name}", v)
        check_probability("efficiency.usable_memory", self.usable_memory)
        for name in ("tp_overlap", "dp_overlap", "ep_overlap", "ep_pair_overlap", "pp_overlap",
                     "param_gather_overlap"):
            check_probability(f"efficiency.{name}", getattr(self, name))
        if self.replica_overlap is not None:
            check_probability("efficiency.replica_overlap", self.replica_overlap)
        if not 0.0 <= self.comm_sm_fraction < 1.0:
            raise InvalidParameterError(
                f"efficiency.comm_sm_fraction={self.comm_sm_fraction!r}: expected a fraction in [0, 1)")
        if not (self.data_loading_s >= 0 and self.data_loading_s < float("inf")):
            raise InvalidParameterError(
                f"efficiency.data_loading_s={self.data_loading_s!r}: expected a time >= 0 (seconds)")
        return self

    @classmethod
    def for_stack(cls, stack: str, **overrides) -> "Efficiency":
        """The overlaps of a named software stack (:data:`SOFTWARE_STACKS`), with
        ``overrides`` (any other field, or one of the stack's own) on top.

        >>> Efficiency.for_stack("megatron-core").tp_overlap
        0.8
        >>> Efficiency.for_stack("megatron-core", pp_overlap=0.0).pp_overlap
        0.0
        """
        if stack not in SOFTWARE_STACKS:
            raise InvalidParameterError(f"stack={stack!r}: expected one of {', '.join(map(repr, SOFTWARE_STACKS))}")
        return cls(**{**SOFTWARE_STACKS[stack]["overlaps"], **overrides}).validate()

    def with_stack(self, stack: str, written=frozenset()) -> "Efficiency":
        """These settings with the overlaps of ``stack`` (:data:`STACK_OVERLAPS`, the
        library's defaults where the stack sets none) in place of those not in ``written``
        (the keys a plan file wrote): what a plan naming no stack gets from its hardware's
        ``default_stack``, and the other reading the overlap caveat gives.

        >>> Efficiency(tp_overlap=0.3).with_stack("megatron-core", {"tp_overlap"}).pp_overlap
        0.5
        """
        base = Efficiency.for_stack(stack)
        return dataclasses.replace(self, **{k: getattr(base, k) for k in STACK_OVERLAPS if k not in written})


#: Communication overlaps of named software stacks: what ``[efficiency] stack = "<name>"``
#: sets in a plan file (keys written beside it win). Each stack's values are the ones the
#: validation suites state for runs on that software, and the ones the presets' constants
#: were fitted with on those runs; they are assumptions (no run publishes its overlaps), said
#: once here instead of in every file. The library's own defaults (``Efficiency()``: 0.9 of the
#: data-parallel gradient reduction hidden, nothing else) are the stack ``"default"``.
SOFTWARE_STACKS = {
    "default": {
        "overlaps": {},
        "about": ("the library's defaults: the data-parallel gradient reduction 0.9 hidden (dp_overlap), "
                  "tensor-parallel, pipeline and ZeRO parameter-gather communication exposed. PyTorch FSDP "
                  "without tensor or pipeline parallelism and XLA on TPUs (the MPT, torchtitan FSDP and "
                  "MaxText cases) need nothing more; written out, it says the plan chose them"),
    },
    "megatron-core": {
        "overlaps": {"tp_overlap": 0.8, "pp_overlap": 0.5, "dp_overlap": 0.9, "param_gather_overlap": 0.9},
        "about": ("NVIDIA's Megatron-core software (NeMo 2024 and later, Megatron-Bridge, the DGXC recipes, "
                  "Megatron-LM with --tp-comm-overlap, --overlap-grad-reduce and --overlap-param-gather): TP "
                  "communication mostly hidden by Transformer Engine's userbuffer overlap, the distributed "
                  "optimizer's gradient reduce-scatter and parameter all-gather overlapped, the interleaved "
                  "schedule's point-to-point transfers half hidden. The values the NeMo, Megatron-Bridge and "
                  "DGXC cases of models/cases assume unless their recipe says otherwise (17 of them do), "
                  "and those of the H100 FP8 and Blackwell fit runs"),
    },
    "megatron-lm-2021": {
        "overlaps": {"tp_overlap": 0.0, "pp_overlap": 0.0, "dp_overlap": 0.0, "param_gather_overlap": 0.0},
        "about": ("Megatron-LM as Narayanan et al. 2021 ran it (SC'21, the A100 fit runs of Table 1): tensor-"
                  "parallel all-reduces on the critical path, the data-parallel gradient all-reduce after the "
                  "backward, no ZeRO parameter gather to hide"),
    },
}

#: the overlaps a software stack sets (each of :data:`SOFTWARE_STACKS` sets some of them): those
#: of a plan that names no stack and does not write them come from its hardware's
#: :attr:`Hardware.default_stack`
STACK_OVERLAPS = ("tp_overlap", "pp_overlap", "dp_overlap", "param_gather_overlap")

#: the ``[efficiency]`` keys that state a plan's communication overlap: a stack, or one of the
#: overlaps a stack sets
OVERLAP_KEYS = frozenset({"stack", *STACK_OVERLAPS})
