"""``markovsim plan`` names the valid plans it leaves out for memory by at most
``NEAR_FIT_EXCESS``: the largest excess of a published dense plan that ran, recomputed here
from the GPU suite (the model's memory is pessimistic by that much on real runs)."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from markovsim import _cli
from markovsim._cli._plan import _near_fit_text
from markovsim._errors import InvalidParameterError
from markovsim.training import candidate_plans, evaluate_plans, load_plan, search_plans, step_time
from markovsim.training._search import NEAR_FIT_EXCESS, PUBLISHED_DENSE_EXCESS
from markovsim.training._calibrate import runs_from_cases

SUITE = Path(__file__).resolve().parents[2] / "models" / "cases" / "gpu_training_runs.toml"


def test_the_margin_is_the_largest_excess_of_a_published_dense_plan():
    excess = {}
    for run in runs_from_cases(SUITE, role="holdout"):
        s = run.spec
        if s.workload.moe is None:
            b = step_time(s.workload, s.hardware, s.plan, efficiency=s.efficiency)
            excess[run.name.split(" [")[0]] = b.memory_bytes / b.usable_memory_bytes
    worst = max(excess.values())
    assert worst > 1  # published dense plans that ran come out over the modelled memory
    assert f"{worst:.2f}" == f"{PUBLISHED_DENSE_EXCESS:.2f}"
    assert NEAR_FIT_EXCESS == math.ceil(10 * (worst - 1)) / 10  # the margin: that excess, rounded up
    row = {k: 1 for k in ("tp", "pp", "dp", "ep", "cp", "virtual_stages", "micro_batch", "zero_stage")}
    row.update(schedule="1f1b", recompute="none", recompute_layers=0, step_time_s=1.0)
    text = _near_fit_text({"count": 1, "excess_at_most": NEAR_FIT_EXCESS, "fastest": row, "over_usable": 1.1},
                          {"step_time_s": 2.0})
    assert f"up to {worst:.2f}x the usable" in text and "(50.0 % less than #1)" in text


def test_markovsim_plan_names_the_near_fits(capsys):
    assert _cli.main(["plan", "llama3_405b_h100_16k", "--top", "3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    near = got["near_fit"]
    assert near["count"] > 0 and 1.0 < near["over_usable"] <= 1.0 + NEAR_FIT_EXCESS
    assert near["fastest"]["memory_bytes"] > max(r["memory_bytes"] for r in got["plans"])  # left out for memory
    assert _cli.main(["plan", "llama3_405b_h100_16k", "--top", "3"]) == 0
    assert "near fits: " in capsys.readouterr().out
    # an 8B model split 64 ways (the filters): everything fits, nothing to name
    assert _cli.main(["plan", "--workload", "llama3_8b", "--hardware", "h100_sxm", "--cards", "64",
                      "--global-batch", "512", "--top", "1", "--tp", "8", "--pp", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["near_fit"] is None


def test_search_plans_reports_the_near_fits():
    """The library's search says the same: how many valid plans it left out for memory by at
    most the margin, and the fastest of them with its breakdown (over the usable memory, within
    the margin); with no plan fitting, its error names them instead of only refusing."""
    spec = load_plan("llama3_405b_h100_16k")
    res = search_plans(spec.workload, spec.hardware, spec.plan.world_size, global_batch=spec.plan.global_batch,
                       efficiency=spec.efficiency)
    assert res.near_fits > 0 and res.near_fit is not None
    b = res.near_fit_breakdown
    assert not b.fits and b.memory_bytes <= (1 + NEAR_FIT_EXCESS) * b.usable_memory_bytes
    assert b.step_time == pytest.approx(step_time(spec.workload, spec.hardware, res.near_fit,
                                                  efficiency=spec.efficiency).step_time, rel=1e-9)
    # the usable memory set 10 % below the smallest valid plan's: none fits, some are near fits
    plans, ok = candidate_plans(spec.workload, spec.plan.world_size, global_batch=spec.plan.global_batch)
    memory = np.asarray(evaluate_plans(spec.workload, spec.hardware, plans, efficiency=spec.efficiency)["memory_bytes"])
    tight = dataclasses.replace(spec.efficiency, usable_memory=memory[ok].min() / 1.1 / spec.hardware.hbm_bytes)
    with pytest.raises(InvalidParameterError, match=r"no valid plan fits in .* GiB per card; \d+ exceed it by at "
                                                    r"most 20 % .* the fastest tp \d+ pp \d+"):
        search_plans(spec.workload, spec.hardware, spec.plan.world_size, global_batch=spec.plan.global_batch,
                     efficiency=tight)
