"""The spare pool's dead time: every second in which a spare-taking episode holds the job
without faults belongs to the pool's chain, wherever the model books it.

After a fault takes a spare, no other fault can take the next one until the job runs
again, while the repairs progress. How a second of that dead time is booked (tier
downtime, undetected slow running before the recovery, degraded running or a lost step
after it, the spare's activation, a failed tier on the way) changes the lost-time
breakdown, not the wall time or the pool: moving a second from one booking to another
must leave the goodput unchanged. Before the dead time was kept whole in the chain
(commit fcd4c25) these pairs differed by 1.4e-3 to 1.8e-2 in goodput (the analytic model
treated the pauses as if the next fault could come during them, and overstated the wait
for a spare against the twin; see ``_spare_wait``).
"""

import dataclasses

import jax.numpy as jnp
import pytest

from markovsim.availability import (
    CAUSES,
    AvailabilityModel,
    CheckpointPolicy,
    RecoveryTier,
    Rollback,
    SparePool,
    analyze,
)

H = 3600.0
SPARES = CAUSES.index("waiting_for_spares")


def _tier(**kw):
    base = dict(name="swap", rollback=Rollback.NONE, takes_spare=True, detection=120.0, isolation=30.0,
                rescheduling=60.0, comm_setup_base=200.0, compile=100.0)
    base.update(kw)
    return RecoveryTier(**base)


def _model(*, tiers=None, modes=None, activation=120.0, step_time=10.0):
    """One spare-taking fault mode (non-interrupting, so no exposed restarts are retried),
    a pool of 2 spares with 6 h repairs: the pool is empty at more than half of the faults."""
    modes = modes or [dict(tier=0, rate=1 / (1.5 * H), rho=1.0, detect=0.0)]
    return AvailabilityModel(
        cards=512.0,
        fault_names=tuple(f"mode {i}" for i in range(len(modes))),
        fault_tier=tuple(m["tier"] for m in modes),
        fault_interrupts=tuple(False for _ in modes),
        fault_rates=jnp.array([m["rate"] for m in modes]),
        fault_degraded_throughput=jnp.array([m["rho"] for m in modes]),
        fault_detection_time=jnp.array([m["detect"] for m in modes]),
        fault_spare_nodes=jnp.ones(len(modes)),
        fault_predicted=jnp.zeros(len(modes)),
        tiers=(_tier(),) if tiers is None else tiers,
        checkpoint=CheckpointPolicy(interval=2 * H, save_time=60.0),
        spares=SparePool(size=2, repair_time=6 * H, activation_time=activation),
        migration_time=30.0, step_time=step_time,
    )


def _same_goodput(booked, as_downtime):
    a, b = analyze(booked), analyze(as_downtime)
    assert float(a.lost[SPARES]) > 0.005  # the pool matters here
    assert float(a.goodput) == pytest.approx(float(b.goodput), rel=1e-10, abs=0.0)
    assert float(a.lost[SPARES]) == pytest.approx(float(b.lost[SPARES]), rel=1e-10, abs=0.0)


def test_slow_running_before_the_recovery_is_dead_time():
    slow = 0.5 * 3000.0  # undetected slow running at half speed for 50 min: 25 min of pause
    booked = _model(modes=[dict(tier=0, rate=1 / (1.5 * H), rho=0.5, detect=3000.0)])
    moved = _model(tiers=(_tier(detection=120.0 + slow),))
    _same_goodput(booked, moved)


def test_degraded_running_after_the_recovery_is_dead_time():
    booked = _model(tiers=(_tier(degraded_time=2400.0, degraded_throughput=0.25),))
    moved = _model(tiers=(_tier(detection=120.0 + 0.75 * 2400.0),))
    _same_goodput(booked, moved)


def test_the_lost_step_is_dead_time():
    booked = _model(tiers=(_tier(rollback=Rollback.STEP),), step_time=600.0)
    moved = _model(tiers=(_tier(detection=120.0 + 300.0),), step_time=600.0)
    _same_goodput(booked, moved)


def test_the_activation_is_dead_time():
    booked = _model(activation=900.0)
    moved = _model(tiers=(_tier(detection=120.0 + 900.0),), activation=0.0)
    a, b = analyze(booked), analyze(moved)
    assert float(b.lost[SPARES]) > 0.005
    assert float(a.goodput) == pytest.approx(float(b.goodput), rel=1e-10, abs=0.0)


def test_a_failed_tier_on_the_path_to_the_spare_is_dead_time():
    # a mode tries a tier that takes no spare (coverage 0.3); when it fails, the whole
    # tier is lost and the next one takes a spare. The same as two modes: one that the
    # first tier always handles, one whose spare-taking tier starts with the failed one.
    rate, p = 1 / (1.5 * H), 0.3
    first = _tier(name="restart in place", takes_spare=False, detection=900.0, compile=600.0, coverage=p,
                  fallback=1)
    ladder = _model(tiers=(first, _tier()), modes=[dict(tier=0, rate=rate, rho=1.0, detect=0.0)])
    failed = first.downtime() + first.restart_time(512.0)
    split = _model(
        tiers=(dataclasses.replace(first, coverage=1.0, fallback=-1), _tier(detection=120.0 + failed)),
        modes=[dict(tier=0, rate=p * rate, rho=1.0, detect=0.0), dict(tier=1, rate=(1 - p) * rate, rho=1.0,
                                                                       detect=0.0)])
    _same_goodput(ladder, split)
