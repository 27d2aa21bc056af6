r"""How many copies of a token the expert-parallel all-to-all moves.

A token routed to :math:`k` of :math:`E` experts, split evenly over an EP group of :math:`R`
ranks (:math:`g = E/R` experts each) on :math:`N = \lceil R/n_0 \rceil` nodes of :math:`r =
\min(R, n_0)` ranks (:math:`G = E/N` experts each):

* ``per-expert`` dispatch (the default, and the model before the per-rank option):
  :math:`k` copies inside the node, and across nodes one per remote node the token is routed
  to, :math:`\min(k, M)(1 - 1/N)` with node-limited routing to :math:`M` nodes
  (:math:`k(1 - 1/N)` without). Megatron-core's ``alltoall`` dispatcher sends all :math:`k`
  copies across nodes as well, so with node-limited routing this is optimistic for it
  across nodes (a known approximation, kept so that the validated suites do not move);
* ``per-rank`` dispatch (DeepEP, DeepSeek-V3's own): one copy per destination GPU inside the
  node(s), :math:`D_\text{rank}`, and one per destination node across them,
  :math:`D_\text{node}(1 - 1/N)` (each node equally likely to be the sender's own), with

  - ``random`` routing: the :math:`k` experts a uniformly random set (within :math:`M`
    random nodes when the routing is node-limited, :math:`M < N`), so a block of :math:`b`
    of the :math:`a` candidate experts is missed with probability
    :math:`\binom{a-b}{k} / \binom{a}{k}`: :math:`D_\text{rank} = R'\,(1 - \binom{a-g}{k}/\binom{a}{k})`
    and :math:`D_\text{node} = N'\,(1 - \binom{a-G}{k}/\binom{a}{k})`, where :math:`a = E, R' = R,
    N' = N` without a node limit and :math:`a = MG, R' = Mr, N' = M` with one;
  - ``consecutive`` routing (token :math:`i` takes experts :math:`ik .. ik+k-1` mod
    :math:`E`): the distinct ranks and nodes of each window, averaged over one period of
    :math:`E / \gcd(E, k)` tokens (exact).

Dense workloads move nothing (0, 0).
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import InvalidParameterError, check_integer
from ._plan import EPDispatch, ExpertRouting, member

__all__ = ["dispatch_copies"]


def _missed(a: int, b: int, k: int) -> float:
    """Probability that a uniformly random k-subset of a items misses a given b of them."""
    return math.comb(a - b, k) / math.comb(a, k) if a - b >= k else 0.0


def _one(experts: int, k: int, limit: int, node_size: int, ep: int, dispatch: EPDispatch,
         routing: ExpertRouting) -> tuple[float, float]:
    nodes = math.ceil(ep / node_size)
    if dispatch is EPDispatch.PER_EXPERT:
        remote = (min(k, limit) if limit > 0 else k) * (1.0 - 1.0 / nodes)
        return float(k), remote
    per_rank, per_node = max(experts // ep, 1), max(experts // nodes, 1)  # (a masked search candidate may not divide)
    ranks_in_node = min(ep, node_size)
    if routing is ExpertRouting.CONSECUTIVE:
        period = experts // math.gcd(experts, k)
        window = (np.arange(period)[:, None] * k + np.arange(k)[None, :]) % experts
        ranks = window // per_rank
        d_rank = float(np.mean([len(set(row)) for row in ranks]))
        d_node = float(np.mean([len(set(row)) for row in ranks // ranks_in_node]))
    else:
        m = limit if 0 < limit < nodes else nodes
        pool = m * per_node
        d_rank = m * ranks_in_node * (1.0 - _missed(pool, per_rank, k))
        d_node = m * (1.0 - _missed(pool, per_node, k))
    return d_rank, d_node * (1.0 - 1.0 / nodes)


def dispatch_copies(workload, node_size: int, ep, dispatch=EPDispatch.PER_EXPERT,
                    routing=ExpertRouting.RANDOM) -> tuple[np.ndarray, np.ndarray]:
    """Copies of one token the EP all-to-all moves: ``(inside, across)``, the copies on the
    links inside a node and the copies sent over the scale-out network (module docstring),
    one pair per element of ``ep`` (an integer or an array of EP degrees, each dividing the
    routed experts); ``node_size``: accelerators per node.

    >>> from markovsim.training import load_workload
    >>> w = load_workload("deepseek_v3")          # 256 experts, top-8, at most 4 nodes
    >>> inside, across = dispatch_copies(w, 8, 64)
    >>> float(inside), float(across)               # per expert: 8 copies, 4 x 7/8 across
    (8.0, 3.5)
    >>> tuple(round(float(x), 3) for x in dispatch_copies(w, 8, 64, "per-rank", "consecutive"))
    (2.0, 0.875)
    """
    from ._workload import Workload

    if not isinstance(workload, Workload):
        raise InvalidParameterError(f"workload={workload!r:.60}: expected a Workload")
    node_size = check_integer("node_size", node_size, minimum=1)
    d, r = member("dispatch", dispatch, EPDispatch), member("routing", routing, ExpertRouting)
    values = np.asarray(ep, dtype=object)
    for value in values.ravel():
        degree = check_integer("ep", value, minimum=1)
        if workload.moe is not None and workload.moe.routed_experts % degree:
            raise InvalidParameterError(
                f"ep={degree}: expected a divisor of the routed experts ({workload.moe.routed_experts})")
    return copies_array(workload, node_size, values.astype(int), d, r)


def copies_array(workload, node_size: int, ep, dispatch: EPDispatch, routing: ExpertRouting):
    """:func:`dispatch_copies` without the checks (the kernel's callers: validated plans, and
    search candidates whose invalid entries are masked)."""
    ep = np.asarray(ep)
    if workload.moe is None:
        return np.zeros(ep.shape), np.zeros(ep.shape)
    moe = workload.moe
    limit = int(moe.max_nodes_per_token or 0)
    inside, across = np.empty(ep.shape), np.empty(ep.shape)
    for value in np.unique(ep):
        pair = _one(int(moe.routed_experts), int(moe.top_k), limit, int(node_size), int(value), dispatch, routing)
        inside[ep == value], across[ep == value] = pair
    return inside, across
