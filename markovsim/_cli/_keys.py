"""``markovsim keys``: the reference of every model-file key, generated from the readers.

Each reader reads its file through a strict :class:`markovsim._io.Table` that describes
every key it reads (kind and so unit, default, range, a one-line meaning). This command
reads every shipped preset (and a job, a case's ``[linearity]`` table) with those
descriptions recorded and prints them; ``docs/reference/model-file-keys.md`` is its output
(a test fails when the page is stale). A key a reader starts to read appears here as soon
as a shipped file or the examples below use it.
"""

from __future__ import annotations

import argparse
import sys

from .._lazy import lazy_module
from .._io import UNITS, KeyInfo, presets, read_document, recording_keys, resolve

av = lazy_module("markovsim.availability")  # imported when the command runs, not for every command
inf = lazy_module("markovsim.inference")
tr = lazy_module("markovsim.training")

HELP = "print the reference of every model-file key (kind, unit, default, meaning)"

#: (schema, title, presets folder, reader of one preset: called through the lazy packages)
_FILES = (
    ("cluster", "Cluster files (`models/clusters/`)", "clusters", lambda p: av.load_cluster(p)),
    ("faults", "Fault catalogues (`models/faults/`)", "faults", lambda p: av.load_faults(p)),
    ("recovery", "Recovery plans (`models/recovery/`)", "recovery", lambda p: av.load_recovery(p)),
    ("job", "Job files (`markovsim goodput JOB.toml`, case kind `goodput`)", None, None),
    ("workload", "Workloads (`models/workloads/`)", "workloads", lambda p: tr.load_workload(p)),
    ("hardware", "Hardware (`models/hardware/`)", "hardware", lambda p: tr.load_hardware(p)),
    ("plan", "Parallel plans (`models/plans/`, case kind `train`)", "plans", lambda p: tr.load_plan(p)),
    ("train case", "The `[linearity]` table of a `train` case", None, None),
    ("inference", "Inference models (`models/inference/`, case kind `infer`)", "inference",
     lambda p: inf.load_inference_model(p)),
)
_KIND_NOTE = {"time": "time", "rate": "rate", "data": "data size", "bandwidth": "bandwidth", "compute": "compute rate",
              "ratio": "ratio"}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("keys", help=HELP, description=HELP + ". Markdown; docs/reference/model-file-keys.md "
                                                              "is this output.")
    return p


def record() -> dict[tuple[str, str], KeyInfo]:
    """Read every shipped preset (and the examples) with the key descriptions recorded."""
    with recording_keys() as found:
        for _, _, folder, load in _FILES:
            for name in presets(folder) if folder else ():
                load(name)
        clusters, recoveries = presets("clusters"), presets("recovery")
        av.job_from_document({"name": "example", "cluster": clusters[0], "recovery": recoveries[0], "cards": 8})
        plan = resolve(presets("plans")[0], folder="plans")
        doc = dict(read_document(plan))
        size = doc["dp"] * doc["tp"] * doc["pp"] * doc.get("cp", 1)
        for rule in ({"batch": "fixed-global"}, {"global_batches": [doc["global_batch"]] * 2}):
            doc["linearity"] = {"baseline": size, "cards": size, "jitter_cv": 0.0, **rule}
            tr.MODEL_KIND.evaluate_case(doc, where="example", base=plan.parent)
    return found


def _units_of(kind: str) -> str:
    units = [u for u in UNITS.get(kind, {}) if u]
    return f"{_KIND_NOTE[kind]} (`{'`, `'.join(units)}`)" if units else _KIND_NOTE.get(kind, kind)


def page() -> str:
    """The reference page (Markdown)."""
    found = record()
    lines = ["# Model-file keys", "",
             "Every key the model-file readers accept, generated from the readers themselves by "
             "`markovsim keys` (a test fails when this page is stale). Quantities are strings with a "
             "unit (`\"20 min\"`) or numbers under a key that carries the unit (`save_time_s = 120`); "
             "see [the units](../how-to/model-files.md#units). `[]` marks an array of tables "
             "(`[[tiers]]`). References to other files follow one rule: a bare name is a shipped "
             "preset, a path is relative to the file that holds it, a table is the document inline. "
             "A text key with a list of allowed values reads them in any case (`\"FP8\"` is `fp8`).",
             ""]
    for schema, title, _, _ in _FILES:
        keys = sorted((info for (s, _), info in found.items() if s == schema), key=lambda i: i.key)
        if not keys:
            continue
        lines += [f"## {title}", "", "| key | kind | default | allowed | meaning |", "|---|---|---|---|---|"]
        for info in keys:
            kind = _units_of(info.kind) if info.kind in UNITS else info.kind
            default = "required" if info.required else (f"`{info.default}`" if info.default else "optional")
            lines.append(f"| `{info.key}` | {kind} | {default} | {info.constraint.replace('|', '/')} | {info.doc} |")
        lines.append("")
    return "\n".join(lines)


def run(args) -> int:
    sys.stdout.write(page())
    return 0
