"""docs/background/accuracy.md quotes the shipped suites: its table and its linearity line
are recomputed here from `validate_cases`, so a model change cannot leave the page stale."""

import statistics
from pathlib import Path

import numpy as np
import pytest

from markovsim.training import runs_from_cases
from markovsim.training._evidence import SUITES as EVIDENCE_SUITES

from ._shipped import validated

ROOT = Path(__file__).resolve().parents[2]
SUITES = [ROOT / "models" / "cases" / f"{s}_training_runs.toml" for s in EVIDENCE_SUITES]
PAGE = (ROOT / "docs" / "background" / "accuracy.md").read_text()


#: case-name prefix -> family, where the prefix alone decides (checked in order, first match)
_PREFIXES = (
    (("BLOOM 2022", "GLM-130B 2022", "LLaMA 2023"),
     "A100, model reports (BLOOM-176B, GLM-130B, LLaMA-65B), step time, HFU, tokens/s"),
    ("NeMo long sequence: Llama 2 7B",
     "H100 FP8, NeMo 24.03 long sequence (Llama 2 7B, 4K-1M tokens, CP up to 32), TFLOP/s"),
    ("NeMo long sequence: Llama 3 8B",
     "B200 FP8, NeMo 25.04 long sequence (Llama 3 8B, 8K-1M tokens, CP up to 16), TFLOP/s"),
    ("PaLM 2022", "TPU v4, model report (PaLM 540B, 6,144 chips), tokens/s"),
    ("MegaScale 2024 Table 2", "A100, Megatron-LM (MegaScale 175B, 256-12,288 GPUs), step time"),
    ("MegaScale 2024 Figure 9", "A100, Megatron-LM (MegaScale 530B, 2,240-11,200 GPUs), MFU"),
    ("DGXC dev: Grok-1", "H100, Grok-1 314B MoE (DGXC, 8 experts, EP 8, 512-2,048 GPUs), step time"),
    ("DGXC", "H100 BF16 and FP8, NVIDIA DGXC recipes (NeMo, weak scaling to 2,304 GPUs), step time"),
    ("torchtitan H100", "H100 96GB at 500 W, torchtitan (FSDP2, TP, PP, CP; Llama 3.1 8B-405B, 8-512 GPUs), "
                        "tokens/s"),
    ("torchtitan", "A100, torchtitan FSDP2 (Llama 2 and 3, 64 GPUs), tokens/s"),
    ("MT-NLG", "A100, Megatron-DeepSpeed (MT-NLG 530B), step time"),
    ("Llama 3", "H100, Llama 3 405B (8K and 131K context), TFLOP/s"),
    ("DeepSeek-V3 2024", "H800, DeepSeek-V3 (FP8, DualPipe), tokens/s"),
    ("NeMo 24.07", "H100 FP8, NeMo 24.07 (dense), tokens/s"),
)


def _family(case: str) -> str:
    if case.startswith("Nemotron-4") and " report: " in case:
        return "H100, Nemotron-4 15B and 340B reports (NeMo pre-training, 768-6,144 GPUs), step time"
    if case.startswith("AutoModel:"):
        return ("H100 BF16, NeMo AutoModel (PyTorch FSDP2), dense Llama 3 70B, tokens/s" if "Llama" in case else
                "H100 BF16, NeMo AutoModel (PyTorch FSDP2, DeepEP, synthetic balanced gate), MoE, tokens/s")
    if case.startswith("MPT "):
        kind = next(k for k in ("A100 40GB", "A100 80GB", "H100 80GB") if k in case)
        return (f"{kind}{' ' + case.rsplit(', ', 1)[-1] if kind.startswith('H100') else ''}, MPT (llm-foundry, "
                f"PyTorch FSDP, Triton flash attention), tokens/s")
    family = next((f for prefix, f in _PREFIXES if case.startswith(prefix)), None)
    if family is not None:
        return family
    if case.startswith("MaxText"):
        if "v5e" in case:
            return f"TPU v5e, MaxText, {'one slice' if ' on v5e' in case else '2-32 slices'}, TFLOP/s"
        return f"TPU v5p, MaxText, {'two slices' if ' 2x ' in case else 'one slice'}, TFLOP/s"
    if "DeepSeek" in case or any(f"Qwen3-235B-A22B on 256 {s}," in case for s in ("GB200", "GB300", "H100")):
        return "NVIDIA, large MoE (DeepSeek-V3; Qwen3-235B with EP 16-32), tokens/s"
    if "Qwen3" in case or "gpt-oss" in case:
        return "NVIDIA, small MoE (Qwen3-30B-A3B, gpt-oss-120b) and Qwen3-235B with EP 8, tokens/s"
    if "H100" in case:
        return "H100 FP8, Megatron-Bridge 25.11/26.02 (dense), tokens/s"
    return "B200/GB200/GB300 FP8, Megatron-Bridge 25.11/26.02 (dense), tokens/s"


def test_the_accuracy_page_is_the_suites():
    rows = [r for s in SUITES for r in validated(s).rows if r.role == "holdout"]
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r.output != "linearity":
            groups.setdefault(_family(r.case), []).append(100 * r.error)
    for family, errors in groups.items():
        a = [abs(e) for e in errors]
        line = (f"| {family} | {len(errors)} | {sum(x <= 10 for x in a)} | {statistics.median(a):.1f} % | "
                f"{min(errors):+.1f} % to {max(errors):+.1f} % |")
        assert line in PAGE, line
    assert PAGE.count("\n| ") - 1 == len(groups)  # header + one line per family, no stale extra rows
    gaps = [100 * (r.predicted - r.reported) for r in rows if r.output == "linearity"]
    said = (f"({len(gaps)} published scale-ups in the suites): within 2 points in "
            f"{sum(abs(g) <= 2 for g in gaps)}, the model's")
    assert said in PAGE
    assert f"median gap {statistics.median(abs(g) for g in gaps):.1f} points" in PAGE


def test_the_same_plan_pairs_on_the_page():
    """Holdout rows the model cannot tell apart (identical workload, hardware, plan and
    efficiency, same output): the page quotes how many, how far their reports differ, and
    the least worst error one number per plan can have, (b - a) / (b + a) for reports a < b
    (reached at p = 2ab / (a + b); checked here by brute force over p)."""
    groups: dict[tuple, list[float]] = {}
    for run in runs_from_cases(SUITES[0], role="holdout"):
        s = run.spec
        key = (repr(s.workload), repr(s.hardware), repr(s.plan), repr(s.efficiency), run.output)
        groups.setdefault(key, []).append(run.value)
    pairs = [v for v in groups.values() if len(v) > 1]
    spread = sorted(100 * (max(v) / min(v) - 1) for v in pairs)
    floor = sorted(100 * (max(v) - min(v)) / (max(v) + min(v)) for v in pairs)
    for v, f in zip(sorted(pairs, key=lambda v: (max(v) - min(v)) / (max(v) + min(v))), floor):
        p = np.linspace(min(v), max(v), 200_001)
        worst = np.max([np.abs(p / x - 1) for x in v], axis=0)
        assert 100 * worst.min() == pytest.approx(f, abs=1e-3)
    for said in (f"{len(pairs)} pairs of holdout rows",
                 f"differ by {spread[0]:.1f} to {spread[-1]:.1f} % (median {statistics.median(spread):.1f} %)",
                 f"at least {floor[0]:.1f} to {floor[-1]:.1f} % off"):
        assert said in " ".join(PAGE.split()), said


def test_the_median_verdicts_on_the_page():
    """The page's medians and their intervals are the suites' median targets' (the interval
    from markovsim.validate, tested against the binomial in tests/test_validate_harness.py)."""
    text = " ".join(PAGE.split())
    for suite, kind in zip(SUITES, ("GPU", "TPU")):
        report = validated(suite)
        v = next(t for t in report.target_verdicts() if t["target"] == "median")
        n = sum(1 for r in report.rows if r.role == "holdout" and not r.points)
        lo, hi = (100 * x for x in v["interval"])
        said = f"{100 * v['measured']:.2f} %" + (" (95 % distribution-free interval " if kind == "GPU" else " (")
        assert f"{n} {kind} holdout outputs" in text or f"{n} {kind} ones" in text
        assert f"{said}{lo:.2f}-{hi:.2f} %)" in text, (said, lo, hi)
        assert v["settled"] is False and "neither verdict" in text
        # the page says each suite's verdict as computed: met on GPUs, missed on TPUs
        if kind == "GPU":
            assert ("met on GPUs" in text) == bool(v["met"])
        else:
            assert ("missed on TPUs" in text) == (not v["met"])


def test_the_mpt_suite_on_the_page():
    """The never-shown suite's paragraph quotes its current verdict: holdout count, median and
    interval, rows within tolerance and the maximum, all from validate_cases."""
    text = " ".join(PAGE.split())
    report = validated(SUITES[2])
    rows = [r for r in report.rows if r.role == "holdout"]
    v = next(t for t in report.target_verdicts() if t["target"] == "median")
    lo, hi = (100 * x for x in v["interval"])
    said = (f"the {len(rows)} MPT holdout outputs give {100 * v['measured']:.2f} % ({lo:.2f}-{hi:.2f} %), "
            f"{sum(r.passed for r in rows)} within 10 %, max {100 * max(abs(r.error) for r in rows):.2f} %")
    assert said in text, said


def test_the_automodel_suite_on_the_page():
    """The fourth suite's paragraph quotes its current verdict (holdout count, within 10 %,
    median and maximum), from validate_cases."""
    text = " ".join(PAGE.split())
    rows = [r for r in validated(SUITES[3]).rows if r.role == "holdout"]
    errors = sorted(100 * abs(r.error) for r in rows)
    said = (f"the {len(rows)} AutoModel holdout outputs give {sum(r.passed for r in rows)} within 10 %, median "
            f"{statistics.median(errors):.2f} %, max {errors[-1]:.2f} %")
    assert said in text, said


def test_the_reports_suite_on_the_page():
    """The fifth suite's paragraph quotes its current verdict (holdout outputs, within 10 %,
    median and maximum, and its linearity rows), from validate_cases."""
    text = " ".join(PAGE.split())
    rows = [r for r in validated(SUITES[4]).rows if r.role == "holdout"]
    errors = sorted(100 * abs(r.error) for r in rows if r.output != "linearity")
    gaps = [100 * (r.predicted - r.reported) for r in rows if r.output == "linearity"]
    said = (f"the {len(errors)} report holdout outputs give {sum(e <= 10 for e in errors)} within 10 %, median "
            f"{statistics.median(errors):.2f} %, max {errors[-1]:.2f} %, and {sum(abs(g) <= 2 for g in gaps)} of "
            f"its {len(gaps)} linearities within 2 points")
    assert said in text, said
