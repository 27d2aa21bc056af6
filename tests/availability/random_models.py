"""A hypothesis strategy for availability models across the whole model space: save modes x
rollback kinds x recovery ladders (fallbacks, coverages) x spare pools x sub-health
(degrading faults) x predictive maintenance x in-memory checkpoints (public API only).

Rates and times are drawn on scales where the twin finishes in a fraction of a second and
the analytic model's stated approximations (the spare pool as a birth-death chain) are
what is being checked, not numerics at extremes (those have their own tests).
"""

from __future__ import annotations

import jax.numpy as jnp
from hypothesis import strategies as st

from markovsim.availability import (
    AvailabilityModel,
    CheckpointPolicy,
    RecoveryTier,
    Rollback,
    SaveMode,
    SparePool,
)

H = 3600.0


def _log_uniform(lo, hi):
    return st.floats(0.0, 1.0).map(lambda u: lo * (hi / lo) ** u)


@st.composite
def recovery_tier(draw, index, count, name):
    """Tier ``index`` of ``count``; its fallback is a higher tier (or none for the last)."""
    fallback = -1 if index == count - 1 else draw(st.sampled_from([-1, *range(index + 1, count)]))
    state = draw(st.sampled_from([0.0, 0.0, draw(_log_uniform(1e9, 2e12))]))
    degraded = draw(st.booleans())
    return RecoveryTier(
        name=name,
        rollback=draw(st.sampled_from(list(Rollback))),
        fallback=fallback,
        takes_spare=draw(st.booleans()),
        detection=draw(st.floats(0.0, 600.0)),
        isolation=draw(st.floats(0.0, 120.0)),
        rescheduling=draw(st.floats(0.0, 300.0)),
        comm_setup_base=draw(st.floats(0.0, 600.0)),
        comm_setup_per_card=draw(st.floats(0.0, 0.02)),
        state_bytes=state,
        bandwidth_bytes_per_s=draw(_log_uniform(2e9, 2e11)) if state > 0 else float("inf"),
        compile=draw(st.floats(0.0, 300.0)),
        coverage=1.0 if fallback == -1 else draw(st.floats(0.2, 1.0)),
        degraded_time=draw(st.floats(0.0, 1800.0)) if degraded else 0.0,
        degraded_throughput=draw(st.floats(0.3, 1.0)) if degraded else 1.0,
    )


@st.composite
def availability_models(draw):
    """A random, valid :class:`AvailabilityModel` (see the module docstring)."""
    m = draw(st.integers(1, 4))
    k = draw(st.integers(1, 4))
    tiers = tuple(draw(recovery_tier(i, k, f"tier {i}")) for i in range(k))
    interrupts = [True] + [draw(st.booleans()) for _ in range(m - 1)]
    rates = [draw(_log_uniform(3e-6, 4e-4)) for _ in range(m)]
    degrade = [not x for x in interrupts]
    memory = draw(st.sampled_from([0, 0, 1, 2, 4]))
    mode = draw(st.sampled_from(list(SaveMode)))
    n = max(memory, 1)
    interval = draw(st.floats(900.0, 20000.0))
    interference = draw(st.floats(0.0, 0.5))
    write = draw(st.floats(0.05, 0.9)) * interval / n / (1.0 - interference) if mode is SaveMode.BACKGROUND else 0.0
    spares = draw(st.one_of(st.none(), st.builds(
        SparePool, size=st.integers(0, 3), repair_time=_log_uniform(0.5 * H, 24 * H),
        activation_time=st.floats(0.0, 300.0))))
    predicted = draw(st.booleans())
    return AvailabilityModel(
        cards=float(draw(st.integers(8, 4096))),
        fault_names=tuple(f"mode {i}" for i in range(m)),
        fault_tier=tuple(draw(st.integers(0, k - 1)) for _ in range(m)),
        fault_interrupts=tuple(interrupts),
        fault_rates=jnp.asarray(rates),
        fault_degraded_throughput=jnp.asarray([draw(st.floats(0.2, 0.95)) if d else 1.0 for d in degrade]),
        fault_detection_time=jnp.asarray([draw(st.floats(0.0, 3600.0)) if d else 0.0 for d in degrade]),
        fault_spare_nodes=jnp.asarray([float(draw(st.integers(0, 1))) for _ in range(m)]),
        fault_predicted=jnp.asarray([draw(st.floats(0.0, 0.8)) if predicted else 0.0 for _ in range(m)]),
        tiers=tiers,
        checkpoint=CheckpointPolicy(
            interval=interval, save_time=draw(st.floats(1.0, 300.0)), save_mode=mode, write_time=write,
            write_interference=interference if mode is SaveMode.BACKGROUND else 0.0,
            memory_per_persistent=memory, memory_save_time=draw(st.floats(0.5, 30.0)) if memory else 0.0),
        spares=spares,
        migration_time=draw(st.floats(0.0, 120.0)),
        step_time=draw(st.floats(1.0, 30.0)),
    )
