"""Recovery tiers of a large expert-parallel inference fleet.

Each tier is a small frozen object holding its duration (seconds), its coverage (the
probability that it handles a fault that reaches it) and, implicitly, its fall-back (the
next tier down the ladder). The ladder for one card fault on a serving instance is

.. code-block:: text

    soft fault (no hardware swap needed)          hard fault (the card must be replaced)
      token-level retry   (S-INF-3)  --c-->  stall, then UP
                                                reduced-card elastic (S-INF-4) --c--> stall, then DEGRADED
      | 1-c, or tier absent                       | 1-c, or tier absent
      v                                           v
    instance outage: traffic switch (S-INF-1) --c--> switched ; 1-c --> manual switch
      then in-instance restart: fast (S-INF-2, 5 min) with coverage c, else the slow
      restart (20 min before S-INF-2); hardware repair returns failed cards to the pool.

The slow restart (:class:`InstanceRestart`) and the repair process (:class:`HardwareRepair`)
are always present: they are the last fall-back. The other four tiers are optional
(``None`` means the tier is not deployed).
"""

from __future__ import annotations

import dataclasses
import enum

import jax

from .._errors import InvalidParameterError, check_positive, check_probability

__all__ = [
    "TokenRetry", "FastRestart", "TrafficSwitch", "ElasticContinuation", "InstanceRestart",
    "HardwareRepair", "RecoveryTiers", "Tier",
]


class Tier(enum.Enum):
    """The optional recovery tiers, in the order :func:`tier_ladder` adds them."""

    TRAFFIC_SWITCH = "traffic_switch"
    FAST_RESTART = "fast_restart"
    TOKEN_RETRY = "token_retry"
    ELASTIC = "elastic"


def _register(cls):
    fields = [f.name for f in dataclasses.fields(cls)]
    return jax.tree_util.register_dataclass(cls, data_fields=fields, meta_fields=[])


@_register
@dataclasses.dataclass(frozen=True)
class TokenRetry:
    """Token-level retry (S-INF-3): in-flight requests resume token by token after a soft fault.

    Attributes:
        stall_time: seconds the instance stalls (requests held, not lost).
        coverage: probability that a soft fault is handled this way (else: instance outage).
    """

    stall_time: float
    coverage: float

    def validate(self) -> "TokenRetry":
        check_positive("token_retry.stall_time", self.stall_time, unit="s")
        check_probability("token_retry.coverage", self.coverage)
        return self


@_register
@dataclasses.dataclass(frozen=True)
class FastRestart:
    """Fast in-instance restart (S-INF-2: 20 min -> 5 min).

    Attributes:
        restart_time: mean seconds of a fast restart.
        coverage: probability a restart is fast (else the slow :class:`InstanceRestart`).
    """

    restart_time: float
    coverage: float

    def validate(self) -> "FastRestart":
        check_positive("fast_restart.restart_time", self.restart_time, unit="s")
        check_probability("fast_restart.coverage", self.coverage)
        return self


@_register
@dataclasses.dataclass(frozen=True)
class TrafficSwitch:
    """Switching an instance's traffic to the other instances (S-INF-1).

    Until the switch, requests routed to the dead instance are lost; after it, the
    instance only lowers the fleet's capacity.

    Attributes:
        switch_time: mean seconds from the fault to the automatic switch (detection + re-route).
        coverage: probability that the automatic switch works.
        manual_time: mean seconds of the manual switch, the fall-back.
    """

    switch_time: float
    coverage: float
    manual_time: float

    def validate(self) -> "TrafficSwitch":
        check_positive("traffic_switch.switch_time", self.switch_time, unit="s")
        check_probability("traffic_switch.coverage", self.coverage)
        check_positive("traffic_switch.manual_time", self.manual_time, unit="s")
        return self


@_register
@dataclasses.dataclass(frozen=True)
class ElasticContinuation:
    """Reduced-card elastic continuation (S-INF-4): experts migrate off a failed card.

    The instance stalls for ``migration_time`` (requests held), then serves on ``E - 1``
    cards at ``degraded_capacity`` of its full throughput until a replacement card is
    hot-added (``reintegration_time``, only while the spare pool has a card).

    Attributes:
        migration_time: mean seconds of the expert migration.
        coverage: probability that a hard fault is handled this way (else: instance outage).
        reintegration_time: mean seconds to add a replacement card back.
        degraded_capacity: throughput on ``E - 1`` cards as a fraction of full; ``None``
            means ``(E - 1) / E`` (throughput proportional to the cards).
    """

    migration_time: float
    coverage: float
    reintegration_time: float
    degraded_capacity: float | None = None

    def validate(self) -> "ElasticContinuation":
        check_positive("elastic.migration_time", self.migration_time, unit="s")
        check_probability("elastic.coverage", self.coverage)
        check_positive("elastic.reintegration_time", self.reintegration_time, unit="s")
        if self.degraded_capacity is not None:
            check_probability("elastic.degraded_capacity", self.degraded_capacity)
        return self


@_register
@dataclasses.dataclass(frozen=True)
class InstanceRestart:
    """The baseline (slow) in-instance restart, the fall-back of every other tier.

    Attributes:
        restart_time: mean seconds (20 min before S-INF-2).
    """

    restart_time: float

    def validate(self) -> "InstanceRestart":
        check_positive("restart.restart_time", self.restart_time, unit="s")
        return self


@_register
@dataclasses.dataclass(frozen=True)
class HardwareRepair:
    """Hardware repair: a failed card returns to the spare pool after ``repair_time``.

    Attributes:
        repair_time: mean seconds from a hard fault to the card's return (each card
            repaired independently).
    """

    repair_time: float

    def validate(self) -> "HardwareRepair":
        check_positive("repair.repair_time", self.repair_time, unit="s")
        return self


@dataclasses.dataclass(frozen=True)
class RecoveryTiers:
    """The recovery ladder: two mandatory fall-backs and four optional tiers.

    Attributes:
        restart: the slow in-instance restart (always present).
        repair: hardware repair (always present).
        token_retry, fast_restart, traffic_switch, elastic: ``None`` when not deployed.
    """

    restart: InstanceRestart
    repair: HardwareRepair
    token_retry: TokenRetry | None = None
    fast_restart: FastRestart | None = None
    traffic_switch: TrafficSwitch | None = None
    elastic: ElasticContinuation | None = None

    def validate(self) -> "RecoveryTiers":
        """Check every value; returns ``self`` (raises :class:`InvalidParameterError`)."""
        for name, kind in (("restart", InstanceRestart), ("repair", HardwareRepair)):
            if not isinstance(getattr(self, name), kind):
                raise InvalidParameterError(
                    f"tiers.{name}={getattr(self, name)!r}: expected a {kind.__name__}")
        for name, kind in (("token_retry", TokenRetry), ("fast_restart", FastRestart),
                           ("traffic_switch", TrafficSwitch), ("elastic", ElasticContinuation)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise InvalidParameterError(
                    f"tiers.{name}={value!r}: expected a {kind.__name__} or None")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                value.validate()
        return self

    def only(self, *tiers: Tier) -> "RecoveryTiers":
        """The same ladder with only the named optional tiers deployed."""
        keep = {t.value for t in tiers}
        return dataclasses.replace(self, **{t.value: (getattr(self, t.value) if t.value in keep else None)
                                            for t in Tier})

    @property
    def deployed(self) -> tuple[Tier, ...]:
        """The optional tiers present, in ladder order."""
        return tuple(t for t in Tier if getattr(self, t.value) is not None)


jax.tree_util.register_dataclass(
    RecoveryTiers,
    data_fields=[f.name for f in dataclasses.fields(RecoveryTiers)],
    meta_fields=[],
)
