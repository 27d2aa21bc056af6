r"""Fault catalogues from fitted models, and the fitted-catalogue file format.

Two files come out of a fit:

``<name>.toml``, a plain fault catalogue
    ``[[components]]`` and ``[[modes]]`` exactly as :func:`markovsim.availability.load_faults`
    reads them: one component per fault class (scope ``node``, rate per node-second *up*,
    i.e. per running time) and one mode per class saying whether it interrupts the job.
    Faults of one class that start within ``event_window`` of each other count as one event
    (default 0: only faults at the same instant), and the mode's ``spare_nodes`` is the mean
    number of nodes such an event takes.
``<name>.fit.toml``, the fitted model (format ``markovsim-fitted-faults-1``)
    Everything :class:`~markovsim.availability.FaultModel` holds, with the interval of each
    fitted value, read back by :func:`load_fitted_catalogue`. Keys (one line each):

    ``format``, ``name``, ``data`` (the log's source), ``catalogue`` (the plain file, relative),
    ``nodes``, ``window``, ``burst_window``, ``repair_shared`` (probability that a fault after
    the first of its shock is repaired together with it), ``interval_level``, ``interval_method``;
    ``[arrivals]``: ``rates_per_d`` (calm, storm shock rates of the whole cluster, all nodes up),
    ``switch_per_d`` (calm->storm, storm->calm);
    ``[[classes]]``: ``name``, ``shock_share``, ``burst_probability``, ``continuation``,
    ``rate_per_d`` with ``rate_interval_per_d`` (faults per node-day up), ``repair`` (index into
    ``[[repair]]``);
    ``[[rate_classes]]``: ``name``, ``share`` with ``share_interval``, ``weight``;
    ``[[repair]]``: ``name``, ``alpha`` and ``generator_per_d`` (the phase-type representation
    :math:`(\alpha, S)`, :math:`S` per day), ``mean`` with ``mean_interval_d``.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np

from .._errors import SpecError
from .._io import Table, read_document
from .._units import DAY, HOUR
from ._common_cause import BurstSizes, MarkovModulatedPoisson
from ._faults import BlastRadius, Component, Effect, FaultCatalogue, FaultMode
from ._fit import FaultModel, FaultModelFit
from ._phasetype import PhaseType
from ._spec import load_faults

__all__ = ["fault_catalogue_from_fit", "write_fault_catalogue", "write_fitted_catalogue",
           "FittedCatalogue", "load_fitted_catalogue", "FITTED_FORMAT"]

FITTED_FORMAT = "markovsim-fitted-faults-1"


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_")


def fault_catalogue_from_fit(fit: FaultModelFit, *, event_window: float = 0.0,
                             effects: dict[str, Effect] | None = None, tiers: dict[str, str] | None = None,
                             default_tier: str = "job restart") -> FaultCatalogue:
    """A plain fault catalogue (today's format) from a fitted log: one component per class.

    Component ``rate`` = events of the class per node-second up, where faults of one class
    starting within ``event_window`` seconds of each other count as one event; the mode's
    ``spare_nodes`` = faults per event. The up-time is weighted by each node's expected
    rate-class weight (posterior mean of the fitted mixture), so the rate is the mean over
    nodes of a node's rate while up: what a job that swaps failed nodes for spares sees per
    node. (Unweighted, lemons, which are down more often, would pull it down by a few per cent.)

    Args:
        fit: the fit.
        event_window: grouping window for events, seconds (0: same instant only).
        effects: effect per class name (default :attr:`Effect.INTERRUPT`).
        tiers: first recovery tier per class name (default ``default_tier``).
        default_tier: tier of classes not in ``tiers``.
    """
    log = fit.log
    weight = fit.rate_classes.posterior @ fit.rate_classes.weights
    exposure = float((weight * (log.window - log.downtime_per_node())).sum())
    effects = effects or {}
    tiers = tiers or {}
    comps, modes = [], []
    for i, c in enumerate(log.classes):
        t = np.sort(log.start[log.fault_class == i])
        events = 1 + int(np.sum(np.diff(t) > event_window)) if t.size else 0
        comps.append(Component(name=_slug(c), scope="node", rate=events / exposure,
                               source=f"derived: {events} events / {exposure / DAY:.0f} weighted node-days up, "
                                      f"{fit.log.source}"))
        eff = effects.get(c, Effect.INTERRUPT)
        modes.append(FaultMode(name=c, component=_slug(c), share=1.0, effect=eff, blast_radius=BlastRadius.NODE,
                               tier=None if eff is Effect.TOLERATED else tiers.get(c, default_tier),
                               spare_nodes=t.size / events if events else 0.0,
                               source="derived: faults per event"))
    return FaultCatalogue(tuple(comps), tuple(modes)).validate()


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def write_fault_catalogue(catalogue: FaultCatalogue, path: str | Path, *, name: str, header: str = "") -> Path:
    """Write a catalogue in today's fault-file format (every number with a ``# derived`` /
    ``# source`` / ``# assumption`` note from the components' and modes' ``source``)."""
    path = Path(path)
    lines = [f"# {ln}" if ln else "#" for ln in header.strip().splitlines()] if header else []
    lines.append(f'name = "{name}"')
    for c in catalogue.components:
        note = c.source or "derived"
        lines += ["", "[[components]]", f'name = "{c.name}"', f'scope = "{c.scope}"',
                  f'rate = "{_fmt(c.rate * DAY)} /d"     # {note}',
                  f"units_per_scope = {_fmt(c.units_per_scope)}   # source: one per {c.scope}"]
    for m in catalogue.modes:
        note = m.source or "derived"
        lines += ["", "[[modes]]", f'name = "{m.name}"', f'component = "{m.component}"',
                  f"share = {_fmt(m.share)}   # derived: every fault of the class",
                  f'effect = "{m.effect.value}"', f'blast_radius = "{m.blast_radius.value}"']
        if m.tier is not None:
            lines.append(f'tier = "{m.tier}"')
        if m.spare_nodes:
            lines.append(f"spare_nodes = {_fmt(m.spare_nodes)}   # {note}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _array(values) -> str:
    return "[" + ", ".join(_fmt(float(v)) for v in values) + "]"


def write_fitted_catalogue(fit: FaultModelFit, path: str | Path, *, name: str, catalogue: str | None = None,
                           values=None) -> Path:
    """Write the fitted model (format ``markovsim-fitted-faults-1``; see the module docstring).

    Args:
        fit: the fit.
        path: the ``.fit.toml`` file to write.
        name: label.
        catalogue: the plain catalogue file it goes with (relative path), if any.
        values: ``fit.values()`` if already computed (else computed here).
    """
    path = Path(path)
    m = fit.model
    vals = {v.name: v for v in (values if values is not None else fit.values())}
    L = ["# Fitted fault model, written by markovsim.availability.write_fitted_catalogue.",
         "# Every number is derived from the log named in `data` by maximum likelihood;",
         "# intervals as `interval_method` says. Rates per node-day up (running time).",
         f'format = "{FITTED_FORMAT}"', f'name = "{name}"', f'data = "{fit.log.source}"']
    if catalogue:
        L.append(f'catalogue = "{catalogue}"')
    L += [f"nodes = {m.nodes}   # derived: nodes observed in the log",
          f'window = "{_fmt(fit.log.window / DAY)} d"   # derived: the log\'s window',
          f'burst_window = "{_fmt(m.burst_window / HOUR)} h"   # assumption: shock linkage window, chosen before fitting',
          f"repair_shared = {_fmt(m.repair_shared)}   # derived: faults repaired with an earlier one of their shock",
          f"interval_level = {fit.level}   # assumption: interval level",
          f'interval_method = "{FaultModelFit.METHOD}"',
          "", "[arrivals]",
          f"rates_per_d = {_array(m.shocks.rates * DAY)}   # derived: MMPP shock rates, calm and storm",
          f"switch_per_d = {_array(m.shocks.switch * DAY)}   # derived: calm->storm, storm->calm"]
    rates = m.class_rates()
    rep_names = fit._repair_names()
    for i, c in enumerate(m.classes):
        v = vals[f"rate {c}"]
        L += ["", "[[classes]]", f'name = "{c}"',
              f"shock_share = {_fmt(m.class_shares[i])}   # derived: share of shocks",
              f"burst_probability = {_fmt(m.sizes.burst_probability[i])}   # derived: zero-inflated geometric size",
              f"continuation = {_fmt(m.sizes.continuation[i])}   # derived: zero-inflated geometric size",
              f"shocks = {int(m.sizes.shocks[i])}   # derived: shocks seen",
              f"bursts = {int(m.sizes.bursts[i])}   # derived: shocks with more than one fault",
              f"rate_per_d = {_fmt(rates[i] * DAY)}   # derived: faults per node-day up",
              f"rate_interval_per_d = {_array([v.low / 1000, v.high / 1000])}",
              f"repair = {fit._repair_index[i]}   # derived: index into [[repair]]"]
    names = ["normal"] * (len(m.rate_class_shares) - 1) + ["lemon"]
    for r, (s, w) in enumerate(zip(m.rate_class_shares, m.rate_class_weights)):
        nm = names[r] if len(names) == 2 else f"class {r}"
        L += ["", "[[rate_classes]]", f'name = "{nm}"', f"share = {_fmt(s)}   # derived: Poisson mixture",
              f"weight = {_fmt(w)}   # derived: rate relative to the mean"]
        if r == len(names) - 1 and "lemon share" in vals:
            L.append(f"share_interval = {_array([vals['lemon share'].low, vals['lemon share'].high])}")
    for f, nm in zip(fit.repair_fits, rep_names):
        a, S = f.distribution.numpy()
        v = vals.get(f"repair mean {nm}")
        L += ["", "[[repair]]", f'name = "{nm}"', f"alpha = {_array(a)}",
              "generator_per_d = [" + ", ".join(_array(row * DAY) for row in S) + "]",
              f'mean = "{_fmt(float(f.distribution.mean()) / DAY)} d"   # derived: phase-type mean']
        if v is not None:
            L.append(f"mean_interval_d = {_array([v.low, v.high])}")
    path.write_text("\n".join(L) + "\n")
    return path


# ---------------------------------------------------------------------- reading

def _accepts_doc(method) -> bool:
    try:
        return "doc" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _get(table: Table, method: str, key: str, *args, doc: str, **kw):
    """Call ``table.<method>(key, ...)`` passing the one-line ``doc`` where the reader takes it."""
    fn = getattr(table, method)
    if _accepts_doc(fn):
        kw["doc"] = doc
    return fn(key, *args, **kw)


def _numbers(table: Table, key: str, doc: str, *, size: int | None = None, minimum: float = 0.0) -> np.ndarray:
    raw = _get(table, "raw", key, types=(list,), doc=doc)
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise SpecError(f"{table.where}.{key}={raw!r}: expected a list of numbers") from None
    if size is not None and arr.shape[0] != size:
        raise SpecError(f"{table.where}.{key}={raw!r}: expected {size} numbers")
    if not np.all(np.isfinite(arr)) or np.any(arr < minimum):
        raise SpecError(f"{table.where}.{key}={raw!r}: expected finite numbers >= {minimum}")
    return arr


@dataclasses.dataclass(frozen=True)
class FittedCatalogue:
    """A fitted-catalogue file read back.

    Attributes:
        name: label.
        model: the fitted :class:`FaultModel` (point estimates).
        catalogue: the plain catalogue it names (``None`` if it names none).
        data: the source of the log it was fitted on.
        intervals: ``{value name: (low, high)}`` as written.
    """

    name: str
    model: FaultModel
    catalogue: FaultCatalogue | None
    data: str
    intervals: dict[str, tuple[float, float]]


def load_fitted_catalogue(path: str | Path) -> FittedCatalogue:
    """Read a ``markovsim-fitted-faults-1`` file (see the module docstring); strict like every reader."""
    path = Path(path)
    top = Table(read_document(path), "")
    fmt = _get(top, "text", "format", doc="file format tag, 'markovsim-fitted-faults-1'")
    if fmt != FITTED_FORMAT:
        raise SpecError(f"{path}: format={fmt!r}; expected {FITTED_FORMAT!r}")
    name = _get(top, "text", "name", doc="label of the fitted model")
    data = _get(top, "text", "data", "", doc="source of the log the model was fitted on")
    cat_file = _get(top, "text", "catalogue", None, doc="plain fault catalogue written with the fit (relative path)")
    nodes = _get(top, "integer", "nodes", minimum=1, doc="nodes of the fitted cluster")
    _get(top, "quantity", "window", "time", doc="length of the fitted log's window")
    burst_window = _get(top, "quantity", "burst_window", "time", doc="faults of a class this close form one shock")
    shared = _get(top, "probability", "repair_shared", 0.0,
                  doc="probability that a fault after the first of its shock is repaired together with it")
    _get(top, "probability", "interval_level", doc="level of every *_interval")
    _get(top, "text", "interval_method", "", doc="how the intervals were obtained")
    arr = _get(top, "table", "arrivals", doc="Markov-modulated shock arrivals of the whole cluster")
    rates = _numbers(arr, "rates_per_d", "shock rates in the calm and storm states, per day", size=2)
    switch = _numbers(arr, "switch_per_d", "calm->storm and storm->calm switching rates, per day", size=2)
    arr.finish()
    reps = []
    intervals: dict[str, tuple[float, float]] = {}
    for t in _get(top, "tables", "repair", doc="phase-type repair distributions"):
        rname = _get(t, "text", "name", doc="which classes use it")
        alpha = _numbers(t, "alpha", "initial phase probabilities (1 - sum: atom at zero)")
        S = _get(t, "raw", "generator_per_d", types=(list,),
                 doc="sub-generator S of the phase-type distribution, per day")
        try:
            S = np.asarray(S, dtype=float)
        except (TypeError, ValueError):
            raise SpecError(f"{t.where}.generator_per_d={S!r:.80}: expected a square matrix of numbers") from None
        if S.shape != (alpha.size, alpha.size):
            raise SpecError(f"{t.where}.generator_per_d: expected a {alpha.size}x{alpha.size} matrix")
        _get(t, "quantity", "mean", "time", doc="mean repair time (for reading; recomputed from alpha, S)")
        if "mean_interval_d" in t:
            iv = _numbers(t, "mean_interval_d", "interval of the mean repair time, days", size=2)
            intervals[f"repair mean {rname}"] = (float(iv[0]), float(iv[1]))
        t.finish()
        reps.append(PhaseType(alpha, S / DAY).validate())
    classes, shares, phi, theta, shocks, bursts, rep_idx = [], [], [], [], [], [], []
    for t in _get(top, "tables", "classes", doc="fault classes with their shock and rate values"):
        c = _get(t, "text", "name", doc="fault class")
        classes.append(c)
        shares.append(_get(t, "probability", "shock_share", doc="probability that a shock is of this class"))
        phi.append(_get(t, "probability", "burst_probability", doc="probability that a shock takes more than one node"))
        theta.append(_get(t, "quantity", "continuation", "ratio", maximum=0.999999,
                          doc="geometric continuation of a burst's extra nodes (mean extra 1/(1-x))"))
        shocks.append(_get(t, "integer", "shocks", 0, minimum=0, doc="shocks seen in the log"))
        bursts.append(_get(t, "integer", "bursts", 0, minimum=0, doc="of which with more than one fault"))
        _get(t, "quantity", "rate", "rate", doc="faults per node-day up (derived from the shock values)")
        iv = _numbers(t, "rate_interval_per_d", "interval of the rate, per node-day up", size=2)
        intervals[f"rate {c}"] = (float(iv[0]), float(iv[1]))
        k = _get(t, "integer", "repair", minimum=0, doc="index of its repair distribution in [[repair]]")
        if k >= len(reps):
            raise SpecError(f"{t.where}.repair={k}: only {len(reps)} [[repair]] tables")
        rep_idx.append(k)
        t.finish()
    rc_share, rc_weight = [], []
    for t in _get(top, "tables", "rate_classes", doc="node rate classes (the last: lemons)"):
        _get(t, "text", "name", doc="rate class label")
        rc_share.append(_get(t, "probability", "share", doc="share of nodes in the class"))
        rc_weight.append(_get(t, "quantity", "weight", "ratio", doc="fault rate relative to the cluster mean"))
        if "share_interval" in t:
            iv = _numbers(t, "share_interval", "interval of the share", size=2)
            intervals["lemon share"] = (float(iv[0]), float(iv[1]))
        t.finish()
    top.finish()
    sh = np.asarray(shares)
    model = FaultModel(
        classes=tuple(classes), nodes=nodes,
        shocks=MarkovModulatedPoisson(rates=rates / DAY, switch=switch / DAY), class_shares=sh / sh.sum(),
        sizes=BurstSizes(burst_probability=np.asarray(phi), continuation=np.asarray(theta),
                         shocks=np.asarray(shocks, float), bursts=np.asarray(bursts, float),
                         extra=np.zeros(len(classes))),
        rate_class_shares=np.asarray(rc_share), rate_class_weights=np.asarray(rc_weight),
        repair=tuple(reps[k] for k in rep_idx), burst_window=burst_window, repair_shared=shared)
    catalogue = load_faults(path.parent / cat_file) if cat_file else None
    return FittedCatalogue(name=name, model=model, catalogue=catalogue, data=data, intervals=intervals)
