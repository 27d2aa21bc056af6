"""Smoke tests of the engine's public surface (the full table is in test_stationary_*.py)."""

import numpy as np

import markovsim as ms


def test_two_state_closed_form():
    a, b = 3.0, 5.0
    Q = np.array([[-a, a], [b, -b]])
    np.testing.assert_allclose(ms.stationary_distribution(Q), [b / (a + b), a / (a + b)], rtol=1e-14)
