"""Errors and warnings raised by markovsim.

Every error a user can trigger with bad input is a :class:`MarkovsimError`, which
subclasses :class:`ValueError`, so ``except ValueError`` keeps working. Messages name the
field, the value received and what was expected.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MarkovsimError",
    "InvalidChainError",
    "ReducibleChainError",
    "InvalidParameterError",
    "SpecError",
    "SolverError",
    "MarkovsimWarning",
    "check_finite",
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_integer",
]


class MarkovsimError(ValueError):
    """Base class of every error markovsim raises for bad input or a failed solve."""


class InvalidChainError(MarkovsimError):
    """A generator or transition matrix that is not a valid Markov chain."""


class ReducibleChainError(InvalidChainError):
    """A reducible chain was asked for something only an irreducible chain has."""

    def __init__(self, message: str, classes: list[list[int]] | None = None):
        super().__init__(message)
        self.classes = classes or []


class InvalidParameterError(MarkovsimError):
    """A model parameter with a value outside its domain."""


class SpecError(MarkovsimError):
    """A model file (TOML) that cannot be turned into a model."""


class SolverError(MarkovsimError):
    """A numerical solver that did not reach its tolerance."""


class MarkovsimWarning(UserWarning):
    """Warnings from markovsim itself (turned into errors in its own tests)."""


def _describe(value: Any) -> str:
    try:
        import numpy as np

        arr = np.asarray(value)
        if arr.ndim == 0:
            return repr(arr.item())
        return f"array of shape {arr.shape}"
    except Exception:  # pragma: no cover - repr fallback
        return repr(value)


def _bad_values(name: str, value: Any, mask) -> str:
    import numpy as np

    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return f"{name}={arr.item()!r}"
    idx = np.argwhere(np.asarray(mask))
    first = tuple(int(i) for i in idx[0])
    return f"{name}[{', '.join(map(str, first))}]={arr[first]!r} ({len(idx)} bad entr{'y' if len(idx) == 1 else 'ies'})"


def check_finite(name: str, value: Any) -> None:
    """Raise :class:`InvalidParameterError` unless every entry is finite."""
    import numpy as np

    arr = np.asarray(value, dtype=float)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a finite number, got NaN or inf"
        )


def check_positive(name: str, value: Any, *, unit: str = "") -> None:
    """Raise unless every entry is finite and > 0."""
    import numpy as np

    check_finite(name, value)
    arr = np.asarray(value, dtype=float)
    bad = arr <= 0
    if bad.any():
        u = f" {unit}" if unit else ""
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a positive value{u}"
        )


def check_nonnegative(name: str, value: Any, *, unit: str = "") -> None:
    """Raise unless every entry is finite and >= 0."""
    import numpy as np

    check_finite(name, value)
    arr = np.asarray(value, dtype=float)
    bad = arr < 0
    if bad.any():
        u = f" {unit}" if unit else ""
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a value >= 0{u}"
        )


def check_probability(name: str, value: Any) -> None:
    """Raise unless every entry lies in [0, 1]."""
    import numpy as np

    check_finite(name, value)
    arr = np.asarray(value, dtype=float)
    bad = (arr < 0) | (arr > 1)
    if bad.any():
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a probability in [0, 1]"
        )


def check_integer(name: str, value: Any, *, minimum: int | None = None) -> int:
    """Return ``int(value)`` or raise unless it is an integer >= ``minimum``."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        try:
            import numpy as np

            if np.ndim(value) == 0 and float(value) == int(value):
                value = int(value)
            else:
                raise TypeError
        except Exception:
            raise InvalidParameterError(
                f"{name}={value!r}: expected an integer"
            ) from None
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidParameterError(f"{name}={value}: expected an integer >= {minimum}")
    return value
