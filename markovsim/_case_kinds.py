"""The kinds of model file the command line and validation cases run: ``train``, ``infer``
and ``goodput``.

Each kind reads a model document (a dict, as parsed from TOML, possibly changed by
``--set`` / ``--vary``) with its domain package's own strict loader and returns its main
outputs as scalars in SI units (seconds, bytes, per second, fractions); output names carry
the unit where it is not obvious (``step_time_s``, ``downtime_per_month_s``). The same
functions back ``markovsim sweep`` and the case kinds of :func:`markovsim.validate_cases`
(registered by :func:`register`).

Kind ``train`` (a plan file, ``models/plans/``): the step-time breakdown of
:func:`markovsim.training.step_time` plus ``pipeline_bubble_fraction`` (bubble / (compute +
bubble), the idle share of the pipeline timeline) and ``tokens_per_s_per_card``. In a case
file an optional ``[linearity]`` table (``baseline`` cards, ``cards`` (default: the plan's
size), ``scaling`` = ``"fixed-global-batch"`` (default) or ``"fixed-replica-batch"``,
``jitter_cv`` (default 0)) adds the output ``linearity``.

Kind ``goodput`` (a *job*: a cluster with its fault catalogue and a recovery plan,
``models/clusters/``, ``models/faults/``, ``models/recovery/``). A job document::

    name = "10K-card pre-training"      # optional
    cluster = "atlas800t_a2_10k"        # a file: relative to the job file, or a bare name in models/clusters/
    recovery = "ascend_tiered"          # likewise in models/recovery/
    cards = 4096                        # optional: the job's size (default: the whole cluster)

Each reference may instead be a table: a whole inline document, or ``{file = "...", ...}``
with changes deep-merged over that file (``recovery = {file = "ascend_tiered",
checkpoint = {interval = "30 min"}}``). :func:`expand_job` inlines the three documents
(the cluster's ``faults`` too), so ``--set`` reaches every value:
``recovery.checkpoint.interval``, ``cluster.faults.components[0].rate``, ``cards``.
Outputs: ``goodput``, ``availability``, ``unavailability``, ``interruptions_per_day``,
``job_mtbf_s``, ``lost_work_per_interruption_s``, ``lost_<cause>`` for each of
:data:`markovsim.availability.CAUSES`, ``checkpoint_interval_s``,
``optimal_checkpoint_interval_s``, ``goodput_at_optimal_interval`` and ``cards``, from
:func:`markovsim.availability.analyze` and
:func:`markovsim.availability.optimal_checkpoint_interval`. In a case file, references
are relative to the working directory (or bare names), and an output is computed only if
the case expects it.

Kind ``infer`` (an inference model file, ``models/inference/``): for each role
(``decode_*``, ``prefill_*``) the SLO, capacity and request availability, the SLO and
request unavailability, expected capacity, served fraction, requests retried and lost per
day, downtime per month (s) and instance MTBF (s), from
:func:`markovsim.inference.analyse_fleet` (finite spare pool) or
:func:`markovsim.inference.analyse_independent_fleet` (unlimited pool); plus
``decode_served_tokens_per_s`` and ``slo_target``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from ._errors import MarkovsimError, SpecError
from ._overrides import load_document
from ._validate_harness import _merge

__all__ = ["ModelKind", "KINDS", "detect_kind", "train_outputs", "infer_outputs", "linearity_points",
           "infer_results", "expand_job", "load_goodput", "goodput_outputs", "goodput_outputs_lazy", "register"]


@dataclasses.dataclass(frozen=True)
class ModelKind:
    """One kind of model file.

    Attributes:
        name: the kind's name (``train``, ``infer``, ``goodput``).
        folder: where its files live under ``models/``.
        detect: whether a document is of this kind (by its keys).
        outputs: ``outputs(doc, origin, changed) -> {name: float}``.
        units: unit of each output, for tables and Dataset attributes.
    """

    name: str
    folder: str
    detect: Callable[[dict], bool]
    outputs: Callable[..., dict]
    units: dict


# --------------------------------------------------------------------------- train

_TRAIN_UNITS = {
    "step_time_s": "s", "compute_s": "s", "bubble_s": "s", "tp_exposed_s": "s", "ep_exposed_s": "s",
    "pp_exposed_s": "s", "dp_exposed_s": "s", "optimizer_s": "s", "straggler_s": "s",
    "communication_total_s": "s", "memory_bytes": "B", "tokens_per_s": "tokens/s",
    "tokens_per_s_per_card": "tokens/s", "mfu": "1", "hfu": "1", "pipeline_bubble_fraction": "1",
    "cards": "cards", "linearity": "1",
}


def load_train(doc: dict, origin: Path, *, changed: bool = True, label: str | None = None):
    """The :class:`markovsim.training.PlanSpec` of a plan document."""
    from .training import load_plan

    return load_document(load_plan, doc, origin, changed=changed, label=label)


def breakdown_outputs(spec, breakdown) -> dict[str, float]:
    """The scalar outputs of one :class:`~markovsim.training.StepBreakdown`."""
    b = breakdown
    cards = spec.plan.world_size
    busy = b.compute + b.bubble
    return {
        "step_time_s": b.step_time, "compute_s": b.compute, "bubble_s": b.bubble,
        "tp_exposed_s": b.tp_exposed, "ep_exposed_s": b.ep_exposed, "pp_exposed_s": b.pp_exposed,
        "dp_exposed_s": b.dp_exposed, "optimizer_s": b.optimizer, "straggler_s": b.straggler,
        "communication_total_s": b.communication_total, "memory_bytes": b.memory_bytes,
        "tokens_per_s": b.tokens_per_s, "tokens_per_s_per_card": b.tokens_per_s / cards,
        "mfu": b.mfu, "hfu": b.hfu,
        "pipeline_bubble_fraction": b.bubble / busy if busy > 0 else 0.0,
        "cards": float(cards),
    }


def linearity_points(spec, sizes, *, scaling: Any, jitter_cv: float = 0.0) -> list[dict]:
    """Step time, throughput and linearity of the plan grown (by data parallelism) to each
    size; the first size is the baseline :math:`N_0`. The plan's global batch holds at its
    own size; ``scaling`` says whether it stays (fixed global batch) or grows with the
    cards (fixed per-replica batch) elsewhere. Stragglers: per-rank jitter ``jitter_cv``."""
    from .training import Scaling, linearity, scale_plan, step_time, straggler_delay, validate_plan

    scaling = Scaling(scaling)
    rows = []
    for n in sizes:
        plan = scale_plan(spec.plan, n, scaling=scaling)
        validate_plan(spec.workload, plan, world_size=n)
        t0 = step_time(spec.workload, spec.hardware, plan, efficiency=spec.efficiency).step_time
        delay = straggler_delay(t0, n, jitter_cv=jitter_cv)
        t = t0 + delay
        rows.append({"cards": int(n), "dp": plan.dp, "global_batch": plan.global_batch,
                     "micro_batches": plan.micro_batches, "step_time_s": t, "straggler_s": delay,
                     "tokens_per_s": plan.global_batch * spec.workload.seq_len / t})
    base = rows[0]
    for r in rows:
        r["linearity"] = float(linearity(r["tokens_per_s"], r["cards"], base["tokens_per_s"], base["cards"]))
    return rows


def train_outputs(doc: dict, origin: Path, changed: bool = True, label: str | None = None) -> dict[str, float]:
    """Scalar outputs of a plan document (see the module documentation)."""
    from .training import step_time

    spec = load_train(doc, origin, changed=changed, label=label)
    b = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    return breakdown_outputs(spec, b)


def _is_train(doc: dict) -> bool:
    return {"workload", "hardware", "tp", "pp", "dp"} <= set(doc)


# --------------------------------------------------------------------------- infer

_FLEET_FIELDS = {
    "slo_availability": "1", "slo_unavailability": "1", "capacity_availability": "1",
    "request_availability": "1", "request_unavailability": "1", "expected_capacity": "instances",
    "served_fraction": "1", "requests_retried_per_day": "1/d", "requests_lost_per_day": "1/d",
    "downtime_per_month": "s", "instance_mtbf": "s",
}
_RENAME = {"downtime_per_month": "downtime_per_month_s", "instance_mtbf": "instance_mtbf_s"}
_INFER_UNITS = {f"{role}_{_RENAME.get(k, k)}": u for role in ("decode", "prefill") for k, u in _FLEET_FIELDS.items()}
_INFER_UNITS.update({"decode_served_tokens_per_s": "tokens/s", "slo_target": "1"})


def load_infer(doc: dict, origin: Path, *, changed: bool = True, label: str | None = None):
    """The :class:`markovsim.inference.InferenceModel` of an inference document."""
    from .inference import load_inference_model

    return load_document(load_inference_model, doc, origin, changed=changed, label=label)


def infer_results(model) -> dict:
    """``{"prefill": FleetResult, "decode": FleetResult}``: the count chain for a finite
    spare pool, the product form for an unlimited one."""
    from .inference import analyse_fleet, analyse_independent_fleet

    out = {}
    for role in ("prefill", "decode"):
        fleet = getattr(model, role)
        out[role] = (analyse_independent_fleet(fleet, model.tiers) if fleet.spare_cards is None
                     else analyse_fleet(fleet, model.tiers))
    return out


def infer_outputs(doc: dict, origin: Path, changed: bool = True, label: str | None = None) -> dict[str, float]:
    """Scalar outputs of an inference document (see the module documentation)."""
    model = load_infer(doc, origin, changed=changed, label=label)
    results = infer_results(model)
    out: dict[str, float] = {}
    for role in ("decode", "prefill"):
        r = results[role]
        for k in _FLEET_FIELDS:
            out[f"{role}_{_RENAME.get(k, k)}"] = float(getattr(r, k))
    out["decode_served_tokens_per_s"] = float(results["decode"].served_tokens_per_s)
    out["slo_target"] = float(model.target)
    return out


def _is_infer(doc: dict) -> bool:
    return {"prefill", "decode", "tiers"} <= set(doc)


# --------------------------------------------------------------------------- goodput

#: the keys of a job document
_JOB_KEYS = ("name", "cluster", "recovery", "cards")


def _goodput_units() -> dict:
    from .availability import CAUSES

    units = {"goodput": "1", "availability": "1", "unavailability": "1", "interruptions_per_day": "1/d",
             "job_mtbf_s": "s", "lost_work_per_interruption_s": "s", "checkpoint_interval_s": "s",
             "optimal_checkpoint_interval_s": "s", "goodput_at_optimal_interval": "1", "cards": "cards"}
    units.update({f"lost_{c}": "1" for c in CAUSES})
    return units


def _reference(value: Any, where: str, folder: str, base_dir: Path) -> tuple[dict, Path | None]:
    """A referenced document: a file name (relative to ``base_dir``, else a bare name in
    ``models/<folder>/``), an inline table, or a table ``{file = ..., <changes>}``."""
    from ._overrides import MODELS_DIR, read_document

    if isinstance(value, dict):
        if "file" not in value:
            return copy.deepcopy(value), None
        changes = {k: v for k, v in value.items() if k != "file"}
        doc, path = _reference(value["file"], f"{where}.file", folder, base_dir)
        return _merge(doc, changes), path
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}={value!r}: expected a file name, e.g. {where} = \"models/{folder}/x.toml\", "
                        "or a table")
    p = Path(value)
    for candidate in ((base_dir / p) if not p.is_absolute() else p, MODELS_DIR / folder / f"{value}.toml"):
        if candidate.is_file():
            return read_document(candidate), candidate.resolve()
    raise SpecError(f"{where}={value!r}: no such file (looked for {base_dir / p} and "
                    f"{MODELS_DIR / folder / (value + '.toml')})")


def _check_job_keys(doc: dict, where: str) -> None:
    """Unknown top-level keys of a job document are errors (with a hint where they belong)."""
    unknown = sorted(set(doc) - set(_JOB_KEYS))
    if unknown:
        hint = ""
        if any(k in ("checkpoint", "tiers", "spares", "prediction", "catch_all", "step_time") for k in unknown):
            hint = "; keys of the recovery plan go under recovery. (e.g. recovery.checkpoint.interval)"
        elif any(k in ("faults", "network", "cards_per_node", "nodes_per_supernode") for k in unknown):
            hint = "; keys of the cluster go under cluster. (e.g. cluster.network.radix)"
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; expected only "
                        f"{', '.join(map(repr, _JOB_KEYS))}{hint}")


def expand_job(doc: dict, base_dir: Path, *, where: str = "job") -> tuple[dict, dict]:
    """Inline the cluster, its fault catalogue and the recovery plan a job document names.

    Returns:
        (the expanded document, ``{"cluster": path, "faults": path, "recovery": path}`` of
        the files read, ``None`` for inline tables).
    """
    _check_job_keys(doc, where)
    for key in ("cluster", "recovery"):
        if key not in doc:
            raise SpecError(f"{where}.{key}: required key is missing (a file name or a table)")
    out = {k: copy.deepcopy(v) for k, v in doc.items() if k not in ("cluster", "recovery")}
    cluster, cluster_path = _reference(doc["cluster"], f"{where}.cluster", "clusters", base_dir)
    faults_dir = cluster_path.parent if cluster_path is not None else base_dir
    if "faults" not in cluster:
        raise SpecError(f"{where}.cluster.faults: required key is missing (the fault catalogue file)")
    faults, faults_path = _reference(cluster["faults"], f"{where}.cluster.faults", "faults", faults_dir)
    cluster["faults"] = faults
    recovery, recovery_path = _reference(doc["recovery"], f"{where}.recovery", "recovery", base_dir)
    out["cluster"] = cluster
    out["recovery"] = recovery
    return out, {"cluster": cluster_path, "faults": faults_path, "recovery": recovery_path}


def load_goodput(doc: dict, sources: dict | None = None, *, label: str = "job"):
    """The :class:`markovsim.availability.AvailabilityModel` of an expanded job document,
    read by the availability package's own strict loaders (``load_faults``,
    ``load_cluster``, ``load_recovery``, ``build_model``); ``sources`` (from
    :func:`expand_job`) names the files in error messages."""
    from ._overrides import load_document
    from ._spec import Table
    from .availability import build_model, load_cluster, load_faults, load_recovery

    sources = sources or {}
    _check_job_keys(doc, label)
    t = Table({k: v for k, v in doc.items() if k in ("name", "cards")}, label)
    t.text("name", "")
    cards = t.integer("cards", minimum=1) if "cards" in t else None  # (integer(default=None) compares None)
    for key in ("cluster", "recovery"):
        if not isinstance(doc.get(key), dict):
            raise SpecError(f"{label}.{key}: expected an expanded table (see expand_job)")
    cluster = dict(doc["cluster"])
    faults = cluster.get("faults")
    if not isinstance(faults, dict):
        raise SpecError(f"{label}.cluster.faults: expected an expanded table (see expand_job)")

    def shown(part):
        src = sources.get(part)
        return f"{label}: {part} ({src})" if src is not None else f"{label}: {part}"

    def read(part, loader, document, name):
        try:
            return load_document(loader, document, Path(name), label=shown(part))
        except MarkovsimError as exc:
            message = str(exc)
            if not message.startswith(shown(part)):
                message = f"{shown(part)}: {message}"
            raise type(exc)(message) from None

    catalogue = read("faults", load_faults, faults, "faults.toml")
    # the cluster loader reads the catalogue it names: point it at a copy in the same place
    import tempfile

    from ._overrides import dumps_toml

    with tempfile.TemporaryDirectory(prefix="markovsim-") as tmp:
        fpath = Path(tmp) / "faults.toml"
        fpath.write_text(dumps_toml(faults), encoding="utf-8")
        cluster["faults"] = str(fpath)
        shape, _ = read("cluster", load_cluster, cluster, "cluster.toml")
    plan = read("recovery", load_recovery, doc["recovery"], "recovery.toml")
    try:
        return build_model(catalogue, shape, plan, cards=cards)
    except MarkovsimError as exc:
        raise type(exc)(f"{label}: {exc}") from None


class _Lazy(Mapping):
    """Outputs computed on first access (the optimal interval costs a search)."""

    def __init__(self, thunks: dict[str, Callable[[], float]]):
        self._thunks = thunks
        self._values: dict[str, float] = {}

    def __getitem__(self, key):
        if key not in self._values:
            self._values[key] = float(self._thunks[key]())
        return self._values[key]

    def __iter__(self):
        return iter(self._thunks)

    def __len__(self):
        return len(self._thunks)


def goodput_outputs_lazy(model) -> Mapping:
    """Scalar outputs of an availability model, each computed when first read."""
    import dataclasses as dc
    import functools

    from .availability import CAUSES, analyze, optimal_checkpoint_interval

    result = functools.cache(lambda: analyze(model))
    optimum = functools.cache(lambda: float(optimal_checkpoint_interval(model)))

    def at_optimum():
        cp = dc.replace(model.checkpoint, interval=optimum())
        return analyze(dc.replace(model, checkpoint=cp)).goodput

    thunks: dict[str, Callable[[], float]] = {
        "goodput": lambda: result().goodput,
        "availability": lambda: result().availability,
        "unavailability": lambda: result().unavailability,
        "interruptions_per_day": lambda: result().interruptions_per_day,
        "job_mtbf_s": lambda: result().job_mtbf,
        "lost_work_per_interruption_s": lambda: result().lost_work_per_interruption,
    }
    for i, cause in enumerate(CAUSES):
        thunks[f"lost_{cause}"] = (lambda i=i: result().lost[i])
    thunks.update({
        "checkpoint_interval_s": lambda: model.checkpoint.interval,
        "optimal_checkpoint_interval_s": optimum,
        "goodput_at_optimal_interval": at_optimum,
        "cards": lambda: model.cards,
    })
    return _Lazy(thunks)


def goodput_outputs(doc: dict, origin: Path, changed: bool = True, label: str | None = None) -> dict[str, float]:
    """Scalar outputs of an expanded job document (see :func:`expand_job`)."""
    model = load_goodput(doc, label=label or str(origin))
    lazy = goodput_outputs_lazy(model)
    return {k: lazy[k] for k in lazy}


def is_job(doc: dict) -> bool:
    return {"cluster", "recovery"} <= set(doc)


def is_recovery(doc: dict) -> bool:
    return {"tiers", "checkpoint", "catch_all"} <= set(doc)


def is_cluster(doc: dict) -> bool:
    return {"faults", "network", "cards"} <= set(doc)


def _is_goodput(doc: dict) -> bool:
    return is_job(doc) or is_recovery(doc) or is_cluster(doc)


# --------------------------------------------------------------------------- registry

KINDS: dict[str, ModelKind] = {
    "train": ModelKind("train", "plans", _is_train, train_outputs, _TRAIN_UNITS),
    "infer": ModelKind("infer", "inference", _is_infer, infer_outputs, _INFER_UNITS),
    "goodput": ModelKind("goodput", "recovery", _is_goodput, goodput_outputs, _goodput_units()),
}


def detect_kind(doc: dict, path: Path) -> ModelKind:
    """The kind of a model document: by its keys, else by the folder it lives in."""
    found = [k for k in KINDS.values() if k.detect(doc)]
    if len(found) == 1:
        return found[0]
    folder = Path(path).resolve().parent.name
    by_folder = [k for k in KINDS.values() if k.folder == folder]
    if len(by_folder) == 1:
        return by_folder[0]
    raise SpecError(
        f"{path}: cannot tell which kind of model file this is (known kinds: "
        f"{', '.join(KINDS)}; a plan file has workload, hardware, tp, pp and dp; an inference "
        "file has [prefill], [decode] and [tiers]; a job file has cluster and recovery)")


# --------------------------------------------------------------------------- case kinds


def _consume(model) -> dict:
    """Every key of a case's model table, marked as read (the domain loader is strict).

    ``types=(object, bool)``: ``Table.raw`` without types refuses booleans
    (``sequence_parallel = true``); any value is fine here, the domain loader checks it.
    """
    return {k: model.raw(k, types=(object, bool)) for k in list(model.keys())}


def _case_train(model) -> dict[str, float]:
    from .training import Scaling

    doc = _consume(model)
    lin = doc.pop("linearity", None)
    where = model.where or "case"
    spec = load_train(doc, Path("case.toml"), label=where)
    from .training import step_time

    out = breakdown_outputs(spec, step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency))
    if lin is not None:
        from ._spec import Table

        t = Table(lin, f"{where}.linearity")
        baseline = t.integer("baseline", minimum=1)
        cards = t.integer("cards", spec.plan.world_size, minimum=1)
        scaling = t.text("scaling", Scaling.FIXED_GLOBAL_BATCH.value, choices=tuple(s.value for s in Scaling))
        jitter = t.quantity("jitter_cv", "ratio", 0.0, minimum=0.0)
        t.finish()
        rows = linearity_points(spec, [baseline, cards], scaling=scaling, jitter_cv=jitter)
        out["linearity"] = rows[1]["linearity"]
    return out


def _case_infer(model) -> dict[str, float]:
    return infer_outputs(_consume(model), Path("case.toml"), label=model.where or "case")


def _case_goodput(model) -> Mapping:
    where = model.where or "case"
    doc, sources = expand_job(_consume(model), Path.cwd(), where=where)
    return goodput_outputs_lazy(load_goodput(doc, sources, label=where))


def register() -> None:
    """Register the case kinds ``train``, ``infer`` and ``goodput`` with the validation
    harness (a kind a domain package registered itself is left alone)."""
    from ._validate_harness import _REGISTRY, register_case_kind

    known = set(_REGISTRY)
    for name, fn in (("train", _case_train), ("infer", _case_infer), ("goodput", _case_goodput)):
        if name not in known:
            register_case_kind(name, fn)
