r"""Collective-communication costs in the alpha-beta model.

A message of :math:`M` bytes over one link costs :math:`\alpha + M/\beta` (latency
:math:`\alpha`, bandwidth :math:`\beta`). For :math:`n` ranks and a buffer of :math:`M`
bytes per rank (the *full* buffer: the input of an all-reduce or reduce-scatter, the output
of an all-gather, the whole send buffer of an all-to-all):

=================  ==================================================  ============================================
collective         ring (pairwise for all-to-all)                      tree (binary tree / recursive halving-doubling / Bruck)
=================  ==================================================  ============================================
all-reduce         :math:`2(n-1)\alpha + 2\frac{n-1}{n} M/\beta`        :math:`2\lceil\log_2 n\rceil (\alpha + M/\beta)`
reduce-scatter     :math:`(n-1)\alpha + \frac{n-1}{n} M/\beta`          :math:`\lceil\log_2 n\rceil\alpha + \frac{n-1}{n} M/\beta`
all-gather         as reduce-scatter                                   as reduce-scatter
all-to-all         :math:`(n-1)\alpha + \frac{n-1}{n} M/\beta`          :math:`\lceil\log_2 n\rceil(\alpha + \frac{M}{2\beta})`
point-to-point     :math:`\alpha + M/\beta`                            same
=================  ==================================================  ============================================

*Hierarchical* (two levels, :math:`n = n_1 n_2` with :math:`n_1` ranks inside each inner
domain): all-reduce = reduce-scatter inside (:math:`n_1`, buffer :math:`M`) + all-reduce
outside (:math:`n_2`, buffer :math:`M/n_1`) + all-gather inside; reduce-scatter and
all-gather = the inner phase on :math:`M` plus the outer on :math:`M/n_1`; all-to-all =
an inner pairwise exchange plus an outer one, each on :math:`M`.

The functions take scalars or JAX arrays (they broadcast and trace under ``jit``/``vmap``).
"""

from __future__ import annotations

import enum

import jax.numpy as jnp

from .._errors import InvalidParameterError, check_integer, check_nonnegative, check_positive
from ._hardware import Hardware

__all__ = ["Collective", "Algorithm", "alpha_beta_time", "collective_time"]


class Collective(enum.Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"
    P2P = "p2p"


class Algorithm(enum.Enum):
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"


def _log2ceil(n):
    return jnp.ceil(jnp.log2(jnp.maximum(n, 1.0)) - 1e-12)


def _one_level(kind: Collective, size, n, alpha, beta, algorithm: Algorithm):
    n = jnp.asarray(n, dtype=float)
    frac = (n - 1.0) / jnp.maximum(n, 1.0)
    if kind is Collective.P2P:
        return alpha + size / beta
    if algorithm is Algorithm.RING:
        if kind is Collective.ALL_REDUCE:
            t = 2 * (n - 1) * alpha + 2 * frac * size / beta
        else:
            t = (n - 1) * alpha + frac * size / beta
    else:
        k = _log2ceil(n)
        if kind is Collective.ALL_REDUCE:
            t = 2 * k * (alpha + size / beta)
        elif kind is Collective.ALL_TO_ALL:
            t = k * (alpha + size / (2 * beta))
        else:
            t = k * alpha + frac * size / beta
    return jnp.where(n > 1, t, 0.0)


def alpha_beta_time(kind, size_bytes, ranks, *, latency_s, bandwidth_bytes_per_s,
                    algorithm=Algorithm.RING):
    """Time of one collective on a single level of links (see the module table).

    Args:
        kind: a :class:`Collective` or its name.
        size_bytes: the full buffer per rank, bytes.
        ranks: number of participating ranks :math:`n` (2 for point-to-point).
        latency_s: per-message latency :math:`\\alpha`, seconds.
        bandwidth_bytes_per_s: per-rank bandwidth :math:`\\beta`, bytes per second.
        algorithm: :attr:`Algorithm.RING` or :attr:`Algorithm.TREE`.

    Returns:
        seconds (a JAX scalar or array).

    >>> float(alpha_beta_time("all-reduce", 8e9, 4, latency_s=0.0, bandwidth_bytes_per_s=1e9))
    12.0
    """
    kind, algorithm = Collective(kind), Algorithm(algorithm)
    if algorithm is Algorithm.HIERARCHICAL:
        raise InvalidParameterError(
            "algorithm='hierarchical' needs a link hierarchy: use collective_time(..., hardware)")
    return _one_level(kind, jnp.asarray(size_bytes, float), ranks, latency_s,
                      bandwidth_bytes_per_s, algorithm)


def collective_time(kind, size_bytes, ranks, hardware: Hardware, *, algorithm=Algorithm.RING,
                    stride=1, bandwidth_efficiency=1.0):
    """Time of one collective among ``ranks`` accelerators placed ``stride`` apart.

    The group spans ``stride * ranks`` consecutive accelerators; a ring or tree runs at the
    bandwidth and latency of the outermost level it crosses (its slowest link). The
    hierarchical algorithm runs its inner phase among the group members that share an
    innermost domain and its outer phase across domains (module docstring).

    Args:
        kind: a :class:`Collective` or its name.
        size_bytes: the full buffer per rank, bytes.
        ranks: group size.
        hardware: the accelerator and its link levels.
        algorithm: ring, tree or hierarchical.
        stride: distance between consecutive group members in the rank order.
        bandwidth_efficiency: fraction of the link bandwidth reached (0, 1].

    Returns:
        seconds (float).
    """
    kind, algorithm = Collective(kind), Algorithm(algorithm)
    n = check_integer("ranks", ranks, minimum=1)
    stride = check_integer("stride", stride, minimum=1)
    check_nonnegative("size_bytes", size_bytes, unit="bytes")
    check_positive("bandwidth_efficiency", bandwidth_efficiency)
    if kind is Collective.P2P and n != 2:
        raise InvalidParameterError(f"ranks={n}: a point-to-point transfer has 2 ranks")
    hardware.validate()
    levels = hardware.levels
    outer = levels[hardware.level_for_span(stride * n if kind is not Collective.P2P else stride + 1)]
    eff = bandwidth_efficiency
    if algorithm is not Algorithm.HIERARCHICAL or kind is Collective.P2P:
        return float(_one_level(kind, size_bytes, n, outer.latency_s,
                                outer.bandwidth_bytes_per_s * eff, algorithm if algorithm is not Algorithm.HIERARCHICAL else Algorithm.RING))
    inner = levels[0]
    n1 = max(1, min(n, (inner.domain_size or n * stride) // stride))
    if n % n1:
        raise InvalidParameterError(
            f"ranks={n}: a hierarchical collective needs the group to tile the inner domains "
            f"({n1} members each)")
    n2 = n // n1
    a1, b1 = inner.latency_s, inner.bandwidth_bytes_per_s * eff
    a2, b2 = outer.latency_s, outer.bandwidth_bytes_per_s * eff
    rs, ag, ar = Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.ALL_REDUCE
    ring = Algorithm.RING
    if kind is ar:
        t = (_one_level(rs, size_bytes, n1, a1, b1, ring) + _one_level(ar, size_bytes / n1, n2, a2, b2, ring)
             + _one_level(ag, size_bytes, n1, a1, b1, ring))
    elif kind in (rs, ag):
        t = _one_level(kind, size_bytes, n1, a1, b1, ring) + _one_level(kind, size_bytes / n1, n2, a2, b2, ring)
    else:
        t = (_one_level(kind, size_bytes, n1, a1, b1, ring) + _one_level(kind, size_bytes, n2, a2, b2, ring))
    return float(t)
