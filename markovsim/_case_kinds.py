"""The kinds of model file the command line and validation cases run: ``train``, ``infer``
(and ``goodput`` once the availability model files have a loader).

Each kind reads a model document (a dict, as parsed from TOML, possibly changed by
``--set`` / ``--vary``) with its domain package's own strict loader and returns its main
outputs as scalars in SI units (seconds, bytes, per second, fractions); output names carry
the unit where it is not obvious (``step_time_s``, ``downtime_per_month_s``). The same
functions back ``markovsim sweep`` and the case kinds of :func:`markovsim.validate_cases`
(registered by :func:`register`).

Kind ``train`` (a plan file, ``models/plans/``): the step-time breakdown of
:func:`markovsim.training.step_time` plus ``pipeline_bubble_fraction`` (bubble / (compute +
bubble), the idle share of the pipeline timeline) and ``tokens_per_s_per_card``. In a case
file an optional ``[linearity]`` table (``baseline`` cards, ``cards`` (default: the plan's
size), ``scaling`` = ``"fixed-global-batch"`` (default) or ``"fixed-replica-batch"``,
``jitter_cv`` (default 0)) adds the output ``linearity``.

Kind ``infer`` (an inference model file, ``models/inference/``): for each role
(``decode_*``, ``prefill_*``) the SLO, capacity and request availability, the SLO and
request unavailability, expected capacity, served fraction, requests retried and lost per
day, downtime per month (s) and instance MTBF (s), from
:func:`markovsim.inference.analyse_fleet` (finite spare pool) or
:func:`markovsim.inference.analyse_independent_fleet` (unlimited pool); plus
``decode_served_tokens_per_s`` and ``slo_target``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from ._errors import SpecError
from ._overrides import load_document

__all__ = ["ModelKind", "KINDS", "detect_kind", "train_outputs", "infer_outputs", "linearity_points",
           "infer_results", "register"]


@dataclasses.dataclass(frozen=True)
class ModelKind:
    """One kind of model file.

    Attributes:
        name: the kind's name (``train``, ``infer``, ``goodput``).
        folder: where its files live under ``models/``.
        detect: whether a document is of this kind (by its keys).
        outputs: ``outputs(doc, origin, changed) -> {name: float}``.
        units: unit of each output, for tables and Dataset attributes.
    """

    name: str
    folder: str
    detect: Callable[[dict], bool]
    outputs: Callable[..., dict]
    units: dict


# --------------------------------------------------------------------------- train

_TRAIN_UNITS = {
    "step_time_s": "s", "compute_s": "s", "bubble_s": "s", "tp_exposed_s": "s", "ep_exposed_s": "s",
    "pp_exposed_s": "s", "dp_exposed_s": "s", "optimizer_s": "s", "straggler_s": "s",
    "communication_total_s": "s", "memory_bytes": "B", "tokens_per_s": "tokens/s",
    "tokens_per_s_per_card": "tokens/s", "mfu": "1", "hfu": "1", "pipeline_bubble_fraction": "1",
    "cards": "cards", "linearity": "1",
}


def load_train(doc: dict, origin: Path, *, changed: bool = True, label: str | None = None):
    """The :class:`markovsim.training.PlanSpec` of a plan document."""
    from .training import load_plan

    return load_document(load_plan, doc, origin, changed=changed, label=label)


def breakdown_outputs(spec, breakdown) -> dict[str, float]:
    """The scalar outputs of one :class:`~markovsim.training.StepBreakdown`."""
    b = breakdown
    cards = spec.plan.world_size
    busy = b.compute + b.bubble
    return {
        "step_time_s": b.step_time, "compute_s": b.compute, "bubble_s": b.bubble,
        "tp_exposed_s": b.tp_exposed, "ep_exposed_s": b.ep_exposed, "pp_exposed_s": b.pp_exposed,
        "dp_exposed_s": b.dp_exposed, "optimizer_s": b.optimizer, "straggler_s": b.straggler,
        "communication_total_s": b.communication_total, "memory_bytes": b.memory_bytes,
        "tokens_per_s": b.tokens_per_s, "tokens_per_s_per_card": b.tokens_per_s / cards,
        "mfu": b.mfu, "hfu": b.hfu,
        "pipeline_bubble_fraction": b.bubble / busy if busy > 0 else 0.0,
        "cards": float(cards),
    }


def linearity_points(spec, sizes, *, scaling: Any, jitter_cv: float = 0.0) -> list[dict]:
    """Step time, throughput and linearity of the plan grown (by data parallelism) to each
    size; the first size is the baseline :math:`N_0`. The plan's global batch holds at its
    own size; ``scaling`` says whether it stays (fixed global batch) or grows with the
    cards (fixed per-replica batch) elsewhere. Stragglers: per-rank jitter ``jitter_cv``."""
    from .training import Scaling, linearity, scale_plan, step_time, straggler_delay, validate_plan

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


def train_outputs(doc: dict, origin: Path, changed: bool = True, label: str | None = None) -> dict[str, float]:
    """Scalar outputs of a plan document (see the module documentation)."""
    from .training import step_time

    spec = load_train(doc, origin, changed=changed, label=label)
    b = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    return breakdown_outputs(spec, b)


def _is_train(doc: dict) -> bool:
    return {"workload", "hardware", "tp", "pp", "dp"} <= set(doc)


# --------------------------------------------------------------------------- infer

_FLEET_FIELDS = {
    "slo_availability": "1", "slo_unavailability": "1", "capacity_availability": "1",
    "request_availability": "1", "request_unavailability": "1", "expected_capacity": "instances",
    "served_fraction": "1", "requests_retried_per_day": "1/d", "requests_lost_per_day": "1/d",
    "downtime_per_month": "s", "instance_mtbf": "s",
}
_RENAME = {"downtime_per_month": "downtime_per_month_s", "instance_mtbf": "instance_mtbf_s"}
_INFER_UNITS = {f"{role}_{_RENAME.get(k, k)}": u for role in ("decode", "prefill") for k, u in _FLEET_FIELDS.items()}
_INFER_UNITS.update({"decode_served_tokens_per_s": "tokens/s", "slo_target": "1"})


def load_infer(doc: dict, origin: Path, *, changed: bool = True, label: str | None = None):
    """The :class:`markovsim.inference.InferenceModel` of an inference document."""
    from .inference import load_inference_model

    return load_document(load_inference_model, doc, origin, changed=changed, label=label)


def infer_results(model) -> dict:
    """``{"prefill": FleetResult, "decode": FleetResult}``: the count chain for a finite
    spare pool, the product form for an unlimited one."""
    from .inference import analyse_fleet, analyse_independent_fleet

    out = {}
    for role in ("prefill", "decode"):
        fleet = getattr(model, role)
        out[role] = (analyse_independent_fleet(fleet, model.tiers) if fleet.spare_cards is None
                     else analyse_fleet(fleet, model.tiers))
    return out


def infer_outputs(doc: dict, origin: Path, changed: bool = True, label: str | None = None) -> dict[str, float]:
    """Scalar outputs of an inference document (see the module documentation)."""
    model = load_infer(doc, origin, changed=changed, label=label)
    results = infer_results(model)
    out: dict[str, float] = {}
    for role in ("decode", "prefill"):
        r = results[role]
        for k in _FLEET_FIELDS:
            out[f"{role}_{_RENAME.get(k, k)}"] = float(getattr(r, k))
    out["decode_served_tokens_per_s"] = float(results["decode"].served_tokens_per_s)
    out["slo_target"] = float(model.target)
    return out


def _is_infer(doc: dict) -> bool:
    return {"prefill", "decode", "tiers"} <= set(doc)


# --------------------------------------------------------------------------- registry

KINDS: dict[str, ModelKind] = {
    "train": ModelKind("train", "plans", _is_train, train_outputs, _TRAIN_UNITS),
    "infer": ModelKind("infer", "inference", _is_infer, infer_outputs, _INFER_UNITS),
}


def detect_kind(doc: dict, path: Path) -> ModelKind:
    """The kind of a model document: by its keys, else by the folder it lives in."""
    found = [k for k in KINDS.values() if k.detect(doc)]
    if len(found) == 1:
        return found[0]
    folder = Path(path).resolve().parent.name
    by_folder = [k for k in KINDS.values() if k.folder == folder]
    if len(by_folder) == 1:
        return by_folder[0]
    raise SpecError(
        f"{path}: cannot tell which kind of model file this is (known kinds: "
        f"{', '.join(KINDS)}; a plan file has workload, hardware, tp, pp and dp; an inference "
        "file has [prefill], [decode] and [tiers])")


# --------------------------------------------------------------------------- case kinds


def _consume(model) -> dict:
    """Every key of a case's model table, marked as read (the domain loader is strict).

    ``types=(object, bool)``: ``Table.raw`` without types refuses booleans
    (``sequence_parallel = true``); any value is fine here, the domain loader checks it.
    """
    return {k: model.raw(k, types=(object, bool)) for k in list(model.keys())}


def _case_train(model) -> dict[str, float]:
    from .training import Scaling

    doc = _consume(model)
    lin = doc.pop("linearity", None)
    where = model.where or "case"
    spec = load_train(doc, Path("case.toml"), label=where)
    from .training import step_time

    out = breakdown_outputs(spec, step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency))
    if lin is not None:
        from ._spec import Table

        t = Table(lin, f"{where}.linearity")
        baseline = t.integer("baseline", minimum=1)
        cards = t.integer("cards", spec.plan.world_size, minimum=1)
        scaling = t.text("scaling", Scaling.FIXED_GLOBAL_BATCH.value, choices=tuple(s.value for s in Scaling))
        jitter = t.quantity("jitter_cv", "ratio", 0.0, minimum=0.0)
        t.finish()
        rows = linearity_points(spec, [baseline, cards], scaling=scaling, jitter_cv=jitter)
        out["linearity"] = rows[1]["linearity"]
    return out


def _case_infer(model) -> dict[str, float]:
    return infer_outputs(_consume(model), Path("case.toml"), label=model.where or "case")


def register() -> None:
    """Register the case kinds ``train`` and ``infer`` with the validation harness (a kind
    a domain package registered itself is left alone)."""
    from ._validate_harness import case_kinds, register_case_kind

    known = case_kinds()
    for name, fn in (("train", _case_train), ("infer", _case_infer)):
        if name not in known:
            register_case_kind(name, fn)
