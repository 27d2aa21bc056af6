"""The ``markovsim`` command line.

Commands: ``repro``, ``train``, ``infer``, ``goodput``, ``sweep`` and ``validate``. Every
command prints a human-readable table by default and JSON with ``--json``. A mistake in
the input (a missing or malformed model file, an unknown key, a missing unit, a bad
``--set``) is reported as one line ``markovsim <command>: error: ...`` on stderr with exit
code 2; ``markovsim validate`` exits with 1 when a case lies outside its tolerance.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any, Sequence

from ._errors import MarkovsimError, SpecError

__all__ = ["main", "build_parser"]

_SET_HELP = (
    "change a value of the model file before it is read: a dotted key path into the TOML "
    "document and a TOML literal (--set efficiency.compute=0.55, --set 'tiers.restart.restart_time=\"10 min\"'); "
    "a value that is not a TOML literal is taken as a string, so --set 'tiers.restart.restart_time=10 min' "
    "works too. [i] picks an element of an array of tables (levels[1].bandwidth). Repeatable; "
    "the model's loader checks the result as strictly as the file (unknown keys, missing units)")


# --------------------------------------------------------------------------- helpers


def _clean(x: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN and infinities to null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "tolist"):
        return _clean(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _print_json(payload: dict) -> None:
    print(json.dumps(_clean(payload), indent=2, allow_nan=False))


def _table(rows: Sequence[Sequence[str]], head: Sequence[str] | None = None, *,
           right: Sequence[int] = ()) -> str:
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


def _pct(x: float, digits: int = 2) -> str:
    return f"{100 * x:.{digits}f} %" if math.isfinite(x) else "n/a"


def _duration(s: float) -> str:
    """Seconds in the largest fitting unit (s, min, h, d)."""
    if not math.isfinite(s):
        return "n/a"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(s) >= size:
            return f"{s / size:.4g} {unit}"
    return f"{s:.4g} s"


def _overrides(sets: Sequence[str] | None):
    from ._overrides import parse_override

    return [parse_override(s) for s in sets or ()]


def _document(arg: str, folder: str, sets: Sequence[str] | None):
    """(path, document with overrides applied, changed?, overrides)."""
    from ._overrides import apply_overrides, read_document, resolve_model_path

    overrides = _overrides(sets)
    path = resolve_model_path(arg, folder)
    _must_exist(path, arg, (folder,))
    doc = read_document(path)
    return path, apply_overrides(doc, overrides), bool(overrides), overrides


def _load_model(args, folder: str, loader):
    """Read ``args.model`` with its ``--set`` overrides and build it with ``loader``;
    a rejected key introduced by ``--set`` is pointed at in the error.

    Returns ``(model, path, overrides)``."""
    path, doc, changed, overrides = _document(args.model, folder, args.sets)
    try:
        return loader(doc, path, changed=changed), path, overrides
    except MarkovsimError as exc:
        raise _annotate(exc, overrides) from None


def _must_exist(path: Path, arg: str, folders: Sequence[str]) -> None:
    from ._overrides import MODELS_DIR

    if not path.exists() and path.suffix != ".toml":
        looked = " or ".join(str(MODELS_DIR / f / f"{arg}.toml") for f in folders)
        raise SpecError(f"{arg}: model file not found (neither a file nor {looked})")


def _annotate(exc: MarkovsimError, overrides) -> MarkovsimError:
    """Point at the ``--set`` that introduced a key the loader rejects."""
    message = str(exc)
    hits = [o for o in overrides if isinstance(o.path[-1], str) and f"'{o.path[-1]}'" in message]
    if hits and "unknown key" in message:
        message += " (introduced by " + ", ".join(f"--set {o.text}" for o in hits) + ")"
        return type(exc)(message)
    return exc


def _add_common(p: argparse.ArgumentParser, *, sets: bool = True) -> None:
    if sets:
        p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets", help=_SET_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


# --------------------------------------------------------------------------- repro


def _cmd_repro(args) -> int:
    from . import repro

    if args.list:
        for name, ids in repro.script_ids().items():
            print(f"{name:28s} {' '.join(ids)}")
        return 0
    selection = args.ids or ["all"]
    rows = repro.run_reproductions(selection, Path(args.out), log=(lambda m: print(m, file=sys.stderr)))
    results, report = repro.write_report(rows, Path(args.out))
    print(repro.format_table(rows))
    print(f"\nwrote {results} and {report}")
    return 0


# --------------------------------------------------------------------------- train


def _cmd_train(args) -> int:
    from . import _case_kinds as kinds
    from .training import Scaling, step_time

    spec, path, overrides = _load_model(args, "plans", kinds.load_train)
    b = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    outputs = kinds.breakdown_outputs(spec, b)
    plan = spec.plan
    scaling = None
    if args.cards or args.baseline is not None:
        baseline = args.baseline if args.baseline is not None else plan.world_size
        sizes = [baseline, *(args.cards or [plan.world_size])]
        scaling = kinds.linearity_points(spec, sizes, scaling=Scaling(args.scaling), jitter_cv=args.jitter_cv)
    usable = spec.efficiency.usable_memory * spec.hardware.hbm_bytes
    plan_info = {"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep,
                 "virtual_stages": plan.virtual_stages, "schedule": plan.schedule.value,
                 "global_batch": plan.global_batch, "micro_batch": plan.micro_batch,
                 "micro_batches": plan.micro_batches, "zero_stage": plan.zero_stage,
                 "recompute": plan.recompute.value, "cards": plan.world_size}
    if args.json:
        _print_json({"command": "train", "file": str(path), "name": spec.name,
                     "workload": spec.workload.name, "hardware": spec.hardware.name,
                     "overrides": [o.text for o in overrides], "plan": plan_info, "outputs": outputs,
                     "usable_memory_bytes": usable,
                     "scaling": None if scaling is None else {
                         "mode": args.scaling, "baseline": scaling[0]["cards"], "jitter_cv": args.jitter_cv,
                         "points": scaling}})
        return 0
    o = outputs
    step = o["step_time_s"]
    parts = [("compute", o["compute_s"]), ("pipeline bubble", o["bubble_s"]),
             ("TP communication (exposed)", o["tp_exposed_s"]), ("EP communication (exposed)", o["ep_exposed_s"]),
             ("PP communication (exposed)", o["pp_exposed_s"]), ("DP communication (exposed)", o["dp_exposed_s"]),
             ("optimizer step", o["optimizer_s"]), ("stragglers", o["straggler_s"])]
    print(f"{spec.name}  ({path})")
    print(f"{spec.workload.name} on {spec.hardware.name}: {plan.world_size} cards = tp {plan.tp} x pp {plan.pp} "
          f"x dp {plan.dp}" + (f" x cp {plan.cp}" if plan.cp > 1 else "") + (f", ep {plan.ep}" if plan.ep > 1 else "")
          + f"; {plan.schedule.value}" + (f" v={plan.virtual_stages}" if plan.virtual_stages > 1 else "")
          + f"; global batch {plan.global_batch}, micro-batch {plan.micro_batch}, "
          f"{plan.micro_batches} micro-batches per replica")
    if overrides:
        print("with " + " ".join(f"--set {x.text}" for x in overrides))
    print()
    rows = [(name, f"{t:.4f}", _pct(t / step, 1)) for name, t in parts if t > 0 or name == "pipeline bubble"]
    rows.append(("step time", f"{step:.4f}", _pct(1.0, 1)))
    print(_table(rows, ("step time breakdown", "seconds", "share"), right=(1, 2)))
    print()
    print(_table([
        ("tokens/s", f"{o['tokens_per_s']:.4g}"),
        ("tokens/s per card", f"{o['tokens_per_s_per_card']:.4g}"),
        ("MFU", _pct(o["mfu"])),
        ("HFU", _pct(o["hfu"])),
        ("pipeline bubble", _pct(o["pipeline_bubble_fraction"]) + " of compute + bubble"),
        ("memory per card", f"{o['memory_bytes'] / 2**30:.1f} GiB of {usable / 2**30:.1f} GiB usable"),
        ("communication before overlap", f"{o['communication_total_s']:.4f} s"),
    ]))
    if scaling is not None:
        print()
        print(f"linearity ({args.scaling}, baseline {scaling[0]['cards']} cards"
              + (f", rank jitter CV {args.jitter_cv:g}" if args.jitter_cv else "") + ")")
        print(_table([(str(r["cards"]), str(r["dp"]), str(r["global_batch"]), f"{r['step_time_s']:.4f}",
                       f"{r['tokens_per_s']:.4g}", f"{r['linearity']:.4f}") for r in scaling],
                     ("cards", "dp", "global batch", "step time (s)", "tokens/s", "linearity"),
                     right=(0, 1, 2, 3, 4, 5)))
    return 0


# --------------------------------------------------------------------------- infer


def _cmd_infer(args) -> int:
    from . import _case_kinds as kinds

    model, path, overrides = _load_model(args, "inference", kinds.load_infer)
    results = kinds.infer_results(model)
    layouts = {"prefill": model.prefill_layout, "decode": model.decode_layout}
    if args.json:
        roles = {}
        for role, r in results.items():
            fleet = getattr(model, role)
            d = {k: getattr(r, k) for k in r.__dataclass_fields__}
            d.update(instances=fleet.instances, cards_per_instance=fleet.cards_per_instance,
                     spare_cards=fleet.spare_cards, demand_instances=fleet.demand,
                     meets_target=bool(r.slo_availability >= model.target),
                     method="count chain" if fleet.spare_cards is not None else "product form")
            roles[role] = d
        _print_json({"command": "infer", "file": str(path), "name": model.name,
                     "overrides": [o.text for o in overrides], "slo_target": model.target,
                     "decode_demand_tokens_per_s": model.decode_demand_tokens_per_s, **roles})
        return 0
    print(f"{model.name}  ({path})")
    if overrides:
        print("with " + " ".join(f"--set {x.text}" for x in overrides))
    print()
    roles = ("decode", "prefill")
    fl = {r: getattr(model, r) for r in roles}
    res = results

    def row(label, f):
        return (label, *(f(r) for r in roles))

    rows = [
        row("instances x cards", lambda r: f"{fl[r].instances} x {fl[r].cards_per_instance}"),
        row("layout (EP = TP x DP)", lambda r: f"{layouts[r].expert_parallel} = {layouts[r].tensor_parallel} x "
                                               f"{layouts[r].data_parallel}"),
        row("demand (instances)", lambda r: f"{fl[r].demand:.3g}"),
        row("spare cards", lambda r: "unlimited" if fl[r].spare_cards is None else str(fl[r].spare_cards)),
        row("SLO availability", lambda r: _pct(res[r].slo_availability, 4)),
        row("SLO unavailability", lambda r: f"{res[r].slo_unavailability:.3e}"),
        row("capacity availability", lambda r: _pct(res[r].capacity_availability, 4)),
        row("request availability", lambda r: _pct(res[r].request_availability, 4)),
        row("expected capacity (instances)", lambda r: f"{res[r].expected_capacity:.4g}"),
        row("served fraction", lambda r: _pct(res[r].served_fraction, 4)),
        row("requests retried / day", lambda r: f"{res[r].requests_retried_per_day:.4g}"),
        row("requests lost / day", lambda r: f"{res[r].requests_lost_per_day:.4g}"),
        row("downtime outside SLO / month", lambda r: _duration(res[r].downtime_per_month)),
        row("instance MTBF", lambda r: _duration(res[r].instance_mtbf)),
        row(f"meets SLO target {_pct(model.target)}", lambda r: "yes" if res[r].slo_availability >= model.target
            else "no"),
        row("solved by", lambda r: (f"count chain, {res[r].states} states" if fl[r].spare_cards is not None
                                    else "product form")),
    ]
    print(_table(rows, ("", *roles), right=(1, 2)))
    print()
    print(f"decode tokens/s served: {res['decode'].served_tokens_per_s:.4g} of "
          f"{model.decode_demand_tokens_per_s:.4g} demanded")
    return 0


# --------------------------------------------------------------------------- goodput


def _job(model_arg: str | None, cluster: str | None, recovery: str | None, cards: int | None,
         sets: Sequence[str] | None):
    """The expanded job document (cluster + faults + recovery inlined) with the overrides
    applied: (document, sources, label, overrides)."""
    from ._case_kinds import expand_job, is_cluster, is_job, is_recovery
    from ._overrides import apply_overrides, read_document, resolve_model_path

    def ref(arg: str) -> str:  # a command-line reference: an existing file (absolute) or a bare name
        p = Path(arg)
        return str(p.resolve()) if p.is_file() else arg

    overrides = _overrides(sets)
    job: dict = {}
    base_dir = Path.cwd()
    label = "job"
    if model_arg is not None:
        path = resolve_model_path(model_arg, "recovery")
        if not path.exists():
            path = resolve_model_path(model_arg, "clusters")
        _must_exist(path, model_arg, ("recovery", "clusters"))
        doc = read_document(path)
        label = str(path)
        if is_job(doc):
            job, base_dir = doc, path.parent
        elif is_recovery(doc):
            job = {"recovery": str(path.resolve())}
        elif is_cluster(doc):
            job = {"cluster": str(path.resolve())}
        else:
            raise SpecError(f"{path}: not a job, cluster or recovery file (a job file has cluster and recovery; "
                            "a recovery file has catch_all, [checkpoint] and [[tiers]]; a cluster file has cards, "
                            "faults and [network])")
    if cluster is not None:
        job["cluster"] = ref(cluster)
    if recovery is not None:
        job["recovery"] = ref(recovery)
    if cards is not None:
        job["cards"] = cards
    for key in ("cluster", "recovery"):
        if key not in job:
            raise SpecError(f"no {key} given: pass --{key} FILE (a file, or a bare name in models/"
                            f"{'clusters' if key == 'cluster' else 'recovery'}/), or a job file that names it")
    expanded, sources = expand_job(job, base_dir, where=label)
    return apply_overrides(expanded, overrides), sources, label, overrides


def _cmd_goodput(args) -> int:
    from . import _case_kinds as kinds
    from .availability import CAUSES

    doc, sources, label, overrides = _job(args.model, args.cluster, args.recovery, args.cards, args.sets)
    try:
        model = kinds.load_goodput(doc, sources, label=label)
    except MarkovsimError as exc:
        raise _annotate(exc, overrides) from None
    lazy = kinds.goodput_outputs_lazy(model)
    o = {k: lazy[k] for k in lazy}
    lost = {c: o[f"lost_{c}"] for c in CAUSES}
    names = {"cluster": doc["cluster"].get("name", ""), "recovery": doc["recovery"].get("name", "")}
    title = doc.get("name") or f"{names['cluster']} with {names['recovery']}"
    if args.json:
        _print_json({"command": "goodput", "file": label if args.model else None, "name": title, **names,
                     "sources": {k: (str(v) if v is not None else None) for k, v in sources.items()},
                     "overrides": [x.text for x in overrides], "outputs": o, "lost": lost})
        return 0
    print(f"{title}  ({label})" if args.model else title)
    print("files: " + ", ".join(f"{k} {v}" for k, v in sources.items() if v is not None))
    if overrides:
        print("with " + " ".join(f"--set {x.text}" for x in overrides))
    print()
    print(_table([
        ("cards", f"{o['cards']:.0f}"),
        ("goodput", _pct(o["goodput"])),
        ("availability", _pct(o["availability"], 3)),
        ("unavailability", f"{o['unavailability']:.3e}"),
        ("interruptions / day", f"{o['interruptions_per_day']:.4g}"),
        ("job MTBF (running time)", _duration(o["job_mtbf_s"])),
        ("work lost per interruption", _duration(o["lost_work_per_interruption_s"])),
        ("checkpoint interval", _duration(o["checkpoint_interval_s"]) + f"  (goodput {_pct(o['goodput'])})"),
        ("optimal checkpoint interval", _duration(o["optimal_checkpoint_interval_s"])
         + f"  (goodput {_pct(o['goodput_at_optimal_interval'])})"),
    ]))
    print()
    rows = [(c.replace("_", " "), _pct(v)) for c, v in lost.items()]
    rows.append(("total lost", _pct(sum(lost.values()))))
    print(_table(rows, ("lost time by cause", "share of wall time"), right=(1,)))
    return 0


# --------------------------------------------------------------------------- sweep


def _resolve_any(arg: str) -> Path:
    from ._overrides import resolve_model_path

    for folder in ("plans", "inference", "recovery", "clusters"):
        p = resolve_model_path(arg, folder)
        if p.exists():
            return p
    return Path(arg)


def _cmd_sweep(args) -> int:
    import numpy as np
    import xarray as xr

    from ._case_kinds import KINDS, detect_kind
    from ._overrides import Override, apply_overrides, parse_variation, read_document

    out = Path(args.out)
    if out.suffix not in (".nc", ".zarr"):
        raise SpecError(f"--out {args.out}: expected a file name ending in .nc (netCDF) or .zarr (zarr directory)")
    overrides = _overrides(args.sets)
    if args.model is None and not (args.cluster and args.recovery):
        raise SpecError("no model file given (a MODEL.toml, or --cluster and --recovery for a goodput job)")
    path = _resolve_any(args.model) if args.model is not None else None
    if path is not None:
        _must_exist(path, args.model, ["plans", "inference", "recovery", "clusters"])
    doc = read_document(path) if path is not None else {}
    if args.cluster or args.recovery or (path is not None and KINDS["goodput"].detect(doc)):
        kind = KINDS["goodput"]
        base, _, label, _ = _job(args.model, args.cluster, args.recovery, None, args.sets)
        path = Path(label)
    else:
        kind = detect_kind(doc, path)
        base = apply_overrides(doc, overrides)
    variations = [parse_variation(v, base) for v in args.vary]
    keys = [v.key for v in variations]
    if len(set(keys)) != len(keys):
        raise SpecError(f"--vary: a key appears twice ({', '.join(keys)})")
    shape = tuple(len(v.written) for v in variations)
    n = math.prod(shape)
    data: dict[str, np.ndarray] = {}
    failures: list[str] = []
    first_error: MarkovsimError | None = None
    show = sys.stderr.isatty() and not args.json
    for count, index in enumerate(itertools.product(*(range(s) for s in shape))):
        point = [Override(v.path, v.written[i], f"{v.key}={v.written[i]}") for v, i in zip(variations, index)]
        label = ", ".join(o.text for o in point)
        if show:
            print(f"\rpoint {count + 1}/{n}: {label}", end="", file=sys.stderr, flush=True)
        try:
            doc = apply_overrides(base, point)
            result = kind.outputs(doc, path, True, str(path))
        except MarkovsimError as exc:
            exc = _annotate(exc, overrides)
            failures.append(f"{label}: {exc}")
            first_error = first_error or exc
            continue
        for name, value in result.items():
            if name not in data:
                data[name] = np.full(shape, np.nan)
            data[name][index] = float(value)
    if show:
        print(file=sys.stderr)
    if len(failures) == n:
        raise type(first_error)(f"every point failed; the first: {failures[0]}")
    for v in variations:  # an output named like a varied key (goodput's cards): keep one of them
        if v.key in data:
            grid = np.broadcast_to(np.reshape(v.coordinate, [-1 if d == v.key else 1 for d in keys]), shape)
            same = np.allclose(data[v.key], grid, rtol=1e-12, equal_nan=False) or np.isnan(data[v.key]).all()
            value = data.pop(v.key)
            if not same:
                data[f"{v.key}_output"] = value
    names = sorted(data)
    status = np.zeros(shape, dtype=np.int32)
    for bit, name in enumerate(names[:31]):
        status |= np.where(np.isfinite(data[name]), 0, 1 << bit).astype(np.int32)
    coords = {v.key: (v.key, v.coordinate, {"units": v.unit or "1", "values_written": ", ".join(map(str, v.written))})
              for v in variations}
    variables = {name: (keys, data[name], {"units": kind.units.get(name, "1")}) for name in names}
    variables["status"] = (keys, status, {
        "long_name": "evaluation status",
        "description": "0: every output finite; bit i set: output i (in flag_meanings order) is NaN, "
                       "e.g. where the model raised an error at that point",
        "flag_masks": [1 << i for i in range(min(len(names), 31))],
        "flag_meanings": " ".join(f"{nm}_not_finite" for nm in names[:31])})
    ds = xr.Dataset(variables, coords=coords, attrs={
        "model_file": str(path), "kind": kind.name,
        "overrides": " ".join(o.text for o in overrides),
        "vary": " ".join(args.vary),
        "evaluation": "a Python loop over the grid points, each point read by the model's own loader",
        "failed_points": len(failures),
        "errors": "\n".join(failures[:100]),
    })
    if out.suffix == ".nc":
        ds.to_netcdf(out, engine="scipy")
    else:
        import warnings

        with warnings.catch_warnings():  # zarr 3 notes that consolidated metadata is outside its spec
            warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
            ds.to_zarr(out, mode="w")
    if failures:
        print(f"markovsim sweep: warning: {len(failures)} of {n} points failed (NaN, status != 0); "
              f"first: {failures[0]}", file=sys.stderr)
    if args.json:
        _print_json({"command": "sweep", "file": str(path), "kind": kind.name, "out": str(out),
                     "dims": dict(zip(keys, shape)),
                     "coords": {v.key: {"values": v.coordinate, "unit": v.unit or "1"} for v in variations},
                     "outputs": {nm: {"unit": kind.units.get(nm, "1"), "values": data[nm]} for nm in names},
                     "failed_points": len(failures), "errors": failures})
        return 0
    print(f"swept {kind.name} model {path} over {' x '.join(f'{k} ({s})' for k, s in zip(keys, shape))} = {n} points")
    print(f"wrote {out}: variables {', '.join(names)}, status")
    show_names = names if len(names) <= 6 else [nm for nm in _MAIN.get(kind.name, names) if nm in data][:6]
    if n <= 60:
        rows = []
        for index in itertools.product(*(range(s) for s in shape)):
            rows.append((*(_fmt_coord(v, i) for v, i in zip(variations, index)),
                         *(f"{data[nm][index]:.6g}" for nm in show_names)))
        print()
        print(_table(rows, (*keys, *show_names), right=tuple(range(len(keys) + len(show_names)))))
    return 0


_MAIN = {
    "train": ["step_time_s", "tokens_per_s", "mfu", "hfu", "pipeline_bubble_fraction", "memory_bytes"],
    "goodput": ["goodput", "availability", "interruptions_per_day", "job_mtbf_s", "optimal_checkpoint_interval_s",
                "goodput_at_optimal_interval"],
    "infer": ["decode_slo_availability", "decode_capacity_availability", "decode_request_availability",
              "prefill_slo_availability", "decode_served_tokens_per_s", "decode_downtime_per_month_s"],
}


def _fmt_coord(v, i) -> str:
    w = v.written[i]
    return w if isinstance(w, str) else f"{w:g}"


# --------------------------------------------------------------------------- validate


def _cmd_validate(args) -> int:
    from . import _case_kinds
    from ._validate_harness import validate_cases

    _case_kinds.register()
    path = Path(args.cases)
    if path.is_dir():
        raise SpecError(f"{path}: is a directory, expected a case file (TOML)")
    report = validate_cases(path)
    if args.json:
        payload = report.to_dict()
        payload["passed"] = report.passed
        _print_json(payload)
    else:
        print(report.format_table())
    return 0 if report.passed else 1


# --------------------------------------------------------------------------- parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="markovsim",
        description="Markov models of AI-cluster goodput, reliability and scaling.",
        epilog=textwrap.dedent("""\
            Model files are TOML (see models/); a bare name such as pangu_ultra_135b_8k is looked
            up in models/<plans|inference|...>/. Errors in the input are reported as one line
            on stderr with exit code 2."""),
        formatter_class=_Formatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("repro", help="run the reproductions of the published figures")
    p.add_argument("ids", nargs="*", help="seed ids (e.g. S-HW-1), script names, or 'all' (default)")
    p.add_argument("--list", action="store_true", help="list the reproduction scripts and their ids")
    p.add_argument("--out", default="repro_out", help="output directory (default: repro_out)")
    p.set_defaults(func=_cmd_repro)

    p = sub.add_parser(
        "train", help="step time, MFU/HFU, tokens/s and linearity of a training plan",
        formatter_class=_Formatter,
        description=textwrap.dedent("""\
            Step-time breakdown (compute, pipeline bubble, exposed TP/EP/PP/DP communication,
            optimizer), MFU, HFU, tokens/s and memory per card of a parallel plan file
            (models/plans/), from markovsim.training.step_time. With --cards (and --baseline)
            the plan is grown by data parallelism and its linearity printed:
            (tokens/s per card at N) / (tokens/s per card at the baseline)."""),
        epilog="example: markovsim train pangu_ultra_135b_8k --baseline 256 --cards 4096 8192")
    p.add_argument("model", metavar="PLAN.toml", help="plan file, or the bare name of one in models/plans/")
    p.add_argument("--cards", type=int, nargs="+", metavar="N",
                   help="sizes (cards) at which to print step time, tokens/s and linearity")
    p.add_argument("--baseline", type=int, metavar="N",
                   help="baseline size for linearity (default: the plan's own size)")
    p.add_argument("--scaling", default="fixed-global-batch", choices=("fixed-global-batch", "fixed-replica-batch"),
                   help="how the global batch changes with the cards: held at the plan's value (default) or "
                        "grown in proportion (the plan's value holds at the plan's own size)")
    p.add_argument("--jitter-cv", type=float, default=0.0, metavar="CV",
                   help="per-rank step-time coefficient of variation for the straggler delay in the "
                        "linearity table (default 0)")
    _add_common(p)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "infer", help="availability of an inference fleet (prefill and decode pools)",
        formatter_class=_Formatter,
        description=textwrap.dedent("""\
            SLO, capacity and request availability, losses and downtime of the prefill and
            decode pools of an inference model file (models/inference/), from
            markovsim.inference.analyse_fleet (finite spare pool: the fleet count chain) or
            analyse_independent_fleet (unlimited pool: product form)."""),
        epilog="example: markovsim infer models/inference/deepseek_v3_8gpu.toml --set decode.instances=5")
    p.add_argument("model", metavar="MODEL.toml", help="inference model file, or a bare name in models/inference/")
    _add_common(p)
    p.set_defaults(func=_cmd_infer)

    p = sub.add_parser(
        "goodput", help="goodput, availability and the optimal checkpoint interval of a training job",
        formatter_class=_Formatter,
        description=textwrap.dedent("""\
            Goodput, availability, interruptions per day, job MTBF, the lost-time breakdown by
            cause and the optimal checkpoint interval of a training job, from
            markovsim.availability.analyze and optimal_checkpoint_interval.

            A job is a cluster file (models/clusters/, naming its fault catalogue in
            models/faults/) and a recovery file (models/recovery/). Give them as
              markovsim goodput --cluster atlas800t_a2_10k --recovery ascend_tiered
              markovsim goodput models/recovery/ascend_tiered.toml --cluster atlas800t_a2_10k
            or as a job file, MODEL.toml:
              name = "10K-card pre-training"   # optional
              cluster = "atlas800t_a2_10k"     # path relative to the job file, or a bare name
              recovery = "ascend_tiered"
              cards = 4096                     # optional job size (default: the whole cluster)
            --set keys are paths in the job: recovery.checkpoint.interval,
            recovery.tiers[0].coverage, cluster.network.radix,
            cluster.faults.components[0].rate, cards.

            The first run of a model compiles it with JAX (seconds to tens of seconds for a
            many-tier ladder)."""),
        epilog="example: markovsim goodput --cluster atlas800t_a2_10k --recovery checkpoint_only "
               "--set 'recovery.checkpoint.interval=30 min'")
    p.add_argument("model", metavar="MODEL.toml", nargs="?",
                   help="job file, or a recovery or cluster file (the other one given by an option)")
    p.add_argument("--cluster", metavar="CLUSTER", help="cluster file, or a bare name in models/clusters/")
    p.add_argument("--recovery", metavar="RECOVERY", help="recovery file, or a bare name in models/recovery/")
    p.add_argument("--cards", type=int, metavar="N", help="cards of the job (default: the whole cluster)")
    _add_common(p)
    p.set_defaults(func=_cmd_goodput)

    p = sub.add_parser(
        "sweep", help="evaluate a model file over a grid of changed values, written as an xarray Dataset",
        formatter_class=_Formatter,
        description=textwrap.dedent("""\
            Evaluate a model file's main outputs at every point of the grid spanned by the
            --vary axes and write an xarray Dataset: one dimension and coordinate per varied
            key, one variable per output (units in the name or the 'units' attribute), and a
            'status' variable (0 where every output is finite; bit i set where output i is NaN,
            e.g. where the model rejected the point). Points where the model raises are NaN and
            listed in the Dataset's 'errors' attribute; if every point fails, the command fails.

            The kind of model (train: plan files; infer: inference model files; goodput: job
            files, or a recovery/cluster file with --cluster/--recovery as for markovsim
            goodput) is told by the file's keys. The points are evaluated by a Python loop,
            each read by the model's own strict loader (a model file is not a JAX function of
            its values, so markovsim.sweep, which vmaps JAX functions, is not used here; use it
            from Python for large grids).

            --vary KEY=START:STOP:NUM   NUM evenly spaced points from START to STOP, both included
            --vary KEY=V1,V2,...        the listed values
            KEY is a dotted path into the TOML document, as for --set. START/STOP/Vi may carry
            a unit: 10min:60min:6, '10 min:2 h:6' (written back in the first unit given). A bare
            number is in the unit the file writes the key in: if the file says
            restart_time = "20 min", then 5:20:4 means 5, 10, 15, 20 minutes; a key written as a
            plain number gets plain numbers, and integer keys (dp, instances) get integers (an
            error if the points are not whole). Coordinates are stored in that unit (attribute
            'units').

            --out FILE.nc writes netCDF (scipy engine, netCDF3); --out DIR.zarr a zarr store.
            Read back with xarray.open_dataset(FILE.nc) or xarray.open_zarr(DIR.zarr)."""),
        epilog="example: markovsim sweep models/plans/pangu_ultra_135b_8k.toml --vary efficiency.compute=0.4:0.7:4 "
               "--vary dp=64,128 --out sweep.nc")
    p.add_argument("model", metavar="MODEL.toml", nargs="?", help="model file (or a bare name in models/<kind>/)")
    p.add_argument("--cluster", metavar="CLUSTER", help="goodput job: cluster file or bare name (see goodput)")
    p.add_argument("--recovery", metavar="RECOVERY", help="goodput job: recovery file or bare name (see goodput)")
    p.add_argument("--vary", action="append", required=True, metavar="KEY=START:STOP:NUM",
                   help="an axis of the grid (repeatable); see above")
    p.add_argument("--out", required=True, metavar="FILE", help="output: FILE.nc (netCDF) or DIR.zarr (zarr)")
    _add_common(p)
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser(
        "validate", help="run validation cases: predicted against reported, with errors and a summary",
        formatter_class=_Formatter,
        description=textwrap.dedent("""\
            Run every case of a case file (a model file plus an [expect] table of reported
            outputs and a tolerance; see docs/how-to/validation-cases.md and
            models/cases/example.toml) and print predicted against reported, the relative
            error and a summary (median and maximum error).

            Case kinds: train (a plan, with an optional [linearity] table: baseline, cards,
            scaling, jitter_cv), infer (an inference model file), goodput (a job: cluster,
            recovery and optional cards, as for markovsim goodput; references relative to the
            working directory or bare names) and those the domain packages register. Exit code: 0 when every output is within its tolerance, 1 when some
            output is not, 2 when the case file itself is wrong."""),
        epilog="example: markovsim validate models/cases/example.toml")
    p.add_argument("cases", metavar="CASES.toml", help="case file")
    _add_common(p, sets=False)
    p.set_defaults(func=_cmd_validate)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split("\n"))
        print(f"markovsim {args.command}: warning: {text}", file=sys.stderr)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line  # filters stay as they are (errors in markovsim's own tests)
            return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (MarkovsimError, OSError, tomllib.TOMLDecodeError) as exc:
        message = " ".join(str(exc).split("\n"))
        print(f"markovsim {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
