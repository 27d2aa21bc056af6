"""Shocks, burst sizes and the Markov-modulated arrival process."""

import math

import numpy as np
import pytest
from scipy import optimize

from markovsim import DAY, HOUR
from markovsim.availability import FaultLog, MarkovModulatedPoisson, cluster_shocks, fit_burst_sizes, fit_mmpp


def _log(starts, classes, names=("A", "B")):
    s = np.asarray(starts, float)
    return FaultLog(node=np.arange(s.size), start=s, end=s + 1.0, censored=np.zeros(s.size, bool),
                    fault_class=np.asarray(classes), classes=names, node_names=tuple(map(str, range(s.size))),
                    nodes=s.size, window=float(s.max() + 10))


def test_shocks_link_a_class_within_the_window():
    # class A: 0, 10 min, 50 min -> one shock (single linkage); 3 h -> another. class B at 5 min alone.
    log = _log([0, 300, 600, 3000, 10800], [0, 1, 0, 0, 0])
    sh = cluster_shocks(log, HOUR)
    assert sorted(zip(sh.fault_class.tolist(), sh.size.tolist())) == [(0, 1), (0, 3), (1, 1)]
    assert sh.size.sum() == log.n_faults and sh.members.max() == 2
    assert cluster_shocks(log, 0.0).size.tolist() == [1, 1, 1, 1, 1]


def test_burst_sizes_are_the_likelihood_maximum():
    sizes = np.array([1] * 20 + [2, 2, 3, 6, 9])
    from markovsim.availability import Shocks
    sh = Shocks(time=np.arange(sizes.size, dtype=float), fault_class=np.zeros(sizes.size, int), size=sizes,
                members=np.zeros(0, int), window=HOUR)
    b = fit_burst_sizes(sh, 1)

    def nll(x):
        phi, th = 1 / (1 + np.exp(-x[0])), 1 / (1 + np.exp(-x[1]))
        j = sizes[sizes > 1] - 1
        return -((sizes == 1).sum() * math.log(1 - phi) + np.sum(math.log(phi) + np.log(1 - th) + (j - 1) * math.log(th)))

    x = optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12}).x
    assert b.burst_probability[0] == pytest.approx(1 / (1 + np.exp(-x[0])), rel=1e-4)
    assert b.continuation[0] == pytest.approx(1 / (1 + np.exp(-x[1])), rel=1e-4)
    assert b.mean_size()[0] == pytest.approx(sizes.mean(), rel=1e-12)     # the MLE matches the mean size
    draws = b.sample(np.random.default_rng(0), np.zeros(200000, int))
    assert draws.mean() == pytest.approx(sizes.mean(), rel=0.02)


def test_mmpp_recovers_a_known_process():
    true = MarkovModulatedPoisson(rates=np.array([0.5, 4.0]) / DAY, switch=np.array([1 / 20, 1 / 5]) / DAY)
    rng = np.random.default_rng(3)
    T = 2000 * DAY
    t = true.sample_times(rng, T)
    fit = fit_mmpp(t, T)
    z = (fit.theta - np.log(np.r_[true.rates, true.switch] * DAY)) / np.sqrt(np.diag(fit.covariance))
    assert np.all(np.abs(z) < 3.5)                      # each parameter within 3.5 Wald standard errors
    assert fit.lr_pvalue < 1e-6
    assert fit.process.mean_rate() == pytest.approx(t.size / T, rel=0.1)


def test_mmpp_on_poisson_data_finds_no_modulation():
    rng = np.random.default_rng(5)
    T = 500 * DAY
    t = np.sort(rng.uniform(0, T, rng.poisson(1.2 * 500)))
    fit = fit_mmpp(t, T)
    assert fit.lr_pvalue > 0.01
    assert fit.loglik >= fit.poisson_loglik - 1e-6                 # the MMPP nests the Poisson process
    assert fit.process.mean_rate() == pytest.approx(t.size / T, rel=0.05)
