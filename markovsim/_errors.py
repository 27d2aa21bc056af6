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
    "InvalidTypeError",
    "SpecError",
    "SolverError",
    "MarkovsimWarning",
    "check_finite",
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_integer",
    "check_number",
    "check_size",
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


class InvalidTypeError(InvalidParameterError, TypeError):
    """An argument of the wrong type (a string where a model object belongs, ...); also a
    :class:`TypeError`, so ``except TypeError`` keeps working."""


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


def _is_traced(value: Any) -> bool:
    """A JAX tracer (inside ``jit``/``grad``/``vmap``): not checkable eagerly."""
    try:
        import jax

        return isinstance(value, jax.core.Tracer)
    except Exception:  # pragma: no cover - jax missing
        return False


def _as_floats(name: str, value: Any):
    """``value`` as a float array, or :class:`InvalidParameterError` naming what it was."""
    import numpy as np

    if isinstance(value, (str, bytes)) or value is None:
        raise InvalidParameterError(
            f"{name}={value!r}: expected a number (in SI units: seconds, per-second rates, bytes), "
            f"got {type(value).__name__}")
    try:
        raw = np.asarray(value)
    except Exception:
        raw = np.asarray(None, dtype=object)
    if raw.dtype.kind == "c" or (raw.dtype == object and any(isinstance(v, complex) for v in raw.ravel())):
        raise InvalidParameterError(f"{_describe_short(value)} for {name}: expected a real number, got a complex one")
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(
            f"{_describe_short(value)} for {name}: expected a number or an array of numbers") from None


def _describe_short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_finite(name: str, value: Any) -> None:
    """Raise :class:`InvalidParameterError` unless every entry is a finite number."""
    import numpy as np

    if _is_traced(value):
        return
    arr = _as_floats(name, value)
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a finite number, got NaN or inf"
        )


def check_positive(name: str, value: Any, *, unit: str = "") -> None:
    """Raise unless every entry is finite and > 0."""
    import numpy as np

    if _is_traced(value):
        return
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

    if _is_traced(value):
        return
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

    if _is_traced(value):
        return
    check_finite(name, value)
    arr = np.asarray(value, dtype=float)
    bad = (arr < 0) | (arr > 1)
    if bad.any():
        raise InvalidParameterError(
            f"{_bad_values(name, arr, bad)}: expected a probability in [0, 1]"
        )


def check_integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``int(value)`` or raise unless it is an integer in [``minimum``, ``maximum``]."""
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
    if maximum is not None and value > maximum:
        raise InvalidParameterError(f"{name}={value}: expected an integer <= {maximum}")
    return value


def check_number(name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None,
                 positive: bool = False, unit: str = ""):
    """``value`` as a float (or float array) after checking it is a finite real number in range.

    Strings (``"5 min"``), ``None``, complex numbers and lists of non-numbers are refused with
    :class:`InvalidParameterError` naming the parameter, the value and what was expected. A
    JAX tracer is returned unchanged (it cannot be checked eagerly; see ``throw=``).

    Args:
        name: the parameter's name, for the message.
        value: the value to check (a number or an array of numbers).
        minimum, maximum: inclusive bounds (``None``: unbounded).
        positive: require ``> 0``.
        unit: the unit to name in messages (``"s"``).
    """
    import numpy as np

    if _is_traced(value):
        return value
    arr = _as_floats(name, value)
    check_finite(name, arr)
    u = f" {unit}" if unit else ""
    if positive and (arr <= 0).any():
        raise InvalidParameterError(f"{_bad_values(name, arr, arr <= 0)}: expected a positive value{u}")
    if minimum is not None and (arr < minimum).any():
        raise InvalidParameterError(f"{_bad_values(name, arr, arr < minimum)}: expected a value >= {minimum:g}{u}")
    if maximum is not None and (arr > maximum).any():
        raise InvalidParameterError(f"{_bad_values(name, arr, arr > maximum)}: expected a value <= {maximum:g}{u}")
    return float(arr) if arr.ndim == 0 else arr


#: the most memory a size guard lets one call ask for (bytes); beyond it a call is refused
#: up front, naming the size it would need
MEMORY_LIMIT_BYTES = 16 * 2**30


def check_size(name: str, items: float, *, item_bytes: float, what: str = "items",
               limit_bytes: float | None = None) -> None:
    """Refuse a computation whose ``items`` of ``item_bytes`` each would not fit in memory.

    Raises:
        InvalidParameterError: naming ``name``, the count, the memory it would need and the
            limit (:data:`MEMORY_LIMIT_BYTES` unless ``limit_bytes`` is given).
    """
    limit = MEMORY_LIMIT_BYTES if limit_bytes is None else limit_bytes
    need = float(items) * float(item_bytes)
    if need > limit:
        raise InvalidParameterError(
            f"{name}: {float(items):.4g} {what} would need about {_bytes(need)} of memory; expected "
            f"at most {_bytes(limit)} (a smaller size)")


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"  # pragma: no cover
