"""JAX's persistent compilation cache, for the CLI and for notebooks.

Every new process pays JAX tracing and XLA compilation again; with the persistent cache,
XLA's compiled programs are kept on disk, so the second ``markovsim goodput`` of a model in
a shell loads them instead of compiling (tracing is still paid). The CLI turns the cache
on by default, under the user's cache directory; ``MARKOVSIM_NO_COMPILE_CACHE=1`` or
``--no-compile-cache`` turns it off. In Python it is off until
:func:`enable_compilation_cache` is called.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["enable_compilation_cache", "default_cache_dir", "cache_disabled_by_env"]

#: environment variable that keeps the CLI from using the persistent cache ("1", "true", "yes")
ENV_OFF = "MARKOVSIM_NO_COMPILE_CACHE"
#: environment variable naming another cache directory
ENV_DIR = "MARKOVSIM_COMPILE_CACHE_DIR"
#: programs that compile faster than this (seconds) are not written to the cache (0: all;
#: the many small programs of a model add up to seconds)
MIN_COMPILE_S = 0.0


def default_cache_dir() -> Path:
    """The cache directory: ``$MARKOVSIM_COMPILE_CACHE_DIR`` if set, else ``markovsim/jax``
    under the platform's user cache directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on
    Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows)."""
    named = os.environ.get(ENV_DIR)
    if named:
        return Path(named).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "markovsim" / "jax"


def cache_disabled_by_env() -> bool:
    """Whether ``MARKOVSIM_NO_COMPILE_CACHE`` asks for no persistent cache."""
    return os.environ.get(ENV_OFF, "").strip().lower() not in ("", "0", "false", "no")


def enable_compilation_cache(path: str | os.PathLike | None = None, *,
                             min_compile_time_s: float = MIN_COMPILE_S) -> Path:
    """Keep JAX's compiled programs on disk, so that later processes load them.

    Call it before the first markovsim computation of the process (JAX reads the setting
    when it first compiles). Safe to call again with the same path.

    Args:
        path: the cache directory (created if missing); default :func:`default_cache_dir`.
        min_compile_time_s: programs that compile faster than this (seconds) are not kept.

    Returns:
        The cache directory.

    Example:
        >>> import markovsim
        >>> markovsim.enable_compilation_cache("/tmp/markovsim-jax")  # doctest: +SKIP
    """
    import jax

    where = Path(path).expanduser() if path is not None else default_cache_dir()
    where.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(where))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return where


def cli_cache(disabled: bool) -> Path | None:
    """The CLI's cache: on unless ``disabled`` or :data:`ENV_OFF`; a directory that cannot
    be created leaves the cache off (the command still runs, compiling as usual)."""
    if disabled or cache_disabled_by_env():
        return None
    try:
        return enable_compilation_cache()
    except OSError:
        return None


#: XLA options for programs that evaluate one model once (``analyze``, the sensitivities):
#: the backend's optimisation level 0 and no expensive LLVM passes compile them in about
#: 40 % less time; they run a few milliseconds slower, which one evaluation does not feel.
#: Programs that loop (the optimum's search) or run batches keep the default optimisation.
QUICK_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
