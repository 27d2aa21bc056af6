"""The scalar outputs of an inference model: the ``infer`` kind of model document.

For each role (``decode_*``, ``prefill_*``): the SLO, capacity and request availability,
the SLO and request unavailability, expected capacity, served fraction, requests retried
and lost per day, downtime per month (s) and instance MTBF (s), from
:func:`~markovsim.inference.analyze_fleet` (finite spare pool: the fleet's count chain) or
:func:`~markovsim.inference.analyze_independent_fleet` (unlimited pool: product form);
plus ``decode_served_tokens_per_s`` and ``slo_target``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .._io import ModelKind
from ._fleet import FleetResult, analyze_fleet, analyze_independent_fleet
from ._spec import InferenceModel, inference_model_from_document

__all__ = ["FLEET_OUTPUT_UNITS", "fleet_results", "fleet_outputs", "MODEL_KIND"]

_FIELDS = {
    "slo_availability": "1", "slo_unavailability": "1", "capacity_availability": "1",
    "request_availability": "1", "request_unavailability": "1", "expected_capacity": "instances",
    "served_fraction": "1", "requests_retried_per_day": "1/d", "requests_lost_per_day": "1/d",
    "downtime_per_month": "s", "instance_mtbf": "s",
}
_RENAME = {"downtime_per_month": "downtime_per_month_s", "instance_mtbf": "instance_mtbf_s"}

#: the unit of each output of :func:`fleet_outputs`
FLEET_OUTPUT_UNITS = {f"{role}_{_RENAME.get(k, k)}": u for role in ("decode", "prefill") for k, u in _FIELDS.items()}
FLEET_OUTPUT_UNITS.update({"decode_served_tokens_per_s": "tokens/s", "slo_target": "1"})


def fleet_results(model: InferenceModel) -> dict[str, FleetResult]:
    """``{"prefill": FleetResult, "decode": FleetResult}``: the count chain for a finite spare
    pool, the product form for an unlimited one."""
    out = {}
    for role in ("prefill", "decode"):
        fleet = getattr(model, role)
        j = model.max_recovering(role)
        out[role] = (analyze_independent_fleet(fleet, model.tiers, max_recovering=j) if fleet.spare_cards is None
                     else analyze_fleet(fleet, model.tiers, max_recovering=j))
    return out


def fleet_outputs(model: InferenceModel, results: Mapping[str, FleetResult] | None = None) -> dict[str, float]:
    """The scalar outputs of an inference model (see the module documentation).

    Args:
        model: the inference model.
        results: its :func:`fleet_results`, if already computed.
    """
    results = results if results is not None else fleet_results(model)
    out: dict[str, float] = {}
    for role in ("decode", "prefill"):
        r = results[role]
        for k in _FIELDS:
            out[f"{role}_{_RENAME.get(k, k)}"] = float(getattr(r, k))
    out["decode_served_tokens_per_s"] = float(results["decode"].served_tokens_per_s)
    out["slo_target"] = float(model.target)
    return out


def _outputs(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    return fleet_outputs(inference_model_from_document(doc, where=where, base=base))


def _case(doc: Mapping, *, where: str, base: Path | None) -> dict[str, float]:
    return _outputs({"name": where, **doc}, where=where, base=base)


def _is_inference(doc: Mapping) -> bool:
    return {"prefill", "decode", "tiers"} <= set(doc)


#: the ``infer`` kind: inference model documents (``models/inference/``) and their outputs
MODEL_KIND = ModelKind(name="infer", folder="inference", detect=_is_inference, references={},
                       outputs=_outputs, units=FLEET_OUTPUT_UNITS, case=_case)
