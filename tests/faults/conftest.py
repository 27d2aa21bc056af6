"""The fault model fitted to the shipped InfiniteHBD part, once per test process: the fit,
prediction and catalogue tests share it (a module-scoped fixture was fitted again each time
xdist interleaved another module's tests)."""

import pytest

from markovsim.availability import infinitehbd_fit


@pytest.fixture(scope="session")
def fit():
    return infinitehbd_fit()
