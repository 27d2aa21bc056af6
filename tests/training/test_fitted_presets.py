"""Every kernel constant a preset calls fitted is its fit, recomputed here: ``calibrate`` on the
fit runs the preset's comment names gives the shipped value (to the four decimals the files
carry). A model change that moves a fit fails here until the presets are refitted on their
own fit runs, so a constant cannot silently go stale (it was done by hand until 2026-12-06,
when the flash-attention backward correction moved seven of them). The presets that carry
another's constants (H800 and H200 the H100's, B300 the B200's, the Blackwell BF16 GEMM
fraction the H100's, A100 40GB the 80GB's, TPU v4 the v5p's) are checked to carry them."""

import dataclasses
from pathlib import Path

import pytest

from markovsim.training import KernelModel, calibrate, load_hardware, runs_from_cases

CASES = Path(__file__).resolve().parents[2] / "models" / "cases"
GPU = runs_from_cases(CASES / "gpu_training_runs.toml", role="fit")
TPU = runs_from_cases(CASES / "tpu_training_runs.toml", role="fit")

#: preset -> (its fit runs, the constants fitted on them); the runs as each preset file names them
FITS = {
    "a100_sxm_80gb": ([r for r in GPU if "A100" in r.spec.hardware.name],
                      ["gemm_peak_fraction", "gemm_traffic", "memory_bandwidth_fraction",
                       "collective_bandwidth_fraction", "step_overhead_s"]),
    "h100_sxm": ([r for r in GPU if r.name.startswith("Llama 3 2024 Table 4")], ["gemm_peak_fraction"]),
    "h100_sxm/fp8": ([r for r in GPU if r.name.startswith("NeMo 24.07")], ["fp8_gemm_peak_fraction"]),
    "b200": ([r for r in GPU if r.spec.hardware.name == "NVIDIA B200"], ["fp8_gemm_peak_fraction"]),
    "gb200_nvl72": ([r for r in GPU if "GB200" in r.spec.hardware.name], ["fp8_gemm_peak_fraction"]),
    "gb300_nvl72": ([r for r in GPU if "GB300" in r.spec.hardware.name], ["fp8_gemm_peak_fraction"]),
    "tpu_v5p": ([r for r in TPU if "v5p" in r.spec.hardware.name], ["gemm_peak_fraction"]),
    "tpu_v5e": ([r for r in TPU if "v5e" in r.spec.hardware.name and " on v5e-256 " in r.name],
                ["gemm_peak_fraction"]),
}


@pytest.mark.parametrize("preset", list(FITS))
def test_a_fitted_constant_is_its_fit(preset):
    runs, params = FITS[preset]
    assert runs and all(r.role == "fit" for r in runs)
    assert {r.spec.hardware.name for r in runs} == {load_hardware(preset.split("/")[0]).name}
    shipped = load_hardware(preset.split("/")[0]).kernels
    # the fitted constants start from the library's defaults, not from the shipped values (the
    # fit must find them); the others are the preset's
    start = dataclasses.replace(shipped, **{p: getattr(KernelModel(), p) for p in params})
    cal = calibrate(runs, params, start=start)
    assert cal.success
    for name, value in zip(params, cal.values):
        assert getattr(shipped, name) == pytest.approx(value, abs=6e-5), (preset, name, value)


@pytest.mark.parametrize("carrier, source, names", [
    ("h800_sxm", "h100_sxm", ["gemm_peak_fraction", "fp8_gemm_peak_fraction"]),
    ("h200_sxm", "h100_sxm", ["gemm_peak_fraction", "fp8_gemm_peak_fraction"]),
    ("b200", "h100_sxm", ["gemm_peak_fraction"]),
    ("gb200_nvl72", "h100_sxm", ["gemm_peak_fraction"]),
    ("gb300_nvl72", "h100_sxm", ["gemm_peak_fraction"]),
    ("b300", "h100_sxm", ["gemm_peak_fraction"]),
    ("b300", "b200", ["fp8_gemm_peak_fraction"]),
    ("a100_sxm_40gb", "a100_sxm_80gb", ["gemm_peak_fraction", "gemm_traffic", "memory_bandwidth_fraction",
                                        "collective_bandwidth_fraction", "step_overhead_s"]),
    ("tpu_v4", "tpu_v5p", ["gemm_peak_fraction"]),
])
def test_a_carried_constant_is_the_fitted_one(carrier, source, names):
    a, b = load_hardware(carrier).kernels, load_hardware(source).kernels
    assert {n: getattr(a, n) for n in names} == {n: getattr(b, n) for n in names}
