"""Monte Carlo paths of CTMCs and DTMCs, and estimates with confidence intervals.

CTMC paths are simulated event by event (next-event simulation): in state :math:`s` the
holding time is exponential with rate :math:`q_s = \\sum_{j \\ne s} q_{sj}` and the next
state is :math:`j` with probability :math:`q_{sj} / q_s`, drawn by inverse transform on
the row's cumulative rates (a state of zero rate is never drawn). DTMC paths draw the
next state from the row of :math:`P` (self-loops included).

One JAX PRNG key gives every replica its own stream (``jax.random.split``); each event
draws from ``jax.random.fold_in(replica_key, event_number)``, so (with JAX's default
partitionable threefry keys) a replica's path does not depend on how many replicas run
beside it. Paths are ``lax.while_loop`` s vmapped
over replicas and jitted. A CTMC path stops at ``t_end`` (or on entering a stop set, for
absorption times) or after ``max_events`` transitions: a replica stopped by the cap is
flagged :attr:`SimulationStatus.MAX_EVENTS` and its time is where it stopped, never
silently counted as if it had reached ``t_end``; the estimators refuse such runs.

Estimates are replica means with the Student-t confidence interval of the requested
level: replicas are independent and identically distributed, so the interval covers the
true mean with (asymptotically) that probability. A 99 % interval misses about once in a
hundred seeds, which is what a test with a fixed key accepts.
"""

from __future__ import annotations

import dataclasses
import enum
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .._errors import InvalidParameterError, InvalidTypeError, SolverError, check_integer
from .._estimate import Estimate
from ._chain import DTMC, as_chain
from ._checks import array_world, check_distribution, check_times, check_vector, state_mask
from ._structure import validate_chain

__all__ = [
    "SimulationStatus",
    "SimulationResult",
    "Estimate",
    "simulate_ctmc",
    "simulate_dtmc",
    "estimate_time_average",
    "estimate_mean_time_to_absorption",
]


class SimulationStatus(enum.IntEnum):
    """Outcome of one replica."""

    SUCCESS = 0
    MAX_EVENTS = 1

    @property
    def message(self) -> str:
        return {0: "reached the end of the horizon (or the stop set)",
                1: "stopped after max_events transitions before the end of the horizon"}[int(self)]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """Per-replica summaries of simulated paths (leading axis: replica).

    Attributes:
        final_state: ``(replicas,)`` state at the end of the path.
        time: ``(replicas,)`` time the path stopped: ``t_end``, the entry time into the
            stop set, or, for a replica with status ``MAX_EVENTS``, the time of its last
            event (seconds; steps for a DTMC).
        occupancy: ``(replicas, n)`` time spent in each state during ``[0, time]``
            (seconds; for a DTMC the number of visits at steps ``0 .. steps-1``).
        events: ``(replicas,)`` number of transitions made.
        status: ``(replicas,)`` :class:`SimulationStatus` codes.
    """

    final_state: Any
    time: Any
    occupancy: Any
    events: Any
    status: Any

    @property
    def truncated(self):
        """Boolean mask of the replicas stopped by ``max_events``."""
        return self.status == SimulationStatus.MAX_EVENTS


# ----------------------------------------------------------------------------- jump structure


def _dense_jumps(M, dtmc: bool):
    """(neighbours (n, n), cumulative weights (n, n), row totals (n,)) of a dense matrix."""
    M = jnp.asarray(M)
    M = M.astype(jnp.result_type(M.dtype, float))
    n = M.shape[-1]
    W = M if dtmc else jnp.where(jnp.eye(n, dtype=bool), 0.0, M)
    W = jnp.clip(W, 0.0, None)
    cum = jnp.cumsum(W, axis=1)
    nbr = jnp.broadcast_to(jnp.arange(n), (n, n))
    return nbr, cum, cum[:, -1]


def _sparse_jumps(M: sp.csr_matrix, dtmc: bool):
    """Padded per-row neighbour lists of a sparse chain (host), as JAX arrays."""
    M = M.tocsr().astype(float)
    if not dtmc:
        M = M - sp.diags(M.diagonal())
    M.eliminate_zeros()
    n = M.shape[0]
    deg = np.diff(M.indptr)
    d = max(1, int(deg.max()) if n else 1)
    nbr = np.tile(np.arange(n)[:, None], (1, d))  # padding points at the state itself
    w = np.zeros((n, d))
    rows = np.repeat(np.arange(n), deg)
    pos = np.arange(M.nnz) - np.repeat(M.indptr[:-1], deg)
    nbr[rows, pos] = M.indices
    w[rows, pos] = M.data
    cum = np.cumsum(w, axis=1)  # per row: no cancellation between rows
    return jnp.asarray(nbr), jnp.asarray(cum), jnp.asarray(cum[:, -1])


def _jumps(chain, dtmc: bool):
    m = chain.matrix
    if sp.issparse(m):
        return _sparse_jumps(m, dtmc)
    return _dense_jumps(m, dtmc)


def _pick(u, cum_row, total):
    """Index of the entry drawn with probability proportional to its weight (``u`` uniform
    on [0, 1)): the first entry whose cumulative weight exceeds ``u * total``."""
    j = jnp.searchsorted(cum_row, u * total, side="right", method="compare_all")
    return jnp.minimum(j, cum_row.shape[0] - 1)


def _draw(key, cum_row, total):
    return _pick(jax.random.uniform(key, dtype=cum_row.dtype), cum_row, total)


def _initial(key, p0):
    cum = jnp.cumsum(p0)
    return _draw(key, cum, cum[-1]).astype(jnp.int32)


# ----------------------------------------------------------------------------- CTMC paths


@partial(jax.jit, static_argnames=("replicas", "max_events"))
def _ctmc_paths(nbr, cum, out, p0, t_end, stop, key, replicas: int, max_events: int):
    n = out.shape[0]
    dtype = cum.dtype
    t_end = jnp.asarray(t_end, dtype=dtype)

    def one(rkey):
        k_init, rkey = jax.random.split(rkey)
        s0 = _initial(k_init, p0)

        def cond(c):
            s, time, occ, events, done = c
            return (~done) & (events < max_events)

        def body(c):
            s, time, occ, events, done = c
            u = jax.random.uniform(jax.random.fold_in(rkey, events), (2,), dtype=dtype)
            rate = out[s]
            hold = -jnp.log1p(-u[0]) / rate  # exponential; inf when rate == 0
            finished = time + hold >= t_end
            end = jnp.where(finished, t_end, time + hold)
            occ = occ.at[s].add(end - time)
            nxt = nbr[s, _pick(u[1], cum[s], rate)].astype(jnp.int32)
            s_new = jnp.where(finished, s, nxt)
            events = events + jnp.where(finished, 0, 1)
            done = finished | stop[s_new]
            return s_new, end, occ, events, done

        c0 = (s0, jnp.zeros((), dtype), jnp.zeros(n, dtype), jnp.zeros((), jnp.int32), stop[s0])
        s, time, occ, events, done = jax.lax.while_loop(cond, body, c0)
        status = jnp.where(done, int(SimulationStatus.SUCCESS), int(SimulationStatus.MAX_EVENTS)).astype(jnp.int32)
        return SimulationResult(s, time, occ, events, status)

    return jax.vmap(one)(jax.random.split(key, replicas))


@partial(jax.jit, static_argnames=("replicas",))
def _dtmc_paths(nbr, cum, total, p0, steps, key, replicas: int):
    n = total.shape[0]
    dtype = cum.dtype

    def one(rkey):
        k_init, rkey = jax.random.split(rkey)
        s0 = _initial(k_init, p0)

        def body(k, c):
            s, visits = c
            visits = visits.at[s].add(1.0)
            nxt = nbr[s, _draw(jax.random.fold_in(rkey, k), cum[s], total[s])].astype(jnp.int32)
            return nxt, visits

        s, visits = jax.lax.fori_loop(0, steps, body, (s0, jnp.zeros(n, dtype)))
        steps_f = jnp.asarray(steps, dtype)
        return SimulationResult(s, steps_f, visits, jnp.asarray(steps, jnp.int32),
                                jnp.zeros((), jnp.int32))

    return jax.vmap(one)(jax.random.split(key, replicas))


# ----------------------------------------------------------------------------- public


def _check_key(key):
    k = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(k.dtype, jax.dtypes.prng_key):
        if k.shape != ():
            raise InvalidParameterError(f"key: got a batch of keys of shape {k.shape}, expected one key")
        return k
    if k.dtype != jnp.uint32 or k.shape != (2,):
        raise InvalidParameterError(f"key: expected a JAX PRNG key (jax.random.key(seed) or "
                                    f"jax.random.PRNGKey(seed)), got dtype {k.dtype} shape {k.shape}")
    return k


def _counts(replicas, max_events=None):
    r = check_integer("replicas", replicas, minimum=1)
    m = None if max_events is None else check_integer("max_events", max_events, minimum=1)
    return r, m


def _host_checks(chain, p0, world):
    if world == "traced":
        return chain, jnp.asarray(p0)
    chain = validate_chain(chain)
    return chain, jnp.asarray(check_distribution("p0", p0, chain.n))


def simulate_ctmc(chain: Any, p0: Any, t_end: Any, key: Any, *, replicas: int = 1000,
                  max_events: int = 100_000) -> SimulationResult:
    """Simulate independent CTMC paths over ``[0, t_end]`` (next-event simulation).

    Args:
        chain: a :class:`CTMC` or generator ``Q`` (rates per second); dense or sparse.
        p0: initial distribution, shape ``(n,)``.
        t_end: horizon in seconds (> 0, finite).
        key: a JAX PRNG key; the replicas' streams are split from it.
        replicas: number of independent paths.
        max_events: cap on transitions per path; a replica reaching it before ``t_end`` is
            flagged ``MAX_EVENTS`` (see :attr:`SimulationResult.truncated`).

    Returns:
        :class:`SimulationResult` (JAX arrays; works under ``jax.jit`` with ``replicas`` and
        ``max_events`` static).

    Example:
        >>> import numpy as np, jax, markovsim
        >>> Q = np.array([[-1.0, 1.0], [2.0, -2.0]])
        >>> r = markovsim.simulate_ctmc(Q, np.array([1.0, 0.0]), 10.0, jax.random.key(0), replicas=8)
        >>> r.occupancy.shape, bool(r.truncated.any())
        ((8, 2), False)
    """
    chain = as_chain(chain)
    if isinstance(chain, DTMC):
        raise TypeError("simulate_ctmc: got a DTMC; use simulate_dtmc")
    replicas, max_events = _counts(replicas, max_events)
    chain, p0j, t_end, key = _checked_inputs(chain, p0, t_end, key, "t_end", integer=False)
    nbr, cum, out = _jumps(chain, dtmc=False)
    stop = jnp.zeros(out.shape[0], dtype=bool)
    return _ctmc_paths(nbr, cum, out, p0j.astype(cum.dtype), t_end, stop, key, replicas, max_events)


def simulate_dtmc(chain: Any, p0: Any, steps: Any, key: Any, *, replicas: int = 1000) -> SimulationResult:
    """Simulate independent DTMC paths for ``steps`` steps.

    Args:
        chain: a :class:`DTMC` (transition matrix ``P``; dense or sparse).
        p0: initial distribution, shape ``(n,)``.
        steps: number of steps (integer >= 0).
        key: a JAX PRNG key.
        replicas: number of independent paths.

    Returns:
        :class:`SimulationResult`: ``occupancy`` counts visits at steps ``0 .. steps-1``,
        ``final_state`` is the state at step ``steps``.
    """
    chain = as_chain(chain)
    if not isinstance(chain, DTMC):
        raise InvalidTypeError("simulate_dtmc: expected a DTMC (wrap a transition matrix: DTMC(P))")
    replicas, _ = _counts(replicas)
    chain, p0j, steps, key = _checked_inputs(chain, p0, steps, key, "steps", integer=True)
    nbr, cum, total = _jumps(chain, dtmc=True)
    return _dtmc_paths(nbr, cum, total, p0j.astype(cum.dtype), steps, key, replicas)


def _checked_inputs(chain, p0, horizon, key, name: str, *, integer: bool):
    """Host checks of a simulation's inputs (skipped under tracing): the chain, ``p0``, a
    scalar horizon (seconds, or whole steps when ``integer``) and the PRNG key."""
    world = array_world(chain, p0, horizon, key)
    chain, p0j = _host_checks(chain, p0, world)
    if world != "traced":
        check_times(name, horizon, integer=integer)
        if np.ndim(horizon) != 0:
            raise InvalidParameterError(f"{name}: expected a scalar horizon, got shape {np.shape(horizon)}")
        horizon = int(horizon) if integer else horizon
        key = _check_key(key)
    return chain, p0j, horizon, key


def _estimate(samples: np.ndarray, level: float) -> Estimate:
    r = samples.shape[0]
    if r < 2:
        raise InvalidParameterError(f"replicas={r}: a confidence interval needs at least 2 replicas")
    mean = float(samples.mean())
    stderr = float(samples.std(ddof=1) / np.sqrt(r))
    import scipy.stats  # lazily: importing it costs ~0.5-2 s of every CLI start

    q = float(scipy.stats.t.ppf(0.5 + level / 2.0, r - 1))
    return Estimate(mean, stderr, mean - q * stderr, mean + q * stderr, level=float(level), replicas=int(r))


def _check_level(level):
    lv = float(level)
    if not 0.0 < lv < 1.0:
        raise InvalidParameterError(f"level={level!r}: expected a confidence level in (0, 1), e.g. 0.99")
    return lv


def _refuse_truncated(result: SimulationResult, max_events: int):
    trunc = np.asarray(result.truncated)
    if trunc.any():
        idx = np.flatnonzero(trunc)
        shown = ", ".join(map(str, idx[:5])) + (", ..." if len(idx) > 5 else "")
        raise SolverError(
            f"{len(idx)} of {trunc.size} replicas (indices {shown}) hit max_events={max_events} "
            "before the end of their paths; raise max_events")


def estimate_time_average(chain: Any, p0: Any, rewards: Any, t_end: Any, key: Any, *,
                          replicas: int = 1000, max_events: int = 100_000,
                          level: float = 0.99) -> Estimate:
    """Monte Carlo estimate of the expected time-average reward over ``[0, t_end]``.

    .. math::  \\frac{1}{t_{end}} E\\int_0^{t_{end}} r(X_s)\\,ds
               \\quad\\text{(CTMC)}, \\qquad
               \\frac{1}{T} E\\sum_{k<T} r(X_k) \\quad\\text{(DTMC, } T\\text{ steps)}

    The analytic value is ``accumulated_reward(chain, p0, t_end, rewards) / t_end``.

    Args:
        chain: a :class:`CTMC` / generator (``t_end`` in seconds) or a :class:`DTMC`
            (``t_end`` in steps).
        p0: initial distribution, shape ``(n,)``.
        rewards: reward rate per state, shape ``(n,)``.
        t_end: horizon (> 0).
        key: a JAX PRNG key.
        replicas: number of independent paths (>= 2).
        max_events: cap on transitions per CTMC path.
        level: confidence level of the interval.

    Returns:
        :class:`Estimate`.

    Raises:
        SolverError: some replica hit ``max_events`` (the message names them).
    """
    chain = as_chain(chain)
    level = _check_level(level)
    check_times("t_end", t_end, integer=isinstance(chain, DTMC))
    if not float(t_end) > 0:
        raise InvalidParameterError(f"t_end={t_end!r}: expected a horizon > 0")
    r = check_vector("rewards", rewards, chain.n)
    if isinstance(chain, DTMC):
        res = simulate_dtmc(chain, p0, t_end, key, replicas=replicas)
    else:
        res = simulate_ctmc(chain, p0, t_end, key, replicas=replicas, max_events=max_events)
        _refuse_truncated(res, max_events)
    samples = np.asarray(res.occupancy) @ r / float(t_end)
    return _estimate(samples, level)


def estimate_mean_time_to_absorption(chain: Any, p0: Any, absorbing: Any, key: Any, *,
                                     replicas: int = 1000, max_events: int = 100_000,
                                     level: float = 0.99) -> Estimate:
    """Monte Carlo estimate of the mean time to absorption (the twin of
    :func:`mean_time_to_absorption`).

    Args:
        chain: a :class:`CTMC` or generator ``Q`` (rates per second).
        p0: initial distribution, shape ``(n,)``.
        absorbing: boolean mask or state indices (paths stop on first entry).
        key: a JAX PRNG key.
        replicas: number of independent paths (>= 2).
        max_events: cap on transitions per path.
        level: confidence level of the interval.

    Returns:
        :class:`Estimate` of the mean time in seconds.

    Raises:
        SolverError: some replica hit ``max_events`` before absorption.
        InvalidParameterError: a replica reached a state with no exit outside the
            absorbing set (absorption not certain: the mean is infinite).
    """
    chain = as_chain(chain)
    if isinstance(chain, DTMC):
        raise TypeError("estimate_mean_time_to_absorption: CTMCs only")
    level = _check_level(level)
    replicas, max_events = _counts(replicas, max_events)
    chain, p0j = _host_checks(chain, p0, array_world(chain, p0))
    mask = state_mask("absorbing", absorbing, chain.n)
    key = _check_key(key)
    nbr, cum, out = _jumps(chain, dtmc=False)
    res = _ctmc_paths(nbr, cum, out, p0j.astype(cum.dtype), jnp.inf, jnp.asarray(mask), key, replicas, max_events)
    _refuse_truncated(res, max_events)
    times = np.asarray(res.time)
    if not np.isfinite(times).all():
        i = int(np.argmax(~np.isfinite(times)))
        s = int(np.asarray(res.final_state)[i])
        raise InvalidParameterError(
            f"absorbing: replica {i} reached state {s}, which has no exit and is not absorbing: "
            "absorption is not certain, so the mean time to absorption is infinite")
    return _estimate(times, level)
