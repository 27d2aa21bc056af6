"""``markovsim repro``: run the reproductions of the published figures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._errors import SpecError
from .._grid import check_output
from .._lazy import lazy_module
from ._speed import progress_callback

repro = lazy_module("markovsim.repro")  # imported when the command runs, not for every command

HELP = "run the reproductions of the published figures"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("repro", help=HELP)
    p.add_argument("ids", nargs="*", help="seed ids (e.g. S-HW-1), script names, or 'all' (default)")
    p.add_argument("--list", action="store_true", help="list the reproduction scripts and their ids")
    p.add_argument("--out", default="repro_out", help="output directory (default: repro_out); refused if it "
                                                      "holds anything, unless --force")
    p.add_argument("--force", action="store_true", help="write into an output directory that is not empty")
    return p


def run(args) -> int:
    if args.list:
        for name, ids in repro.script_ids().items():
            print(f"{name:28s} {' '.join(ids)}")
        return 0
    out = Path(args.out)
    check_output(out, force=args.force, what="--out")
    selection = args.ids or ["all"]
    try:
        with progress_callback(args, unit="script", desc="repro") as progress:
            rows = repro.run_reproductions(selection, out, log=(lambda m: print(m, file=sys.stderr)), progress=progress)
        validations = _validations(out) if "all" in selection else []
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "matplotlib":
            raise SpecError("the reproductions draw their plots with matplotlib, which is not installed; "
                            "pip install 'markovsim[plot]'") from None
        raise
    results, report = repro.write_report(rows, out, validations=validations)
    print(repro.format_table(rows))
    for title, v, _ in validations:
        print(f"\nvalidation, {title}:\n{v.summary()}")
    print(f"\nwrote {results} and {report}")
    return 0


#: the shipped case suites that ``markovsim repro all`` runs and reports: (file, title)
VALIDATION_SUITES = (("gpu_training_runs.toml", "published GPU training runs (issue 12)"),
                     ("tpu_training_runs.toml", "published TPU v5p and v5e training runs (MaxText)"),
                     ("mpt_training_runs.toml", "published MPT training runs (MosaicML llm-foundry, PyTorch FSDP; "
                                                "never calibrated on)"),
                     ("automodel_training_runs.toml", "published NeMo AutoModel pre-training runs (PyTorch FSDP2 "
                                                      "on H100, MoE with DeepEP; never calibrated on)"),
                     ("reports_training_runs.toml", "published pre-training runs from model reports (BLOOM, GLM-130B, "
                                                    "LLaMA, Nemotron-4 on A100 and H100, PaLM on TPU v4; never "
                                                    "calibrated on)"),
                     ("longcontext_training_runs.toml", "published long-context runs with context parallelism (NeMo, "
                                                        "Llama 2 7B on H100 and Llama 3 8B on B200, 4K-1M tokens; "
                                                        "never calibrated on)"),
                     ("torchtitan_h100_training_runs.toml", "published torchtitan runs on H100 (FSDP2, TP, PP, CP, "
                                                            "torch.compile, Float8; 8-512 GPUs of a 500 W part; "
                                                            "never calibrated on)"))


def _validations(out: Path) -> list:
    """Run the shipped validation suites; one error plot each, into ``out``."""
    from matplotlib.figure import Figure   # no pyplot: the process's backend is left alone

    from .. import validate
    from .._io import shipped_dir
    from ..plotting import plot_validation_errors

    done = []
    for name, title in VALIDATION_SUITES:
        report = validate.validate_cases(shipped_dir("models") / "cases" / name)
        fig = Figure()
        ax = fig.add_subplot()
        plot_validation_errors(report, ax=ax)
        ax.set_title(f"{name}: predicted against reported")
        fig.tight_layout()
        png = f"validation_{Path(name).stem}.png"
        fig.savefig(out / png, dpi=120)
        done.append((title, report, png))
    return done
