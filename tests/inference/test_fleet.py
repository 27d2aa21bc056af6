"""The fleet chain against independent references: Kronecker sums of one instance (brute
force), the multinomial product form, closed forms, and the instance-level Monte-Carlo twin."""

import dataclasses

import numpy as np
import pytest

import markovsim
from markovsim import HOUR, MINUTE, YEAR
from markovsim import inference as inf

FULL = inf.RecoveryTiers(
    inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(6 * HOUR),
    token_retry=inf.TokenRetry(45.0, 0.7), fast_restart=inf.FastRestart(5 * MINUTE, 0.6),
    traffic_switch=inf.TrafficSwitch(60.0, 0.7, 15 * MINUTE),
    elastic=inf.ElasticContinuation(30.0, 0.6, 2 * HOUR))
# accelerated faults (an instance of 64 cards fails every 2 h) so every state has weight
FLEET = inf.Fleet(instances=3, cards_per_instance=64, card_fault_rate=1 / (2 * HOUR * 64),
                  soft_fault_share=0.4, demand=2.2, requests_per_s=3.0, inflight_requests=50.0,
                  tokens_per_s=100.0)
LADDER = [FULL, FULL.only(), FULL.only(inf.Tier.TRAFFIC_SWITCH),
          FULL.only(inf.Tier.TOKEN_RETRY, inf.Tier.FAST_RESTART),
          FULL.only(inf.Tier.ELASTIC), FULL.only(inf.Tier.ELASTIC, inf.Tier.TRAFFIC_SWITCH)]


def _lump(prod, pi):
    out = {}
    for lab, p in zip(prod.labels, np.asarray(pi)):
        c = [0] * len(inf.InstanceState)
        for st in lab:
            c[int(st)] += 1
        out[tuple(c)] = out.get(tuple(c), 0.0) + p
    return out


@pytest.mark.parametrize("tiers", LADDER, ids=lambda t: "+".join(x.value for x in t.deployed) or "none")
@pytest.mark.parametrize("K", [2, 3])
def test_fleet_chain_is_the_lumped_kronecker_sum_with_an_unlimited_pool(tiers, K):
    fleet = dataclasses.replace(FLEET, instances=K, demand=K - 0.8)
    one = inf.instance_chain(fleet, tiers)
    prod = markovsim.kronecker_sum(*[one] * K)
    brute = _lump(prod, markovsim.stationary_distribution(prod))
    fc = inf.fleet_chain(fleet, tiers, max_recovering=None)
    pi = markovsim.stationary_distribution(fc.chain)
    got = {lab[0]: p for lab, p in zip(fc.chain.labels, pi)}
    assert set(got) == set(brute)
    for k in brute:
        assert got[k] == pytest.approx(brute[k], rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("tiers", LADDER[:4], ids=lambda t: "+".join(x.value for x in t.deployed) or "none")
def test_product_form_equals_the_count_chain(tiers):
    fleet = dataclasses.replace(FLEET, instances=4, demand=3.1)
    a = inf.analyze_fleet(fleet, tiers, max_recovering=None)
    b = inf.analyze_independent_fleet(fleet, tiers, max_recovering=4)
    for f in ("slo_unavailability", "capacity_availability", "request_unavailability", "expected_capacity",
              "requests_lost_per_day", "requests_retried_per_day", "served_tokens_per_s"):
        assert getattr(b, f) == pytest.approx(getattr(a, f), rel=1e-9), f
    np.testing.assert_allclose(b.capacity_values, a.capacity_values)
    np.testing.assert_allclose(b.capacity_probabilities, a.capacity_probabilities, rtol=1e-9, atol=1e-15)


def test_single_instance_without_tiers_is_the_two_state_closed_form():
    # one instance, no optional tier: UP <-> RESTART_SLOW with rates E lam and 1/T
    lam, E, T = 2 / YEAR, 16, 20 * MINUTE
    fleet = inf.Fleet(instances=1, cards_per_instance=E, card_fault_rate=lam, soft_fault_share=0.3,
                      demand=1.0, requests_per_s=2.0, inflight_requests=10.0)
    r = inf.analyze_fleet(fleet, FULL.only())
    rho = E * lam * T
    assert r.slo_unavailability == pytest.approx(rho / (1 + rho), rel=1e-12)
    assert r.instance_mtbf == pytest.approx(1 / (E * lam))
    # lost per day: the demand while down plus the in-flight batch at every fault
    lost = 86400 * (2.0 * rho / (1 + rho) + 10.0 * E * lam / (1 + rho))
    assert r.requests_lost_per_day == pytest.approx(lost, rel=1e-12)
    assert r.downtime_per_month == pytest.approx(rho / (1 + rho) * YEAR / 12, rel=1e-12)


def test_capacity_never_exceeds_the_fleet_and_distribution_sums_to_one():
    fleet = dataclasses.replace(FLEET, spare_cards=1)
    fc = inf.fleet_chain(fleet, FULL, max_recovering=None)
    assert fc.capacity.max() <= fleet.instances + 1e-12
    assert (fc.served <= fc.capacity + 1e-12).all()
    # free spares: never negative, at most the pool plus the cards owed to degraded/waiting instances
    S = inf.InstanceState
    owed = (fc.counts[:, S.DEGRADED] + fc.counts[:, S.MIGRATE] + fc.counts[:, S.WAIT_CARD]
            + 2 * fc.counts[:, S.WAIT_TWO_CARDS])
    assert (fc.free_spares >= 0).all() and (fc.free_spares <= 1 + owed).all()
    # an instance waits for a card only while the pool is empty
    waiting = fc.counts[:, [S.WAIT_CARD, S.WAIT_TWO_CARDS]].sum(axis=1) > 0
    assert (fc.free_spares[waiting] == 0).all()
    np.testing.assert_allclose(fc.lost + fc.held + fc.served, fleet.demand, rtol=1e-12)
    r = inf.analyze_fleet(fleet, FULL, max_recovering=None)
    assert r.capacity_probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert r.slo_availability + r.slo_unavailability == pytest.approx(1.0, abs=1e-12)


def test_spare_pool_couples_instances_and_a_large_pool_decouples_them():
    small = inf.analyze_fleet(dataclasses.replace(FLEET, spare_cards=0), FULL, max_recovering=None)
    # about 5.4 cards are in repair on average (0.9 hard faults/h x 6 h): 25 spares almost never run out
    large = inf.analyze_fleet(dataclasses.replace(FLEET, spare_cards=25), FULL, max_recovering=None)
    free = inf.analyze_fleet(FLEET, FULL, max_recovering=None)
    assert small.request_unavailability > large.request_unavailability
    assert large.request_unavailability == pytest.approx(free.request_unavailability, rel=1e-3)


def test_truncation_warns_when_the_bound_carries_mass():
    with pytest.warns(markovsim.MarkovsimWarning, match="max_recovering"):
        inf.analyze_fleet(dataclasses.replace(FLEET, instances=4, demand=3.0), FULL, max_recovering=1)


@pytest.mark.parametrize("spares", [None, 2])
def test_monte_carlo_twin_within_its_99_percent_interval(spares):
    fleet = dataclasses.replace(FLEET, spare_cards=spares)
    r = inf.analyze_fleet(fleet, FULL, max_recovering=None)
    m = inf.simulate_fleet(fleet, FULL, events=20_000, replicas=64, seed=3)
    # five 99 % intervals at once: each widened so that the family keeps 99 % (Bonferroni)
    from scipy.stats import norm

    widen = float(norm.ppf(1 - 0.005 / 5) / norm.ppf(1 - 0.005))
    assert m.slo_unavailability.contains(r.slo_unavailability, widen=widen)
    assert m.capacity_unavailability.contains(1.0 - r.capacity_availability, widen=widen)
    assert m.expected_capacity.contains(r.expected_capacity, widen=widen)
    assert m.requests_lost_per_day.contains(r.requests_lost_per_day, widen=widen)
    assert m.requests_retried_per_day.contains(r.requests_retried_per_day, widen=widen)
    # the interval is informative (not trivially wide)
    assert m.slo_unavailability.high - m.slo_unavailability.low < 0.1 * r.slo_unavailability
