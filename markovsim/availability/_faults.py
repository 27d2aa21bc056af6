r"""Fault catalogue: components, their failure rates, and fault modes with their effects.

A :class:`Component` fails at ``rate`` per unit per second (from an AFR, FIT or MTBF; see
:mod:`markovsim._units`). It comes ``units_per_scope`` times per unit of its scope (per
card, node, supernode, switch, optical module, link or job), so the number of units a job
sees follows the cluster's shape (:func:`markovsim.availability.component_counts`).
A :class:`FaultMode` takes a ``share`` of its component's failures and says what they do:
interrupt the job, degrade it (sub-health: running at ``degraded_throughput`` until
detected after ``detection_time``) or nothing (tolerated), and which recovery tier is
called first.

With independent components the job's fault rate of mode :math:`i` is

.. math::  \lambda_i(N) = n_{c(i)}(N)\, u_{c(i)}\, r_{c(i)}\, s_i,

with :math:`n` the count of the component's scope for a job of :math:`N` cards,
:math:`u` units per scope, :math:`r` the unit rate and :math:`s` the mode's share.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

from .._errors import InvalidParameterError, check_nonnegative, check_probability
from ._topology import SCOPES, ClusterShape, component_counts

__all__ = [
    "Effect",
    "BlastRadius",
    "Component",
    "FaultMode",
    "FaultCatalogue",
    "mode_rates",
    "interruption_rate",
    "job_mtbf",
    "per_card_fault_rate",
    "mtbf_doubling_ratio",
    "superlinear_share_for_ratio",
]


class Effect(enum.Enum):
    """What a fault does to the job."""

    INTERRUPT = "interrupt"  #: the job stops until a recovery tier has handled it
    DEGRADE = "degrade"  #: sub-health: the job runs slower until the fault is isolated
    TOLERATED = "tolerated"  #: absorbed (e.g. a single optical lane with lane grouping)


class BlastRadius(enum.Enum):
    """The smallest unit a fault takes out."""

    CARD = "card"
    NODE = "node"
    SUPERNODE = "supernode"
    JOB = "job"


@dataclasses.dataclass(frozen=True)
class Component:
    """A kind of hardware or software unit with a failure rate.

    Attributes:
        name: unique name, e.g. ``"optical_module"``.
        scope: what its count follows: one of ``card``, ``node``, ``supernode``, ``switch``,
            ``optical_module``, ``link``, ``job``.
        rate: failures per unit per second (use ``markovsim.afr_to_rate`` etc.).
        units_per_scope: units per scope unit (e.g. 8 HBM stacks per card).
        source: where the rate comes from (seed id, public input or ``assumption: why``).
    """

    name: str
    scope: str
    rate: float
    units_per_scope: float = 1.0
    source: str = ""


@dataclasses.dataclass(frozen=True)
class FaultMode:
    """One way a component fails, with its effect and the tier that handles it first.

    Attributes:
        name: unique name.
        component: name of the :class:`Component`.
        share: fraction of the component's failures that are this mode, in [0, 1].
        effect: :class:`Effect`.
        blast_radius: :class:`BlastRadius`.
        tier: name of the first recovery tier called (``None`` for tolerated faults).
        degraded_throughput: throughput fraction while a ``DEGRADE`` fault is undetected.
        detection_time: seconds until a ``DEGRADE`` fault is detected and handed to ``tier``.
        spare_nodes: nodes taken from the spare pool when the fault is repaired by a tier
            that replaces hardware (0 for software faults).
        predictable: share of these faults that predictive maintenance can see coming, in
            [0, 1] (moved off gracefully when predictive maintenance is on).
        source: where the share and the mapping come from.
    """

    name: str
    component: str
    share: float
    effect: Effect
    blast_radius: BlastRadius
    tier: str | None
    degraded_throughput: float = 1.0
    detection_time: float = 0.0
    spare_nodes: float = 0.0
    predictable: float = 0.0
    source: str = ""


@dataclasses.dataclass(frozen=True)
class FaultCatalogue:
    """Components and fault modes (see the module docstring)."""

    components: tuple[Component, ...]
    modes: tuple[FaultMode, ...]

    def validate(self) -> "FaultCatalogue":
        """Check names, scopes, rates and shares; returns ``self``."""
        names = [c.name for c in self.components]
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"components: duplicate names in {names}")
        for c in self.components:
            if c.scope not in SCOPES:
                raise InvalidParameterError(
                    f"components.{c.name}.scope={c.scope!r}: expected one of {', '.join(SCOPES)}")
            check_nonnegative(f"components.{c.name}.rate", c.rate, unit="per second")
            check_nonnegative(f"components.{c.name}.units_per_scope", c.units_per_scope)
        modes = [m.name for m in self.modes]
        if len(set(modes)) != len(modes):
            raise InvalidParameterError(f"fault modes: duplicate names in {modes}")
        share = {n: 0.0 for n in names}
        for m in self.modes:
            where = f"modes.{m.name}"
            if m.component not in share:
                raise InvalidParameterError(
                    f"{where}.component={m.component!r}: not a component (known: {', '.join(names)})")
            check_probability(f"{where}.share", m.share)
            check_probability(f"{where}.degraded_throughput", m.degraded_throughput)
            check_probability(f"{where}.predictable", m.predictable)
            check_nonnegative(f"{where}.detection_time", m.detection_time, unit="s")
            check_nonnegative(f"{where}.spare_nodes", m.spare_nodes)
            if not isinstance(m.effect, Effect):
                raise InvalidParameterError(f"{where}.effect={m.effect!r}: expected an Effect")
            if m.effect is not Effect.TOLERATED and m.tier is None:
                raise InvalidParameterError(f"{where}.tier=None: a {m.effect.value} fault needs a recovery tier")
            share[m.component] += m.share
        for n, s in share.items():
            if s > 1.0 + 1e-9:
                raise InvalidParameterError(
                    f"components.{n}: fault-mode shares add up to {s:.6g}; expected at most 1")
        return self

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise InvalidParameterError(f"component {name!r} not in the catalogue")

    def replace_rate(self, name: str, rate: float) -> "FaultCatalogue":
        """A copy with component ``name`` failing at ``rate`` per unit per second."""
        comps = tuple(dataclasses.replace(c, rate=rate) if c.name == name else c for c in self.components)
        self.component(name)
        return dataclasses.replace(self, components=comps)


def mode_rates(catalogue: FaultCatalogue, shape: ClusterShape, cards: int | None = None) -> np.ndarray:
    """Job-level rate (per second) of every fault mode, in catalogue order.

    Args:
        catalogue: the fault catalogue.
        shape: the cluster shape (gives the component counts).
        cards: cards used by the job (default: the whole cluster).
    """
    counts = component_counts(shape, cards)
    comps = {c.name: c for c in catalogue.components}
    return np.array([
        counts[comps[m.component].scope] * comps[m.component].units_per_scope
        * comps[m.component].rate * m.share
        for m in catalogue.modes
    ], dtype=float)


def interruption_rate(catalogue: FaultCatalogue, shape: ClusterShape, cards: int | None = None) -> float:
    """Rate (per second) of faults that interrupt a job of ``cards`` cards (``INTERRUPT`` modes)."""
    rates = mode_rates(catalogue, shape, cards)
    mask = np.array([m.effect is Effect.INTERRUPT for m in catalogue.modes])
    return float(rates[mask].sum()) if mask.any() else 0.0


def job_mtbf(catalogue: FaultCatalogue, shape: ClusterShape, cards: int | None = None) -> float:
    """Mean time between job interruptions, seconds (``inf`` when nothing interrupts)."""
    rate = interruption_rate(catalogue, shape, cards)
    return float("inf") if rate == 0 else 1.0 / rate


def per_card_fault_rate(catalogue: FaultCatalogue, shape: ClusterShape, *,
                        effect: Effect = Effect.INTERRUPT) -> float:
    """The cluster's rate of ``effect`` faults divided by its cards (per card per second).

    Network and supernode components are spread over the cards: this is the rate a job
    sees per card it holds, for use by other models (e.g. inference instances).
    """
    rates = mode_rates(catalogue, shape, shape.cards)
    mask = np.array([m.effect is effect for m in catalogue.modes])
    return float(rates[mask].sum()) / shape.cards if mask.any() else 0.0


def mtbf_doubling_ratio(catalogue: FaultCatalogue, shape: ClusterShape, cards: int) -> float:
    """``job_mtbf(2 cards) / job_mtbf(cards)`` with the network sized for each job.

    Independent per-card failures give exactly 1/2; a network that needs an extra switch
    level at the doubled size gives a little less.
    """
    net = dataclasses.replace(shape.network, levels=None)
    big = dataclasses.replace(shape, network=net, cards=max(shape.cards, 2 * cards))
    return job_mtbf(catalogue, big, 2 * cards) / job_mtbf(catalogue, big, cards)


def superlinear_share_for_ratio(ratio: float) -> float:
    r"""Share of the fault rate that must grow as :math:`N^2` for MTBF to fall to ``ratio`` on doubling.

    With :math:`\lambda(N) = aN + bN^2` and :math:`s = bN / \lambda(N)`,
    :math:`\lambda(2N)/\lambda(N) = 2 + 2s`, so :math:`s = (1/\text{ratio} - 2)/2`
    (0 for 1/2, 1/2 for 1/3; above 1 is impossible with this form).
    """
    if not 0 < ratio <= 0.5:
        raise InvalidParameterError(f"ratio={ratio!r}: expected an MTBF ratio in (0, 0.5]")
    return (1.0 / ratio - 2.0) / 2.0
