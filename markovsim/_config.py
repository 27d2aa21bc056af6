"""Numerical and compiler configuration applied when markovsim is imported.

markovsim computes in float64 by default: a user gets float64 results without touching
JAX settings. Importing markovsim switches on ``jax_enable_x64`` (a process-wide JAX
flag). To trade accuracy for speed, pass float32 arrays explicitly: the functions keep
the dtype they are given. Unavailabilities below ~1e-7 are then lost to rounding.

Compile time on the CPU: XLA's MLIR fusion emitters (its default code generator for fused
loops on the CPU in recent jaxlib) compile markovsim's programs (small arrays, deep loops,
many of them) 1.5-2.5x slower than XLA's classic emitters, and the programs run no faster
(measured in ``benchmarks/README.md``, "XLA's CPU code generator"). Importing markovsim
therefore adds ``--xla_cpu_use_fusion_emitters=false`` to ``XLA_FLAGS``, unless:

- ``XLA_FLAGS`` already names ``xla_cpu_use_fusion_emitters`` (your choice stands);
- ``MARKOVSIM_KEEP_XLA_FLAGS=1`` is set (markovsim leaves ``XLA_FLAGS`` alone);
- JAX has already started its backends in this process (XLA read its flags then);
- the installed jaxlib is outside the versions where the option was checked
  (:data:`CHECKED_JAXLIB`): XLA aborts the process on an option it does not know, so
  markovsim never names one a jaxlib might lack.

The option is about the CPU backend's code generator only: GPU and TPU programs are
unchanged. It travels in ``os.environ``, so processes started from yours inherit it.
:data:`CPU_EMITTER_FLAG_SET` says whether this import set it.
"""

from __future__ import annotations

import os

import jax

jax.config.update("jax_enable_x64", True)

#: the XLA option markovsim adds to ``XLA_FLAGS`` (see the module docstring)
CPU_EMITTER_FLAG = "--xla_cpu_use_fusion_emitters=false"
#: jaxlib versions (major, minor), from inclusive to exclusive, where the option exists
#: and its effect on compile time, run time and results was measured
CHECKED_JAXLIB = ((0, 10), (0, 11))


def _jaxlib_version() -> tuple[int, ...]:
    import jaxlib

    parts = []
    for p in getattr(jaxlib, "__version__", "0").split(".")[:2]:
        digits = "".join(c for c in p if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # pragma: no cover  (a JAX without the private helper: assume started, set nothing)
        return True


def _prefer_classic_cpu_emitters() -> bool:
    """Add :data:`CPU_EMITTER_FLAG` to ``XLA_FLAGS`` where that is safe; True if added."""
    if os.environ.get("MARKOVSIM_KEEP_XLA_FLAGS", "").strip() not in ("", "0"):
        return False
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in flags:
        return False
    low, high = CHECKED_JAXLIB
    if not low <= _jaxlib_version() < high or _backends_started():
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {CPU_EMITTER_FLAG}".strip()
    return True


#: whether importing markovsim added :data:`CPU_EMITTER_FLAG` to ``XLA_FLAGS``
CPU_EMITTER_FLAG_SET = _prefer_classic_cpu_emitters()
