"""Training jobs: a cluster (with its fault catalogue) and a recovery plan, as one document,
and their scalar outputs: the ``goodput`` kind of model document.

A job document::

    name = "10K-card pre-training"      # optional
    cluster = "atlas800t_a2_10k"        # a bare preset name, a path relative to this file, or a table
    recovery = "ascend_tiered"          # likewise (models/recovery/)
    cards = 4096                        # optional: the job's size (default: the whole cluster)

A reference may be ``{file = "...", <changes>}``: the file with the changes deep-merged
over it (``recovery = {file = "ascend_tiered", checkpoint = {interval = "30 min"}}``).

Outputs (:func:`job_outputs`): ``goodput``, ``availability``, ``unavailability``,
``interruptions_per_day``, ``job_mtbf_s``, ``lost_work_per_interruption_s``, ``lost_<cause>``
for each of :data:`~markovsim.availability.CAUSES`, ``checkpoint_interval_s``,
``optimal_checkpoint_interval_s``, ``goodput_at_optimal_interval`` and ``cards``, from
:func:`~markovsim.availability.analyze` and
:func:`~markovsim.availability.optimal_checkpoint_interval`; each is computed when first read
(the optimum costs a search).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

from .._errors import SpecError
from .._io import ModelKind, Reference, Table, base_of, label, load_with, reads_document, reference
from ._faults import FaultCatalogue
from ._goodput import CAUSES
from ._optimum import analyze_and_optimum
from ._model import AvailabilityModel
from ._spec import (CLUSTER_REFERENCES, RecoveryPlan, build_model, cluster_from_document,
                    recovery_from_document)
from ._topology import ClusterShape

__all__ = ["Job", "JOB_REFERENCES", "JOB_OUTPUT_UNITS", "job_from_document", "load_job", "job_outputs",
           "is_job", "is_cluster", "is_recovery", "MODEL_KIND"]

_JOB_KEYS = ("name", "cluster", "recovery", "cards")

#: the keys of a job document that name other model files
JOB_REFERENCES = {"cluster": Reference("clusters", CLUSTER_REFERENCES), "recovery": Reference("recovery")}

#: the unit of each output of :func:`job_outputs`
JOB_OUTPUT_UNITS = {
    "goodput": "1", "availability": "1", "unavailability": "1", "interruptions_per_day": "1/d",
    "job_mtbf_s": "s", "lost_work_per_interruption_s": "s", **{f"lost_{c}": "1" for c in CAUSES},
    "checkpoint_interval_s": "s", "optimal_checkpoint_interval_s": "s", "goodput_at_optimal_interval": "1",
    "cards": "cards",
}


@dataclasses.dataclass(frozen=True)
class Job:
    """A training job read from a job document.

    Attributes:
        name: the job's name (default: "<cluster> with <recovery plan>").
        model: the availability model of the job.
        cluster: the cluster's shape.
        catalogue: the cluster's fault catalogue.
        plan: the recovery plan.
    """

    name: str
    model: AvailabilityModel
    cluster: ClusterShape
    catalogue: FaultCatalogue
    plan: RecoveryPlan


def _check_keys(doc: Mapping) -> None:
    """Unknown keys of a job document are errors, with a hint where they belong."""
    unknown = sorted(set(doc) - set(_JOB_KEYS))
    if unknown:
        hint = ""
        if any(k in ("checkpoint", "tiers", "spares", "prediction", "catch_all", "step_time") for k in unknown):
            hint = "; keys of the recovery plan go under recovery. (e.g. recovery.checkpoint.interval)"
        elif any(k in ("faults", "network", "cards_per_node", "nodes_per_supernode") for k in unknown):
            hint = "; keys of the cluster go under cluster. (e.g. cluster.network.radix)"
        raise SpecError(f"unknown key(s) {', '.join(map(repr, unknown))}; expected only "
                        f"{', '.join(map(repr, _JOB_KEYS))}{hint}")


@reads_document
def job_from_document(doc: Mapping, *, where: str = "job", base: Path | None = None) -> Job:
    """A job from its document (see the module documentation).

    Args:
        doc: the job document; ``cluster`` and ``recovery`` are references or tables.
        where: the document's name in error messages.
        base: the directory references are relative to (default: the document's own file's,
            else the working directory).

    Raises:
        SpecError: a bad document or referenced file (naming it and the key), or a job larger
            than its cluster.
    """
    _check_keys(doc)
    t = Table(doc, "", schema="job")
    name = t.text("name", "", doc="a label for the job (default: cluster with recovery plan)")
    cards = t.integer("cards", None, minimum=1, doc="cards the job runs on (default: the whole cluster)")
    found = {}
    for key, ref in JOB_REFERENCES.items():
        value = t.raw(key, types=(str, dict), doc=f"the {key} file: a bare name in models/{ref.folder}/, "
                                                  "a path relative to this file, or a table")
        found[key] = reference(value, folder=ref.folder, base=base, where=key)
    t.finish()
    cluster = found["cluster"]
    shape, catalogue = cluster_from_document(cluster, where=label("cluster", cluster), base=base_of(cluster, base))
    recovery = found["recovery"]
    plan = recovery_from_document(recovery, where=label("recovery", recovery), base=base_of(recovery, base))
    if cards is not None and cards > shape.cards:
        raise SpecError(f"cards={cards}: more than the {shape.cards} cards of the cluster {shape.name!r}; "
                        f"expected at most {shape.cards} (or a larger cluster)")
    model = build_model(catalogue, shape, plan, cards=cards)
    return Job(name or f"{shape.name} with {plan.name}", model, shape, catalogue, plan)


def load_job(path: str | Path) -> Job:
    """Read a job file (see the module documentation); its references resolve against the
    job file's directory."""
    return load_with(job_from_document, path, folder="jobs")


class _Lazy(Mapping):
    """Outputs computed on first access."""

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


def job_outputs(model: AvailabilityModel) -> Mapping[str, float]:
    """The scalar outputs of an availability model (see the module documentation), each
    computed when first read; ``dict(job_outputs(model))`` computes them all."""
    both = functools.cache(lambda: analyze_and_optimum(model))  # one compiled program for both

    def result():
        return both()[0]

    def optimum():
        return float(both()[1].interval)

    def at_optimum():  # the goodput the search found at that interval
        return both()[1].goodput

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


def _outputs(doc: Mapping, *, where: str, base: Path | None) -> Mapping[str, float]:
    return job_outputs(job_from_document(doc, where=where, base=base).model)


def is_job(doc: Mapping) -> bool:
    """Whether a document is a job (it names a cluster and a recovery plan)."""
    return {"cluster", "recovery"} <= set(doc)


def is_recovery(doc: Mapping) -> bool:
    """Whether a document is a recovery plan."""
    return {"tiers", "checkpoint", "catch_all"} <= set(doc)


def is_cluster(doc: Mapping) -> bool:
    """Whether a document is a cluster."""
    return {"faults", "network", "cards"} <= set(doc)


#: the ``goodput`` kind: job documents and their outputs
MODEL_KIND = ModelKind(name="goodput", folder="jobs", detect=is_job, references=JOB_REFERENCES,
                       outputs=_outputs, units=JOB_OUTPUT_UNITS)
