"""Calibrating a catalogue to an incident log, and the published-run check's arithmetic."""

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import markovsim
from markovsim import DAY
from markovsim.availability import IncidentLog, calibrate_catalogue, load_cluster, poisson_rate_interval, \
    published_run_check

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_profile_interval_is_the_likelihood_ratio_bound():
    est, lo, hi = poisson_rate_interval(12, 4.0, 0.9)
    q = stats.chi2.ppf(0.9, 1)
    for r in (lo, hi):
        assert 2 * (12 * np.log(est / r) - (est - r) * 4.0) == pytest.approx(q, rel=1e-9)
    assert poisson_rate_interval(0, 2.0) == (0.0, 0.0, pytest.approx(q / 4.0))


def test_profile_interval_coverage_is_exact_enough():
    """Exact coverage (summing the Poisson pmf over counts whose interval covers the truth)."""
    for mean in (5.0, 20.0, 120.0):
        n = np.arange(0, int(mean * 4 + 50))
        cover = [poisson_rate_interval(k, 1.0, 0.9) for k in n]
        ok = np.array([lo <= mean <= hi for _, lo, hi in cover])
        coverage = stats.poisson.pmf(n[ok], mean).sum()
        assert 0.86 <= coverage <= 0.94, (mean, coverage)   # discrete counts: coverage oscillates near 0.9


def _incidents(rate_per_s, days, cards, rng, causes=("gpu",), p=(1.0,)):
    t = np.sort(rng.uniform(0, days * DAY, rng.poisson(rate_per_s * days * DAY)))
    return IncidentLog(time=t, cause=tuple(rng.choice(causes, t.size, p=p)), downtime=np.zeros(t.size),
                       window=days * DAY, cards=cards)


def test_calibration_recovers_a_known_scale():
    shape, cat = load_cluster(MODELS / "clusters" / "gpu_8x_16k.toml")
    base = calibrate_catalogue(cat, shape, IncidentLog(np.array([1.0]), ("x",), np.zeros(1), 10 * DAY, 8192))
    rate = 1.5 * (1.0 / base.fitted[0].estimate) / base.running_time
    inc = _incidents(rate, 60, 8192, np.random.default_rng(0))
    r = calibrate_catalogue(cat, shape, inc)
    s = r.fitted[0]
    assert s.low <= 1.5 <= s.high and s.method.startswith("profile")
    assert r.checks[0].fitted and r.checks[0].passed              # the total is fitted: marked so
    assert markovsim.availability.interruption_rate(r.catalogue, shape, 8192) == pytest.approx(
        s.estimate * markovsim.availability.interruption_rate(cat, shape, 8192), rel=1e-12)


def test_issue_example_120_in_30_days():
    """The issue's user: 120 interruptions in 30 days on 8,192 GPUs (no downtimes recorded)."""
    shape, cat = load_cluster(MODELS / "clusters" / "gpu_8x_16k.toml")
    rng = np.random.default_rng(1)
    inc = IncidentLog(time=np.sort(rng.uniform(0, 30 * DAY, 120)), cause=("gpu",) * 120,
                      downtime=np.full(120, np.nan), window=30 * DAY, cards=8192)
    with pytest.raises(markovsim.InvalidParameterError, match="availability"):
        calibrate_catalogue(cat, shape, inc)
    r = calibrate_catalogue(cat, shape, inc, availability=0.95)
    fitted = {v.name: v for v in r.fitted}
    assert fitted["interruption rate (running)"].estimate == pytest.approx(120 / (0.95 * 30))
    assert "fitted output" in r.table()


def test_per_component_needs_a_cause_map():
    shape, cat = load_cluster(MODELS / "clusters" / "gpu_8x_16k.toml")
    inc = _incidents(1e-4, 10, 1024, np.random.default_rng(2), causes=("gpu", "link"), p=(0.5, 0.5))
    with pytest.raises(markovsim.InvalidParameterError, match="cause_map"):
        calibrate_catalogue(cat, shape, inc, scale="component")
    with pytest.raises(markovsim.InvalidParameterError, match="link"):
        calibrate_catalogue(cat, shape, inc, scale="component", cause_map={"gpu": "gpu"})
    r = calibrate_catalogue(cat, shape, inc, scale="component", cause_map={"gpu": "gpu", "link": "network_link"})
    names = [v.name for v in r.fitted]
    assert "rate scale gpu" in names and "rate scale network_link" in names
    assert all(c.fitted for c in r.checks if c.statistic.startswith("incidents"))


def test_published_run_check_arithmetic():
    shape, cat = load_cluster(MODELS / "clusters" / "gpu_8x_16k.toml")
    chk = published_run_check(cat, shape, cards=16384, days=54, reported=419, availability=0.9, availability_low=0.8)
    run = markovsim.availability.interruption_rate(cat, shape, 16384)
    assert chk.predicted == pytest.approx(run * 0.9 * 54 * DAY)
    assert chk.predicted_range == pytest.approx((run * 0.8 * 54 * DAY, run * 54 * DAY))
    assert chk.relative_error == pytest.approx(chk.predicted / 419 - 1)
