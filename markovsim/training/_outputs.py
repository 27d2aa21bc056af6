"""The scalar outputs of a plan: the ``train`` kind of model document and validation case.

:func:`plan_outputs` flattens :func:`~markovsim.training.step_time` into named scalars in
SI units: every time term of :class:`~markovsim.training.StepBreakdown` as ``<term>_s``,
``step_time_s``, ``communication_total_s``, ``memory_bytes`` and its parts
``weights_bytes``, ``gradients_bytes``, ``optimizer_state_bytes``, ``activations_bytes``,
``usable_memory_bytes``, ``fits`` (1 or 0), ``tokens_per_s``, ``tokens_per_s_per_card``,
``samples_per_s`` (sequences per second), ``mfu``, ``mfu_causal``, ``mfu_6n``,
``mfu_megatron``, ``hfu``, ``tflops_per_gpu`` (the PaLM convention of ``mfu``),
``tflops_per_gpu_causal``, ``tflops_per_gpu_6n``, ``tflops_per_gpu_megatron`` (the
conventions of the MFUs of the same names; in units of 1e12 FLOP/s, as reports quote them),
``pipeline_bubble_fraction`` (bubble /
(compute + bubble), the idle share of the pipeline timeline) and ``cards``.
:data:`MODEL_KIND` is how the command line (``markovsim train``, ``markovsim sweep``) and
validation cases (``kind = "train"``) evaluate a plan document.

In a case, the plan may be written inline (workload and hardware as preset names, files
relative to the case file, or tables), and an optional ``[linearity]`` table adds the
output ``linearity``: ``baseline`` cards, ``cards`` (default: the plan's size), the batch
rule ``batch = "fixed-global"`` (with ``sequences``, default the plan's global batch),
``"fixed-replica"`` (with ``sequences_per_replica``, default the plan's) or
``global_batches = [b0, b1]`` (one per size), and ``jitter_cv`` (default 0). It is computed
with :func:`~markovsim.training.scaling_curve`, the one linearity implementation, even when
the memory model says a size does not fit (``fits`` reports that). A case also gives
``overlap_caveat``: 1 when it names no software stack, leaves some overlaps unwritten, and
the other reading of those would move its step by more than :data:`OVERLAP_SENSITIVITY`
(:func:`overlap_defaults_caveat`; the validation harness then flags its rows), else 0.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Mapping, Sequence

from .._errors import InvalidParameterError, SolverError
from .._io import ModelKind, Table
from ._pipeline import Schedule
from ._plan import AttentionKernel, Elementwise, Precision
from ._linearity import BatchRule, FixedGlobalBatch, FixedReplicaBatch, GlobalBatches, scaling_curve
from ._spec import PLAN_REFERENCES, PlanSpec, plan_from_document
from ._hardware import SOFTWARE_STACKS, STACK_OVERLAPS, Efficiency
from ._step import StepBreakdown, step_time
from ._workload import Workload

__all__ = ["PLAN_OUTPUT_UNITS", "plan_outputs", "plan_caveats", "linearity_points", "batch_rule", "MODEL_KIND"]

#: the unit of each output of :func:`plan_outputs` (and ``linearity``)
PLAN_OUTPUT_UNITS = {f"{p}_s": "s" for p in StepBreakdown.PARTS}
PLAN_OUTPUT_UNITS.update({
    "step_time_s": "s", "communication_total_s": "s", "memory_bytes": "B", "usable_memory_bytes": "B",
    "weights_bytes": "B", "gradients_bytes": "B", "optimizer_state_bytes": "B", "activations_bytes": "B",
    "fits": "1", "tokens_per_s": "tokens/s", "tokens_per_s_per_card": "tokens/s", "mfu": "1",
    "mfu_causal": "1", "mfu_6n": "1", "mfu_megatron": "1", "hfu": "1", "tflops_per_gpu": "TFLOP/s",
    "tflops_per_gpu_megatron": "TFLOP/s", "tflops_per_gpu_causal": "TFLOP/s", "tflops_per_gpu_6n": "TFLOP/s",
    "samples_per_s": "sequences/s", "pipeline_bubble_fraction": "1", "cards": "cards", "linearity": "1",
    "overlap_caveat": "1",
})


#: what the validation measured for mixture-of-experts plans (docs/background/scaling.md,
#: "Mixture-of-experts runs"): said with every MoE prediction
MOE_CAVEAT = ("mixture of experts: on 34 published Megatron-Bridge MoE runs (25.11 and 26.02 tables) the model "
              "came within 32 % for DeepSeek-V3 (nine runs) and Qwen3-235B with 16- or 32-way expert parallelism "
              "(five) (within 23 % but for the one run under Megatron's combined 1F1B, +32 %: the model hides "
              "more of its all-to-all than the run did), but predicted 1.2-3.5x the measured throughput of the small fine-grained models "
              "(Qwen3-30B-A3B, gpt-oss-120b) and of Qwen3-235B with 8-way expert parallelism, and 1.06-1.16x "
              "that of Grok-1 (8 experts, 2 active; NVIDIA's DGXC recipe on 512-2,048 H100); on six NeMo "
              "AutoModel MoE runs (PyTorch FSDP2 and DeepEP on H100) it predicted 1.02-1.53x the measured "
              "throughput: the MoE layer's routing, permutation and host-synchronisation costs have no term; "
              "read the throughput as an upper bound, and state the all-to-all as the run does it "
              "(ep_dispatch, expert_routing, ep_dispatch_precision, combined_1f1b) (docs/background/scaling.md)")


#: said when an FP8 plan runs on hardware whose file gives no FP8 peak ({name} is the hardware)
FP8_WITHOUT_PEAK_CAVEAT = ("precision fp8 on {name}, whose hardware file gives no FP8 peak (peak_dense.fp8): "
                           "its FP8 GEMMs are timed at the BF16 peak while the FP8 casts and 1-byte activations "
                           "are still charged; an accelerator without FP8 tensor cores cannot run this plan as "
                           "written, so read the numbers as a what-if, not a prediction")


#: said under a plan with Megatron-core's combined 1F1B (``combined_1f1b``): what the pairing
#: hides in this plan, and what the validation found on the one published run that used it
#: (docs/background/scaling.md, "Megatron-core's combined 1F1B")
COMBINED_1F1B_CAVEAT = ("combined 1F1B: the paired micro-batches hide {hidden:.3g} s of this step's expert "
                        "all-to-all (step {paired:.4g} s; {exposed:.4g} s with the all-to-all exposed). On the "
                        "one published run with it (Megatron-Bridge 26.02, Qwen3-235B on 256 H100) the model "
                        "hid about twice what the run did and came out +32 % fast: read this step as a lower "
                        "bound, between the two (docs/background/scaling.md)")


#: said under a plan that pairs micro-batches to hide the expert all-to-all (combined 1F1B,
#: DualPipe) while its efficiency.ep_pair_overlap is 0: the pairing then hides nothing
PAIRING_NO_OVERLAP = ("{pairing} with efficiency.ep_pair_overlap = 0 hides none of the expert all-to-all: "
                      "ep_pair_overlap is the share of the paired micro-batch's computation that can cover it "
                      "(1, the default: all of it, the reading of Megatron-core's guide and of DeepSeek-V3's "
                      "report)")


#: said under a DualPipe plan that sets efficiency.ep_overlap, which DualPipe does not use (every
#: micro-batch is paired; until 2026-12-06 DualPipe read ep_overlap for its pairing)
DUALPIPE_EP_OVERLAP_UNUSED = ("efficiency.ep_overlap = {value:g} plays no part under DualPipe, which pairs every "
                              "micro-batch: the pairing's share is efficiency.ep_pair_overlap (until 2026-12-06 "
                              "DualPipe read ep_overlap for it; move the value there)")


#: said when the generation of the fused attention kernel alone moves the step by more than
#: KERNEL_SENSITIVITY ({now}, {other}: the plan's and the other fused kernel; {change}: the
#: step's relative change with the other, in per cent)
ATTENTION_KERNEL_CAVEAT = ("attention kernel: timed as {now}; with {other} this step would change by {change:+.0f} % "
                           "({seconds:.3g} s against {base:.3g} s). The attention core is a large part of it, so "
                           "state attention_kernel as the run's software has it: flash for FlashAttention-2 or "
                           "later (cuDNN, Transformer Engine, PyTorch SDPA), flash1 for FlashAttention v1 or its "
                           "Triton port (MosaicML's MPT runs at 16K-64K tokens: docs/background/scaling.md)")

#: the step-time change (relative) beyond which the attention-kernel caveat is said: the
#: validation suites' tolerance
KERNEL_SENSITIVITY = 0.10

#: said under a plan whose fused attention core is at least ATTENTION_SHARE_FLAG of its layer
#: time (long context): that time rests on one constant, and what the long-sequence holdouts
#: found with it (models/cases/longcontext_training_runs.toml and
#: torchtitan_h100_training_runs.toml, the rows past the same share; recomputed by
#: tests/training/test_long_context_caveat.py)
LONG_CONTEXT_CAVEAT = ("long context: the attention core is {share:.0f} % of this plan's layer time, timed at "
                       "{fraction:.3g} of {hardware}'s peak (kernels.attention_peak_fraction), so that one "
                       "constant sets most of the step. On the published runs with attention past half the layer "
                       "the model's error (positive: faster than the run) was -0.1 to +9.4 % on H100 (NeMo, "
                       "32K-1M tokens; FlashAttention-2's measured rate), -17.8 to -2.0 % on B200 (NeMo, 32K-1M tokens; the H100's rate taken as an "
                       "assumption, slower in the model as the sequence grows) and +30 to +87 % on torchtitan's "
                       "500 W H100 (PyTorch context parallelism, 32K-256K tokens): on Blackwell read this step "
                       "as an upper bound, on PyTorch's context parallelism as a lower bound "
                       "(docs/background/accuracy.md)")

#: the share of a layer's operator time in the attention core past which LONG_CONTEXT_CAVEAT
#: is said ("most of the layer")
ATTENTION_SHARE_FLAG = 0.5

#: said under a plan that names no software stack and leaves some of its communication
#: overlaps unwritten (they come from its hardware's ``default_stack``), when the other reading
#: of those (NVIDIA's Megatron-core overlaps, or the library's defaults where the hardware's
#: stack is Megatron-core) would move its step by more than OVERLAP_SENSITIVITY ({unstated}:
#: which overlaps, in words; {applied}, {other_stack}: the two readings in words; {base},
#: {other}: the step with each, seconds; {change}: the relative change, per cent)
OVERLAP_DEFAULTS_CAVEAT = ("communication overlap: this plan names no software stack, so {unstated} are taken from "
                           "{applied}. With {other_stack} instead, the step would be {other:.3g} s against {base:.3g} s "
                           "({change:+.0f} %). Name the run's software: [efficiency] stack = \"megatron-core\", "
                           "\"megatron-lm-2021\" or \"default\", or the overlaps themselves "
                           "(docs/how-to/model-files.md)")

#: the two readings of the overlaps a plan leaves unwritten, in words, by the stack applied
_STACK_WORDS = {
    "default": ("the library's defaults (only 0.9 of the gradient reduction hidden; tensor-parallel, pipeline "
                "and ZeRO parameter-gather transfers exposed)"),
    "megatron-core": ("the overlaps of NVIDIA's Megatron-core software (NeMo, Megatron-Bridge: stack = "
                      "\"megatron-core\", the assumption behind the NVIDIA runs the Hopper and Blackwell presets "
                      "were fitted and validated on)"),
    "megatron-lm-2021": "the overlaps of Megatron-LM as of 2021 (nothing hidden: stack = \"megatron-lm-2021\")",
}


def _other_reading_words(stack: str) -> str:
    """The other reading of a plan's unwritten overlaps, in words. Megatron-core's is offered
    on every hardware whose default_stack is the library's (A100, MI300X, TPU, Ascend), so it
    is said as what it hides, with its values, not as the assumption of the NVIDIA fit runs:
    on a TPU or an Ascend plan it stands for any stack that hides those transfers as much."""
    if stack != "megatron-core":
        return _STACK_WORDS[stack]
    values = ", ".join(f"{k} {v:g}" for k, v in SOFTWARE_STACKS[stack]["overlaps"].items())
    return ("overlaps that hide most tensor-parallel, pipeline and ZeRO parameter-gather transfers, as NVIDIA's "
            f"Megatron-core software does (stack = \"megatron-core\": {values})")

#: said under a plan timed with fused element-wise kernels that does not state how its
#: operators run, on software other than Megatron's (its stack the library's defaults), when
#: PyTorch's eager operators (Plan.elementwise) would move its step by more than
#: ELEMENTWISE_SENSITIVITY ({change}: per cent; {seconds}, {base}: the step with each)
ELEMENTWISE_CAVEAT = ("element-wise operators: timed as fused kernels (one per norm, activation and residual: "
                      "Megatron, Transformer Engine, torch.compile); run by PyTorch's eager mode, as torchtitan "
                      "runs without torch.compile, this step would change by {change:+.0f} % ({seconds:.3g} s "
                      "against {base:.3g} s). State elementwise = \"eager\" or \"fused\" as the run's software "
                      "has it (docs/background/scaling.md)")


#: the step-time change (relative) beyond which ELEMENTWISE_CAVEAT is said: the suites'
#: median-error target (5 %), a choice that moves the step by more than the model's own
#: target error is worth stating
ELEMENTWISE_SENSITIVITY = 0.05

#: the step-time change (relative) beyond which OVERLAP_DEFAULTS_CAVEAT is said
OVERLAP_SENSITIVITY = 0.02

#: the note the validation harness adds to the rows of a case with ``overlap_caveat`` = 1
OVERLAP_CASE_NOTE = ("the plan names no software stack, so the communication overlaps it does not write are its "
                     "hardware's default_stack's; the other reading (Megatron-core's overlaps, or the library's "
                     f"defaults) would move its step by more than {100 * OVERLAP_SENSITIVITY:.0f} % (efficiency.stack)")

_FUSED = {AttentionKernel.FLASH: "flash (FlashAttention-2 or later)",
          AttentionKernel.FLASH1: "flash1 (FlashAttention v1 or its Triton port)"}


def plan_caveats(spec: "PlanSpec | Workload", *, hardware=None, precision=None) -> list[str]:
    """What the validation says about predictions of this kind of plan, in words (empty
    when nothing is known against it): ``spec`` a :class:`PlanSpec`, or the
    :class:`~markovsim.training.Workload` alone (a plan search, with the ``hardware`` and
    the ``precision`` it holds, when known). A mixture-of-experts workload gets
    :data:`MOE_CAVEAT`; an FP8 plan on hardware without an FP8 peak gets
    :data:`FP8_WITHOUT_PEAK_CAVEAT`; a plan with a fused attention kernel whose step would
    change by more than :data:`KERNEL_SENSITIVITY` with the other generation of that kernel
    (``flash`` against ``flash1``, both computed) gets :data:`ATTENTION_KERNEL_CAVEAT`, and one
    whose attention core is :data:`ATTENTION_SHARE_FLAG` or more of its layer time
    (:func:`attention_share`) :data:`LONG_CONTEXT_CAVEAT`; a plan
    with Megatron-core's combined 1F1B gets :data:`COMBINED_1F1B_CAVEAT` (what its pairing
    hides, computed); a plan that pairs micro-batches (combined 1F1B, DualPipe) with expert
    parallelism and ``ep_pair_overlap`` 0 gets :data:`PAIRING_NO_OVERLAP`, a DualPipe plan
    that sets ``ep_overlap`` (unused there) :data:`DUALPIPE_EP_OVERLAP_UNUSED`, a plan off
    Megatron's software that does not say how its element-wise operators run, when eager
    operators would matter, :data:`ELEMENTWISE_CAVEAT` (:func:`elementwise_caveat`), and a plan
    that states no communication overlap when one would matter
    :data:`OVERLAP_DEFAULTS_CAVEAT` (:func:`overlap_defaults_caveat`).

    >>> from markovsim.training import load_plan
    >>> plan_caveats(load_plan("gpt3_175b_a100_1024"))
    []
    """
    if isinstance(spec, PlanSpec):
        workload = spec.workload
    elif isinstance(spec, Workload):
        workload = spec
    else:
        raise InvalidParameterError(f"spec={spec!r}: expected a PlanSpec (load_plan) or a Workload")
    notes = [MOE_CAVEAT] if workload.moe is not None else []
    if isinstance(spec, PlanSpec):
        hardware, precision = spec.hardware, spec.plan.precision
    if (hardware is not None and precision is not None and Precision(precision) is Precision.FP8
            and hardware.peak_fp8_flop_per_s is None):
        notes.append(FP8_WITHOUT_PEAK_CAVEAT.format(name=hardware.name))
    if not isinstance(spec, PlanSpec):
        return notes
    plan, eff = spec.plan, spec.efficiency
    fused = AttentionKernel(plan.attention_kernel) in _FUSED
    # the plan's own step, once, for the caveats that compare against it
    base = step_time(spec.workload, spec.hardware, plan, efficiency=eff).step_time if fused or plan.combined_1f1b \
        else None
    if fused:
        alt = step_time(spec.workload, spec.hardware, plan.replace(attention_kernel=other_fused_kernel(
            plan.attention_kernel)), efficiency=eff).step_time
        notes += attention_kernel_caveat(plan.attention_kernel, base, alt)
        notes += long_context_caveat(spec)
    notes += elementwise_caveat(spec, base)
    if plan.combined_1f1b:
        exposed = step_time(spec.workload, spec.hardware, plan.replace(combined_1f1b=False),
                            efficiency=dataclasses.replace(eff, ep_overlap=0.0)).step_time
        notes.append(COMBINED_1F1B_CAVEAT.format(hidden=exposed - base, paired=base, exposed=exposed))
    dualpipe = Schedule(plan.schedule) is Schedule.DUALPIPE
    if plan.ep > 1 and eff.ep_pair_overlap == 0 and (plan.combined_1f1b or dualpipe):
        notes.append(PAIRING_NO_OVERLAP.format(pairing="combined 1F1B" if plan.combined_1f1b else "DualPipe"))
    if plan.ep > 1 and dualpipe and eff.ep_overlap != 0:
        notes.append(DUALPIPE_EP_OVERLAP_UNUSED.format(value=eff.ep_overlap))
    notes += overlap_defaults_caveat(spec, base)
    return notes


def overlap_defaults_caveat(spec: PlanSpec, base: float | None = None) -> list[str]:
    """:data:`OVERLAP_DEFAULTS_CAVEAT` (in a list) when ``spec`` names no software stack and
    leaves some of the overlaps a stack sets unwritten (``spec.efficiency_keys``; they are
    then its hardware's ``default_stack``'s), and the other reading of those, the
    ``megatron-core`` stack's (the library's defaults where the hardware's stack is
    ``megatron-core``), would change its step by more than :data:`OVERLAP_SENSITIVITY`; else
    ``[]``. ``base``: the plan's own step time, when the caller has it (else computed here).
    An overlap missing from the keys but not at the stack's value (a ``PlanSpec`` built in
    Python with an :class:`Efficiency` of its own) counts as stated."""
    if spec.stack:
        return []
    applied = spec.applied_stack
    stack_values = Efficiency.for_stack(applied)
    unwritten = [k for k in STACK_OVERLAPS
                 if k not in spec.efficiency_keys and getattr(spec.efficiency, k) == getattr(stack_values, k)]
    if not unwritten:
        return []
    other_stack = "default" if applied == "megatron-core" else "megatron-core"
    if base is None:
        base = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency).step_time
    stated = set(STACK_OVERLAPS) - set(unwritten)
    other = step_time(spec.workload, spec.hardware, spec.plan,
                      efficiency=spec.efficiency.with_stack(other_stack, stated)).step_time
    change = other / base - 1
    if abs(change) <= OVERLAP_SENSITIVITY:
        return []
    unstated = ("its communication overlaps" if len(unwritten) == len(STACK_OVERLAPS) else
                f"the overlaps it does not write ({', '.join(unwritten)})")
    applied_words = _STACK_WORDS[applied] + (f", {spec.hardware.name}'s default_stack" if applied != "default" else "")
    return [OVERLAP_DEFAULTS_CAVEAT.format(unstated=unstated, applied=applied_words,
                                           other_stack=_other_reading_words(other_stack), base=base, other=other,
                                           change=100 * change)]


def elementwise_caveat(spec: PlanSpec, base: float | None = None) -> list[str]:
    """:data:`ELEMENTWISE_CAVEAT` (in a list) when ``spec`` runs fused element-wise kernels
    without writing ``elementwise``, its software is not Megatron's (its applied stack is the
    library's defaults: a Megatron-core or Megatron-LM plan is fused by construction), its
    hardware has no graph compiler (XLA on TPUs fuses them; :attr:`Hardware.graph_compiler`), it is
    timed from operators, and eager operators would change its step by more than
    :data:`ELEMENTWISE_SENSITIVITY`; else ``[]``. ``base``: the plan's own step, when the caller
    has it."""
    plan = spec.plan
    if (Elementwise(plan.elementwise) is not Elementwise.FUSED or "elementwise" in spec.plan_keys
            or spec.applied_stack != "default" or spec.hardware.graph_compiler or spec.hardware.kernels is None
            or spec.efficiency.compute is not None):
        return []
    if base is None:
        base = step_time(spec.workload, spec.hardware, plan, efficiency=spec.efficiency).step_time
    eager = step_time(spec.workload, spec.hardware, plan.replace(elementwise=Elementwise.EAGER),
                      efficiency=spec.efficiency).step_time
    change = eager / base - 1
    if not change > ELEMENTWISE_SENSITIVITY:
        return []
    return [ELEMENTWISE_CAVEAT.format(change=100 * change, seconds=eager, base=base)]


def long_context_caveat(spec: PlanSpec) -> list[str]:
    """:data:`LONG_CONTEXT_CAVEAT` (in a list) when the fused attention core of ``spec`` is
    :data:`ATTENTION_SHARE_FLAG` or more of its layer time; else ``[]``."""
    if AttentionKernel(spec.plan.attention_kernel) not in _FUSED:
        return []
    share = attention_share(spec)
    if share is None or share < ATTENTION_SHARE_FLAG:
        return []
    return [LONG_CONTEXT_CAVEAT.format(share=100 * share, hardware=spec.hardware.name,
                                       fraction=spec.hardware.kernels.attention_peak_fraction)]


def attention_share(spec: PlanSpec) -> float | None:
    """The attention core's share of one layer's operator time (forward and backward, the
    output head left out) of ``spec`` on one rank, from :func:`~markovsim.training.operator_table`;
    ``None`` where the plan is not timed from operators (no kernel model, or the single-scalar
    ``efficiency.compute``)."""
    from ._inspect import operator_table
    if spec.hardware.kernels is None or spec.efficiency.compute is not None:
        return None
    ops = operator_table(spec.workload, spec.hardware, spec.plan)
    layer = sum(o.forward_s + o.backward_s for o in ops if o.where != "logit")
    core = sum(o.forward_s + o.backward_s for o in ops if o.name == "attention_core")
    return core / layer if layer > 0 else None


def other_fused_kernel(kernel) -> AttentionKernel | None:
    """The other generation of a fused attention kernel (``flash`` <-> ``flash1``); ``None``
    for ``unfused``."""
    now = AttentionKernel(kernel)
    return next((k for k in _FUSED if k is not now), None) if now in _FUSED else None


def attention_kernel_caveat(kernel, base_s: float, other_s: float) -> list[str]:
    """:data:`ATTENTION_KERNEL_CAVEAT` (in a list) when the step of a plan with the fused
    attention ``kernel`` (``base_s`` seconds) would be ``other_s`` with the other generation
    of the kernel and that differs by more than :data:`KERNEL_SENSITIVITY`; else ``[]``."""
    now = AttentionKernel(kernel)
    other = other_fused_kernel(now)
    if other is None or not abs(other_s / base_s - 1) > KERNEL_SENSITIVITY:
        return []
    return [ATTENTION_KERNEL_CAVEAT.format(now=_FUSED[now], other=_FUSED[other], change=100 * (other_s / base_s - 1),
                                           seconds=other_s, base=base_s)]


def plan_outputs(spec: PlanSpec, breakdown: StepBreakdown | None = None) -> dict[str, float]:
    """The scalar outputs of a plan (see the module documentation).

    Args:
        spec: the plan with its workload, hardware and efficiency inputs.
        breakdown: its step-time breakdown, if already computed (default: computed here).

    Returns:
        ``{name: value}`` in seconds, bytes, tokens per second and fractions.
    """
    b = breakdown if breakdown is not None else step_time(spec.workload, spec.hardware, spec.plan,
                                                          efficiency=spec.efficiency)
    cards = spec.plan.world_size
    busy = b.compute + b.bubble
    out = {f"{p}_s": float(getattr(b, p)) for p in StepBreakdown.PARTS}
    out.update({
        "step_time_s": b.step_time, "communication_total_s": b.communication_total,
        "memory_bytes": b.memory_bytes, "usable_memory_bytes": b.usable_memory_bytes, "fits": float(b.fits),
        "weights_bytes": b.weights_bytes, "gradients_bytes": b.gradients_bytes,
        "optimizer_state_bytes": b.optimizer_state_bytes, "activations_bytes": b.activations_bytes,
        "tokens_per_s": b.tokens_per_s, "tokens_per_s_per_card": b.tokens_per_s / cards,
        "mfu": b.mfu, "mfu_causal": b.mfu_causal, "mfu_6n": b.mfu_6n, "mfu_megatron": b.mfu_megatron,
        "hfu": b.hfu, "tflops_per_gpu": b.tflops_per_gpu, "tflops_per_gpu_megatron": b.tflops_per_gpu_megatron,
        # the other conventions' TFLOP/s are the PaLM one's in the ratio of their MFUs
        "tflops_per_gpu_causal": b.tflops_per_gpu * b.mfu_causal / b.mfu if b.mfu > 0 else 0.0,
        "tflops_per_gpu_6n": b.tflops_per_gpu * b.mfu_6n / b.mfu if b.mfu > 0 else 0.0,
        "samples_per_s": b.tokens_per_s / spec.workload.seq_len,
        "pipeline_bubble_fraction": b.bubble / busy if busy > 0 else 0.0, "cards": float(cards),
    })
    bad = [k for k, v in out.items() if not math.isfinite(v)]
    if bad:
        raise SolverError(f"plan {spec.name!r}: outputs {', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''} are "
                          f"not finite ({bad[0]}={out[bad[0]]}); expected finite numbers: an input of the "
                          "workload, hardware (kernel parameters) or plan is out of its sensible range")
    return out


def batch_rule(kind: str, sequences: int | None = None) -> BatchRule:
    """The batch rule named ``"fixed-global"`` (``sequences`` per step, default the plan's
    global batch) or ``"fixed-replica"`` (``sequences`` per data-parallel replica, default
    the plan's ``global_batch / dp``)."""
    return FixedGlobalBatch(sequences) if kind == "fixed-global" else FixedReplicaBatch(sequences)


def linearity_points(spec: PlanSpec, sizes: Sequence[int], *, batch: BatchRule,
                     jitter_cv: float = 0.0) -> list[dict]:
    """Step time, throughput and linearity of the plan grown (by data parallelism) to each
    size, by :func:`~markovsim.training.scaling_curve` with the batch rule ``batch``.

    Args:
        spec: the plan.
        sizes: card counts, the baseline first.
        batch: the batch rule (:class:`~markovsim.training.FixedGlobalBatch`, ...).
        jitter_cv: per-rank step-time coefficient of variation for the straggler delay.

    Returns:
        one dict per size: ``cards``, ``dp``, ``global_batch``, ``step_time_s``,
        ``tokens_per_s``, ``mfu``, ``fits``, ``linearity``.
    """
    plan = spec.plan
    c = scaling_curve(spec.workload, spec.hardware, plan, list(sizes), batch=batch, efficiency=spec.efficiency,
                      jitter_cv=jitter_cv, require_fit=False)
    unit = plan.tp * plan.pp * plan.cp
    return [{"cards": int(n), "dp": int(n) // unit, "global_batch": int(g), "step_time_s": float(t),
             "tokens_per_s": float(x), "mfu": float(m), "fits": bool(f), "linearity": float(lin)}
            for n, g, t, x, m, f, lin in zip(c.cards, c.global_batch, c.step_time, c.tokens_per_s, c.mfu, c.fits,
                                              c.linearity)]


def _outputs(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    return plan_outputs(plan_from_document(doc, where=where, base=base))


def _case_linearity(t: Table, spec: PlanSpec) -> float:
    baseline = t.integer("baseline", minimum=1, doc="baseline size N0 in cards")
    cards = t.integer("cards", spec.plan.world_size, minimum=1, doc="size N in cards (default: the plan's)")
    jitter = t.quantity("jitter_cv", "ratio", 0.0, minimum=0.0,
                        doc="per-rank step-time coefficient of variation (stragglers)")
    if "global_batches" in t:
        values = t.raw("global_batches", types=(list,), doc="global batch (sequences) at the baseline and at N")
        rule: BatchRule = GlobalBatches(tuple(int(v) for v in values))
    else:
        kind = t.text("batch", choices=("fixed-global", "fixed-replica"),
                      doc="batch rule: the global batch held, or the per-replica batch held")
        key = "sequences" if kind == "fixed-global" else "sequences_per_replica"
        sequences = t.integer(key, None, minimum=1,
                              doc="sequences per step (fixed-global) or per replica (fixed-replica); "
                                  "default: the plan's")
        rule = batch_rule(kind, sequences)
    t.finish()
    return linearity_points(spec, [baseline, cards], batch=rule, jitter_cv=jitter)[1]["linearity"]


def _case(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    """A validation case: the plan (inline or named files) and an optional ``[linearity]`` table."""
    doc = dict(doc)
    lin = doc.pop("linearity", None)
    spec = plan_from_document(doc, where=where, base=base)
    out = plan_outputs(spec)
    # 1 when the case states no communication overlap and the megatron-core overlaps would move
    # its step by more than OVERLAP_SENSITIVITY (the validation harness flags its rows)
    out["overlap_caveat"] = float(bool(overlap_defaults_caveat(spec, out["step_time_s"])))
    if lin is not None:
        out["linearity"] = _case_linearity(Table(lin, f"{where}: linearity", schema="train case",
                                                 _path="linearity"), spec)
    return out


def _is_plan(doc: Mapping) -> bool:
    return {"workload", "hardware", "tp", "pp", "dp"} <= set(doc)


#: the ``train`` kind: plan documents (``models/plans/``) and their outputs
MODEL_KIND = ModelKind(name="train", folder="plans", detect=_is_plan, references=PLAN_REFERENCES,
                       outputs=_outputs, units=PLAN_OUTPUT_UNITS, case=_case)
