r"""Linearity (scaling efficiency), with an explicit batch rule, and failures through goodput.

.. math:: \text{linearity}(N) = \frac{X(N)/N}{X(N_0)/N_0}

with the throughput :math:`X` in tokens per second and the baseline size :math:`N_0` (the
first size given). A job grows by data parallelism: ``dp`` scales with the cards; TP, PP,
EP and CP stay (unless ``plan_changes`` says otherwise at a size). What happens to the
global batch is never implied; a **batch rule** states it:

* :class:`FixedGlobalBatch` (strong scaling): the same global batch at every size, so each
  replica gets fewer micro-batches and the pipeline bubble weighs more;
* :class:`FixedReplicaBatch` (weak scaling): each data-parallel replica keeps the same
  number of sequences; the global batch grows with ``dp``;
* :class:`GlobalBatches`: the global batch at each size, as given (a schedule a report
  publishes).

:func:`scaling_curve` is the one implementation; the command line, the ``train`` case kind
and the reproduction scripts call it.

Bound on superlinearity. Every term of the step is non-increasing in per-replica work and
non-decreasing in the number of ranks, except the ones ZeRO shards over data parallelism:
the optimizer update and the gradient-norm read, :math:`S(N)`, which shrink as ``dp``
grows. So, for the same per-replica work,

.. math:: \text{linearity}(N) \le \frac{T(N_0)}{T(N_0) - S(N_0) + S(N)}

(:meth:`ScalingCurve.superlinear_bound`), which is 1 with ZeRO off and exceeds 1 by at
most the sharded terms' share of the baseline step otherwise (0.25 % for the Pangu Ultra
135B plan grown from 256 cards with its gradient reduction fully hidden; any exposed
reduction, whose ring volume grows with ``dp``, eats into it). Under a fixed global batch
every per-replica term shrinks at least as fast as :math:`1/N`, so linearity is at most 1.

Effective throughput = raw throughput x goodput(N); ``goodput`` is a number or a callable
of the number of cards (e.g. from :mod:`markovsim.availability`).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Mapping, Sequence

import numpy as np

from .._errors import InvalidParameterError, check_integer, check_positive, check_probability
from ._hardware import Efficiency, Hardware
from ._plan import Plan, validate_plan
from ._step import _jit_kernel, _plan_arrays, check_elementwise, check_offload, kernel_constants
from ._straggler import SlowNodes, straggler_delay
from ._workload import Workload

__all__ = ["Scaling", "BatchRule", "FixedGlobalBatch", "FixedReplicaBatch", "GlobalBatches", "ScalingCurve",
           "LinearityBand", "linearity", "scale_plan", "scaling_curve", "linearity_band",
           "effective_throughput"]


class Scaling(enum.Enum):
    """Legacy names of the two batch rules (see :func:`scaling_curve` for their meaning)."""

    FIXED_GLOBAL_BATCH = "fixed-global-batch"
    FIXED_REPLICA_BATCH = "fixed-replica-batch"


@dataclasses.dataclass(frozen=True)
class FixedGlobalBatch:
    """The same global batch at every size: ``sequences``, or the plan's own when ``None``."""

    sequences: int | None = None


@dataclasses.dataclass(frozen=True)
class FixedReplicaBatch:
    """The same batch on every data-parallel replica: ``sequences_per_replica``, or the
    plan's own (``global_batch / dp``) when ``None``."""

    sequences_per_replica: int | None = None


@dataclasses.dataclass(frozen=True)
class GlobalBatches:
    """The global batch at each size, in the order of the sizes."""

    sequences: tuple[int, ...]


BatchRule = FixedGlobalBatch | FixedReplicaBatch | GlobalBatches


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
    cards are not a multiple of ``tp * pp * cp``); the global batch held
    (``FIXED_GLOBAL_BATCH``) or grown in proportion to ``cards / base_cards`` (default base:
    the plan's own size)."""
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


def _rule(batch, scaling, plan: Plan, base_cards: int):
    if batch is not None and scaling is not None:
        raise InvalidParameterError("give either batch= (a batch rule) or the legacy scaling=, not both")
    if batch is None:
        if scaling is None:
            raise InvalidParameterError(
                "batch: the batch rule must be explicit: FixedGlobalBatch(...), FixedReplicaBatch(...) "
                "or GlobalBatches(...)")
        # the legacy meaning of scaling_curve: the plan's global batch holds at the baseline
        dp0 = base_cards // (plan.tp * plan.pp * plan.cp)
        if Scaling(scaling) is Scaling.FIXED_GLOBAL_BATCH:
            return FixedGlobalBatch(plan.global_batch)
        if plan.global_batch % max(dp0, 1):
            raise InvalidParameterError(
                f"scaling=fixed-replica-batch: global_batch={plan.global_batch} does not split over the "
                f"baseline's dp={dp0}; give batch=FixedReplicaBatch(sequences_per_replica=...)")
        return FixedReplicaBatch(plan.global_batch // max(dp0, 1))
    if not isinstance(batch, (FixedGlobalBatch, FixedReplicaBatch, GlobalBatches)):
        raise InvalidParameterError(
            f"batch={batch!r}: expected FixedGlobalBatch, FixedReplicaBatch or GlobalBatches")
    return batch


def _describe(rule) -> str:
    if isinstance(rule, FixedGlobalBatch):
        return "the fixed-global batch rule"
    if isinstance(rule, FixedReplicaBatch):
        return "the fixed-replica batch rule"
    return "the given global batches"


def _global_batch(rule, plan: Plan, dp: int, i: int, n_sizes: int) -> int:
    if isinstance(rule, FixedGlobalBatch):
        g = plan.global_batch if rule.sequences is None else rule.sequences
    elif isinstance(rule, FixedReplicaBatch):
        per = plan.global_batch // plan.dp if rule.sequences_per_replica is None else rule.sequences_per_replica
        g = check_integer("batch.sequences_per_replica", per, minimum=1) * dp
    else:
        if len(rule.sequences) != n_sizes:
            raise InvalidParameterError(
                f"batch=GlobalBatches with {len(rule.sequences)} entries: expected one per size ({n_sizes})")
        g = rule.sequences[i]
    return check_integer("global batch", g, minimum=1)


@dataclasses.dataclass(frozen=True)
class ScalingCurve:
    """Per size: cards, global batch (sequences), step time (s), throughput (tokens/s),
    linearity, and the same with failures (goodput); ``sharded_s`` the per-step terms ZeRO
    shards over data parallelism (optimizer and gradient-norm read), for the bound; MFU;
    whether each size's plan fits in memory."""

    cards: np.ndarray
    global_batch: np.ndarray
    step_time: np.ndarray
    tokens_per_s: np.ndarray
    linearity: np.ndarray
    goodput: np.ndarray
    effective_tokens_per_s: np.ndarray
    effective_linearity: np.ndarray
    sharded_s: np.ndarray
    mfu: np.ndarray
    fits: np.ndarray

    def superlinear_bound(self) -> np.ndarray:
        """Upper bound on linearity for the same per-replica work (module docstring)."""
        t0, s0 = self.step_time[0], self.sharded_s[0]
        return t0 / (t0 - s0 + self.sharded_s)


def scaling_curve(workload: Workload, hardware: Hardware, plan: Plan, cards: Sequence[int], *,
                  batch: BatchRule | None = None, scaling: Scaling | None = None,
                  efficiency: Efficiency | None = None, jitter_cv: float = 0.0,
                  slow: SlowNodes | None = None, ranks_per_node: int = 8,
                  goodput: float | Callable = 1.0,
                  plan_changes: Mapping[int, Mapping] | None = None, require_fit: bool = True) -> ScalingCurve:
    r"""Linearity of ``plan`` grown by data parallelism to each of ``cards``; the first entry
    of ``cards`` is the baseline :math:`N_0`.

    Args:
        workload: the model.
        hardware: the accelerator and its links.
        plan: TP, PP, EP, CP and the schedule (its ``dp`` and ``global_batch`` are replaced
            at each size).
        cards: the sizes, the baseline first.
        batch: the batch rule, required: :class:`FixedGlobalBatch`,
            :class:`FixedReplicaBatch` or :class:`GlobalBatches`.
        scaling: legacy spelling instead of ``batch``: ``FIXED_GLOBAL_BATCH`` holds the
            plan's global batch at every size; ``FIXED_REPLICA_BATCH`` gives the baseline the
            plan's global batch and holds its per-replica batch from there.
        efficiency: overlaps and usable memory (``None``: the hardware's,
            :meth:`Hardware.efficiency`).
        jitter_cv: per-rank step-time jitter (coefficient of variation), for
            :func:`straggler_delay` over all cards.
        slow: the healthy/slow process of a node, or ``None``.
        ranks_per_node: ranks per node (slow nodes are counted per node).
        goodput: a probability or a callable of the cards (failures).
        plan_changes: ``{cards: {field: value}}``, plan changes at a size (e.g. a smaller EP
            where the published one does not tile the baseline).
        require_fit: refuse a size whose plan is over the usable HBM (default); ``False``
            computes it anyway (``fits`` is then in the curve).

    Returns:
        a :class:`ScalingCurve`.

    Raises:
        InvalidParameterError: no batch rule, a size the plan does not tile, a global batch
            that does not split into whole micro-batches, or a plan over the usable HBM.

    >>> from markovsim.training import load_plan
    >>> spec = load_plan("pangu_ultra_135b_8k")
    >>> c = scaling_curve(spec.workload, spec.hardware, spec.plan, [256, 4096],
    ...                   batch=FixedGlobalBatch(2048), efficiency=spec.efficiency)
    >>> float(c.linearity[0]), bool(c.linearity[1] < 1)
    (1.0, True)
    """
    cards = [check_integer("cards[i]", n, minimum=1) for n in cards]
    if not cards:
        raise InvalidParameterError("cards: expected at least one size")
    rule = _rule(batch, scaling, plan, cards[0])
    changes = dict(plan_changes or {})
    host = kernel_constants(workload, hardware, efficiency)
    usable = float(host["usable"]) * float(host["hbm"])
    steps, thr, gbs, sharded, mfu, fits = [], [], [], [], [], []
    for i, n in enumerate(cards):
        p = scale_plan(plan, n, scaling=Scaling.FIXED_GLOBAL_BATCH)
        if n in changes:
            p = p.replace(**changes[n])
            p = p.replace(dp=n // (p.tp * p.pp * p.cp))
        g = _global_batch(rule, plan, p.dp, i, len(cards))
        p = p.replace(global_batch=g)
        try:
            p = validate_plan(workload, p, world_size=n)
        except InvalidParameterError as e:
            # say which size of the curve, and under which batch rule, the plan breaks
            raise InvalidParameterError(f"cards={n} (dp={p.dp}, global batch {g} under {_describe(rule)}): {e}") from None
        check_offload(hardware, p)
        check_elementwise(hardware, p)
        out = _jit_kernel(host, _plan_arrays(p, 0.0, workload, hardware))
        fits.append(bool(out["fits"]))
        if require_fit and not fits[-1]:
            raise InvalidParameterError(
                f"cards={n}: the plan does not fit in HBM ({float(out['memory_bytes']) / 2**30:.1f} GiB per "
                f"card, {usable / 2**30:.1f} GiB usable)")
        t0 = float(out["step_time"])
        delay = straggler_delay(t0, n, jitter_cv=jitter_cv, slow=slow, ranks_per_node=ranks_per_node)
        steps.append(t0 + delay)
        thr.append(g * workload.seq_len / (t0 + delay))
        gbs.append(g)
        mfu.append(float(out["mfu"]) * t0 / (t0 + delay))
        sharded.append(float(out["sharded"]))
    cards_a = np.asarray(cards, float)
    thr_a = np.asarray(thr)
    lin = linearity(thr_a, cards_a, thr_a[0], cards_a[0])
    gp = np.asarray([goodput(n) if callable(goodput) else goodput for n in cards], float)
    eff = effective_throughput(thr_a, cards_a, gp)
    return ScalingCurve(cards_a, np.asarray(gbs, float), np.asarray(steps), thr_a, lin, gp, eff,
                        linearity(eff, cards_a, thr_a[0], cards_a[0]), np.asarray(sharded), np.asarray(mfu),
                        np.asarray(fits))


@dataclasses.dataclass(frozen=True)
class LinearityBand:
    """Linearity at ``cards`` against ``base_cards`` under each batch rule, and the band."""

    base_cards: int
    cards: int
    rules: tuple
    values: tuple[float, ...]

    @property
    def low(self) -> float:
        return float(min(self.values))

    @property
    def high(self) -> float:
        return float(max(self.values))


def linearity_band(workload: Workload, hardware: Hardware, plan: Plan, base_cards: int, cards: int, *,
                   batches: Sequence[BatchRule], efficiency: Efficiency | None = None,
                   jitter_cv: float = 0.0, plan_changes: Mapping[int, Mapping] | None = None,
                   skip_infeasible: bool = True, require_fit: bool = True) -> LinearityBand:
    """Linearity at ``cards`` against ``base_cards`` for each batch rule in ``batches`` (an
    unpublished global batch swept over its plausible range), and its band.

    Rules that cannot run at both sizes (a batch that does not split, a plan over HBM) are
    left out when ``skip_infeasible`` (default), else they raise.
    """
    rules, values = [], []
    for rule in batches:
        try:
            curve = scaling_curve(workload, hardware, plan, [base_cards, cards], batch=rule, efficiency=efficiency,
                                  jitter_cv=jitter_cv, plan_changes=plan_changes, require_fit=require_fit)
        except InvalidParameterError:
            if not skip_infeasible:
                raise
            continue
        rules.append(rule)
        values.append(float(curve.linearity[1]))
    if not values:
        raise InvalidParameterError("batches: no batch rule runs at both sizes")
    return LinearityBand(int(base_cards), int(cards), tuple(rules), tuple(values))
