"""markovsim: Markov models of AI-cluster goodput, reliability and scaling.

Importing markovsim switches JAX to float64 (see ``markovsim._config``).
"""

from . import _config  # noqa: F401  (float64 before anything touches JAX)
from ._errors import (
    InvalidChainError as InvalidChainError,
    InvalidParameterError as InvalidParameterError,
    MarkovsimError as MarkovsimError,
    MarkovsimWarning as MarkovsimWarning,
    ReducibleChainError as ReducibleChainError,
    SolverError as SolverError,
    SpecError as SpecError,
)
from ._units import (
    DAY as DAY,
    HOUR as HOUR,
    MINUTE as MINUTE,
    YEAR as YEAR,
    afr_to_rate as afr_to_rate,
    days as days,
    fit_to_rate as fit_to_rate,
    hours as hours,
    minutes as minutes,
    mtbf_to_rate as mtbf_to_rate,
    rate_to_afr as rate_to_afr,
    rate_to_fit as rate_to_fit,
    years as years,
)

from .engine import *  # noqa: F401,F403  (the engine's public names)
from .engine import __all__ as _engine_all

__version__ = "0.1.0"

__all__ = [
    "MarkovsimError", "InvalidChainError", "ReducibleChainError", "InvalidParameterError",
    "SpecError", "SolverError", "MarkovsimWarning",
    "DAY", "HOUR", "MINUTE", "YEAR", "afr_to_rate", "days", "fit_to_rate", "hours", "minutes",
    "mtbf_to_rate", "rate_to_afr", "rate_to_fit", "years",
    *_engine_all,
]

from ._sweep import sweep as sweep  # noqa: E402
from ._validate_harness import (  # noqa: E402
    CaseResult as CaseResult,
    ValidationReport as ValidationReport,
    case_kinds as case_kinds,
    register_case_kind as register_case_kind,
    validate_cases as validate_cases,
)

__all__ += ["sweep", "CaseResult", "ValidationReport", "case_kinds", "register_case_kind", "validate_cases"]

from ._status import ResultStatus as ResultStatus  # noqa: E402  (domain results' status)

__all__ += ["ResultStatus"]
