"""Model files for availability: clusters (with their fault catalogue), fault catalogues and
recovery plans (TOML, read strictly through :mod:`markovsim._io`).

Three kinds of file; every number is followed by a ``# source: ...`` (seed id or
public_inputs line), ``# derived: ...`` or ``# assumption: why`` comment (checked by the
tests for the shipped files):

``models/clusters/*.toml``
    ``name``, ``cards``, ``cards_per_node``, ``nodes_per_supernode``,
    ``optical_modules_per_supernode``, ``faults`` (path of a fault file, relative to the
    cluster file) and a ``[network]`` table (``kind = "fat_tree"``, ``radix``, ``levels``,
    ``nics_per_card``, ``first_optical_level``).
``models/faults/*.toml``
    ``[[components]]`` (``name``, ``scope``, ``rate`` with a unit such as ``"4 AFR"``,
    ``"200 FIT"``, ``"1e-6 /h"``, ``units_per_scope``) and ``[[modes]]`` (``name``,
    ``component``, ``share``, ``effect``, ``blast_radius``, ``tier``,
    ``degraded_throughput``, ``detection_time``, ``spare_nodes``, ``predictable``).
``models/recovery/*.toml``
    ``name``, ``catch_all`` (the tier that takes fault modes whose tier the plan lacks),
    ``step_time``, ``[checkpoint]``, optional ``[spares]`` and ``[prediction]``, and
    ``[[tiers]]`` in ladder order, each with ``rollback``, ``fallback`` (a tier name),
    ``takes_spare`` and its phases. ``[spares]`` may carry ``[spares.repair]``, a
    hyper-exponential repair time (``instant``: share of repairs that take no time;
    ``[[spares.repair.phases]]`` with ``share`` and ``mean``), which the spare pool's chain
    counts per phase (small pools only: see ``MAX_POOL_STATES``)::

        [spares]
        size = 8
        [spares.repair]
        instant = 0.1
        [[spares.repair.phases]]
        share = 0.7
        mean = "2 h"
        [[spares.repair.phases]]
        share = 0.2
        mean = "30 h"
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import numpy as np

from .._errors import InvalidParameterError, MarkovsimWarning, SpecError, check_integer
from .._io import Reference, Table, base_of, label, load_with, reads_document, reference
from .._status import caller_stacklevel
from ._keydocs import KEY_DOCS
from ._faults import BlastRadius, Component, Effect, FaultCatalogue, FaultMode, mode_rates
from ._model import AvailabilityModel, CheckpointPolicy, RecoveryTier, Rollback, SaveMode, SparePool
from ._topology import SCOPES, ClusterShape, FatTree

__all__ = ["RecoveryPlan", "load_cluster", "load_faults", "load_recovery", "load_model", "build_model",
           "faults_from_document", "cluster_from_document", "recovery_from_document", "CLUSTER_REFERENCES"]

#: the keys of a cluster file that name other model files
CLUSTER_REFERENCES = {"faults": Reference("faults")}


@dataclasses.dataclass(frozen=True)
class RecoveryPlan:
    """A recovery ladder with its checkpoint policy, spare pool and predictive maintenance.

    Attributes:
        name: label.
        tiers: the ladder (fallbacks as indices, strictly upward).
        catch_all: index of the tier that takes fault modes whose named tier is absent.
        checkpoint: the checkpoint policy.
        spares: the spare pool (``None``: never short of spares).
        prediction_coverage: share of the predictable faults that predictive maintenance moves off.
        migration_time: seconds per graceful migration.
        step_time: seconds per training step.
    """

    name: str
    tiers: tuple[RecoveryTier, ...]
    catch_all: int
    checkpoint: CheckpointPolicy
    spares: SparePool | None = None
    prediction_coverage: float = 0.0
    migration_time: float = 0.0
    step_time: float = 10.0

    def tier_index(self, name: str) -> int | None:
        for i, t in enumerate(self.tiers):
            if t.name == name:
                return i
        return None


def _wrap(fn, path):
    try:
        return fn()
    except InvalidParameterError as exc:  # value errors from validate(): name the file
        raise SpecError(f"{path}: {exc}") from None


def load_faults(path: str | Path) -> FaultCatalogue:
    """Read a fault catalogue file (a path, or the bare name of a preset in ``models/faults/``)."""
    return load_with(faults_from_document, path, folder="faults")


@reads_document
def faults_from_document(doc: dict, *, where: str = "faults", base: Path | None = None) -> FaultCatalogue:
    """A fault catalogue from its document (see the module docstring); errors name ``where``."""
    path = where
    top = Table(doc, "", schema="faults", docs=KEY_DOCS["faults"])
    top.text("name", "")
    comps = []
    for t in top.tables("components"):
        comps.append(Component(
            name=t.text("name"),
            scope=t.text("scope", choices=SCOPES),
            rate=t.quantity("rate", "rate"),
            units_per_scope=t.quantity("units_per_scope", "ratio", 1.0),
        ))
        t.finish()
    modes = []
    for t in top.tables("modes"):
        effect = Effect(t.text("effect", choices=tuple(e.value for e in Effect)))
        modes.append(FaultMode(
            name=t.text("name"),
            component=t.text("component"),
            share=t.probability("share"),
            effect=effect,
            blast_radius=BlastRadius(t.text("blast_radius", choices=tuple(b.value for b in BlastRadius))),
            tier=t.text("tier", None),
            degraded_throughput=t.probability("degraded_throughput", 1.0),
            detection_time=t.quantity("detection_time", "time", 0.0),
            spare_nodes=t.quantity("spare_nodes", "ratio", 0.0),
            predictable=t.probability("predictable", 0.0),
        ))
        t.finish()
    top.finish()
    return _wrap(lambda: FaultCatalogue(tuple(comps), tuple(modes)).validate(), path)


def load_cluster(path: str | Path) -> tuple[ClusterShape, FaultCatalogue]:
    """Read a cluster file (a path, or a bare name in ``models/clusters/``) and the fault
    catalogue it names."""
    return load_with(cluster_from_document, path, folder="clusters")


@reads_document
def cluster_from_document(doc: dict, *, where: str = "cluster",
                          base: Path | None = None) -> tuple[ClusterShape, FaultCatalogue]:
    """A cluster and its fault catalogue from the cluster's document. ``faults`` names a file
    (relative to ``base``, the cluster file's directory, or a bare preset name) or is the
    catalogue inline."""
    path = where
    t = Table(doc, "", schema="cluster", docs=KEY_DOCS["cluster"])
    name = t.text("name")
    cards = t.integer("cards", minimum=1)
    per_node = t.integer("cards_per_node", minimum=1)
    per_super = t.integer("nodes_per_supernode", 1, minimum=1)
    optics_super = t.quantity("optical_modules_per_supernode", "ratio", 0.0)
    faults = t.raw("faults", types=(str, dict))
    net = t.table("network")
    net.text("kind", choices=("fat_tree",))
    tree = FatTree(radix=net.integer("radix", minimum=2), levels=net.integer("levels", minimum=1) if "levels" in net else None,
                   nics_per_card=net.integer("nics_per_card", 1, minimum=0),
                   first_optical_level=net.integer("first_optical_level", 0, minimum=0))
    net.finish()
    t.finish()
    shape = _wrap(lambda: ClusterShape(name=name, cards=cards, cards_per_node=per_node,
                                       nodes_per_supernode=per_super, network=tree,
                                       optical_modules_per_supernode=optics_super).validate(), path)
    catalogue = reference(faults, folder="faults", base=base_of(doc, base), where="faults")
    return shape, faults_from_document(catalogue, where=label("faults", catalogue), base=base_of(doc, base))


_PHASES = ("detection", "isolation", "rescheduling", "comm_setup_base", "compile", "degraded_time")


def load_recovery(path: str | Path) -> RecoveryPlan:
    """Read a recovery-plan file (a path, or a bare name in ``models/recovery/``)."""
    return load_with(recovery_from_document, path, folder="recovery")


def _repair_distribution(r: Table):
    """A hyper-exponential repair time from ``[spares.repair]``: ``instant`` (share of repairs
    that take no time) and ``[[spares.repair.phases]]`` with ``share`` and ``mean``."""
    from ._phasetype import hyperexponential

    instant = r.probability("instant", 0.0)
    phases = r.tables("phases")
    if not phases:
        raise SpecError(f"{r.where}.phases: expected at least one phase ([[...phases]] with share and mean)")
    shares, means = [], []
    for ph in phases:
        shares.append(ph.probability("share"))
        means.append(ph.quantity("mean", "time", strictly_positive=True))
        ph.finish()
    r.finish()
    total = sum(shares) + instant
    if not abs(total - 1.0) <= 1e-9:
        raise SpecError(f"{r.where}: phase shares {shares} plus instant={instant!r} sum to {total!r}; "
                        "expected 1")
    if instant >= 1.0:
        raise SpecError(f"{r.where}.instant={instant!r}: expected below 1 (some repairs take time)")
    branch = [x / (1.0 - instant) for x in shares]
    return hyperexponential(branch, [1.0 / m for m in means], zero_mass=instant)


@reads_document
def recovery_from_document(doc: dict, *, where: str = "recovery", base: Path | None = None) -> RecoveryPlan:
    """A recovery plan from its document (see the module docstring); errors name ``where``."""
    top = Table(doc, "", schema="recovery", docs=KEY_DOCS["recovery"])
    name = top.text("name")
    step = top.quantity("step_time", "time", strictly_positive=True)
    raw = top.tables("tiers")
    names = []
    for t in raw:
        n = t.text("name")
        if n in names:
            raise SpecError(f"{t.where}.name={n!r}: duplicate tier name")
        names.append(n)
    tiers = []
    for i, t in enumerate(raw):
        fb_name = t.text("fallback", None)
        if fb_name is None:
            fb = -1
        elif fb_name == names[i]:
            raise SpecError(f"{t.where}.fallback={fb_name!r}: a tier cannot escalate to itself")
        elif fb_name not in names:
            raise SpecError(f"{t.where}.fallback={fb_name!r}: no such tier (tiers: {', '.join(names)})")
        else:
            fb = names.index(fb_name)
            if fb < i:
                raise SpecError(f"{t.where}.fallback={fb_name!r}: escalation must go up the ladder "
                                f"(list tiers from the lightest to the heaviest)")
        phases = {p: t.quantity(p, "time", 0.0) for p in _PHASES}
        state = t.quantity("state", "data", 0.0)
        # a state to move needs the bandwidth it moves at: no default (1 B/s was a silent 12-day restart)
        try:
            bandwidth = t.quantity("bandwidth", "bandwidth", ... if state > 0 else math.inf, strictly_positive=True)
        except SpecError as exc:
            raise SpecError(f"{exc} (the tier moves state = {state:.6g} bytes; give the bandwidth it moves at, "
                            f"e.g. bandwidth = \"20 GB/s\")") from None
        tier = RecoveryTier(
            name=names[i],
            rollback=Rollback(t.text("rollback", choices=tuple(r.value for r in Rollback))),
            fallback=fb,
            takes_spare=t.raw("takes_spare", False, types=(bool,)),
            comm_setup_per_card=t.quantity("comm_setup_per_card", "time", 0.0),
            state_bytes=state,
            bandwidth_bytes_per_s=bandwidth,
            coverage=t.probability("coverage", 1.0),
            degraded_throughput=t.probability("degraded_throughput", 1.0),
            **phases,
        )
        if fb == -1 and tier.coverage != 1.0:
            raise SpecError(f"{t.where}.coverage={tier.coverage}: a tier without fallback must have coverage 1")
        t.finish()
        tiers.append(tier)
    catch = top.text("catch_all")
    if catch not in names:
        raise SpecError(f"catch_all={catch!r}: no such tier (tiers: {', '.join(names)})")
    c = top.table("checkpoint")
    mode = SaveMode(c.text("save_mode", "blocking", choices=tuple(m.value for m in SaveMode)))
    cp = CheckpointPolicy(
        interval=c.quantity("interval", "time", strictly_positive=True),
        save_time=c.quantity("save_time", "time"),
        save_mode=mode,
        write_time=c.quantity("write_time", "time", 0.0),
        write_interference=c.probability("write_interference", 0.0),
        memory_per_persistent=c.integer("memory_per_persistent", 0, minimum=0),
        memory_save_time=c.quantity("memory_save_time", "time", 0.0),
    )
    c.finish()
    spares = None
    if "spares" in top:
        s = top.table("spares")
        size = s.integer("size", minimum=0)
        activation = s.quantity("activation_time", "time", 0.0)
        repair = _repair_distribution(s.table("repair")) if "repair" in s.keys() else None
        if repair is None:
            spares = SparePool(size=size, repair_time=s.quantity("repair_time", "time", strictly_positive=True),
                               activation_time=activation)
        else:
            mean = float(repair.mean())
            given = s.quantity("repair_time", "time", mean, strictly_positive=True)
            if not abs(given - mean) <= 1e-6 * mean:
                raise SpecError(f"{s.where}.repair_time={given!r} s: the repair phases have mean {mean!r} s; "
                                "expected the same (or leave repair_time out)")
            spares = SparePool.with_repair(size, repair, activation_time=activation)
        s.finish()
    cover, migration = 0.0, 0.0
    if "prediction" in top:
        p = top.table("prediction")
        cover = p.probability("coverage")
        migration = p.quantity("migration_time", "time")
        p.finish()
    top.finish()
    return RecoveryPlan(name=name, tiers=tuple(tiers), catch_all=names.index(catch), checkpoint=cp,
                        spares=spares, prediction_coverage=cover, migration_time=migration, step_time=step)


def build_model(catalogue: FaultCatalogue, shape: ClusterShape, plan: RecoveryPlan, *,
                cards: int | None = None) -> AvailabilityModel:
    """Turn a catalogue, a cluster and a recovery plan into an :class:`AvailabilityModel`.

    Tolerated modes are left out; a mode whose tier the plan lacks enters ``plan.catch_all``.

    Args:
        catalogue: fault catalogue.
        shape: cluster shape.
        plan: recovery plan.
        cards: cards of the job (default: the whole cluster).
    """
    catalogue.validate()
    shape.validate()
    cards = shape.cards if cards is None else check_integer("cards", cards, minimum=1)
    if cards > shape.cards:
        raise InvalidParameterError(
            f"cards={cards}: the job is larger than the cluster {shape.name!r} of {shape.cards} cards; "
            f"expected at most {shape.cards} (or a larger cluster file)")
    rates = mode_rates(catalogue, shape, cards)
    keep = [i for i, m in enumerate(catalogue.modes) if m.effect is not Effect.TOLERATED]
    modes = [catalogue.modes[i] for i in keep]
    entry = []
    for m in modes:
        k = plan.tier_index(m.tier)
        entry.append(plan.catch_all if k is None else k)
    _warn_unused(plan, modes, entry, rates[keep])
    model = AvailabilityModel(
        cards=float(cards),
        fault_names=tuple(m.name for m in modes),
        fault_tier=tuple(entry),
        fault_interrupts=tuple(m.effect is Effect.INTERRUPT for m in modes),
        # numpy leaves (JAX takes them as they are): a JAX array here would start XLA and
        # compile a conversion before the first answer, which the numpy path does not need
        fault_rates=np.asarray(rates[keep], dtype=np.float64),
        fault_degraded_throughput=np.asarray([m.degraded_throughput for m in modes], dtype=np.float64),
        fault_detection_time=np.asarray([m.detection_time for m in modes], dtype=np.float64),
        fault_spare_nodes=np.asarray([m.spare_nodes for m in modes], dtype=np.float64),
        fault_predicted=np.asarray([plan.prediction_coverage * m.predictable for m in modes], dtype=np.float64),
        tiers=plan.tiers,
        checkpoint=plan.checkpoint,
        spares=plan.spares,
        migration_time=plan.migration_time,
        step_time=plan.step_time,
    )
    return model.validate()


def _warn_unused(plan: RecoveryPlan, modes, entry, rates) -> None:
    """Warn about fault modes that never occur in this job, tiers that no fault reaches, and
    fault modes sent to the catch-all tier while a tier no mode enters directly looks like
    the one they name (a renamed tier)."""
    never = [m.name for m, r in zip(modes, rates) if not r > 0]
    if never:
        warnings.warn(
            f"fault modes {never} never occur in this job (rate 0: their component has no units in this "
            "cluster, or a zero rate or share); they are unreachable and change nothing", MarkovsimWarning,
            stacklevel=caller_stacklevel())
    direct = {k for k, r in zip(entry, rates) if r > 0}
    reached = set(direct)
    for k, tier in enumerate(plan.tiers):  # fallbacks point up the ladder: one pass in order
        if k in reached and tier.fallback >= 0 and float(tier.coverage) < 1.0:
            reached.add(tier.fallback)
    unused = [t.name for k, t in enumerate(plan.tiers) if k not in reached]
    if unused:
        warnings.warn(
            f"recovery plan {plan.name!r}: tiers {unused} are reached by no fault mode (no mode names them "
            f"and no reached tier falls back to them), so they change nothing", MarkovsimWarning,
            stacklevel=caller_stacklevel())
    absent: dict[str, int] = {}
    for m, r in zip(modes, rates):
        if r > 0 and plan.tier_index(m.tier) is None:
            absent[m.tier] = absent.get(m.tier, 0) + 1
    named = {m.tier for m in modes}
    # a rung in the middle of the ladder exists to take some faults first; one that no mode
    # names, while modes name tiers the plan lacks, is most likely a renamed tier
    orphans = [t.name for k, t in enumerate(plan.tiers)
               if t.name not in named and k != plan.catch_all and t.fallback >= 0]
    if absent and orphans:
        names = ", ".join(f"{t!r} ({n} mode{'s' if n > 1 else ''})" for t, n in absent.items())
        warnings.warn(
            f"recovery plan {plan.name!r}: fault modes name tiers the plan lacks and went to catch_all "
            f"{plan.tiers[plan.catch_all].name!r}: {names}, while the ladder's tiers {orphans} are named by no "
            "fault mode: a renamed tier? (name it as the fault catalogue does)", MarkovsimWarning,
            stacklevel=caller_stacklevel())


def load_model(cluster: str | Path, recovery: str | Path, *, cards: int | None = None) -> AvailabilityModel:
    """Load a cluster file (with its faults) and a recovery file into a model.

    Args:
        cluster: a cluster file, or the bare name of a preset in ``models/clusters/``
            (``"atlas800t_a2_10k"``).
        recovery: a recovery file, or a bare name in ``models/recovery/``.
        cards: cards of the job (default: the whole cluster).

    Raises:
        SpecError: a bad file, naming the file and the field.
    """
    shape, catalogue = load_cluster(cluster)
    plan = load_recovery(recovery)
    return _wrap(lambda: build_model(catalogue, shape, plan, cards=cards), recovery)
