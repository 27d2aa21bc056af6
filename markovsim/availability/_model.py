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
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import (InvalidParameterError, check_integer, check_nonnegative, check_positive, check_probability,
                       _bytes)

__all__ = [
    "min_background_interval",
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
        bandwidth_bytes_per_s: bandwidth of that transfer (bytes per second); required
            (finite) when ``state_bytes > 0``, and ``inf`` (no transfer) by default.
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
    bandwidth_bytes_per_s: float = math.inf
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


#: the largest spare pool the goodput chain takes (its generator has 2 size + 3 states)
MAX_SPARES = 256


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SparePool:
    """A pool of spare nodes (times in seconds).

    Attributes:
        size: spare nodes (hot or warm).
        repair_time: mean time to repair and return a failed node.
        activation_time: time to bring a spare in (0 for hot spares).
        repair: the repair-time distribution, a phase-type
            :class:`~markovsim.availability.PhaseType` (e.g. a fitted hyperexponential), or
            ``None`` (default): exponential. Its shape enters the pool's chain (nodes in
            repair counted per phase, :mod:`markovsim.availability._pool_chain`) with its
            time scale set so the mean is ``repair_time``; the host check requires its own
            mean to equal ``repair_time`` (relative 1e-6): build it with :meth:`with_repair`.
            The chain is limited to ``MAX_POOL_STATES`` states (a
            ``PoolChainTooLargeError`` names the size a larger pool would need).
    """

    size: int = _static(default=0)
    repair_time: float = 86400.0
    activation_time: float = 0.0
    repair: object = None

    @classmethod
    def with_repair(cls, size: int, repair, activation_time: float = 0.0) -> "SparePool":
        """A pool whose repair time follows ``repair`` (a ``PhaseType``), ``repair_time`` its mean."""
        return cls(size=size, repair_time=jnp.asarray(float(repair.mean())), activation_time=activation_time,
                   repair=repair)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class AvailabilityModel:
    """Everything the goodput solver needs, as one pytree (rates per second of running, times in seconds).

    Build it with :func:`markovsim.availability.build_model` (from a catalogue, a cluster
    and a recovery description) or directly, then call :meth:`validate`.

    Attributes:
        cards: cards in the job (enters the communication set-up of every tier).
        fault_names: label of each fault mode.
        fault_tier: index of the first tier of each mode.
        fault_interrupts: whether each mode interrupts the job (else it degrades it).
        fault_rates: job-level rate of each mode, per second of *running* (the fault clocks
            stop while the job is down). Rates counted per wall-clock second (field counts
            over calendar time) convert with ``markovsim._units.per_running_rate(rate,
            availability)``; results are per wall-clock time (see :class:`GoodputResult`).
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
        return self.check_structure()._check_values()

    def check_structure(self) -> "AvailabilityModel":
        """Check what does not depend on numeric values (counts, shapes, the ladder's links);
        raises :class:`InvalidParameterError`. Runs under ``jit`` too (it reads no leaf values)."""
        m = len(self.fault_names)
        k = len(self.tiers)
        if k == 0:
            raise InvalidParameterError("tiers=(): expected at least one recovery tier")
        for name in ("fault_tier", "fault_interrupts"):
            if len(getattr(self, name)) != m:
                raise InvalidParameterError(f"{name}: expected {m} entries (one per fault mode)")
        for name in ("fault_rates", "fault_degraded_throughput", "fault_detection_time",
                     "fault_spare_nodes", "fault_predicted"):
            shape = jnp.shape(getattr(self, name))
            if shape[-1:] != (m,):
                raise InvalidParameterError(f"{name}: expected shape ({m},), got {shape}")
        for i, t in enumerate(self.fault_tier):
            if not 0 <= int(t) < k:
                raise InvalidParameterError(
                    f"fault_tier[{i}]={t} ({self.fault_names[i]}): expected a tier index in [0, {k - 1}]")
        for i, tier in enumerate(self.tiers):
            where = f"tiers[{i}] ({tier.name})"
            if not isinstance(tier.rollback, Rollback):
                raise InvalidParameterError(f"{where}.rollback={tier.rollback!r}: expected a Rollback")
            if tier.fallback == i:
                raise InvalidParameterError(f"{where}.fallback={i}: a tier cannot escalate to itself")
            if tier.fallback != -1 and not i < tier.fallback < k:
                raise InvalidParameterError(
                    f"{where}.fallback={tier.fallback}: expected a higher tier index in [{i + 1}, {k - 1}] "
                    f"(escalation goes up the ladder) or -1 for none")
        if self.checkpoint is None:
            raise InvalidParameterError("checkpoint=None: expected a CheckpointPolicy")
        if not isinstance(self.checkpoint.save_mode, SaveMode):
            raise InvalidParameterError(f"checkpoint.save_mode={self.checkpoint.save_mode!r}: expected a SaveMode")
        check_integer("checkpoint.memory_per_persistent", self.checkpoint.memory_per_persistent, minimum=0)
        if self.spares is not None:
            size = check_integer("spares.size", self.spares.size, minimum=0)
            # the exponential spare-pool chain has 2 size + 3 states, solved densely some 40
            # times per goodput: refuse pools whose chain would not fit or take minutes
            if self.spares.repair is None and size > MAX_SPARES:
                raise InvalidParameterError(
                    f"spares.size={size}: expected at most {MAX_SPARES} spare nodes; the spare-pool chain "
                    f"has 2 size + 3 = {2 * size + 3:.4g} states, built densely it would need about "
                    f"{_bytes(8.0 * (2 * size + 3) ** 2)} of memory and a solve time growing with its cube")
            if self.spares.repair is not None:
                from ._phasetype import PhaseType
                from ._pool_chain import check_pool_size

                if not isinstance(self.spares.repair, PhaseType):
                    raise InvalidParameterError(
                        f"spares.repair={self.spares.repair!r}: expected a PhaseType or None (exponential)")
                check_pool_size(self.spares.size, self.spares.repair.alpha.shape[-1])
        return self

    def _check_values(self) -> "AvailabilityModel":
        check_positive("cards", self.cards)
        check_nonnegative("fault_rates", self.fault_rates, unit="per second")
        check_probability("fault_degraded_throughput", self.fault_degraded_throughput)
        check_nonnegative("fault_detection_time", self.fault_detection_time, unit="s")
        check_nonnegative("fault_spare_nodes", self.fault_spare_nodes)
        check_probability("fault_predicted", self.fault_predicted)
        for i, tier in enumerate(self.tiers):
            where = f"tiers[{i}] ({tier.name})"
            for f in ("detection", "isolation", "rescheduling", "comm_setup_base", "comm_setup_per_card",
                      "state_bytes", "compile", "degraded_time"):
                check_nonnegative(f"{where}.{f}", getattr(tier, f))
            bw = np.asarray(tier.bandwidth_bytes_per_s, dtype=float)
            if np.any(np.isnan(bw) | (bw <= 0)) or (np.any(np.isinf(bw)) and np.any(np.asarray(tier.state_bytes) > 0)):
                raise InvalidParameterError(
                    f"{where}.bandwidth_bytes_per_s={float(np.ravel(bw)[0])!r}: expected a finite positive "
                    f"bandwidth (bytes per second) for its state_bytes={float(np.ravel(tier.state_bytes)[0])!r}")
            check_probability(f"{where}.coverage", tier.coverage)
            check_probability(f"{where}.degraded_throughput", tier.degraded_throughput)
            if tier.fallback == -1 and np.any(np.asarray(tier.coverage, dtype=float) != 1.0):
                raise InvalidParameterError(
                    f"{where}.coverage={float(np.ravel(tier.coverage)[0])}: a tier without fallback must have "
                    "coverage 1")
        cp = self.checkpoint
        check_positive("checkpoint.interval", cp.interval)
        check_nonnegative("checkpoint.save_time", cp.save_time)
        check_nonnegative("checkpoint.write_time", cp.write_time)
        check_probability("checkpoint.write_interference", cp.write_interference)
        check_nonnegative("checkpoint.memory_save_time", cp.memory_save_time)
        if cp.save_mode is SaveMode.BACKGROUND:
            check_positive("checkpoint.write_time", cp.write_time)
            n = max(cp.memory_per_persistent, 1)
            low = np.asarray(min_background_interval(cp), dtype=float)
            if not np.all(low < np.asarray(cp.interval, dtype=float)):
                raise InvalidParameterError(
                    f"checkpoint.interval={float(np.ravel(cp.interval)[0])!r}: a background write of "
                    f"{float(np.ravel(cp.write_time)[0])} s must end within the first in-memory segment "
                    f"({n} segment(s) per interval), so the interval must exceed "
                    f"memory_per_persistent x (1 - write_interference) x write_time = {float(np.ravel(low)[0])} s")
        if self.spares is not None:
            check_positive("spares.repair_time", self.spares.repair_time)
            check_nonnegative("spares.activation_time", self.spares.activation_time)
            if self.spares.repair is not None:
                _check_repair(self.spares)
        check_nonnegative("migration_time", self.migration_time)
        check_positive("step_time", self.step_time)
        return self


def _check_repair(pool: SparePool) -> None:
    """Host check of ``spares.repair``: a valid phase-type whose mean is ``repair_time``."""
    try:
        pool.repair.validate()
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"spares.repair: {exc}") from None
    mean = float(pool.repair.mean())
    t = float(np.ravel(pool.repair_time)[0])
    if not abs(mean - t) <= 1e-6 * t:
        raise InvalidParameterError(
            f"spares.repair: its mean is {mean!r} s but spares.repair_time={t!r} s; expected equal means "
            "(build the pool with SparePool.with_repair(size, repair), or set repair_time to the mean)")


def min_background_interval(cp: CheckpointPolicy):
    """The smallest feasible interval of a background save: the write (stretched by its
    interference) must end within the first in-memory segment,
    ``interval > max(memory_per_persistent, 1) * (1 - write_interference) * write_time``."""
    return max(cp.memory_per_persistent, 1) * (1.0 - cp.write_interference) * cp.write_time


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
