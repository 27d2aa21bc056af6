"""Shared test configuration.

Hypothesis profiles: ``ci`` (default) is fast and deterministic; ``thorough`` is bigger,
on demand: ``HYPOTHESIS_PROFILE=thorough make test``.
"""

import os

import pytest

# the CLI keeps JAX's compiled programs in the user's cache directory; tests leave it alone
# (tests of the cache point it at a temporary directory)
os.environ.setdefault("MARKOVSIM_NO_COMPILE_CACHE", "1")

from hypothesis import HealthCheck, settings

import markovsim  # noqa: F401  (switches on float64 before any test touches JAX)

#: modules whose fixtures are expensive (a wheel and a virtual environment, every
#: reproduction, fitted traces, the validated suites): their tests stay on one worker, so that
#: the fixture is built once per run, not once per worker. Modules named together share one
#: group (one fixture, or the reports of tests/training/_shipped.py). Such fixtures are
#: session-scoped: a worker runs its queue interleaved across modules, and pytest tears a
#: module-scoped fixture down whenever the next test comes from another module.
_ONE_WORKER = {"test_repro_verdicts.py": "test_repro_verdicts", "test_wheel.py": "test_wheel",
               "test_cli.py": "test_cli", "test_sweep_dask.py": "test_sweep_dask",
               "test_fit.py": "infinitehbd_fit", "test_predict.py": "infinitehbd_fit",
               "test_catalogue.py": "infinitehbd_fit", "test_cases.py": "shipped_suites",
               "test_accuracy_page.py": "shipped_suites", "test_evidence.py": "shipped_suites",
               "test_long_context_caveat.py": "shipped_suites", "test_repro_runner.py": "shipped_suites"}


def _group(nodeid: str) -> str | None:
    return _ONE_WORKER.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1])


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover  (a plain `pytest` without xdist runs everything in one process)
    pass
else:
    class _GroupScheduling(LoadScopeScheduling):
        """``--dist loadgroup`` by file name: the tests of a group go to one worker, every
        other test is its own unit. (xdist's own loadgroup reads an ``@group`` suffix that its
        collection hook writes into ``item._nodeid``; pytest 9.2 derives node ids elsewhere,
        so the suffix never reached the scheduler and every group was split.)"""

        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid) or nodeid

    @pytest.hookimpl(optionalhook=True)   # `pytest -p no:xdist` does not know the hook
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") == "loadgroup":
            return _GroupScheduling(config, log)
        return None


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
