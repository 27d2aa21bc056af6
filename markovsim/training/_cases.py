"""The ``train`` case kind: a plan (inline or named files) and what a published run reported.

A case is a plan document (the keys of a plan file: ``workload``, ``hardware``, ``tp``,
``pp``, ``dp``, ... with workload and hardware as preset names, files or inline tables)
plus, optionally:

* ``role = "fit" | "holdout" | "check"``: whether :func:`markovsim.training.calibrate` may
  fit on it (``fit``), it is only predicted (``holdout``), or it is a plain check (the
  default). The validation harness reports the roles apart;
* a ``[linearity]`` table: ``baseline`` cards, ``cards`` (default: the plan's size), the
  batch rule ``batch = "fixed-global"`` (with ``sequences``, default the plan's global
  batch), ``"fixed-replica"`` (with ``sequences_per_replica``, default the plan's) or
  ``global_batches = [b0, b1]`` (one per size), or the legacy
  ``scaling = "fixed-global-batch" | "fixed-replica-batch"``; ``jitter_cv`` (default 0).
  Adds the output ``linearity`` (computed even when the memory model says a size does not
  fit: ``fits`` reports that).

Outputs (SI units, names carry the unit where it is not obvious): every time term of
:class:`~markovsim.training.StepBreakdown` as ``<term>_s``, ``step_time_s``,
``communication_total_s``, ``memory_bytes``, ``usable_memory_bytes``, ``fits`` (1 or 0),
``tokens_per_s``, ``tokens_per_s_per_card``, ``mfu``, ``mfu_causal``, ``mfu_6n``,
``mfu_megatron``, ``hfu``, ``tflops_per_gpu``, ``tflops_per_gpu_megatron`` (in units of
1e12 FLOP/s, as reports quote them), ``pipeline_bubble_fraction`` (bubble / (compute +
bubble)) and ``cards``.
"""

from __future__ import annotations

from pathlib import Path

from .._spec import Table
from ._linearity import FixedGlobalBatch, FixedReplicaBatch, GlobalBatches, Scaling, scaling_curve
from ._spec import PlanSpec, _plan_spec
from ._step import StepBreakdown, step_time

__all__ = ["case_outputs", "breakdown_outputs", "ROLES", "OUTPUT_UNITS"]

#: the values ``role`` may take
ROLES = ("fit", "holdout", "check")

#: unit of each output
OUTPUT_UNITS = {f"{p}_s": "s" for p in StepBreakdown.PARTS}
OUTPUT_UNITS.update({
    "step_time_s": "s", "communication_total_s": "s", "memory_bytes": "B", "usable_memory_bytes": "B",
    "fits": "1", "tokens_per_s": "tokens/s", "tokens_per_s_per_card": "tokens/s", "mfu": "1",
    "mfu_causal": "1", "mfu_6n": "1", "mfu_megatron": "1", "hfu": "1", "tflops_per_gpu": "TFLOP/s",
    "tflops_per_gpu_megatron": "TFLOP/s", "pipeline_bubble_fraction": "1", "cards": "cards", "linearity": "1",
})


def breakdown_outputs(spec: PlanSpec, b: StepBreakdown) -> dict[str, float]:
    """The scalar outputs of one step breakdown (module docstring)."""
    cards = spec.plan.world_size
    busy = b.compute + b.bubble
    out = {f"{p}_s": float(getattr(b, p)) for p in StepBreakdown.PARTS}
    out.update({
        "step_time_s": b.step_time, "communication_total_s": b.communication_total,
        "memory_bytes": b.memory_bytes, "usable_memory_bytes": b.usable_memory_bytes, "fits": float(b.fits),
        "tokens_per_s": b.tokens_per_s, "tokens_per_s_per_card": b.tokens_per_s / cards,
        "mfu": b.mfu, "mfu_causal": b.mfu_causal, "mfu_6n": b.mfu_6n, "mfu_megatron": b.mfu_megatron,
        "hfu": b.hfu, "tflops_per_gpu": b.tflops_per_gpu, "tflops_per_gpu_megatron": b.tflops_per_gpu_megatron,
        "pipeline_bubble_fraction": b.bubble / busy if busy > 0 else 0.0, "cards": float(cards),
    })
    return out


_BATCH = ("fixed-global", "fixed-replica")


def _linearity(t: Table, spec: PlanSpec) -> float:
    baseline = t.integer("baseline", minimum=1)
    cards = t.integer("cards", spec.plan.world_size, minimum=1)
    jitter = t.quantity("jitter_cv", "ratio", 0.0, minimum=0.0)
    rule = scaling = None
    if "scaling" in t:
        scaling = Scaling(t.text("scaling", choices=tuple(s.value for s in Scaling)))
    elif "global_batches" in t:
        values = t.raw("global_batches", types=(list,))
        rule = GlobalBatches(tuple(int(v) for v in values))
    else:
        kind = t.text("batch", choices=_BATCH)
        if kind == "fixed-global":
            rule = FixedGlobalBatch(t.integer("sequences", spec.plan.global_batch, minimum=1))
        else:
            rule = FixedReplicaBatch(t.integer("sequences_per_replica", spec.plan.global_batch // spec.plan.dp,
                                               minimum=1))
    t.finish()
    curve = scaling_curve(spec.workload, spec.hardware, spec.plan, [baseline, cards], batch=rule, scaling=scaling,
                          efficiency=spec.efficiency, jitter_cv=jitter, require_fit=False)
    return float(curve.linearity[1])


def case_spec(model: Table) -> tuple[PlanSpec, str, dict | None]:
    """Read a case's model table: ``(plan spec, role, linearity table or None)``. Every key
    of ``model`` is marked as read; the plan fields are then read strictly."""
    doc = {k: model.raw(k, types=(object, bool)) for k in list(model.keys())}
    role = doc.pop("role", "check")
    if role not in ROLES:
        _bad_role(model, role)
    lin = doc.pop("linearity", None)
    spec = _plan_spec(Table(doc, model.where), base=Path.cwd())
    return spec, role, lin


def _bad_role(model: Table, role) -> None:
    from .._errors import SpecError

    where = f"{model.where}.role" if model.where else "role"
    raise SpecError(f"{where}={role!r}: expected one of {', '.join(map(repr, ROLES))}")


def case_outputs(model: Table) -> dict[str, float]:
    """Outputs of one ``train`` case (module docstring); the function a validation harness
    registers for ``kind = "train"``."""
    spec, _, lin = case_spec(model)
    out = breakdown_outputs(spec, step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency))
    if lin is not None:
        where = f"{model.where}.linearity" if model.where else "linearity"
        out["linearity"] = _linearity(Table(lin, where), spec)
    return out
