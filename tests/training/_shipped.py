"""The shipped case files, validated once per test process.

Many tests read the same suite's report (the GPU suite takes ~7 s to validate on a slow
core); the files do not change during a run and a :class:`ValidationReport` is frozen, so
each is computed once. Tests of the harness itself call ``validate_cases`` directly."""

from __future__ import annotations

import functools
from pathlib import Path

from markovsim.validate import ValidationReport, validate_cases


@functools.cache
def _validated(path: str) -> ValidationReport:
    return validate_cases(path)


def validated(path: str | Path) -> ValidationReport:
    """``validate_cases(path)``, computed once per process for each file."""
    return _validated(str(Path(path).resolve()))
