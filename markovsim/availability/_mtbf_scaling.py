r"""MTBF against cluster size with correlated failures: what S-MTBF-1's "one third" needs.

S-MTBF-1: doubling a cluster can cut its MTBF to about one third; independent failures give
one half. With a fault model of shocks (:class:`~markovsim.availability.FaultModel`) the
fault rate of a cluster of :math:`N` nodes is

.. math::  \lambda(N) = N\,\nu \sum_c q_c\, E[K_c(N)],

with :math:`N\nu` the rate of shocks starting in the cluster, :math:`q_c` the class shares and
:math:`K_c(N)` the faults per shock. The MTBF (time between faults) is :math:`1/\lambda(N)`
and its sensitivity to size is the elasticity
:math:`\varepsilon(N) = d\ln\lambda / d\ln N = 1 + d\ln E[K(N)]/d\ln N`.
How a shock's reach grows with the cluster (:class:`Reach`) decides everything:

``LOCAL``
    a shock takes the same number of nodes whatever the cluster's size (a rack, a switch):
    :math:`E[K]` is constant, :math:`\varepsilon = 1`, doubling gives exactly 1/2.
``PROPORTIONAL``
    each extra node of a shock is any other node with a fixed probability (a storm, a bad
    software push, a stress campaign spreading over the fleet):
    :math:`E[K(N)] - 1 = (E[K(M)] - 1)(N-1)/(M-1)`, fitted at the observed size :math:`M`. Then
    :math:`\varepsilon \ge 1` and doubling gives
    :math:`\tfrac12 (1 + x)/(1 + x(2N-1)/(N-1))` with :math:`x = E[K(N)] - 1`, which is 1/3 when
    half the faults are correlated (:math:`x = 1` at large :math:`N`; the same share
    :func:`~markovsim.availability.superlinear_share_for_ratio` gives for an :math:`N^2` term).

Correlated terms of either kind never lower the sensitivity: :math:`\varepsilon \ge 1`.
Counted as *interruptions of one job on a fixed fleet* the picture reverses: a shock
interrupts a job once however many of its nodes it takes, so a job of :math:`N` of the
fleet's :math:`M` nodes sees shocks at rate
:math:`M\nu\sum_c q_c\,(1 - E[(1 - N/M)^{K_c}])`, which grows more slowly than :math:`N`.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np

from .._errors import InvalidParameterError
from ._fit import FaultModel, FaultModelFit

__all__ = ["Reach", "cluster_fault_rate", "mtbf_ratio", "mtbf_elasticity", "job_interruption_rate",
           "MtbfScalingFinding", "mtbf_scaling_finding"]


class Reach(enum.Enum):
    """How a shock's number of extra nodes grows with the cluster (module docstring)."""

    LOCAL = "local"
    PROPORTIONAL = "proportional"


def _mean_extra(model: FaultModel) -> np.ndarray:
    return model.sizes.mean_size() - 1.0


def cluster_fault_rate(model: FaultModel, nodes, *, reach: Reach = Reach.PROPORTIONAL):
    """Faults per second of a cluster of ``nodes`` nodes (all up), reach as given.

    Args:
        model: fitted at ``model.nodes`` nodes.
        nodes: cluster size(s), >= 1.
        reach: :class:`Reach`.
    """
    n = np.asarray(nodes, dtype=float)
    if np.any(n < 1):
        raise InvalidParameterError(f"nodes={nodes!r}: expected cluster sizes >= 1")
    M = model.nodes
    nu = model.shocks.mean_rate() / M                 # shocks per node-second
    extra = _mean_extra(model)
    if reach is Reach.LOCAL:
        k = 1.0 + (model.class_shares * extra).sum() + 0.0 * n
    else:
        k = 1.0 + (model.class_shares * extra).sum() * (n - 1.0) / max(M - 1.0, 1.0)
    return n * nu * k


def mtbf_ratio(model: FaultModel, nodes: float, *, reach: Reach = Reach.PROPORTIONAL, factor: float = 2.0) -> float:
    """``MTBF(factor x nodes) / MTBF(nodes)`` (1/2 on doubling for independent faults)."""
    return float(cluster_fault_rate(model, nodes, reach=reach) / cluster_fault_rate(model, factor * nodes, reach=reach))


def mtbf_elasticity(model: FaultModel, nodes: float, *, reach: Reach = Reach.PROPORTIONAL) -> float:
    """:math:`d\\ln\\lambda/d\\ln N` at ``nodes`` (1 for independent faults; the MTBF's sensitivity)."""
    h = 1e-4
    up = cluster_fault_rate(model, nodes * (1 + h), reach=reach)
    dn = cluster_fault_rate(model, nodes * (1 - h), reach=reach)
    return float((np.log(up) - np.log(dn)) / (np.log1p(h) - np.log1p(-h)))


def job_interruption_rate(model: FaultModel, job_nodes) -> np.ndarray:
    """Shocks per second that touch a job of ``job_nodes`` random nodes of the fitted fleet.

    A shock interrupts the job once when it takes at least one of the job's nodes.
    """
    n = np.asarray(job_nodes, dtype=float)
    M = model.nodes
    if np.any((n < 1) | (n > M)):
        raise InvalidParameterError(f"job_nodes={job_nodes!r}: expected sizes in [1, {M}] (the fitted fleet)")
    f = n[..., None] / M
    phi, th = model.sizes.burst_probability, model.sizes.continuation
    g = 1.0 - f
    # E[g^K] for K = 1 + (0 w.p. 1-phi, Geometric(1-theta) on {1,2,..} w.p. phi)
    geo = (1.0 - th) * g / (1.0 - th * g)
    e_gk = g * ((1.0 - phi) + phi * geo)
    return model.shocks.mean_rate() * ((model.class_shares * (1.0 - e_gk)).sum(axis=-1))


@dataclasses.dataclass(frozen=True)
class MtbfScalingFinding:
    """What S-MTBF-1 needs, and what a fitted trace supports (values with intervals).

    Attributes:
        required_share: correlated share of faults that gives ``target`` on doubling
            (proportional reach, large clusters).
        trace_share: the fitted correlated share (estimate, low, high).
        ratio_proportional: MTBF ratio on doubling from ``nodes`` with proportional reach.
        ratio_local: the same with local reach (1/2).
        ratio_job: job interruptions, a job of half the fleet growing to the whole fleet.
        ratio_lemon_placement: best-first placement on the fitted rate classes, half the fleet
            to the whole fleet (heterogeneity, not correlation).
        nodes_for_target: base size (nodes) from which proportional reach gives ``target``
            on doubling.
        nodes: base size of the doubling.
        target: the claimed ratio.
        level: interval level.
    """

    required_share: float
    trace_share: tuple[float, float, float]
    ratio_proportional: tuple[float, float, float]
    ratio_local: float
    ratio_job: tuple[float, float, float]
    ratio_lemon_placement: tuple[float, float, float]
    nodes_for_target: tuple[float, float, float]
    nodes: int
    target: float
    level: float

    def supports_target(self) -> bool:
        """Whether any correlated-failure reading of the trace reaches ``target`` inside its interval."""
        return self.ratio_proportional[1] <= self.target


def _lemon_ratio(model: FaultModel, small: float, big: float) -> float:
    """Best-first placement: the job takes the lowest-rate nodes first."""
    M = model.nodes
    order = np.argsort(model.rate_class_weights)
    shares = model.rate_class_shares[order] * M
    w = model.rate_class_weights[order]

    def rate(n):
        left, total = n, 0.0
        for s, wi in zip(shares, w):
            take = min(left, s)
            total += take * wi
            left -= take
        return total

    return rate(small) / rate(big)


def _nodes_for(model: FaultModel, target: float) -> float:
    """Smallest base size whose doubling gives ``target`` under proportional reach (inf if none)."""
    from scipy import optimize

    def gap(n):
        return mtbf_ratio(model, n, reach=Reach.PROPORTIONAL) - target

    lo, hi = 1.0, float(model.nodes)
    if gap(lo) <= 0:
        return lo
    while gap(hi) > 0:
        hi *= 2
        if hi > 1e9:
            return float("inf")
    return float(optimize.brentq(gap, lo, hi, xtol=1e-6 * hi))


def mtbf_scaling_finding(fit: FaultModelFit, *, nodes: int | None = None, target: float = 1 / 3,
                         draws: int = 1000, seed: int = 0) -> MtbfScalingFinding:
    """S-MTBF-1 as a mechanism on a fitted trace (module docstring), with intervals.

    Args:
        fit: a fault-model fit.
        nodes: base cluster size of the doubling (default: the fitted fleet's size).
        target: claimed MTBF ratio on doubling.
        draws: parameter draws for the intervals.
        seed: random seed.
    """
    from ._faults import superlinear_share_for_ratio

    m = fit.model
    n = m.nodes if nodes is None else int(nodes)
    models = fit.sample_models(np.random.default_rng(seed), draws)
    lo_q, hi_q = (1 - fit.level) / 2, (1 + fit.level) / 2

    def band(f):
        v = np.array([f(x) for x in models])
        return float(f(m)), float(np.quantile(v, lo_q)), float(np.quantile(v, hi_q))

    half = m.nodes / 2
    return MtbfScalingFinding(
        required_share=superlinear_share_for_ratio(target),
        trace_share=band(lambda x: x.correlated_share()),
        ratio_proportional=band(lambda x: mtbf_ratio(x, n, reach=Reach.PROPORTIONAL)),
        ratio_local=mtbf_ratio(m, n, reach=Reach.LOCAL),
        ratio_job=band(lambda x: float(job_interruption_rate(x, half) / job_interruption_rate(x, m.nodes))),
        ratio_lemon_placement=band(lambda x: _lemon_ratio(x, half, m.nodes)),
        nodes_for_target=band(lambda x: _nodes_for(x, target)),
        nodes=n, target=target, level=fit.level)
