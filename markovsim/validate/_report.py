"""The result of running a case file: one row per reported output, summaries by role."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

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


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %" if math.isfinite(x) else "n/a"


def _clean(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _errors(rows) -> np.ndarray:
    e = np.array([abs(r.error) for r in rows], dtype=float)
    return e[np.isfinite(e)]


def _summary(rows) -> dict:
    e = _errors(rows)
    return {"n": len(rows), "n_failed": sum(not r.passed for r in rows),
            "median_error": float(np.median(e)) if e.size else math.nan,
            "max_error": float(np.max(e)) if e.size else math.nan}


def _line(label: str, s: dict) -> str:
    return (f"{label}{s['n'] - s['n_failed']}/{s['n']} outputs within tolerance; relative error: "
            f"median {_pct(s['median_error'])}, max {_pct(s['max_error'])}")


def _table(rows) -> list[str]:
    head = ("case", "output", "reported", "predicted", "error", "tolerance", "result")
    body = [(r.case, r.output, f"{r.reported:.6g}", f"{r.predicted:.6g}", _pct(r.error),
             r.tolerance, "ok" if r.passed else "FAIL") for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    return lines + ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]


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
    """

    path: str
    rows: tuple[CaseResult, ...]

    @property
    def evidence(self) -> tuple[CaseResult, ...]:
        """The rows that test the model: every role but ``fit``."""
        return tuple(r for r in self.rows if r.role != "fit")

    @property
    def errors(self) -> np.ndarray:
        """Absolute relative errors of the evidence rows where one is defined."""
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
        """``{"n", "n_failed", "median_error", "max_error"}`` of the rows of one role."""
        return _summary([r for r in self.rows if r.role == role])

    def summary(self) -> str:
        """How many outputs passed, median and maximum relative error (of the evidence; the
        holdout and fit rows each on their own line when there are any)."""
        lines = [_line("", _summary(self.evidence))]
        if any(r.role == "holdout" for r in self.rows):
            lines.append(_line("holdout cases only: ", self.role_summary("holdout")))
        if any(r.role == "fit" for r in self.rows):
            lines.append(_line("fit cases (calibration, not evidence): ", self.role_summary("fit")))
        return "\n".join(lines)

    def format_table(self) -> str:
        """Plain-text tables of every row (fit cases apart) and the summary."""
        fit = [r for r in self.rows if r.role == "fit"]
        out = _table(self.evidence)
        if fit:
            out += ["", "fit cases (an input was calibrated on these figures; not evidence):", *_table(fit)]
        return "\n".join([*out, "", self.summary()])

    def to_dict(self) -> dict:
        """JSON-ready: the rows, the summary of the evidence and one per role (NaN as null)."""
        by_role = {role: {k: _clean(v) for k, v in self.role_summary(role).items()}
                   for role in ROLES if any(r.role == role for r in self.rows)}
        return {"path": self.path,
                "rows": [{k: _clean(v) for k, v in dataclasses.asdict(r).items()} for r in self.rows],
                "summary": {k: _clean(v) for k, v in _summary(self.evidence).items()},
                "by_role": by_role}

    def __str__(self) -> str:
        return self.format_table()
