"""The fault fits' inner estimators against their definitions: the Kaplan-Meier CDF against
its product-limit formula written out time by time, and the MMPP log-likelihood against the
forward algorithm with matrix exponentials (scipy.linalg.expm), not the eigen-decomposition
and scalar filter the fit uses."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from scipy import linalg

from markovsim.availability._common_cause import _mmpp_loglik
from markovsim.availability._gof import kaplan_meier


def _product_limit(t, c):
    times = sorted(set(x for x, cc in zip(t, c) if not cc))
    surv, F = 1.0, []
    for x in times:
        at_risk = sum(1 for y in t if y >= x)
        deaths = sum(1 for y, cc in zip(t, c) if y == x and not cc)
        surv *= 1.0 - deaths / at_risk
        F.append(1.0 - surv)
    return np.array(times), np.array(F)


@given(st.lists(st.tuples(st.integers(0, 12), st.booleans()), max_size=40))
def test_kaplan_meier_is_the_product_limit_estimator(rows):
    """Ties (integer durations), censoring at and between death times, empty and all-censored."""
    t = np.array([float(x) for x, _ in rows])
    c = np.array([cc for _, cc in rows], dtype=bool)
    times, F = kaplan_meier(t, c)
    want_t, want_F = _product_limit(t.tolist(), c.tolist())
    np.testing.assert_array_equal(times, want_t)
    np.testing.assert_allclose(F, want_F, rtol=0, atol=1e-15)
    assert np.all(np.diff(F) >= 0) and (F.size == 0 or F[-1] <= 1.0)


@given(st.lists(st.floats(0.01, 30.0), min_size=1, max_size=25), st.floats(0.0, 10.0),
       st.tuples(*[st.floats(-3.0, 1.5)] * 4))
def test_mmpp_loglik_is_the_forward_algorithm(gaps, tail, theta):
    theta = np.array(theta)
    eta = np.exp(theta[:2])
    a, b = np.exp(theta[2:])
    D = np.array([[-a, a], [b, -b]]) - np.diag(eta)
    p = np.array([b, a]) / (a + b)
    ll = 0.0
    for g in gaps:   # scaled: p exp(D g) diag(eta), renormalised, the scale's log summed
        p = p @ linalg.expm(D * g) @ np.diag(eta)
        ll += math.log(p.sum())
        p = p / p.sum()
    ll += math.log((p @ linalg.expm(D * tail)).sum())
    got, end = _mmpp_loglik(theta, np.array(gaps), tail, return_end=True)
    assert got == np.float64(ll) or abs(got - ll) <= 1e-9 * max(1.0, abs(ll))
    assert abs(_mmpp_loglik(theta, np.array(gaps), tail) - got) == 0.0
    np.testing.assert_allclose(end.sum(), 1.0, rtol=1e-12)
