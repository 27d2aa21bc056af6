"""``markovsim validate``: run validation cases, predicted against reported."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from .._errors import SpecError
from .._io import resolve
from .._lazy import lazy_module
from . import _common as c
from ._speed import progress_callback

validate = lazy_module("markovsim.validate")  # imported when the command runs, not for every command
#: the built-in case kinds (``markovsim.validate.MODEL_KINDS``, held equal by tests/test_speed_paths.py)
CASE_KINDS = ("goodput", "infer", "train")

HELP = "run validation cases: predicted against reported, with errors and a summary"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "validate", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent(f"""\
            Run every case of a case file (a model plus an [expect] table of reported outputs
            and a tolerance; see docs/how-to/validation-cases.md and models/cases/example.toml)
            and print predicted against reported, the relative error and a summary (median and
            maximum error). Cases with role = "fit" are listed apart (never evidence); cases
            with role = "holdout" are also summarised on their own; outputs with a tolerance
            in points ("2 points") are summarised by their error in points; a [targets] table
            (median, max, points) ends the summary with a verdict per target; a [calibrate]
            table (params = [...]) fits those kernel constants on the fit cases first;
            [case.unpublished] sweeps an input the source does not publish and shows the band.
            --plot draws predicted against reported (each row's error when the outputs differ).

            Case kinds: {', '.join(CASE_KINDS)}. References in a case (cluster =
            "x.toml", model_file) are relative to the case file; bare names are the shipped
            presets. Exit code: 0 when every output is within its tolerance, 1 when some
            output is not, 2 when the case file itself is wrong."""),
        epilog="example: markovsim validate example   (the shipped models/cases/example.toml)")
    p.add_argument("cases", metavar="CASES.toml", nargs="?",
                   help="case file, or a bare name in models/cases/ (optional with --calibrate)")
    p.add_argument("--calibrate", metavar="CALIBRATION.toml",
                   help="first fit a cluster's fault catalogue to an incident or fault log (a [calibrate] "
                        "table: see markovsim.validate._calibration) and print the fitted values with "
                        "their intervals and the checks against the fitted model, fitted outputs marked "
                        "'(fitted output)'; fails when a check that was not fitted fails")
    c.add_common(p, sets=False)
    return p


def run(args) -> int:
    calibration = None
    if args.calibrate:
        calibration = validate.run_calibration(args.calibrate)
        if not args.json:
            print(calibration.format_table())
    if args.cases is None:
        if calibration is None:
            raise SpecError("validate: expected a case file (CASES.toml), --calibrate CALIBRATION.toml, or both")
        if args.json:
            c.print_json(calibration.to_dict())
        return 0 if calibration.passed else 1
    if calibration is not None and not args.json:
        print()
    with progress_callback(args, unit="case", desc="validate") as progress:
        report = validate.validate_cases(resolve(args.cases, folder="cases"), progress=progress)
    if args.csv:
        head = ("case", "role", "kind", "output", "reported", "predicted", "error", "tolerance", "passed", "source",
                "band_low", "band_high", "sweep_admits", "sweep")
        c.write_csv(args.csv, head, [(r.case, r.role, r.kind, r.output, r.reported, r.predicted, r.error,
                                      r.tolerance, r.passed, r.source, r.band_low, r.band_high,
                                      "" if r.sweep_admits is None else r.sweep_admits, r.sweep)
                                     for r in report.rows], force=args.force)
    if args.plot:
        def draw(ax):
            from ..plotting import plot_validation, plot_validation_errors

            # outputs of several kinds (seconds, MFU, TFLOP/s) do not share one axis: draw
            # each row's error instead of predicted against reported
            mixed = len({r.output for r in report.rows}) > 1
            (plot_validation_errors if mixed else plot_validation)(report, ax=ax)
            ax.set_title(Path(report.path).name)

        c.save_plot(args.plot, draw, force=args.force)
    passed = report.passed and (calibration is None or calibration.passed)
    if args.json:
        payload = report.to_dict()
        payload["passed"] = report.passed
        if calibration is not None:
            payload["calibration"] = calibration.to_dict()
        c.print_json(payload)
    else:
        print(report.format_table())
    return 0 if passed else 1
