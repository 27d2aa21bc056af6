"""The square root behind every Wald draw of the fault fits is canonical, so seeded interval
draws (and the shipped fitted files) do not depend on the LAPACK build."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from markovsim.availability._common_cause import normal_root

_entries = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(arrays(float, (4, 4), elements=_entries))
def test_positive_definite_root_is_the_cholesky_factor(a):
    cov = a @ a.T + 0.1 * np.eye(4)
    r = normal_root(cov)
    assert np.allclose(r @ r.T, cov, atol=1e-10)
    assert np.allclose(r, np.tril(r))            # lower triangular with a positive diagonal: unique
    assert np.all(np.diag(r) > 0)


@settings(max_examples=60, deadline=None)
@given(arrays(float, (4, 2), elements=_entries))
def test_singular_root_reproduces_the_covariance_with_fixed_signs(a):
    cov = a @ a.T                                 # rank <= 2: no Cholesky factor
    r = normal_root(cov)
    assert np.allclose(r @ r.T, cov, atol=1e-8 * max(1.0, np.abs(cov).max()))
    # each direction's sign is fixed: its first largest component is positive, so a LAPACK build
    # that returns the opposite eigenvector gives the same root
    for col in r.T:
        mag = np.abs(col)
        if mag.max() > 1e-6:
            assert col[(mag >= (1 - 1e-8) * mag.max()).argmax()] > 0


def test_a_sign_flip_of_the_eigenvectors_does_not_change_the_root(monkeypatch):
    cov = np.array([[2.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])  # singular
    first = normal_root(cov)
    eigh = np.linalg.eigh

    def flipped(m):
        w, v = eigh(m)
        return w, -v

    monkeypatch.setattr(np.linalg, "eigh", flipped)
    assert np.allclose(normal_root(cov), first)


def test_non_finite_entries_count_as_not_identified():
    cov = np.array([[1.0, np.nan], [np.nan, np.inf]])
    r = normal_root(cov)
    assert np.all(np.isfinite(r)) and np.allclose(r @ r.T, [[1.0, 0.0], [0.0, 0.0]])
