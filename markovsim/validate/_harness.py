"""Validation cases: check the models against numbers measured on your own cluster.

A case file is a model document (TOML) plus what was observed. Each case names a ``kind``
of model (``goodput``, ``train``, ``infer``: defined by the domain packages next to their
readers, or your own via :func:`register_case_kind`), the model's inputs in the usual
model-file format, an ``[expect]`` table of reported outputs and a ``tolerance``.
:func:`validate_cases` runs every case and returns a
:class:`~markovsim.validate.ValidationReport`: predicted against reported for each output,
the relative error, whether it lies within tolerance, and a summary (median and maximum of
the absolute relative errors).

One case per file::

    name = "10K-card pre-training, March"
    kind = "goodput"
    tolerance = "5 %"
    source = "our incident log, 2025-03"   # optional, shown in the report
    role = "check"                         # or "fit" / "holdout" (see below)

    [expect]
    goodput = 0.91
    job_mtbf_s = { value = "2.8 d", tolerance = "20 %" }

    cluster = "atlas800t_a2_10k"           # the model: whatever the kind reads
    recovery = "my_recovery.toml"          # references: relative to this case file

or several, as an array of tables, with file-wide defaults::

    tolerance = "10 %"            # default for every case

    [[case]]
    name = "job A"
    kind = "goodput"
    model_file = "jobs/a.toml"    # optional: start from this model file (relative to the
    [case.expect]                 # case file); the case's own keys are merged over it
    goodput = 0.93

References in a case (``cluster = "x.toml"``, a plan's ``workload``) follow the one rule of
:mod:`markovsim._io`: bare names are shipped presets, paths are relative to the file that
holds them (the case file, or the ``model_file`` for references written there).

Tolerances are relative when written as a ratio (``"5 %"``, ``0.05``) and absolute when
written with a unit (``"30 s"``); an absolute tolerance, like a reported value with a unit,
must measure what the output measures (``"5 GB"`` on a time is refused). A share (an output
without unit: linearity, MFU) may be given an absolute tolerance in percentage points
(``"2 points"``: within 0.02 of the reported share); such rows are summarised apart, by
their error in points, never mixed into the median relative error. Reported values are
numbers or strings with a unit (``"2.8 d"``), converted to SI like every model-file quantity.

Roles: ``fit`` cases hold the figures an input was calibrated on; they are listed apart and
never count as evidence. ``holdout`` cases were kept out of the calibration and are
summarised on their own. ``check`` (the default) is an ordinary comparison.

An input the source does not publish may be swept over its plausible range, so that a
reader sees how much the verdict rests on it::

    [case.unpublished]            # each key: the values to try (a dotted key for a table's field)
    micro_batch = [1, 2, 4]
    "efficiency.tp_overlap" = [0.0, 0.5]

The case's own value stays the prediction that is judged; every combination of the swept
values is also run, points the kind marks as infeasible (an output ``fits`` of 0) are left
out, and each row reports the band of its predictions (``band_low``, ``band_high``) and
whether any point of the sweep lies within tolerance (``sweep_admits``). The summary counts
those rows apart: a band is what an unpublished input allows, never evidence.

A file of cases may state the accuracy it is held to, before any case runs::

    [targets]                     # of the holdout rows (the evidence when there are none)
    median = "5 %"                # median relative error of the rows in relative terms
    max = "10 %"                  # largest relative error
    points = "2 points"           # largest error of the rows with a tolerance in points

The summary then says, for each target, the measured value and whether it is met: a verdict
computed from the numbers (:meth:`ValidationReport.target_verdicts`).

Calibrate, then validate, in one run: a ``[calibrate]`` table names kernel constants of the
training model (:data:`~markovsim.training.KERNEL_PARAMETERS`) to fit on the file's
``role = "fit"`` cases of kind ``train`` first, one fit per accelerator
(:func:`~markovsim.training.calibrate_cases`); every ``train`` case on a calibrated
accelerator is then predicted with the fitted constants, and the report lists each fit
(value, standard error, whether on a bound, rms log error)::

    [calibrate]
    params = ["gemm_peak_fraction"]   # e.g. one efficiency of your software stack, from your own runs
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .._errors import InvalidParameterError, MarkovsimError, SpecError
from .._io import (Document, ModelKind, Table, expand, merge, parse_quantity, quantity_kind, read_document, reference,
                   resolve)
from .._io._table import _NUM
from ..availability import MODEL_KIND as _GOODPUT
from ..inference import MODEL_KIND as _INFER
from ..training import MODEL_KIND as _TRAIN
from ..training._outputs import OVERLAP_CASE_NOTE
from ._report import ROLES, CaseResult, ValidationReport

__all__ = ["register_case_kind", "case_kinds", "validate_cases", "MODEL_KINDS"]

#: the kinds the domain packages define (``train``, ``infer``, ``goodput``)
MODEL_KINDS: dict[str, ModelKind] = {k.name: k for k in (_TRAIN, _INFER, _GOODPUT)}
#: kinds registered by users: name -> (function of a strict Table, output units or None)
_USER: dict[str, tuple[Callable[[Table], Mapping[str, Any]], Mapping[str, str] | None]] = {}
#: a tolerance in percentage points of a share: "2 points", "2 pt", "2 pp"
_POINTS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(points?|pts?|pp)\s*$")
#: the targets a file of cases may state, and the kind of each
_TARGETS = {"median": "relative", "max": "relative", "points": "points"}
_CASE_KEYS = ("name", "kind", "tolerance", "source", "expect", "model_file", "role", "unpublished")
#: at most this many combinations of swept unpublished inputs per case
_MAX_SWEEP = 256
#: the quantity kind of an output unit, where the output is in SI units of that kind
_UNIT_KIND = {"s": "time", "B": "data", "1": "ratio"}
_EXPECTED = {"time": 'a time such as "30 s"', "data": 'a data size such as "5 GB"',
             "ratio": 'a plain number or a ratio such as "5 %"'}


def register_case_kind(name: str, fn: Callable[[Table], Mapping[str, Any]], *,
                       units: Mapping[str, str] | None = None) -> None:
    """Make ``kind = name`` in case files run ``fn``.

    Args:
        name: the kind's name as written in case files (``"repairable_unit"``).
        fn: ``fn(model) -> dict``: takes the case's model as a strict
            :class:`markovsim._io.Table` (read it like a model file: ``model.table("unit")``,
            ``.quantity("mtbf", "time")``, ...) and returns the predicted outputs in SI units
            (seconds, per second, fractions). Keys of the model that ``fn`` never reads are
            reported as unknown, as in a model file.
        units: optional unit of each output (``"s"``, ``"B"``, ``"1"``); with them, a
            tolerance or reported value whose unit measures something else is refused.

    Raises:
        MarkovsimError: ``name`` is a built-in kind or already registered to a different
            function.
    """
    if not isinstance(name, str) or not name:
        raise MarkovsimError(f"register_case_kind: name={name!r}: expected a non-empty string")
    if not callable(fn):
        raise MarkovsimError(f"register_case_kind: fn={fn!r}: expected a callable")
    if name in MODEL_KINDS:
        raise MarkovsimError(f"register_case_kind: kind {name!r} is defined by markovsim; choose another name")
    old = _USER.get(name, (None,))[0]
    if old is not None and old is not fn and (
        getattr(old, "__module__", None), getattr(old, "__qualname__", None)
    ) != (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)):
        raise MarkovsimError(
            f"register_case_kind: kind {name!r} is already registered to "
            f"{getattr(old, '__module__', '?')}.{getattr(old, '__qualname__', old)}; choose another name"
        )
    _USER[name] = (fn, dict(units) if units is not None else None)


def case_kinds() -> tuple[str, ...]:
    """The kinds that case files can use (the domain packages' and your registered ones)."""
    return tuple(sorted({*MODEL_KINDS, *_USER}))


def _units(kind: str) -> Mapping[str, str] | None:
    return MODEL_KINDS[kind].units if kind in MODEL_KINDS else _USER[kind][1]


# --------------------------------------------------------------------------- parsing


def _any_quantity(value: Any, where: str) -> tuple[float, str | None]:
    """A number (kind ``None``), or a string with a unit of any kind, in SI units."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"{where}={value!r}: expected a number or a string with a unit")
    if isinstance(value, (int, float)):
        return float(value), None
    m = _NUM.match(value)
    if m and not m.group(2):
        return float(m.group(1)), None
    kind = quantity_kind(m.group(2)) if m else None
    if kind is None:
        raise SpecError(f"{where}={value!r}: expected a number or a number with a known unit "
                        "(time, rate, data, bandwidth, compute or %)")
    return parse_quantity(value, kind, where=where), kind


@dataclasses.dataclass(frozen=True)
class _Tolerance:
    value: float
    relative: bool
    text: str
    kind: str | None   # the quantity kind of an absolute tolerance written with a unit
    points: bool = False  # an absolute tolerance on a share, in percentage points

    def admits(self, predicted: float, reported: float) -> bool:
        if not (math.isfinite(predicted) and math.isfinite(reported)):
            return False
        bound = self.value * abs(reported) if self.relative else self.value
        return abs(predicted - reported) <= bound


def _tolerance(value: Any, where: str) -> _Tolerance:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"{where}={value!r}: expected a tolerance such as \"5 %\", 0.05, \"30 s\" "
                        "or \"2 points\"")
    if isinstance(value, str) and (m := _POINTS.match(value)):
        size = float(m.group(1)) / 100.0
        if not math.isfinite(size):
            raise SpecError(f"{where}={value!r}: expected a finite number of points")
        return _Tolerance(size, False, value, "ratio", points=True)
    try:
        size, relative, kind = parse_quantity(value, "ratio", where=where), True, None
    except SpecError:
        (size, kind), relative = _any_quantity(value, where), False
    if not math.isfinite(size) or size < 0:
        raise SpecError(f"{where}={value!r}: expected a tolerance >= 0")
    text = value if isinstance(value, str) else f"{100 * value:g} %"
    return _Tolerance(size, relative, text, kind)


def _same_kind(output: str, unit: str | None, kind: str | None, value: Any, where: str, what: str) -> None:
    """Refuse a unit that measures something other than the output (``"5 GB"`` on a time)."""
    if unit is None or kind is None:
        return
    wanted = _UNIT_KIND.get(unit)
    if kind != wanted:
        expected = _EXPECTED.get(wanted, "a plain number (no unit)")
        raise SpecError(f"{where}={value!r}: {what} is a {kind} but output {output!r} is in {unit!r}; "
                        f"expected {expected}")


@dataclasses.dataclass(frozen=True)
class _Case:
    name: str
    kind: str
    role: str
    source: str
    model: Document
    expect: tuple[tuple[str, float, _Tolerance], ...]
    unpublished: tuple[tuple[str, tuple], ...] = ()
    note: str = ""   # set by the harness (e.g. a [calibrate] that did not reach this case)


def _text(data: Mapping, key: str, default: str, where: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise SpecError(f"{where}.{key}={value!r}: expected a string")
    return value


def _parse_case(data: dict, default_tolerance: Any, where: str, path: Path) -> _Case:
    name = _text(data, "name", where, where)
    here = f"{where} ({name!r})" if name != where else where
    kinds = case_kinds()
    kind = data.get("kind", ...)
    if kind is ...:
        raise SpecError(f"{here}.kind: required key is missing (known kinds: {', '.join(kinds) or 'none'})")
    if kind not in kinds:
        raise SpecError(f"{here}.kind={kind!r}: unknown kind; expected one of "
                        f"{', '.join(map(repr, kinds)) or '(none registered)'}")
    role = _text(data, "role", "check", here)
    if role not in ROLES:
        raise SpecError(f"{here}.role={role!r}: expected one of {', '.join(map(repr, ROLES))}")
    source = _text(data, "source", "", here)
    tolerance_raw = data.get("tolerance", default_tolerance)
    if tolerance_raw is ...:
        raise SpecError(f"{here}.tolerance: required (in the case or at the top of the file), e.g. \"5 %\"")
    tolerance = _tolerance(tolerance_raw, f"{here}.tolerance")
    expect_raw = data.get("expect")
    if not isinstance(expect_raw, dict) or not expect_raw:
        raise SpecError(f"{here}.expect: required table of reported outputs, e.g. goodput = 0.91")
    units = _units(kind)
    expect = []
    for key, value in expect_raw.items():
        at = f"{here}.expect.{key}"
        if units is not None and key not in units:
            raise SpecError(f"{at}: kind {kind!r} does not predict {key!r}; it predicts "
                            f"{', '.join(map(repr, units))}")
        unit = units.get(key) if units is not None else None
        tol = tolerance
        if isinstance(value, dict):
            unknown = set(value) - {"value", "tolerance"}
            if unknown or "value" not in value:
                raise SpecError(f"{at}={value!r}: expected {{ value = ..., tolerance = ... }}")
            if "tolerance" in value:
                tol = _tolerance(value["tolerance"], f"{at}.tolerance")
            value, at = value["value"], f"{at}.value"
        reported, kind_of_value = _any_quantity(value, at)
        _same_kind(key, unit, kind_of_value, value, at, "the reported value")
        _in_range(key, unit, reported, value, at)
        if not tol.relative:
            _same_kind(key, unit, tol.kind, tol.text, f"{here}.expect.{key} tolerance", "the tolerance")
        expect.append((key, reported, tol))
    unpublished = _parse_unpublished(data.get("unpublished"), f"{here}.unpublished")
    model = Document.of({k: v for k, v in data.items() if k not in _CASE_KEYS})
    model_file = data.get("model_file")
    if model_file is not None:
        if not isinstance(model_file, str):
            raise SpecError(f"{here}.model_file={model_file!r}: expected a path")
        found = resolve(model_file, folder=MODEL_KINDS[kind].folder if kind in MODEL_KINDS else "",
                        base=path.parent, where=f"{here}.model_file")
        base_doc = read_document(found)
        if kind in MODEL_KINDS:   # the model file's own references are relative to it
            base_doc = expand(base_doc, MODEL_KINDS[kind].references, base=found.parent, where=str(found))
        model = Document.of(merge(base_doc, model))
    return _Case(name, kind, role, source, model, tuple(expect), unpublished)


#: outputs of unit 1 that are ratios near 1 rather than fractions of a whole (above 1 possible)
_NEAR_ONE = {"linearity": 2.0}


def _in_range(key: str, unit: str | None, reported: float, raw: Any, at: str) -> None:
    """A fraction (MFU, a bubble share, an availability) must lie in [0, 1], a ratio such as
    linearity in [0, 2]: a percentage written as a bare number (``mfu = 45``) is refused
    rather than compared as 45 times the peak."""
    if unit != "1":
        return
    top = _NEAR_ONE.get(key, 1.0)
    if not 0.0 <= reported <= top:
        hint = f'; for a percentage write "{raw} %"' if isinstance(raw, (int, float)) and reported > top else ""
        what = "a fraction between 0 and 1" if top == 1.0 else f"a ratio between 0 and {top:g}"
        raise SpecError(f"{at}={raw!r}: {key} is {what}{hint}")


def _parse_unpublished(raw: Any, where: str) -> tuple[tuple[str, tuple], ...]:
    """``[unpublished]``: key (dotted for a table's field) -> list of values to sweep."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise SpecError(f"{where}={raw!r}: expected a table of inputs, each with a list of values, "
                        "e.g. { micro_batch = [1, 2, 4] }")
    out, combos = [], 1
    for key, values in raw.items():
        if isinstance(values, dict):
            raise SpecError(f"{where}.{key}: expected a list of values; write a table's field as a dotted "
                            f"key in quotes, e.g. \"{key}.field\" = [0.0, 0.5]")
        if not isinstance(values, list) or len(values) < 1 or any(isinstance(v, (dict, list)) for v in values):
            raise SpecError(f"{where}.{key}={values!r}: expected a non-empty list of plain values to sweep")
        combos *= len(values)
        out.append((key, tuple(values)))
    if combos > _MAX_SWEEP:
        raise SpecError(f"{where}: {combos} combinations of swept inputs; expected at most {_MAX_SWEEP}")
    return tuple(out)


def _override(model: Document, key: str, value: Any) -> Document:
    """The model with ``key`` (dotted for a table's field) set to ``value``. A reference on
    the way (``hardware = "a100_sxm_80gb"``) becomes ``{file = ..., <field> = value}``, the
    reference rule's form for a file with changes."""
    over: dict = {}
    node, here = over, model
    *path, last = key.split(".")
    for part in path:
        existing = here.get(part) if isinstance(here, Mapping) else None
        node = node.setdefault(part, {})
        if isinstance(existing, str):
            node["file"] = existing
        here = existing
    node[last] = value
    return Document.of(merge(model, over), model.origin)


def _parse_targets(raw: Any, where: str) -> dict[str, float]:
    """``[targets]``: ``median`` and ``max`` as ratios ("5 %"), ``points`` in points."""
    if not isinstance(raw, dict):
        raise SpecError(f"{where}={raw!r}: expected a table such as {{ median = \"5 %\", max = \"10 %\" }}")
    unknown = set(raw) - set(_TARGETS)
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, sorted(unknown)))}; expected "
                        f"{', '.join(map(repr, _TARGETS))}")
    out = {}
    for key, value in raw.items():
        tol = _tolerance(value, f"{where}.{key}")
        if tol.points != (_TARGETS[key] == "points") or not (tol.relative or tol.points):
            wanted = '"2 points"' if _TARGETS[key] == "points" else 'a ratio such as "5 %"'
            raise SpecError(f"{where}.{key}={value!r}: expected {wanted}")
        out[key] = tol.value
    return out


def _parse_calibrate(raw: Any, where: str) -> tuple[str, ...]:
    """``[calibrate]``: ``params``, the kernel constants to fit on the fit cases."""
    from ..training import KERNEL_PARAMETERS

    if not isinstance(raw, dict) or set(raw) != {"params"}:
        raise SpecError(f"{where}={raw!r}: expected a table with one key, params = [names], e.g. "
                        "{ params = [\"gemm_peak_fraction\"] }")
    params = raw["params"]
    if (not isinstance(params, list) or not params or not all(isinstance(p, str) for p in params)
            or len(set(params)) != len(params)):
        raise SpecError(f"{where}.params={params!r}: expected a non-empty list of distinct names")
    unknown = [p for p in params if p not in KERNEL_PARAMETERS]
    if unknown:
        raise SpecError(f"{where}.params: unknown constant(s) {', '.join(map(repr, unknown))}; expected names from "
                        f"{', '.join(KERNEL_PARAMETERS)}")
    return tuple(params)


def _parse_file(path: Path) -> tuple[list[_Case], dict[str, float], tuple[str, ...]]:
    data = read_document(path)
    targets = _parse_targets(data["targets"], f"{path.name}: targets") if "targets" in data else {}
    params = _parse_calibrate(data["calibrate"], f"{path.name}: calibrate") if "calibrate" in data else ()
    if "case" in data:
        cases = data["case"]
        extra = set(data) - {"case", "tolerance", "targets", "calibrate"}
        if extra:
            raise SpecError(f"{path}: unknown top-level key(s) {', '.join(map(repr, sorted(extra)))} in a "
                            "file of [[case]] tables; expected only 'tolerance', 'targets' and 'calibrate' "
                            "beside them")
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases) or not cases:
            raise SpecError(f"{path}: 'case' must be an array of tables ([[case]])")
        default = data.get("tolerance", ...)
        parsed = [_parse_case(c, default, f"{path.name}: case[{i}]", path) for i, c in enumerate(cases)]
        return parsed, targets, params
    if targets or params:
        raise SpecError(f"{path}: 'targets' and 'calibrate' need a file of [[case]] tables")
    return [_parse_case(dict(data), ..., f"{path.name}", path)], targets, params


def _calibrated(cases: list[_Case], path: Path, params: tuple[str, ...]) -> tuple[list[_Case], list]:
    """Fit ``params`` on the fit cases (one fit per accelerator) and give every ``train``
    case on a calibrated accelerator the fitted kernel constants."""
    from ..training import calibrate_cases, kernels_table

    try:
        calibrations = calibrate_cases(path, params)
    except MarkovsimError as exc:
        raise type(exc)(f"{path.name}: [calibrate]: {exc}") from None
    by_name = {c.hardware: kernels_table(c.kernels) for c in calibrations}
    out = []
    for case in cases:
        hw = case.model.get("hardware") if case.kind == "train" else None
        if hw is not None:
            found = reference(hw, folder="hardware", base=path.parent, where=f"{path.name}: case {case.name!r}.hardware")
            table = by_name.get(found.get("name"))
            if table is not None:
                over = merge(hw, {"kernels": table}) if isinstance(hw, Mapping) else {"file": hw, "kernels": table}
                case = dataclasses.replace(case, model=Document.of({**case.model, "hardware": over}, case.model.origin))
            else:
                case = dataclasses.replace(case, note=f"not calibrated: no fit case on {found.get('name')!r}; "
                                                      "predicted with the hardware file's own constants")
        out.append(case)
    return out, calibrations


# --------------------------------------------------------------------------- running


def _predict(case: _Case, path: Path, model: Document | None = None) -> Mapping[str, Any]:
    where = f"{path.name}: case {case.name!r}"
    model = case.model if model is None else model
    if case.kind in MODEL_KINDS:
        return MODEL_KINDS[case.kind].evaluate_case(model, where=where, base=path.parent)
    table = Table(model, where)
    predicted = _USER[case.kind][0](table)
    table.finish()
    return predicted


def _run_case(case: _Case, path: Path) -> list[CaseResult]:
    try:
        predicted = _predict(case, path)
    except MarkovsimError as exc:
        raise type(exc)(f"case {case.name!r} (kind {case.kind!r}): {exc}") from None
    if not isinstance(predicted, Mapping):
        raise MarkovsimError(f"case kind {case.kind!r} returned {type(predicted).__name__}; expected a dict")
    # a kind that checks memory (``fits``) and finds the case's own plan over it: the
    # prediction assumes a plan the model itself says cannot run; flag every row
    notes = [case.note] if case.note else []
    over_memory = _over_memory(predicted)
    if over_memory:
        notes.append(f"the plan exceeds the modelled memory{_over_by(predicted)} (fits = 0); predicted as if it ran")
    if float(np.asarray(predicted.get("overlap_caveat", 0.0))) == 1.0:
        # the train kind: the case states no communication overlap and one would matter
        notes.append(OVERLAP_CASE_NOTE)
    note = "; ".join(notes)
    swept = None
    if case.unpublished:
        # when the case's own plan exceeds the kind's memory check, that check cannot sort
        # the sweep's points either: keep them all (and say so)
        swept = _sweep(case, path, check_fits=not over_memory)
    rows = []
    for output, reported, tol in case.expect:
        if output not in predicted:
            raise SpecError(f"case {case.name!r}: expect.{output}: kind {case.kind!r} does not predict "
                            f"{output!r}; it predicts {', '.join(map(repr, predicted))}")
        value = float(np.asarray(predicted[output]))
        error = (value - reported) / abs(reported) if reported != 0 else math.nan
        band = {}
        if swept is not None:
            points = [value] + [float(np.asarray(p[output])) for p in swept[0]]
            band = dict(band_low=min(points), band_high=max(points),
                        sweep_admits=any(tol.admits(p, reported) for p in points), sweep_points=len(points),
                        sweep_infeasible=swept[1], sweep=swept[2])
        rows.append(CaseResult(case=case.name, kind=case.kind, output=output, reported=reported,
                               predicted=value, error=float(error), abs_error=abs(value - reported),
                               tolerance=tol.text, passed=tol.admits(value, reported), source=case.source,
                               role=case.role, points=tol.points, note=note, **band))
    return rows


def _over_by(outputs: Mapping[str, Any]) -> str:
    """`` by N %`` of the usable memory, when the kind reports both numbers (else empty)."""
    if "memory_bytes" not in outputs or "usable_memory_bytes" not in outputs:
        return ""
    used, usable = (float(np.asarray(outputs[k])) for k in ("memory_bytes", "usable_memory_bytes"))
    return f" by {100 * (used / usable - 1):.0f} %" if usable > 0 else ""


def _over_memory(outputs: Mapping[str, Any]) -> bool:
    """Whether a kind that checks memory (an output ``fits``) says the plan does not fit."""
    return "fits" in outputs and float(np.asarray(outputs["fits"])) == 0.0


def _sweep(case: _Case, path: Path, *, check_fits: bool = True) -> tuple[list[Mapping[str, Any]], int, str]:
    """The outputs at every combination of the case's swept unpublished inputs, how many
    combinations were left out, and the sweep as text. Left out: the points the kind marks
    infeasible (``fits`` = 0; not when ``check_fits`` is false) and the combinations it
    refuses as invalid parameters (a schedule that does not tile)."""
    keys = [k for k, _ in case.unpublished]
    found, infeasible = [], 0
    for combo in itertools.product(*(v for _, v in case.unpublished)):
        model = case.model
        for key, value in zip(keys, combo):
            model = _override(model, key, value)
        try:
            out = _predict(case, path, model)
        except MarkovsimError as exc:
            if getattr(exc, "refused_value", False) or (isinstance(exc, InvalidParameterError)
                                                         and not isinstance(exc, TypeError)):
                infeasible += 1    # a plan the model refuses (a schedule that does not tile): not plausible
                continue
            raise type(exc)(f"case {case.name!r}, unpublished inputs "
                            f"{', '.join(f'{k}={v!r}' for k, v in zip(keys, combo))}: {exc}") from None
        if check_fits and _over_memory(out):
            infeasible += 1
            continue
        found.append(out)
    text = "; ".join(f"{k} in {list(v)}" for k, v in case.unpublished)
    if not check_fits:
        text += "; memory not checked (the case's own plan exceeds the modelled memory)"
    return found, infeasible, text


def validate_cases(path: str | Path, *, progress=None) -> ValidationReport:
    """Run every case of a case file and compare predictions with the reported values.

    The whole file is checked (kinds, roles, tolerances and their units, expected values)
    before any case runs.

    Args:
        path: the case file (TOML; format in the module documentation and the how-to page
            "Check the models against your cluster").
        progress: called as ``progress(done, total)`` after each case (e.g. a progress bar).

    Returns:
        ValidationReport: one row per reported output; ``report.summary()``,
        ``report.median_error``, ``report.max_error``, ``report.passed``.

    Raises:
        SpecError: a malformed case file, an unknown kind, unknown model keys, a tolerance
            whose unit measures something else than its output, or an expected output the
            kind does not predict (the message names the file, case and key).
    """
    path = Path(path)
    if path.is_dir():
        raise SpecError(f"{path}: is a directory, expected a case file (TOML)")
    cases, targets, params = _parse_file(path)
    fitted = []
    if params:
        cases, fitted = _calibrated(cases, path, params)
    rows: list[CaseResult] = []
    for done, case in enumerate(cases, 1):
        rows.extend(_run_case(case, path))
        if progress is not None:
            progress(done, len(cases))
    calibrations = tuple({"hardware": c.hardware, "params": c.params, "values": c.values, "spread": c.spread,
                          "on_bound": c.on_bound, "runs": len(c.runs), "rms_log_error": c.rms_log_error,
                          "success": c.success, "identified": c.identified,
                          "not_identified": tuple(c.why_not(p) for p in c.params)} for c in fitted)
    return ValidationReport(path=str(path), rows=tuple(rows), targets=targets, calibrations=calibrations)
