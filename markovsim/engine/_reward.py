"""Markov reward models: long-run reward rates.

A CTMC earns reward at rate :math:`r_i` (reward units per second) while in state
:math:`i`, and an impulse :math:`c_{ij}` (reward units) each time the transition
:math:`i \\to j` fires (for instance work lost to a rollback when a failure strikes). By
the ergodic theorem for Markov reward processes, the long-run reward per second is

.. math::

    g = \\sum_i \\pi_i r_i + \\sum_{i \\ne j} \\pi_i q_{ij} c_{ij},

since :math:`\\pi_i q_{ij}` is the long-run rate (per second) of :math:`i \\to j`
transitions. For a DTMC the reward per step is
:math:`\\sum_i \\pi_i r_i + \\sum_{i, j} \\pi_i P_{ij} c_{ij}` (a self-loop is a step too).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from ._chain import DTMC, as_chain
from ._checks import array_world, check_square, check_vector
from ._stationary import gth, stationary_distribution
from ._structure import validate_chain

__all__ = ["long_run_reward_rate"]

_HIGHEST = jax.lax.Precision.HIGHEST


@partial(jax.jit, static_argnames=("dtmc",))
def _jax_rate(M, pi, r, C, dtmc: bool):
    rate = jnp.dot(pi, r, precision=_HIGHEST)
    if C is None:
        return rate
    n = M.shape[-1]
    flow = pi[:, None] * M
    if not dtmc:
        flow = jnp.where(jnp.eye(n, dtype=bool), 0.0, flow)
    return rate + jnp.sum(flow * C)


def long_run_reward_rate(chain: Any, state_rewards: Any, impulse_rewards: Any = None):
    """Long-run reward per second (CTMC) or per step (DTMC) of a Markov reward model.

    .. math::  g = \\sum_i \\pi_i r_i + \\sum_{i \\ne j} \\pi_i q_{ij} c_{ij}

    Args:
        chain: a :class:`CTMC`, a :class:`DTMC` or a generator ``Q`` (rates per second);
            dense numpy/JAX or scipy.sparse. It needs a unique stationary distribution
            (one recurrent class).
        state_rewards: reward rate per state, shape ``(n,)`` (reward units per second; per
            step for a DTMC), e.g. useful work per second in each state.
        impulse_rewards: reward per transition, shape ``(n, n)`` (reward units each time
            ``i -> j`` fires; negative for a cost such as work lost), dense or sparse; the
            diagonal is ignored for a CTMC. ``None`` for none.

    Returns:
        ``g``: a JAX scalar for JAX input (jit/vmap/grad-safe through GTH), a float for
        numpy or sparse input.

    Raises:
        InvalidChainError / ReducibleChainError: not a valid chain, or several recurrent
            classes.
        InvalidParameterError: rewards of the wrong shape or not finite.

    Example:
        >>> import numpy as np, markovsim
        >>> lam, mu = 1e-4, 1e-2                      # up <-> down, rates per second
        >>> Q = np.array([[-lam, lam], [mu, -mu]])
        >>> lost = np.array([[0, -600.0], [0, 0]])   # 600 s of work lost per failure
        >>> round(markovsim.long_run_reward_rate(Q, np.array([1.0, 0.0]), lost), 9)
        0.930693069
    """
    chain = as_chain(chain)
    dtmc = isinstance(chain, DTMC)
    world = array_world(chain, state_rewards, impulse_rewards)
    if world == "traced":
        M = jnp.asarray(chain.matrix)
        M = M.astype(jnp.result_type(M.dtype, float))
        pi = gth(M)
        C = None if impulse_rewards is None else jnp.asarray(impulse_rewards, dtype=M.dtype)
        return _jax_rate(M, pi, jnp.asarray(state_rewards, dtype=M.dtype), C, dtmc)
    chain = validate_chain(chain)
    n = chain.n
    r = check_vector("state_rewards", state_rewards, n)
    C = None if impulse_rewards is None else check_square("impulse_rewards", impulse_rewards, n)
    pi = stationary_distribution(chain)
    if world == "jax":
        M = jnp.asarray(chain.matrix)
        M = M.astype(jnp.result_type(M.dtype, float))
        Cj = None if C is None else jnp.asarray(C.toarray() if sp.issparse(C) else C, dtype=M.dtype)
        return _jax_rate(M, jnp.asarray(pi, dtype=M.dtype), jnp.asarray(r, dtype=M.dtype), Cj, dtmc)
    pi = np.asarray(pi, dtype=float)
    rate = float(pi @ r)
    if C is None:
        return rate
    M = chain.matrix
    M = M.tocsr().astype(float) if sp.issparse(M) else sp.csr_matrix(np.asarray(M, dtype=float))
    if not dtmc:
        M = M - sp.diags(M.diagonal())
    flow = sp.diags(pi) @ M
    Cs = C if sp.issparse(C) else sp.csr_matrix(C)
    return rate + float(flow.multiply(Cs).sum())
