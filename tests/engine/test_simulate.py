"""Monte Carlo paths against analytic answers.

Each estimate is checked to lie inside its own 99 % confidence interval of the analytic
value (closed forms where they exist). With fixed keys the tests are deterministic, but
an honest note: for a fresh key a correct simulator fails a 99 % interval test about once
in a hundred seeds; a failure after changing a key is not by itself a bug.

To keep compile time down every CTMC test here uses the same shapes (replicas and
max_events) so the jitted path simulator is compiled once per state count.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats

import markovsim as ms

R = 2000  # replicas
MAX_EVENTS = 5000


def two_state(a, b):
    return np.array([[-a, a], [b, -b]])


def repairable_pair(lam, mu):
    return np.array([[-2 * lam, 2 * lam, 0.0], [mu, -(lam + mu), lam], [0.0, 0.0, 0.0]])


def test_ctmc_time_average_in_confidence_interval():
    a, b, t = 3.0, 5.0, 2.0
    # closed form of (1/t) int_0^t P[X_s = 0] ds from state 0
    s = a + b
    exact = b / s + a / s**2 * -np.expm1(-s * t) / t
    est = ms.estimate_time_average(two_state(a, b), [1.0, 0.0], [1.0, 0.0], t, jax.random.key(0),
                                   replicas=R, max_events=MAX_EVENTS)
    assert est.level == 0.99 and est.replicas == R
    assert est.contains(exact), est
    assert 0 < est.stderr < 0.01


def test_ctmc_final_state_frequency_matches_transient_distribution():
    a, b, t = 3.0, 5.0, 0.2
    res = ms.simulate_ctmc(two_state(a, b), [1.0, 0.0], t, jax.random.key(1), replicas=R, max_events=MAX_EVENTS)
    p1 = a / (a + b) * -np.expm1(-(a + b) * t)
    k = int(np.sum(np.asarray(res.final_state) == 1))
    # exact binomial two-sided 99 % test
    assert scipy.stats.binomtest(k, R, p1).pvalue > 0.01
    np.testing.assert_allclose(np.asarray(res.occupancy).sum(axis=1), t, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(res.time), t)
    assert not np.asarray(res.truncated).any()


def test_mttf_estimate_in_confidence_interval_and_sparse_equals_dense():
    lam, mu = 0.05, 1.0
    Q = repairable_pair(lam, mu)
    exact = (3 * lam + mu) / (2 * lam**2)
    assert np.isclose(ms.mean_time_to_absorption(Q, [1.0, 0, 0], [2]), exact)
    key = jax.random.key(2)
    est = ms.estimate_mean_time_to_absorption(Q, [1.0, 0, 0], [2], key, replicas=R, max_events=MAX_EVENTS)
    assert est.contains(exact), est
    # the sparse chain walks the same neighbour lists: identical paths from the same key
    est_sparse = ms.estimate_mean_time_to_absorption(sp.csr_matrix(Q), [1.0, 0, 0], [2], key,
                                                     replicas=R, max_events=MAX_EVENTS)
    assert est_sparse.mean == pytest.approx(est.mean, rel=1e-12)


def test_long_run_reward_rate_twin():
    # a 3-state chain over a horizon of ~1e3 mean holding times
    Q = np.array([[-1.0, 0.7, 0.3], [2.0, -2.5, 0.5], [1.0, 1.0, -2.0]])
    r = np.array([1.0, 0.2, -0.5])
    t = 500.0
    exact = ms.accumulated_reward(Q, np.array([1.0, 0, 0]), t, r) / t
    est = ms.estimate_time_average(Q, [1.0, 0, 0], r, t, jax.random.key(3), replicas=R, max_events=MAX_EVENTS)
    assert est.contains(exact), est
    assert abs(exact - ms.long_run_reward_rate(Q, r)) < 1e-3  # and that is near the long-run rate


def test_dtmc_time_average_and_final_state():
    P = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    r = np.array([0.0, 0.0, 1.0])
    steps = 40
    exact = ms.accumulated_reward(ms.DTMC(P), np.array([1.0, 0, 0]), steps, r) / steps
    est = ms.estimate_time_average(ms.DTMC(P), [1.0, 0, 0], r, steps, jax.random.key(4), replicas=R)
    assert est.contains(exact), est
    res = ms.simulate_dtmc(ms.DTMC(P), [1.0, 0, 0], steps, jax.random.key(5), replicas=R)
    np.testing.assert_allclose(np.asarray(res.occupancy).sum(axis=1), steps)
    p = ms.transient_distribution(ms.DTMC(P), np.array([1.0, 0, 0]), steps)
    k = int(np.sum(np.asarray(res.final_state) == 2))
    assert scipy.stats.binomtest(k, R, p[2]).pvalue > 0.01


def test_truncation_is_reported_not_hidden():
    Q = two_state(100.0, 100.0)  # ~200 events per unit time
    res = ms.simulate_ctmc(Q, [1.0, 0.0], 1.0, jax.random.key(6), replicas=R, max_events=MAX_EVENTS // 100)
    trunc = np.asarray(res.truncated)
    assert trunc.all()
    assert (np.asarray(res.status) == int(ms.SimulationStatus.MAX_EVENTS)).all()
    assert (np.asarray(res.time) < 1.0).all()  # stopped where the cap hit, not at t_end
    with pytest.raises(ms.SolverError, match="hit max_events=50"):
        ms.estimate_time_average(Q, [1.0, 0.0], [1.0, 0.0], 1.0, jax.random.key(6), replicas=R,
                                 max_events=MAX_EVENTS // 100)


def test_reproducible_and_jittable():
    Q = jnp.asarray(two_state(3.0, 5.0))
    key = jax.random.key(7)
    a = ms.simulate_ctmc(Q, jnp.array([1.0, 0.0]), 2.0, key, replicas=R, max_events=MAX_EVENTS)
    b = ms.simulate_ctmc(Q, jnp.array([1.0, 0.0]), 2.0, key, replicas=R, max_events=MAX_EVENTS)
    np.testing.assert_array_equal(a.occupancy, b.occupancy)
    f = jax.jit(lambda Q, k: ms.simulate_ctmc(Q, jnp.array([1.0, 0.0]), 2.0, k, replicas=R, max_events=MAX_EVENTS))
    c = f(Q, key)
    np.testing.assert_array_equal(c.final_state, a.final_state)
    np.testing.assert_allclose(c.occupancy, a.occupancy, rtol=1e-15)
    other = ms.simulate_ctmc(Q, jnp.array([1.0, 0.0]), 2.0, jax.random.key(8), replicas=R, max_events=MAX_EVENTS)
    assert not np.array_equal(other.occupancy, a.occupancy)


def test_bad_input():
    Q = two_state(1.0, 2.0)
    key = jax.random.key(0)
    with pytest.raises(ms.InvalidParameterError, match="p0 sums to 0.5"):
        ms.simulate_ctmc(Q, [0.5, 0.0], 1.0, key)
    with pytest.raises(ms.InvalidParameterError, match="t_end=-1.0"):
        ms.simulate_ctmc(Q, [1.0, 0.0], -1.0, key)
    with pytest.raises(ms.InvalidParameterError, match="replicas=0: expected an integer >= 1"):
        ms.simulate_ctmc(Q, [1.0, 0.0], 1.0, key, replicas=0)
    with pytest.raises(ms.InvalidParameterError, match="key: expected a JAX PRNG key"):
        ms.simulate_ctmc(Q, [1.0, 0.0], 1.0, 42)
    with pytest.raises(ms.InvalidParameterError, match="at least 2 replicas"):
        ms.estimate_time_average(Q, [1.0, 0.0], [1.0, 0.0], 1.0, key, replicas=1)
    with pytest.raises(ms.InvalidParameterError, match="level=1.5"):
        ms.estimate_time_average(Q, [1.0, 0.0], [1.0, 0.0], 1.0, key, level=1.5)
    with pytest.raises(ms.InvalidParameterError, match=r"rewards: got shape \(3,\)"):
        ms.estimate_time_average(Q, [1.0, 0.0], [1.0, 0.0, 0.0], 1.0, key)
    with pytest.raises(ms.InvalidChainError, match="row 0 sums to"):
        ms.simulate_ctmc(np.array([[-1.0, 2.0], [1.0, -1.0]]), [1.0, 0.0], 1.0, key)
    with pytest.raises(TypeError, match="simulate_dtmc"):
        ms.simulate_ctmc(ms.DTMC(np.eye(2)), [1.0, 0.0], 1.0, key)
    with pytest.raises(ms.InvalidParameterError, match="whole steps"):
        ms.simulate_dtmc(ms.DTMC(np.eye(2)), [1.0, 0.0], 2.5, key)
    with pytest.raises(ms.InvalidParameterError, match="no exit and is not absorbing"):
        ms.estimate_mean_time_to_absorption(np.array([[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
                                            [1.0, 0.0, 0.0], [2], key, replicas=R, max_events=MAX_EVENTS)
