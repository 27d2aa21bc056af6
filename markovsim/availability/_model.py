r"""The availability model: recovery tiers, checkpoint policy, spares, and the pytree that
the goodput solver and the Monte-Carlo twin take.

Recovery tiers
    A :class:`RecoveryTier` lasts a sum of phases. The *unexposed* phases (detection,
    isolation, rescheduling) run while the job is down and no new fault is counted; the
    *exposed* phases (communication set-up, which grows with the job's cards, state
    transfer = state bytes / bandwidth, compilation and warm-up) run on the whole job, and a
    fault during them restarts the tier (Daly's restart treatment). A tier succeeds with
    probability ``coverage``; when it fails, its whole duration is lost and the ``fallback``
    tier (strictly higher in the ladder) is called. What a successful tier rolls back is a
    :class:`Rollback`. After it the job may run degraded (elastic, reduced-card) at
    ``degraded_throughput`` for ``degraded_time``.

All numeric fields are JAX leaves (``jax.grad`` of goodput gives a sensitivity for each);
names, indices and enums are static.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidParameterError, check_integer, check_nonnegative, check_positive, check_probability

__all__ = [
    "Rollback",
    "SaveMode",
    "RecoveryTier",
    "CheckpointPolicy",
    "SparePool",
    "AvailabilityModel",
    "single_tier_model",
]


def _static(**kw):
    return dataclasses.field(metadata={"static": True}, **kw)


class Rollback(enum.Enum):
    """What a successful recovery tier throws away."""

    NONE = "none"  #: nothing: the job resumes where it stopped (retry, online repair, last words)
    STEP = "step"  #: the step in flight (on average half a step)
    MEMORY = "memory"  #: back to the last in-memory checkpoint (persistent if there is none)
    PERSISTENT = "persistent"  #: back to the last checkpoint on persistent storage


class SaveMode(enum.Enum):
    """How the persistent checkpoint is written."""

    BLOCKING = "blocking"  #: the job stops for ``save_time``
    BACKGROUND = "background"  #: the job stops for a snapshot, the write overlaps the next segment


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RecoveryTier:
    """One recovery tier (see the module docstring). Times in seconds.

    Attributes:
        name: label, e.g. ``"job restart"``.
        rollback: :class:`Rollback` of a successful recovery.
        fallback: index of the tier called when this one fails (``-1``: none, then
            ``coverage`` must be 1).
        takes_spare: whether the tier replaces the failed hardware from the spare pool.
        detection: time to detect the fault.
        isolation: time to isolate / diagnose it.
        rescheduling: time to reschedule processes or pods.
        comm_setup_base: fixed part of the communication set-up.
        comm_setup_per_card: set-up seconds added per card of the job.
        state_bytes: state to move or load (bytes).
        bandwidth_bytes_per_s: bandwidth of that transfer (bytes per second).
        compile: graph compilation and warm-up.
        coverage: probability that the tier succeeds.
        degraded_time: running time at reduced throughput after the tier (elastic).
        degraded_throughput: throughput fraction during ``degraded_time``.
    """

    name: str = _static()
    rollback: Rollback = _static(default=Rollback.PERSISTENT)
    fallback: int = _static(default=-1)
    takes_spare: bool = _static(default=False)
    detection: float = 0.0
    isolation: float = 0.0
    rescheduling: float = 0.0
    comm_setup_base: float = 0.0
    comm_setup_per_card: float = 0.0
    state_bytes: float = 0.0
    bandwidth_bytes_per_s: float = 1.0
    compile: float = 0.0
    coverage: float = 1.0
    degraded_time: float = 0.0
    degraded_throughput: float = 1.0

    def downtime(self):
        """Unexposed phases: detection + isolation + rescheduling (seconds)."""
        return self.detection + self.isolation + self.rescheduling

    def restart_time(self, cards):
        """Exposed phases for a job of ``cards`` cards (seconds)."""
        return (self.comm_setup_base + self.comm_setup_per_card * cards
                + self.state_bytes / self.bandwidth_bytes_per_s + self.compile)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CheckpointPolicy:
    """When and how checkpoints are saved. Times in seconds.

    Attributes:
        interval: work between persistent checkpoints.
        save_time: blocking time of one persistent save (the snapshot, for background saves).
        save_mode: :class:`SaveMode`.
        write_time: background write duration after the snapshot (background only); until it
            ends the previous persistent checkpoint is the last durable one.
        write_interference: throughput fraction lost while the background write runs.
        memory_per_persistent: in-memory checkpoints per persistent one (0: no in-memory level).
        memory_save_time: blocking time of one in-memory (peer) checkpoint.
    """

    interval: float
    save_time: float
    save_mode: SaveMode = _static(default=SaveMode.BLOCKING)
    write_time: float = 0.0
    write_interference: float = 0.0
    memory_per_persistent: int = _static(default=0)
    memory_save_time: float = 0.0


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SparePool:
    """A pool of spare nodes with exponential repair (times in seconds).

    Attributes:
        size: spare nodes (hot or warm).
        repair_time: mean time to repair and return a failed node.
        activation_time: time to bring a spare in (0 for hot spares).
    """

    size: int = _static(default=0)
    repair_time: float = 86400.0
    activation_time: float = 0.0


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class AvailabilityModel:
    """Everything the goodput solver needs, as one pytree (rates per second, times in seconds).

    Build it with :func:`markovsim.availability.build_model` (from a catalogue, a cluster
    and a recovery description) or directly, then call :meth:`validate`.

    Attributes:
        cards: cards in the job (enters the communication set-up of every tier).
        fault_names: label of each fault mode.
        fault_tier: index of the first tier of each mode.
        fault_interrupts: whether each mode interrupts the job (else it degrades it).
        fault_rates: job-level rate of each mode, per second.
        fault_degraded_throughput: throughput fraction while a degrading mode is undetected.
        fault_detection_time: time until a degrading mode is detected.
        fault_spare_nodes: spare nodes a mode takes when repaired by a ``takes_spare`` tier.
        fault_predicted: share of each mode moved off gracefully by predictive maintenance.
        tiers: the recovery ladder (fallbacks point strictly upward).
        checkpoint: the checkpoint policy.
        spares: the spare pool (``None``: spares never run out).
        migration_time: cost of one graceful (predicted) migration.
        step_time: duration of one training step.
    """

    cards: float
    fault_names: tuple = _static()
    fault_tier: tuple = _static()
    fault_interrupts: tuple = _static()
    fault_rates: jnp.ndarray = None
    fault_degraded_throughput: jnp.ndarray = None
    fault_detection_time: jnp.ndarray = None
    fault_spare_nodes: jnp.ndarray = None
    fault_predicted: jnp.ndarray = None
    tiers: tuple = ()
    checkpoint: CheckpointPolicy = None
    spares: SparePool | None = None
    migration_time: float = 0.0
    step_time: float = 1.0

    def validate(self) -> "AvailabilityModel":
        """Check every value on the host; raise :class:`InvalidParameterError` naming the field."""
        m = len(self.fault_names)
        k = len(self.tiers)
        if k == 0:
            raise InvalidParameterError("tiers=(): expected at least one recovery tier")
        for name in ("fault_tier", "fault_interrupts"):
            if len(getattr(self, name)) != m:
                raise InvalidParameterError(f"{name}: expected {m} entries (one per fault mode)")
        for name in ("fault_rates", "fault_degraded_throughput", "fault_detection_time",
                     "fault_spare_nodes", "fault_predicted"):
            v = np.asarray(getattr(self, name), dtype=float)
            if v.shape != (m,):
                raise InvalidParameterError(f"{name}: expected shape ({m},), got {v.shape}")
        check_positive("cards", self.cards)
        check_nonnegative("fault_rates", self.fault_rates, unit="per second")
        check_probability("fault_degraded_throughput", self.fault_degraded_throughput)
        check_nonnegative("fault_detection_time", self.fault_detection_time, unit="s")
        check_nonnegative("fault_spare_nodes", self.fault_spare_nodes)
        check_probability("fault_predicted", self.fault_predicted)
        for i, t in enumerate(self.fault_tier):
            if not 0 <= int(t) < k:
                raise InvalidParameterError(
                    f"fault_tier[{i}]={t} ({self.fault_names[i]}): expected a tier index in [0, {k - 1}]")
        for i, tier in enumerate(self.tiers):
            where = f"tiers[{i}] ({tier.name})"
            if not isinstance(tier.rollback, Rollback):
                raise InvalidParameterError(f"{where}.rollback={tier.rollback!r}: expected a Rollback")
            for f in ("detection", "isolation", "rescheduling", "comm_setup_base", "comm_setup_per_card",
                      "state_bytes", "compile", "degraded_time"):
                check_nonnegative(f"{where}.{f}", getattr(tier, f))
            check_positive(f"{where}.bandwidth_bytes_per_s", tier.bandwidth_bytes_per_s)
            check_probability(f"{where}.coverage", tier.coverage)
            check_probability(f"{where}.degraded_throughput", tier.degraded_throughput)
            if tier.fallback == i:
                raise InvalidParameterError(f"{where}.fallback={i}: a tier cannot escalate to itself")
            if tier.fallback != -1 and not i < tier.fallback < k:
                raise InvalidParameterError(
                    f"{where}.fallback={tier.fallback}: expected a higher tier index in [{i + 1}, {k - 1}] "
                    f"(escalation goes up the ladder) or -1 for none")
            if tier.fallback == -1 and float(tier.coverage) != 1.0:
                raise InvalidParameterError(
                    f"{where}.coverage={float(tier.coverage)}: a tier without fallback must have coverage 1")
        cp = self.checkpoint
        if cp is None:
            raise InvalidParameterError("checkpoint=None: expected a CheckpointPolicy")
        check_positive("checkpoint.interval", cp.interval)
        check_nonnegative("checkpoint.save_time", cp.save_time)
        check_nonnegative("checkpoint.write_time", cp.write_time)
        check_probability("checkpoint.write_interference", cp.write_interference)
        check_integer("checkpoint.memory_per_persistent", cp.memory_per_persistent, minimum=0)
        check_nonnegative("checkpoint.memory_save_time", cp.memory_save_time)
        n = max(cp.memory_per_persistent, 1)
        if cp.save_mode is SaveMode.BACKGROUND:
            if not (1 - float(cp.write_interference)) * float(cp.write_time) < float(cp.interval) / n:
                raise InvalidParameterError(
                    f"checkpoint.write_time={float(cp.write_time)}: a background write must end within the first "
                    f"in-memory segment ({float(cp.interval) / n} s of work)")
        if cp.save_mode is SaveMode.BACKGROUND:
            check_positive("checkpoint.write_time", cp.write_time)
        if self.spares is not None:
            check_integer("spares.size", self.spares.size, minimum=0)
            check_positive("spares.repair_time", self.spares.repair_time)
            check_nonnegative("spares.activation_time", self.spares.activation_time)
        check_nonnegative("migration_time", self.migration_time)
        check_positive("step_time", self.step_time)
        return self


def single_tier_model(interval, save_time, mtbf, restart_time, downtime=0.0) -> AvailabilityModel:
    """The checkpoint-only model: one fault mode, one job-restart tier (rollback to the
    last persistent checkpoint), blocking saves. Its goodput equals
    :func:`markovsim.availability.checkpoint_goodput` exactly.

    Args:
        interval: work between checkpoints, seconds.
        save_time: blocking save time, seconds.
        mtbf: job MTBF, seconds.
        restart_time: exposed restart time, seconds.
        downtime: unexposed time before the restart, seconds.
    """
    f = lambda x: jnp.asarray(x, dtype=jnp.result_type(float))  # noqa: E731
    tier = RecoveryTier(name="job restart", rollback=Rollback.PERSISTENT, detection=f(downtime),
                        comm_setup_base=f(restart_time))
    return AvailabilityModel(
        cards=f(1.0), fault_names=("fault",), fault_tier=(0,), fault_interrupts=(True,),
        fault_rates=jnp.reshape(1.0 / f(mtbf), (1,)), fault_degraded_throughput=jnp.ones(1),
        fault_detection_time=jnp.zeros(1), fault_spare_nodes=jnp.zeros(1), fault_predicted=jnp.zeros(1),
        tiers=(tier,), checkpoint=CheckpointPolicy(interval=f(interval), save_time=f(save_time)),
    )
