r"""The goodput solver's view of a model: every per-mode and per-tier value an array leaf.

An :class:`~markovsim.availability.AvailabilityModel` keeps fault names, each mode's first
tier, whether it interrupts, and each tier's rollback, fallback and spare use as static
metadata (Python values), so a model with one more fault mode or tier is a new program for
``jax.jit``: it is traced and compiled again (tens of seconds on two cores, issue 14).

:func:`pack` turns those into array leaves of a :class:`PackedModel` (the tiers become one
:class:`RecoveryTier` whose numeric fields are arrays over the ladder), and for a concrete
model on the host pads the mode and tier axes to *buckets* (:func:`bucket`): modes with
rate 0 and tiers that no mode reaches, which add exact zeros to every sum. Models that
differ only in their numbers, or in a few modes or tiers within the same bucket, then share
one compiled program. What stays static: the checkpoint's structure (save mode, in-memory
checkpoints per persistent one), the spare pool's size and its repair distribution's
number of phases.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._backend import ops_of
from ._model import AvailabilityModel, RecoveryTier, Rollback, SaveMode, min_background_interval

__all__ = ["PackedModel", "pack", "as_packed", "bucket", "inputs_valid", "ROLLBACK_CODE"]

#: the rollback of each tier as a number (``PackedModel.tier_rollback``)
ROLLBACK_CODE = {Rollback.NONE: 0.0, Rollback.STEP: 1.0, Rollback.MEMORY: 2.0, Rollback.PERSISTENT: 3.0}

#: smallest padded sizes of the mode and tier axes (then powers of two)
MIN_MODES, MIN_TIERS = 16, 8

#: what a padding tier holds: no time, always succeeds, no fallback, nothing degraded
_PAD_TIER = dict(bandwidth_bytes_per_s=math.inf, coverage=1.0, degraded_throughput=1.0)
_TIER_FIELDS = tuple(f.name for f in dataclasses.fields(RecoveryTier) if not f.metadata.get("static"))
#: per-mode fields and the value of a padding mode (rate 0: it never occurs)
_MODE_FIELDS = {"fault_rates": 0.0, "fault_degraded_throughput": 1.0, "fault_detection_time": 0.0,
                "fault_spare_nodes": 0.0, "fault_predicted": 0.0}


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PackedModel:
    """An :class:`AvailabilityModel` with its structure as array leaves (see the module
    docstring). Mode arrays have shape ``(M,)``, tier arrays ``(K,)``; codes are floats
    (exact small integers) so that ``jax.grad`` takes the whole pytree.

    Attributes:
        fault_interrupts: 1.0 where the mode interrupts the job.
        fault_tier: index of each mode's first tier.
        tiers: one :class:`RecoveryTier` whose numeric fields are ``(K,)`` arrays.
        tier_rollback: :data:`ROLLBACK_CODE` of each tier.
        tier_fallback: each tier's fallback index (``-1``: none).
        tier_takes_spare: 1.0 where the tier takes a spare.
        (the other fields as in :class:`AvailabilityModel`)
    """

    cards: jnp.ndarray
    fault_rates: jnp.ndarray
    fault_degraded_throughput: jnp.ndarray
    fault_detection_time: jnp.ndarray
    fault_spare_nodes: jnp.ndarray
    fault_predicted: jnp.ndarray
    fault_interrupts: jnp.ndarray
    fault_tier: jnp.ndarray
    tiers: RecoveryTier
    tier_rollback: jnp.ndarray
    tier_fallback: jnp.ndarray
    tier_takes_spare: jnp.ndarray
    checkpoint: object
    spares: object
    migration_time: jnp.ndarray
    step_time: jnp.ndarray


def bucket(n: int, smallest: int) -> int:
    """The padded size of an axis of ``n`` entries: ``smallest``, then the next power of two."""
    return max(smallest, 1 << max(n - 1, 0).bit_length())


def pack(model: AvailabilityModel, *, pad: bool = False, host: bool = False) -> PackedModel:
    """The solver's view of ``model`` (traceable; ``jax.vmap`` packs each element).

    Args:
        model: a structurally valid model.
        pad: pad the mode and tier axes to :func:`bucket` sizes, on the host (numpy leaves,
            all float64: the form whose compiled programs are shared). The model must be
            concrete.
        host: numpy float64 leaves without padding (the numpy path of
            :mod:`markovsim._backend`, which compiles nothing); the model must be concrete.
    """
    xp = np if (pad or host) else jnp
    M, K = len(model.fault_names), len(model.tiers)
    Mb, Kb = (bucket(M, MIN_MODES), bucket(K, MIN_TIERS)) if pad else (M, K)

    def f(x):
        return xp.asarray(x, dtype=float)

    def axis(values, size, fill):
        values = xp.asarray(values, dtype=float)
        if size == values.shape[-1]:
            return values
        return xp.concatenate([values, xp.full(values.shape[:-1] + (size - values.shape[-1],), fill)], axis=-1)

    def tier_column(name):
        fill = _PAD_TIER.get(name, 0.0)
        return axis(xp.stack([f(getattr(t, name)) for t in model.tiers], axis=-1), Kb, fill)

    tiers = RecoveryTier(name="", **{name: tier_column(name) for name in _TIER_FIELDS})
    packed = PackedModel(
        cards=f(model.cards),
        **{name: axis(getattr(model, name), Mb, fill) for name, fill in _MODE_FIELDS.items()},
        fault_interrupts=axis(np.array(model.fault_interrupts, dtype=float), Mb, 0.0),
        fault_tier=axis(np.array(model.fault_tier, dtype=float), Mb, 0.0),
        tiers=tiers,
        tier_rollback=axis(np.array([ROLLBACK_CODE[t.rollback] for t in model.tiers]), Kb, ROLLBACK_CODE[Rollback.NONE]),
        tier_fallback=axis(np.array([t.fallback for t in model.tiers], dtype=float), Kb, -1.0),
        tier_takes_spare=axis(np.array([bool(t.takes_spare) for t in model.tiers], dtype=float), Kb, 0.0),
        checkpoint=model.checkpoint, spares=model.spares,
        migration_time=f(model.migration_time), step_time=f(model.step_time))
    if pad or host:  # one dtype and no weak types: equal avals for every model of the same structure
        packed = jax.tree_util.tree_map(lambda v: np.asarray(v, dtype=np.float64), packed)
    return packed


def as_packed(model) -> PackedModel:
    """``model`` as a :class:`PackedModel` (unpadded, traceable), unless it is one."""
    return model if isinstance(model, PackedModel) else pack(model)


def inputs_valid(model):
    """The value checks of :meth:`AvailabilityModel.validate` as one JAX boolean (jit-safe):
    true when every numeric input lies in its domain. NaN fails every check.

    Args:
        model: an :class:`AvailabilityModel` or its :class:`PackedModel`.
    """
    pm = as_packed(model)
    xp = ops_of(pm).xp
    f = lambda x: xp.asarray(x, dtype=xp.result_type(float))  # noqa: E731

    def nonneg(x):
        x = f(x)
        return xp.all(xp.isfinite(x) & (x >= 0.0))

    def pos(x):
        x = f(x)
        return xp.all(xp.isfinite(x) & (x > 0.0))

    def prob(x):
        x = f(x)
        return xp.all((x >= 0.0) & (x <= 1.0))

    t = pm.tiers
    bw = f(t.bandwidth_bytes_per_s)
    checks = [pos(pm.cards), nonneg(pm.fault_rates), prob(pm.fault_degraded_throughput),
              nonneg(pm.fault_detection_time), nonneg(pm.fault_spare_nodes), prob(pm.fault_predicted),
              nonneg(pm.migration_time), pos(pm.step_time)]
    checks += [nonneg(getattr(t, name)) for name in ("detection", "isolation", "rescheduling", "comm_setup_base",
                                                     "comm_setup_per_card", "state_bytes", "compile", "degraded_time")]
    checks += [xp.all((bw > 0.0) & (xp.isfinite(bw) | (f(t.state_bytes) == 0.0))),
               prob(t.coverage), prob(t.degraded_throughput),
               xp.all((f(pm.tier_fallback) >= 0.0) | (f(t.coverage) == 1.0))]
    cp = pm.checkpoint
    checks += [pos(cp.interval), nonneg(cp.save_time), nonneg(cp.write_time), prob(cp.write_interference),
               nonneg(cp.memory_save_time)]
    if cp.save_mode is SaveMode.BACKGROUND:
        checks += [pos(cp.write_time), xp.all(f(min_background_interval(cp)) < f(cp.interval))]
    if pm.spares is not None:
        checks += [pos(pm.spares.repair_time), nonneg(pm.spares.activation_time)]
        if pm.spares.repair is not None:
            a, S = f(pm.spares.repair.alpha), f(pm.spares.repair.S)
            off = S - xp.diag(xp.diagonal(S))
            checks += [nonneg(a), xp.all(xp.sum(a) <= 1.0 + 1e-9), nonneg(off),
                       xp.all(-xp.sum(S, axis=-1) >= -1e-12 * xp.max(xp.abs(S))),
                       xp.all(xp.diagonal(S) < 0.0)]
    return xp.all(xp.stack(checks))
