"""How well the step-time model did on published runs like a given plan: its evidence.

Every prediction of :func:`~markovsim.training.step_time` rests on constants fitted on a few
published runs; the shipped validation suites (``models/cases/*_training_runs.toml``) hold
the runs it was **never** fitted on (``role = "holdout"``). :func:`plan_evidence` says, for a
plan, how the model did on the holdout rows of the same hardware preset, the same kind of
model (dense or mixture of experts) and the same GEMM precision: how many rows, how many
within 10 %, the median error, and the range of the model's speed against the measured one,
so that a prediction is read with the accuracy it has earned, or flagged as unvalidated
where no such run was held out.

A row's error is counted as the suites count it, the predicted output over the reported one
minus one (``within 10 %`` and the median use its size). Its sign depends on the output, so
the range is given as the model's *speed error*, one direction whatever the output: for a
step time, the measured time over the predicted time minus one; for throughput, TFLOP/s,
MFU or HFU, the predicted over the measured value minus one. Positive: the model is faster
than the run was.

The table is computed from the suites by :func:`compute_evidence` and shipped as
``models/cases/holdout_evidence.json`` (reading it takes milliseconds; computing it, seconds);
a test recomputes it, so a model change cannot leave it stale. To regenerate it after a
change to the model or the suites::

    python -m markovsim.training._write_evidence
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any, Iterable

from .._errors import InvalidParameterError

__all__ = ["SUITES", "EVIDENCE_FILE", "compute_evidence", "evidence_for", "evidence_key", "plan_evidence"]

#: the validation suites whose holdout rows are the evidence (``models/cases/<name>_training_runs.toml``)
SUITES = ("gpu", "tpu", "mpt", "automodel", "reports", "longcontext")
#: the shipped table, in ``models/cases``
EVIDENCE_FILE = "holdout_evidence.json"
#: outputs whose error is the model's time against the measured one (the others are rates)
_TIMES = ("step_time_s",)
#: rows of a group below which its statistics are called too few to judge
FEW = 5
#: the tolerance the suites hold a row to
_TOLERANCE = 0.10


def evidence_key(hardware_name: str, moe: bool, precision: str) -> str:
    """The key of a group: ``"<hardware name> | dense|moe | <precision>"``."""
    return f"{hardware_name} | {'moe' if moe else 'dense'} | {precision}"


def _speed_error(output: str, reported: float, predicted: float) -> float:
    if output in _TIMES:
        return reported / predicted - 1.0
    return predicted / reported - 1.0


def compute_evidence(cases_dir: str | Path | None = None, suites: Iterable[str] = SUITES) -> dict[str, Any]:
    """The evidence table from the holdout rows of the shipped suites (linearity rows left
    out: their error is in points, not a speed). Returns ``{"suites": [...], "groups": {key:
    {...}}}``, each group with ``rows``, ``within_10pct``, ``median_abs_error`` (fractions, as
    the suites count errors), ``min_speed_error`` / ``max_speed_error`` (fractions) and
    ``cases`` (the rows' names)."""
    from .._io import shipped_dir
    from ._calibrate import runs_from_cases
    from ._outputs import plan_outputs

    folder = Path(cases_dir) if cases_dir is not None else shipped_dir("models") / "cases"
    errors: dict[str, list[tuple[str, float]]] = {}
    names = []
    for suite in suites:
        path = folder / f"{suite}_training_runs.toml"
        names.append(path.name)
        for run in runs_from_cases(path, role="holdout"):
            spec = run.spec
            predicted = float(plan_outputs(spec)[run.output])
            key = evidence_key(spec.hardware.name, spec.workload.moe is not None, spec.plan.precision.value)
            errors.setdefault(key, []).append((run.name, predicted / run.value - 1.0,
                                               _speed_error(run.output, run.value, predicted)))
    groups = {}
    for key in sorted(errors):
        rel = [abs(x) for _, x, _ in errors[key]]
        speed = [x for _, _, x in errors[key]]
        groups[key] = {"rows": len(rel), "within_10pct": sum(x <= _TOLERANCE + 1e-12 for x in rel),
                       "median_abs_error": round(statistics.median(rel), 6),
                       "min_speed_error": round(min(speed), 6), "max_speed_error": round(max(speed), 6),
                       "cases": [n for n, _, _ in errors[key]]}
    return {"suites": names, "groups": groups}


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    from .._io import shipped_dir

    return json.loads((shipped_dir("models") / "cases" / EVIDENCE_FILE).read_text())


def plan_evidence(spec) -> dict[str, Any]:
    """What the holdout suites say about predictions like ``spec`` (a
    :class:`~markovsim.training.PlanSpec`): a dict with ``key``, ``rows`` (0 when none),
    the group's statistics when there are rows, and ``text``, one line for a reader.

    >>> from markovsim.training import load_plan
    >>> plan_evidence(load_plan("llama3_70b_h100_64"))["rows"] > 5
    True
    """
    from ._spec import PlanSpec

    if not isinstance(spec, PlanSpec):
        raise InvalidParameterError(f"spec={spec!r}: expected a PlanSpec (load_plan)")
    return evidence_for(spec.hardware, spec.workload, spec.plan.precision)


def evidence_for(hardware, workload, precision) -> dict[str, Any]:
    """:func:`plan_evidence` from its three parts (a plan search knows them before it has a
    plan): the :class:`~markovsim.training.Hardware`, the
    :class:`~markovsim.training.Workload` and the GEMM precision (a
    :class:`~markovsim.training.Precision` or its value)."""
    from ._plan import Precision

    moe = workload.moe is not None
    precision = Precision(precision).value
    key = evidence_key(hardware.name, moe, precision)
    kind = f"{'mixture-of-experts' if moe else 'dense'} {precision.upper()}"
    group = _load()["groups"].get(key)
    if group is None:
        text = (f"unvalidated: no published {kind} run on {hardware.name} is held out in the validation "
                f"suites, so the error of this prediction is unknown; its constants are the hardware file's, "
                f"fitted or assumed as it says (docs/background/accuracy.md)")
        return {"key": key, "rows": 0, "text": text}
    n, ok = group["rows"], group["within_10pct"]
    text = (f"on {n} published {kind} run{'s' if n != 1 else ''} on {hardware.name} held out from "
            f"calibration, {ok} within 10 %, median error {100 * group['median_abs_error']:.1f} %; the model's "
            f"speed {100 * group['min_speed_error']:+.1f} % to {100 * group['max_speed_error']:+.1f} % against "
            f"the measured (positive: faster than the run)"
            + ("; too few runs to judge" if n < FEW else "") + " (docs/background/accuracy.md)")
    return {"key": key, **{k: v for k, v in group.items() if k != "cases"}, "text": text}


def main() -> None:  # pragma: no cover - a maintenance command, checked by the test of the table
    from .._io import shipped_dir

    path = shipped_dir("models") / "cases" / EVIDENCE_FILE
    path.write_text(json.dumps(compute_evidence(), indent=1) + "\n")
    print(f"wrote {path}")
