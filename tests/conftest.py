"""Shared test configuration.

Hypothesis profiles: ``ci`` (default) is fast and deterministic; ``thorough`` is bigger,
on demand: ``HYPOTHESIS_PROFILE=thorough make test``.
"""

import os

# the CLI keeps JAX's compiled programs in the user's cache directory; tests leave it alone
# (tests of the cache point it at a temporary directory)
os.environ.setdefault("MARKOVSIM_NO_COMPILE_CACHE", "1")

from hypothesis import HealthCheck, settings

import markovsim  # noqa: F401  (switches on float64 before any test touches JAX)

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
