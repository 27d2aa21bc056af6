"""The scalar outputs of a plan: the ``train`` kind of model document.

:func:`plan_outputs` flattens :func:`~markovsim.training.step_time` into named scalars in
SI units (``step_time_s``, ``memory_bytes``, ``mfu``, ...) plus ``pipeline_bubble_fraction``
(:func:`~markovsim.training.pipeline_bubble_fraction` of the plan's schedule) and
``tokens_per_s_per_card``. :data:`MODEL_KIND` is how the command line (``markovsim train``,
``markovsim sweep``) and validation cases (``kind = "train"``) evaluate a plan document. In a
case, an optional ``[linearity]`` table (``baseline`` cards, ``cards`` (default: the plan's
size), ``scaling`` = ``"fixed-global-batch"`` (default) or ``"fixed-replica-batch"``,
``jitter_cv`` (default 0)) adds the output ``linearity``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from .._io import ModelKind, Table
from ._linearity import Scaling, linearity, scale_plan
from ._pipeline import pipeline_bubble_fraction
from ._plan import validate_plan
from ._spec import PLAN_REFERENCES, PlanSpec, plan_from_document
from ._step import StepBreakdown, step_time
from ._straggler import straggler_delay

__all__ = ["PLAN_OUTPUT_UNITS", "plan_outputs", "linearity_points", "MODEL_KIND"]

#: the unit of each output of :func:`plan_outputs` (and ``linearity``)
PLAN_OUTPUT_UNITS = {
    "step_time_s": "s", "compute_s": "s", "bubble_s": "s", "tp_exposed_s": "s", "ep_exposed_s": "s",
    "pp_exposed_s": "s", "dp_exposed_s": "s", "optimizer_s": "s", "straggler_s": "s",
    "communication_total_s": "s", "memory_bytes": "B", "tokens_per_s": "tokens/s",
    "tokens_per_s_per_card": "tokens/s", "mfu": "1", "hfu": "1", "pipeline_bubble_fraction": "1",
    "cards": "cards", "linearity": "1",
}


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
    plan = spec.plan
    return {
        "step_time_s": b.step_time, "compute_s": b.compute, "bubble_s": b.bubble,
        "tp_exposed_s": b.tp_exposed, "ep_exposed_s": b.ep_exposed, "pp_exposed_s": b.pp_exposed,
        "dp_exposed_s": b.dp_exposed, "optimizer_s": b.optimizer, "straggler_s": b.straggler,
        "communication_total_s": b.communication_total, "memory_bytes": b.memory_bytes,
        "tokens_per_s": b.tokens_per_s, "tokens_per_s_per_card": b.tokens_per_s / plan.world_size,
        "mfu": b.mfu, "hfu": b.hfu,
        "pipeline_bubble_fraction": float(pipeline_bubble_fraction(
            plan.schedule, plan.pp, plan.micro_batches, virtual_stages=plan.virtual_stages)),
        "cards": float(plan.world_size),
    }


def linearity_points(spec: PlanSpec, sizes: Sequence[int], *, scaling: Any,
                     jitter_cv: float = 0.0) -> list[dict]:
    """Step time, throughput and linearity of the plan grown (by data parallelism) to each size.

    The first size is the baseline :math:`N_0`. The plan's global batch holds at its own
    size; ``scaling`` says whether it stays (fixed global batch) or grows with the cards
    (fixed per-replica batch) elsewhere.

    Args:
        spec: the plan.
        sizes: card counts, the baseline first.
        scaling: a :class:`~markovsim.training.Scaling` or its value.
        jitter_cv: per-rank step-time coefficient of variation for the straggler delay.

    Returns:
        one dict per size: ``cards``, ``dp``, ``global_batch``, ``micro_batches``,
        ``step_time_s``, ``straggler_s``, ``tokens_per_s``, ``linearity``.
    """
    scaling = Scaling(scaling)
    rows = []
    for n in sizes:
        plan = scale_plan(spec.plan, n, scaling=scaling)
        validate_plan(spec.workload, plan, world_size=n)
        t0 = step_time(spec.workload, spec.hardware, plan, efficiency=spec.efficiency).step_time
        delay = straggler_delay(t0, n, jitter_cv=jitter_cv)
        t = t0 + delay
        rows.append({"cards": int(n), "dp": plan.dp, "global_batch": plan.global_batch,
                     "micro_batches": plan.micro_batches, "step_time_s": t, "straggler_s": delay,
                     "tokens_per_s": plan.global_batch * spec.workload.seq_len / t})
    base = rows[0]
    for r in rows:
        r["linearity"] = float(linearity(r["tokens_per_s"], r["cards"], base["tokens_per_s"], base["cards"]))
    return rows


def _outputs(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    return plan_outputs(plan_from_document(doc, where=where, base=base))


def _case(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    """A validation case: the plan (named after the case unless it has a name) and an
    optional ``[linearity]`` table."""
    doc = dict(doc)
    lin = doc.pop("linearity", None)
    doc.setdefault("name", where)
    spec = plan_from_document(doc, where=where, base=base)
    out = plan_outputs(spec)
    if lin is not None:
        t = Table(lin, f"{where}: linearity", schema="train case", _path="linearity")
        baseline = t.integer("baseline", minimum=1, doc="baseline size N0 in cards")
        cards = t.integer("cards", spec.plan.world_size, minimum=1, doc="size N in cards (default: the plan's)")
        scaling = t.text("scaling", Scaling.FIXED_GLOBAL_BATCH.value, choices=tuple(s.value for s in Scaling),
                         doc="whether the global batch is held or grows with the cards")
        jitter = t.quantity("jitter_cv", "ratio", 0.0, minimum=0.0,
                            doc="per-rank step-time coefficient of variation (stragglers)")
        t.finish()
        out["linearity"] = linearity_points(spec, [baseline, cards], scaling=scaling, jitter_cv=jitter)[1]["linearity"]
    return out


def _is_plan(doc: Mapping) -> bool:
    return {"workload", "hardware", "tp", "pp", "dp"} <= set(doc)


#: the ``train`` kind: plan documents (``models/plans/``) and their outputs
MODEL_KIND = ModelKind(name="train", folder="plans", detect=_is_plan, references=PLAN_REFERENCES,
                       outputs=_outputs, units=PLAN_OUTPUT_UNITS, case=_case)
