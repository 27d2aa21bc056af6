"""MTBF against size with correlated failures (S-MTBF-1)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, strategies as st

from markovsim.availability import (BurstSizes, FaultModel, MarkovModulatedPoisson, Reach, cluster_fault_rate,
                                    exponential, job_interruption_rate, mtbf_elasticity, mtbf_ratio,
                                    superlinear_share_for_ratio)


def model(phi, theta, shares, nodes=400, rate=1e-5):
    C = len(phi)
    return FaultModel(classes=tuple(f"c{i}" for i in range(C)), nodes=nodes,
                      shocks=MarkovModulatedPoisson(rates=np.array([rate, 3 * rate]), switch=np.array([1e-6, 2e-6])),
                      class_shares=np.asarray(shares) / np.sum(shares),
                      sizes=BurstSizes(burst_probability=np.asarray(phi, float), continuation=np.asarray(theta, float),
                                       shocks=np.ones(C), bursts=np.ones(C), extra=np.ones(C)),
                      rate_class_shares=np.array([1.0]), rate_class_weights=np.array([1.0]),
                      repair=(exponential(1e-5),) * C)


classes = st.integers(1, 4)


@given(st.lists(st.tuples(st.floats(0, 0.9), st.floats(0, 0.95), st.floats(0.01, 1)), min_size=1, max_size=4),
       st.floats(2, 1e5), st.sampled_from(list(Reach)))
def test_correlated_terms_never_lower_mtbf_sensitivity(params, nodes, reach):
    phi, theta, shares = map(list, zip(*params))
    m = model(phi, theta, shares)
    assert mtbf_elasticity(m, nodes, reach=reach) >= 1 - 1e-6
    assert mtbf_ratio(m, nodes, reach=reach) <= 0.5 + 1e-12
    independent = model([0.0] * len(phi), [0.0] * len(phi), shares)
    assert mtbf_elasticity(independent, nodes, reach=reach) == pytest.approx(1.0, abs=1e-6)


def test_one_third_needs_half_the_faults_correlated():
    # geometric extra with mean 1 on every shock (phi = 1, theta -> 0): E[K] - 1 = 1 at the fitted size
    m = model([1.0], [0.0], [1.0], nodes=10**6)
    assert mtbf_ratio(m, 10**6) == pytest.approx(1 / 3, rel=1e-5)
    assert m.correlated_share() == pytest.approx(superlinear_share_for_ratio(1 / 3))
    assert mtbf_ratio(m, 10**6, reach=Reach.LOCAL) == pytest.approx(0.5)


def test_job_interruptions_grow_slower_than_the_job():
    m = model([0.3, 0.1], [0.8, 0.5], [1, 2])
    n = np.array([1, 50, 100, 200, 400])
    r = job_interruption_rate(m, n)
    assert r[-1] == pytest.approx(m.shocks.mean_rate())           # the whole fleet: every shock
    per_node = r / n
    assert np.all(np.diff(per_node) < 0)                          # concave: bursts hit a big job once
    assert r[0] == pytest.approx(m.shocks.mean_rate() * (m.class_shares * m.sizes.mean_size()).sum() / 400,
                                 rel=1e-2)   # one node: its share of the faults, to second order in 1/400
    assert cluster_fault_rate(m, 400).item() == pytest.approx(
        m.shocks.mean_rate() * (m.class_shares * m.sizes.mean_size()).sum(), rel=1e-12)
