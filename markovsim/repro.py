r"""Reproduction verdicts: expectations, model values, and the statuses the runner derives.

Three parts, kept apart so that no script can set a verdict:

* ``paper_repro/expectations.toml`` holds one :class:`Expectation` per published figure,
  written before the model runs: the quoted claim, its scope, the value or bound with its
  unit, and the tolerance with its reason.
* Each script in ``paper_repro/`` defines ``IDS`` (the ids it covers) and
  ``run(out_dir) -> list[ModelValue]``: the model's value for a figure, every input with
  its provenance (:func:`cited`, :func:`assumed`, :func:`fitted`), and, where an unpublished
  input decides the outcome, a :class:`Sweep` of it over its plausible range.
* :func:`run_reproductions` joins the two and derives each :class:`Row`'s status with
  :func:`derive_status`:

  ``not-yet``
      no model value (the figure is not modelled);
  ``what-if``
      the expectation has no published number to compare (a scenario, a target, a
      qualitative claim);
  ``to-check``
      a prediction (kind ``prediction``): the model states a value with a prediction
      interval for data that exist but are held back (``check_against`` names them); it
      becomes a comparison once they are read, and is no evidence before;
  ``calibrated``
      an input was fitted on this very figure (``fitted-on:KEY``): never evidence; the row
      names the rows that then use the fitted value;
  ``reproduced``
      every model value (the central one and every sweep point) lies within tolerance and
      every input is cited;
  ``matches-with-assumption``
      within tolerance with at least one stated assumption (or an input fitted on another
      figure), or within tolerance for part of a sweep over the plausible range;
  ``miss``
      outside tolerance at every point; the row states the mechanism believed to cause it;
  ``inconsistent``
      outside tolerance at every point of a sweep over the plausible range of the inputs,
      with no missing mechanism named: no sensible input makes the figure hold.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import re
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Callable, Sequence

from ._errors import MarkovsimError
from ._io import shipped_dir

__all__ = [
    "STATUSES", "KINDS", "CHECKS", "Input", "cited", "assumed", "fitted", "Sweep", "sweep", "ModelValue",
    "Expectation", "Row", "load_expectations", "derive_status", "inputs_from_model_file",
    "find_scripts", "script_ids", "run_reproductions", "write_report", "format_table", "status_counts",
]

STATUSES = ("reproduced", "matches-with-assumption", "calibrated", "miss", "inconsistent", "what-if", "to-check",
            "not-yet")
#: statuses that count as evidence for the model
EVIDENCE = ("reproduced", "matches-with-assumption")
KINDS = ("figure", "scenario", "qualitative", "prediction")
CHECKS = ("abs", "rel", "interval", "above", "below", "none")
_FITTED = "fitted-on:"


# --------------------------------------------------------------------------- inputs


@dataclasses.dataclass(frozen=True)
class Input:
    """One model input with its provenance.

    Attributes:
        name: what the input is.
        value: its value (number, text or list).
        unit: its unit (``""`` when the value carries it, as in model files).
        provenance: ``"cited"`` (a seed id or public source gives it), ``"assumption"``
            (not published: a stated choice), or ``"fitted-on:KEY"`` (solved or chosen from
            the figure ``KEY``).
        source: the citation, the reason for the assumption, or how it was fitted.
        file: the model file it summarises, if any (its fields are listed in the report).
        fields: the fields of ``file`` it stands for, where their provenance is not the one
            their comments give (fields fitted on a public data set: cited to it).
    """

    name: str
    value: Any
    unit: str
    provenance: str
    source: str
    file: str = ""
    fields: tuple = ()

    def __post_init__(self):
        p = self.provenance
        if not (p in ("cited", "assumption") or (p.startswith(_FITTED) and len(p) > len(_FITTED))):
            raise MarkovsimError(
                f"Input({self.name!r}).provenance={p!r}: expected 'cited', 'assumption' or 'fitted-on:KEY'")
        if not self.source:
            raise MarkovsimError(f"Input({self.name!r}).source is empty: say where it comes from or why")

    @property
    def fitted_on(self) -> str | None:
        """The figure key this input was fitted on, or ``None``."""
        return self.provenance[len(_FITTED):] if self.provenance.startswith(_FITTED) else None


def cited(name: str, value: Any, unit: str, source: str) -> Input:
    """An input a seed id or a public source gives (``source`` names it)."""
    return Input(name, value, unit, "cited", source)


def assumed(name: str, value: Any, unit: str, why: str) -> Input:
    """An unpublished input chosen by the project (``why`` says on what grounds)."""
    return Input(name, value, unit, "assumption", why)


def fitted(name: str, value: Any, unit: str, *, on: str, how: str) -> Input:
    """An input solved for or chosen from the figure ``on`` (``how`` says how)."""
    return Input(name, value, unit, _FITTED + on, how)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Model values over the plausible range of unpublished inputs.

    Attributes:
        names: the swept inputs (each also listed, with its range, among the row's inputs).
        points: the input values of each point, one tuple per point.
        values: the model value at each point (same unit as the row).
    """

    names: tuple[str, ...]
    points: tuple[tuple, ...]
    values: tuple

    def __post_init__(self):
        if len(self.points) != len(self.values) or not self.points:
            raise MarkovsimError(f"Sweep over {self.names}: {len(self.points)} points and "
                                 f"{len(self.values)} values; expected the same, non-zero number")


def sweep(fn: Callable[..., Any], **axes: Sequence) -> Sweep:
    """Evaluate ``fn(**point)`` on the product of ``axes`` (keyword name -> values)."""
    names = tuple(axes)
    points = tuple(itertools.product(*axes.values()))
    return Sweep(names, points, tuple(fn(**dict(zip(names, p))) for p in points))


@dataclasses.dataclass(frozen=True)
class ModelValue:
    """What a script computes for one figure (never a status).

    Attributes:
        key: the figure's key in the expectations file.
        model: the model value in the expectation's unit (a list for a chart); ``None``
            when the figure is not modelled.
        unit: the unit of ``model`` (must equal the expectation's).
        inputs: every input, with its provenance.
        sweep: the model over the plausible range of unpublished inputs, if any.
        mechanism: the mechanism believed to cause a disagreement with the figure (what the
            model lacks or the figure counts differently); required when no point agrees and
            the sweep does not settle it.
        note: how the value is computed and what it shows.
        quantity: what the model computes, when it says more than the expectation's quantity.
        interval: for a prediction, its prediction interval: ``(low, high)`` for one number,
            one ``(low, high)`` per element for a list.
        level: the interval's level (e.g. 0.9).
    """

    key: str
    model: Any
    unit: str
    inputs: Sequence[Input] = ()
    sweep: Sweep | None = None
    mechanism: str = ""
    note: str = ""
    quantity: str = ""
    interval: Any = None
    level: float | None = None


# --------------------------------------------------------------------------- expectations


@dataclasses.dataclass(frozen=True)
class Expectation:
    """One published figure and how close a model value must come (see the file's header)."""

    key: str
    id: str
    source: str
    quote: str
    scope: str
    quantity: str
    unit: str
    kind: str
    check: str
    reason: str
    value: Any = None
    tol: Any = None
    low: float | None = None
    high: float | None = None
    at: Any = None
    original: str = ""
    check_against: str = ""

    def holds(self, model: Any) -> bool:
        """Whether ``model`` agrees with the figure (every element, for a chart)."""
        c = self.check
        if c == "none":
            raise MarkovsimError(f"{self.key}: a {self.kind} has nothing to compare")
        if isinstance(self.value, list) and c in ("abs", "rel"):
            if not isinstance(model, (list, tuple)) or len(model) != len(self.value):
                raise MarkovsimError(f"{self.key}: model value {model!r} is not a list of {len(self.value)} values")
            tols = self.tol if isinstance(self.tol, list) else [self.tol] * len(self.value)
            return all(_holds1(c, float(m), float(v), float(t), None, None)
                       for m, v, t in zip(model, self.value, tols))
        if isinstance(model, (list, tuple)):
            raise MarkovsimError(f"{self.key}: model value {model!r} is a list; expected one number")
        v = None if isinstance(self.value, list) else self.value
        return _holds1(c, float(model), v, self.tol, self.low, self.high)

    def tolerance_text(self) -> str:
        """The tolerance in words: ``+-0.01``, ``[0.29, 0.42]``, ``> 24``, ..."""
        c = self.check
        if c == "abs":
            return "+-" + (_fmt(self.tol) if not isinstance(self.tol, list) else "[" + ", ".join(map(_fmt, self.tol)) + "]")
        if c == "rel":
            return f"+-{100 * self.tol:g} %"
        if c == "interval":
            return f"[{_fmt(self.low)}, {_fmt(self.high)}]"
        if c == "above":
            return f"> {_fmt(self.value)}"
        if c == "below":
            return f"< {_fmt(self.value)}"
        return "-"


def _holds1(check, m, v, tol, low, high) -> bool:
    if not math.isfinite(m):
        return False
    if check == "abs":
        return abs(m - v) <= tol
    if check == "rel":
        return abs(m / v - 1.0) <= tol
    if check == "interval":
        return low <= m <= high
    if check == "above":
        return m > v
    if check == "below":
        return m < v
    raise MarkovsimError(f"check={check!r}: expected one of {CHECKS}")


_REQUIRED = ("key", "id", "source", "quote", "scope", "quantity", "unit", "kind", "check", "reason")


def load_expectations(path: Path | None = None) -> dict[str, Expectation]:
    """Read and check the expectations file (default: ``expectations.toml`` beside the scripts)."""
    path = Path(path) if path else _default_dir() / "expectations.toml"
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise MarkovsimError(f"expectations file {path}: cannot be read ({e})") from e
    out: dict[str, Expectation] = {}
    for i, f in enumerate(doc.get("figure", [])):
        where = f"{path.name}: figure[{i}] ({f.get('key', '?')})"
        missing = [k for k in _REQUIRED if not f.get(k)]
        if missing:
            raise MarkovsimError(f"{where}: missing {', '.join(missing)}")
        unknown = set(f) - set(_REQUIRED) - {"value", "tol", "low", "high", "at", "original", "check_against"}
        if unknown:
            raise MarkovsimError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        e = Expectation(**f)
        if e.kind not in KINDS:
            raise MarkovsimError(f"{where}.kind={e.kind!r}: expected one of {KINDS}")
        if e.check not in CHECKS:
            raise MarkovsimError(f"{where}.check={e.check!r}: expected one of {CHECKS}")
        if (e.kind == "figure") == (e.check == "none"):
            raise MarkovsimError(f"{where}: kind={e.kind!r} with check={e.check!r}; a figure needs a check, "
                                 "a scenario, qualitative claim or prediction has none")
        if (e.kind == "prediction") != bool(e.check_against):
            raise MarkovsimError(f"{where}: kind={e.kind!r} with check_against={e.check_against!r}; a prediction "
                                 "names the held-back data that will check it (check_against), nothing else does")
        need = {"abs": ("value", "tol"), "rel": ("value", "tol"), "interval": ("low", "high"),
                "above": ("value",), "below": ("value",), "none": ()}[e.check]
        if any(getattr(e, n) is None for n in need):
            raise MarkovsimError(f"{where}: check={e.check!r} needs {', '.join(need)}")
        if e.key in out:
            raise MarkovsimError(f"{where}: key {e.key!r} appears twice")
        if not (e.key == e.id or e.key.startswith(e.id + "/")):
            raise MarkovsimError(f"{where}: key {e.key!r} must be the id {e.id!r} or start with {e.id + '/'!r}")
        out[e.key] = e
    if not out:
        raise MarkovsimError(f"expectations file {path}: no [[figure]] entries")
    return out


# --------------------------------------------------------------------------- statuses


def derive_status(expectation: Expectation, value: ModelValue) -> tuple[str, str]:
    """The status of one row and the reason in words (see the module docstring)."""
    key = expectation.key
    fitted_here = [i.name for i in value.inputs if i.fitted_on == key]
    if value.model is None and value.sweep is None:
        return "not-yet", "not modelled"
    if not value.inputs:
        raise MarkovsimError(f"{key}: a model value without inputs; list every input with its provenance")
    if expectation.kind == "prediction":
        if value.interval is None or value.level is None:
            raise MarkovsimError(f"{key}: a prediction without its prediction interval (ModelValue.interval, .level)")
        return "to-check", f"a prediction, to be checked against {expectation.check_against}"
    if value.interval is not None:
        raise MarkovsimError(f"{key}: a prediction interval on a {expectation.kind}; only a prediction carries one")
    if expectation.kind != "figure":
        return "what-if", f"a {expectation.kind}: no published number to compare"
    if fitted_here:
        return "calibrated", f"fitted on this figure: {', '.join(fitted_here)}"
    points = ([value.model] if value.model is not None else []) + list(value.sweep.values if value.sweep else [])
    hits = [expectation.holds(p) for p in points]
    n = len(points)
    if all(hits):
        where = "the model value is" if n == 1 else f"all {n} model values are"
        if all(i.provenance == "cited" for i in value.inputs):
            return "reproduced", f"{where} within tolerance, every input cited"
        return "matches-with-assumption", f"{where} within tolerance, with stated assumptions"
    if any(hits):
        return "matches-with-assumption", (f"{sum(hits)} of {n} model values are within tolerance: the figure holds "
                                           "for part of the plausible range only")
    where = "the model value is not" if n == 1 else f"none of the {n} model values is"
    if value.mechanism:
        return "miss", f"{where} within tolerance; believed mechanism stated"
    if value.sweep is not None:
        return "inconsistent", f"{where} within tolerance over the sweep of {', '.join(value.sweep.names)}"
    raise MarkovsimError(
        f"{key}: the model value lies outside the tolerance and the script names neither the mechanism "
        "believed to cause it (ModelValue.mechanism) nor a sweep over the plausible inputs (ModelValue.sweep)")


@dataclasses.dataclass(frozen=True)
class Row:
    """One figure against the model: the expectation, the model value and the derived status."""

    key: str
    id: str
    quantity: str
    scope: str
    reported: Any
    tolerance: str
    model: Any
    unit: str
    status: str
    why: str
    inputs: Sequence[Input] = ()
    sweep: Sweep | None = None
    band: tuple | None = None
    mechanism: str = ""
    note: str = ""
    quote: str = ""
    original: str = ""
    source: str = ""
    reason: str = ""
    kind: str = "figure"
    tested_on: tuple = ()
    script: str = ""
    interval: Any = None
    level: float | None = None
    check_against: str = ""

    def provenance_counts(self) -> dict[str, int]:
        """How many inputs are cited, assumed and fitted."""
        out = {"cited": 0, "assumption": 0, "fitted": 0}
        for i in self.inputs:
            out["fitted" if i.fitted_on else i.provenance] += 1
        return out

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["inputs"] = [dataclasses.asdict(i) for i in self.inputs]
        d["sweep"] = None if self.sweep is None else {
            "names": list(self.sweep.names), "points": [list(p) for p in self.sweep.points],
            "values": list(self.sweep.values)}
        return d


def _band(value: ModelValue):
    pts = ([value.model] if value.model is not None else []) + list(value.sweep.values if value.sweep else [])
    if not value.sweep or any(isinstance(p, (list, tuple)) for p in pts):
        return None
    finite = [float(p) for p in pts if math.isfinite(float(p))]
    return (min(finite), max(finite)) if finite else None


def _check_value(e: Expectation, v: ModelValue) -> None:
    if v.unit != e.unit:
        raise MarkovsimError(f"{v.key}: model value in {v.unit!r}, but the expectation's unit is {e.unit!r}")
    for p in ([v.model] if v.model is not None else []) + list(v.sweep.values if v.sweep else []):
        for x in (p if isinstance(p, (list, tuple)) else [p]):
            if isinstance(x, (int, float)) and math.isnan(x):
                raise MarkovsimError(f"{v.key}: model value is NaN")
    if v.interval is not None:
        many = isinstance(v.model, (list, tuple))
        pairs = list(v.interval) if many else [v.interval]
        models = list(v.model) if many else [v.model]
        if len(pairs) != len(models) or any(len(p) != 2 for p in pairs):
            raise MarkovsimError(f"{v.key}: interval {v.interval!r} does not match the model value {v.model!r}: "
                                 "expected (low, high), one per element for a list")
        for m, (lo, hi) in zip(models, pairs):
            if any(math.isnan(float(x)) for x in (m, lo, hi)) or not float(lo) <= float(m) <= float(hi):
                raise MarkovsimError(f"{v.key}: interval [{lo}, {hi}] does not hold its median {m}")
        if not (v.level is not None and 0 < v.level < 1):
            raise MarkovsimError(f"{v.key}: level={v.level!r}; expected the interval's level in (0, 1)")


def _make_rows(values: Sequence[tuple[str, ModelValue]], expectations: dict[str, Expectation], *,
               complete: bool) -> list[Row]:
    seen: dict[str, str] = {}
    for script, v in values:
        if v.key not in expectations:
            raise MarkovsimError(f"{script}: figure key {v.key!r} is not in the expectations file")
        if v.key in seen:
            raise MarkovsimError(f"figure {v.key!r} computed twice ({seen[v.key]} and {script}); one row per figure")
        seen[v.key] = script
        for i in v.inputs:
            if i.fitted_on and i.fitted_on not in expectations:
                raise MarkovsimError(f"{v.key}: input {i.name!r} is fitted on {i.fitted_on!r}, not a figure key")
    if complete:
        missing = [k for k in expectations if k not in seen]
        if missing:
            raise MarkovsimError(f"no script computes the figure(s) {', '.join(missing)}")
    users: dict[str, list[str]] = {}
    for _, v in values:
        for on in {i.fitted_on for i in v.inputs if i.fitted_on and i.fitted_on != v.key}:
            users.setdefault(on, []).append(v.key)
    rows = []
    for script, v in values:
        e = expectations[v.key]
        _check_value(e, v)
        status, why = derive_status(e, v)
        tested = tuple(users.get(v.key, ()))
        if status == "calibrated":
            if not tested and complete:
                raise MarkovsimError(f"{v.key}: an input is fitted on this figure but no other row uses it: "
                                     "a fitted value must be tested on another figure")
            why += "; tested on " + (", ".join(tested) if tested else "rows not in this selection")
        rows.append(Row(key=v.key, id=e.id, quantity=v.quantity or e.quantity, scope=e.scope, reported=e.value,
                        tolerance=e.tolerance_text(), model=v.model, unit=e.unit, status=status, why=why,
                        inputs=tuple(v.inputs), sweep=v.sweep, band=_band(v), mechanism=v.mechanism, note=v.note,
                        quote=e.quote, original=e.original, source=e.source, reason=e.reason, kind=e.kind,
                        tested_on=tested, script=script, interval=v.interval, level=v.level,
                        check_against=e.check_against))
    order = {k: n for n, k in enumerate(expectations)}
    return sorted(rows, key=lambda r: order[r.key])


# --------------------------------------------------------------------------- model files


_LINE = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*(?:#\s*(.*))?$')
_HEADER = re.compile(r'^\s*(\[\[?)\s*([A-Za-z0-9_.]+)\s*\]\]?\s*$')
_STRUCTURAL = {"name", "kind", "scope", "component", "effect", "blast_radius", "faults", "workload", "hardware"}


def _provenance(comment: str) -> tuple[str, str]:
    c = comment.strip()
    if not c:
        return "assumption", "no source stated in the file"
    low = c.lower()
    if "assumption" in low or low.startswith("derived") or "(derived)" in low:
        return "assumption", c
    return "cited", c


def inputs_from_model_file(path: str | Path, *, root: str | Path | None = None, fields: Sequence[str] | None = None,
                           taken_from: dict[str, str] | None = None, data_fits: dict[str, str] | None = None,
                           summary: bool = False) -> list[Input]:
    """The inputs of a model file (TOML) with the provenance its comments give.

    Every field's comment says ``source: ...`` (or names a public source: cited),
    ``assumption: ...`` or ``derived: ...`` (our arithmetic or reading: an assumption); a
    number without a comment counts as an assumption. Field names read ``table.key`` or
    ``table[element name].key``.

    Args:
        path: the model file.
        root: directory the file's name is given relative to (default: its parent's parent).
        fields: keep only fields whose name starts with one of these.
        taken_from: field name -> figure key for fields set from a published figure
            (they become ``fitted-on:KEY``).
        data_fits: marker -> public data set: a field whose comment contains the marker
            (e.g. ``"InfiniteHBD fit"``) was fitted by maximum likelihood on that data set,
            not on any figure, and counts as cited to it.
        summary: one input per provenance class (plus one per fitted field), with ``file``
            set so the report lists every field; else one input per field.
    """
    path = Path(path)
    rel = str(path.relative_to(Path(root))) if root else f"models/{path.parent.name}/{path.name}"
    taken_from = dict(taken_from or {})
    table, element, found, names = "", "", [], set()
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        h = _HEADER.match(line)
        if h:
            table, element = h.group(2), ""
            continue
        m = _LINE.match(line)
        if not m:
            continue
        key, value, comment = m.group(1), m.group(2), m.group(3) or ""
        if key == "name" and table:
            element = value.strip('"')
        if key in _STRUCTURAL and not comment:
            continue
        name = (f"{table}[{element}].{key}" if element else f"{table}.{key}") if table else key
        names.add(name)
        if fields is not None and not any(name.startswith(f) for f in fields):
            continue
        prov, src = _provenance(comment)
        data = [d for marker, d in (data_fits or {}).items() if marker in comment]
        if data:
            prov, src = "cited", f"fitted on {data[0]} ({comment})"
        if name in taken_from:
            prov, src = _FITTED + taken_from[name], f"set from that figure ({src})"
        found.append(Input(f"{rel}: {name}", value, "", prov, src, file=rel))
    if set(taken_from) - names:
        raise MarkovsimError(f"{rel}: taken_from names field(s) not in the file: {', '.join(set(taken_from) - names)}")
    if not summary:
        return found
    out = []
    fit_on_data = {n: i for n, i in ((i.name, i) for i in found) if i.source.startswith("fitted on ")}
    for prov in ("cited", "assumption"):
        group = [i for i in found if i.provenance == prov and i.name not in fit_on_data]
        if group:
            out.append(Input(f"{rel} ({len(group)} {prov} fields)", len(group), "fields", prov,
                             "each field listed under 'Model files' at the end of the report", file=rel))
    for data in dict.fromkeys((data_fits or {}).values()):
        group = tuple(n.split(": ", 1)[1] for n, i in fit_on_data.items() if i.source.startswith(f"fitted on {data}"))
        if group:
            out.append(Input(f"{rel} ({len(group)} fields fitted on a public data set)", len(group), "fields", "cited",
                             f"fitted on {data}; each field listed under 'Model files'", file=rel, fields=group))
    return out + [dataclasses.replace(i, file=rel) for i in found if i.fitted_on]


# --------------------------------------------------------------------------- runner


def _default_dir() -> Path:
    return shipped_dir("paper_repro")   # package data in a wheel, the top-level folder in a checkout


def find_scripts(directory: Path | None = None) -> dict[str, Path]:
    """Map every reproduction script's name to its path (files starting with ``_`` are helpers)."""
    directory = Path(directory) if directory else _default_dir()
    if not directory.is_dir():
        raise MarkovsimError(f"paper_repro directory {directory} not found")
    return {p.stem: p for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"paper_repro_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))  # the scripts' shared helpers (paper_repro/_*.py)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def script_ids(directory: Path | None = None) -> dict[str, list[str]]:
    """Map each script name to the seed ids it covers."""
    return {name: list(_load(path).IDS) for name, path in find_scripts(directory).items()}


def run_reproductions(selection: Sequence[str], out_dir: Path, directory: Path | None = None,
                      *, log=print, progress=None) -> list[Row]:
    """Run the scripts covering ``selection`` (ids, figure keys, script names or ``all``) and
    derive every row's status from the expectations file in the scripts' directory;
    ``progress(done, total)`` is called after each script (e.g. a progress bar)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    directory = Path(directory) if directory else _default_dir()
    expectations = load_expectations(directory / "expectations.toml")
    modules = {name: _load(path) for name, path in find_scripts(directory).items()}
    wanted = set(selection)
    known = {i for m in modules.values() for i in m.IDS} | set(expectations)
    unknown = [s for s in wanted if s != "all" and s not in modules and s not in known]
    if unknown:
        raise MarkovsimError(
            f"unknown reproduction id(s) {', '.join(sorted(unknown))}; see `markovsim repro --list`")
    wanted_ids = {expectations[s].id if s in expectations else s for s in wanted}
    values: list[tuple[str, ModelValue]] = []
    chosen = {name: module for name, module in modules.items()
              if "all" in wanted or name in wanted or wanted_ids & set(module.IDS)}
    for done, (name, module) in enumerate(chosen.items(), 1):
        t0 = time.perf_counter()
        got = module.run(out_dir)
        if log:
            log(f"[{name}] {len(got)} figures in {time.perf_counter() - t0:.1f} s")
        for v in got:
            if not isinstance(v, ModelValue):
                raise MarkovsimError(f"paper_repro/{name}.py returned {type(v).__name__}; expected ModelValue")
            values.append((f"paper_repro/{name}.py", v))
        if progress is not None:
            progress(done, len(chosen))
    rows = _make_rows(values, expectations, complete="all" in wanted)
    if "all" in wanted:
        return rows
    return [r for r in rows if r.script[len("paper_repro/"):-3] in wanted or r.id in wanted or r.key in wanted]


# --------------------------------------------------------------------------- report


def status_counts(rows: Sequence[Row]) -> dict[str, int]:
    """Rows per status, in the order of :data:`STATUSES`."""
    return {s: sum(r.status == s for r in rows) for s in STATUSES}


def _fmt(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e6):
            return f"{v:.4g}"
        return f"{v:.3e}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _model_text(r: Row) -> str:
    if r.model is None and r.band is None:
        return "-"
    if r.interval is not None and not isinstance(r.model, (list, tuple)):
        return f"{_fmt(r.model)} [{_fmt(r.interval[0])}, {_fmt(r.interval[1])}]"
    text = _fmt(r.model) if r.model is not None else ""
    if r.band is not None:
        text += f" ({_fmt(r.band[0])} to {_fmt(r.band[1])})" if text else f"{_fmt(r.band[0])} to {_fmt(r.band[1])}"
    return text


def _reported_text(r: Row) -> str:
    if r.kind == "qualitative":
        return "(no number)"
    if r.kind == "prediction":
        return "(prediction)"
    if r.kind == "scenario":
        return "(target " + _fmt(r.reported) + ")" if r.reported is not None else "(scenario)"
    return f"{_fmt(r.reported)} {r.tolerance}" if r.tolerance.startswith("+-") else r.tolerance


def format_table(rows: Sequence[Row]) -> str:
    """A plain-text table (key, reported and tolerance, model with its band, unit, status) and the summary."""
    head = ("figure", "reported", "model (band)", "unit", "status")
    body = [(r.key, _reported_text(r), _model_text(r), r.unit, r.status) for r in rows]
    widths = [min(max([len(h)] + [len(b[i]) for b in body]), cap) for i, (h, cap) in
              enumerate(zip(head, (26, 26, 30, 14, 23)))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c)[:w].ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines + ["", summary_line(rows)])


def summary_line(rows: Sequence[Row]) -> str:
    """``Summary: n reproduced, n matches-with-assumption, ...`` over every status."""
    return "Summary: " + ", ".join(f"{n} {s}" for s, n in status_counts(rows).items())


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        return _json_safe(x.item())
    if hasattr(x, "tolist"):
        return _json_safe(x.tolist())
    return x


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _sweep_md(r: Row, e_holds: Callable[[Any], bool] | None) -> list[str]:
    s = r.sweep
    out = [f"- sweep over {', '.join(s.names)} ({len(s.points)} points):", ""]
    if e_holds is not None:
        hits = [p for p, v in zip(s.points, s.values) if e_holds(v)]
        if hits and len(hits) < len(s.points):
            where = "; ".join(f"{name} in {{{', '.join(_fmt(x) for x in dict.fromkeys(p[k] for p in hits))}}}"
                              for k, name in enumerate(s.names))
            out[0] = out[0][:-1] + f"; within tolerance at {len(hits)} points, with {where}:"
    out.append("  | " + " | ".join(s.names) + f" | model [{r.unit}] | within |")
    out.append("  |" + "---|" * (len(s.names) + 2))
    step = max(1, math.ceil(len(s.points) / 40))
    for p, v in list(zip(s.points, s.values))[::step]:
        ok = "-" if e_holds is None else ("yes" if e_holds(v) else "no")
        out.append("  | " + " | ".join(_md(_fmt(x)) for x in p) + f" | {_md(_fmt(v))} | {ok} |")
    if step > 1:
        out.append(f"  (every {step}th point of {len(s.points)} shown)")
    return out + [""]


def _interval_md(r: Row, e: Expectation | None) -> list[str]:
    level = f"{r.level:.0%}" if r.level is not None else "?"
    if not isinstance(r.model, (list, tuple)):
        return [f"- prediction: median {_fmt(r.model)} {r.unit}, {level} prediction interval "
                f"[{_fmt(r.interval[0])}, {_fmt(r.interval[1])}]; to be checked against {r.check_against}"]
    names = list(e.at) if e is not None and isinstance(e.at, list) else list(range(len(r.model)))
    out = [f"- prediction, median and {level} prediction interval per element; to be checked against "
           f"{r.check_against}:", "", f"  | {_md(r.quantity.split(':')[0])} | median [{r.unit}] | interval |",
           "  |---|---|---|"]
    out += [f"  | {_md(n)} | {_fmt(m)} | [{_fmt(lo)}, {_fmt(hi)}] |"
            for n, m, (lo, hi) in zip(names, r.model, r.interval)]
    return out + [""]


def write_report(rows: Sequence[Row], out_dir: Path, *, expectations: dict[str, Expectation] | None = None,
                 model_root: Path | None = None, validations: Sequence[tuple[str, Any, str | None]] = ()
                 ) -> tuple[Path, Path]:
    """Write ``results.json`` and ``report.md`` into ``out_dir``.

    ``validations``: ``(title, report, plot file or None)`` per validation suite run with
    the reproductions (a :class:`~markovsim.validate.ValidationReport`); each becomes a
    section "Validation: <title>" with its targets, verdicts and rows, and
    ``validation.json`` holds their ``to_dict()``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if expectations is None:
        try:
            expectations = load_expectations()
        except MarkovsimError:
            expectations = {}
    results = out_dir / "results.json"
    results.write_text(json.dumps([_json_safe(r.to_dict()) for r in rows], indent=2) + "\n")
    md = ["# markovsim reproduction report", "",
          "Each row sets a figure reported in the source articles (seed id, see "
          "`shared/reference/seed_figures.md`; public inputs, `public_inputs.md`) against the model's value. "
          "The figure, its scope and its tolerance come from `paper_repro/expectations.toml`, written before "
          "the model ran; the scripts compute model values only; the status is derived by `markovsim.repro` "
          "from the tolerance, the model values and the provenance of every input.", "",
          "| status | meaning |", "|---|---|",
          "| reproduced | within tolerance, every input cited |",
          "| matches-with-assumption | within tolerance with stated assumptions, or for part of a swept plausible range |",
          "| calibrated | an input was fitted on this figure: not evidence; the rows using the fitted value are named |",
          "| miss | outside tolerance; the believed mechanism is stated |",
          "| inconsistent | no point of a sweep over the plausible inputs is within tolerance |",
          "| what-if | no published number to compare (scenario, target, qualitative claim) |",
          "| to-check | a prediction with its interval, for held-back data that will check it; not evidence yet |",
          "| not-yet | not modelled |", "",
          "**" + summary_line(rows) + "**", "",
          "| figure | scope | reported | model (band) | unit | inputs c/a/f | status |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r.provenance_counts()
        md.append(f"| [{r.key}](#{_anchor(r.key)}) | {_md(r.scope.split(':')[0])} | {_md(_reported_text(r))} | "
                  f"{_md(_model_text(r))} | {_md(r.unit)} | {c['cited']}/{c['assumption']}/{c['fitted']} | {r.status} |")
    md += ["", "Inputs c/a/f: cited / assumption / fitted (on this or another figure).", "", "## Details", ""]
    files = {}
    for r in rows:
        e = expectations.get(r.key)
        md.append(f"### {r.key}")
        md.append("")
        md.append(f"- claim: \"{r.quote}\"" + (f" (original: {r.original})" if r.original else "") +
                  f" [{r.source}]")
        md.append(f"- scope: {r.scope}")
        if r.kind == "figure":
            md.append(f"- figure: {_fmt(r.reported)} {r.unit}, tolerance {r.tolerance} ({r.reason})")
        else:
            md.append(f"- {r.kind}: {r.reason}")
        md.append(f"- model: {r.quantity}: {_model_text(r)} {r.unit if r.model is not None or r.band else ''}")
        if r.interval is not None:
            md += _interval_md(r, e)
        md.append(f"- **{r.status}**: {r.why}")
        if r.mechanism and r.status == "miss":
            md.append(f"- believed mechanism: {r.mechanism}")
        if r.note:
            md.append(f"- {r.note}")
        if r.tested_on and r.status != "calibrated":
            md.append(f"- inputs taken from this figure are used by: {', '.join(r.tested_on)}")
        if r.sweep is not None:
            holds = e.holds if (e is not None and e.kind == "figure") else None
            md += _sweep_md(r, holds)
        md.append(f"- script: `{r.script}`")
        if r.inputs:
            md += ["- inputs:", "", "  | input | value | provenance | source |", "  |---|---|---|---|"]
            for i in r.inputs:
                md.append(f"  | {_md(i.name)} | {_md(_fmt(i.value))} {_md(i.unit)} | {i.provenance} | {_md(i.source)} |")
                if i.file:
                    files.setdefault(i.file, {})
                    if i.name.startswith(i.file + ": "):   # one field, with the provenance the row gives it
                        files[i.file][i.name] = (i.provenance, lambda comment, s=i.source: s)
                    for field in i.fields:                  # fields a summary input stands for
                        files[i.file][f"{i.file}: {field}"] = (
                            i.provenance, lambda comment, s=i.source.split(";")[0]: f"{s} ({comment})")
            md.append("")
        md.append("")
    if files:
        md += ["## Model files", "", "Every field of the model files the rows use, with the provenance its "
               "comment gives (`source:` cited; `assumption:` or `derived:` an assumption).", ""]
        root = Path(model_root) if model_root else _default_dir().parent
        for f in files:
            path = root / Path(f)
            if not path.is_file():
                continue
            md += [f"### {f}", "", "| field | value | provenance | comment |", "|---|---|---|---|"]
            for i in inputs_from_model_file(path, root=root):
                prov, text = files[f].get(i.name, (i.provenance, lambda comment: comment))
                comment = text(i.source)
                md.append(f"| {_md(i.name.split(': ', 1)[1])} | {_md(i.value)} | {prov} | {_md(comment)} |")
            md.append("")
    embedded = set()
    for title, report, plot in validations:
        md += [f"## Validation: {title}", "",
               f"`markovsim validate {Path(report.path).name}`: the model against published runs, "
               "with the targets the case file states before the model runs; every verdict is computed "
               "from the rows.", "", report.to_markdown(plot=plot), ""]
        if plot:
            embedded.add(plot)
    if validations:
        from .training._evidence import evidence_markdown

        md += ["## Validation: the evidence behind each answer", "",
               "The holdout rows of every suite grouped as `markovsim train` and `markovsim plan` quote them "
               "(`evidence:` and `linearity evidence:` lines; `models/cases/holdout_evidence.json`, which a test "
               "recomputes from the suites): by "
               "hardware preset, dense or MoE, and GEMM precision for step times and rates (the speed error "
               "positive where the model is faster than the run), by hardware preset and batch rule for "
               "linearity (the gap positive where the run lost more than the model says).", "",
               *evidence_markdown(), ""]
        (out_dir / "validation.json").write_text(json.dumps(
            {title: _json_safe(report.to_dict()) for title, report, _ in validations}, indent=2) + "\n")
    pngs = sorted(p.name for p in out_dir.glob("*.png") if p.name not in embedded)
    if pngs:
        md += ["## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    report = out_dir / "report.md"
    report.write_text("\n".join(md) + "\n")
    return results, report


def _anchor(key: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", key.lower()).replace(" ", "-")
