"""The status every domain result carries (availability, inference), and ``throw=``.

A result says how far it can be trusted in a :class:`ResultStatus` field: ``OK`` only when
the answer was checked (finite, probabilities in [0, 1], breakdowns summing to 1, an
optimum proven against its neighbours). Under ``jax.jit`` / ``jax.vmap`` a result never
raises: it carries the status (an ``int32`` array, one per batch element) and NaN in
place of the values it could not vouch for. The public wrappers take ``throw=``
(diffrax style): ``throw=True`` raises after the computation, naming the failing batch
indices, and issues a :class:`~markovsim.MarkovsimWarning` for the statuses that only
qualify an answer (an optimum on a bound, a truncated chain); ``throw=False`` returns the
status for the caller to inspect.

The engine keeps its own ``SolverStatus`` for stationary solvers. A base module: it imports
nothing from markovsim but :mod:`markovsim._errors`.
"""

from __future__ import annotations

import enum
import warnings

import numpy as np

from ._errors import InvalidParameterError, MarkovsimWarning, ReducibleChainError, SolverError

__all__ = ["ResultStatus", "check_status", "caller_stacklevel"]


class ResultStatus(enum.IntEnum):
    """Outcome of a domain computation (see the module docstring)."""

    OK = 0  #: checked: finite, in range, proven
    AT_LOWER_BOUND = 1  #: an optimum sits on the lower end of its feasible or searched range
    AT_UPPER_BOUND = 2  #: an optimum sits on the upper end (often: no finite optimum)
    TRUNCATED = 3  #: a truncated chain holds more probability on its bound than the answer tolerates
    TARGET_NOT_MET = 4  #: no candidate of a search reaches its target (the best one is returned)
    INVALID_INPUT = 5  #: an input outside its domain (only seen under jit: eagerly it raises)
    NON_FINITE = 6  #: the result is NaN or infinite
    OUT_OF_RANGE = 7  #: a probability outside [0, 1], or a breakdown that does not sum to 1
    NOT_CONVERGED = 8  #: an iteration or search did not reach its tolerance / could not prove its answer
    REDUCIBLE = 9  #: a chain with no unique stationary distribution
    DOES_NOT_FIT = 10  #: the model does not fit (memory, cluster size)

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @property
    def is_error(self) -> bool:
        """True for statuses whose values are not answers (NaN-filled under jit)."""
        return self >= ResultStatus.INVALID_INPUT

    @property
    def is_warning(self) -> bool:
        """True for statuses that qualify a usable answer (``throw=True`` warns)."""
        return self in (ResultStatus.AT_LOWER_BOUND, ResultStatus.AT_UPPER_BOUND, ResultStatus.TRUNCATED)


_MESSAGES = {
    ResultStatus.OK: "checked",
    ResultStatus.AT_LOWER_BOUND: "the optimum sits on the lower bound of the range searched",
    ResultStatus.AT_UPPER_BOUND: "the optimum sits on the upper bound of the range searched",
    ResultStatus.TRUNCATED: "the truncated chain holds too much probability on its bound",
    ResultStatus.TARGET_NOT_MET: "no candidate reaches the target",
    ResultStatus.INVALID_INPUT: "an input is outside its domain",
    ResultStatus.NON_FINITE: "the result is not finite",
    ResultStatus.OUT_OF_RANGE: "a probability or fraction is outside [0, 1] or a breakdown does not sum to 1",
    ResultStatus.NOT_CONVERGED: "the computation did not converge or could not prove its answer",
    ResultStatus.REDUCIBLE: "the chain is reducible: no unique stationary distribution",
    ResultStatus.DOES_NOT_FIT: "the model does not fit",
}

_ERRORS = {ResultStatus.INVALID_INPUT: InvalidParameterError, ResultStatus.REDUCIBLE: ReducibleChainError,
           ResultStatus.DOES_NOT_FIT: InvalidParameterError}


def caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside markovsim (the user's call)."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("markovsim"):
        frame, level = frame.f_back, level + 1
    return level


def check_status(status, *, what: str, detail=None, stacklevel: int | None = None) -> None:
    """Raise for error statuses and warn for qualifying ones, naming the batch indices.

    Args:
        status: a :class:`ResultStatus`, an int or an integer array (one per batch element).
        what: the function's name, for the message.
        detail: optional callable ``detail(index, status) -> str`` adding what went wrong at
            the first failing index (e.g. the field of an invalid input).
        stacklevel: passed to :func:`warnings.warn`; default: the first caller outside markovsim.

    Raises:
        InvalidParameterError, ReducibleChainError, SolverError: for error statuses.
    """
    codes = np.asarray(status).astype(int)
    flat = codes.ravel()
    for kind in (True, False):
        bad = [i for i, c in enumerate(flat) if ResultStatus(c).is_error == kind and c != ResultStatus.OK
               and (kind or ResultStatus(c).is_warning)]
        if not bad:
            continue
        first = ResultStatus(int(flat[bad[0]]))
        where = ""
        if codes.ndim > 0:
            idx = [np.unravel_index(i, codes.shape) for i in bad]
            shown = ", ".join(str(tuple(int(j) for j in ix) if len(ix) > 1 else int(ix[0])) for ix in idx[:10])
            where = f" at batch ind{'ex' if len(bad) == 1 else 'ices'} {shown}{' ...' if len(bad) > 10 else ''}"
        extra = ""
        if detail is not None:
            extra = detail(np.unravel_index(bad[0], codes.shape) if codes.ndim else (), first)
            extra = f": {extra}" if extra else ""
        msg = f"{what}: {first.message} (status {first.name}){where}{extra}"
        if kind:
            raise _ERRORS.get(first, SolverError)(msg + "; pass throw=False to get the status instead")
        warnings.warn(msg, MarkovsimWarning, stacklevel=stacklevel or caller_stacklevel())
