"""Bad input: a markovsim error (a ValueError) that names what is wrong and where.

One test per kind of bad input, through the public entry points (the stationary solver
validates before solving). Each checks the error type, that it subclasses ValueError, and
that the message names the entry / row / field and the offending value.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import markovsim as ms

GOOD = np.array([[-1.0, 1.0, 0.0], [0.5, -1.5, 1.0], [0.0, 2.0, -2.0]])


def _raises(exc, fn, *args, match, **kwargs):
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ms.MarkovsimError)
    return str(info.value)


def test_negative_rate_names_the_entry_and_value():
    Q = GOOD.copy()
    Q[1, 0], Q[1, 1] = -0.5, -0.5
    msg = _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"Q\[1, 0\]")
    assert "-0.5" in msg and ">= 0" in msg


def test_negative_rate_in_a_sparse_matrix():
    Q = GOOD.copy()
    Q[2, 0], Q[2, 2] = -0.25, -1.75
    _raises(ms.InvalidChainError, ms.stationary_distribution, sp.csr_matrix(Q), match=r"Q\[2, 0\]=-0\.25")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_entry_names_the_entry(bad):
    Q = GOOD.copy()
    Q[2, 1] = bad
    msg = _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"Q\[2, 1\]")
    assert repr(float(bad)) in msg and "finite" in msg


def test_nan_in_a_sparse_matrix_names_the_entry():
    Q = sp.csr_matrix(GOOD)
    Q.data[Q.data == 2.0] = np.nan
    _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"Q\[2, 1\]=nan")


def test_nan_in_a_jax_array_names_the_entry():
    Q = jnp.asarray(GOOD).at[0, 1].set(jnp.nan)
    _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"Q\[0, 1\]=nan")


def test_non_square_names_the_shape():
    _raises(ms.InvalidChainError, ms.stationary_distribution, GOOD[:2], match=r"square.*\(2, 3\)")


def test_rows_not_summing_to_zero_name_the_row_and_sum():
    Q = GOOD.copy()
    Q[1, 1] = -1.25
    msg = _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"row 1 sums to 0\.25")
    assert "np.float64" not in msg  # a plain number, not a numpy repr


def test_empty_matrix():
    _raises(ms.InvalidChainError, ms.stationary_distribution, np.zeros((0, 0)), match="empty")


def test_one_dimensional_input_names_the_shape():
    _raises(ms.InvalidChainError, ms.stationary_distribution, np.array([-1.0, 1.0]), match=r"2-D.*\(2,\)")


def test_three_dimensional_input_names_the_shape():
    """A stack of chains is batched with jax.vmap, not passed whole."""
    Q = np.stack([GOOD, GOOD])
    _raises(ms.InvalidChainError, ms.stationary_distribution, Q, match=r"2-D.*\(2, 3, 3\)")


def test_non_numeric_input():
    _raises(ms.InvalidChainError, ms.stationary_distribution, [["a", "b"], ["c", "d"]], match="numeric")


def test_reducible_chain_asked_for_a_unique_distribution_names_the_classes():
    Q = np.zeros((4, 4))
    Q[0, 1], Q[1, 0], Q[2, 3], Q[3, 2] = 1.0, 2.0, 3.0, 4.0
    Q -= np.diag(Q.sum(axis=1))
    msg = _raises(ms.ReducibleChainError, ms.stationary_distribution, Q, match="2 recurrent classes")
    assert "{0, 1}" in msg and "{2, 3}" in msg and "stationary_distributions" in msg


def test_reducible_labelled_chain_names_the_labels():
    chain = ms.CTMC.from_transitions([("up", "down", 1.0), ("down", "up", 2.0), ("spare", "spare-bad", 1.0),
                                      ("spare-bad", "spare", 1.0)])
    _raises(ms.ReducibleChainError, ms.stationary_distribution, chain, match=r"'up'.*'spare'")


def test_transition_probability_out_of_range_names_the_entry():
    P = np.array([[0.5, 0.5], [1.2, -0.2]])
    _raises(ms.InvalidChainError, ms.stationary_distribution, ms.DTMC(P), match=r"P\[1, 0\]=1\.2")


def test_dtmc_rows_not_summing_to_one_name_the_row():
    P = np.array([[0.5, 0.5], [0.3, 0.6]])
    _raises(ms.InvalidChainError, ms.stationary_distribution, ms.DTMC(P), match=r"P row 1 sums to 0\.(9|8999)")


def test_labels_of_the_wrong_length():
    _raises(ms.InvalidChainError, ms.CTMC.from_matrix, GOOD, labels=["a", "b"], match="2 labels for 3 states")


def test_unknown_label():
    chain = ms.CTMC.from_transitions([("up", "down", 1.0), ("down", "up", 2.0)])
    _raises(ms.InvalidChainError, chain.index, "degraded", match="'degraded'")


def test_from_matrix_validates():
    Q = GOOD.copy()
    Q[0, 0] = 0.0
    _raises(ms.InvalidChainError, ms.CTMC.from_matrix, Q, match="row 0")


def test_wrong_method_type():
    with pytest.raises(TypeError, match="method="):
        ms.stationary_distribution(GOOD, method="gth")


def test_sparse_method_under_jit_is_a_type_error():
    with pytest.raises(TypeError, match="only GTH"):
        jax.jit(lambda Q: ms.stationary_distribution(Q, method=ms.SparseDirect()))(jnp.asarray(GOOD))


def test_solver_failure_is_an_error_not_a_number():
    """SparseIterative with no iterations left cannot reach its tolerance: a SolverError
    naming the status and residual, never a silently inaccurate answer."""
    n = 3000
    rng = np.random.default_rng(0)
    R = sp.random(n, n, density=5 / n, random_state=rng, format="csr")
    R = R + sp.diags(np.ones(n - 1), 1) + sp.diags([1.0], -(n - 1))  # a cycle: irreducible
    R.setdiag(0.0)
    R.eliminate_zeros()
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    msg = _raises(ms.SolverError, ms.stationary_distribution, Q, method=ms.SparseIterative(tol=1e-300, maxiter=1),
                  match="residual")
    assert "NOT_CONVERGED" in msg
