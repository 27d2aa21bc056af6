"""Host-side value checks that step aside under jit/vmap/grad (tracers cannot be checked)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._errors import InvalidParameterError, check_nonnegative, check_positive, check_probability

__all__ = ["concrete", "positive", "nonnegative", "probability", "domain", "nan_where_invalid", "warn_if_far"]


def concrete(value: Any) -> bool:
    """True when ``value`` holds concrete numbers (not a JAX tracer)."""
    leaves = jax.tree_util.tree_leaves(value)
    return not any(isinstance(v, jax.core.Tracer) for v in leaves)


def positive(name: str, value: Any, unit: str = "s") -> None:
    if concrete(value):
        check_positive(name, value, unit=unit)


def nonnegative(name: str, value: Any, unit: str = "s") -> None:
    if concrete(value):
        check_nonnegative(name, value, unit=unit)


def probability(name: str, value: Any) -> None:
    if concrete(value):
        check_probability(name, value)


def fail(message: str) -> None:
    raise InvalidParameterError(message)


def domain(*specs):
    """Arguments checked against their domains: ``(name, value, kind)`` with ``kind`` in
    ``"positive"`` / ``"nonnegative"``.

    Concrete values are checked on the host (an error names the field); traced values
    cannot be, so a mask says where every argument lies in its domain (NaN fails), for
    the caller to NaN-fill its result there. Returns ``(floats, valid)``.
    """
    import jax.numpy as jnp

    values, valid = [], True
    for name, value, kind in specs:
        if kind == "positive":
            positive(name, value)
        else:
            nonnegative(name, value)
        v = jnp.asarray(value, dtype=jnp.result_type(float))
        if not concrete(v):
            ok = jnp.isfinite(v) & ((v > 0.0) if kind == "positive" else (v >= 0.0))
            valid = ok if valid is True else (valid & ok)
        values.append(v)
    return tuple(values), valid


def nan_where_invalid(valid, value):
    """``value`` with NaN where ``valid`` is false (``valid`` may be the constant True)."""
    import jax.numpy as jnp

    return value if valid is True else jnp.where(valid, value, jnp.nan)


def warn_if_far(what: str, approx, exact, threshold: float, hint: str) -> None:
    """Warn (host, concrete values only) where ``approx`` is more than ``threshold``
    (relative) off ``exact``, or not a number where ``exact`` is."""
    import warnings

    from .._errors import MarkovsimWarning
    from .._status import caller_stacklevel

    if not (concrete(approx) and concrete(exact)):
        return
    a, e = np.broadcast_arrays(np.asarray(approx, dtype=float), np.asarray(exact, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(a / e - 1.0)
    rel = np.where(np.isnan(a) & ~np.isnan(e), np.inf, rel)
    bad = rel > threshold
    if not bad.any():
        return
    i = np.unravel_index(np.nanargmax(np.where(bad, rel, -1.0)), rel.shape)
    where = f" ({int(bad.sum())} of {bad.size} entries; worst at index {tuple(int(j) for j in i)})" if a.ndim else ""
    warnings.warn(f"{what}: {a[i]:.6g} is {rel[i]:.1%} off the exact {e[i]:.6g}{where}, above the "
                  f"{threshold:.0%} this approximation is trusted to; {hint}", MarkovsimWarning,
                  stacklevel=caller_stacklevel())
