"""``markovsim sweep``: a model file evaluated over a grid of changed values, as a Dataset."""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import textwrap
from pathlib import Path
from typing import Mapping

import numpy as np

from .._errors import MarkovsimError, SpecError
from .._io import Override, annotate, apply_overrides, parse_variation, read_document
from .._grid import REASON_ATTRS, check_output, point_statuses, save_sweep, status_attrs
from .._lazy import lazy_module
from . import _common as c
from ._speed import progress_bar
from ._goodput import add_job_options, job_document

av = lazy_module("markovsim.availability")  # imported when the command runs, not for every command
_validate = lazy_module("markovsim.validate")

HELP = "evaluate a model file over a grid of changed values, written as an xarray Dataset"
_MAIN = {
    "train": ["step_time_s", "tokens_per_s", "mfu", "hfu", "pipeline_bubble_fraction", "memory_bytes", "fits"],
    "goodput": ["goodput", "availability", "interruptions_per_day", "job_mtbf_s", "optimal_checkpoint_interval_s",
                "goodput_at_optimal_interval"],
    "infer": ["decode_slo_availability", "decode_capacity_availability", "decode_request_availability",
              "prefill_slo_availability", "decode_served_tokens_per_s", "decode_downtime_per_month_s"],
}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "sweep", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Evaluate a model file's main outputs at every point of the grid spanned by the
            --vary axes and write an xarray Dataset: one dimension and coordinate per varied
            key, one variable per output (units in the name or the 'units' attribute), a
            'status' variable per point (0 ok, 1 an output is NaN or infinite, 2 the model
            refused the point's values, 3 it failed otherwise; markovsim.PointStatus) and a
            'reason' variable saying why. If every point fails, the command fails.

            The kind of model (train: plan files; infer: inference model files; goodput: job
            files, or a recovery/cluster file with --cluster/--recovery as for markovsim
            goodput) is told by the file's keys. The model file and the files it names are
            read once; each point is a change of that document in memory, read by the
            model's own strict reader, in this process or, with --dask, as tasks on a dask
            cluster (a local one, or the scheduler at ADDRESS).

            --vary KEY=START:STOP:NUM   NUM evenly spaced points from START to STOP, both included
            --vary KEY=V1,V2,...        the listed values
            KEY is a dotted path into the TOML document, as for --set. START/STOP/Vi may carry
            a unit: 10min:60min:6, '10 min:2 h:6' (written back in the first unit given). A bare
            number is in the unit the file writes the key in: if the file says
            restart_time = "20 min", then 5:20:4 means 5, 10, 15, 20 minutes; a key written as a
            plain number gets plain numbers, and integer keys (dp, instances) get integers (an
            error if the points are not whole). Coordinates are stored in that unit (attribute
            'units'). A key the file writes as a name, or leaves out, takes a list of names
            (--vary recompute=none,selective,full, --vary elementwise=fused,eager, --vary
            efficiency.stack=default,megatron-core) and a true/false key true,false: each point
            is read by the model's reader (a name it refuses fails that point), the coordinate
            holds the names (no 'units').

            --out FILE.nc writes netCDF (scipy engine, netCDF3); --out DIR.zarr a zarr store
            with a checksum per chunk (read it back with markovsim.open_sweep(DIR.zarr), which
            checks them, or xarray.open_zarr). An existing output is never overwritten unless
            --force is given. --plot draws the first main output against the first axis."""),
        epilog="example: markovsim sweep models/plans/pangu_ultra_135b_8k.toml --vary efficiency.compute=0.4:0.7:4 "
               "--vary dp=64,128 --out sweep.nc")
    p.add_argument("model", metavar="MODEL.toml", nargs="?", help="model file (or a bare name in models/<kind>/)")
    add_job_options(p)
    p.add_argument("--vary", action="append", required=True, metavar="KEY=START:STOP:NUM",
                   help="an axis of the grid (repeatable); see above")
    p.add_argument("--out", required=True, metavar="FILE", help="output: FILE.nc (netCDF) or DIR.zarr (zarr)")
    p.add_argument("--dask", nargs="?", const="local", metavar="ADDRESS",
                   help="evaluate the points on a dask cluster: a local one, or the scheduler at ADDRESS "
                        "(needs pip install 'markovsim[dist]')")
    c.add_common(p)
    return p


#: from this many points on, the points are solved by the compiled programs (shared by every
#: point of one model structure) instead of the numpy path: a goodput point costs ~0.2 s on the
#: numpy path and ~0.03 s compiled after a first point of ~3.9 s (2.7 s of XLA compile),
#: so the compile pays from about 22 points
COMPILED_FROM = 24


def evaluate_point(kind_name: str, doc: Mapping, where: str, base: Path | None, compiled: bool = False):
    """One grid point: ``(outputs, None)`` or ``(None, error)`` (a dask task, picklable);
    ``compiled``: through the compiled programs (``markovsim._backend.compiled_single``)."""
    from .._backend import compiled_single

    try:
        with compiled_single(compiled):  # (the outputs are computed when read: inside the block)
            outputs = _validate.MODEL_KINDS[kind_name].outputs(doc, where=where, base=base)
            return {k: float(v) for k, v in outputs.items()}, None
    except MarkovsimError as exc:
        return None, exc


def _client(address: str):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SpecError("--dask: needs dask.distributed; pip install 'markovsim[dist]'") from None
    if address == "local":
        return Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None))
    return Client(address)


def run(args) -> int:
    out = Path(args.out)
    if out.suffix not in (".nc", ".zarr"):
        raise SpecError(f"--out {args.out}: expected a file name ending in .nc (netCDF) or .zarr (zarr directory)")
    check_output(out, force=args.force, what="--out")
    if args.model is None and not (args.cluster and args.recovery):
        raise SpecError("no model file given (a MODEL.toml, or --cluster and --recovery for a goodput job)")
    path = c.named(args.model, ("plans", "inference", "recovery", "clusters")) if args.model is not None else None
    doc = read_document(path) if path is not None else {}
    if args.cluster or args.recovery or av.is_job(doc) or av.is_recovery(doc) or av.is_cluster(doc):
        kind = _validate.MODEL_KINDS["goodput"]
        template, label, base_dir, changes = job_document(args.model, args.cluster, args.recovery, None, args.sets,
                                                          read=doc if path is not None else None)
    else:
        kind = _detect(doc, path)
        template, changes = c.prepare(doc, kind, args.sets), c.overrides(args.sets)
        label, base_dir = str(path), path.parent
    variations = [parse_variation(v, template) for v in args.vary]
    keys = [v.key for v in variations]
    if len(set(keys)) != len(keys):
        raise SpecError(f"--vary: a key appears twice ({', '.join(keys)})")
    shape = tuple(len(v.written) for v in variations)
    n = math.prod(shape)
    indices = list(itertools.product(*(range(s) for s in shape)))
    labels = [", ".join(f"{v.key}={v.written[i]}" for v, i in zip(variations, index)) for index in indices]
    docs = [apply_overrides(template, [Override(v.path, v.written[i], f"{v.key}={v.written[i]}")
                                   for v, i in zip(variations, index)]) for index in indices]
    results = _evaluate(kind.name, docs, label, base_dir, labels, args)
    data: dict[str, np.ndarray] = {}
    errors = {}
    for index, name_of_point, (outputs, error) in zip(indices, labels, results):
        if error is not None:
            errors[index] = type(error)(f"{name_of_point}: {annotate(error, changes)}")
            continue
        for name, value in outputs.items():
            data.setdefault(name, np.full(shape, np.nan))[index] = value
    if len(errors) == n:
        first = next(iter(errors.values()))
        raise type(first)(f"every point failed; the first: {first}")
    for v in variations:  # an output named like a varied key (goodput's cards): keep one of them
        if v.key in data:
            grid = np.broadcast_to(np.reshape(v.coordinate, [-1 if d == v.key else 1 for d in keys]), shape)
            value = data.pop(v.key)
            if not (np.allclose(value, grid, rtol=1e-12) or np.isnan(value).all()):
                data[f"{v.key}_output"] = value
    names = sorted(data)
    status, reason = point_statuses(data, shape, errors)
    ds = _dataset(kind, variations, keys, data, status, reason, label, changes, args)
    save_sweep(ds, out, force=args.force)
    failed = int((status != 0).sum())
    if failed:
        first = reason[tuple(np.argwhere(status != 0)[0])]
        print(f"markovsim sweep: warning: {failed} of {n} points failed (status != 0, see 'reason'); "
              f"first: {first}", file=sys.stderr)
    if "fits" in data:
        over = int(np.sum((status == 0) & (np.asarray(data["fits"]) == 0)))
        if over:
            print(f"markovsim sweep: warning: {over} of {n} points exceed the modelled memory per card (fits = 0): "
                  "their numbers are as if the plan ran", file=sys.stderr)
    main = [nm for nm in _MAIN.get(kind.name, names) if nm in data] or names
    if args.csv:
        head = (*keys, *names, "status", "reason")
        rows = [(*(v.coordinate[i] for v, i in zip(variations, index)), *(data[nm][index] for nm in names),
                 int(status[index]), reason[index]) for index in indices]
        c.write_csv(args.csv, head, rows, force=args.force)
    if args.plot:
        def draw(ax):
            from ..plotting import plot_sweep

            plot_sweep(ds, main[0], x=keys[0], ax=ax)

        c.save_plot(args.plot, draw, force=args.force)
    if args.json:
        c.print_json({"command": "sweep", "file": label, "kind": kind.name, "out": str(out),
                      "dims": dict(zip(keys, shape)),
                      "coords": {v.key: {"values": v.coordinate,
                                         "unit": "" if v.named else v.unit or "1"}
                                 for v in variations},
                      "outputs": {nm: {"unit": kind.units.get(nm, "1"), "values": data[nm]} for nm in names},
                      "failed_points": failed, "status": status, "reason": reason})
        return 0
    print(f"swept {kind.name} model {label} over {' x '.join(f'{k} ({s})' for k, s in zip(keys, shape))} = {n} points")
    print(f"wrote {out}: variables {', '.join(names)}, status, reason")
    if n <= 60:
        shown = names if len(names) <= 7 else main[:7]
        rows = [(*(w if isinstance(w := v.written[i], str) else f"{w:g}" for v, i in zip(variations, index)),
                 *(f"{data[nm][index]:.6g}" for nm in shown)) for index in indices]
        print()
        print(c.table(rows, (*keys, *shown), right=tuple(range(len(keys) + len(shown)))))
    return 0


def _detect(doc: Mapping, path: Path):
    found = [k for k in _validate.MODEL_KINDS.values() if k.detect(doc)]
    if len(found) == 1:
        return found[0]
    by_folder = [k for k in _validate.MODEL_KINDS.values() if k.folder == path.resolve().parent.name]
    if len(by_folder) == 1:
        return by_folder[0]
    raise SpecError(
        f"{path}: cannot tell which kind of model file this is (known kinds: "
        f"{', '.join(_validate.MODEL_KINDS)}; a plan file has workload, hardware, tp, pp and dp; an inference "
        "file has [prefill], [decode] and [tiers]; a job file has cluster and recovery)")


def _evaluate(kind_name: str, docs, label: str, base, labels, args) -> list:
    compiled = len(docs) >= COMPILED_FROM
    if args.dask:
        with _client(args.dask) as client:
            futures = client.map(evaluate_point, [kind_name] * len(docs), docs, [label] * len(docs),
                                 [base] * len(docs), [compiled] * len(docs), pure=False)
            return client.gather(futures)
    results = []
    with progress_bar(args, len(docs), "point") as bar:
        for doc, name in zip(docs, labels):
            bar.set_postfix_str(name, refresh=False)
            results.append(evaluate_point(kind_name, doc, label, base, compiled))
            bar.update()
    return results


def _dataset(kind, variations, keys, data, status, reason, label, changes, args):
    import xarray as xr

    # an axis of names or flags has no unit (a numeric one without a unit is dimensionless, "1")
    coords = {v.key: (v.key, v.coordinate, {**({} if v.named else {"units": v.unit or "1"}),
                                            "values_written": ", ".join(map(str, v.written))})
              for v in variations}
    variables = {name: (keys, data[name], {"units": kind.units.get(name, "1")}) for name in sorted(data)}
    variables["status"] = (keys, status, status_attrs())
    variables["reason"] = (keys, reason, REASON_ATTRS)
    return xr.Dataset(variables, coords=coords, attrs={
        "model_file": label, "kind": kind.name, "overrides": " ".join(o.text for o in changes),
        "vary": " ".join(args.vary),
        "evaluation": "each point a change of the model document in memory, read by the model's own reader",
        "failed_points": int((status != 0).sum())})
