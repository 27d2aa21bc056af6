"""Validation cases: check the models against numbers measured on your own cluster.

A case file is a model file (TOML) plus what was observed. Each case names a ``kind`` of
model ("goodput", "train", "infer", ... filled in by the domain packages, or your own via
:func:`register_case_kind`), the model's inputs in the usual model-file format, an
``[expect]`` table of reported outputs and a ``tolerance``. :func:`validate_cases` runs every
case and returns a :class:`ValidationReport`: predicted against reported for each output,
the relative error, whether it lies within tolerance, and a summary (median and maximum of
the absolute relative errors).

One case per file::

    name = "10K-card pre-training, March"
    kind = "goodput"
    tolerance = "5 %"
    source = "our incident log, 2025-03"   # optional, shown in the report

    [expect]
    goodput = 0.91
    mtbf = { value = "2.8 d", tolerance = "20 %" }

    [cluster]          # the model: whatever the kind reads, as in a model file
    n_cards = 10240

or several, as an array of tables, with file-wide defaults::

    tolerance = "10 %"            # default for every case

    [[case]]
    name = "job A"
    kind = "goodput"
    model_file = "models/cluster.toml"   # optional: start from this model file (relative
    [case.expect]                        # to the case file); the case's own keys override
    goodput = 0.93

Tolerances are relative when written as a ratio (``"5 %"``, ``0.05``) and absolute when
written with a unit (``"30 s"``). Reported values are numbers or strings with a unit
(``"2.8 d"``), converted to SI like every model-file quantity.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import math
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ._errors import MarkovsimError, SpecError
from ._spec import _KINDS, Table, parse_quantity

__all__ = [
    "CaseResult",
    "ValidationReport",
    "register_case_kind",
    "case_kinds",
    "validate_cases",
]

#: kind name -> function(model table) -> {output name: value in SI units}
_REGISTRY: dict[str, Callable[[Table], Mapping[str, Any]]] = {}
#: packages that register their kinds when imported
_DOMAIN_PACKAGES = ("markovsim.availability", "markovsim.training", "markovsim.inference")
_CASE_KEYS = ("name", "kind", "tolerance", "source", "expect", "model_file")


def register_case_kind(name: str, fn: Callable[[Table], Mapping[str, Any]]) -> None:
    """Make ``kind = name`` in case files run ``fn``.

    Args:
        name: the kind's name as written in case files (``"goodput"``).
        fn: ``fn(model) -> dict``: takes the case's model as a strict
            :class:`markovsim._spec.Table` (read it like a model file: ``model.table("cluster")``,
            ``.quantity("mtbf", "time")``, ...) and returns the predicted outputs in SI units
            (seconds, per second, fractions). Keys of the model that ``fn`` never reads are
            reported as unknown, as in a model file.

    Raises:
        MarkovsimError: ``name`` is already registered to a different function.
    """
    if not isinstance(name, str) or not name:
        raise MarkovsimError(f"register_case_kind: name={name!r}: expected a non-empty string")
    if not callable(fn):
        raise MarkovsimError(f"register_case_kind: fn={fn!r}: expected a callable")
    old = _REGISTRY.get(name)
    if old is not None and old is not fn and (
        getattr(old, "__module__", None), getattr(old, "__qualname__", None)
    ) != (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)):
        raise MarkovsimError(
            f"register_case_kind: kind {name!r} is already registered to "
            f"{getattr(old, '__module__', '?')}.{getattr(old, '__qualname__', old)}; choose another name"
        )
    _REGISTRY[name] = fn


def _load_domain_kinds() -> None:
    for package in _DOMAIN_PACKAGES:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError as exc:
            if exc.name != package:   # a real import error inside the package: show it
                raise
    from ._case_kinds import register as register_builtin_kinds

    register_builtin_kinds()   # train / infer / goodput, for Python callers as for the CLI


def case_kinds() -> tuple[str, ...]:
    """The kinds that case files can use (domain packages' and your registered ones)."""
    _load_domain_kinds()
    return tuple(sorted(_REGISTRY))


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One reported output of one case against the model's prediction.

    Attributes:
        case: the case's name.
        kind: the case's kind.
        output: the output's name.
        reported: the reported value (SI units).
        predicted: the model's value (SI units).
        error: relative error (predicted - reported) / |reported| (NaN when reported is 0).
        abs_error: |predicted - reported| (SI units).
        tolerance: the tolerance as written (relative or absolute).
        passed: whether the prediction is within tolerance.
        source: where the reported value comes from (as written in the case).
    """

    case: str
    kind: str
    output: str
    reported: float
    predicted: float
    error: float
    abs_error: float
    tolerance: str
    passed: bool
    source: str = ""


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """Every case's outputs, predicted against reported, and a summary.

    Attributes:
        path: the case file.
        rows: one :class:`CaseResult` per reported output.
    """

    path: str
    rows: tuple[CaseResult, ...]

    @property
    def errors(self) -> np.ndarray:
        """Absolute relative errors of the rows where one is defined."""
        e = np.array([abs(r.error) for r in self.rows], dtype=float)
        return e[np.isfinite(e)]

    @property
    def median_error(self) -> float:
        """Median absolute relative error (NaN when there is none)."""
        return float(np.median(self.errors)) if self.errors.size else math.nan

    @property
    def max_error(self) -> float:
        """Largest absolute relative error (NaN when there is none)."""
        return float(np.max(self.errors)) if self.errors.size else math.nan

    @property
    def n_failed(self) -> int:
        return sum(not r.passed for r in self.rows)

    @property
    def passed(self) -> bool:
        """Every output within its tolerance."""
        return self.n_failed == 0

    def summary(self) -> str:
        """One line: how many outputs passed, median and maximum relative error."""
        n = len(self.rows)
        return (f"{n - self.n_failed}/{n} outputs within tolerance; relative error: "
                f"median {_pct(self.median_error)}, max {_pct(self.max_error)}")

    def format_table(self) -> str:
        """A plain-text table of every row and the summary line."""
        head = ("case", "output", "reported", "predicted", "error", "tolerance", "result")
        body = [(r.case, r.output, f"{r.reported:.6g}", f"{r.predicted:.6g}", _pct(r.error),
                 r.tolerance, "ok" if r.passed else "FAIL") for r in self.rows]
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
        return "\n".join([*lines, "", self.summary()])

    def to_dict(self) -> dict:
        """JSON-ready: the rows and the summary (NaN written as null)."""
        def clean(x):
            return None if isinstance(x, float) and not math.isfinite(x) else x

        return {"path": self.path,
                "rows": [{k: clean(v) for k, v in dataclasses.asdict(r).items()} for r in self.rows],
                "summary": {"n": len(self.rows), "n_failed": self.n_failed,
                            "median_error": clean(self.median_error), "max_error": clean(self.max_error)}}

    def __str__(self) -> str:
        return self.format_table()


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %" if math.isfinite(x) else "n/a"


# --------------------------------------------------------------------------- parsing


def _any_quantity(value: Any, where: str) -> float:
    """A number, or a string with a unit of any kind, in SI units."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"{where}={value!r}: expected a number or a string with a unit")
    if isinstance(value, (int, float)):
        return float(value)
    errors = []
    for kind in _KINDS:
        try:
            return parse_quantity(value, kind, where=where)
        except SpecError as exc:
            errors.append(exc)
    raise SpecError(f"{where}={value!r}: expected a number or a number with a known unit "
                    "(time, rate, data, bandwidth, compute or %)")


@dataclasses.dataclass(frozen=True)
class _Tolerance:
    value: float
    relative: bool
    text: str

    def admits(self, predicted: float, reported: float) -> bool:
        if not (math.isfinite(predicted) and math.isfinite(reported)):
            return False
        bound = self.value * abs(reported) if self.relative else self.value
        return abs(predicted - reported) <= bound


def _tolerance(value: Any, where: str) -> _Tolerance:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"{where}={value!r}: expected a tolerance such as \"5 %\", 0.05 or \"30 s\"")
    try:
        relative = parse_quantity(value, "ratio", where=where)
        is_relative = True
    except SpecError:
        relative, is_relative = _any_quantity(value, where), False
    if not math.isfinite(relative) or relative < 0:
        raise SpecError(f"{where}={value!r}: expected a tolerance >= 0")
    text = value if isinstance(value, str) else f"{100 * value:g} %"
    return _Tolerance(relative, is_relative, text)


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _read(path: Path, what: str) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: {what} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None


@dataclasses.dataclass(frozen=True)
class _Case:
    name: str
    kind: str
    source: str
    model: dict
    expect: tuple[tuple[str, float, _Tolerance], ...]


def _parse_case(data: dict, default_tolerance: Any, where: str, directory: Path) -> _Case:
    name = data.get("name", where)
    if not isinstance(name, str):
        raise SpecError(f"{where}.name={name!r}: expected a string")
    here = f"{where} ({name!r})" if name != where else where
    kinds = case_kinds()
    kind = data.get("kind", ...)
    if kind is ...:
        raise SpecError(f"{here}.kind: required key is missing (known kinds: {', '.join(kinds) or 'none'})")
    if kind not in kinds:
        raise SpecError(f"{here}.kind={kind!r}: unknown kind; expected one of "
                        f"{', '.join(map(repr, kinds)) or '(none registered)'}")
    source = data.get("source", "")
    if not isinstance(source, str):
        raise SpecError(f"{here}.source={source!r}: expected a string")
    tolerance_raw = data.get("tolerance", default_tolerance)
    if tolerance_raw is ...:
        raise SpecError(f"{here}.tolerance: required (in the case or at the top of the file), e.g. \"5 %\"")
    tolerance = _tolerance(tolerance_raw, f"{here}.tolerance")
    expect_raw = data.get("expect")
    if not isinstance(expect_raw, dict) or not expect_raw:
        raise SpecError(f"{here}.expect: required table of reported outputs, e.g. goodput = 0.91")
    expect = []
    for key, value in expect_raw.items():
        at = f"{here}.expect.{key}"
        if isinstance(value, dict):
            unknown = set(value) - {"value", "tolerance"}
            if unknown or "value" not in value:
                raise SpecError(f"{at}={value!r}: expected {{ value = ..., tolerance = ... }}")
            tol = _tolerance(value["tolerance"], f"{at}.tolerance") if "tolerance" in value else tolerance
            expect.append((key, _any_quantity(value["value"], f"{at}.value"), tol))
        else:
            expect.append((key, _any_quantity(value, at), tolerance))
    model = {k: v for k, v in data.items() if k not in _CASE_KEYS}
    model_file = data.get("model_file")
    if model_file is not None:
        if not isinstance(model_file, str):
            raise SpecError(f"{here}.model_file={model_file!r}: expected a path")
        model = _merge(_read(directory / model_file, f"model_file of {here}"), model)
    return _Case(name, kind, source, model, tuple(expect))


def _parse_file(path: Path) -> list[_Case]:
    data = _read(path, "case file")
    directory = path.parent
    if "case" in data:
        cases = data["case"]
        extra = set(data) - {"case", "tolerance"}
        if extra:
            raise SpecError(f"{path}: unknown top-level key(s) {', '.join(map(repr, sorted(extra)))} in a "
                            "file of [[case]] tables; expected only 'tolerance' beside them")
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases) or not cases:
            raise SpecError(f"{path}: 'case' must be an array of tables ([[case]])")
        default = data.get("tolerance", ...)
        return [_parse_case(c, default, f"{path.name}: case[{i}]", directory) for i, c in enumerate(cases)]
    return [_parse_case(data, ..., f"{path.name}", directory)]


# --------------------------------------------------------------------------- running


def _run_case(case: _Case, path: Path) -> list[CaseResult]:
    table = Table(case.model, f"{path.name}: case {case.name!r}")
    try:
        predicted = _REGISTRY[case.kind](table)
        table.finish()
    except MarkovsimError as exc:
        raise type(exc)(f"case {case.name!r} (kind {case.kind!r}): {exc}") from None
    if not isinstance(predicted, Mapping):
        raise MarkovsimError(f"case kind {case.kind!r} returned {type(predicted).__name__}; expected a dict")
    rows = []
    for output, reported, tol in case.expect:
        if output not in predicted:
            raise SpecError(f"case {case.name!r}: expect.{output}: kind {case.kind!r} does not predict "
                            f"{output!r}; it predicts {', '.join(map(repr, predicted))}")
        value = float(np.asarray(predicted[output]))
        error = (value - reported) / abs(reported) if reported != 0 else math.nan
        rows.append(CaseResult(case=case.name, kind=case.kind, output=output, reported=reported,
                               predicted=value, error=float(error), abs_error=abs(value - reported),
                               tolerance=tol.text, passed=tol.admits(value, reported), source=case.source))
    return rows


def validate_cases(path: str | Path) -> ValidationReport:
    """Run every case of a case file and compare predictions with the reported values.

    The whole file is checked (kinds, tolerances, expected values) before any case runs.

    Args:
        path: the case file (TOML; format in the module documentation and the how-to page
            "Check the models against your cluster").

    Returns:
        ValidationReport: one row per reported output; ``report.summary()``,
        ``report.median_error``, ``report.max_error``, ``report.passed``.

    Raises:
        SpecError: a malformed case file, an unknown kind, unknown model keys, or an expected
            output the kind does not predict (the message names the file, case and key).
    """
    path = Path(path)
    cases = _parse_file(path)
    rows: list[CaseResult] = []
    for case in cases:
        rows.extend(_run_case(case, path))
    return ValidationReport(path=str(path), rows=tuple(rows))
