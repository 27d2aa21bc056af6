"""Shared test configuration.

Hypothesis profiles: ``ci`` (default) is fast and deterministic; ``thorough`` is bigger,
on demand: ``HYPOTHESIS_PROFILE=thorough make test``.

Compiled programs are shared within one test run: the pytest process (the xdist controller)
makes an empty temporary directory, every test process of the run keeps JAX's compiled
programs there (JAX's persistent compilation cache, keyed by the program itself), and the
directory is removed when the run ends. A program that a second worker, or a second
identical trace (a fresh ``jax.jit`` of the same function, a loop run eagerly again), needs
is read instead of compiled again. Nothing outlives the run: a clean clone pays every
compile once. ``MARKOVSIM_TEST_NO_SHARED_COMPILES=1`` turns it off.
"""

import os
import shutil
import tempfile

# the CLI keeps JAX's compiled programs in the user's cache directory; tests leave it alone
# (tests of the cache point it at a temporary directory)
os.environ.setdefault("MARKOVSIM_NO_COMPILE_CACHE", "1")

from hypothesis import HealthCheck, settings

import markovsim  # noqa: F401  (switches on float64 before any test touches JAX)

#: the run's shared compile directory, made by the controller and inherited by the workers
_SHARED_ENV = "MARKOVSIM_TEST_SHARED_COMPILES"
_OFF_ENV = "MARKOVSIM_TEST_NO_SHARED_COMPILES"
#: programs compiling faster than this (seconds) are not written (reading them back costs
#: about as much as compiling them)
_SHARED_MIN_COMPILE_S = 0.05


def _atomic_cache_writes() -> bool:
    """Make JAX's file cache write each entry to a temporary name and rename it into place, so
    that a worker never reads a half-written program from the other (JAX's own write is a
    plain ``write_bytes``). False if this JAX has no such class (the cache then stays off)."""
    try:
        from jax._src import lru_cache
    except ImportError:
        return False
    cls = getattr(lru_cache, "LRUCache", None)
    if cls is None or not hasattr(cls, "put") or getattr(cls, "_markovsim_atomic", False):
        return cls is not None

    def put(self, key, value):
        if not key:
            raise ValueError("key cannot be empty")
        final = self.path / f"{key}{lru_cache._CACHE_SUFFIX}"
        if final.exists():
            return
        fd, tmp = tempfile.mkstemp(dir=str(self.path), prefix=".partial-")
        with os.fdopen(fd, "wb") as f:
            f.write(value)
        os.replace(tmp, final)

    cls.put = put
    cls._markovsim_atomic = True
    return True


def _share_compiled_programs(where: str) -> None:
    import jax

    if not _atomic_cache_writes():
        return
    jax.config.update("jax_compilation_cache_dir", where)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", _SHARED_MIN_COMPILE_S)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


def pytest_configure(config):
    """The controller (or a run without xdist) makes the run's compile directory; workers
    (``workerinput``) inherit its name through the environment."""
    if os.environ.get(_OFF_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return
    if not hasattr(config, "workerinput") and _SHARED_ENV not in os.environ:
        os.environ[_SHARED_ENV] = tempfile.mkdtemp(prefix="markovsim-test-compiles-")
        config._markovsim_shared_compiles = os.environ[_SHARED_ENV]
    if os.environ.get(_SHARED_ENV):
        _share_compiled_programs(os.environ[_SHARED_ENV])


def pytest_unconfigure(config):
    made = getattr(config, "_markovsim_shared_compiles", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(_SHARED_ENV, None)


#: modules whose module-scoped fixtures are expensive (a wheel and a virtual environment,
#: every reproduction, fitted traces): their tests stay on one worker (``--dist loadgroup``)
#: so that the fixture is built once per run, not once per worker
_ONE_WORKER = ("test_repro_verdicts.py", "test_wheel.py", "test_cli.py", "test_fit.py", "test_predict.py",
               "test_catalogue.py", "test_sweep_dask.py")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        name = item.path.name
        if name in _ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(name.removesuffix(".py")))

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=30,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
