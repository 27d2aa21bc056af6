"""Validation cases: check the models against figures measured on your own cluster.

See :func:`validate_cases` and the how-to page "Check the models against your cluster".
The case kinds ``train``, ``infer`` and ``goodput`` are defined by the domain packages next
to their model readers (``markovsim.training.MODEL_KIND``, ...); register your own with
:func:`register_case_kind`.
"""

from ._harness import (
    MODEL_KINDS as MODEL_KINDS,
    case_kinds as case_kinds,
    register_case_kind as register_case_kind,
    validate_cases as validate_cases,
)
from ._calibration import CalibrationReport as CalibrationReport, run_calibration as run_calibration
from ._report import ROLES as ROLES, CaseResult as CaseResult, ValidationReport as ValidationReport

__all__ = ["CalibrationReport", "run_calibration", "CaseResult", "ValidationReport", "ROLES", "MODEL_KINDS", "case_kinds", "register_case_kind",
           "validate_cases"]

from .._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
