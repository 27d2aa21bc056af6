"""Small availability models shared by the tests (built through the public API only)."""

import jax.numpy as jnp

from markovsim.availability import (
    AvailabilityModel,
    CheckpointPolicy,
    RecoveryTier,
    Rollback,
    SaveMode,
)

H = 3600.0


def ladder(*, coverage=(0.8, 0.7, 0.9), job_detection=300.0):
    return (
        RecoveryTier(name="operator retry", rollback=Rollback.NONE, fallback=1, detection=5.0, compile=3.0,
                     coverage=coverage[0]),
        RecoveryTier(name="online recovery", rollback=Rollback.STEP, fallback=2, detection=10.0, rescheduling=5.0,
                     comm_setup_base=10.0, coverage=coverage[1]),
        RecoveryTier(name="process rescheduling", rollback=Rollback.MEMORY, fallback=3, takes_spare=True,
                     detection=30.0, comm_setup_base=30.0, comm_setup_per_card=0.01, state_bytes=1e11,
                     bandwidth_bytes_per_s=1e9, coverage=coverage[2], degraded_time=600.0, degraded_throughput=0.9),
        RecoveryTier(name="job restart", rollback=Rollback.PERSISTENT, takes_spare=True, detection=job_detection,
                     rescheduling=120.0, comm_setup_base=300.0, compile=200.0),
    )


def tiered(*, save_mode=SaveMode.BLOCKING, memory=0, spares=None, predicted=0.0, rates=None, interval=2400.0,
           tiers=None):
    rates = jnp.array([1 / H, 1 / (3 * H), 1 / (5 * H), 1 / (4 * H)]) if rates is None else jnp.asarray(rates)
    return AvailabilityModel(
        cards=1000.0,
        fault_names=("link flap", "HBM UCE", "card lost", "slow card"),
        fault_tier=(0, 1, 2, 2),
        fault_interrupts=(True, True, True, False),
        fault_rates=rates,
        fault_degraded_throughput=jnp.array([1.0, 1.0, 1.0, 0.5]),
        fault_detection_time=jnp.array([0.0, 0.0, 0.0, 900.0]),
        fault_spare_nodes=jnp.array([0.0, 1.0, 1.0, 1.0]),
        fault_predicted=jnp.array([0.0, predicted, predicted, 0.0]),
        tiers=ladder() if tiers is None else tiers,
        checkpoint=CheckpointPolicy(interval=interval, save_time=60.0, save_mode=save_mode, write_time=200.0,
                                    write_interference=0.1, memory_per_persistent=memory, memory_save_time=5.0),
        spares=spares, migration_time=30.0, step_time=10.0,
    )
