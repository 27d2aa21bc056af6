"""Event simulation of a :class:`~markovsim.availability.FaultModel`: synthetic fault logs.

The twin of the fitted fault process (numpy, on the host): shock arrivals from the MMPP,
node choice by rate-class weight among the nodes that are up, phase-type repair times
(shared within a shock with the model's ``repair_shared`` probability).
It produces :class:`~markovsim.availability.FaultLog` objects, so every statistic computed on
an observed log can be computed the same way on simulated ones.
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np

from .._errors import InvalidParameterError
from ._fit import FaultModel
from ._logs import FaultLog

__all__ = ["InitialState", "simulate_fault_log"]


@dataclasses.dataclass(frozen=True)
class InitialState:
    """Where a simulation starts: nodes already down and what is known about them.

    Attributes:
        node_class_probabilities: per node, probability of each rate class (shape
            ``(nodes, R)``); ``None``: drawn from the model's shares (a fresh cluster).
        down_node: nodes down at time 0.
        down_class: class index of each of their faults.
        down_until: when each comes back, seconds (already drawn).
        environment: probabilities of (calm, storm) at time 0; ``None``: stationary.
    """

    node_class_probabilities: np.ndarray | None = None
    down_node: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, int))
    down_class: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, int))
    down_until: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    environment: np.ndarray | None = None


def simulate_fault_log(model: FaultModel, duration: float, rng: np.random.Generator, *,
                       initial: InitialState | None = None, include_initial: bool = False) -> FaultLog:
    """One synthetic fault log of ``model`` over ``[0, duration]`` seconds.

    Faults still open at ``duration`` are right-censored, as in an observed log.

    Args:
        model: the fault model.
        duration: window length, seconds.
        rng: numpy random generator.
        initial: nodes already down and node-class knowledge (default: a fresh cluster, all up).
        include_initial: also list the faults open at time 0 (with start 0) in the log.
    """
    if not np.isfinite(duration) or duration <= 0:
        raise InvalidParameterError(f"duration={duration!r} s: expected a positive window")
    initial = initial or InitialState()
    M = model.nodes
    R = model.rate_class_shares.size
    if initial.node_class_probabilities is None:
        z = rng.choice(R, size=M, p=model.rate_class_shares / model.rate_class_shares.sum())
    else:
        P = np.asarray(initial.node_class_probabilities, dtype=float)
        u = rng.random(M)[:, None]
        z = (u > np.cumsum(P, axis=1)).sum(axis=1).clip(max=R - 1)
    w = model.rate_class_weights[z]
    w_total = w.sum()
    up_until = np.zeros(M)
    up_until[initial.down_node] = initial.down_until
    times = model.shocks.sample_times(rng, duration, initial.environment)
    C = len(model.classes)
    cls = rng.choice(C, size=times.size, p=model.class_shares / model.class_shares.sum())
    size = model.sizes.sample(rng, cls)
    pool = [model.repair[c].sample(rng, int(size[cls == c].sum())).tolist() if np.any(cls == c) else []
            for c in range(C)]
    used = [0] * C
    # the loop below runs once per shock on Python scalars (numpy's per-call cost on scalars
    # was most of the time); bisect_right on the same floats is searchsorted(side="right")
    cum_w = np.cumsum(w).tolist()
    w_total = float(w_total)
    shared = float(model.repair_shared)
    nodes, starts, ends, classes = [], [], [], []
    for t, c, k in zip(times.tolist(), cls.tolist(), np.asarray(size).tolist()):
        first = min(bisect.bisect_right(cum_w, rng.random() * w_total), M - 1)
        if up_until[first] > t:
            continue                                   # the shock's first node is down: lost
        hit = [first]
        if k > 1:
            up = up_until <= t
            up[first] = False
            cand = np.flatnonzero(up)
            if cand.size:
                p = w[cand] / w[cand].sum()
                hit.extend(rng.choice(cand, size=min(k - 1, cand.size), replace=False, p=p).tolist())
        first_end = None
        for j in hit:
            if first_end is not None and rng.random() < shared:
                end = first_end                        # repaired together with the shock's first fault
            else:
                end = t + pool[c][used[c]]
                used[c] += 1
            if first_end is None:
                first_end = end
            nodes.append(j)
            starts.append(t)
            ends.append(end)
            classes.append(c)
            up_until[j] = end
    nodes_a = np.asarray(nodes, dtype=int)
    start_a = np.asarray(starts, dtype=float)
    end_a = np.asarray(ends, dtype=float)
    class_a = np.asarray(classes, dtype=int)
    if include_initial and initial.down_node.size:
        nodes_a = np.concatenate([initial.down_node, nodes_a])
        start_a = np.concatenate([np.zeros(initial.down_node.size), start_a])
        end_a = np.concatenate([initial.down_until, end_a])
        class_a = np.concatenate([initial.down_class, class_a])
    cens = end_a > duration
    end_a = np.minimum(end_a, duration)
    return FaultLog(node=nodes_a, start=start_a, end=end_a, censored=cens, fault_class=class_a,
                    classes=model.classes, node_names=tuple(str(i) for i in range(M)), nodes=M,
                    window=float(duration), source="simulated")
