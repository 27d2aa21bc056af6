"""The ``markovsim`` command line: every command's normal output and its error paths.

Numbers are checked against the library's own public functions on the same model (the CLI
must add nothing), and where one exists against an independent closed form (pipeline
bubble 7/23 and 7/103; compute time inversely proportional to ``efficiency.compute``).
Commands run in-process through ``markovsim._cli.main``; one test runs the installed
console script.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import markovsim  # noqa: F401  (float64)
from markovsim import _cli
from markovsim import availability as av
from markovsim import inference as inf
from markovsim import training as tr

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "models" / "plans" / "pangu_ultra_135b_8k.toml"
INFER = ROOT / "models" / "inference" / "deepseek_v3_8gpu.toml"
CASES = ROOT / "models" / "cases" / "example.toml"


def run(capsys, *argv):
    """(exit code, stdout, stderr) of ``markovsim argv...`` run in-process."""
    code = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def assert_one_line_error(code, err, command, *needles):
    """Exit code 2 and one line ``markovsim <command>: error: ...`` naming each needle."""
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"markovsim {command}: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, err)


def copy_with(tmp_path, source: Path, old: str, new: str, name: str | None = None) -> Path:
    """A copy of a model file with one line changed."""
    text = source.read_text()
    assert old in text, old
    path = tmp_path / (name or source.name)
    path.write_text(text.replace(old, new, 1))
    return path


# --------------------------------------------------------------------------- help and repro


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as e:
        _cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for command in ("repro", "train", "infer", "goodput", "plan", "sweep", "validate", "keys"):
        assert command in out


@pytest.mark.parametrize("command, needle", [
    ("train", "--baseline"), ("infer", "analyze_fleet"), ("goodput", "checkpoint"),
    ("sweep", "START:STOP:NUM"), ("validate", "Exit code"), ("repro", "--list")])
def test_each_command_has_help(capsys, command, needle):
    with pytest.raises(SystemExit) as e:
        _cli.main([command, "--help"])
    assert e.value.code == 0
    assert needle in " ".join(capsys.readouterr().out.split())


def test_no_command_prints_help(capsys):
    code, out, _ = run(capsys)
    assert code == 0 and "COMMAND" in out


def test_warnings_are_one_line(capsys, monkeypatch):
    import warnings

    def command(args):
        warnings.warn("the truncation bound holds 2 % of the mass\nraise max_recovering", UserWarning)
        return 0

    monkeypatch.setattr(_cli._infer, "run", command)
    code, _, err = run(capsys, "infer", "x.toml")
    assert code == 0
    assert err.strip().splitlines() == [
        "markovsim infer: warning: the truncation bound holds 2 % of the mass raise max_recovering"]


def test_repro_list(capsys):
    code, out, _ = run(capsys, "repro", "--list")
    assert code == 0 and "S-HW-1" in out


# --------------------------------------------------------------------------- train


@pytest.fixture(scope="session")
def plan_spec():
    return tr.load_plan(PLAN)


def test_train_json_equals_the_library(capsys, plan_spec):
    got = run_json(capsys, "train", PLAN)
    s = plan_spec
    b = tr.step_time(s.workload, s.hardware, s.plan, efficiency=s.efficiency)
    o = got["outputs"]
    for field, key in [("step_time", "step_time_s"), ("compute", "compute_s"), ("bubble", "bubble_s"),
                       ("tp_exposed", "tp_exposed_s"), ("dp_exposed", "dp_exposed_s"), ("mfu", "mfu"),
                       ("hfu", "hfu"), ("tokens_per_s", "tokens_per_s"), ("memory_bytes", "memory_bytes")]:
        assert o[key] == pytest.approx(getattr(b, field), rel=1e-12), key
    assert o["tokens_per_s_per_card"] == pytest.approx(b.tokens_per_s / 8192, rel=1e-12)
    # independent: interleaved bubble (p-1)/(v m + p-1) with p=8, v=6, m=2048/128=16
    assert o["pipeline_bubble_fraction"] == pytest.approx(7 / 103, rel=1e-12)
    assert got["plan"]["cards"] == 8192 and got["plan"]["micro_batches"] == 16
    assert got["scaling"] is None


def test_train_bare_name_and_table(capsys, plan_spec):
    code, out, err = run(capsys, "train", "pangu_ultra_135b_8k")
    assert code == 0, err
    b = tr.step_time(plan_spec.workload, plan_spec.hardware, plan_spec.plan, efficiency=plan_spec.efficiency)
    assert "step time breakdown" in out
    assert f"{100 * b.mfu:.2f} %" in out
    assert f"{b.step_time:.4f}" in out


def test_train_set_overrides(capsys):
    base = run_json(capsys, "train", PLAN)["outputs"]
    got = run_json(capsys, "train", PLAN, "--set", "efficiency.compute=0.5")
    # compute time = FLOPs / (peak x efficiency.compute): exactly 0.6 / 0.5 times longer
    assert got["outputs"]["compute_s"] == pytest.approx(base["compute_s"] * 0.6 / 0.5, rel=1e-12)
    assert got["overrides"] == ["efficiency.compute=0.5"]
    # independent: 1F1B bubble (p-1)/(m+p-1) = 7/23; a string value without TOML quotes
    got = run_json(capsys, "train", PLAN, "--set", "schedule=1f1b", "--set", "virtual_stages=1")
    assert got["outputs"]["pipeline_bubble_fraction"] == pytest.approx(7 / 23, rel=1e-12)
    assert got["plan"]["schedule"] == "1f1b"


def test_train_linearity_equals_the_library(capsys, plan_spec):
    got = run_json(capsys, "train", PLAN, "--baseline", 256, "--cards", 4096, 8192, "--jitter-cv", 0.01)
    pts = got["scaling"]["points"]
    assert [p["cards"] for p in pts] == [256, 4096, 8192]
    s = plan_spec
    thr = {}
    for n in (256, 4096, 8192):
        p = tr.scale_plan(s.plan, n, scaling=tr.Scaling.FIXED_GLOBAL_BATCH)
        t = tr.step_time(s.workload, s.hardware, p, efficiency=s.efficiency).step_time
        t += tr.straggler_delay(t, n, jitter_cv=0.01)
        thr[n] = p.global_batch * s.workload.seq_len / t
    for p in pts:
        assert p["tokens_per_s"] == pytest.approx(thr[p["cards"]], rel=1e-12)
        assert p["linearity"] == pytest.approx(float(tr.linearity(thr[p["cards"]], p["cards"], thr[256], 256)),
                                               rel=1e-12)
    assert pts[0]["linearity"] == 1.0 and 0.5 < pts[1]["linearity"] < 1.0
    # the table prints the same linearity
    code, out, _ = run(capsys, "train", PLAN, "--baseline", 256, "--cards", 4096, "--jitter-cv", 0.01)
    assert code == 0 and f"{pts[1]['linearity']:.4f}" in out and "linearity" in out


def test_train_lists_each_size_once_baseline_first(capsys):
    got = run_json(capsys, "train", PLAN, "--baseline", 256, "--cards", 8192, 256, 4096, 8192)
    assert [p["cards"] for p in got["scaling"]["points"]] == [256, 8192, 4096]


def test_train_fixed_replica_batch_grows_the_batch(capsys):
    got = run_json(capsys, "train", PLAN, "--baseline", 256, "--cards", 4096, "--batch", "fixed-replica")
    base, big = got["scaling"]["points"]
    assert big["global_batch"] == base["global_batch"] * 16 and big["dp"] == base["dp"] * 16
    # the rule's default per-replica batch is the plan's own (global batch / dp at its own size)
    plan = tr.load_plan(PLAN).plan
    assert big["global_batch"] == plan.global_batch // plan.dp * big["dp"]
    fixed = run_json(capsys, "train", PLAN, "--baseline", 256, "--cards", 4096, "--batch", "fixed-global=4096")
    assert [p["global_batch"] for p in fixed["scaling"]["points"]] == [4096, 4096]
    assert_one_line_error(*run(capsys, "train", PLAN, "--cards", 4096, "--batch", "fixed-everything")[::2],
                          "train", "--batch", "fixed-global")


def test_train_bad_model_files(capsys, tmp_path):
    bad = copy_with(tmp_path, PLAN, "pp = 8", "pp = 8\ntpp = 8")
    assert_one_line_error(*run(capsys, "train", bad)[::2], "train", "tpp", str(bad))
    # a hardware file with a bare number for a time: missing unit, naming the key
    hw = copy_with(tmp_path, ROOT / "models" / "hardware" / "atlas_800t_a2.toml", 'latency = "5 us"', "latency = 5")
    plan = copy_with(tmp_path, PLAN, 'hardware = "atlas_800t_a2"', f'hardware = "{hw}"', "plan.toml")
    assert_one_line_error(*run(capsys, "train", plan)[::2], "train", "latency", "missing unit")
    missing = tmp_path / "nope.toml"
    assert_one_line_error(*run(capsys, "train", missing)[::2], "train", "nope.toml", "not found")
    assert_one_line_error(*run(capsys, "train", "no_such_plan")[::2], "train", "no_such_plan", "not found")
    broken = tmp_path / "broken.toml"
    broken.write_text("tp = [\n")
    assert_one_line_error(*run(capsys, "train", broken)[::2], "train", "not valid TOML")


def test_train_operators_are_the_library_table(capsys):
    """--operators lists markovsim.training.operator_table (the FP8 casts among the rows of an
    FP8 plan), in the JSON exactly and in the table to its printed digits; a hardware file
    without a kernel model is refused in one line that says what is missing."""
    spec = tr.load_plan("llama3_70b_h100_64")
    want = tr.operator_table(spec.workload, spec.hardware, spec.plan)
    got = run_json(capsys, "train", "llama3_70b_h100_64", "--operators")["operators"]
    assert [g["name"] for g in got] == [r.name for r in want]
    assert {"fp8_casts_attention", "fp8_casts_mlp"} <= {g["name"] for g in got}
    for g, r in zip(got, want):
        assert g["forward_s"] == r.forward_s and g["backward_s"] == r.backward_s and g["flops"] == r.flops
        assert g["shape"] == (None if r.shape is None else list(r.shape))
    code, out, err = run(capsys, "train", "llama3_70b_h100_64", "--operators")
    assert code == 0, err
    ffn = next(r for r in want if r.name == "ffn_in")
    line = next(x for x in out.splitlines() if x.startswith("ffn_in "))
    assert " x ".join(f"{x:.0f}" for x in ffn.shape) in line and f"{1e3 * ffn.forward_s:.4f}" in line
    assert "operators" not in run_json(capsys, "train", "llama3_70b_h100_64")
    assert_one_line_error(*run(capsys, "train", PLAN, "--operators")[::2], "train", "no fitted kernel model",
                          "[kernels]")


@pytest.mark.parametrize("setting, needles", [
    ("tp", ("--set 'tp'", "key=value")),
    ("tp=", ("no value",)),
    ("=8", ("empty key",)),
    ("efficiency.comput=0.5", ("'comput'", "unknown key", "--set efficiency.comput=0.5")),
    ("efficiency.compute=fast", ("efficiency.compute", "fast")),
    ("efficiency.compute=1.5", ("efficiency.compute", "<= 1")),
    ("tp.inner=1", ("tp=8", "not a table")),
    ("tp=0", ("tp", ">= 1")),
    ("bad key=1", ("not a dotted path",)),
])
def test_train_bad_set(capsys, setting, needles):
    assert_one_line_error(*run(capsys, "train", PLAN, "--set", setting)[::2], "train", *needles)


def test_set_into_an_array_of_tables():
    """``levels[1].bandwidth``: an element of an array of tables (the hardware files' links)."""
    from markovsim._io import apply_overrides, parse_override, read_document

    hw = ROOT / "models" / "hardware" / "atlas_800t_a2.toml"
    doc = apply_overrides(read_document(hw), [parse_override("levels[1].bandwidth=12.5 GB/s")])
    got = tr.hardware_from_document(doc)
    want = tr.load_hardware(hw)
    assert got.levels[1].bandwidth_bytes_per_s == 12.5e9
    assert got.levels[0] == want.levels[0] and got.levels[1].latency_s == want.levels[1].latency_s
    with pytest.raises(markovsim.SpecError, match=r"levels has 2 element\(s\)"):
        apply_overrides(doc, [parse_override("levels[2].bandwidth=1")])


def test_set_on_a_missing_table_path(capsys):
    code, _, err = run(capsys, "train", PLAN, "--set", "levels[1].bandwidth=1")
    assert_one_line_error(code, err, "train", "levels", "not in the model file")


# --------------------------------------------------------------------------- infer


@pytest.fixture(scope="session")
def infer_model():
    return inf.load_inference_model(INFER)


def test_infer_json_equals_the_library(capsys, infer_model):
    got = run_json(capsys, "infer", INFER)
    m = infer_model
    decode = inf.analyze_fleet(m.decode, m.tiers)              # finite spare pool: count chain
    prefill = inf.analyze_independent_fleet(m.prefill, m.tiers)  # unlimited pool: product form
    for role, want in (("decode", decode), ("prefill", prefill)):
        for field in ("slo_availability", "slo_unavailability", "capacity_availability",
                      "request_availability", "requests_lost_per_day", "downtime_per_month", "instance_mtbf"):
            assert got[role][field] == pytest.approx(getattr(want, field), rel=1e-12), (role, field)
        np.testing.assert_allclose(got[role]["capacity_probabilities"], want.capacity_probabilities, rtol=1e-12)
    assert got["decode"]["spare_cards"] == m.decode.spare_cards and got["prefill"]["spare_cards"] is None
    assert got["slo_target"] == m.target
    assert got["decode"]["meets_target"] == (decode.slo_availability >= m.target)
    # independent: instance MTBF is 1 / (cards x card fault rate)
    assert got["decode"]["instance_mtbf"] == pytest.approx(1 / (m.decode.cards_per_instance * m.decode.card_fault_rate),
                                                           rel=1e-12)


def test_infer_table_and_set(capsys, infer_model):
    code, out, err = run(capsys, "infer", "deepseek_v3_8gpu")
    assert code == 0, err
    assert "SLO availability" in out and "decode" in out and "prefill" in out
    got = run_json(capsys, "infer", INFER, "--set", "decode.instances=5", "--set", "tiers.restart.restart_time=10 min")
    m = infer_model
    fleet = dataclasses.replace(m.decode, instances=5)
    tiers = dataclasses.replace(m.tiers, restart=inf.InstanceRestart(600.0))
    want = inf.analyze_fleet(fleet, tiers)
    assert got["decode"]["instances"] == 5
    assert got["decode"]["slo_availability"] == pytest.approx(want.slo_availability, rel=1e-12)


def test_infer_bad_model_files(capsys, tmp_path):
    bad = copy_with(tmp_path, INFER, 'restart_time = "20 min"', 'restart_time = "20 min"\nrestart_tim = "1 h"')
    assert_one_line_error(*run(capsys, "infer", bad)[::2], "infer", "restart_tim", "tiers.restart")
    bad = copy_with(tmp_path, INFER, 'restart_time = "20 min"', "restart_time = 20")
    assert_one_line_error(*run(capsys, "infer", bad)[::2], "infer", "tiers.restart.restart_time", "missing unit")
    assert_one_line_error(*run(capsys, "infer", tmp_path / "none.toml")[::2], "infer", "not found")


@pytest.mark.parametrize("setting, needles", [
    ("tiers.restart.restart_time=20", ("tiers.restart.restart_time", "missing unit")),
    ("tiers.restart.restart_time=20 parsecs", ("tiers.restart.restart_time", "unknown time unit")),
    ("decode.spare=3", ("'spare'", "unknown key", "--set decode.spare=3")),
    ("faults.soft_fault_share=2", ("faults.soft_fault_share", "<= 1")),
    ("name.first=1", ("not a table",)),
])
def test_infer_bad_set(capsys, setting, needles):
    assert_one_line_error(*run(capsys, "infer", INFER, "--set", setting)[::2], "infer", *needles)


# --------------------------------------------------------------------------- goodput

CLUSTER = ROOT / "models" / "clusters" / "atlas800t_a2_10k.toml"
RECOVERY = ROOT / "models" / "recovery" / "checkpoint_only.toml"   # one tier: compiles fast
TIERED = ROOT / "models" / "recovery" / "ascend_tiered.toml"


@pytest.fixture(scope="session")
def job_model():
    return av.load_model(CLUSTER, RECOVERY)


def test_goodput_json_equals_the_library(capsys, job_model):
    got = run_json(capsys, "goodput", "--cluster", CLUSTER, "--recovery", RECOVERY)
    r = av.analyze(job_model)
    o = got["outputs"]
    for key, want in [("goodput", r.goodput), ("availability", r.availability), ("unavailability", r.unavailability),
                      ("interruptions_per_day", r.interruptions_per_day), ("job_mtbf_s", r.job_mtbf),
                      ("lost_work_per_interruption_s", r.lost_work_per_interruption)]:
        assert o[key] == pytest.approx(float(want), rel=1e-12), key
    for i, cause in enumerate(av.CAUSES):
        assert got["lost"][cause] == pytest.approx(float(r.lost[i]), rel=1e-12, abs=1e-300)
    assert o["optimal_checkpoint_interval_s"] == pytest.approx(float(av.optimal_checkpoint_interval(job_model)),
                                                               rel=1e-12)
    assert o["checkpoint_interval_s"] == 3600.0 and o["cards"] == 10240
    # invariant: goodput and the lost shares account for all the wall time
    assert o["goodput"] + sum(got["lost"].values()) == pytest.approx(1.0, abs=1e-9)
    assert got["cluster"] == "Atlas 800T A2, 10K cards" and got["recovery"] == "checkpoint only"


def test_goodput_optimum_beats_its_neighbours(capsys):
    """The reported optimum is a maximum: the goodput at half and twice the interval is lower."""
    o = run_json(capsys, "goodput", RECOVERY, "--cluster", "atlas800t_a2_10k")["outputs"]
    best, tau = o["goodput_at_optimal_interval"], o["optimal_checkpoint_interval_s"]
    assert best >= o["goodput"]
    for factor in (0.5, 2.0):
        other = run_json(capsys, "goodput", RECOVERY, "--cluster", "atlas800t_a2_10k",
                         "--set", f"recovery.checkpoint.interval={tau * factor!r} s")["outputs"]["goodput"]
        assert other < best


def test_goodput_table_set_and_cards(capsys, job_model):
    code, out, err = run(capsys, "goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only",
                         "--set", "recovery.checkpoint.interval=30 min", "--cards", 1024)
    assert code == 0, err
    model = av.load_model(CLUSTER, RECOVERY, cards=1024)
    model = dataclasses.replace(model, checkpoint=dataclasses.replace(model.checkpoint, interval=1800.0))
    r = av.analyze(model)
    assert f"{100 * float(r.goodput):.2f} %" in out and "optimal checkpoint interval" in out
    assert "lost time by cause" in out and "1024" in out


def test_goodput_job_files(capsys, tmp_path, job_model):
    want = float(av.analyze(job_model).goodput)
    job = tmp_path / "job.toml"
    job.write_text(f'name = "my job"\ncluster = "atlas800t_a2_10k"\nrecovery = "{RECOVERY.as_posix()}"\n')
    got = run_json(capsys, "goodput", job)
    assert got["name"] == "my job" and got["outputs"]["goodput"] == pytest.approx(want, rel=1e-12)
    # a reference with changes merged over the file, and a relative path
    (tmp_path / "sub").mkdir()
    shutil.copy(RECOVERY, tmp_path / "sub" / "r.toml")
    job.write_text('cluster = "atlas800t_a2_10k"\n'
                   'recovery = { file = "sub/r.toml", checkpoint = { interval = "30 min" } }\n')
    got = run_json(capsys, "goodput", job)["outputs"]
    direct = run_json(capsys, "goodput", "--cluster", CLUSTER, "--recovery", RECOVERY,
                      "--set", "recovery.checkpoint.interval=30 min")["outputs"]
    assert got["goodput"] == pytest.approx(direct["goodput"], rel=1e-12) and got["goodput"] != want


def test_goodput_bad_model_files(capsys, tmp_path):
    bad = copy_with(tmp_path, RECOVERY, 'detection = "30 min"', 'detection = "30 min"\ndetektion = "1 s"')
    assert_one_line_error(*run(capsys, "goodput", bad, "--cluster", CLUSTER)[::2], "goodput", "'detektion'",
                          "unknown key", "recovery")
    bad = copy_with(tmp_path, RECOVERY, 'detection = "30 min"', "detection = 30")
    assert_one_line_error(*run(capsys, "goodput", bad, "--cluster", CLUSTER)[::2], "goodput", "detection",
                          "missing unit")
    job = tmp_path / "job.toml"
    job.write_text('cluster = "atlas800t_a2_10k"\nrecovery = "checkpoint_only"\ncheckpoint = 1\n')
    assert_one_line_error(*run(capsys, "goodput", job)[::2], "goodput", "'checkpoint'", "recovery.")
    job.write_text('cluster = "no_such_cluster"\nrecovery = "checkpoint_only"\n')
    assert_one_line_error(*run(capsys, "goodput", job)[::2], "goodput", "no_such_cluster", "not found")
    assert_one_line_error(*run(capsys, "goodput", "--recovery", RECOVERY)[::2], "goodput", "--cluster")
    other = tmp_path / "other.toml"
    other.write_text("x = 1\n")
    assert_one_line_error(*run(capsys, "goodput", other)[::2], "goodput", "not a job, cluster or recovery file")


@pytest.mark.parametrize("setting, needles", [
    ("checkpoint.interval=30 min", ("'checkpoint'", "recovery.checkpoint.interval")),
    ("recovery.checkpoint.interval=30", ("checkpoint.interval", "missing unit")),
    ("recovery.checkpoint.intervall=30 min", ("'intervall'", "unknown key")),
    ("cards=0", ("cards", ">= 1")),
    ("recovery.tiers[3].detection=1 s", ("out of range",)),
])
def test_goodput_bad_set(capsys, setting, needles):
    assert_one_line_error(*run(capsys, "goodput", "--cluster", CLUSTER, "--recovery", RECOVERY,
                               "--set", setting)[::2], "goodput", *needles)


def test_goodput_sweep_matches_goodput(capsys, tmp_path):
    out = tmp_path / "g.nc"
    code, text, err = run(capsys, "sweep", RECOVERY, "--cluster", CLUSTER,
                          "--vary", "recovery.checkpoint.interval=30min,2h", "--vary", "cards=1024,10240", "--out", out)
    assert code == 0, err
    ds = xr.open_dataset(out)
    assert ds["goodput"].dims == ("recovery.checkpoint.interval", "cards")
    assert ds["recovery.checkpoint.interval"].attrs["units"] == "min"
    np.testing.assert_array_equal(ds["recovery.checkpoint.interval"], [30.0, 120.0])
    assert ds["cards"].values.tolist() == [1024, 10240] and "cards_output" not in ds
    one = run_json(capsys, "goodput", RECOVERY, "--cluster", CLUSTER, "--set", "recovery.checkpoint.interval=2 h",
                   "--cards", 1024)["outputs"]
    assert float(ds["goodput"].isel({"recovery.checkpoint.interval": 1, "cards": 0})) == pytest.approx(
        one["goodput"], rel=1e-12)
    np.testing.assert_allclose(ds["checkpoint_interval_s"].isel(cards=0), [1800.0, 7200.0], rtol=1e-15)
    ds.close()


# --------------------------------------------------------------------------- sweep


def test_sweep_train_to_netcdf_equals_the_library(capsys, tmp_path, plan_spec):
    out = tmp_path / "s.nc"
    code, text, err = run(capsys, "sweep", PLAN, "--vary", "efficiency.compute=0.4:0.7:4", "--vary", "dp=64,128",
                          "--out", out)
    assert code == 0, err
    assert "wrote" in text
    ds = xr.open_dataset(out)
    assert ds["step_time_s"].dims == ("efficiency.compute", "dp")
    np.testing.assert_allclose(ds["efficiency.compute"], [0.4, 0.5, 0.6, 0.7], rtol=1e-15)
    assert ds["dp"].values.tolist() == [64, 128]
    assert int(ds["status"].max()) == 0 and ds.attrs["failed_points"] == 0
    s = plan_spec
    for e in (0.4, 0.7):
        for dp in (64, 128):
            b = tr.step_time(s.workload, s.hardware, s.plan.replace(dp=dp),
                             efficiency=dataclasses.replace(s.efficiency, compute=e))
            got = ds.sel({"efficiency.compute": e, "dp": dp}, method="nearest")
            assert float(got["step_time_s"]) == pytest.approx(b.step_time, rel=1e-12)
            assert float(got["mfu"]) == pytest.approx(b.mfu, rel=1e-12)
    # dp = 64 has 32 micro-batches: bubble 7/(6*32+7) (independent closed form)
    assert float(ds["pipeline_bubble_fraction"].sel(dp=64)[0]) == pytest.approx(7 / 199, rel=1e-12)
    ds.close()


def test_sweep_train_shows_and_warns_about_points_over_the_memory(capsys, tmp_path):
    """Llama 3 70B on 64 H100 at micro-batch 2 exceeds the modelled HBM while micro-batch 1
    fits (the library's fits for each point): the table has a fits column and stderr counts
    the points over, so a faster-looking point that cannot run is not picked unawares."""
    spec = tr.load_plan("llama3_70b_h100_64")
    fits = {mb: tr.step_time(spec.workload, spec.hardware, spec.plan.replace(micro_batch=mb),
                             efficiency=spec.efficiency).fits for mb in (1, 2)}
    assert fits == {1: True, 2: False}
    code, text, err = run(capsys, "sweep", "llama3_70b_h100_64", "--vary", "micro_batch=1,2", "--out",
                          tmp_path / "s.nc")
    assert code == 0, err
    header = [ln for ln in text.splitlines() if ln.startswith("micro_batch")][0]
    assert header.split()[-1] == "fits"
    assert "1 of 2 points exceed the modelled memory per card (fits = 0)" in err


def test_sweep_over_choices_and_flags_equals_the_library(capsys, tmp_path):
    """An axis of names (recompute, elementwise, a stack the file does not write) or of
    true/false (sequence_parallel) is swept as the names: each point is the library's step
    for that plan, the coordinate keeps the names through the netCDF file, and a name the
    reader refuses fails its point alone, with the reader's message."""
    out = tmp_path / "c.nc"
    code, text, err = run(capsys, "sweep", PLAN, "--vary", "recompute=none,full", "--vary",
                          "elementwise=fused,eager", "--vary", "sequence_parallel=true,false", "--out", out,
                          "--plot", tmp_path / "c.png")
    assert code == 0, err
    ds = xr.open_dataset(out)
    assert ds["recompute"].values.tolist() == ["none", "full"]
    assert ds["elementwise"].values.tolist() == ["fused", "eager"]
    assert ds["sequence_parallel"].values.tolist() == ["true", "false"]
    assert "units" not in ds["recompute"].attrs
    s = tr.load_plan(PLAN)
    for rec, ew, sp in itertools.product(("none", "full"), ("fused", "eager"), (True, False)):
        want = tr.step_time(s.workload, s.hardware, s.plan.replace(recompute=rec, elementwise=ew,
                                                                   sequence_parallel=sp), efficiency=s.efficiency)
        got = ds.sel({"recompute": rec, "elementwise": ew, "sequence_parallel": str(sp).lower()})
        assert float(got["step_time_s"]) == pytest.approx(want.step_time, rel=1e-12)
    assert (tmp_path / "c.png").stat().st_size > 10_000
    ds.close()
    stacks = run_json(capsys, "sweep", PLAN, "--vary", "efficiency.stack=default,megatron-core", "--out",
                      tmp_path / "s.nc")
    assert stacks["coords"]["efficiency.stack"] == {"values": ["default", "megatron-core"], "unit": ""}
    code, _, err = run(capsys, "sweep", PLAN, "--vary", "recompute=none,sometimes", "--out", tmp_path / "f.nc")
    assert code == 0 and "1 of 2 points failed" in err and "recompute='sometimes'" in err
    # a quantity the file writes with a unit stays numeric: a name there is an error
    assert_one_line_error(*run(capsys, "sweep", INFER, "--vary", "tiers.restart.restart_time=10,ten", "--out",
                               tmp_path / "g.nc")[::2], "sweep", "'ten' is not a number")


def test_sweep_infer_units_and_zarr(capsys, tmp_path):
    out = tmp_path / "s.zarr"
    got = run_json(capsys, "sweep", INFER, "--vary", "tiers.restart.restart_time=10:20:2",
                   "--vary", "tiers.repair.repair_time=1d,3d", "--out", out)
    # a bare number takes the unit the file writes the key in ("20 min"); "1d" its own
    assert got["coords"]["tiers.restart.restart_time"] == {"values": [10.0, 20.0], "unit": "min"}
    assert got["coords"]["tiers.repair.repair_time"] == {"values": [1.0, 3.0], "unit": "d"}
    ds = xr.open_zarr(out)
    assert ds["tiers.restart.restart_time"].attrs["units"] == "min"
    assert ds["decode_downtime_per_month_s"].attrs["units"] == "s"
    # each point equals `markovsim infer --set` at the same values
    one = run_json(capsys, "infer", INFER, "--set", "tiers.restart.restart_time=10 min",
                   "--set", "tiers.repair.repair_time=3 d")
    point = ds.isel({"tiers.restart.restart_time": 0, "tiers.repair.repair_time": 1})
    assert float(point["decode_slo_availability"]) == pytest.approx(one["decode"]["slo_availability"], rel=1e-12)
    np.testing.assert_allclose(got["outputs"]["decode_slo_availability"]["values"],
                               ds["decode_slo_availability"].values, rtol=0)


def test_sweep_explicit_units_convert(capsys, tmp_path):
    got = run_json(capsys, "sweep", INFER, "--vary", "tiers.restart.restart_time=10min:1h:3", "--out", tmp_path / "a.nc")
    assert got["coords"]["tiers.restart.restart_time"] == {"values": [10.0, 35.0, 60.0], "unit": "min"}


def test_sweep_keeps_failed_points_visible(capsys, tmp_path):
    # dp = 100 does not divide the global batch of 2048 sequences: that point fails
    out = tmp_path / "f.nc"
    code, _, err = run(capsys, "sweep", PLAN, "--vary", "dp=64,100", "--out", out)
    assert code == 0
    assert "1 of 2 points failed" in err and "global_batch" in err
    ds = xr.open_dataset(out)
    assert int(ds["status"].sel(dp=64)) == markovsim.PointStatus.OK
    assert int(ds["status"].sel(dp=100)) == markovsim.PointStatus.INVALID_INPUT
    assert ds["reason"].sel(dp=64).item() == "" and "dp=100" in ds["reason"].sel(dp=100).item()
    assert "global_batch" in ds["reason"].sel(dp=100).item()
    assert math.isnan(float(ds["step_time_s"].sel(dp=100)))
    assert ds.attrs["failed_points"] == 1
    ds.close()


@pytest.mark.parametrize("args, needles", [
    (["--vary", "dp=100,300"], ("every point failed", "dp=100")),
    (["--vary", "efficiency.comput=0.4:0.5:2"], ("'comput'", "unknown key")),
    (["--vary", "efficiency.compute=0.4:0.7"], ("start:stop:num",)),
    (["--vary", "efficiency.compute=0.4:0.7:x"], ("num",)),
    (["--vary", "dp=64:128:4"], ("dp", "not whole numbers")),
    (["--vary", "efficiency.compute=1parsec:2parsec:2"], ("unknown unit 'parsec'",)),
    (["--vary", "dp=64,128", "--vary", "dp=32,64"], ("appears twice",)),
    (["--vary", "dp=64,128", "--set", "tpp=1"], ("'tpp'", "unknown key")),
    (["--vary", "efficiency.compute=0.5:0.6:2.5"], ("num",)),
])
def test_sweep_errors(capsys, tmp_path, args, needles):
    assert_one_line_error(*run(capsys, "sweep", PLAN, *args, "--out", tmp_path / "e.nc")[::2], "sweep", *needles)


def test_sweep_bad_model_file_and_output(capsys, tmp_path):
    bad = copy_with(tmp_path, INFER, 'restart_time = "20 min"', "restart_time = 20")
    assert_one_line_error(*run(capsys, "sweep", bad, "--vary", "decode.instances=4,5", "--out",
                               tmp_path / "b.nc")[::2], "sweep", "missing unit", "restart_time")
    assert_one_line_error(*run(capsys, "sweep", PLAN, "--vary", "dp=64,128", "--out", tmp_path / "b.csv")[::2],
                          "sweep", ".nc", ".zarr")
    unknown = tmp_path / "what.toml"
    unknown.write_text("a = 1\n")
    assert_one_line_error(*run(capsys, "sweep", unknown, "--vary", "a=1,2", "--out", tmp_path / "u.nc")[::2],
                          "sweep", "cannot tell which kind")


# --------------------------------------------------------------------------- validate


def test_validate_example_cases(capsys):
    got = run_json(capsys, "validate", CASES)
    assert got["passed"] is True and got["summary"]["n_failed"] == 0
    rows = {r["case"]: r for r in got["rows"]}
    # independent closed forms of the two published bubbles: 7/23 and 7/103
    assert rows["Pangu Ultra 135B, pipeline bubble, 1F1B"]["predicted"] == pytest.approx(7 / 23, rel=1e-12)
    assert rows["Pangu Ultra 135B, pipeline bubble, interleaved VPP 6"]["predicted"] == pytest.approx(7 / 103, rel=1e-12)
    lin = rows["Pangu Ultra 135B, linearity at 4K cards against 256"]
    train = run_json(capsys, "train", PLAN, "--baseline", 256, "--cards", 4096, "--jitter-cv", 0.01)
    assert lin["predicted"] == pytest.approx(train["scaling"]["points"][1]["linearity"], rel=1e-12)
    avail = rows["10K-card Atlas 800T A2 with tiered recovery: training availability"]
    assert avail["predicted"] == pytest.approx(float(av.analyze(av.load_model(CLUSTER, TIERED)).availability),
                                               rel=1e-12)
    errors = [abs(r["error"]) for r in got["rows"]]
    assert got["summary"]["median_error"] == pytest.approx(float(np.median(errors)), rel=1e-12)
    assert got["summary"]["max_error"] == pytest.approx(max(errors), rel=1e-12)
    code, out, _ = run(capsys, "validate", CASES)
    assert code == 0 and "median" in out and "max" in out and "pipeline_bubble_fraction" in out


def _case(tmp_path, body: str) -> Path:
    path = tmp_path / "cases.toml"
    path.write_text(body.replace("PLAN", PLAN.as_posix()).replace("INFER", INFER.as_posix()))
    return path


def test_validate_out_of_tolerance_exits_1(capsys, tmp_path):
    path = _case(tmp_path, """
        name = "wrong bubble"
        kind = "train"
        tolerance = "1 %"
        model_file = "PLAN"
        [expect]
        pipeline_bubble_fraction = "20 %"
        """.replace("\n        ", "\n"))
    code, out, err = run(capsys, "validate", path)
    assert code == 1, err
    assert "FAIL" in out


def test_validate_infer_case(capsys, tmp_path, infer_model):
    want = inf.analyze_fleet(infer_model.decode, infer_model.tiers)
    path = _case(tmp_path, f"""
        name = "fleet"
        kind = "infer"
        tolerance = "0.1 %"
        model_file = "INFER"
        [expect]
        decode_slo_availability = {want.slo_availability!r}
        """.replace("\n        ", "\n"))
    got = run_json(capsys, "validate", path)
    assert got["rows"][0]["predicted"] == pytest.approx(want.slo_availability, rel=1e-12)


@pytest.mark.parametrize("extra, needles", [
    ('tpp = 8', ("'tpp'", "unknown key")),
    ('[linearity]\nbaseline = 256\nbatch = "fixed-global"\ncard = 4096', ("'card'", "unknown key")),
    ('[linearity]\nbaseline = 256\ncards = 4096', ("linearity.batch", "required")),
    ('kind = "nonsense"', ("unknown kind",)),
])
def test_validate_bad_train_case(capsys, tmp_path, extra, needles):
    body = f'name = "c"\ntolerance = "1 %"\nmodel_file = "PLAN"\n'
    if not extra.startswith("kind"):
        body += 'kind = "train"\n'
    body += f'{extra}\n[expect]\nmfu = 0.4\n' if not extra.startswith("[") else f'[expect]\nmfu = 0.4\n{extra}\n'
    path = _case(tmp_path, body)
    assert_one_line_error(*run(capsys, "validate", path)[::2], "validate", *needles)


def test_validate_bad_infer_case_missing_unit(capsys, tmp_path):
    path = _case(tmp_path, 'name = "c"\nkind = "infer"\ntolerance = "1 %"\nmodel_file = "INFER"\n'
                           '[tiers.restart]\nrestart_time = 20\n[expect]\ndecode_slo_availability = 0.999\n')
    assert_one_line_error(*run(capsys, "validate", path)[::2], "validate", "restart_time", "missing unit")


def test_validate_missing_file(capsys, tmp_path):
    assert_one_line_error(*run(capsys, "validate", tmp_path / "none.toml")[::2], "validate", "not found")


# --------------------------------------------------------------------------- console script


def test_installed_console_script():
    exe = shutil.which("markovsim", path=str(Path(sys.executable).parent))
    if exe is None:  # pragma: no cover - markovsim not installed in this environment
        pytest.skip("the markovsim console script is not installed next to this Python")
    ok = subprocess.run([exe, "train", "pangu_ultra_135b_8k", "--json"], capture_output=True, text=True,
                        timeout=120, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["outputs"]["pipeline_bubble_fraction"] == pytest.approx(7 / 103, rel=1e-12)
    bad = subprocess.run([exe, "infer", "no/such/file.toml"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "markovsim infer: error: no/such/file.toml: model file not found"]


def test_train_states_the_moe_caveat(capsys):
    """An MoE plan carries the validation's caveat, in the table and in the JSON; a dense one none."""
    got = run_json(capsys, "train", "deepseek_v3_h800_2048")
    assert got["caveats"] == tr.plan_caveats(tr.load_plan("deepseek_v3_h800_2048"))
    moe = [c for c in got["caveats"] if c.startswith("mixture of experts")]
    assert len(moe) == 1 and "upper bound" in moe[0]
    assert run_json(capsys, "train", PLAN)["caveats"] == []
    code, out, _ = run(capsys, "train", "deepseek_v3_h800_2048")
    assert code == 0 and "caveat: mixture of experts" in out
    ranked = run_json(capsys, "plan", "deepseek_v3_h800_2048", "--top", "2")
    assert [c for c in ranked["caveats"] if c.startswith("mixture of experts")] == moe


def test_train_and_plan_state_their_evidence(capsys):
    """Every prediction says how the model did on held-out published runs like it (or that
    there were none), in the table and in the JSON, for train and for plan alike."""
    got = run_json(capsys, "train", "llama3_70b_h100_64")
    assert got["evidence"] == tr.plan_evidence(tr.load_plan("llama3_70b_h100_64"))
    code, out, _ = run(capsys, "train", "llama3_70b_h100_64")
    assert code == 0 and f"evidence: {got['evidence']['text']}" in out
    ranked = run_json(capsys, "plan", "llama3_70b_h100_64", "--top", "1")
    assert ranked["evidence"] == got["evidence"]
    code, out, _ = run(capsys, "train", "pangu_ultra_135b_8k")
    assert "evidence: unvalidated: no published dense BF16 run on Atlas 800T A2" in out


def test_train_flags_fp8_on_hardware_without_an_fp8_peak(capsys):
    """An FP8 plan moved to an A100 (no FP8 tensor cores, no peak_dense.fp8) is not a
    prediction: the caveat names the hardware; the same plan on the H100 it was written for
    carries none, and neither does the BF16 plan on the A100."""
    def fp8_notes(got):
        return [c for c in got["caveats"] if c.startswith("precision fp8")]

    moved = run_json(capsys, "train", "llama3_70b_h100_64", "--set", 'hardware="a100_sxm_80gb"')
    assert len(fp8_notes(moved)) == 1
    assert "precision fp8 on NVIDIA A100 SXM4 80GB" in fp8_notes(moved)[0]
    assert "what-if" in fp8_notes(moved)[0]
    assert fp8_notes(run_json(capsys, "train", "llama3_70b_h100_64")) == []
    bf16 = run_json(capsys, "train", "llama3_70b_h100_64", "--set", 'hardware="a100_sxm_80gb"',
                    "--set", 'precision="bf16"')
    assert fp8_notes(bf16) == []
    # the MFU of an FP8 plan is over the BF16 peak (the convention reports quote), and says so
    code, out, _ = run(capsys, "train", "llama3_70b_h100_64")
    mfu = [ln for ln in out.splitlines() if ln.startswith("MFU")][0]
    assert code == 0 and mfu.endswith("% of the BF16 peak")
    spec = tr.load_plan("llama3_70b_h100_64")
    b = tr.step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    assert b.tflops_per_gpu * 1e12 / spec.hardware.peak_flop_per_s == pytest.approx(b.mfu, rel=1e-12)
    assert spec.hardware.peak_flop_per_s == pytest.approx(989e12, rel=0.01)  # H100 SXM dense BF16


def test_train_states_the_linearity_caveat_with_a_linearity(capsys):
    got = run_json(capsys, "train", PLAN, "--baseline", "4096", "--cards", "8192")
    assert "upper bound" in got["scaling"]["caveat"]
    code, out, _ = run(capsys, "train", PLAN, "--baseline", "4096", "--cards", "8192")
    assert code == 0 and "caveat: linearity" in out
    code, out, _ = run(capsys, "train", PLAN)
    assert "caveat: linearity" not in out


def test_train_gives_the_evidence_of_its_linearity(capsys):
    """With a linearity table comes the holdout scale-ups on the same hardware and batch rule,
    and (where there are enough) the linearity less their median gap per doubling of cards."""
    got = run_json(capsys, "train", "llama3_70b_h100_64", "--cards", "64", "512", "--batch", "fixed-replica")
    ev = got["scaling"]["evidence"]
    assert ev["key"] == "NVIDIA H100 SXM5 80GB | fixed-replica" and ev["rows"] >= 5
    first, second = got["scaling"]["points"]
    assert first["linearity_at_median_gap"] == pytest.approx(first["linearity"])
    assert second["linearity_at_median_gap"] == pytest.approx(
        second["linearity"] - ev["median_points_per_doubling"] / 100 * 3)  # 64 -> 512: three doublings
    code, out, _ = run(capsys, "train", "llama3_70b_h100_64", "--cards", "64", "512", "--batch", "fixed-replica")
    assert code == 0 and "at the median gap" in out and f"linearity evidence: on {ev['rows']} published" in out
    # an accelerator no held-out scale-up ran on says so, and shows no adjusted column
    code, out, _ = run(capsys, "train", PLAN, "--baseline", "4096", "--cards", "8192")
    assert "linearity evidence: unvalidated: no published scale-up on" in out and "at the median gap" not in out


def test_train_says_how_far_over_memory_and_names_the_modules(capsys, tmp_path):
    """A plan over its usable memory says by how much, and whether it still fits the HBM
    (tight) or not; the header names the recomputed modules and the moment format."""
    plan = tmp_path / "ds.toml"
    plan.write_text('workload = "deepseek_v3"\nhardware = "h100_sxm"\ntp = 1\npp = 16\ndp = 64\nep = 64\n'
                    'global_batch = 1024\nlayer_split = "uneven"\nprecision = "fp8"\nrecompute = "selective"\n'
                    'recompute_modules = ["mla_up_proj", "layernorm"]\noptimizer_moments = "bf16"\n')
    code, out, err = run(capsys, "train", str(plan))
    assert code == 0, err
    spec = tr.load_plan(plan)
    m = tr.memory_breakdown(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    assert m.total > spec.hardware.hbm_bytes  # beyond the HBM, not only the reserve
    assert f"DOES NOT FIT: {100 * (m.total / m.usable_bytes - 1):.0f} % over, beyond the 80 GiB of HBM" in out
    assert ("recompute selective (mla_up_proj, layernorm); Adam moments bf16; fp8 GEMMs, delayed scaling; "
            "expert dispatch per-expert in bf16") in out  # the MoE plan's dispatch, default format
    # the FP8 recipe: Transformer Engine's default, delayed scaling, named in the header and the JSON
    got = run_json(capsys, "train", str(plan))
    assert got["plan"]["recompute_modules"] == ["mla_up_proj", "layernorm"]
    assert got["plan"]["optimizer_moments"] == "bf16" and got["plan"]["fp8_recipe"] == "delayed"
    assert (got["plan"]["ep_dispatch"], got["plan"]["ep_dispatch_precision"], got["plan"]["expert_tp"]) == (
        "per-expert", "bf16", 1)
    # a plan between the usable memory and the HBM is tight
    usable = spec.efficiency.usable_memory * spec.hardware.hbm_bytes
    tight = spec.hardware.hbm_bytes * 0.5 * (1 + spec.efficiency.usable_memory)  # halfway between
    from markovsim._cli._train import _over
    assert "tight, it may run" in _over(tight, usable, spec.hardware.hbm_bytes)


def test_train_names_the_pipeline_stage_its_memory_is_of(capsys):
    """With a pipeline the memory line says which end is the fuller (full recomputation puts
    the 128K-vocabulary head on the last stage ahead of the first's in-flight layer inputs),
    and the JSON carries it; one rank holding both ends says nothing."""
    spec = tr.load_plan("llama3_70b_h100_64")
    for recompute in ("none", "full"):
        want = tr.memory_breakdown(spec.workload, spec.hardware, spec.plan.replace(recompute=recompute),
                                   efficiency=spec.efficiency).stage
        code, out, err = run(capsys, "train", "llama3_70b_h100_64", "--set", f"recompute={recompute}", "--quiet")
        assert code == 0, err
        assert f"usable, on the {want} pipeline stage (the fuller end)" in out
        assert run_json(capsys, "train", "llama3_70b_h100_64", "--set", f"recompute={recompute}")["memory_stage"] == want
    assert want == "last"
    code, out, _ = run(capsys, "train", "llama3_70b_h100_64", "--set", "pp=1", "--set", "virtual_stages=1",
                       "--set", "schedule=\"1f1b\"", "--quiet")
    assert code == 0 and "pipeline stage" not in out


def test_plan_refusals_say_why(capsys):
    """A TP or PP filter beyond the search's limit is refused with the limit to raise (it
    used to search and report no plan); with none found, the count says where the
    candidates went: a card count no split tiles, or splits that all exceed the memory."""
    code, out, err = run(capsys, "plan", "--workload", "llama3_70b", "--hardware", "h100_sxm", "--cards", "1024",
                         "--global-batch", "512", "--tp", "16")
    assert code == 2 and out == ""
    assert "--tp 16: larger than --max-tp 8" in err and "--max-tp 16" in err
    code, _, err = run(capsys, "plan", "--workload", "llama3_70b", "--hardware", "h100_sxm", "--cards", "1000",
                       "--global-batch", "512")
    assert code == 2 and " 0 split the cards, the layers and the global batch validly, 0 of them fit" in err
    code, _, err = run(capsys, "plan", "--workload", "llama3_70b", "--hardware", "h100_sxm", "--cards", "8",
                       "--global-batch", "8")
    tiled = int(err.split(" candidates ")[1].split(" split")[0])
    assert code == 2 and tiled > 0 and "0 of them fit in memory" in err  # 70B on one node: over the HBM


def test_plan_elementwise_holds_eager_operators_for_every_candidate(capsys):
    """--elementwise eager: the JSON says what was held, and the fastest plan's step is the
    library's step_time of that plan with eager operators (slower than the fused search)."""
    args = ("plan", "--workload", "llama3_8b", "--hardware", "a100_sxm_80gb", "--cards", "64", "--global-batch",
            "64", "--top", "1", "--max-pp", "2")
    eager = run_json(capsys, *args, "--elementwise", "eager")
    fused = run_json(capsys, *args)
    assert eager["numerics"]["elementwise"] == "eager" and fused["numerics"]["elementwise"] == "fused"
    best = eager["plans"][0]
    w, hw = tr.load_workload("llama3_8b"), tr.load_hardware("a100_sxm_80gb")
    plan = tr.Plan(tp=best["tp"], pp=best["pp"], dp=best["dp"], cp=best["cp"], global_batch=64,
                   micro_batch=best["micro_batch"], zero_stage=best["zero_stage"], recompute=best["recompute"],
                   schedule=best["schedule"], virtual_stages=best["virtual_stages"], elementwise="eager")
    assert best["step_time_s"] == pytest.approx(tr.step_time(w, hw, plan).step_time, rel=1e-9)
    assert best["step_time_s"] > fused["plans"][0]["step_time_s"]


def test_plan_holds_the_plan_files_numerics(capsys):
    """The search holds the plan file's precision and formats (here FP8 GEMMs, BF16
    gradients): its ranking of the file's own plan equals markovsim train's step time
    for that plan, which a BF16 search (--precision bf16, or the library's default)
    does not; the header and the JSON say what was held."""
    spec = tr.load_plan("llama3_70b_h100_64")
    got = run_json(capsys, "plan", "llama3_70b_h100_64", "--tp", "4", "--pp", "4", "--cp", "2", "--top", "400")
    assert got["numerics"] == {"precision": "fp8", "fp8_params": False, "attention_kernel": "flash",
                               "grad_reduce": "bf16", "optimizer_moments": "fp32", "ep_dispatch": "per-expert",
                               "expert_routing": "random", "ep_dispatch_precision": "bf16",
                               "combined_1f1b": False, "fp8_recipe": "delayed", "elementwise": "fused"}
    mine = spec.plan.replace(virtual_stages=4)  # the file's v = 5 is not a searched depth; 4 is
    want = tr.step_time(spec.workload, spec.hardware, mine, efficiency=spec.efficiency).step_time
    same = [r for r in got["plans"] if (r["virtual_stages"], r["micro_batch"], r["zero_stage"], r["schedule"],
                                        r["recompute"]) == (4, 1, 1, "interleaved", "none")]
    assert len(same) == 1 and same[0]["step_time_s"] == pytest.approx(want, rel=1e-9)
    bf16 = run_json(capsys, "plan", "llama3_70b_h100_64", "--tp", "4", "--pp", "4", "--cp", "2", "--top", "400",
                    "--precision", "bf16")
    assert bf16["numerics"]["precision"] == "bf16"
    assert bf16["efficiency"]["tp_overlap"] == 0.8 and bf16["efficiency_defaults"] == ["usable_memory"]
    slow = [r for r in bf16["plans"] if (r["virtual_stages"], r["micro_batch"], r["zero_stage"], r["schedule"],
                                         r["recompute"]) == (4, 1, 1, "interleaved", "none")]
    assert slow[0]["step_time_s"] > 1.2 * want
    code, out, _ = run(capsys, "plan", "llama3_70b_h100_64", "--tp", "4", "--pp", "4", "--cp", "2", "--top", "1")
    assert code == 0 and "held, not searched: fp8 GEMMs (delayed scaling), flash attention, gradients reduced in bf16" in out
    assert ("efficiency: tp_overlap 0.8, pp_overlap 0.5, dp_overlap 0.9, param_gather_overlap 0.9; at their "
            "defaults: usable_memory 0.9") in out  # held for every candidate, from the file
    best = tr.search_plans(spec.workload, spec.hardware, 64, global_batch=128, efficiency=spec.efficiency,
                           numerics=spec.plan)
    assert best.plan.precision is tr.Precision.FP8 and best.plan.grad_reduce is tr.Precision.BF16


def test_train_names_the_efficiency_it_assumes(capsys, tmp_path):
    """The efficiency line lists the settings the step uses, those the file sets (a value
    equal to the library's default included) apart from those left at their defaults;
    communication the plan does not have is not listed."""
    code, out, _ = run(capsys, "train", "llama3_70b_h100_64")
    line = next(x for x in out.splitlines() if x.startswith("efficiency: "))
    assert line == ("efficiency: tp_overlap 0.8, pp_overlap 0.5, dp_overlap 0.9, param_gather_overlap 0.9; "
                    "at their defaults: usable_memory 0.9")
    plan = tmp_path / "bare.toml"
    plan.write_text('workload = "llama3_8b"\nhardware = "a100_sxm_80gb"\ntp = 2\npp = 1\ndp = 4\nglobal_batch = 64\n')
    got = run_json(capsys, "train", str(plan))
    assert got["efficiency"] == {"tp_overlap": 0.0, "dp_overlap": 0.9, "param_gather_overlap": 0.0,
                                 "usable_memory": 0.9}  # no PP, EP, hybrid sharding or overrides
    assert got["efficiency_defaults"] == list(got["efficiency"])
    code, out, _ = run(capsys, "train", str(plan), "--set", "efficiency.tp_overlap=0.5")
    assert "efficiency: tp_overlap 0.5; at their defaults: dp_overlap 0.9, param_gather_overlap 0" in out
    # on a preset whose default_stack is megatron-core, a plan that states no overlap is timed
    # with that stack's overlaps, and the line names the stack among the defaults
    plan.write_text(plan.read_text().replace("a100_sxm_80gb", "h100_sxm"))
    got = run_json(capsys, "train", str(plan))
    assert got["efficiency"] == {"stack": "megatron-core", "tp_overlap": 0.8, "dp_overlap": 0.9,
                                 "param_gather_overlap": 0.9, "usable_memory": 0.9}
    assert got["efficiency_defaults"] == list(got["efficiency"])
    code, out, _ = run(capsys, "train", str(plan))
    assert ("efficiency: nothing set; at their defaults: stack megatron-core (the hardware's default_stack), "
            "tp_overlap 0.8, dp_overlap 0.9, param_gather_overlap 0.9, usable_memory 0.9") in out
    # a what-if that sets one overlap keeps the stack's others
    code, out, _ = run(capsys, "train", str(plan), "--set", "efficiency.tp_overlap=0.5")
    assert ("efficiency: tp_overlap 0.5; at their defaults: stack megatron-core (the hardware's default_stack), "
            "dp_overlap 0.9, param_gather_overlap 0.9, usable_memory 0.9") in out


def test_plan_with_bf16_gemms_drops_the_files_fp8_dispatch(capsys):
    """DeepSeek-V3's plan file dispatches in FP8 (ep_dispatch_precision = "fp8"), which needs
    FP8 GEMMs: searching it with --precision bf16 holds a BF16 dispatch too (no refusal), and
    the file's own numerics say fp8."""
    own = run_json(capsys, "plan", "deepseek_v3_h800_2048", "--tp", "1", "--pp", "16", "--top", "1")
    assert own["numerics"]["precision"] == "fp8" and own["numerics"]["ep_dispatch_precision"] == "fp8"
    bf16 = run_json(capsys, "plan", "deepseek_v3_h800_2048", "--tp", "1", "--pp", "16", "--top", "1",
                    "--precision", "bf16")
    assert bf16["numerics"]["precision"] == "bf16" and bf16["numerics"]["ep_dispatch_precision"] == "bf16"


def test_train_and_plan_say_when_the_attention_kernel_decides_the_step(capsys, tmp_path):
    """A long-sequence plan whose step moves by more than the suites' 10 % tolerance between
    the two generations of fused attention (flash, flash1) says so, with both step times; the
    seconds quoted are the library's step_time of the plan with the other kernel. The plan
    search says it of its fastest plan; a plan the kernel barely moves (Pangu 135B, 8K
    tokens, flash) says nothing."""
    path = tmp_path / "mpt7b.toml"
    path.write_text(
        'workload = { name = "MPT 7b", layers = 32, hidden = 4096, ffn_hidden = 16384, ffn_kind = "gelu", '
        'heads = 32, kv_heads = 32, vocab = 50368, seq_len = 32768, tied_embeddings = true }\n'
        'hardware = "a100_sxm_80gb"\ntp = 1\npp = 1\ndp = 8\nglobal_batch = 32\nmicro_batch = 2\n'
        'zero_stage = 3\nsequence_parallel = false\nattention_kernel = "flash1"\nrecompute = "full"\n')
    spec = tr.load_plan(path)
    base = tr.step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency).step_time
    flash = tr.step_time(spec.workload, spec.hardware, spec.plan.replace(attention_kernel="flash"),
                         efficiency=spec.efficiency).step_time
    assert flash / base - 1 < -0.10
    got = run_json(capsys, "train", str(path))
    notes = [c for c in got["caveats"] if c.startswith("attention kernel")]
    assert len(notes) == 1 and "timed as flash1" in notes[0]
    assert f"{100 * (flash / base - 1):+.0f} % ({flash:.3g} s against {base:.3g} s)" in notes[0]
    code, out, _ = run(capsys, "train", str(path))
    assert code == 0 and "caveat: attention kernel" in out
    ranked = run_json(capsys, "plan", str(path), "--top", "1")
    first = ranked["plans"][0]
    best = spec.plan.replace(tp=first["tp"], pp=first["pp"], dp=first["dp"], micro_batch=first["micro_batch"],
                             zero_stage=first["zero_stage"], recompute=first["recompute"],
                             virtual_stages=first["virtual_stages"], cp=first["cp"], ep=first["ep"],
                             schedule=first["schedule"], sequence_parallel=first["tp"] > 1)
    other = tr.step_time(spec.workload, spec.hardware, best.replace(attention_kernel="flash"),
                         efficiency=spec.efficiency).step_time
    said = [c for c in ranked["caveats"] if c.startswith("attention kernel")]
    assert len(said) == 1 and f"({other:.3g} s against {first['step_time_s']:.3g} s)" in said[0]
    assert not [c for c in run_json(capsys, "train", PLAN)["caveats"] if c.startswith("attention kernel")]


def test_plan_filters_read_their_choices_in_any_case(capsys):
    """--precision FP8 is --precision fp8 (the model files read choices the same way);
    a value that is no choice in any case is still refused by name."""
    got = run_json(capsys, "plan", "llama3_70b_h100_64", "--tp", "4", "--pp", "4", "--cp", "2", "--top", "5",
                   "--precision", "BF16", "--schedule", "Interleaved", "--recompute", "NONE")
    assert got["numerics"]["precision"] == "bf16"
    assert got["plans"] and {(r["schedule"], r["recompute"]) for r in got["plans"]} == {("interleaved", "none")}
    with pytest.raises(SystemExit):
        run(capsys, "plan", "llama3_70b_h100_64", "--precision", "FP9")
    assert "invalid choice: 'fp9'" in capsys.readouterr().err


def test_train_and_plan_flag_a_long_context_plan(capsys, tmp_path):
    """Where attention is most of the layer (Llama 3 8B at 128K tokens), train and plan both
    say so with the long-context caveat; the same plan at 8K tokens carries none."""
    def write(seq):
        path = tmp_path / f"lc_{seq}.toml"
        path.write_text(
            'workload = { name = "Llama 3 8B", layers = 32, hidden = 4096, ffn_hidden = 14336, '
            'ffn_kind = "swiglu", heads = 32, kv_heads = 8, head_dim = 128, vocab = 128256, '
            f'seq_len = {seq} }}\nhardware = "b200"\ntp = 1\npp = 1\ncp = 8\ndp = 8\nglobal_batch = 8\n'
            'precision = "fp8"\nfp8_recipe = "current"\n')
        return str(path)

    def notes(got):
        return [c for c in got["caveats"] if c.startswith("long context")]

    long = write(131072)
    said = notes(run_json(capsys, "train", long))
    assert len(said) == 1 and "of NVIDIA B200's peak" in said[0]
    ranked = notes(run_json(capsys, "plan", long, "--top", "1"))
    assert len(ranked) == 1 and ranked[0].startswith("long context: the attention core is")
    assert notes(run_json(capsys, "train", write(8192))) == []


def test_a_named_stack_is_shown_and_plan_stack_holds_it_for_every_candidate(capsys, tmp_path):
    """[efficiency] stack names the overlaps on the efficiency line; `markovsim plan --stack`
    evaluates every candidate with them (the fastest plan's step is the library's step_time
    with Efficiency.for_stack); a search that states no overlap carries the overlap caveat."""
    plan = tmp_path / "stack.toml"
    plan.write_text('workload = "llama3_70b"\nhardware = "h100_sxm"\ntp = 4\npp = 4\ndp = 4\nglobal_batch = 128\n'
                    '[efficiency]\nstack = "megatron-core"\npp_overlap = 0.0\n')
    code, out, _ = run(capsys, "train", str(plan))
    assert code == 0 and ("efficiency: stack megatron-core, tp_overlap 0.8, pp_overlap 0, dp_overlap 0.9, "
                          "param_gather_overlap 0.9; at their defaults: usable_memory 0.9") in out
    assert "communication overlap:" not in out
    args = ("plan", "--workload", "llama3_70b", "--hardware", "h100_sxm", "--cards", "64", "--global-batch", "128",
            "--top", "1")
    got = run_json(capsys, *args, "--stack", "megatron-core")
    assert got["efficiency"]["stack"] == "megatron-core" and not any("communication overlap" in n
                                                                    for n in got["caveats"])
    r = got["plans"][0]
    best = tr.Plan(tp=r["tp"], pp=r["pp"], dp=r["dp"], cp=r["cp"], global_batch=128, micro_batch=r["micro_batch"],
                   virtual_stages=r["virtual_stages"], zero_stage=r["zero_stage"], schedule=tr.Schedule(r["schedule"]),
                   recompute=tr.Recompute(r["recompute"]))
    want = tr.step_time(tr.load_workload("llama3_70b"), tr.load_hardware("h100_sxm"), best,
                        efficiency=tr.Efficiency.for_stack("megatron-core")).step_time
    assert r["step_time_s"] == pytest.approx(want, rel=1e-9)
    # stating nothing, the search runs with the H100's default_stack (megatron-core): the
    # same plans, the caveat giving the other reading; on the A100 (library defaults) the
    # exposed transfers make the step longer than the stack's
    bare = run_json(capsys, *args)
    assert any(n.startswith("communication overlap:") for n in bare["caveats"])
    assert bare["efficiency"]["stack"] == "megatron-core" and "stack" in bare["efficiency_defaults"]
    assert bare["plans"][0]["step_time_s"] == pytest.approx(r["step_time_s"], rel=1e-12)
    ampere = ("plan", "--workload", "llama3_70b", "--hardware", "a100_sxm_80gb", "--cards", "64",
              "--global-batch", "128", "--top", "1")
    old = run_json(capsys, *ampere)
    assert "stack" not in old["efficiency"] and any(n.startswith("communication overlap:") for n in old["caveats"])
    assert old["plans"][0]["step_time_s"] > run_json(capsys, *ampere, "--stack", "megatron-core")["plans"][0][
        "step_time_s"]
    # --stack replaces every overlap of the file, its stack's included: --stack default over a
    # megatron-core plan file is the library's defaults
    default = run_json(capsys, "plan", str(plan), "--top", "1", "--stack", "default")
    assert {k: default["efficiency"][k] for k in tr.STACK_OVERLAPS} == {
        k: getattr(tr.Efficiency(), k) for k in tr.STACK_OVERLAPS}
    assert default["plans"][0]["step_time_s"] > r["step_time_s"]
