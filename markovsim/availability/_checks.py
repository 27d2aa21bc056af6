"""Host-side value checks that step aside under jit/vmap/grad (tracers cannot be checked)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from .._errors import InvalidParameterError, check_nonnegative, check_positive, check_probability

__all__ = ["concrete", "positive", "nonnegative", "probability"]


def concrete(value: Any) -> bool:
    """True when ``value`` holds concrete numbers (not a JAX tracer)."""
    leaves = jax.tree_util.tree_leaves(value)
    return not any(isinstance(v, jax.core.Tracer) for v in leaves)


def positive(name: str, value: Any, unit: str = "s") -> None:
    if concrete(value):
        check_positive(name, np.asarray(value, dtype=float), unit=unit)


def nonnegative(name: str, value: Any, unit: str = "s") -> None:
    if concrete(value):
        check_nonnegative(name, np.asarray(value, dtype=float), unit=unit)


def probability(name: str, value: Any) -> None:
    if concrete(value):
        check_probability(name, np.asarray(value, dtype=float))


def fail(message: str) -> None:
    raise InvalidParameterError(message)
