"""Calibration: recovering known constants, refusing held-out runs, and the shipped fit."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import markovsim
from markovsim.training import (KernelModel, Run, calibrate, load_hardware, predict, runs_from_cases)

SUITE = Path(__file__).resolve().parents[2] / "models" / "cases" / "gpu_training_runs.toml"
FIT = runs_from_cases(SUITE, role="fit")
A100_FIT = [r for r in FIT if r.spec.hardware.name == "NVIDIA A100 SXM4 80GB"]


def test_the_suite_separates_fit_and_holdout():
    hold = runs_from_cases(SUITE, role="holdout")
    assert len(A100_FIT) == 18 and len(hold) >= 12
    assert not {r.name for r in FIT} & {r.name for r in hold}
    assert {r.spec.hardware.name for r in FIT} == {"NVIDIA A100 SXM4 80GB", "NVIDIA H100 SXM5 80GB", "NVIDIA B200",
                                                   "NVIDIA GB200 NVL72 (per GPU)", "NVIDIA GB300 NVL72 (per GPU)"}
    assert all(r.role == "holdout" for r in hold)
    with pytest.raises(markovsim.MarkovsimError, match="holdout"):
        calibrate(hold[:1], ["gemm_peak_fraction"])


def _synthetic(truth: KernelModel, runs):
    """The runs with the values the model gives under ``truth``."""
    return [dataclasses.replace(r, value=predict(r, truth)) for r in runs]


def test_recovers_known_constants_from_a_perturbed_start():
    truth = KernelModel(gemm_peak_fraction=0.72, gemm_traffic=1.0, attention_peak_fraction=0.5,
                        memory_bandwidth_fraction=0.65, collective_bandwidth_fraction=0.75, step_overhead_s=0.3)
    runs = _synthetic(truth, A100_FIT[::2])
    start = dataclasses.replace(truth, gemm_peak_fraction=0.55, memory_bandwidth_fraction=0.9, step_overhead_s=0.0)
    cal = calibrate(runs, ["gemm_peak_fraction", "memory_bandwidth_fraction", "step_overhead_s"], start=start)
    assert cal.success
    assert cal.values == pytest.approx((0.72, 0.65, 0.3), rel=1e-4, abs=1e-5)
    assert cal.rms_log_error < 1e-6 and not any(cal.on_bound)
    assert cal.kernels.gemm_traffic == truth.gemm_traffic  # not fitted: kept from the start
    assert np.all(np.asarray(cal.spread) < 1e-4)


def test_spread_reflects_noise_and_is_nan_when_underdetermined():
    truth = KernelModel(gemm_peak_fraction=0.7, gemm_traffic=0.5)
    runs = _synthetic(truth, A100_FIT)
    noise = np.exp(np.random.default_rng(3).normal(0, 0.03, len(runs)))  # 3 % log-normal scatter
    noisy = [dataclasses.replace(r, value=r.value * z) for r, z in zip(runs, noise)]
    cal = calibrate(noisy, ["gemm_peak_fraction"], start=truth)
    # the estimate lies within 4 standard errors of the truth, and the error is about 3 %
    assert abs(cal.values[0] - 0.7) < 4 * cal.spread[0]
    assert 0.015 < cal.rms_log_error < 0.05
    one = calibrate(noisy[:1], ["gemm_peak_fraction"], start=truth)
    assert np.isnan(one.spread[0])


def test_a_constant_no_run_depends_on_is_not_called_fitted():
    """The A100 fit runs are BF16 without flash attention: the FP8 and attention fractions
    do not enter any prediction (a finite difference of each leaves every run unchanged,
    checked here directly). The optimiser still converges, but the calibration must not say
    success, must mark those constants not identified, and must keep the GEMM fraction's
    own fit and spread (the one-constant fit's)."""
    base = A100_FIT[0].spec.hardware.kernels
    for name in ("fp8_gemm_peak_fraction", "attention_peak_fraction"):
        moved = dataclasses.replace(base, **{name: 0.9})
        assert all(predict(r, moved) == predict(r, base) for r in A100_FIT[:4])
    alone = calibrate(A100_FIT, ["gemm_peak_fraction"])
    both = calibrate(A100_FIT, ["gemm_peak_fraction", "fp8_gemm_peak_fraction", "attention_peak_fraction"])
    assert alone.success and alone.identified == (True,) and alone.rank == 1
    assert not both.success and both.identified == (True, False, False) and both.rank == 1
    assert both.values[0] == pytest.approx(alone.values[0], abs=1e-6)
    assert both.spread[0] == pytest.approx(alone.spread[0], rel=1e-6) and np.isnan(both.spread[1:]).all()
    assert "no run's prediction depends on it" in both.why_not("fp8_gemm_peak_fraction")
    assert both.why_not("gemm_peak_fraction") == ""
    assert "NOT identified" in both.table() and "NOT identified" not in alone.table()


def test_more_constants_than_runs_are_not_identified():
    """One run cannot separate two constants that both move its step time: the fit
    reproduces the run exactly (residual 0) along a whole line of pairs, so a zero residual
    is no proof: not success, both flagged, rank 1."""
    one = calibrate(A100_FIT[:1], ["gemm_peak_fraction", "step_overhead_s"])
    assert one.rms_log_error < 1e-6
    assert not one.success and one.identified == (False, False) and one.rank == 1
    assert "1 independent direction for 2 constants" in one.why_not("step_overhead_s")
    # two runs of different sizes separate them: each is identified (the fit itself may sit anywhere)
    two = calibrate([A100_FIT[0], A100_FIT[-1]], ["gemm_peak_fraction", "step_overhead_s"])
    assert two.rank == 2 and two.identified == (True, True)


def test_bad_calls_name_the_problem():
    with pytest.raises(markovsim.MarkovsimError, match="at least one"):
        calibrate([], ["gemm_peak_fraction"])
    with pytest.raises(markovsim.MarkovsimError, match="distinct names"):
        calibrate(A100_FIT[:2], ["gemm_speed"])
    with pytest.raises(markovsim.MarkovsimError, match="one accelerator per fit"):
        calibrate(FIT, ["gemm_peak_fraction"])
    with pytest.raises(markovsim.MarkovsimError, match="positive"):
        calibrate([dataclasses.replace(A100_FIT[0], value=0.0)], ["gemm_peak_fraction"])


def test_the_shipped_a100_constants_are_the_fit():
    """The preset's kernel constants are what calibrate gives on the suite's fit runs (not
    typed in): refitting from the defaults lands on them."""
    hw = load_hardware("a100_sxm_80gb")
    names = ["gemm_peak_fraction", "gemm_traffic", "memory_bandwidth_fraction", "collective_bandwidth_fraction",
             "step_overhead_s"]
    cal = calibrate(A100_FIT, names, start=KernelModel())
    for n, v in zip(names, cal.values):
        assert getattr(hw.kernels, n) == pytest.approx(v, rel=2e-3, abs=2e-3), n


H100_FP8_FIT = [r for r in FIT if r.spec.hardware.name == "NVIDIA H100 SXM5 80GB" and r.spec.plan.precision.value == "fp8"]


def test_the_fp8_fraction_is_recovered_and_the_shipped_value_is_the_fit():
    """Synthetic FP8 runs made with a known fraction give it back from an unfitted start
    (0: the fit starts from the BF16 fraction); on the suite's FP8 fit runs the fit lands on
    the preset's value."""
    assert len(H100_FP8_FIT) == 7
    hw = load_hardware("h100_sxm")
    truth = dataclasses.replace(hw.kernels, fp8_gemm_peak_fraction=0.5)
    runs = _synthetic(truth, H100_FP8_FIT[:4])
    cal = calibrate(runs, ["fp8_gemm_peak_fraction"], start=dataclasses.replace(truth, fp8_gemm_peak_fraction=0.0))
    assert cal.values[0] == pytest.approx(0.5, rel=1e-4) and cal.rms_log_error < 1e-6
    shipped = calibrate(H100_FP8_FIT, ["fp8_gemm_peak_fraction"],
                        start=dataclasses.replace(hw.kernels, fp8_gemm_peak_fraction=0.0))
    assert hw.kernels.fp8_gemm_peak_fraction == pytest.approx(shipped.values[0], abs=2e-3)
    for other in ("h800_sxm", "h200_sxm"):  # the same die: the same fitted value
        assert load_hardware(other).kernels.fp8_gemm_peak_fraction == hw.kernels.fp8_gemm_peak_fraction


@pytest.mark.parametrize("preset", ["b200", "gb200_nvl72", "gb300_nvl72"])
def test_the_blackwell_fp8_fractions_are_their_one_fit_run(preset):
    """B200 / GB200: the FP8 GEMM fraction is what calibrate gives on the accelerator's one
    fit run (every other constant the H100's, stated as an assumption in the file)."""
    hw = load_hardware(preset)
    runs = [r for r in FIT if r.spec.hardware.name == hw.name]
    assert len(runs) == 1
    cal = calibrate(runs, ["fp8_gemm_peak_fraction"],
                    start=dataclasses.replace(hw.kernels, fp8_gemm_peak_fraction=0.0))
    assert hw.kernels.fp8_gemm_peak_fraction == pytest.approx(cal.values[0], abs=1e-3)
    h100 = load_hardware("h100_sxm").kernels
    for name in ("gemm_peak_fraction", "gemm_traffic", "memory_bandwidth_fraction",
                 "collective_bandwidth_fraction", "step_overhead_s"):
        assert getattr(hw.kernels, name) == getattr(h100, name), name
    # Blackwell Ultra (GB300) runs attention 1.35x as fast (doubled SFU throughput, NVIDIA's
    # measured gain): the H100's fraction scaled, not fitted
    gain = 1.35 if preset == "gb300_nvl72" else 1.0
    assert hw.kernels.attention_peak_fraction == pytest.approx(h100.attention_peak_fraction * gain, rel=1e-12)


def test_the_tpu_v5p_gemm_fraction_is_its_one_fit_run():
    """TPU v5p: the GEMM fraction is what calibrate gives on the TPU suite's one fit run
    (MaxText 32B); every other constant is the A100 fit's, an assumption stated in the file,
    except the attention fraction (the A100's FlashAttention-2 figure)."""
    suite = SUITE.parent / "tpu_training_runs.toml"
    runs = [r for r in runs_from_cases(suite, role="fit") if "v5p" in r.name]
    hold = [r for r in runs_from_cases(suite, role="holdout") if "v5p" in r.name]
    assert len(runs) == 1 and len(hold) == 15  # seven single-slice rows, eight two-slice ones
    assert not {r.name for r in runs} & {r.name for r in hold}
    hw = load_hardware("tpu_v5p")
    cal = calibrate(runs, ["gemm_peak_fraction"], start=dataclasses.replace(hw.kernels, gemm_peak_fraction=0.5))
    assert cal.success and hw.kernels.gemm_peak_fraction == pytest.approx(cal.values[0], abs=1e-3)
    a100 = load_hardware("a100_sxm_80gb").kernels
    for name in ("gemm_traffic", "attention_peak_fraction", "memory_bandwidth_fraction",
                 "collective_bandwidth_fraction", "step_overhead_s"):
        assert getattr(hw.kernels, name) == getattr(a100, name), name


def test_the_b300_preset_is_the_b200_kernel_model():
    """No dense B300 run is published: its kernel constants are the B200 preset's, the
    fitted FP8 fraction included (the stated assumption), but for Blackwell Ultra's faster
    attention, and no case fits them."""
    b300, b200 = load_hardware("b300").kernels, load_hardware("b200").kernels
    # except the attention fraction: Blackwell Ultra's doubled SFU throughput, NVIDIA's measured
    # 1.35x attention gain, as the GB300 preset
    assert b300.attention_peak_fraction == pytest.approx(1.35 * b200.attention_peak_fraction, rel=1e-12)
    assert b300.attention_peak_fraction == load_hardware("gb300_nvl72").kernels.attention_peak_fraction
    assert dataclasses.replace(b300, attention_peak_fraction=b200.attention_peak_fraction) == b200
    assert not [r for r in FIT if r.spec.hardware.name == load_hardware("b300").name]


TPU = SUITE.parent / "tpu_training_runs.toml"


def _v5e(role):
    return [r for r in runs_from_cases(TPU, role=role) if "v5e" in r.name and r.output == "tflops_per_gpu"]


def test_the_tpu_v5e_gemm_fraction_is_its_one_single_slice_fit_run():
    """TPU v5e: the GEMM fraction is what calibrate gives on the 1x row of the 16B
    calibration series; the other kernel constants are the v5p preset's (stated); the 32B,
    64B and 128B series are holdouts, never fitted."""
    fit, hold = _v5e("fit"), _v5e("holdout")
    assert len(fit) == 6 and len(hold) == 18 and all(" 16B " in r.name for r in fit)
    assert not any(" 16B " in r.name for r in hold)
    one = [r for r in fit if "on v5e-256" in r.name]
    hw = load_hardware("tpu_v5e")
    cal = calibrate(one, ["gemm_peak_fraction"], start=dataclasses.replace(hw.kernels, gemm_peak_fraction=0.5))
    assert cal.success and hw.kernels.gemm_peak_fraction == pytest.approx(cal.values[0], abs=1e-3)
    v5p = load_hardware("tpu_v5p").kernels
    assert dataclasses.replace(hw.kernels, gemm_peak_fraction=v5p.gemm_peak_fraction) == v5p


def test_the_tpu_v5e_dcn_latency_is_its_fit_on_the_16b_multi_slice_rows():
    """The DCN level's latency of the v5e preset: least squares on the log error of the five
    16B multi-slice rows (the replicas' all-reduce exposed: replica_overlap 0 in those
    cases), recomputed here; the v5p preset takes the same value (a stated assumption)."""
    from scipy.optimize import least_squares

    multi = [r for r in _v5e("fit") if "x v5e-256" in r.name]
    assert len(multi) == 5 and all(r.spec.efficiency.replica_overlap == 0.0 for r in multi)

    def residuals(x):
        out = []
        for r in multi:
            hw = r.spec.hardware
            levels = hw.levels[:-1] + (dataclasses.replace(hw.levels[-1], latency_s=x[0] * 1e-3),)
            spec = dataclasses.replace(r.spec, hardware=dataclasses.replace(hw, levels=levels))
            out.append(np.log(predict(dataclasses.replace(r, spec=spec)) / r.value))
        return out

    sol = least_squares(residuals, [0.1], bounds=([0.0], [10.0]))
    assert sol.success and np.sqrt(np.mean(sol.fun ** 2)) < 0.02
    assert load_hardware("tpu_v5e").levels[-1].latency_s == pytest.approx(sol.x[0] * 1e-3, rel=0.01)
    assert load_hardware("tpu_v5p").levels[-1].latency_s == load_hardware("tpu_v5e").levels[-1].latency_s
