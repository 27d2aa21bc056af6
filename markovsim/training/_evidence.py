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
import math
import statistics
from pathlib import Path
from typing import Any, Iterable

from .._errors import InvalidParameterError

__all__ = ["SUITES", "EVIDENCE_FILE", "compute_evidence", "evidence_markdown", "evidence_for", "evidence_key", "linearity_evidence",
           "linearity_caveat", "linearity_key", "plan_evidence"]

#: the validation suites whose holdout rows are the evidence (``models/cases/<name>_training_runs.toml``)
SUITES = ("gpu", "tpu", "mpt", "automodel", "reports", "longcontext", "torchtitan_h100")
#: the shipped table, in ``models/cases``
EVIDENCE_FILE = "holdout_evidence.json"
#: outputs whose error is the model's time against the measured one (the others are rates)
_TIMES = ("step_time_s",)
#: rows of a group below which its statistics are called too few to judge
FEW = 5
#: the tolerance the suites hold a row to
_TOLERANCE = 0.10
#: the tolerance the suites hold a linearity to (2 points)
_POINTS = 2.0


def evidence_key(hardware_name: str, moe: bool, precision: str) -> str:
    """The key of a group: ``"<hardware name> | dense|moe | <precision>"``."""
    return f"{hardware_name} | {'moe' if moe else 'dense'} | {precision}"


def _speed_error(output: str, reported: float, predicted: float) -> float:
    if output in _TIMES:
        return reported / predicted - 1.0
    return predicted / reported - 1.0


def linearity_key(hardware_name: str, batch: str) -> str:
    """The key of a linearity group: ``"<hardware name> | <batch rule>"`` (``fixed-global``,
    ``fixed-replica`` or ``given``, a case's list of global batches)."""
    return f"{hardware_name} | {batch}"


def _linearity_rows(folder: Path, suites: Iterable[str]) -> list[tuple[str, str, int, int, float, float]]:
    """(key, case name, baseline, cards, predicted, reported) of every holdout
    linearity row, the model's linearity computed as ``markovsim validate`` computes it (the
    case's own plan and ``[linearity]`` table, unpublished inputs at their stated values)."""
    from .._io import Table, read_document
    from ._calibrate import _META, _value
    from ._outputs import _case_linearity
    from ._spec import plan_from_document

    rows = []
    for suite in suites:
        path = folder / f"{suite}_training_runs.toml"
        for i, case in enumerate(read_document(path).get("case", [])):
            if (case.get("kind") != "train" or case.get("role", "check") != "holdout"
                    or "linearity" not in case.get("expect", {})):
                continue
            where = f"{path.name}: case[{i}]"
            doc = {k: v for k, v in case.items() if k not in _META}
            table = case.get("linearity", {})
            spec = plan_from_document(doc, where=where, base=path.parent)
            predicted = _case_linearity(Table(table, f"{where}: linearity", schema="train case", _path="linearity"),
                                        spec)
            batch = "given" if "global_batches" in table else str(table.get("batch"))
            rows.append((linearity_key(spec.hardware.name, batch), case.get("name", where),
                         int(table["baseline"]), int(table.get("cards", spec.plan.world_size)), float(predicted),
                         _value(case["expect"]["linearity"], "linearity", f"{where}.expect.linearity")))
    return rows


def _linearity_groups(rows) -> dict[str, Any]:
    """Per key: ``rows``, ``within_2pts``, ``above`` (rows where the model's linearity is
    higher than the measured), ``median_abs_points``, ``min_points`` / ``max_points`` (the
    model's linearity minus the measured, in points) and, over the rows that grow
    (cards > baseline), the same gap per doubling of cards (``*_points_per_doubling``)."""
    by_key: dict[str, list] = {}
    for key, name, baseline, cards, predicted, reported in rows:
        by_key.setdefault(key, []).append((name, baseline, cards, 100.0 * (predicted - reported)))
    groups = {}
    for key in sorted(by_key):
        gaps = [g for _, _, _, g in by_key[key]]
        per = [g / math.log2(n / n0) for _, n0, n, g in by_key[key] if n > n0]
        groups[key] = {"rows": len(gaps), "within_2pts": sum(abs(g) <= _POINTS + 1e-9 for g in gaps),
                       "above": sum(g > 0 for g in gaps), "median_abs_points": round(statistics.median(map(abs, gaps)), 6),
                       "min_points": round(min(gaps), 6), "max_points": round(max(gaps), 6),
                       **({"median_points_per_doubling": round(statistics.median(per), 6),
                           "min_points_per_doubling": round(min(per), 6),
                           "max_points_per_doubling": round(max(per), 6)} if per else {}),
                       "cases": [n for n, _, _, _ in by_key[key]]}
    return groups


def compute_evidence(cases_dir: str | Path | None = None, suites: Iterable[str] = SUITES) -> dict[str, Any]:
    """The evidence table from the holdout rows of the shipped suites. Returns ``{"suites":
    [...], "groups": {key: {...}}, "linearity": {key: {...}}}``: each group of ``groups`` (the
    outputs other than linearity) with ``rows``, ``within_10pct``, ``median_abs_error``
    (fractions, as the suites count errors), ``min_speed_error`` / ``median_speed_error`` /
    ``max_speed_error`` (fractions, signed) and ``cases`` (the rows' names); the linearity rows, whose error is in
    points, grouped by hardware and batch rule (:func:`linearity_key`) as
    :func:`_linearity_groups` says."""
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
                       "min_speed_error": round(min(speed), 6), "median_speed_error": round(statistics.median(speed), 6),
                       "max_speed_error": round(max(speed), 6),
                       "cases": [n for n, _, _ in errors[key]]}
    return {"suites": names, "groups": groups, "linearity": _linearity_groups(_linearity_rows(folder, suites))}


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
            f"the measured, {100 * group['median_speed_error']:+.1f} % at the median (positive: faster than the run)"
            + ("; too few runs to judge" if n < FEW else "") + " (docs/background/accuracy.md)")
    return {"key": key, **{k: v for k, v in group.items() if k != "cases"}, "text": text}


def linearity_evidence(hardware, batch: str) -> dict[str, Any]:
    """What the holdout suites say about a linearity computed on ``hardware`` (a
    :class:`~markovsim.training.Hardware`) under a batch rule (``"fixed-global"``,
    ``"fixed-replica"`` or ``"given"``; ``"fixed-global=N"`` is read as its rule): a dict
    with ``key``, ``rows`` (0 when none), the group's statistics when there are rows, and
    ``text``, one line for a reader. The gap is the model's linearity minus the measured, in
    points: positive, the run lost more than the model says.

    >>> from markovsim.training import load_hardware
    >>> linearity_evidence(load_hardware("h100_sxm"), "fixed-replica")["rows"] > 5
    True
    """
    from ._hardware import Hardware

    if not isinstance(hardware, Hardware):
        raise InvalidParameterError(f"hardware={hardware!r}: expected a Hardware (load_hardware)")
    kind = str(batch).partition("=")[0]
    if kind not in ("fixed-global", "fixed-replica", "given"):
        raise InvalidParameterError(f"batch={batch!r}: expected fixed-global, fixed-replica or given")
    key = linearity_key(hardware.name, kind)
    group = _load().get("linearity", {}).get(key)
    rule = "a list of global batches" if kind == "given" else f"the {kind} batch"
    if group is None:
        text = (f"unvalidated: no published scale-up on {hardware.name} with {rule} is held out in the "
                f"validation suites, so the error of this linearity is unknown (docs/background/scaling.md)")
        return {"key": key, "rows": 0, "text": text}
    n = group["rows"]
    gap = (f"{group['min_points']:+.1f} points" if n == 1 else
           f"{group['min_points']:+.1f} to {group['max_points']:+.1f} points, higher in {group['above']}")
    text = (f"on {n} published scale-up{'s' if n != 1 else ''} on {hardware.name} with {rule} held out from "
            f"calibration, {group['within_2pts']} within 2 points; the model's linearity less the measured {gap}")
    if "median_points_per_doubling" in group:
        text += (f"; per doubling of cards {group['median_points_per_doubling']:+.2f} points"
                 + ("" if n == 1 else f" at the median ({group['min_points_per_doubling']:+.2f} to "
                                      f"{group['max_points_per_doubling']:+.2f})"))
    text += ("; too few runs to judge" if n < FEW else "") + " (docs/background/scaling.md)"
    return {"key": key, **{k: v for k, v in group.items() if k != "cases"}, "text": text}


def linearity_caveat() -> str:
    """The caveat shown with every linearity table, from the holdout linearity rows of every
    suite (:func:`compute_evidence`): how many, how many within 2 points, how many the model
    puts above the measured, the largest gap, and the same count on GPUs alone."""
    groups = _load().get("linearity", {})
    rows = sum(g["rows"] for g in groups.values())
    gpu = [g for k, g in groups.items() if not k.startswith("Google TPU")]
    return (f"linearity: on {rows} published scale-ups (MegaScale, MT-NLG, Llama 3, the Nemotron-4 reports and "
            f"NVIDIA's DGXC series on GPUs; MaxText on TPU v5p and v5e slices) the model's linearity was within 2 "
            f"points in {sum(g['within_2pts'] for g in groups.values())} and higher than measured in "
            f"{sum(g['above'] for g in groups.values())} (largest gap "
            f"{max(max(abs(g['min_points']), abs(g['max_points'])) for g in groups.values()):.1f} points); on GPUs it "
            f"was higher in {sum(g['above'] for g in gpu)} of {sum(g['rows'] for g in gpu)}: per-step costs that grow "
            f"with scale are missing there, read it as an upper bound (docs/background/scaling.md)")


def at_median_gap(group: dict[str, Any], points: list[dict]) -> list[float | None]:
    """Each point's linearity lowered by the group's median gap per doubling of cards (from
    :func:`linearity_evidence`) times its doublings above the baseline (``points[0]``);
    ``None`` below the baseline, or where the group has fewer than :data:`FEW` rows. A reading
    of the evidence, not a prediction: the median is taken over the same holdout rows."""
    per = group.get("median_points_per_doubling")
    if per is None or group.get("rows", 0) < FEW:
        return [None for _ in points]
    base = points[0]["cards"]
    return [None if p["cards"] < base else p["linearity"] - per / 100.0 * math.log2(p["cards"] / base)
            for p in points]


def evidence_markdown(table: dict[str, Any] | None = None) -> list[str]:
    """The evidence table (:func:`compute_evidence`'s, or the shipped one) as Markdown lines:
    one table of the step-time groups, one of the linearity groups, for ``make repro``'s
    report."""
    table = _load() if table is None else table
    md = ["| hardware, kind, GEMM precision | holdout rows | within 10 % | median error | model's speed against the "
          "measured, median (range) |", "|---|---|---|---|---|"]
    for key, g in table["groups"].items():
        md.append(f"| {key.replace(' | ', ', ')} | {g['rows']} | {g['within_10pct']} | "
                  f"{100 * g['median_abs_error']:.1f} % | {100 * g['median_speed_error']:+.1f} % "
                  f"({100 * g['min_speed_error']:+.1f} % to {100 * g['max_speed_error']:+.1f} %) |")
    md += ["", "| hardware, batch rule | holdout scale-ups | within 2 points | model above the measured | model less "
           "measured (points) | per doubling of cards, median (range) |", "|---|---|---|---|---|---|"]
    for key, g in table.get("linearity", {}).items():
        per = ("" if "median_points_per_doubling" not in g else
               f"{g['median_points_per_doubling']:+.2f} ({g['min_points_per_doubling']:+.2f} to "
               f"{g['max_points_per_doubling']:+.2f})")
        md.append(f"| {key.replace(' | ', ', ')} | {g['rows']} | {g['within_2pts']} | {g['above']} | "
                  f"{g['min_points']:+.1f} to {g['max_points']:+.1f} | {per} |")
    return md


def main() -> None:  # pragma: no cover - a maintenance command, checked by the test of the table
    from .._io import shipped_dir

    path = shipped_dir("models") / "cases" / EVIDENCE_FILE
    path.write_text(json.dumps(compute_evidence(), indent=1) + "\n")
    print(f"wrote {path}")
