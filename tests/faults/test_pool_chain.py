"""Phase-type repair in the spare pool's chain, and node rate classes in MTBF(N).

References: the exponential pool (the chain before phase-type repair) term for term; an
event-by-event simulation of the pool alone (numpy, a 99 % interval); closed forms
(``s = 0``: the wait is the whole repair; a node's up share ``1 / (1 + lambda m)``); finite
differences for gradients; the availability twin (99 % interval) for goodput.
"""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import markovsim
from markovsim.availability import (
    AvailabilityModel,
    CheckpointPolicy,
    FaultModel,
    MAX_POOL_STATES,
    PoolChainTooLargeError,
    RecoveryTier,
    Rollback,
    SparePool,
    analyze,
    cluster_fault_rate,
    cluster_fault_rate_with_repair,
    coxian,
    exponential,
    hyperexponential,
    simulate,
)

from markovsim.availability._pool_chain import effective_repair, node_up_share, pool_states, pool_wait  # noqa: E402

H = 3600.0
Z99 = 2.5758293035489004


def _h2(mean, fast_share, fast_fraction):
    """A two-branch hyperexponential of ``mean`` seconds: ``fast_share`` of repairs take
    ``fast_fraction x mean`` on average, the rest the slow remainder."""
    slow = (mean - fast_share * fast_fraction * mean) / (1 - fast_share)
    return hyperexponential([fast_share, 1 - fast_share], [1 / (fast_fraction * mean), 1 / slow])


def _pool_model(spares, rate, *, detection=60.0, restart=240.0):
    """One fault mode, every fault takes a spare, nothing rolled back: goodput is driven by the pool."""
    tier = RecoveryTier(name="swap node", rollback=Rollback.NONE, takes_spare=True, detection=detection,
                        comm_setup_base=restart)
    return AvailabilityModel(
        cards=64.0, fault_names=("node lost",), fault_tier=(0,), fault_interrupts=(True,),
        fault_rates=jnp.array([rate]), fault_degraded_throughput=jnp.ones(1), fault_detection_time=jnp.zeros(1),
        fault_spare_nodes=jnp.ones(1), fault_predicted=jnp.zeros(1), tiers=(tier,),
        checkpoint=CheckpointPolicy(interval=3600.0, save_time=30.0), spares=spares, step_time=10.0)


def _tiered(spares):
    from tests.availability.availability_models import tiered

    return tiered(spares=spares)


# ------------------------------------------------------------------ the exponential case


@pytest.mark.parametrize("size", [0, 1, 3, 6])
def test_one_exponential_phase_equals_the_exponential_pool(size):
    old = _tiered(SparePool(size=size, repair_time=4 * H, activation_time=60.0))
    new = _tiered(SparePool(size=size, repair_time=4 * H, activation_time=60.0, repair=exponential(1 / (4 * H))))
    a, b = analyze(old), analyze(new)
    for f in ("goodput", "unavailability", "availability", "interruptions_per_day"):
        assert float(getattr(b, f)) == pytest.approx(float(getattr(a, f)), rel=1e-12, abs=1e-15), f
    np.testing.assert_allclose(np.asarray(b.lost), np.asarray(a.lost), rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------ the chain itself


def _pool_des(ph, size, birth, recovery, arrivals, rng):
    """The pool alone, event by event: Poisson arrivals in U, each failed node away for a
    draw of ``ph``; with ``size`` nodes already away the job waits for the first to return,
    then recovers for an exponential time. Returns (mean wait, its standard error, share
    of arrivals that waited)."""
    draws = ph.sample(rng, arrivals)
    t, away, waits = 0.0, [], np.zeros(arrivals)
    for k in range(arrivals):
        t += rng.exponential(1 / birth)
        away = [x for x in away if x > t]
        away.append(t + draws[k])
        if len(away) > size:
            away.sort()
            waits[k] = away.pop(0) - t
        t += waits[k] + rng.exponential(recovery)
    return waits.mean(), waits.std(ddof=1) / math.sqrt(arrivals), float(np.mean(waits > 0))


@pytest.mark.parametrize("ph, size, load", [
    (_h2(H, 0.8, 0.05), 2, 2.0),
    (coxian([1 / 600.0, 1 / 3000.0, 1 / 100.0], [0.5, 0.3]), 1, 1.0),
], ids=["hyperexponential", "coxian"])
def test_pool_wait_matches_an_event_simulation_of_the_pool(ph, size, load):
    birth, recovery = load / float(ph.mean()), 300.0
    wait, p_empty = pool_wait(ph, size, birth, recovery)
    mean, se, share = _pool_des(ph, size, birth, recovery, 40_000, np.random.default_rng(7))
    assert abs(float(wait) - mean) <= Z99 * se, (float(wait), mean, se)
    se_p = math.sqrt(share * (1 - share) / 40_000)  # arrivals are correlated: checked loosely (5 se)
    assert abs(float(p_empty) - share) <= 5 * se_p + 1e-3, (float(p_empty), share)


def test_fitted_infinitehbd_repair_in_the_pool():
    """The repair times of the shipped InfiniteHBD trace (censoring included) fitted as a
    2-phase hyperexponential with an atom at zero, in a pool of 16 spares facing the trace's
    fault rate: the chain's wait agrees with the event simulation of the pool drawing the
    same fitted distribution, and the state count stays under the limit."""
    from markovsim.availability import fit_phase_type, infinitehbd_trace

    log = infinitehbd_trace()
    ph = fit_phase_type(log.duration, log.censored, phases=2).distribution
    assert 0.0 < float(ph.zero_mass) < 0.1 and float(ph.scv()) > 1.5   # high variance, some instant repairs
    birth = log.n_faults / log.window
    assert pool_states(16, 2) <= MAX_POOL_STATES
    wait, p_empty = pool_wait(ph, 16, birth, 3600.0)
    mean, se, share = _pool_des(ph, 16, birth, 3600.0, 40_000, np.random.default_rng(5))
    assert abs(float(wait) - mean) <= Z99 * se, (float(wait), mean, se)
    assert abs(float(p_empty) - share) <= 5 * math.sqrt(share * (1 - share) / 40_000) + 1e-3


def test_phases_no_repair_enters_are_harmless():
    """A branch of probability 0 (or a Coxian that never moves on) leaves phases no node
    enters: their states are transient with probability 0, the answer the one-phase pool's."""
    one = pool_wait(exponential(1 / 600.0), 2, 1 / 3000.0, 300.0)
    for ph in (hyperexponential([1.0, 0.0], [1 / 600.0, 1 / 6000.0]), coxian([1 / 600.0, 1 / 60.0], [0.0])):
        got = pool_wait(ph, 2, 1 / 3000.0, 300.0)
        np.testing.assert_allclose(np.asarray(got), np.asarray(one), rtol=1e-12)


def test_no_spares_waits_for_the_whole_repair():
    for ph in (_h2(2 * H, 0.9, 0.1), coxian([1 / 600.0, 1 / 60.0], [0.4], zero_mass=0.25)):
        wait, p_empty = pool_wait(ph, 0, 1e-4, 300.0)
        assert float(wait) == pytest.approx(float(ph.mean()), rel=1e-10)
        assert float(p_empty) == pytest.approx(1.0 - float(ph.zero_mass), rel=1e-12)


def test_state_count_and_size_guard():
    assert pool_states(3, 1) == 2 * 4 + 1   # the exponential pool: 2 (s + 1) + 1
    for s, p in ((2, 2), (3, 3), (5, 2)):   # brute force: count vectors by total nodes in repair
        vectors = [v for v in itertools.product(range(s + 2), repeat=p)]
        assert pool_states(s, p) == 2 * sum(sum(v) <= s for v in vectors) + sum(sum(v) == s + 1 for v in vectors)
    too_big = next(s for s in range(1, 200) if pool_states(s, 3) > MAX_POOL_STATES)
    h3 = hyperexponential([0.5, 0.3, 0.2], [1 / 600.0, 1 / 6000.0, 1 / 60000.0])
    m = _tiered(SparePool.with_repair(too_big, h3, 60.0))
    with pytest.raises(PoolChainTooLargeError, match=rf"need {pool_states(too_big, 3)} states") as err:
        analyze(m)
    assert isinstance(err.value, markovsim.InvalidParameterError)
    assert f"at most {too_big - 1} spares fits" in str(err.value)
    with pytest.raises(PoolChainTooLargeError):   # refused under throw=False too: a structure check
        analyze(m, throw=False)


def test_repair_mean_must_match_repair_time():
    m = _tiered(SparePool(size=2, repair_time=3 * H, repair=_h2(4 * H, 0.9, 0.1)))
    with pytest.raises(markovsim.InvalidParameterError, match=r"spares.repair: its mean is 14400"):
        analyze(m)
    with pytest.raises(markovsim.InvalidParameterError, match="PhaseType"):
        analyze(_tiered(SparePool(size=2, repair_time=3 * H, repair=(1.0, 2.0))))


# ------------------------------------------------------------------ jit, vmap, grad


def _goodput(model):
    return analyze(model, throw=False).goodput


def test_jit_vmap_and_grad_with_phase_type_repair():
    h = _h2(3 * H, 0.8, 0.1)
    m = _tiered(SparePool.with_repair(3, h, 60.0))
    eager = float(analyze(m).goodput)
    assert float(jax.jit(_goodput)(m)) == pytest.approx(eager, rel=1e-12)
    # vmap: a batch of two pools (the second with a heavier tail, same mean)
    h_b = _h2(3 * H, 0.95, 0.05)
    m_b = _tiered(SparePool.with_repair(3, h_b, 60.0))
    batch = jax.tree_util.tree_map(lambda *v: jnp.stack(v), m, m_b)
    out = analyze(batch).goodput
    assert out.shape == (2,)
    np.testing.assert_allclose(np.asarray(out), [eager, float(analyze(m_b).goodput)], rtol=1e-12)

    # grad: repair_time (the mean at a fixed shape) and one slow-phase rate, against central differences
    def of_time(t):
        return _goodput(_tiered(SparePool(size=3, repair_time=t, activation_time=60.0, repair=h)))

    def of_rate(r):
        S = h.S.at[1, 1].set(-r)
        return _goodput(_tiered(SparePool(size=3, repair_time=3 * H, activation_time=60.0,
                                          repair=markovsim.availability.PhaseType(h.alpha, S))))

    for fn, x in ((of_time, 3 * H), (of_rate, float(-h.S[1, 1]))):
        g = float(jax.jit(jax.grad(fn))(jnp.asarray(x)))  # jitted: 3x faster than op by op
        step = 1e-4 * x
        fd = (float(fn(x + step)) - float(fn(x - step))) / (2 * step)
        assert np.isfinite(g) and g != 0.0
        assert g == pytest.approx(fd, rel=1e-5), (g, fd)


# ------------------------------------------------------------------ against the twin


def test_twin_draws_phase_type_repair_and_agrees():
    """A hyperexponential repair (SCV 8.2, mean 1 h; 80 % of repairs take 3 min on average,
    the rest 4.8 h) under pool stress: the analytic goodput and unavailability lie inside
    the twin's 99 % intervals; the exponential pool with the same mean lies outside them.

    The horizon is long (48 days) because every replica starts with the pool full: with a
    4.8 h slow branch the start-up transient biases a 6-day run by about +1 %."""
    ph = _h2(H, 0.8, 0.05)
    rate = 2.0 / H
    m_ph = _pool_model(SparePool.with_repair(2, ph), rate)
    m_exp = _pool_model(SparePool(size=2, repair_time=H), rate)
    a_ph, a_exp = analyze(m_ph), analyze(m_exp)
    twin = simulate(m_ph, replicas=256, horizon=48 * 86400.0, dt=1.0, seed=11)
    for field, est in (("goodput", twin.goodput), ("unavailability", twin.unavailability)):
        low, high = est.ci
        assert low <= float(getattr(a_ph, field)) <= high, (field, float(getattr(a_ph, field)), est.ci)
        assert not low <= float(getattr(a_exp, field)) <= high, (field, float(getattr(a_exp, field)), est.ci)


# ------------------------------------------------------------------ node classes in MTBF(N)


@pytest.mark.parametrize("ph", [_h2(5 * 86400.0, 0.7, 0.1), coxian([1 / 3600.0, 1 / 86400.0], [0.4])],
                         ids=["hyperexponential", "coxian"])
def test_node_up_share_is_the_alternating_renewal_closed_form(ph):
    rate = 1 / (40 * 86400.0)
    up = node_up_share(rate, ph)
    assert float(up) == pytest.approx(1 / (1 + rate * float(ph.mean())), rel=1e-12)
    g = float(jax.grad(lambda r: node_up_share(r, ph))(rate))
    assert g == pytest.approx(-float(ph.mean()) / (1 + rate * float(ph.mean())) ** 2, rel=1e-9)
    assert float(jax.jit(node_up_share)(rate, ph)) == pytest.approx(float(up), rel=1e-14)
    rates = jnp.array([rate, 2 * rate, 5 * rate])
    np.testing.assert_allclose(np.asarray(jax.vmap(lambda r: node_up_share(r, ph))(rates)),
                               1 / (1 + np.asarray(rates) * float(ph.mean())), rtol=1e-12)


def _fault_model(shares, weights, repair):
    from markovsim.availability import BurstSizes, MarkovModulatedPoisson

    shocks = MarkovModulatedPoisson(rates=np.array([4e-5, 4e-5]), switch=np.array([1e-6, 1e-6]))
    return FaultModel(classes=("GPU",), nodes=400, shocks=shocks, class_shares=np.array([1.0]),
                      sizes=BurstSizes(burst_probability=np.array([0.0]), continuation=np.array([0.0]), shocks=np.array([100]),
                                        bursts=np.array([0]), extra=np.array([0])),
                      rate_class_shares=np.asarray(shares), rate_class_weights=np.asarray(weights),
                      repair=(repair,))


def test_cluster_fault_rate_with_repair_uses_the_node_classes():
    repair = _h2(5 * 86400.0, 0.7, 0.1)
    m = float(repair.mean())
    homogeneous = _fault_model([1.0], [1.0], repair)
    lemons = _fault_model([0.9, 0.1], [0.5, 5.5], repair)   # mean weight 1: same mean rate
    lam = homogeneous.node_rate()
    for model in (homogeneous, lemons):
        base = float(cluster_fault_rate(model, 800))
        expected = sum(p * w * lam / (1 + w * lam * m) for p, w in zip(model.rate_class_shares,
                                                                      model.rate_class_weights)) / lam
        assert cluster_fault_rate_with_repair(model, 800) == pytest.approx(base * expected, rel=1e-10)
    # lemons fault more and are away more: the cluster faults less than the mean rate says
    assert cluster_fault_rate_with_repair(lemons, 800) < cluster_fault_rate_with_repair(homogeneous, 800)


def test_node_classes_and_repair_leave_the_doubling_ratio_unchanged():
    """Nodes away for repair lower every cluster's fault rate by the same factor (random
    placement): MTBF(2N) / MTBF(N), and with it what S-MTBF-1 needs, do not move."""
    from markovsim.availability import mtbf_ratio

    lemons = _fault_model([0.9, 0.1], [0.5, 5.5], _h2(5 * 86400.0, 0.7, 0.1))
    for n in (100, 400, 3000):
        ratio = cluster_fault_rate_with_repair(lemons, n) / cluster_fault_rate_with_repair(lemons, 2 * n)
        assert ratio == pytest.approx(mtbf_ratio(lemons, n), rel=1e-12)


# -- the repair distribution in a recovery file ----------------------------------------------

_SPARES = """[spares]
size = 64                    # assumption: 64 hot spare servers (about 3 % of 2,048)"""


def _plan_with_spares(tmp_path, block: str):
    from pathlib import Path

    models = Path(__file__).resolve().parents[2] / "models"
    text = (models / "recovery" / "gpu_tiered.toml").read_text()
    start = text.index("[spares]")
    end = text.index("\n\n", start)
    path = tmp_path / "plan.toml"
    path.write_text(text[:start] + block + text[end:])
    return models / "clusters" / "gpu_8x_16k.toml", path


def test_a_recovery_file_states_phase_type_repair(tmp_path):
    from markovsim.availability import load_model

    block = """[spares]
size = 4
activation_time = "60 s"
[spares.repair]
instant = 0.1
[[spares.repair.phases]]
share = 0.7
mean = "2 h"
[[spares.repair.phases]]
share = 0.2
mean = "30 h"
"""
    cluster, plan = _plan_with_spares(tmp_path, block)
    model = load_model(cluster, plan, cards=4096)
    want = hyperexponential([0.7 / 0.9, 0.2 / 0.9], [1 / (2 * H), 1 / (30 * H)], zero_mass=0.1)
    assert float(model.spares.repair_time) == pytest.approx(0.7 * 2 * H + 0.2 * 30 * H, rel=1e-12)
    direct = dataclasses.replace(model, spares=SparePool.with_repair(4, want, activation_time=60.0))
    assert float(analyze(model).goodput) == pytest.approx(float(analyze(direct).goodput), rel=1e-12)
    # the same mean with exponential repair waits less for spares (the heavy branch matters)
    expo = dataclasses.replace(model, spares=SparePool(size=4, repair_time=model.spares.repair_time,
                                                       activation_time=60.0))
    assert float(analyze(expo).goodput) != pytest.approx(float(analyze(model).goodput), rel=1e-6)


@pytest.mark.parametrize("block,needle", [
    ("[spares]\nsize = 4\n[spares.repair]\n[[spares.repair.phases]]\nshare = 0.5\nmean = \"2 h\"\n",
     r"spares.repair: phase shares \[0.5\] plus instant=0.0 sum to 0.5; expected 1"),
    ("[spares]\nsize = 4\nrepair_time = \"3 h\"\n[spares.repair]\n[[spares.repair.phases]]\nshare = 1\n"
     "mean = \"2 h\"\n", r"spares.repair_time=10800.0 s: the repair phases have mean 7200.0 s"),
    ("[spares]\nsize = 4\n[spares.repair]\n[[spares.repair.phases]]\nshare = 1\nmean = \"2 GB\"\n",
     r"spares.repair.phases\[0\].mean"),
    ("[spares]\nsize = 4\n[spares.repair]\ninstant = 1.0\n", r"spares.repair.phases: required key is missing"),
])
def test_a_bad_repair_distribution_is_refused_naming_the_field(tmp_path, block, needle):
    from markovsim.availability import load_model

    cluster, plan = _plan_with_spares(tmp_path, block)
    with pytest.raises(markovsim.MarkovsimError, match=needle):
        load_model(cluster, plan, cards=4096)
