"""The edge (issue 15, issue 11 items 6-7): model files read once in memory, one reference
rule, outputs that never destroy data, and the new command-line features (--plot, --csv,
plan search, sensitivities, --dask, the generated key reference).

Each regression test names what it caught on 82057e9.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import markovsim
from markovsim import _cli
from markovsim import availability as av
from markovsim import training as tr

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
PLAN = MODELS / "plans" / "pangu_ultra_135b_8k.toml"
INFER = MODELS / "inference" / "deepseek_v3_8gpu.toml"
RECOVERY = MODELS / "recovery" / "checkpoint_only.toml"


def run(capsys, *argv):
    code = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, command, *argv):
    code, out, err = run(capsys, command, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"markovsim {command}: error: ") and "Traceback" not in err
    return err


@pytest.fixture
def counted(monkeypatch):
    """Every TOML parse (by file) and every temporary file or directory made."""
    seen = {"reads": [], "temp": []}
    load, loads = tomllib.load, tomllib.loads

    def counting_load(fh, *a, **k):
        seen["reads"].append(Path(fh.name).resolve())
        return load(fh, *a, **k)

    def counting_loads(text, *a, **k):
        seen["reads"].append("<string>")
        return loads(text, *a, **k)

    monkeypatch.setattr(tomllib, "load", counting_load)
    monkeypatch.setattr(tomllib, "loads", counting_loads)
    for name in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "TemporaryFile",
                 "SpooledTemporaryFile"):
        original = getattr(tempfile, name)

        def counting(*a, _original=original, _name=name, **k):
            seen["temp"].append(_name)
            return _original(*a, **k)

        monkeypatch.setattr(tempfile, name, counting)
    return seen


# --------------------------------------------------------------------------- read once, in memory


def test_one_goodput_evaluation_reads_each_file_once_and_writes_no_temporary_file(capsys, counted):
    """82057e9: one `markovsim goodput` parsed 3 files 7 times and wrote 4 temporary files."""
    code, out, err = run(capsys, "goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only",
                         "--set", "recovery.checkpoint.interval=30 min", "--json")
    assert code == 0, err
    files = [r for r in counted["reads"] if r != "<string>"]
    assert sorted(files) == sorted({(MODELS / p).resolve() for p in (
        "clusters/atlas800t_a2_10k.toml", "faults/ascend_training.toml", "recovery/checkpoint_only.toml")})
    assert counted["temp"] == []
    assert json.loads(out)["outputs"]["checkpoint_interval_s"] == 1800.0


def test_a_sweep_reads_its_files_once_whatever_the_number_of_points(capsys, tmp_path, counted):
    """82057e9: every grid point re-read the model files through temporary copies."""
    code, _, err = run(capsys, "sweep", PLAN, "--vary", "efficiency.compute=0.4:0.7:4", "--vary", "dp=64,128",
                       "--out", tmp_path / "s.nc")
    assert code == 0, err
    files = [r for r in counted["reads"] if r != "<string>"]
    assert len(files) == len(set(files)) == 3              # plan, workload, hardware
    assert counted["temp"] == []


def test_overrides_reach_the_files_a_model_refers_to(capsys):
    """Referenced documents are inlined before --set: a plan's workload is part of it."""
    base = json.loads(run(capsys, "train", PLAN, "--json")[1])["outputs"]
    got = json.loads(run(capsys, "train", PLAN, "--set", "hardware.peak_dense.bf16=626 TFLOP/s", "--json")[1])["outputs"]
    hw = tr.load_hardware("atlas_800t_a2")
    assert got["compute_s"] == pytest.approx(base["compute_s"] * hw.peak_flop_per_s / 626e12, rel=1e-12)


# --------------------------------------------------------------------------- one reference rule


def test_load_model_accepts_the_bare_names_the_command_line_accepts():
    """82057e9: availability.load_model("atlas800t_a2_10k", ...) failed with 'not found'."""
    by_name = av.load_model("atlas800t_a2_10k", "checkpoint_only", cards=1024)
    by_path = av.load_model(MODELS / "clusters" / "atlas800t_a2_10k.toml", RECOVERY, cards=1024)
    assert float(av.analyze(by_name).goodput) == float(av.analyze(by_path).goodput)


def test_plan_references_resolve_relative_to_the_plan_file(tmp_path, monkeypatch):
    """82057e9: a plan's workload = "w.toml" resolved against the working directory."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(MODELS / "workloads" / "pangu_ultra_135b.toml", project / "w.toml")
    text = PLAN.read_text().replace('workload = "pangu_ultra_135b"', 'workload = "w.toml"')
    assert 'workload = "w.toml"' in text
    (project / "plan.toml").write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert tr.load_plan(project / "plan.toml").workload == tr.load_workload("pangu_ultra_135b")
    # and inline, as a table
    inline = tomllib.loads(text)
    inline["workload"] = tomllib.loads((project / "w.toml").read_text())
    assert tr.plan_from_document(inline).workload == tr.load_workload("pangu_ultra_135b")


def test_no_message_appends_toml_twice(tmp_path):
    """82057e9: 'looked for ... models/clusters/x.toml.toml'."""
    job = tmp_path / "job.toml"
    job.write_text('cluster = "missing.toml"\nrecovery = "checkpoint_only"\n')
    with pytest.raises(markovsim.SpecError) as e:
        av.load_job(job)
    assert ".toml.toml" not in str(e.value) and "missing.toml: model file not found" in str(e.value)
    with pytest.raises(markovsim.SpecError, match="no preset 'nope' in models/clusters/") as e:
        av.job_from_document({"cluster": "nope", "recovery": "checkpoint_only"})
    assert ".toml.toml" not in str(e.value)


def test_cards_beyond_the_cluster_are_a_clean_error(capsys):
    """82057e9: --cards larger than the cluster was accepted."""
    err = one_line_error(capsys, "goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only",
                         "--cards", 20480)
    assert "cards=20480" in err and "10240" in err


# --------------------------------------------------------------------------- outputs never destroy data


def test_sweep_and_repro_refuse_to_overwrite_without_force(capsys, tmp_path):
    """82057e9: sweep --out existing_dir.zarr deleted its contents; --out x.nc and repro --out
    overwrote without a word."""
    store = tmp_path / "mine.zarr"
    store.mkdir()
    (store / "notes.txt").write_text("keep me")
    err = one_line_error(capsys, "sweep", INFER, "--vary", "decode.instances=3,4", "--out", store)
    assert "exists and is not empty" in err and "--force" in err
    assert (store / "notes.txt").read_text() == "keep me"
    nc = tmp_path / "old.nc"
    nc.write_bytes(b"precious")
    one_line_error(capsys, "sweep", INFER, "--vary", "decode.instances=3,4", "--out", nc)
    assert nc.read_bytes() == b"precious"
    code, _, err = run(capsys, "sweep", INFER, "--vary", "decode.instances=3,4", "--out", nc, "--force")
    assert code == 0, err
    assert xr.open_dataset(nc)["decode_slo_availability"].size == 2
    out = tmp_path / "repro"
    out.mkdir()
    (out / "report.md").write_text("my notes")
    err = one_line_error(capsys, "repro", "S-HW-1", "--out", out)
    assert (out / "report.md").read_text() == "my notes"


def test_a_zarr_sweep_output_is_checksummed(capsys, tmp_path):
    store = tmp_path / "s.zarr"
    code, _, err = run(capsys, "sweep", INFER, "--vary", "decode.instances=3,4", "--out", store)
    assert code == 0, err
    ds = markovsim.open_sweep(store)
    assert ds["decode.instances"].values.tolist() == [3, 4]
    assert ds["decode_slo_availability"].attrs["units"] == "1" and ds.attrs["kind"] == "infer"
    chunk = next(p for p in (store / "decode_slo_availability").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    with pytest.raises(markovsim.InvalidParameterError, match="missing or changed"):
        markovsim.open_sweep(store)


# --------------------------------------------------------------------------- plots and CSV


@pytest.mark.parametrize("argv", [
    ["goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only"],
    ["train", "pangu_ultra_135b_8k", "--baseline", "256", "--cards", "4096"],
    ["infer", "deepseek_v3_8gpu"],
    ["validate", "example"],
    ["plan", "pangu_ultra_135b_8k", "--top", "3"],
], ids=lambda a: a[0])
def test_every_command_plots_and_writes_csv(capsys, tmp_path, argv):
    png, table = tmp_path / "f.png", tmp_path / "t.csv"
    code, _, err = run(capsys, *argv, "--plot", png, "--csv", table)
    assert code == 0, err
    assert png.read_bytes()[:8] == bytes.fromhex("89504e470d0a1a0a")
    assert len(table.read_text().splitlines()) >= 2
    assert one_line_error(capsys, *argv, "--plot", png)            # exists: refused without --force
    assert run(capsys, *argv, "--plot", png, "--force")[0] == 0


def test_sweep_plot_and_csv(capsys, tmp_path):
    code, _, err = run(capsys, "sweep", INFER, "--vary", "decode.instances=3,4", "--out", tmp_path / "s.nc",
                       "--plot", tmp_path / "s.png", "--csv", tmp_path / "s.csv")
    assert code == 0, err
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert rows[0].startswith("decode.instances,") and rows[0].endswith("status,reason") and len(rows) == 3
    assert (tmp_path / "s.png").stat().st_size > 0


def test_plot_without_matplotlib_names_the_extra(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    err = one_line_error(capsys, "infer", "deepseek_v3_8gpu", "--plot", tmp_path / "f.png")
    assert "pip install 'markovsim[plot]'" in err


# --------------------------------------------------------------------------- plan, sensitivities, dask


def test_plan_search_top_k_and_filters(capsys):
    spec = tr.load_plan(PLAN)
    best = tr.search_plans(spec.workload, spec.hardware, spec.plan.world_size,
                           global_batch=spec.plan.global_batch, efficiency=spec.efficiency)
    got = json.loads(run(capsys, "plan", PLAN, "--top", "5", "--json")[1])
    assert len(got["plans"]) == 5 and got["valid"] == best.valid
    first = got["plans"][0]
    assert first["step_time_s"] == pytest.approx(best.breakdown.step_time, rel=1e-12)
    assert (first["tp"], first["pp"], first["dp"]) == (best.plan.tp, best.plan.pp, best.plan.dp)
    times = [p["step_time_s"] for p in got["plans"]]
    assert times == sorted(times)
    only = json.loads(run(capsys, "plan", PLAN, "--schedule", "1f1b", "--tp", "8", "--json")[1])
    assert {(p["schedule"], p["tp"]) for p in only["plans"]} == {("1f1b", 8)}
    assert only["plans"][0]["step_time_s"] >= first["step_time_s"]
    assert "no valid plan" in one_line_error(capsys, "plan", PLAN, "--tp", "3")


def test_goodput_sensitivities_equal_the_library(capsys):
    got = json.loads(run(capsys, "goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only",
                         "--sensitivities", "--json")[1])["sensitivities"]
    want = av.goodput_sensitivities(av.load_model("atlas800t_a2_10k", "checkpoint_only"))
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-300), key
    code, out, _ = run(capsys, "goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "checkpoint_only",
                       "--sensitivities")
    assert code == 0 and "d ln goodput / d ln input" in out


@pytest.mark.slow
def test_sweep_on_dask_gives_the_same_dataset(capsys, tmp_path):
    pytest.importorskip("distributed")
    argv = ["sweep", INFER, "--vary", "decode.instances=3,4"]
    assert run(capsys, *argv, "--out", tmp_path / "a.nc")[0] == 0
    code, _, err = run(capsys, *argv, "--out", tmp_path / "b.nc", "--dask")
    assert code == 0, err
    a, b = xr.open_dataset(tmp_path / "a.nc"), xr.open_dataset(tmp_path / "b.nc")
    xr.testing.assert_identical(a, b)


# --------------------------------------------------------------------------- the key reference


def test_the_key_reference_page_is_current():
    from markovsim._cli._keys import page

    committed = (ROOT / "docs" / "reference" / "model-file-keys.md").read_text()
    assert committed == page(), ("docs/reference/model-file-keys.md is stale: regenerate it with "
                                 "`markovsim keys > docs/reference/model-file-keys.md`")


def test_the_key_reference_lists_every_reader_key_with_its_unit():
    from markovsim._cli._keys import record

    found = record()
    info = found[("recovery", "tiers[].bandwidth")]
    assert info.kind == "bandwidth" and info.doc
    assert found[("plan", "efficiency.compute")].constraint == "0 to 1"
    assert found[("job", "cards")].doc and found[("train case", "linearity.baseline")].required
    undocumented = sorted(k for k, i in found.items() if not i.doc)
    assert not undocumented, f"keys without a one-line meaning: {undocumented}"


def test_points_of_a_sweep_that_fail_carry_the_error_kind(capsys, tmp_path):
    code, _, _ = run(capsys, "sweep", PLAN, "--vary", "dp=64,100", "--out", tmp_path / "f.nc")
    ds = xr.open_dataset(tmp_path / "f.nc")
    assert ds["status"].values.tolist() == [markovsim.PointStatus.OK, markovsim.PointStatus.INVALID_INPUT]
    assert np.isnan(ds["mfu"].values[1])
