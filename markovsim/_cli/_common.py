"""What every command shares: reading a model with its ``--set`` overrides, tables, JSON,
CSV and plot files, and the rule that no output overwrites data unless ``--force``."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

from .._errors import MarkovsimError, SpecError
from .._io import (Document, ModelKind, Override, annotate, apply_overrides, expand, parse_override, presets,
                   read_document, resolve)
from .._grid import check_output

SET_HELP = (
    "change a value of the model file before it is read: a dotted key path into the TOML "
    "document and a TOML literal (--set efficiency.compute=0.55, --set 'tiers.restart.restart_time=\"10 min\"'); "
    "a value that is not a TOML literal is taken as a string, so --set 'tiers.restart.restart_time=10 min' "
    "works too. [i] picks an element of an array of tables (levels[1].bandwidth). Files the model refers "
    "to are part of the document (--set workload.layers=60 on a plan). Repeatable; the model's reader "
    "checks the result as strictly as the file (unknown keys, missing units)")


# --------------------------------------------------------------------------- reading models


def overrides(sets: Sequence[str] | None) -> list[Override]:
    return [parse_override(s) for s in sets or ()]


def read_model(arg: str, kind: ModelKind, sets: Sequence[str] | None) -> tuple[Document, Path, list[Override]]:
    """The model document named on the command line (a path, or a bare preset name), with the
    files it refers to inlined (each read once) and the ``--set`` overrides applied."""
    path = resolve(arg, folder=kind.folder)
    return prepare(read_document(path), kind, sets), path, overrides(sets)


def named(arg: str, folders: Sequence[str]) -> Path:
    """A model named on the command line: a path, or a bare preset name in the first of
    ``folders`` that has it (an unknown bare name: the error lists the first folder's presets)."""
    for folder in folders:
        if arg in presets(folder):
            return resolve(arg, folder=folder)
    return resolve(arg, folder=folders[0])


def prepare(doc: Document, kind: ModelKind, sets: Sequence[str] | None) -> Document:
    """A document read from its file, with the files it refers to inlined and the overrides applied."""
    path = doc.origin
    expanded = expand(doc, kind.references, base=path.parent if path else None, where=str(path or kind.name))
    return apply_overrides(expanded, overrides(sets))


def load(arg: str, kind: ModelKind, reader: Callable[..., Any], sets: Sequence[str] | None):
    """``(model, path, overrides)``: the model file named on the command line, read by
    ``reader`` after the overrides (see :func:`read_model` and :func:`build`)."""
    doc, path, changes = read_model(arg, kind, sets)
    return build(reader, doc, str(path), path.parent, changes), path, changes


def build(reader: Callable[..., Any], doc: Document, where: str, base: Path | None, changes: Sequence[Override]):
    """``reader(doc, where=..., base=...)``; an unknown key that a ``--set`` introduced is
    pointed at in the error."""
    try:
        return reader(doc, where=where, base=base)
    except MarkovsimError as exc:
        raise annotate(exc, changes) from None


# --------------------------------------------------------------------------- text


def clean(x: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN and infinities to null."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if hasattr(x, "tolist"):
        return clean(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def print_json(payload: dict) -> None:
    print(json.dumps(clean(payload), indent=2, allow_nan=False))


def table(rows: Sequence[Sequence[str]], head: Sequence[str] | None = None, *, right: Sequence[int] = ()) -> str:
    """Plain-text columns; ``right``: indices of right-aligned columns."""
    allrows = ([tuple(head)] if head else []) + [tuple(r) for r in rows]
    widths = [max(len(r[i]) for r in allrows) for i in range(len(allrows[0]))]

    def line(r):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = []
    if head:
        out += [line(head), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f} %" if math.isfinite(x) else "n/a"


def duration(s: float) -> str:
    """Seconds in the largest fitting unit (s, min, h, d)."""
    if not math.isfinite(s):
        return "n/a"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(s) >= size:
            return f"{s / size:.4g} {unit}"
    return f"{s:.4g} s"


def with_overrides(changes: Sequence[Override]) -> list[str]:
    return ["with " + " ".join(f"--set {x.text}" for x in changes)] if changes else []


# --------------------------------------------------------------------------- files


def write_csv(path: str, head: Sequence[str], rows: Sequence[Sequence[Any]], *, force: bool) -> None:
    """A CSV file of ``rows`` under ``head`` (refused if the file exists, unless ``force``)."""
    target = Path(path)
    check_output(target, force=force, what="--csv")
    with target.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(head)
        writer.writerows([clean(list(r)) for r in rows])


def save_plot(path: str, draw: Callable[[Any], None], *, force: bool, panels: int = 1) -> None:
    """Draw a figure with ``draw(axes)`` (one Axes, or a list of ``panels``) and save it.

    Raises:
        SpecError: matplotlib is not installed (naming the extra to install).
    """
    target = Path(path)
    check_output(target, force=force, what="--plot")
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise SpecError(f"--plot {path}: plots need matplotlib, which is not installed; "
                        "pip install 'markovsim[plot]'") from None
    fig = Figure(figsize=(6.4 * panels if panels > 1 else 7.0, 4.2), layout="constrained")
    axes = fig.subplots(1, panels) if panels > 1 else fig.add_subplot()
    draw(list(axes) if panels > 1 else axes)
    try:
        fig.savefig(target)
    except ValueError as exc:   # an unknown extension
        raise SpecError(f"--plot {path}: {exc}") from None


def add_common(p: argparse.ArgumentParser, *, sets: bool = True, plot: bool = True, csv_file: bool = True) -> None:
    if sets:
        p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets", help=SET_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    if csv_file:
        p.add_argument("--csv", metavar="FILE", help="also write the numbers to a CSV file")
    if plot:
        p.add_argument("--plot", metavar="FILE", help="also draw a figure into FILE (.png, .pdf, .svg; "
                                                      "needs matplotlib: pip install 'markovsim[plot]')")
    p.add_argument("--force", action="store_true", help="overwrite output files that exist")


def efficiency_items(efficiency, overlaps: dict, written, stack: str = "",
                     default_stack: str = "default") -> list[tuple[str, object, bool]]:
    """``(key, value, is_default)`` of the [efficiency] values to show: the overlaps named in
    ``overlaps`` whose flag is true (the communication a plan has), the usable memory, and
    every override or extra cost that differs from its default, so the assumptions behind the
    numbers are on the screen. A value is the default when it is not among ``written`` (the
    keys a plan file set, a stack's among them: ``PlanSpec.efficiency_keys``). A ``stack``
    comes first: the one the plan names or, when it names none, the hardware's
    ``default_stack`` where that gives an overlap the plan uses and does not write (shown
    among the defaults)."""
    from ..training import SOFTWARE_STACKS, Efficiency

    supplies = set(SOFTWARE_STACKS[default_stack]["overlaps"]) & {k for k, on in overlaps.items() if on} - written
    stack_is_default = not stack and bool(supplies)
    stack = stack or (default_stack if stack_is_default else "")
    base = Efficiency()
    shown = [k for k, on in overlaps.items() if on] + ["usable_memory"]
    shown += [k for k in ("compute", "bandwidth", "data_loading_s", "comm_sm_fraction")
              if getattr(efficiency, k) != getattr(base, k)]
    return ([("stack", stack, stack_is_default)] if stack else []) + [(k, getattr(efficiency, k), k not in written)
                                                                      for k in shown]


def efficiency_text(items) -> str:
    """One line: ``efficiency: <the values set>; at their defaults: <the others>``."""
    def show(k, v, d):
        if k == "stack":
            return f"stack {v}" + (" (the hardware's default_stack)" if d else "")
        if k == "replica_overlap" and v is None:
            return f"{k} = dp_overlap"
        return f"{k.removesuffix('_s')} {v:g} s" if k.endswith("_s") else f"{k} {v:g}"

    chosen = [show(k, v, d) for k, v, d in items if not d]
    default = [show(k, v, d) for k, v, d in items if d]
    return ("efficiency: " + (", ".join(chosen) if chosen else "nothing set")
            + (f"; at their defaults: {', '.join(default)}" if default else ""))


def efficiency_json(items) -> dict:
    """``efficiency`` (key -> value) and ``efficiency_defaults`` (the keys at their
    defaults) of :func:`efficiency_items`, for --json."""
    return {"efficiency": {k: v for k, v, _ in items}, "efficiency_defaults": [k for k, _, d in items if d]}
