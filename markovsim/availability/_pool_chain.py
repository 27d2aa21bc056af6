r"""The spare pool's chain with phase-type repair, and node rate classes in the MTBF chain.

**Spare pool with phase-type repair.** A node that leaves for repair stays away for a
phase-type time :math:`\mathrm{PH}(\alpha, S)` with :math:`p` phases
(:mod:`markovsim.availability._phasetype`). The pool's CTMC then counts the nodes in
repair *per phase*, :math:`n = (n_1, \dots, n_p)`, next to the job's phase ``U`` (running,
or down for reasons unrelated to the pool), ``S`` (recovering from a spare-taking fault,
no fault arrives) and ``W`` (waiting for a node to come back). With :math:`s` spares:

* ``U`` and ``S`` states hold :math:`|n| \le s`; ``W`` states hold :math:`|n| = s + 1`;
* a node in phase :math:`i` moves to phase :math:`j` at rate :math:`n_i S_{ij}` and
  returns at rate :math:`n_i s_i` (:math:`s = -S\mathbf 1`), in every job phase; a return
  in ``W`` hands the node to the job (``W, n`` to ``S, n - e_i``);
* a spare-taking fault in ``U`` (rate :math:`b`) sends the failed node to phase :math:`i`
  with probability :math:`\alpha_i` (to ``S, n + e_i`` while a spare is left, to
  ``W, n + e_i`` when the pool is empty); with the atom at zero :math:`1 - \sum\alpha` it is
  back at once (``S, n``);
* ``S`` returns to ``U`` at rate ``1 / recovery``.

The chain has :math:`2\binom{s+p}{p} + \binom{s+p}{p-1}` states (:func:`pool_states`);
:data:`MAX_POOL_STATES` bounds it, and a larger pool is refused by
:class:`PoolChainTooLargeError`, which says the size it would need. The stationary
vector :math:`\pi` comes from GTH (:func:`markovsim.engine.gth`). The expected wait per
spare-taking fault is, by PASTA within ``U``,

.. math::  W = \frac{\sum_{u \in U, |n_u| = s} \pi_u \sum_i \alpha_i\, m(n_u + e_i)}
                    {\sum_{u \in U} \pi_u},

with :math:`m` the mean time to leave ``W`` from each ``W`` state (a linear solve on the
``W`` block). With one exponential phase it is the exponential pool of
:func:`markovsim.availability.analyze` term for term.

What the shape changes: with short recoveries the pool is close to an :math:`M/G/\infty`
queue, whose count of nodes in repair depends on the repair time only through its mean,
and the wait moves little (the InfiniteHBD trace's fitted repair, SCV 2, 16 spares: 857 s
against 816 s exponential); long recoveries (no fault can take a spare while the job
recovers) and rare waits (large pools) make it matter more (SCV 8.2, 2 spares, 300 s
recoveries: goodput 0.7046 against 0.7118, the twin siding with the phase-type answer).

The phase-type form sets the *shape*; its time scale is set so that the mean equals the
pool's ``repair_time`` (:func:`effective_repair`), so ``repair_time`` keeps its meaning
(and its derivative: the effect of the mean at a fixed shape). :class:`SparePool`'s host
check refuses a distribution whose own mean differs from ``repair_time``
(:meth:`SparePool.with_repair` sets it).

**Node rate classes in MTBF(N).** Rates of a fitted :class:`FaultModel` are per node-second
*up*; a node of rate class :math:`r` alternates between up (fault rate :math:`w_r \lambda`)
and repair (phase-type, mean :math:`m`). Its per-node chain (up, repair phase 1..p) gives
the share of time up, :math:`P_r(\mathrm{up}) = 1 / (1 + w_r \lambda m)` (insensitive to the
repair's shape, which the chain shows and the tests check). The fault rate of a cluster
of :math:`N` nodes, each up or in repair, is then
:math:`N \sum_r \pi_r w_r \lambda\, P_r(\mathrm{up})` times the shock size factor of
:func:`~markovsim.availability.cluster_fault_rate`: lemon nodes fault more but are away
more, so the heterogeneous cluster faults less than the mean rate says.
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

from .._backend import ops_of
from .._errors import InvalidParameterError, InvalidTypeError, check_integer, check_number
from ._phasetype import PhaseType

__all__ = ["MAX_POOL_STATES", "PoolChainTooLargeError", "pool_states", "effective_repair",
           "pool_wait", "node_up_share", "cluster_fault_rate_with_repair", "repair_mixture"]

#: the largest spare-pool chain (states) the analytic path builds: GTH is dense,
#: :math:`O(n^3)` per solve, and the running share's root search solves it ~40 times
MAX_POOL_STATES = 400


class PoolChainTooLargeError(InvalidParameterError):
    """The spare pool's chain with phase-type repair would exceed :data:`MAX_POOL_STATES`."""


def pool_states(size: int, phases: int) -> int:
    """States of the pool's chain: :math:`2\\binom{s+p}{p} + \\binom{s+p}{p-1}`."""
    s = check_integer("size", size, minimum=0)
    p = check_integer("phases", phases, minimum=1)
    return 2 * math.comb(s + p, p) + math.comb(s + p, p - 1)


def check_pool_size(size: int, phases: int) -> None:
    """Raise :class:`PoolChainTooLargeError` naming the states a pool would need."""
    n = pool_states(size, phases)
    if n > MAX_POOL_STATES:
        fit = max((s for s in range(int(size) + 1) if pool_states(s, phases) <= MAX_POOL_STATES), default=0)
        raise PoolChainTooLargeError(
            f"spares.size={int(size)} with spares.repair of {int(phases)} phases: the spare pool's chain would "
            f"need {n} states; expected at most MAX_POOL_STATES={MAX_POOL_STATES} (at {int(phases)} phases, a "
            f"pool of at most {fit} spares fits); use fewer phases (a 2-phase hyperexponential keeps the mean "
            "and the variance) or the exponential repair (spares.repair=None)")


def _compositions(total: int, parts: int):
    """All length-``parts`` non-negative integer vectors summing to ``total`` (fixed order)."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions(total - first, parts - 1):
            yield (first,) + rest


@functools.lru_cache(maxsize=64)
def _layout(s: int, p: int):
    """Static structure of the pool chain: states and transitions as index arrays.

    Transition ``t`` has rate ``coef[t] * theta[kind[t]]`` with
    ``theta = [S.ravel() (p*p), exit (p), b*alpha (p), b*zero (1), back (1)]``.
    """
    inner = [n for m in range(s + 1) for n in _compositions(m, p)]
    full = list(_compositions(s + 1, p))
    # GTH's anchor (eliminated last) is the empty pool with the job in U, which every state
    # reaches: phases that no repair enters (a zero branch probability) are then transient
    # states of probability 0, not a zero pivot
    states = ([("U", n) for n in inner[1:]] + [("S", n) for n in inner] + [("W", n) for n in full]
              + [("U", inner[0])])
    index = {st: i for i, st in enumerate(states)}
    EXIT, ALPHA, ZERO, BACK = p * p, p * p + p, p * p + 2 * p, p * p + 2 * p + 1
    rows, cols, kind, coef = [], [], [], []

    def add(a, b, k, c):
        rows.append(index[a]), cols.append(index[b]), kind.append(k), coef.append(float(c))

    for ph, n in states:
        for i in range(p):
            if n[i] == 0:
                continue
            for j in range(p):
                if j != i:
                    moved = list(n)
                    moved[i] -= 1
                    moved[j] += 1
                    add((ph, n), (ph, tuple(moved)), i * p + j, n[i])
            less = list(n)
            less[i] -= 1
            add((ph, n), ("S" if ph == "W" else ph, tuple(less)), EXIT + i, n[i])
        if ph == "U":
            for i in range(p):
                more = list(n)
                more[i] += 1
                add((ph, n), ("S" if sum(n) < s else "W", tuple(more)), ALPHA + i, 1)
            add((ph, n), ("S", n), ZERO, 1)
        elif ph == "S":
            add((ph, n), ("U", n), BACK, 1)
    u_idx = np.array([index[("U", n)] for n in inner])
    edge = np.array([index[("U", n)] for n in inner if sum(n) == s])
    # W block: ordering of the W states, and for each edge state and phase, the W state entered
    w_first = index[("W", full[0])]
    enter = np.array([[index[("W", tuple(n[k] + (k == i) for k in range(p)))] - w_first for i in range(p)]
                      for n in inner if sum(n) == s])
    w_counts = np.array(full, dtype=float)
    # moves within W (rows/cols relative to the W block), for the mean time to leave it
    wm = [(index[("W", n)] - w_first, index[("W", tuple(n[k] - (k == i) + (k == j) for k in range(p)))] - w_first,
           i * p + j, n[i]) for n in full for i in range(p) for j in range(p) if i != j and n[i] > 0]
    wm = np.array(wm, dtype=float).reshape(-1, 4)
    return dict(n=len(states), rows=np.array(rows), cols=np.array(cols), kind=np.array(kind),
                coef=np.array(coef), u=u_idx, edge=edge, enter=enter, w_first=w_first, w_counts=w_counts,
                wm=wm)


def effective_repair(pool) -> PhaseType:
    """The pool's repair distribution with its mean set to ``pool.repair_time`` (jit-safe).

    ``pool.repair`` gives the shape; ``None`` is the exponential of mean ``repair_time``.
    """
    if not (hasattr(pool, "repair_time") and hasattr(pool, "repair")):  # a SparePool (not imported: _model uses us)
        raise InvalidTypeError(f"pool={pool!r}: expected a SparePool")
    ops = ops_of(pool)
    xp = ops.xp
    t = xp.asarray(pool.repair_time, dtype=ops.real_dtype(pool.repair_time))
    if pool.repair is None:
        return PhaseType(xp.ones(1, dtype=t.dtype), xp.reshape(-1.0 / t, (1, 1)))
    alpha = xp.asarray(pool.repair.alpha, dtype=t.dtype)
    S = xp.asarray(pool.repair.S, dtype=t.dtype)
    mean = xp.dot(alpha, xp.linalg.solve(-S, xp.ones_like(alpha)))
    return PhaseType(alpha, S * (mean / t))


def _check_phase_type(name: str, value) -> None:
    if not isinstance(value, PhaseType):
        raise InvalidTypeError(f"{name}={value!r}: expected a PhaseType (exponential(), hyperexponential(), "
                               "coxian(), ...)")


def _check_fault_model(model) -> None:
    from ._fit import FaultModel

    if not isinstance(model, FaultModel):
        raise InvalidTypeError(f"model={model!r}: expected a FaultModel (fit_fault_model, infinitehbd_fit)")


def pool_wait(repair: PhaseType, size: int, birth_rate, recovery):
    r"""Expected wait for a spare per spare-taking fault (seconds) and the probability
    that such a fault finds the pool empty, for phase-type repair (module docstring).

    Args:
        repair: repair time of a node, :math:`\mathrm{PH}(\alpha, S)` (per second).
        size: spares :math:`s` (static).
        birth_rate: spare-taking faults per second of ``U`` (floored at 1e-300).
        recovery: mean time in ``S`` after such a fault, seconds.

    jit/vmap/grad-safe; the state count (static) must pass :func:`check_pool_size`.
    """
    from ._checks import concrete

    _check_phase_type("repair", repair)
    s, p = check_integer("size", size, minimum=0), int(repair.alpha.shape[-1])
    if concrete(birth_rate):
        check_number("birth_rate", birth_rate, minimum=0.0, unit="per second")
    if concrete(recovery):
        check_number("recovery", recovery, positive=True, unit="s")
    check_pool_size(s, p)
    return _pool_wait(repair, s, birth_rate, recovery)


def _pool_wait(repair: PhaseType, s: int, birth_rate, recovery):
    """:func:`pool_wait` without its argument checks (the solver's own calls: a complex
    step passes complex rates, and the model was checked once)."""
    p = int(repair.alpha.shape[-1])
    ops = ops_of(repair, birth_rate, recovery)
    xp = ops.xp
    L = _layout(s, p)
    alpha, S = repair.alpha, repair.S
    b = xp.maximum(birth_rate, 1e-300)
    back = 1.0 / xp.clip(recovery, 1e-300, 1e300)
    zero = xp.clip(1.0 - xp.sum(alpha), 0.0, 1.0)
    exit_ = -xp.sum(S, axis=-1)
    theta = xp.concatenate([xp.ravel(S), exit_, b * alpha, xp.reshape(b * zero, (1,)), xp.reshape(back, (1,))])
    rates = xp.asarray(L["coef"]) * theta[L["kind"]]
    Q = ops.add(xp.zeros((L["n"], L["n"]), dtype=rates.dtype), (L["rows"], L["cols"]), rates)
    # bare GTH, as for the exponential pool: the chain is irreducible (every rate on its cycle
    # positive) and the goodput it feeds is checked
    pi = ops.gth(Q)
    pi_u = xp.sum(pi[L["u"]])
    edge = pi[L["edge"]] / pi_u  # (e,): P(an arrival finds this edge state)
    # mean time to leave W from each W state: A m = 1, A = diag(out) - moves within W
    out = xp.asarray(L["w_counts"]) @ (-xp.diagonal(S))
    A = xp.diag(out)
    wm = L["wm"]
    if wm.shape[0]:
        A = ops.add(A, (wm[:, 0].astype(int), wm[:, 1].astype(int)),
                    -xp.asarray(wm[:, 3]) * xp.ravel(S)[wm[:, 2].astype(int)])
    m = xp.linalg.solve(A, xp.ones(A.shape[0], dtype=A.dtype))
    wait = xp.sum(edge * (m[L["enter"]] @ alpha))
    p_empty = xp.sum(edge) * (1.0 - zero)
    return wait, p_empty


# ------------------------------------------------------------------ node classes in MTBF(N)


def node_up_share(rate, repair: PhaseType):
    r"""Share of time a node is up: the stationary vector of its chain (up, repair phases).

    Args:
        rate: the node's fault rate per second up.
        repair: its repair time (phase-type, per second).

    Returns:
        :math:`\pi(\mathrm{up})` (jit/vmap/grad-safe), :math:`= 1/(1 + \text{rate}\cdot E[\text{repair}])`.
    """
    _check_phase_type("repair", repair)
    alpha, S = repair.alpha, repair.S
    p = alpha.shape[-1]
    exit_ = -jnp.sum(S, axis=-1)
    r = jnp.asarray(rate, dtype=S.dtype)
    Q = jnp.zeros((p + 1, p + 1), dtype=S.dtype)
    Q = Q.at[0, 1:].set(r * alpha)  # a zero-time repair is a self-loop: GTH ignores it
    Q = Q.at[1:, 0].set(exit_)
    Q = Q.at[1:, 1:].set(S - jnp.diag(jnp.diagonal(S)))
    from ..engine import gth  # (the engine's imports, scipy.sparse among them, only when used)

    return gth(Q)[0]


def cluster_fault_rate_with_repair(model, nodes, *, reach=None):
    r"""Faults per second of a cluster of ``nodes`` nodes whose failed nodes are away for
    their repair (rate classes and phase-type repair in the per-node chains).

    ``cluster_fault_rate(model, nodes, reach=reach)`` (every node up) multiplied by
    :math:`\sum_r \pi_r w_r P_r(\mathrm{up}) / \sum_r \pi_r w_r`, with :math:`P_r(\mathrm{up})`
    from :func:`node_up_share` for a node of class :math:`r` (fault rate
    :math:`w_r` times the model's node rate; repair: the classes' repair distributions
    mixed by their rates, i.e. the repair time of a random fault, as a phase-type mixture).

    Args:
        model: a :class:`~markovsim.availability.FaultModel`.
        nodes: cluster size(s), >= 1.
        reach: :class:`~markovsim.availability.Reach` (default proportional).
    """
    from ._mtbf_scaling import Reach, cluster_fault_rate

    _check_fault_model(model)

    reach = Reach.PROPORTIONAL if reach is None else reach
    up_rate = cluster_fault_rate(model, nodes, reach=reach)
    repair = repair_mixture(model)
    lam = model.node_rate()
    w = np.asarray(model.rate_class_weights, dtype=float)
    pi = np.asarray(model.rate_class_shares, dtype=float)
    up = np.array([float(node_up_share(lam * wr, repair)) for wr in w])
    return up_rate * float((pi * w * up).sum() / (pi * w).sum())


def repair_mixture(model) -> PhaseType:
    """The repair time of a random fault of ``model`` (its classes' phase-type repairs mixed
    by their rates) as one phase-type distribution (block-diagonal)."""
    _check_fault_model(model)
    w = np.asarray(model.class_rates(), dtype=float)
    w = w / w.sum()
    blocks = [(wi, np.asarray(r.alpha, dtype=float), np.asarray(r.S, dtype=float))
              for wi, r in zip(w, model.repair) if wi > 0]
    k = sum(b[1].size for b in blocks)
    alpha, S = np.zeros(k), np.zeros((k, k))
    at = 0
    for wi, a, s_ in blocks:
        alpha[at:at + a.size] = wi * a
        S[at:at + a.size, at:at + a.size] = s_
        at += a.size
    return PhaseType(jnp.asarray(alpha), jnp.asarray(S))

