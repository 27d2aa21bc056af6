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
