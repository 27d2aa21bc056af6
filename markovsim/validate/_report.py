"""The result of running a case file: one row per reported output, summaries by role."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._errors import InvalidParameterError

__all__ = ["CaseResult", "ValidationReport", "ROLES"]

#: what a case is for: ``fit`` (its figures calibrated an input: listed apart, never evidence),
#: ``holdout`` (kept out of the calibration: the test of it, summarised on its own) and
#: ``check`` (an ordinary comparison, the default)
ROLES = ("check", "holdout", "fit")


@dataclasses.dataclass(frozen=True)
class CaseResult:
    """One reported output of one case against the model's prediction.

    Attributes:
        case: the case's name.
        kind: the case's kind.
        output: the output's name.
        reported: the reported value (SI units).
        predicted: the model's value (SI units).
        error: relative error (predicted - reported) / |reported| (NaN when reported is 0).
        abs_error: |predicted - reported| (SI units).
        tolerance: the tolerance as written (relative or absolute).
        passed: whether the prediction is within tolerance.
        source: where the reported value comes from (as written in the case).
        role: ``"check"``, ``"holdout"`` or ``"fit"`` (see :data:`ROLES`).
        points: the tolerance is in percentage points of a share (``"2 points"``): the row
            is summarised by its error in points, apart from the relative errors.
        band_low, band_high: the smallest and largest prediction over the case's swept
            unpublished inputs (the case's own value included; NaN without a sweep).
        sweep_admits: whether some point of that sweep lies within tolerance (None without a
            sweep): what an unpublished input allows, never evidence.
        sweep_points: the feasible points of the sweep (the case's own value included).
        sweep_infeasible: combinations left out because the kind marked them infeasible.
        sweep: the swept inputs and their values, as text.
        note: a flag on the prediction (e.g. the case's plan exceeds the memory the model
            computes: the prediction assumes a plan the model says cannot run); "" if none.
    """

    case: str
    kind: str
    output: str
    reported: float
    predicted: float
    error: float
    abs_error: float
    tolerance: str
    passed: bool
    source: str = ""
    role: str = "check"
    points: bool = False
    band_low: float = math.nan
    band_high: float = math.nan
    sweep_admits: bool | None = None
    sweep_points: int = 0
    sweep_infeasible: int = 0
    sweep: str = ""
    note: str = ""


#: what each target of a file's ``[targets]`` measures
_TARGET_NAMES = {"median": "median relative error", "max": "largest relative error",
                 "points": "largest error of shares in points"}


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %" if math.isfinite(x) else "n/a"


def _clean(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _errors(rows) -> np.ndarray:
    e = np.array([abs(r.error) for r in rows if not r.points], dtype=float)
    return e[np.isfinite(e)]


def median_interval(values, level: float = 0.95) -> tuple[float, float] | None:
    """Distribution-free interval for the median of the population ``values`` are drawn
    from (independent draws assumed): the order statistics :math:`x_{(l)} \\le m \\le
    x_{(n+1-l)}`, whose coverage is :math:`1 - 2 P(B \\le l - 1)`, :math:`B \\sim
    \\mathrm{Binomial}(n, 1/2)`, whatever the distribution; :math:`l` is the largest index
    with coverage at least ``level``. ``None`` when there are too few values for that level
    (under 6 for 95 %)."""
    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    n = x.size
    if not 0.0 < level < 1.0:
        raise InvalidParameterError(f"level={level!r}: expected a probability strictly between 0 and 1")
    tail = (1.0 - level) / 2.0
    cdf, k = 0.0, -1  # cdf = P(B <= k); the largest k with P(B <= k) <= tail
    for i in range(n + 1):  # binomial terms in log space (no overflow for large n)
        p = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2.0))
        if cdf + p > tail:
            break
        cdf, k = cdf + p, i
    if k < 0:
        return None
    lo = k + 1  # 1-based order statistic
    return float(x[lo - 1]), float(x[n - lo])


def _summary(rows) -> dict:
    """Counts over every row; the relative errors of the rows not in points, and the errors
    in points (|predicted - reported| x 100) of the rows in points."""
    e = _errors(rows)
    pts = np.array([100.0 * r.abs_error for r in rows if r.points], dtype=float)
    pts = pts[np.isfinite(pts)]
    in_points = [r for r in rows if r.points]
    swept = [r for r in rows if r.sweep_admits is not None]
    return {"n_swept": len(swept), "n_swept_admitted": sum(bool(r.sweep_admits) for r in swept),
            "n_swept_failed": sum(not r.passed for r in swept),
            "n_swept_failed_admitted": sum(bool(r.sweep_admits) and not r.passed for r in swept),
            "n": len(rows), "n_failed": sum(not r.passed for r in rows),
            "median_error": float(np.median(e)) if e.size else math.nan,
            "max_error": float(np.max(e)) if e.size else math.nan,
            "n_points": len(in_points), "n_points_failed": sum(not r.passed for r in in_points),
            "median_points": float(np.median(pts)) if pts.size else math.nan,
            "max_points": float(np.max(pts)) if pts.size else math.nan}


def _line(label: str, s: dict) -> str:
    n, failed = s["n"] - s["n_points"], s["n_failed"] - s["n_points_failed"]
    text = [] if n == 0 and s["n_points"] else [
        f"{label}{n - failed}/{n} outputs within tolerance; relative error: "
        f"median {_pct(s['median_error'])}, max {_pct(s['max_error'])}"]
    if s["n_points"]:
        k = s["n_points"]
        text.append(f"{label}{k - s['n_points_failed']}/{k} shares within tolerance in points; error: "
                    f"median {s['median_points']:.2f} points, max {s['max_points']:.2f} points")
    if s.get("n_swept"):
        text.append(f"{label}{s['n_swept']} outputs with swept unpublished inputs: {s['n_swept_admitted']} within "
                    f"tolerance at some point of the sweep ({s['n_swept_failed_admitted']} of the "
                    f"{s['n_swept_failed']} outside tolerance; a band, not evidence)")
    return "\n".join(text)


def _calibration_line(c: dict) -> str:
    values = ", ".join(f"{p} = {v:.4g} +- {s:.2g}{' (on a bound)' if b else ''}"
                       for p, v, s, b in zip(c["params"], c["values"], c["spread"], c["on_bound"]))
    why = [f"{p} NOT identified ({w})" for p, w in zip(c["params"], c.get("not_identified", ())) if w]
    if why:
        ok = "; " + "; ".join(why)
    else:
        ok = "" if c["success"] else "; the optimiser did not report convergence"
    runs = f"{c['runs']} run" + ("s" if c["runs"] != 1 else "")
    return (f"calibrated first on the fit cases: {c['hardware']}: {values} ({runs}, rms log error "
            f"{c['rms_log_error']:.4f}{ok})")


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _error_text(r: CaseResult) -> str:
    """The row's error as shown: in points for a share with a tolerance in points, else relative."""
    return f"{100 * (r.predicted - r.reported):+.2f} pt" if r.points else _pct(r.error)


def _band(r: CaseResult) -> str:
    """The band over the swept unpublished inputs, and whether some point of it is within
    tolerance ("" without a sweep)."""
    if r.sweep_admits is None:
        return ""
    combos = r.sweep_points - 1 + r.sweep_infeasible
    return (f"{r.band_low:.4g}..{r.band_high:.4g}, {'a point' if r.sweep_admits else 'no point'} within "
            f"tolerance ({r.sweep_points - 1}/{combos} points)")


def _table(rows) -> list[str]:
    head = ("case", "output", "reported", "predicted", "error", "tolerance", "result")
    body = [(r.case, r.output, f"{r.reported:.6g}", f"{r.predicted:.6g}",
             _error_text(r),
             r.tolerance, "ok" if r.passed else "FAIL") for r in rows]
    if any(r.sweep_admits is not None for r in rows):
        head = (*head, "unpublished inputs swept")
        body = [(*b, _band(r)) for b, r in zip(body, rows)]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    return lines + _notes(rows)


def _notes(rows) -> list[str]:
    """One line per case whose prediction carries a flag."""
    seen = {}
    for r in rows:
        if r.note:
            seen.setdefault(r.case, r.note)
    return [f"  flagged: {case}: {note}" for case, note in seen.items()]


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """Every case's outputs, predicted against reported, and summaries.

    The summary (``median_error``, ``max_error``, ``passed``...) covers the evidence: the
    ``check`` and ``holdout`` rows. ``fit`` rows (figures an input was calibrated on) are
    listed apart and never count as evidence; ``holdout`` rows are also summarised on their
    own (:meth:`role_summary`).

    Attributes:
        path: the case file.
        rows: one :class:`CaseResult` per reported output.
        targets: the accuracy the file states (``median``, ``max`` as ratios, ``points`` in
            shares); judged on the holdout rows, or the evidence when there are none.
        calibrations: the fits a ``[calibrate]`` table made before the cases ran, one dict
            per accelerator: ``hardware``, ``params``, ``values``, ``spread`` (standard
            errors), ``on_bound``, ``runs``, ``rms_log_error``, ``success``.
    """

    path: str
    rows: tuple[CaseResult, ...]
    targets: dict = dataclasses.field(default_factory=dict)
    calibrations: tuple = ()

    @property
    def evidence(self) -> tuple[CaseResult, ...]:
        """The rows that test the model: every role but ``fit``."""
        return tuple(r for r in self.rows if r.role != "fit")

    @property
    def errors(self) -> np.ndarray:
        """Absolute relative errors of the evidence rows where one is defined (rows with a
        tolerance in points excluded: they are summarised in points)."""
        return _errors(self.evidence)

    @property
    def median_error(self) -> float:
        """Median absolute relative error of the evidence (NaN when there is none)."""
        return _summary(self.evidence)["median_error"]

    @property
    def max_error(self) -> float:
        """Largest absolute relative error of the evidence (NaN when there is none)."""
        return _summary(self.evidence)["max_error"]

    @property
    def n_failed(self) -> int:
        """Rows outside their tolerance, fit rows included."""
        return sum(not r.passed for r in self.rows)

    @property
    def passed(self) -> bool:
        """Every output (fit rows included) within its tolerance."""
        return self.n_failed == 0

    def role_summary(self, role: str) -> dict:
        """The summary of the rows of one role: ``n``, ``n_failed``, ``median_error`` and
        ``max_error`` (relative, rows in points excluded); ``n_points``, ``n_points_failed``,
        ``median_points``, ``max_points`` (rows with a tolerance in points); ``n_swept``,
        ``n_swept_admitted``, ``n_swept_failed``, ``n_swept_failed_admitted`` (rows with swept
        unpublished inputs)."""
        return _summary([r for r in self.rows if r.role == role])

    def target_verdicts(self) -> list[dict]:
        """Each stated target against the measured value: ``{"target", "limit", "measured",
        "met", "rows"}`` (``met`` is None when no row measures it). Judged on the holdout rows,
        or on the evidence when the file has no holdout case."""
        rows = [r for r in self.rows if r.role == "holdout"] or list(self.evidence)
        s = _summary(rows)
        measured = {"median": s["median_error"], "max": s["max_error"], "points": s["max_points"] / 100.0}
        out = []
        for key, limit in self.targets.items():
            value = measured[key]
            interval = median_interval(_errors(rows)) if key == "median" else None
            out.append({"target": key, "limit": float(limit), "measured": _clean(value),
                        "met": None if not math.isfinite(value) else bool(value <= limit),
                        "interval": None if interval is None else list(interval),
                        "settled": None if interval is None else bool(not interval[0] <= limit <= interval[1]),
                        "rows": "holdout" if any(r.role == "holdout" for r in self.rows) else "evidence"})
        return out

    def summary(self) -> str:
        """How many outputs passed, median and maximum relative error (of the evidence; the
        holdout and fit rows each on their own line when there are any; shares with a
        tolerance in points on lines of their own), then each stated target with its verdict."""
        lines = [_calibration_line(c) for c in self.calibrations]
        lines.append(_line("", _summary(self.evidence)))
        if any(r.role == "holdout" for r in self.rows):
            lines.append(_line("holdout cases only: ", self.role_summary("holdout")))
        if any(r.role == "fit" for r in self.rows):
            lines.append(_line("fit cases (calibration, not evidence): ", self.role_summary("fit")))
        names = _TARGET_NAMES
        for v in self.target_verdicts():
            scale, unit = (100.0, " points") if v["target"] == "points" else (100.0, " %")
            got = "no row measures it" if v["met"] is None else (
                f"measured {scale * v['measured']:.2f}{unit}: {'met' if v['met'] else 'MISSED'}")
            if v["met"] is not None and v.get("interval") is not None:
                lo, hi = (scale * x for x in v["interval"])
                got += (f" (the median's 95 % distribution-free interval {lo:.2f}-{hi:.2f}{unit} "
                        + ("lies on one side of the target)" if v["settled"] else
                           "holds the target: not settled by these rows)"))
            lines.append(f"target ({v['rows']} rows): {names[v['target']]} <= {scale * v['limit']:g}{unit}; {got}")
        return "\n".join(lines)

    def format_table(self) -> str:
        """Plain-text tables of every row (fit cases apart) and the summary."""
        fit = [r for r in self.rows if r.role == "fit"]
        out = _table(self.evidence)
        if fit:
            out += ["", "fit cases (an input was calibrated on these figures; not evidence):", *_table(fit)]
        return "\n".join([*out, "", self.summary()])

    def to_markdown(self, *, plot: str | None = None) -> str:
        """A markdown section: the targets with their verdicts, the summary, and the rows
        (evidence first, fit rows apart), each with its source; ``plot`` embeds an image."""
        def table(rows) -> list[str]:
            swept = any(r.sweep_admits is not None for r in rows)
            out = ["| case | output | reported | predicted | error | tolerance | result |"
                   + (" unpublished inputs swept |" if swept else ""),
                   "|---|---|---|---|---|---|---|" + ("---|" if swept else "")]
            for r in rows:
                err = _error_text(r)
                band = (f" {_md(_band(r))}{' (' + _md(r.sweep) + ')' if r.sweep else ''} |" if swept else "")
                flag = " (flagged)" if r.note else ""
                out.append(f"| {_md(r.case)} | {r.output} | {r.reported:.6g} | {r.predicted:.6g} | {err} | "
                           f"{_md(r.tolerance)} | {'ok' if r.passed else '**FAIL**'}{flag} |" + band)
            return out + ([""] + [f"- {_md(x.strip())}" for x in _notes(rows)] if _notes(rows) else [])

        md = []
        if self.targets:
            md += ["| target | limit | measured | verdict |", "|---|---|---|---|"]
            names = _TARGET_NAMES
            for v in self.target_verdicts():
                unit = " points" if v["target"] == "points" else " %"
                got = "n/a" if v["measured"] is None else f"{100 * v['measured']:.2f}{unit}"
                verdict = "no row" if v["met"] is None else ("met" if v["met"] else "**missed**")
                if v["met"] is not None and v.get("interval") is not None and not v["settled"]:
                    lo, hi = (100 * x for x in v["interval"])
                    verdict += f" (not settled: the median's 95 % interval is {lo:.2f}-{hi:.2f}{unit})"
                md.append(f"| {names[v['target']]} ({v['rows']} rows) | {100 * v['limit']:g}{unit} | {got} "
                          f"| {verdict} |")
            md.append("")
        md += ["```", self.summary(), "```", ""]
        if plot:
            md += [f"![{plot}]({plot})", ""]
        md += table(self.evidence)
        fit = [r for r in self.rows if r.role == "fit"]
        if fit:
            md += ["", "Fit cases (an input was calibrated on these figures; not evidence):", "", *table(fit)]
        sources = sorted({r.source for r in self.rows if r.source})
        if sources:
            md += ["", "Sources:", "", *(f"- {_md(x)}" for x in sources)]
        return "\n".join(md)

    def to_dict(self) -> dict:
        """JSON-ready: the rows, the summary of the evidence and one per role (NaN as null)."""
        by_role = {role: {k: _clean(v) for k, v in self.role_summary(role).items()}
                   for role in ROLES if any(r.role == role for r in self.rows)}
        return {"path": self.path,
                "rows": [{k: _clean(v) for k, v in dataclasses.asdict(r).items()} for r in self.rows],
                "summary": {k: _clean(v) for k, v in _summary(self.evidence).items()},
                "by_role": by_role, "targets": self.target_verdicts(),
                "calibrations": [{k: (list(map(_clean, v)) if isinstance(v, tuple) else _clean(v)) for k, v in c.items()}
                                 for c in self.calibrations]}

    def __str__(self) -> str:
        return self.format_table()
