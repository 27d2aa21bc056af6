"""A hypothesis strategy for fleets across the whole model space: instance counts and sizes,
soft/hard fault mixes, finite and unlimited spare pools, every subset of the optional
recovery tiers with any coverage and durations, any demand up to the fleet's capacity
(public API only). Faults are accelerated (an instance fails every few hours) so that the
twin sees every state within a short run. Probabilities (coverages, the soft-fault share)
are 0, 1 or within [0.02, 0.98]: a coverage of 1e-47 is exact in the chain but an event
no Monte-Carlo run will ever see, so it would test nothing here (the exact references of
``test_fleet.py`` cover such values)."""

from __future__ import annotations

from hypothesis import strategies as st

from markovsim import HOUR, MINUTE
from markovsim import inference as inf


def _log_uniform(lo, hi):
    return st.floats(0.0, 1.0).map(lambda u: lo * (hi / lo) ** u)


def _probability():
    return st.one_of(st.just(0.0), st.just(1.0), st.floats(0.02, 0.98))


@st.composite
def fleets(draw):
    """``(fleet, tiers)``: a valid fleet and recovery ladder."""
    K = draw(st.integers(1, 4))
    E = draw(st.integers(2, 64))
    instance_mtbf = draw(_log_uniform(1 * HOUR, 24 * HOUR))
    fleet = inf.Fleet(
        instances=K, cards_per_instance=E, card_fault_rate=1.0 / (instance_mtbf * E),
        soft_fault_share=draw(_probability()),
        demand=draw(st.floats(0.2, 1.0)) * K,
        spare_cards=draw(st.one_of(st.none(), st.integers(0, 3))),
        requests_per_s=draw(st.floats(0.5, 20.0)),
        inflight_requests=draw(st.floats(0.0, 10.0)),
        tokens_per_s=draw(st.floats(1.0, 1000.0)))
    slow = draw(_log_uniform(5 * MINUTE, 2 * HOUR))

    def maybe(strategy):
        return draw(st.one_of(st.none(), strategy))

    tiers = inf.RecoveryTiers(
        inf.InstanceRestart(slow), inf.HardwareRepair(draw(_log_uniform(HOUR, 72 * HOUR))),
        token_retry=maybe(st.builds(inf.TokenRetry, _log_uniform(5.0, 600.0), _probability())),
        fast_restart=maybe(st.builds(inf.FastRestart, _log_uniform(30.0, 3600.0), _probability())),
        traffic_switch=maybe(st.builds(inf.TrafficSwitch, _log_uniform(5.0, 1800.0), _probability(),
                                       _log_uniform(60.0, 3600.0))),
        elastic=maybe(st.builds(inf.ElasticContinuation, _log_uniform(5.0, 600.0), _probability(),
                                _log_uniform(60.0, 24 * HOUR),
                                st.one_of(st.none(), st.floats(0.3, 1.0)))))
    return fleet, tiers
