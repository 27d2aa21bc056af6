r"""Linearity (scaling efficiency) and failures joining in through goodput.

.. math:: \text{linearity}(N) = \frac{X(N)/N}{X(N_0)/N_0}

with the throughput :math:`X` in tokens per second and the baseline size :math:`N_0`.
A job grows by data parallelism: ``dp`` scales with the cards, TP, PP, EP and CP stay.
Two ways to grow:

* :attr:`Scaling.FIXED_GLOBAL_BATCH` (strong scaling): the global batch stays, so each
  replica gets fewer micro-batches and the pipeline bubble weighs more;
* :attr:`Scaling.FIXED_REPLICA_BATCH` (weak scaling): each replica keeps its batch and the
  global batch grows with ``dp``.

Linearity is at most 1 in this model except for one genuine superlinear term: with ZeRO the
optimizer step is sharded over ``dp`` and shrinks as the job grows; when the gradient
reduction is fully hidden this can lift linearity above 1 by the optimizer's share of the
step (well under 1 % for the published plans).

Effective throughput = raw throughput x goodput(N); ``goodput`` is a number or a callable
of the number of cards (e.g. from :mod:`markovsim.availability`), so linearity can be shown
with and without failures.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Sequence

import numpy as np

from .._errors import InvalidParameterError, check_integer, check_positive, check_probability
from ._hardware import Efficiency, Hardware
from ._plan import Plan, validate_plan
from ._step import _as_jax, _jit_kernel, _plan_arrays, workload_constants
from ._straggler import SlowNodes, straggler_delay
from ._workload import Workload

__all__ = ["Scaling", "ScalingCurve", "linearity", "scale_plan", "scaling_curve", "effective_throughput"]


class Scaling(enum.Enum):
    FIXED_GLOBAL_BATCH = "fixed-global-batch"
    FIXED_REPLICA_BATCH = "fixed-replica-batch"


def linearity(throughput, cards, base_throughput, base_cards):
    """(throughput / cards) / (base_throughput / base_cards); broadcasts over arrays."""
    check_positive("base_throughput", base_throughput)
    check_positive("cards", cards)
    check_positive("base_cards", base_cards)
    return (np.asarray(throughput, float) / np.asarray(cards, float)) / (base_throughput / base_cards)


def effective_throughput(throughput, cards, goodput):
    """Raw throughput x goodput(cards); ``goodput`` a probability or a callable of cards."""
    g = goodput(cards) if callable(goodput) else goodput
    g = np.asarray(g, float)
    check_probability("goodput", g)
    return np.asarray(throughput, float) * g


def scale_plan(plan: Plan, cards: int, *, scaling: Scaling = Scaling.FIXED_REPLICA_BATCH,
               base_cards: int | None = None) -> Plan:
    """The plan at ``cards`` accelerators: same TP/PP/EP/CP, ``dp`` scaled (error if the
    cards are not a multiple of ``tp * pp * cp``)."""
    n = check_integer("cards", cards, minimum=1)
    unit = plan.tp * plan.pp * plan.cp
    if n % unit:
        raise InvalidParameterError(
            f"cards={n}: the plan does not tile it (a multiple of tp x pp x cp = {unit} needed)")
    dp = n // unit
    base = plan.world_size if base_cards is None else base_cards
    gbs = plan.global_batch
    if Scaling(scaling) is Scaling.FIXED_REPLICA_BATCH:
        gbs = plan.global_batch * n // base
    return plan.replace(dp=dp, global_batch=gbs)


@dataclasses.dataclass(frozen=True)
class ScalingCurve:
    """Per size: cards, step time (s), throughput (tokens/s), linearity, and the same with
    failures (goodput)."""

    cards: np.ndarray
    step_time: np.ndarray
    tokens_per_s: np.ndarray
    linearity: np.ndarray
    goodput: np.ndarray
    effective_tokens_per_s: np.ndarray
    effective_linearity: np.ndarray


def scaling_curve(workload: Workload, hardware: Hardware, plan: Plan, cards: Sequence[int], *,
                  scaling: Scaling = Scaling.FIXED_REPLICA_BATCH,
                  efficiency: Efficiency = Efficiency(), jitter_cv: float = 0.0,
                  slow: SlowNodes | None = None, ranks_per_node: int = 8,
                  goodput: float | Callable = 1.0) -> ScalingCurve:
    """Linearity of ``plan`` grown by data parallelism to each of ``cards``; the first
    entry of ``cards`` is the baseline :math:`N_0`, at which ``plan``'s global batch holds.

    Stragglers (``jitter_cv``, ``slow``) add :func:`straggler_delay` over all cards.
    """
    cards = [check_integer("cards[i]", c, minimum=1) for c in cards]
    if not cards:
        raise InvalidParameterError("cards: expected at least one size")
    base_plan = scale_plan(plan, cards[0], scaling=Scaling.FIXED_GLOBAL_BATCH)
    c = _as_jax(workload_constants(workload, hardware, efficiency))
    steps, thr = [], []
    for n in cards:
        p = scale_plan(base_plan, n, scaling=scaling, base_cards=cards[0])
        validate_plan(workload, p, world_size=n)
        out = _jit_kernel(c, _plan_arrays(p, 0.0))
        t0 = float(out["step_time"])
        if not bool(out["fits"]):
            raise InvalidParameterError(f"cards={n}: the plan does not fit in HBM")
        delay = straggler_delay(t0, n, jitter_cv=jitter_cv, slow=slow, ranks_per_node=ranks_per_node)
        steps.append(t0 + delay)
        thr.append(p.global_batch * workload.seq_len / (t0 + delay))
    cards_a = np.asarray(cards, float)
    thr_a = np.asarray(thr)
    lin = linearity(thr_a, cards_a, thr_a[0], cards_a[0])
    g = np.asarray([goodput(n) if callable(goodput) else goodput for n in cards], float)
    eff = effective_throughput(thr_a, cards_a, g)
    return ScalingCurve(cards_a, np.asarray(steps), thr_a, lin, g, eff,
                        linearity(eff, cards_a, thr_a[0], cards_a[0]))
