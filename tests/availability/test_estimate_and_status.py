"""The shared Monte-Carlo Estimate and the result status with ``throw=`` semantics."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats

import markovsim
from markovsim import ResultStatus
from markovsim._status import check_status
from markovsim.availability import Estimate


def test_from_samples_is_the_student_t_interval():
    x = np.random.default_rng(1).normal(3.0, 2.0, size=25)  # data for the estimator, not expected values
    e = Estimate.from_samples(x, level=0.95)
    low, high = scipy.stats.t.interval(0.95, 24, loc=x.mean(), scale=scipy.stats.sem(x))
    assert (e.mean, e.low, e.high) == pytest.approx((x.mean(), low, high), rel=1e-12)
    assert e.stderr == pytest.approx(scipy.stats.sem(x), rel=1e-12) and e.replicas == 25 and e.level == 0.95
    assert e.contains(x.mean()) and not e.contains(high + 1e-9) and e.ci == (e.low, e.high)


def test_from_ratio_covers_a_known_ratio_at_its_level():
    # pooled work / time over replicas, each with a random number of renewal cycles: the
    # delta-method interval covers the true rate E[w]/E[t] = 2/3 about 99 % of the time
    rng = np.random.default_rng(7)  # draws data, not expected values
    hits, trials = 0, 2000
    for _ in range(trials):
        cycles = rng.poisson(20, size=32) + 1
        work = np.array([rng.exponential(2.0, n).sum() for n in cycles])
        time = np.array([rng.exponential(2.0, n).sum() + rng.exponential(1.0, n).sum() for n in cycles])
        hits += Estimate.from_ratio(work, time).contains(2.0 / 3.0)
    # binomial 99.9 % band around 0.99 for 2000 trials
    assert 0.99 - 3.3 * math.sqrt(0.99 * 0.01 / trials) <= hits / trials <= 1.0


def test_estimate_rejects_too_few_replicas_and_bad_levels():
    with pytest.raises(markovsim.InvalidParameterError, match="replicas"):
        Estimate.from_samples([1.0])
    with pytest.raises(markovsim.InvalidParameterError, match="level"):
        Estimate.from_samples([1.0, 2.0], level=1.5)
    with pytest.raises(markovsim.InvalidParameterError, match="denominators"):
        Estimate.from_ratio([1.0, 2.0], [1.0, 0.0])


def test_check_status_raises_for_errors_warns_for_qualifiers_and_names_indices():
    check_status(ResultStatus.OK, what="f")
    with pytest.raises(markovsim.SolverError, match=r"f: the result is not finite \(status NON_FINITE\)"):
        check_status(ResultStatus.NON_FINITE, what="f")
    with pytest.raises(markovsim.InvalidParameterError, match=r"batch indices 1, 3: field x"):
        check_status(np.array([0, 5, 0, 5]), what="f", detail=lambda i, s: "field x")
    with pytest.raises(markovsim.ReducibleChainError):
        check_status(ResultStatus.REDUCIBLE, what="f")
    with pytest.warns(markovsim.MarkovsimWarning, match=r"lower bound .* batch index \(1, 0\)"):
        check_status(np.array([[0, 0], [1, 0]]), what="f")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_status(ResultStatus.TARGET_NOT_MET, what="f")  # a result, not a problem
    assert all(s.message for s in ResultStatus)
    assert [s for s in ResultStatus if s.is_error] == [s for s in ResultStatus if s >= ResultStatus.INVALID_INPUT]
