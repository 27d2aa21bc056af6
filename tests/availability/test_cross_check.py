"""Cross-check by construction: the analytic goodput of random models across the whole model
space against the Monte-Carlo twin's 99 % confidence interval.

The twin shares none of the analytic model's formulas (no renewal argument, no dilation, a
simulated spare pool), so a disagreement is a bug or an unstated approximation in one of
them. Under the ``ci`` profile a handful of models run (they are part of ``make test``);
under ``HYPOTHESIS_PROFILE=thorough`` 500 are drawn and at least 98 % must lie inside the
twin's 99 % interval (a miss rate of 1 % is expected by chance alone). Run with ``-s`` to
see the coverage and every miss.
"""

import math
import os

import jax
import numpy as np
from hypothesis import Phase, given, settings

from markovsim import DAY, ResultStatus
from markovsim.availability import analyze, simulate

from .random_models import availability_models

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
MODELS = 500 if THOROUGH else 4
#: the share of models whose analytic goodput must lie inside the twin's 99 % interval
COVERAGE = 0.98


def _horizon(model):
    """Enough wall time for ~300 fault events and 40 checkpoint intervals per replica."""
    rate = float(np.sum(np.asarray(model.fault_rates)))
    return max(float(np.clip(300.0 / rate, 5 * DAY, 120 * DAY)), 40 * float(model.checkpoint.interval))


def test_analytic_goodput_lies_inside_the_twins_interval_for_random_models():
    rows = []

    @settings(max_examples=MODELS, phases=[Phase.generate], deadline=None, database=None)
    @given(availability_models())
    def one(model):
        i = len(rows)
        a = analyze(model, throw=False)
        goodput = float(a.goodput)
        assert int(a.status) == ResultStatus.OK and math.isfinite(goodput), (i, int(a.status), model)
        twin = simulate(model, replicas=128, horizon=_horizon(model), dt=1.0, seed=i, throw=False)
        assert twin.status is ResultStatus.OK, (i, twin.status, model)
        g = twin.goodput
        assert g.half_width < 0.05, (i, g)  # the interval is informative, not trivially wide
        z = (goodput - g.mean) / g.stderr if g.stderr > 0 else (0.0 if goodput == g.mean else math.inf)
        rows.append((i, goodput, g, z, g.contains(goodput), model))
        if len(rows) % 10 == 0:
            # each model structure compiles its own programs; JAX keeps them all, about 700
            # memory maps per structure, and ~90 exhaust the kernel's map limit
            jax.clear_caches()

    one()
    misses = [r for r in rows if not r[4]]
    coverage = 1.0 - len(misses) / len(rows)
    print(f"\nanalytic goodput inside the twin's 99 % interval: {len(rows) - len(misses)} of {len(rows)} "
          f"random models ({coverage:.1%})")
    for i, goodput, g, z, _, model in misses:
        print(f"  miss: model {i}: analytic {goodput:.6f}, twin {g.mean:.6f} [{g.low:.6f}, {g.high:.6f}], "
              f"z = {z:+.2f}\n    {model}")
    assert len(rows) >= 0.9 * MODELS  # hypothesis drew (nearly) as many distinct models as asked
    allowed = max(1, math.floor((1.0 - COVERAGE) * len(rows)))
    assert len(misses) <= allowed, [(r[0], r[1], r[2], r[3]) for r in misses]
