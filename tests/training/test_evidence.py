"""The evidence a prediction carries: the holdout rows of the shipped suites like its plan,
counted as the suites count them, shipped as a table that must equal its recomputation."""

import json
from pathlib import Path

import pytest

from markovsim import InvalidParameterError
from markovsim.training import load_plan, plan_evidence, runs_from_cases
from markovsim.training._evidence import (
    EVIDENCE_FILE, FEW, SUITES, _linearity_rows, _speed_error, at_median_gap, compute_evidence, linearity_evidence)

CASES = Path(__file__).resolve().parents[2] / "models" / "cases"


@pytest.fixture(scope="session")
def computed():
    return compute_evidence(CASES)


def test_the_shipped_table_is_the_suites_now(computed):
    """A model change or a new holdout row without `python -m markovsim.training._write_evidence`
    fails here: the table a user's prediction quotes cannot go stale."""
    assert json.loads((CASES / EVIDENCE_FILE).read_text()) == json.loads(json.dumps(computed))


def test_every_holdout_output_is_counted_once(computed):
    runs = [r for s in SUITES for r in runs_from_cases(CASES / f"{s}_training_runs.toml", role="holdout")]
    groups = computed["groups"].values()
    assert sum(g["rows"] for g in groups) == len(runs) > 400
    assert sorted(n for g in groups for n in g["cases"]) == sorted(r.name for r in runs)
    for g in groups:
        assert 0 <= g["within_10pct"] <= g["rows"] and g["min_speed_error"] <= g["max_speed_error"]
        assert g["median_abs_error"] >= 0
        assert g["min_speed_error"] <= g["median_speed_error"] <= g["max_speed_error"]


def test_the_speed_error_has_one_direction_whatever_the_output():
    # a model twice as fast: half the measured step time, twice the measured throughput
    assert _speed_error("step_time_s", 2.0, 1.0) == pytest.approx(1.0)
    assert _speed_error("tokens_per_s_per_card", 1.0, 2.0) == pytest.approx(1.0)
    assert _speed_error("mfu", 0.5, 0.25) == pytest.approx(-0.5)


def test_known_rows_land_where_the_suites_put_them(computed):
    """MT-NLG's iteration time (60.1 s measured, the model about 20 % faster) is in the A100
    80GB dense BF16 group, whose fastest-model row is at least that optimistic; the one
    DeepSeek-V3 H800 row is its own group and within 10 %."""
    a100 = computed["groups"]["NVIDIA A100 SXM4 80GB | dense | bf16"]
    assert any(n.startswith("MT-NLG 2022: 530B, batch 1920, 3,360") for n in a100["cases"])
    assert a100["max_speed_error"] > 0.2
    h800 = computed["groups"]["NVIDIA H800 SXM5 80GB | moe | fp8"]
    assert h800["rows"] == 1 and h800["within_10pct"] == 1


def test_a_plan_says_its_evidence_or_that_it_has_none():
    h100 = plan_evidence(load_plan("llama3_70b_h100_64"))
    assert h100["key"] == "NVIDIA H100 SXM5 80GB | dense | fp8" and h100["rows"] >= 5
    assert f"on {h100['rows']} published dense FP8 runs" in h100["text"] and "too few" not in h100["text"]
    few = plan_evidence(load_plan("deepseek_v3_h800_2048"))
    assert few["rows"] == 1 and "too few runs to judge" in few["text"]
    none = plan_evidence(load_plan("pangu_ultra_135b_8k"))
    assert none["rows"] == 0 and none["text"].startswith("unvalidated: no published dense BF16 run on Atlas 800T A2")
    with pytest.raises(InvalidParameterError, match="expected a PlanSpec"):
        plan_evidence("llama3_70b_h100_64")


def test_the_unvalidated_presets_the_accuracy_page_names(computed):
    """docs/background/accuracy.md: 'unvalidated where the suites hold none (the Ascend,
    MI300X, H200 presets today, and BF16 on Blackwell)'."""
    from markovsim.training import load_hardware

    page = (CASES.parents[1] / "docs" / "background" / "accuracy.md").read_text()
    assert "(the Ascend, MI300X, H200 presets today, and BF16 on Blackwell)" in " ".join(page.split())
    keys = computed["groups"]
    for name in ("atlas_800t_a2", "cloudmatrix384", "mi300x", "h200_sxm"):
        hw = load_hardware(name).name
        assert not any(k.startswith(f"{hw} |") for k in keys), name
    for name in ("b200", "gb200_nvl72", "b300", "gb300_nvl72"):
        assert f"{load_hardware(name).name} | dense | bf16" not in keys, name


def test_every_holdout_linearity_is_counted_once_as_validate_computes_it(computed):
    """The linearity groups hold each holdout scale-up of every suite once, and the model's
    linearity in them is the one ``markovsim validate`` prints (checked on the TPU suite)."""
    from ._shipped import validated

    rows = {s: [r for r in validated(CASES / f"{s}_training_runs.toml").rows
                if r.role == "holdout" and r.output == "linearity"] for s in SUITES}
    groups = computed["linearity"].values()
    assert sum(g["rows"] for g in groups) == sum(map(len, rows.values())) > 90
    assert sorted(n for g in groups for n in g["cases"]) == sorted(r.case for v in rows.values() for r in v)
    mine = {name: (predicted, reported) for _, name, *_, predicted, reported in _linearity_rows(CASES, ["tpu"])}
    for r in rows["tpu"]:
        assert mine[r.case] == (pytest.approx(r.predicted, rel=1e-12), pytest.approx(r.reported, rel=1e-12))
    for g in groups:
        assert 0 <= g["within_2pts"] <= g["rows"] and 0 <= g["above"] <= g["rows"]
        assert g["min_points"] <= g["max_points"] and g["median_abs_points"] >= 0


def test_a_linearity_says_its_evidence_or_that_it_has_none():
    from markovsim.training import load_hardware

    h100 = linearity_evidence(load_hardware("h100_sxm"), "fixed-replica=64")  # "=N" is read as its rule
    assert h100["key"] == "NVIDIA H100 SXM5 80GB | fixed-replica" and h100["rows"] >= FEW
    assert h100["above"] > h100["rows"] / 2 and h100["median_points_per_doubling"] > 0  # the model over-predicts
    assert f"on {h100['rows']} published scale-ups" in h100["text"]
    none = linearity_evidence(load_hardware("atlas_800t_a2"), "fixed-global")
    assert none["rows"] == 0 and none["text"].startswith("unvalidated: no published scale-up on Atlas 800T A2")
    with pytest.raises(InvalidParameterError, match="batch='weak'"):
        linearity_evidence(load_hardware("h100_sxm"), "weak")


def test_the_median_gap_reading_is_the_median_per_doubling_times_the_doublings():
    group = {"rows": FEW, "median_points_per_doubling": 1.5}
    points = [{"cards": 64, "linearity": 1.0}, {"cards": 512, "linearity": 0.99}, {"cards": 32, "linearity": 1.01}]
    got = at_median_gap(group, points)
    assert got[0] == pytest.approx(1.0) and got[1] == pytest.approx(0.99 - 0.045) and got[2] is None
    assert at_median_gap({**group, "rows": FEW - 1}, points) == [None, None, None]
    assert at_median_gap({"rows": 10}, points) == [None, None, None]


def test_the_report_tables_hold_every_group_once(computed):
    """``make repro``'s report prints the evidence as two Markdown tables, a row per group."""
    from markovsim.training._evidence import evidence_markdown

    md = evidence_markdown(computed)
    blank = md.index("")
    steps, lins = md[2:blank], md[blank + 3:]
    assert len(steps) == len(computed["groups"]) and len(lins) == len(computed["linearity"])
    h100 = computed["linearity"]["NVIDIA H100 SXM5 80GB | fixed-replica"]
    assert (f"| NVIDIA H100 SXM5 80GB, fixed-replica | {h100['rows']} | {h100['within_2pts']} | {h100['above']} |"
            in "\n".join(lins))
