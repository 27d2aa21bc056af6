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
    per_running_rate as per_running_rate,
    per_wall_rate as per_wall_rate,
    rate_to_afr as rate_to_afr,
    rate_to_fit as rate_to_fit,
    years as years,
)

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what static readers (type checkers, the API reference) see; at run time: __getattr__
    from .engine import *  # noqa: F401,F403

#: the engine's public names (its ``__all__``), reachable here but imported on first use: the
#: engine's imports (scipy.sparse, csgraph, its solvers) cost about a third of a second that a
#: goodput question does not need
from ._engine_names import __all__ as _ENGINE_NAMES  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "MarkovsimError", "InvalidChainError", "ReducibleChainError", "InvalidParameterError",
    "SpecError", "SolverError", "MarkovsimWarning",
    "DAY", "HOUR", "MINUTE", "YEAR", "afr_to_rate", "days", "fit_to_rate", "hours", "minutes",
    "mtbf_to_rate", "rate_to_afr", "rate_to_fit", "years",
    *_ENGINE_NAMES,
]
__all__ += ["per_wall_rate", "per_running_rate"]

from ._sweep import PointStatus as PointStatus, open_sweep as open_sweep, sweep as sweep  # noqa: E402

__all__ += ["sweep", "open_sweep", "PointStatus"]

#: names that moved to markovsim.validate (still reachable here, with a DeprecationWarning)
_MOVED = ("CaseResult", "ValidationReport", "case_kinds", "register_case_kind", "validate_cases")


def __getattr__(name: str):
    if name in _ENGINE_NAMES or name == "engine":  # (the engine guards its own functions)
        import importlib

        engine = importlib.import_module("markovsim.engine")  # (not ``from . import``: it asks us again)
        return engine if name == "engine" else getattr(engine, name)
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(f"markovsim.{name} moved to markovsim.validate.{name}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("markovsim.validate"), name)
    raise AttributeError(f"module 'markovsim' has no attribute {name!r}")

from ._status import ResultStatus as ResultStatus  # noqa: E402  (domain results' status)

__all__ += ["ResultStatus"]

from ._compile_cache import enable_compilation_cache as enable_compilation_cache  # noqa: E402

__all__ += ["enable_compilation_cache"]

from ._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
