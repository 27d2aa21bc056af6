"""The example plans that restate a published run are that run's validation case: a user who
opens the example gets the plan the suite checked, not an older or looser copy of it."""

from pathlib import Path

import pytest

from markovsim.training import load_plan, runs_from_cases, step_time
from markovsim.training._inspect import memory_breakdown

CASES = Path(__file__).resolve().parents[2] / "models" / "cases" / "gpu_training_runs.toml"

#: example plan -> the validation case it restates
TWINS = {
    "deepseek_v3_h800_2048": "DeepSeek-V3 2024: 671B MoE on 2048 H800, FP8, DualPipe",
    "llama3_405b_h100_16k": "Llama 3 2024 Table 4: 405B, 16384 H100, CP 1, sequence 8192",
    "llama3_70b_h100_64": "NeMo 24.07: Llama 3 70B on 64 H100, FP8",
}


@pytest.fixture(scope="session")
def cases():
    runs = runs_from_cases(CASES, role="holdout") + runs_from_cases(CASES, role="fit")
    return {r.name.rsplit(" [", 1)[0]: r.spec for r in runs}


@pytest.mark.parametrize("plan", sorted(TWINS))
def test_the_example_plan_is_its_validation_case(plan, cases):
    example, case = load_plan(plan), cases[TWINS[plan]]
    assert example.plan == case.plan
    assert example.efficiency == case.efficiency
    assert example.workload == case.workload and example.hardware == case.hardware
    # and so every number the model gives
    a = step_time(example.workload, example.hardware, example.plan, efficiency=example.efficiency)
    b = step_time(case.workload, case.hardware, case.plan, efficiency=case.efficiency)
    assert float(a.step_time) == float(b.step_time)
    ma = memory_breakdown(example.workload, example.hardware, example.plan, efficiency=example.efficiency)
    mb = memory_breakdown(case.workload, case.hardware, case.plan, efficiency=case.efficiency)
    assert ma.total == mb.total
