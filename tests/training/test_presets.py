"""Every shipped preset loads, carries a source for each number, and lies in physical ranges."""

import re
from pathlib import Path

import pytest

from markovsim.training import load_hardware, load_plan, load_workload, parameter_count, step_time

MODELS = Path(__file__).resolve().parents[2] / "models"
HARDWARE = sorted(p.stem for p in (MODELS / "hardware").glob("*.toml"))
WORKLOADS = sorted(p.stem for p in (MODELS / "workloads").glob("*.toml"))
PLANS = sorted(p.stem for p in (MODELS / "plans").glob("*.toml"))
#: keys that name things rather than state numbers
_NAMES = {"name", "workload", "hardware"}
_CITED = re.compile(r"source|assumption|derived|public_inputs|fitted|measured|as |the .* preset|S-[A-Z]+-\d")


@pytest.mark.parametrize("path", sorted((MODELS / kind / f) for kind in ("hardware", "workloads", "plans")
                                        for f in [p.name for p in (MODELS / kind).glob("*.toml")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_number_carries_a_source(path):
    for i, line in enumerate(path.read_text().splitlines(), 1):
        code, _, comment = line.partition("#")
        if "=" not in code or code.strip().startswith("["):
            continue
        key = code.split("=")[0].strip()
        if key in _NAMES:
            continue
        assert _CITED.search(comment), f"{path.name}:{i}: {key} has no source / assumption comment"


def test_expected_presets_ship():
    want = {"a100_sxm_40gb", "a100_sxm_80gb", "h100_sxm", "h800_sxm", "h200_sxm", "b200", "gb200_nvl72", "b300", "gb300_nvl72", "mi300x",
            "tpu_v5p", "tpu_v5e", "tpu_v4", "atlas_800t_a2", "cloudmatrix384"}
    assert want <= set(HARDWARE)
    assert {"gpt3_175b", "llama3_8b", "llama3_70b", "llama3_405b", "mixtral_8x7b", "deepseek_v3", "pangu_ultra_135b",
            "pangu_ultra_moe_718b"} <= set(WORKLOADS)


@pytest.mark.parametrize("name", HARDWARE)
def test_hardware_units_and_ranges(name):
    hw = load_hardware(name)
    assert 100e12 <= hw.peak_flop_per_s <= 1e16, "dense BF16 peak in FLOP/s (not TFLOP/s, not sparse)"
    if hw.peak_fp8_flop_per_s is not None:
        assert 1.5 <= hw.peak_fp8_flop_per_s / hw.peak_flop_per_s <= 2.5
    assert 16e9 <= hw.hbm_bytes <= 1e12
    assert 5e11 <= hw.hbm_bandwidth_bytes_per_s <= 2e13
    for lv in hw.levels:
        assert 1e8 <= lv.bandwidth_bytes_per_s <= 2e12, f"{lv.name}: one direction, bytes per second"
        assert 0 <= lv.latency_s <= 1e-3
    # the scale-out network is slower than the scale-up domain, per direction
    assert hw.levels[-1].bandwidth_bytes_per_s < hw.levels[0].bandwidth_bytes_per_s
    if hw.host_bandwidth_bytes_per_s is not None:
        # one direction, bytes per second: PCIe Gen4 x16 (32e9) up to NVLink-C2C
        assert 16e9 <= hw.host_bandwidth_bytes_per_s <= 1e12
        assert hw.host_bandwidth_bytes_per_s < hw.levels[0].bandwidth_bytes_per_s
    if hw.kernels is not None:
        k = hw.kernels
        for f in ("gemm_peak_fraction", "attention_peak_fraction", "memory_bandwidth_fraction",
                  "collective_bandwidth_fraction"):
            assert 0.1 <= getattr(k, f) <= 1.0
        assert 0 <= k.step_overhead_s <= 30


def test_per_direction_bandwidths_are_halved_from_the_sheets():
    # NVLink is sold as the sum of both directions: 600 / 900 / 1800 GB/s per GPU
    assert load_hardware("a100_sxm_80gb").levels[0].bandwidth_bytes_per_s == pytest.approx(300e9)
    assert load_hardware("h100_sxm").levels[0].bandwidth_bytes_per_s == pytest.approx(450e9)
    assert load_hardware("h800_sxm").levels[0].bandwidth_bytes_per_s == pytest.approx(200e9)
    assert load_hardware("b200").levels[0].bandwidth_bytes_per_s == pytest.approx(900e9)
    # NICs per direction: 200 / 400 Gb/s
    assert load_hardware("a100_sxm_80gb").levels[-1].bandwidth_bytes_per_s == pytest.approx(25e9)
    assert load_hardware("h100_sxm").levels[-1].bandwidth_bytes_per_s == pytest.approx(50e9)
    # host links are sold as the sum of both directions too: PCIe Gen5 x16 "128GB/s"
    assert load_hardware("h100_sxm").host_bandwidth_bytes_per_s == pytest.approx(64e9)
    assert load_hardware("a100_sxm_80gb").host_bandwidth_bytes_per_s == pytest.approx(32e9)
    # dense, not sparse: the H100's BF16 rate is half the datasheet's 1,979 TFLOP/s
    assert load_hardware("h100_sxm").peak_flop_per_s == pytest.approx(989.4e12)


@pytest.mark.parametrize("name", WORKLOADS)
def test_workloads_match_their_published_size(name):
    w = load_workload(name)
    pc = parameter_count(w)
    assert pc.total == pytest.approx(w.reported_total_params, rel=w.reported_params_tolerance)
    assert 1 <= w.seq_len <= 1 << 20


@pytest.mark.parametrize("name", PLANS)
def test_plans_evaluate(name):
    spec = load_plan(name)
    r = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    assert 0 < r.step_time < 1e3 and 0 < r.mfu < 1


def test_plan_files_resolve_references_relative_to_themselves(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.toml").write_text((MODELS / "workloads" / "llama3_8b.toml").read_text())
    (tmp_path / "plan.toml").write_text(
        'workload = "sub/w.toml"\nhardware = "h100_sxm"\ntp = 1\npp = 1\ndp = 8\nglobal_batch = 8\n')
    spec = load_plan(tmp_path / "plan.toml")
    assert spec.workload.name == "Llama 3 8B" and spec.name == "Llama 3 8B on 8 x NVIDIA H100 SXM5 80GB"
