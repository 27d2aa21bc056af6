"""Reproduction rows and the runner behind ``markovsim repro``.

Each script in ``paper_repro/`` defines

* ``IDS``: the seed-figure ids it covers (``["S-HW-1", ...]``), and
* ``run(out_dir: pathlib.Path) -> list[Row]``: computes the rows (and writes its plots
  into ``out_dir``).

A :class:`Row` compares one reported figure with the model's value. Its ``status`` is one
of ``reproduced`` (the mechanism with cited inputs gives the figure within tolerance),
``explained`` (an assumption that produces it is named), ``inconsistent`` (the figure
cannot hold, with the reason) or ``not-yet``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from ._errors import MarkovsimError
from ._io import shipped_dir

__all__ = ["Input", "Row", "STATUSES", "find_scripts", "run_reproductions", "write_report", "format_table"]

STATUSES = ("reproduced", "explained", "inconsistent", "not-yet")


@dataclasses.dataclass(frozen=True)
class Input:
    """One model input: its value, unit and where it comes from (a seed id, a public
    input, or ``"assumption: why"``)."""

    name: str
    value: Any
    unit: str
    source: str


@dataclasses.dataclass(frozen=True)
class Row:
    """One reported figure against the model's value."""

    id: str
    quantity: str
    reported: Any
    model: Any
    unit: str
    tolerance: Any
    status: str
    inputs: Sequence[Input] = ()
    script: str = ""
    note: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise MarkovsimError(f"Row.status={self.status!r}: expected one of {STATUSES}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["inputs"] = [dataclasses.asdict(i) if dataclasses.is_dataclass(i) else dict(i) for i in self.inputs]
        return d


def _default_dir() -> Path:
    return shipped_dir("paper_repro")   # package data in a wheel, the top-level folder in a checkout


def find_scripts(directory: Path | None = None) -> dict[str, Path]:
    """Map every reproduction script's name to its path."""
    directory = Path(directory) if directory else _default_dir()
    if not directory.is_dir():
        raise MarkovsimError(f"paper_repro directory {directory} not found")
    return {p.stem: p for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")}


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"paper_repro_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def script_ids(directory: Path | None = None) -> dict[str, list[str]]:
    """Map each script name to the seed ids it covers."""
    return {name: list(_load(path).IDS) for name, path in find_scripts(directory).items()}


def run_reproductions(selection: Sequence[str], out_dir: Path, directory: Path | None = None,
                      *, log=print) -> list[Row]:
    """Run the scripts covering ``selection`` (seed ids, script names or ``all``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scripts = find_scripts(directory)
    modules = {name: _load(path) for name, path in scripts.items()}
    wanted = set(selection)
    chosen = []
    known_ids = {i for m in modules.values() for i in m.IDS}
    unknown = [s for s in wanted if s != "all" and s not in modules and s not in known_ids]
    if unknown:
        raise MarkovsimError(
            f"unknown reproduction id(s) {', '.join(sorted(unknown))}; see `markovsim repro --list`"
        )
    for name, module in modules.items():
        if "all" in wanted or name in wanted or wanted & set(module.IDS):
            chosen.append((name, module))
    rows: list[Row] = []
    for name, module in chosen:
        t0 = time.perf_counter()
        got = module.run(out_dir)
        if log:
            log(f"[{name}] {len(got)} rows in {time.perf_counter() - t0:.1f} s")
        for row in got:
            if not row.script:
                row = dataclasses.replace(row, script=f"paper_repro/{name}.py")
            if "all" in wanted or name in wanted or row.id in wanted:
                rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e6):
            return f"{v:.4g}"
        return f"{v:.3e}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def format_table(rows: Sequence[Row]) -> str:
    """A plain-text table of the rows (id, quantity, reported, model, unit, status)."""
    head = ("id", "quantity", "reported", "model", "unit", "status")
    body = [(r.id, r.quantity, _fmt(r.reported), _fmt(r.model), r.unit, r.status) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    widths[1] = min(widths[1], 60)
    widths[2] = min(widths[2], 24)
    widths[3] = min(widths[3], 24)
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        lines.append("  ".join(str(c)[:w].ljust(w) for c, w in zip(b, widths)))
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    lines.append("")
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


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


def write_report(rows: Sequence[Row], out_dir: Path) -> tuple[Path, Path]:
    """Write ``results.json`` and ``report.md`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.json"
    results.write_text(json.dumps([_json_safe(r.to_dict()) for r in rows], indent=2) + "\n")
    md = ["# markovsim reproduction report", "",
          "Each row compares a figure reported in the source articles (seed id, see "
          "`shared/reference/seed_figures.md`) with the value the model computes from a "
          "mechanism and cited inputs.", "",
          "| id | quantity | reported | model | unit | tolerance | status |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r.id} | {r.quantity} | {_fmt(r.reported)} | {_fmt(r.model)} | {r.unit} | "
                  f"{_fmt(r.tolerance)} | {r.status} |")
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    md += ["", "Summary: " + ", ".join(f"{n} {s}" for s, n in counts.items()), "", "## Details", ""]
    for r in rows:
        md.append(f"### {r.id}: {r.quantity}")
        md.append("")
        md.append(f"- reported: {_fmt(r.reported)} {r.unit}; model: {_fmt(r.model)} {r.unit}; "
                  f"tolerance: {_fmt(r.tolerance)}; **{r.status}**")
        if r.note:
            md.append(f"- {r.note}")
        md.append(f"- script: `{r.script}`")
        if r.inputs:
            md.append("- inputs:")
            for i in r.inputs:
                md.append(f"  - {i.name} = {_fmt(i.value)} {i.unit} (source: {i.source})")
        md.append("")
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    if pngs:
        md += ["## Plots", ""] + [f"![{p}]({p})" for p in pngs]
    report = out_dir / "report.md"
    report.write_text("\n".join(md) + "\n")
    return results, report
