"""Regression tests for issues 11 and 15 (inference): results that check themselves, a
status and ``throw=``, the switch that no longer holds up the restart, one ``Estimate``,
one spelling, and a frontier that says where its optimum sits. Each failed on 82057e9."""

import dataclasses

import pytest

import markovsim
from markovsim import HOUR, MINUTE, YEAR, ResultStatus
from markovsim import availability as av
from markovsim import inference as inf

BASE = inf.RecoveryTiers(inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(72 * HOUR))


def test_a_switch_that_never_works_does_not_make_losses_worse():
    # the thorough profile's counterexample to test_every_added_tier_raises_availability: a
    # switch of coverage 0 whose 499 s + 611 s exceeded the 1109 s restart held that restart
    # up (restart after the switch), so "adding a tier" lost more requests. The switch now
    # runs alongside the restart.
    fleet = inf.Fleet(instances=2, cards_per_instance=2, card_fault_rate=3.168808781402895e-08,
                      soft_fault_share=0.0, demand=1.0)
    tiers = inf.RecoveryTiers(
        inf.InstanceRestart(1109.0), inf.HardwareRepair(3600.0), token_retry=inf.TokenRetry(1.0, 0.0),
        fast_restart=inf.FastRestart(998.0, 0.0), traffic_switch=inf.TrafficSwitch(499.0, 0.0, 611.0),
        elastic=inf.ElasticContinuation(1.0, 0.0, 10.0))
    without = inf.analyze_fleet(fleet, tiers.only(), max_recovering=None)
    with_switch = inf.analyze_fleet(fleet, tiers.only(inf.Tier.TRAFFIC_SWITCH), max_recovering=None)
    assert with_switch.request_unavailability <= without.request_unavailability * (1 + 1e-12)
    # a switch that never works and never finishes first changes nothing at all
    never = dataclasses.replace(tiers.only(inf.Tier.TRAFFIC_SWITCH),
                                traffic_switch=inf.TrafficSwitch(1e12, 0.0, 1e12))
    assert inf.analyze_fleet(fleet, never, max_recovering=None).slo_unavailability == pytest.approx(
        without.slo_unavailability, rel=1e-6)


def test_the_restart_finishes_whether_or_not_the_switch_has():
    # two independent instances (unlimited pool), demand one instance: a fault's outage lasts
    # the restart (exponential, mean T) whatever the switch; its traffic is lost only until
    # the first of restart and switch ends, on average 1 / (1/T + 1/S); the SLO also fails
    # while both are switched out. (82057e9 restarted only after the switch: down T + S.)
    T, S, rate = 20 * MINUTE, 5 * MINUTE, 8 * 50 / YEAR
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=50 / YEAR, soft_fault_share=0.0,
                      demand=1.0)
    tiers = dataclasses.replace(BASE, traffic_switch=inf.TrafficSwitch(S, 1.0, 15 * MINUTE))
    r = inf.analyze_fleet(fleet, tiers, max_recovering=None)
    routed = rate * (1 / (1 / T + 1 / S)) / (1 + rate * T)
    switched = rate * T / (1 + rate * T) - routed
    assert r.slo_unavailability == pytest.approx(1 - ((1 - routed) ** 2 - switched ** 2), rel=1e-10)
    down = rate * T / (1 + rate * T)
    assert r.expected_capacity == pytest.approx(2 * (1 - down), rel=1e-12)


def test_results_that_fail_their_checks_raise_or_carry_a_status():
    # 82057e9 reported a request availability of -50684 for this fleet, silently
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=1 / YEAR, soft_fault_share=0.5,
                      demand=1e-9, requests_per_s=1.0, inflight_requests=100.0)
    with pytest.raises(markovsim.SolverError, match=r"request_unavailability=.*inflight_requests"):
        inf.analyze_fleet(fleet, BASE)
    r = inf.analyze_fleet(fleet, BASE, throw=False)
    assert r.status is ResultStatus.OUT_OF_RANGE
    with pytest.raises(markovsim.SolverError, match="OUT_OF_RANGE"):
        inf.analyze_independent_fleet(fleet, BASE)
    good = inf.analyze_fleet(dataclasses.replace(fleet, demand=1.0), BASE)
    assert good.status is ResultStatus.OK


def test_truncation_is_a_status_and_a_warning_only_with_throw():
    fleet = inf.Fleet(instances=4, cards_per_instance=64, card_fault_rate=1 / (2 * HOUR * 64),
                      soft_fault_share=0.4, demand=3.0)
    with pytest.warns(markovsim.MarkovsimWarning, match="TRUNCATED.*max_recovering=1"):
        inf.analyze_fleet(fleet, BASE, max_recovering=1)
    assert inf.analyze_fleet(fleet, BASE, max_recovering=1, throw=False).status is ResultStatus.TRUNCATED


def test_one_spelling_with_deprecated_aliases():
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=1 / YEAR, soft_fault_share=0.5,
                      demand=1.0)
    new = inf.analyze_fleet(fleet, BASE)
    with pytest.warns(DeprecationWarning, match="analyze_fleet"):
        old = inf.analyse_fleet(fleet, BASE)
    assert old.slo_unavailability == new.slo_unavailability
    with pytest.warns(DeprecationWarning, match="analyze_independent_fleet"):
        inf.analyse_independent_fleet(fleet, BASE)
    assert "analyze_fleet" in inf.__all__ and hasattr(av, "analyze")


def test_one_estimate_type_for_every_monte_carlo_result():
    assert inf.Estimate is av.Estimate
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=1 / (4 * HOUR * 8),
                      soft_fault_share=0.5, demand=1.0)
    sim = inf.simulate_fleet(fleet, BASE, events=2000, replicas=8)
    twin = av.simulate(av.single_tier_model(3000.0, 100.0, 20000.0, 300.0), replicas=8, horizon=2 * 86400.0)
    for e in (sim.slo_unavailability, sim.expected_capacity, twin.goodput, twin.unavailability):
        assert type(e) is av.Estimate and e.replicas == 8 and e.level == 0.99
        assert e.low <= e.mean <= e.high and e.stderr >= 0
    assert sim.status is ResultStatus.OK and twin.status is ResultStatus.OK


SERVING = inf.DecodeMemoryModel(
    replicated_weight_bytes=20e9, expert_weight_bytes=650e9, kv_bytes_per_token=70e3, context_tokens=4000,
    hbm_bytes=64e9, reserved_bytes=8e9, hbm_bandwidth=1.6e12, bandwidth_efficiency=0.6,
    time_per_output_token=0.05)


def _frontier(target, sizes=(16, 32, 64, 128, 256, 512)):
    return inf.cheapest_fleet(2e5, sizes, BASE, serving=SERVING, card_fault_rate=2 / YEAR,
                              soft_fault_share=0.5, target=target, extra_instances=2)


def test_the_frontier_states_its_range_and_status_per_point():
    points = _frontier(0.97)
    assert points and any(p.meets_target for p in points) and not all(p.meets_target for p in points)
    for p in points:
        lo, hi = p.instances_searched
        assert lo <= p.instances <= hi == lo + 2
        assert p.status is (ResultStatus.OK if p.meets_target else ResultStatus.TARGET_NOT_MET)
    unreachable = _frontier(1.0 - 1e-15)
    assert all(p.status is ResultStatus.TARGET_NOT_MET and not p.meets_target for p in unreachable)
    assert inf.frontier_optimum(unreachable) == (None, ResultStatus.TARGET_NOT_MET)


def test_the_frontier_optimum_says_when_it_is_an_end_of_the_candidate_sizes():
    points = _frontier(0.97)
    best, status = inf.frontier_optimum(points, throw=False)
    assert best is not None and best.cards == min(p.cards for p in points if p.meets_target)
    sizes = sorted(p.cards_per_instance for p in points)
    expected = (ResultStatus.AT_LOWER_BOUND if best.cards_per_instance == sizes[0] else
                ResultStatus.AT_UPPER_BOUND if best.cards_per_instance == sizes[-1] else ResultStatus.OK)
    assert status is expected
    # restricted to the best size and one neighbour, the optimum is an end and says so
    i = sizes.index(best.cards_per_instance)
    pair = [p for p in points if p.cards_per_instance in sizes[max(i - 1, 0):i + 1]]
    if len(pair) == 2:
        with pytest.warns(markovsim.MarkovsimWarning, match="an end of the candidate sizes"):
            _, st = inf.frontier_optimum(pair)
        assert st is ResultStatus.AT_UPPER_BOUND
