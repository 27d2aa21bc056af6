r"""The instance-size trade-off: tokens per card against blast radius.

A larger expert-parallel instance spreads the routed experts over more devices, so each
device holds fewer weight bytes and keeps more KV cache: its decode batch, and so its
tokens per second, grows. But any single card fault takes the whole instance down
(S-HW-4), so the instance fails :math:`E` times as often. :func:`cheapest_fleet` searches
the instance size and the spare capacity (extra instances, spare cards) that reach a
target SLO availability with the fewest cards, for a given recovery ladder;
:func:`tier_ladder` shows what each recovery tier adds.

Decode throughput per device (memory-bound decode, a stated simplification that leaves
out compute, communication and scheduling overheads):

.. math::

    w = w_{rep} + w_{exp}/d,\quad
    b = \min\Big(\frac{M - M_{res} - w}{k\,L},\ \frac{\eta B\,T_{tok} - w}{k\,L}\Big),\quad
    \text{tokens/s} = \frac{b\,\eta B}{w + b\,k\,L}

with :math:`d` devices in the instance, :math:`w_{rep}` replicated weight bytes
(attention, shared experts, dense layers), :math:`w_{exp}` routed-expert bytes, :math:`M`
HBM bytes per device, :math:`M_{res}` reserved bytes, :math:`k` KV-cache bytes per token,
:math:`L` cached tokens per sequence, :math:`B` HBM bandwidth, :math:`\eta` the fraction
of it achieved and :math:`T_{tok}` the time-per-output-token target.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Sequence

from .._errors import InvalidParameterError, check_integer, check_positive, check_probability
from .._status import ResultStatus, check_status
from ._fleet import DEFAULT_MAX_RECOVERING, Fleet, FleetResult, analyze_fleet, analyze_independent_fleet
from ._tiers import RecoveryTiers, Tier

__all__ = ["Measure", "DecodeMemoryModel", "decode_batch_per_device", "decode_tokens_per_s_per_card",
           "FrontierPoint", "cheapest_fleet", "frontier_optimum", "tier_ladder"]


class Measure(enum.Enum):
    """Which availability a target applies to.

    ``SLO``: fraction of time in which no request is lost (strictest; every fault's
    unswitched window counts in full, so it follows the number of faults, i.e. the cards).
    ``CAPACITY``: fraction of time with serving capacity >= demand.
    ``REQUESTS``: fraction of requests served (a fault costs its instance's share, 1/K of the
    traffic, so it follows the blast radius E).
    """

    SLO = "slo_availability"
    CAPACITY = "capacity_availability"
    REQUESTS = "request_availability"


@dataclasses.dataclass(frozen=True)
class DecodeMemoryModel:
    """Memory-bound decode throughput of a MoE model on one kind of card.

    Attributes:
        replicated_weight_bytes: bytes every device holds (attention, shared experts, dense layers).
        expert_weight_bytes: routed-expert bytes spread over the instance's devices.
        kv_bytes_per_token: KV-cache bytes per cached token (all layers).
        context_tokens: mean cached tokens per sequence.
        hbm_bytes: HBM bytes per device.
        reserved_bytes: HBM bytes per device kept for activations and the runtime.
        hbm_bandwidth: HBM bytes per second per device.
        bandwidth_efficiency: achieved fraction of ``hbm_bandwidth`` (in (0, 1]).
        time_per_output_token: decode step time target (seconds).
        devices_per_card: devices (dies) per card; a card fault takes all of them.
    """

    replicated_weight_bytes: float
    expert_weight_bytes: float
    kv_bytes_per_token: float
    context_tokens: float
    hbm_bytes: float
    reserved_bytes: float
    hbm_bandwidth: float
    bandwidth_efficiency: float
    time_per_output_token: float
    devices_per_card: int = 1

    def validate(self) -> "DecodeMemoryModel":
        for name in ("replicated_weight_bytes", "reserved_bytes"):
            if getattr(self, name) < 0:
                raise InvalidParameterError(f"serving.{name}={getattr(self, name)!r}: expected a value >= 0")
        for name in ("expert_weight_bytes", "kv_bytes_per_token", "context_tokens", "hbm_bytes",
                     "hbm_bandwidth", "time_per_output_token"):
            check_positive(f"serving.{name}", getattr(self, name))
        check_probability("serving.bandwidth_efficiency", self.bandwidth_efficiency)
        check_positive("serving.bandwidth_efficiency", self.bandwidth_efficiency)
        check_integer("serving.devices_per_card", self.devices_per_card, minimum=1)
        return self


def decode_batch_per_device(model: DecodeMemoryModel, cards: int) -> float:
    """Sequences one device decodes at once in an instance of ``cards`` cards (0 if the weights do not fit)."""
    d = cards * model.devices_per_card
    w = model.replicated_weight_bytes + model.expert_weight_bytes / d
    seq = model.kv_bytes_per_token * model.context_tokens
    by_memory = (model.hbm_bytes - model.reserved_bytes - w) / seq
    by_time = (model.bandwidth_efficiency * model.hbm_bandwidth * model.time_per_output_token - w) / seq
    return max(0.0, min(by_memory, by_time))


def decode_tokens_per_s_per_card(model: DecodeMemoryModel, cards: int) -> float:
    """Decode tokens per second per card in an instance of ``cards`` cards (see the module maths).

    Args:
        model: the memory model (validated here).
        cards: cards per instance (>= 1).

    Returns:
        tokens per second per card; 0 when the weights do not fit.
    """
    model = model.validate()
    cards = check_integer("cards", cards, minimum=1)
    b = decode_batch_per_device(model, cards)
    if b <= 0:
        return 0.0
    d = cards * model.devices_per_card
    w = model.replicated_weight_bytes + model.expert_weight_bytes / d
    step = (w + b * model.kv_bytes_per_token * model.context_tokens) / (
        model.bandwidth_efficiency * model.hbm_bandwidth)
    return b / step * model.devices_per_card


@dataclasses.dataclass(frozen=True)
class FrontierPoint:
    """The cheapest fleet of one instance size that meets the target (or the best found).

    The search is exhaustive over its range (every instance count from the fewest that can
    carry the demand to ``extra_instances`` more, times every spare option), so a point
    that meets the target is proven the cheapest of that range.

    Attributes:
        cards_per_instance: E.
        tokens_per_s_per_card: decode throughput per card at this size.
        demand: demand in full instances.
        instances: K chosen.
        spare_cards: spare pool chosen (``None``: unlimited pool assumed).
        cards: cost in cards (``K E`` plus spares).
        result: the :class:`FleetResult` of the chosen fleet.
        meets_target: whether the chosen measure reaches the target.
        availability: the chosen measure's value.
        status: :class:`~markovsim.ResultStatus`: ``OK`` (meets the target, cheapest of the
            range), ``TARGET_NOT_MET`` (no fleet of the range meets it: the most available is
            returned; more instances or spares may), or the chosen fleet's own status
            (e.g. ``TRUNCATED``).
        instances_searched: ``(lowest, highest)`` instance counts tried.
        spare_options: the spare pools tried.
    """

    cards_per_instance: int
    tokens_per_s_per_card: float
    demand: float
    instances: int
    spare_cards: int | None
    cards: int
    result: FleetResult
    meets_target: bool
    availability: float
    status: ResultStatus = ResultStatus.OK
    instances_searched: tuple[int, int] = (0, 0)
    spare_options: tuple = (None,)


def cheapest_fleet(demand_tokens_per_s: float, sizes: Sequence[int], tiers: RecoveryTiers, *,
                   serving: DecodeMemoryModel, card_fault_rate: float, soft_fault_share: float,
                   target: float, extra_instances: int = 3, spare_options: Sequence[int | None] = (None,),
                   output_tokens_per_request: float = 1000.0, measure: Measure = Measure.SLO,
                   max_recovering: int | None = DEFAULT_MAX_RECOVERING, throw: bool = True) -> list[FrontierPoint]:
    """For each instance size, the fewest cards that reach ``target`` availability.

    For each size E in ``sizes`` (cards per instance) the demand in instances is
    :math:`D = \\text{demand} / (E\\,\\tau(E))` with :math:`\\tau` from
    :func:`decode_tokens_per_s_per_card`; every K from :math:`\\lceil D \\rceil` to
    :math:`\\lceil D\\rceil` + ``extra_instances`` and every spare pool in ``spare_options`` is
    solved, and the cheapest fleet meeting the target is kept (the most available one,
    with status ``TARGET_NOT_MET``, when none meets it). :func:`frontier_optimum` picks the
    cheapest size and says whether it sits on an end of ``sizes``.

    Args:
        demand_tokens_per_s: decode tokens per second the fleet must serve.
        sizes: candidate cards per instance.
        tiers: the recovery ladder.
        serving: the throughput model.
        card_fault_rate: faults per second per card.
        soft_fault_share: share of faults that need no hardware swap.
        target: availability to reach (e.g. 0.9995) in ``measure``.
        extra_instances: instances beyond the minimum to try.
        spare_options: spare pools to try (``None`` = unlimited, solved in product form by
            :func:`analyze_independent_fleet`; a number is solved on the count chain).
        output_tokens_per_request: mean output tokens per request (for request counts).
        measure: the availability the target applies to (:class:`Measure`).
        max_recovering: truncation of each fleet chain.
        throw: if true, a candidate fleet whose result fails its checks raises, naming it; if
            false, such candidates are skipped (never chosen) and the statuses say the rest.

    Returns:
        one :class:`FrontierPoint` per size that fits in memory, in the order of ``sizes``.
    """
    check_positive("demand_tokens_per_s", demand_tokens_per_s, unit="tokens/s")
    check_probability("target", target)
    check_positive("output_tokens_per_request", output_tokens_per_request, unit="tokens")
    extra_instances = check_integer("extra_instances", extra_instances, minimum=0)
    if not isinstance(measure, Measure):
        raise InvalidParameterError(f"measure={measure!r}: expected a Measure (SLO, CAPACITY or REQUESTS)")
    spare_options = tuple(spare_options)
    out = []
    for E in sizes:
        E = check_integer("sizes[]", E, minimum=1)
        tau = decode_tokens_per_s_per_card(serving, E)
        if tau <= 0:
            continue
        per_instance = tau * E
        D = demand_tokens_per_s / per_instance
        batch = decode_batch_per_device(serving, E) * E * serving.devices_per_card
        k_lo = max(1, math.ceil(D - 1e-9))
        k_hi = math.ceil(D - 1e-9) + extra_instances
        best = None
        for K in range(k_lo, k_hi + 1):
            for spares in spare_options:
                fleet = Fleet(instances=K, cards_per_instance=E, card_fault_rate=card_fault_rate,
                              soft_fault_share=soft_fault_share, demand=D, spare_cards=spares,
                              requests_per_s=per_instance / output_tokens_per_request,
                              inflight_requests=batch, tokens_per_s=per_instance)
                if spares is None:  # independent instances: exact product form, any K
                    res = analyze_independent_fleet(fleet, tiers, throw=False)
                else:
                    res = analyze_fleet(fleet, tiers, max_recovering=max_recovering, throw=False)
                if res.status.is_error:
                    if throw:
                        check_status(res.status, what=f"cheapest_fleet (E={E}, K={K}, spare_cards={spares})")
                    continue
                value = getattr(res, measure.value)
                point = FrontierPoint(E, tau, D, K, spares, fleet.cards, res, value >= target, value,
                                      res.status if value >= target else ResultStatus.TARGET_NOT_MET,
                                      (k_lo, k_hi), spare_options)
                if best is None or _better(point, best):
                    best = point
        if best is not None:
            if throw and best.result.status.is_warning:
                check_status(best.result.status, what=f"cheapest_fleet (E={E}, K={best.instances})")
            out.append(best)
    return out


def _better(a: FrontierPoint, b: FrontierPoint) -> bool:
    if a.meets_target != b.meets_target:
        return a.meets_target
    if a.meets_target:
        return (a.cards, -a.availability) < (b.cards, -b.availability)
    return a.availability > b.availability


def frontier_optimum(points: Sequence[FrontierPoint], *,
                     throw: bool = True) -> tuple[FrontierPoint | None, ResultStatus]:
    """The cheapest point of a frontier that meets its target, and where it sits.

    The search over sizes is exhaustive over the candidates, but the candidates are a
    choice: an optimum at the smallest or largest candidate size may be beaten outside.

    Args:
        points: the output of :func:`cheapest_fleet`.
        throw: if true, a :class:`~markovsim.MarkovsimWarning` says when the optimum sits
            on an end of the candidate sizes; if false, only the status does.

    Returns:
        ``(point, status)``: ``OK`` for an interior size, ``AT_LOWER_BOUND`` /
        ``AT_UPPER_BOUND`` when it is the smallest / largest candidate, and
        ``(None, TARGET_NOT_MET)`` when no size meets the target.
    """
    meeting = [p for p in points if p.meets_target]
    if not meeting:
        return None, ResultStatus.TARGET_NOT_MET
    best = min(meeting, key=lambda p: (p.cards, -p.availability))
    sizes = sorted(p.cards_per_instance for p in points)
    status = ResultStatus.OK
    if len(sizes) > 1 and best.cards_per_instance == sizes[0]:
        status = ResultStatus.AT_LOWER_BOUND
    elif len(sizes) > 1 and best.cards_per_instance == sizes[-1]:
        status = ResultStatus.AT_UPPER_BOUND
    if throw and status.is_warning:
        check_status(status, what="frontier_optimum", detail=lambda _i, _s: (
            f"the cheapest fleet uses E={best.cards_per_instance} cards per instance, an end of the candidate "
            f"sizes {sizes}; sizes beyond it were not tried"))
    return best, status


def tier_ladder(fleet: Fleet, tiers: RecoveryTiers, *, order: Sequence[Tier] | None = None,
                max_recovering: int | None = DEFAULT_MAX_RECOVERING) -> list[tuple[tuple[Tier, ...], FleetResult]]:
    """Results with no optional tier, then adding the deployed tiers one at a time.

    Args:
        fleet: the instance pool.
        tiers: the full ladder (its deployed optional tiers are added in ``order``).
        order: the order to add them (default: :class:`Tier` order: switch, fast restart,
            token retry, elastic).
        max_recovering: truncation of each fleet chain.

    Returns:
        ``[(tiers deployed, FleetResult), ...]``, starting with ``()``.
    """
    order = tuple(order) if order is not None else tiers.deployed
    for t in order:
        if not isinstance(t, Tier):
            raise InvalidParameterError(f"order: {t!r} is not a Tier")
        if getattr(tiers, t.value) is None:
            raise InvalidParameterError(f"order: tier {t.value!r} is not deployed in `tiers`")
    steps = []
    for i in range(len(order) + 1):
        on = order[:i]
        steps.append((on, analyze_fleet(fleet, tiers.only(*on), max_recovering=max_recovering)))
    return steps
