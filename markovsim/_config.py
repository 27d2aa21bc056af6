"""Numerical configuration applied when markovsim is imported.

markovsim computes in float64 by default: a user gets float64 results without touching
JAX settings. Importing markovsim switches on ``jax_enable_x64`` (a process-wide JAX
flag). To trade accuracy for speed, pass float32 arrays explicitly: the functions keep
the dtype they are given. Unavailabilities below ~1e-7 are then lost to rounding.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)
