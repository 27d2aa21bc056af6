"""The seed figures' claims as invariants of the model, property-tested with hypothesis.

One family per group of figures:

* MTBF scaling (S-MTBF-1/2, S-OUT-1): MTBF never rises with the job; doubling gives exactly
  one half while the network keeps its levels and less when it adds one; more levels never
  raise the MTBF.
* Recovery ladders (S-REC-1..5, S-INF-1..4): a faster tier, or an extra faster tier in
  front, never lowers goodput; on the inference fleet, adding the published tiers in order
  never raises the share of requests lost beyond the exposure of the extra serving time.
* Checkpoint interval (S-REC-6, PI-CKPT-CHART, PI-LOSS-T0): goodput is unimodal in the
  interval and its maximum sits at the exact optimum (Lambert W), between Daly and Young.
* Linearity (S-LIN-1..4), with explicit batch rules: linearity <= 1 with the global batch
  held (every ZeRO stage); with the batch grown per replica, <= 1 with ZeRO off, and with
  ZeRO the sharded optimizer step is a genuine superlinear term within the library's bound;
  a larger held batch never lowers linearity (the S-LIN-2/3 bands rise with the batch).
* Pipeline bubbles (PU-BUBBLE-*): the closed forms equal the timeline simulator, and
  interleaving v chunks divides the idle time by v.
* Inference tiers (S-INF-2): a fast restart that covers more faults never raises the
  fleet's SLO unavailability.

Run the big profile with ``HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, example, given, strategies as st

from markovsim import DAY, HOUR, MINUTE, YEAR, MarkovsimError, MarkovsimWarning
from markovsim import inference as inf
from markovsim.availability import (
    AvailabilityModel,
    BlastRadius,
    CheckpointPolicy,
    ClusterShape,
    Component,
    Effect,
    FatTree,
    FaultCatalogue,
    FaultMode,
    RecoveryTier,
    Rollback,
    checkpoint_goodput,
    daly_interval,
    goodput,
    job_mtbf,
    mtbf_doubling_ratio,
    optimal_interval,
    young_interval,
)
from markovsim.training import (FixedGlobalBatch, FixedReplicaBatch, Scaling, load_plan, pipeline_bubble_fraction,
                                pipeline_bubble_time, scale_plan, scaling_curve, simulate_pipeline, step_time)
from tests.inference.test_properties import setups as inference_setups

# --------------------------------------------------------------------------- MTBF scaling

SCOPES = ("card", "node", "supernode", "switch", "optical_module", "link")


@st.composite
def clusters(draw, *, levels=None):
    """A cluster shape and a catalogue with one interrupting mode per component."""
    per_node = draw(st.sampled_from([1, 4, 8, 16]))
    per_super = draw(st.sampled_from([1, 4, 48]))
    net = FatTree(radix=draw(st.sampled_from([8, 16, 32, 64, 128])), levels=levels,
                  nics_per_card=draw(st.integers(0, 2)), first_optical_level=draw(st.integers(0, 3)))
    shape = ClusterShape("c", cards=10**7, cards_per_node=per_node, nodes_per_supernode=per_super, network=net,
                         optical_modules_per_supernode=draw(st.floats(0, 1e4)))
    # every card fails at some rate (so every job has a finite MTBF); the rest may not fail at all
    comps = tuple(Component(s, s, draw(st.floats(0.01 if s == "card" else 0.0, 1.0)) / YEAR,
                            draw(st.floats(0.5, 4))) for s in SCOPES)
    modes = tuple(FaultMode(f"{s} fault", s, draw(st.floats(0.1 if s == "card" else 0.0, 1.0)), Effect.INTERRUPT,
                            BlastRadius.JOB, "t") for s in SCOPES)
    return shape, FaultCatalogue(comps, modes).validate()


@given(clusters(), st.integers(1, 2**20), st.integers(1, 2**20))
def test_mtbf_never_rises_with_the_job(cluster, a, b):
    shape, cat = cluster
    small, big = sorted((a, b))
    assert job_mtbf(cat, shape, big) <= job_mtbf(cat, shape, small) * (1 + 1e-12)


@given(clusters(), st.integers(1, 2**14))
def test_doubling_halves_the_mtbf_unless_the_network_adds_a_level(cluster, k):
    shape, cat = cluster
    n = k * shape.cards_per_node * shape.nodes_per_supernode  # whole supernodes: counts scale exactly
    ratio = mtbf_doubling_ratio(cat, shape, n)
    net = shape.network
    same_levels = net.nics_per_card == 0 or net.levels_for(n * net.nics_per_card) == net.levels_for(
        2 * n * net.nics_per_card)
    if same_levels:
        assert ratio == pytest.approx(0.5, rel=1e-9)  # independent failures: exactly one half
    else:
        assert ratio <= 0.5 * (1 + 1e-12)  # an extra level only adds switches and links
    assert ratio > 0


@given(clusters(), st.integers(1, 2**16), st.integers(1, 3))
def test_more_network_levels_never_raise_the_mtbf(cluster, cards, extra):
    shape, cat = cluster
    need = shape.network.levels_for(max(cards * shape.network.nics_per_card, 1))
    deeper = dataclasses.replace(shape, network=dataclasses.replace(shape.network, levels=need + extra))
    assert job_mtbf(cat, deeper, cards) <= job_mtbf(cat, shape, cards) * (1 + 1e-12)


# --------------------------------------------------------------------------- recovery ladders (training)

PHASES = ("detection", "isolation", "rescheduling", "comm_setup_base", "comm_setup_per_card", "state_bytes",
          "compile")


def _tier(draw, name, rollback, fallback, coverage):
    return RecoveryTier(
        name=name, rollback=rollback, fallback=fallback,
        # every tier takes some time to notice a fault: a rolling-back tier of zero duration makes
        # goodput NaN (reported to the availability owner), which these properties do not probe
        detection=draw(st.floats(1.0, 30 * MINUTE)), isolation=draw(st.floats(0, 10 * MINUTE)),
        rescheduling=draw(st.floats(0, 10 * MINUTE)), comm_setup_base=draw(st.floats(0, 5 * MINUTE)),
        comm_setup_per_card=draw(st.floats(0, 0.05)), state_bytes=draw(st.floats(0, 4e12)),
        bandwidth_bytes_per_s=draw(st.floats(1e9, 1e12)), compile=draw(st.floats(0, 5 * MINUTE)),
        coverage=coverage)


@st.composite
def ladders(draw):
    """A three-tier ladder (retry-like, pod-like, job restart) and two interrupting fault modes.

    The structure (rollbacks, fall-backs, checkpoint levels) is fixed so that JAX compiles
    once; every number varies."""
    tiers = (_tier(draw, "fast", Rollback.NONE, 1, draw(st.floats(0, 1))),
             _tier(draw, "pod", Rollback.MEMORY, 2, draw(st.floats(0, 1))),
             _tier(draw, "job", Rollback.PERSISTENT, -1, 1.0))
    interval = draw(st.floats(10 * MINUTE, 6 * HOUR))
    model = AvailabilityModel(
        cards=float(draw(st.integers(8, 16384))), fault_names=("a", "b"), fault_tier=(1, 2),
        fault_interrupts=(True, True),
        fault_rates=jnp.asarray([draw(st.floats(0.01, 20)) / DAY, draw(st.floats(0.01, 20)) / DAY]),
        fault_degraded_throughput=jnp.ones(2), fault_detection_time=jnp.zeros(2), fault_spare_nodes=jnp.zeros(2),
        fault_predicted=jnp.zeros(2), tiers=tiers,
        checkpoint=CheckpointPolicy(interval=interval, save_time=draw(st.floats(1.0, 300.0)), memory_per_persistent=4,
                                    memory_save_time=draw(st.floats(0.0, 30.0))),
        spares=None, step_time=draw(st.floats(1.0, 60.0)))
    return model.validate()


def _g(model) -> float:
    g = float(goodput(model))
    assert 0 < g <= 1
    return g


@given(ladders(), st.integers(0, 2), st.sampled_from(PHASES), st.floats(0.01, 1))
def test_a_faster_tier_never_lowers_goodput(model, k, phase, factor):
    tier = model.tiers[k]
    faster = dataclasses.replace(tier, **{phase: getattr(tier, phase) * factor})
    quicker = dataclasses.replace(model, tiers=model.tiers[:k] + (faster,) + model.tiers[k + 1:])
    assert _g(quicker) >= _g(model) * (1 - 1e-12)


@given(ladders(), st.lists(st.floats(0, 1), min_size=len(PHASES), max_size=len(PHASES)))
def test_an_extra_faster_tier_never_lowers_goodput(model, shares):
    # mode "a" goes to the pod tier; with an extra tier in front that is no slower in any
    # phase, rolls back nothing and always succeeds, goodput cannot fall
    pod = model.tiers[1]
    front = dataclasses.replace(pod, name="fast", rollback=Rollback.NONE, fallback=1, coverage=1.0,
                                bandwidth_bytes_per_s=pod.bandwidth_bytes_per_s,
                                **{p: getattr(pod, p) * s for p, s in zip(PHASES, shares)})
    base = dataclasses.replace(model, tiers=(front,) + model.tiers[1:])
    extra = dataclasses.replace(base, fault_tier=(0, 2)).validate()
    assert _g(extra) >= _g(base) * (1 - 1e-12)


# --------------------------------------------------------------------------- recovery ladders (inference)


# fleets with N+1 headroom and tier durations ordered as in the published ladder
fleets = inference_setups


# A case that the thorough profile finds: a traffic switch that never works automatically
# (coverage 0) moves traffic only after the manual switch, and the share of requests lost
# rises 0.1 % where the exposure slack allows 0.007 %.
_SWITCH_CASE = (
    inf.Fleet(instances=2, cards_per_instance=2, card_fault_rate=3.168808781402895e-08, soft_fault_share=0.0,
              demand=1.0, requests_per_s=1.0, inflight_requests=0.0),
    inf.RecoveryTiers(inf.InstanceRestart(1049.0), inf.HardwareRepair(3600.0),
                      token_retry=inf.TokenRetry(1.0, 0.0), fast_restart=inf.FastRestart(944.0, 0.0),
                      traffic_switch=inf.TrafficSwitch(472.0, 0.0, 578.0),
                      elastic=inf.ElasticContinuation(1.0, 0.0, 10.0)))


@example(_SWITCH_CASE)
@given(fleets())
def test_every_added_inference_tier_keeps_requests(setup):
    fleet, tiers = setup
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MarkovsimWarning)
        steps = inf.tier_ladder(fleet, tiers, max_recovering=None)
    # the invariant is about answers the engine certifies; a coverage such as 3e-102 leaves
    # products below the float64 range and the engine says it cannot certify (it warns)
    assume(not any("could not be certified" in str(w.message) for w in caught))
    assert not caught, [str(w.message) for w in caught]
    for (_, before), (on, after) in zip(steps, steps[1:]):
        # faults strike serving instances only: a tier that brings instances back sooner also
        # exposes them to more faults, by at most the factor K / E[capacity]
        slack = fleet.instances / before.expected_capacity
        assert after.request_unavailability <= before.request_unavailability * slack * (1 + 1e-9) + 1e-15, on


@given(fleets(), st.floats(0, 1), st.floats(0, 1))
def test_a_fast_restart_that_covers_more_never_raises_downtime(setup, c1, c2):
    # S-INF-2 without a switch: each instance is down for its restart, faster with more coverage
    fleet, tiers = setup
    lo, hi = sorted((c1, c2))
    u = [inf.analyze_independent_fleet(fleet, dataclasses.replace(
        tiers.only(inf.Tier.FAST_RESTART), fast_restart=inf.FastRestart(tiers.fast_restart.restart_time, c)))
         for c in (lo, hi)]
    assert u[1].slo_unavailability <= u[0].slo_unavailability * (1 + 1e-9) + 1e-15


# --------------------------------------------------------------------------- checkpoint interval


@given(save=st.floats(1.0, 600.0), mtbf_h=st.floats(0.5, 1000.0), restart=st.floats(0.0, 3600.0),
       down=st.floats(0.0, 3600.0))
def test_goodput_is_unimodal_with_its_peak_at_the_exact_optimum(save, mtbf_h, restart, down):
    mtbf = mtbf_h * HOUR
    assume(save < 0.2 * mtbf)
    tau = float(optimal_interval(save, mtbf))
    grid = tau * np.geomspace(1 / 50, 50, 401)
    g = np.asarray(checkpoint_goodput(grid, save, mtbf, restart, down))
    d = np.diff(g)
    signs = np.sign(d[np.abs(d) > 1e-12 * g.max()])  # steps above rounding noise
    # one peak: rising, then falling (never rising again)
    assert np.all(np.diff(signs) <= 0), "goodput has more than one peak in the interval"
    peak = float(checkpoint_goodput(tau, save, mtbf, restart, down))
    assert peak >= g.max() * (1 - 1e-12)
    assert grid[np.argmax(g)] == pytest.approx(tau, rel=0.02)  # the grid's step is 2 %
    with warnings.catch_warnings():  # Young's estimate is used as a bound here, far off or not
        warnings.simplefilter("ignore", MarkovsimWarning)
        young = float(young_interval(save, mtbf))
    assert float(daly_interval(save, mtbf)) * (1 - 1e-9) <= tau <= young * (1 + 1e-9)


@given(lam_l=st.floats(1e-4, 3.0))
def test_mean_rollback_is_half_a_period_to_first_order(lam_l):
    # PI-LOSS-T0: E[t | t < L] / L = 1/(lam L) - 1/(e^(lam L) - 1) = 1/2 - lam L / 12 + O((lam L)^3)
    exact = 1 / lam_l - 1 / math.expm1(lam_l)
    assert 0 < exact < 0.5
    assert exact == pytest.approx(0.5 - lam_l / 12, abs=lam_l**3 / 500 + 1e-12)


# --------------------------------------------------------------------------- linearity

PLANS = {name: load_plan(name) for name in ("pangu_ultra_135b_8k", "pangu_ultra_moe_718b_a2_8k")}


def _curve(name, zero, base, factor, rule, cv, dp_overlap):
    """The plan (ZeRO stage ``zero``) grown from ``base`` to ``base * factor`` cards under ``rule``:
    ``("held", k)`` holds k rounds of micro-batches per replica of the large size (FixedGlobalBatch),
    ``("grown", k)`` gives every replica k rounds of pp sequences (FixedReplicaBatch)."""
    spec = PLANS[name]
    plan = spec.plan.replace(zero_stage=zero)
    eff = dataclasses.replace(spec.efficiency, dp_overlap=dp_overlap)
    kind, k = rule
    dp_large = base * factor // (plan.tp * plan.pp * plan.cp)
    batch = FixedGlobalBatch(k * plan.pp * dp_large) if kind == "held" else FixedReplicaBatch(k * plan.pp)
    try:
        return scaling_curve(spec.workload, spec.hardware, plan, [base, base * factor], batch=batch, efficiency=eff,
                             jitter_cv=cv, require_fit=False)
    except MarkovsimError:
        assume(False)  # the plan does not tile this size


LINEARITY_ARGS = dict(name=st.sampled_from(list(PLANS)), zero=st.integers(0, 3), base=st.sampled_from([256, 512]),
                      factor=st.sampled_from([2, 4, 16]), k=st.integers(1, 8), cv=st.floats(0, 0.03),
                      dp_overlap=st.floats(0, 1))


@given(**LINEARITY_ARGS)
def test_linearity_is_at_most_one_with_a_held_global_batch(name, zero, base, factor, k, cv, dp_overlap):
    # S-LIN-1..4 under FixedGlobalBatch: every per-replica term shrinks at least as fast as 1/N
    c = _curve(name, zero, base, factor, ("held", k), cv, dp_overlap)
    assert c.linearity[1] <= 1.0 + 1e-12


# ZeRO shards the optimizer step over the replicas, so per-card time can fall as dp grows: a
# genuine superlinear term (documented in docs/background/scaling.md), bounded.
@given(**LINEARITY_ARGS)
def test_superlinear_term_of_a_grown_batch_is_bounded(name, zero, base, factor, k, cv, dp_overlap):
    c = _curve(name, zero, base, factor, ("grown", k), cv, dp_overlap)
    if zero == 0:
        assert c.linearity[1] <= 1.0 + 1e-12
    assert c.linearity[1] <= c.superlinear_bound()[1] * (1 + 1e-12)
    # at most the whole baseline optimizer step can be sharded away
    b = step_time(PLANS[name].workload, PLANS[name].hardware,
                  scale_plan(PLANS[name].plan.replace(zero_stage=zero, global_batch=int(c.global_batch[0])), base,
                             scaling=Scaling.FIXED_GLOBAL_BATCH),
                  efficiency=dataclasses.replace(PLANS[name].efficiency, dp_overlap=dp_overlap))
    assert c.linearity[1] <= b.step_time / (b.step_time - b.optimizer - b.grad_norm) * (1 + 1e-12)


@given(**{**LINEARITY_ARGS, "zero": st.integers(0, 2)})
def test_a_larger_held_batch_never_lowers_linearity(name, zero, base, factor, k, cv, dp_overlap):
    # S-LIN-2/3: the band over the unpublished batch rises with it (more micro-batches per
    # replica amortise the bubble and the per-step terms at both sizes). Not under ZeRO-3,
    # whose parameter all-gather is paid per micro-batch and grows with dp: there a larger
    # held batch can lower linearity (MoE 718B, 512 -> 1,024 cards, no DP overlap: 0.417 -> 0.411)
    small = _curve(name, zero, base, factor, ("held", k), cv, dp_overlap)
    large = _curve(name, zero, base, factor, ("held", 2 * k), cv, dp_overlap)
    assert large.linearity[1] >= small.linearity[1] * (1 - 1e-12)


# --------------------------------------------------------------------------- pipeline bubbles


@given(p=st.integers(2, 8), k=st.integers(1, 3), v=st.integers(1, 6))
def test_bubble_formulas_equal_the_timeline_simulator(p, k, v):
    m = k * p  # interleaving needs whole rounds of p micro-batches
    for schedule, chunks in (("1f1b", 1), ("interleaved", v)):
        closed = pipeline_bubble_fraction(schedule, p, m, virtual_stages=chunks)
        simulated = float(simulate_pipeline(schedule, p, m, virtual_stages=chunks).bubble_fraction)
        assert simulated == pytest.approx(closed, rel=1e-12)
    # interleaving v chunks per stage divides the idle time by v (PU-BUBBLE-1F1B -> PU-BUBBLE-VPP6)
    assert pipeline_bubble_time("interleaved", p, m, virtual_stages=v) * v == pytest.approx(
        pipeline_bubble_time("1f1b", p, m), rel=1e-12)
    assert pipeline_bubble_fraction("interleaved", p, m, virtual_stages=v) <= pipeline_bubble_fraction(
        "1f1b", p, m) * (1 + 1e-12)
