r"""The fleet chain: K exchangeable instances of E cards each, a shared spare-card pool.

One instance is in one of twelve states (:class:`InstanceState`): serving in full
(``UP``), serving on ``E - 1`` cards after an elastic continuation (``DEGRADED``), stalled
with its requests held (``RETRY``, ``MIGRATE``), restarting with its traffic still routed
to it while the automatic or the manual switch runs (``DETECT_*``, ``MANUAL_*``, each
with the fast or the slow restart under way) or restarting after its traffic was switched
away (``RESTART_FAST``, ``RESTART_SLOW``), or waiting for a replacement card
(``WAIT_CARD``, ``WAIT_TWO_CARDS``, switched away). Without the traffic-switch tier every
down state keeps its traffic (requests sent to it are lost).

The switch and the restart run **in parallel**: re-routing an instance's traffic does not
hold up its restart, so a restart that finishes before the switch brings the instance
straight back up, and a switch only ever turns routed (lossy) downtime into switched
downtime. (Restart times are exponential, so the remaining restart after a switch is
again exponential with the same rate.)

Instances are exchangeable, so the fleet's state is the *number* of instances in each
state, plus the number :math:`f` of free spare cards: the chain has
:math:`\binom{K+11}{11}(S+1)` states at most instead of :math:`12^K (S+1)`. A bound ``J`` on
the number of instances recovering at once (states other than ``UP`` and ``DEGRADED``)
truncates it further; faults that would pass the bound are dropped, and the stationary
mass on the bound is returned as ``truncation_mass`` (a bound on the error's order).

Card faults arrive at rate :math:`\lambda` per card; a fraction ``soft_fault_share`` needs
no hardware swap. Any fault takes the whole instance out of service (S-HW-4), so an
instance of E cards fails at :math:`E\lambda`. A failed card goes to repair and comes
back to the pool after ``repair.repair_time``; an instance that restarts after a hard
fault takes a replacement from the pool at the fault (it waits in ``WAIT_CARD`` when the
pool is empty, and the first repaired card goes to it).

Serving, with demand :math:`D` in units of one full instance's throughput: the instances
still in rotation (all but the switched-out ones) get :math:`D / n_{rot}` each. Traffic
routed to a dead instance is lost, traffic routed to a stalled one is held (served late,
counted as retried), and the serving instances serve the rest up to their capacity
:math:`C = n_{UP} + c_{deg} n_{DEG}`; the excess is shed (lost). The SLO holds in a state
where nothing is lost; the capacity condition is :math:`C \ge D`.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings
from typing import Any

import jax
import numpy as np

from .. import engine as _engine
from .._errors import InvalidParameterError, check_integer, check_nonnegative, check_positive, check_probability
from .._status import ResultStatus, check_status
from .._units import DAY, YEAR
from ._tiers import RecoveryTiers

__all__ = ["InstanceState", "Fleet", "FleetChain", "FleetResult", "fleet_chain", "analyze_fleet",
           "analyze_independent_fleet", "analyse_fleet", "analyse_independent_fleet", "instance_chain", "MONTH"]

#: A month for downtime figures: a twelfth of a Julian year (30.44 days), in seconds.
MONTH = YEAR / 12


class InstanceState(enum.IntEnum):
    """The state of one instance (see the module docstring)."""

    UP = 0
    DEGRADED = 1
    RETRY = 2
    MIGRATE = 3
    DETECT_FAST = 4  #: routed, automatic switch pending, fast restart under way
    DETECT_SLOW = 5  #: routed, automatic switch pending, slow restart under way
    MANUAL_FAST = 6  #: routed, manual switch pending, fast restart under way
    MANUAL_SLOW = 7  #: routed, manual switch pending, slow restart under way
    RESTART_FAST = 8
    RESTART_SLOW = 9
    WAIT_CARD = 10
    WAIT_TWO_CARDS = 11


_N = len(InstanceState)
#: events rarer than this (per second) are dropped: they carry no meaning, and subnormal
#: rates would overflow the elimination of the stationary solver
_NEGLIGIBLE_RATE = 1e-200
S = InstanceState
_RECOVERING = tuple(range(S.RETRY, _N))
#: routed states with a switch pending, by the restart under way
_DETECT = {S.RESTART_FAST: S.DETECT_FAST, S.RESTART_SLOW: S.DETECT_SLOW}
_MANUAL = {S.RESTART_FAST: S.MANUAL_FAST, S.RESTART_SLOW: S.MANUAL_SLOW}
_RESTART_OF = {S.DETECT_FAST: S.RESTART_FAST, S.DETECT_SLOW: S.RESTART_SLOW,
               S.MANUAL_FAST: S.RESTART_FAST, S.MANUAL_SLOW: S.RESTART_SLOW}


#: the default truncation of the count chain (:func:`fleet_chain`, :func:`analyze_fleet`): most
#: instances recovering at once
DEFAULT_MAX_RECOVERING = 3
#: the default truncation of the product form (:func:`analyze_independent_fleet`)
DEFAULT_MAX_RECOVERING_UNLIMITED = 12

#: the largest card fault rate a fleet accepts, per second (one fault per card per second)
MAX_CARD_FAULT_RATE = 1.0


@dataclasses.dataclass(frozen=True)
class Fleet:
    """A pool of K identical serving instances (one role: prefill or decode).

    Attributes:
        instances: K, the number of instances.
        cards_per_instance: E, cards per instance (from the EP/TP/DP layout); any single
            card fault takes the instance down (S-HW-4).
        card_fault_rate: faults per second per card (all modes that stop an instance).
        soft_fault_share: fraction of faults that need no hardware swap (in [0, 1]).
        demand: load in units of one full instance's throughput (``0 < demand``).
        spare_cards: cards in the shared spare pool; ``None`` means an unlimited pool
            (then the instances are independent).
        requests_per_s: requests per second one full instance serves.
        inflight_requests: requests in flight on one full instance (lost or retried at a fault).
        tokens_per_s: tokens per second one full instance serves.
    """

    instances: int
    cards_per_instance: int
    card_fault_rate: float
    soft_fault_share: float
    demand: float
    spare_cards: int | None = None
    requests_per_s: float = 1.0
    inflight_requests: float = 0.0
    tokens_per_s: float = 1.0

    def validate(self) -> "Fleet":
        """Check every value on the host; returns ``self``."""
        check_integer("fleet.instances", self.instances, minimum=1)
        check_integer("fleet.cards_per_instance", self.cards_per_instance, minimum=1)
        check_nonnegative("fleet.card_fault_rate", self.card_fault_rate, unit="per second")
        if self.card_fault_rate > MAX_CARD_FAULT_RATE:
            # rates beyond this make the fleet chain too stiff to solve in float64 (a 1e308 /h
            # rate took the solver 95 s to end NON_FINITE): refuse them at once
            raise InvalidParameterError(
                f"fleet.card_fault_rate={self.card_fault_rate!r} per second: expected at most "
                f"{MAX_CARD_FAULT_RATE:g} (one fault per card per second); a larger rate is not a fault model")
        check_probability("fleet.soft_fault_share", self.soft_fault_share)
        check_positive("fleet.demand", self.demand, unit="instances")
        if self.spare_cards is not None:
            check_integer("fleet.spare_cards", self.spare_cards, minimum=0)
        check_nonnegative("fleet.requests_per_s", self.requests_per_s, unit="requests/s")
        check_nonnegative("fleet.inflight_requests", self.inflight_requests, unit="requests")
        check_nonnegative("fleet.tokens_per_s", self.tokens_per_s, unit="tokens/s")
        if self.demand > self.instances:
            raise InvalidParameterError(
                f"fleet.demand={self.demand!r}: exceeds the fleet's full capacity of "
                f"{self.instances} instances; add instances or lower the demand")
        return self

    @property
    def cards(self) -> int:
        """Cards in service plus spares (the fleet's cost in cards)."""
        return self.instances * self.cards_per_instance + (self.spare_cards or 0)

    @property
    def instance_fault_rate(self) -> float:
        """Faults per second of one full instance: :math:`E\\lambda` (S-HW-4)."""
        return self.cards_per_instance * self.card_fault_rate


jax.tree_util.register_dataclass(
    Fleet,
    data_fields=["card_fault_rate", "soft_fault_share", "demand", "requests_per_s",
                 "inflight_requests", "tokens_per_s"],
    meta_fields=["instances", "cards_per_instance", "spare_cards"],
)


# ----------------------------------------------------------------------------- per instance


class _Rules:
    """The per-instance transition rules for one (fleet, tiers) pair (host floats)."""

    def __init__(self, fleet: Fleet, tiers: RecoveryTiers):
        E = fleet.cards_per_instance
        lam = float(fleet.card_fault_rate)
        s = float(fleet.soft_fault_share)
        self.unlimited = fleet.spare_cards is None
        self.spares = 0 if fleet.spare_cards is None else int(fleet.spare_cards)
        self.up_soft = E * lam * s
        self.up_hard = E * lam * (1.0 - s)
        self.deg_soft = (E - 1) * lam * s
        self.deg_hard = (E - 1) * lam * (1.0 - s)
        r = tiers.token_retry
        self.retry_cov = 0.0 if r is None else float(r.coverage)
        self.retry_rate = 0.0 if r is None else 1.0 / float(r.stall_time)
        e = tiers.elastic
        self.elastic_cov = 0.0 if e is None else float(e.coverage)
        self.migrate_rate = 0.0 if e is None else 1.0 / float(e.migration_time)
        self.reintegrate_rate = 0.0 if e is None else 1.0 / float(e.reintegration_time)
        if e is None or e.degraded_capacity is None:
            self.deg_capacity = (E - 1) / E
        else:
            self.deg_capacity = float(e.degraded_capacity)
        sw = tiers.traffic_switch
        self.switch = sw is not None
        self.switch_cov = 0.0 if sw is None else float(sw.coverage)
        self.switch_rate = 0.0 if sw is None else 1.0 / float(sw.switch_time)
        self.manual_rate = 0.0 if sw is None else 1.0 / float(sw.manual_time)
        fr = tiers.fast_restart
        self.fast_cov = 0.0 if fr is None else float(fr.coverage)
        self.fast_rate = 0.0 if fr is None else 1.0 / float(fr.restart_time)
        self.slow_rate = 1.0 / float(tiers.restart.restart_time)
        self.repair_rate = 1.0 / float(tiers.repair.repair_time)
        self.inflight = float(fleet.inflight_requests)

    # where an instance goes once it is switched out (or at once, without the switch tier)
    def restart_entry(self) -> list[tuple[float, int]]:
        out = []
        if self.fast_cov > 0:
            out.append((self.fast_cov, S.RESTART_FAST))
        if self.fast_cov < 1:
            out.append((1.0 - self.fast_cov, S.RESTART_SLOW))
        return out

    def outage(self, need: int, f: int) -> list[tuple[float, int, int]]:
        """Branches ``(probability, state, change of free spares)`` of an instance outage
        that needs ``need`` replacement cards, with ``f`` free spares."""
        if self.unlimited or f >= need:
            df = 0 if self.unlimited else -need
            if self.switch:  # the restart starts at once, the switch runs alongside
                return [(p, _DETECT[st], df) for p, st in self.restart_entry()]
            return [(p, st, df) for p, st in self.restart_entry()]
        owed = need - f
        return [(1.0, S.WAIT_CARD if owed == 1 else S.WAIT_TWO_CARDS, -f)]

    def moves(self, state: int, f: int) -> list[tuple[float, int, int, float, float]]:
        """One instance's moves: ``(rate, next state, change of free spares, requests
        retried, requests lost)`` (the last two are impulses per move)."""
        out: list = []
        B = self.inflight
        sw_retried = B * self.switch_cov if self.switch else 0.0
        sw_lost = B - sw_retried

        def add(rate, branches, retried, lost):
            for p, st, df in branches:
                if rate * p > _NEGLIGIBLE_RATE:
                    out.append((rate * p, st, df, retried, lost))

        if state == S.UP:
            # soft fault: token-level retry, else an outage with no card to replace
            add(self.up_soft * self.retry_cov, [(1.0, S.RETRY, 0)], B, 0.0)
            add(self.up_soft * (1 - self.retry_cov), self.outage(0, f), sw_retried, sw_lost)
            # hard fault: elastic continuation, else an outage that needs one card
            add(self.up_hard * self.elastic_cov, [(1.0, S.MIGRATE, 0)], B, 0.0)
            add(self.up_hard * (1 - self.elastic_cov), self.outage(1, f), sw_retried, sw_lost)
        elif state == S.DEGRADED:
            # any fault of a degraded instance forces a restart that also restores its card
            r, l = sw_retried * self.deg_capacity, sw_lost * self.deg_capacity
            add(self.deg_soft, self.outage(1, f), r, l)
            add(self.deg_hard, self.outage(2, f), r, l)
            if self.unlimited or f >= 1:
                add(self.reintegrate_rate, [(1.0, S.UP, 0 if self.unlimited else -1)], 0.0, 0.0)
        elif state == S.RETRY:
            add(self.retry_rate, [(1.0, S.UP, 0)], 0.0, 0.0)
        elif state == S.MIGRATE:
            add(self.migrate_rate, [(1.0, S.DEGRADED, 0)], 0.0, 0.0)
        elif state in _RESTART_OF:  # routed, a switch pending, a restart under way
            restart = _RESTART_OF[state]
            done = self.fast_rate if restart == S.RESTART_FAST else self.slow_rate
            add(done, [(1.0, S.UP, 0)], 0.0, 0.0)  # the restart ends before the switch
            if state in _DETECT.values():
                add(self.switch_rate * self.switch_cov, [(1.0, restart, 0)], 0.0, 0.0)
                add(self.switch_rate * (1 - self.switch_cov), [(1.0, _MANUAL[restart], 0)], 0.0, 0.0)
            else:
                add(self.manual_rate, [(1.0, restart, 0)], 0.0, 0.0)
        elif state == S.RESTART_FAST:
            add(self.fast_rate, [(1.0, S.UP, 0)], 0.0, 0.0)
        elif state == S.RESTART_SLOW:
            add(self.slow_rate, [(1.0, S.UP, 0)], 0.0, 0.0)
        # WAIT_* move only when a repaired card arrives (a fleet-level event)
        return out

    def routing(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-state capacity, and masks: serving, held, dead-but-routed, switched out."""
        cap = np.zeros(_N)
        cap[S.UP] = 1.0
        cap[S.DEGRADED] = self.deg_capacity
        serving = np.zeros(_N, bool)
        serving[[S.UP, S.DEGRADED]] = True
        held = np.zeros(_N, bool)
        held[[S.RETRY, S.MIGRATE]] = True
        dead = np.zeros(_N, bool)
        dead[list(_RESTART_OF)] = True
        down = [S.RESTART_FAST, S.RESTART_SLOW, S.WAIT_CARD, S.WAIT_TWO_CARDS]
        switched = np.zeros(_N, bool)
        if self.switch:
            switched[down] = True
        else:
            dead[down] = True
        return cap, serving, held, dead, switched


def _missing(counts) -> int:
    """Instance card slots without a card: degraded/migrating miss one, waiting ones owe theirs."""
    return (counts[S.DEGRADED] + counts[S.MIGRATE] + counts[S.WAIT_CARD] + 2 * counts[S.WAIT_TWO_CARDS])


def _serve(rules: "_Rules", counts: np.ndarray, K: int, D: float):
    """Capacity, lost, held and served demand (full instances) for rows of instance counts."""
    cap_s, serving, held_s, dead_s, switched_s = rules.routing()
    capacity = counts @ cap_s
    n_rot = K - counts[:, switched_s].sum(axis=1)
    share = np.where(n_rot > 0, D / np.maximum(n_rot, 1), 0.0)
    lost_routed = counts[:, dead_s].sum(axis=1) * share
    held = counts[:, held_s].sum(axis=1) * share
    live = np.where(n_rot > 0, counts[:, serving].sum(axis=1) * share, 0.0)
    served = np.minimum(live, capacity)
    lost = np.where(n_rot > 0, lost_routed + (live - served), D)
    return capacity, lost, held, served


# ----------------------------------------------------------------------------- the fleet chain


@dataclasses.dataclass(frozen=True)
class FleetChain:
    """The fleet's CTMC with what each state means.

    Attributes:
        chain: the :class:`markovsim.CTMC` (sparse); labels are ``(counts, free_spares)``
            with ``counts[s]`` instances in :class:`InstanceState` ``s`` (free spares
            ``-1`` for an unlimited pool).
        counts: ``(n, 12)`` integer array of the same counts.
        free_spares: ``(n,)`` free spare cards (``-1``: unlimited).
        capacity: ``(n,)`` serving capacity, in full instances.
        lost: ``(n,)`` demand lost per second, in full instances (traffic routed to dead
            instances plus demand shed beyond capacity).
        held: ``(n,)`` demand held on stalled instances (served late).
        served: ``(n,)`` demand served, in full instances.
        retried_impulse: ``(n,)`` in-flight requests retried per second by moves out of the state.
        lost_impulse: ``(n,)`` in-flight requests lost per second by moves out of the state.
        at_bound: ``(n,)`` states with ``max_recovering`` instances recovering.
    """

    chain: Any
    counts: np.ndarray
    free_spares: np.ndarray
    capacity: np.ndarray
    lost: np.ndarray
    held: np.ndarray
    served: np.ndarray
    retried_impulse: np.ndarray
    lost_impulse: np.ndarray
    at_bound: np.ndarray


def _validated_tiers(fleet: Fleet, tiers: RecoveryTiers) -> RecoveryTiers:
    """The validated ladder, refused where it cannot act on this fleet's instances."""
    tiers = tiers.validate()
    if tiers.elastic is not None and fleet.cards_per_instance < 2:
        raise InvalidParameterError(
            f"fleet.cards_per_instance={fleet.cards_per_instance}: elastic continuation needs "
            "instances of at least 2 cards (it keeps serving on E - 1)")
    return tiers


def fleet_chain(fleet: Fleet, tiers: RecoveryTiers, *,
                max_recovering: int | None = DEFAULT_MAX_RECOVERING) -> FleetChain:
    """Build the fleet chain by exploring the states reachable from "all up, pool full".

    Args:
        fleet: the instance pool (validated here).
        tiers: the recovery ladder (validated here).
        max_recovering: most instances recovering at once (states other than ``UP`` and
            ``DEGRADED``); ``None`` for no bound (exact, larger chain).

    Returns:
        :class:`FleetChain`.
    """
    fleet = fleet.validate()
    tiers = _validated_tiers(fleet, tiers)
    K = int(fleet.instances)
    J = K if max_recovering is None else check_integer("max_recovering", max_recovering, minimum=1)
    J = min(J, K)
    rules = _Rules(fleet, tiers)
    impulses: dict = {}
    # an instance's moves depend only on its state and the free spares: built once each
    moves_of: dict = {}

    def moves(st, f):
        key = (st, f)
        if key not in moves_of:
            moves_of[key] = tuple(rules.moves(st, f))
        return moves_of[key]

    def successors(label):
        counts, f = label
        n_rec = sum(counts[i] for i in _RECOVERING)
        out: dict = {}
        imp_r = imp_l = 0.0
        for st in range(_N):
            n = counts[st]
            if n == 0:
                continue
            for rate, nxt, df, retried, lost in moves(st, f):
                if st in (S.UP, S.DEGRADED) and nxt in _RECOVERING and n_rec >= J:
                    continue  # truncation: no more than J instances recovering
                new = list(counts)
                new[st] -= 1
                new[nxt] += 1
                key = (tuple(new), f + df if f >= 0 else f)
                out[key] = out.get(key, 0.0) + n * rate
                imp_r += n * rate * retried
                imp_l += n * rate * lost
        if not rules.unlimited:
            in_repair = rules.spares + _missing(counts) - f
            if in_repair > 0:
                new = list(counts)
                nf = f
                if counts[S.WAIT_CARD] > 0:  # the first repaired card goes to a waiting instance
                    new[S.WAIT_CARD] -= 1
                    for p, st in rules.restart_entry():
                        n2 = list(new)
                        n2[st] += 1
                        key = (tuple(n2), nf)
                        out[key] = out.get(key, 0.0) + in_repair * rules.repair_rate * p
                    new = None
                elif counts[S.WAIT_TWO_CARDS] > 0:
                    new[S.WAIT_TWO_CARDS] -= 1
                    new[S.WAIT_CARD] += 1
                else:
                    nf = f + 1
                if new is not None:
                    key = (tuple(new), nf)
                    out[key] = out.get(key, 0.0) + in_repair * rules.repair_rate
        impulses[label] = (imp_r, imp_l)
        return out.items()

    start = (tuple([K] + [0] * (_N - 1)), -1 if rules.unlimited else rules.spares)
    ctmc = _engine.CTMC.explore(start, successors)
    counts = np.array([lab[0] for lab in ctmc.labels], dtype=np.int64)
    free = np.array([lab[1] for lab in ctmc.labels], dtype=np.int64)
    imp = np.array([impulses[lab] for lab in ctmc.labels], dtype=float)
    capacity, lost, held, served = _serve(rules, counts, K, float(fleet.demand))
    at_bound = counts[:, list(_RECOVERING)].sum(axis=1) >= J
    if J >= K:
        at_bound = np.zeros(len(counts), bool)
    return FleetChain(ctmc, counts, free, capacity, lost, held, served, imp[:, 0], imp[:, 1], at_bound)


# ----------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class FleetResult:
    """What the fleet chain says about one fleet under one recovery ladder.

    Attributes:
        slo_availability: long-run fraction of time in which no request is lost.
        slo_unavailability: its complement, summed directly over the failing states.
        capacity_availability: long-run fraction of time with serving capacity >= demand.
        request_availability: long-run fraction of requests served (on time or after a retry).
        request_unavailability: fraction of requests lost (requests lost / requests offered).
        capacity_values: the distinct serving capacities (full instances), ascending.
        capacity_probabilities: their stationary probabilities.
        expected_capacity: mean serving capacity (full instances).
        served_tokens_per_s: mean tokens per second served.
        served_fraction: mean share of the demand served (on time or late).
        requests_retried_per_day: requests held and retried (token-level retry, migration,
            re-dispatch after a switch) per day.
        requests_lost_per_day: requests lost per day.
        downtime_per_month: seconds per month (a twelfth of a year) outside the SLO.
        instance_mtbf: mean seconds between faults of one instance (:math:`1/(E\\lambda)`).
        truncation_mass: stationary probability on the truncation bound (0 when exact).
        states: number of states of the fleet chain.
        status: :class:`~markovsim.ResultStatus`: ``OK`` when every probability and share is
            finite and within [0, 1], the capacity distribution sums to 1 and the truncation
            mass is at most 1 % of the SLO unavailability; ``TRUNCATED`` when it is more
            (raise ``max_recovering``); ``OUT_OF_RANGE`` / ``NON_FINITE`` otherwise (e.g.
            more in-flight requests lost at faults than the demand offers: inconsistent
            ``inflight_requests`` and ``requests_per_s``).
    """

    slo_availability: float
    slo_unavailability: float
    capacity_availability: float
    request_availability: float
    request_unavailability: float
    capacity_values: np.ndarray
    capacity_probabilities: np.ndarray
    expected_capacity: float
    served_tokens_per_s: float
    served_fraction: float
    requests_retried_per_day: float
    requests_lost_per_day: float
    downtime_per_month: float
    instance_mtbf: float
    truncation_mass: float
    states: int
    status: ResultStatus = ResultStatus.OK


def analyze_fleet(fleet: Fleet, tiers: RecoveryTiers, *, max_recovering: int | None = DEFAULT_MAX_RECOVERING,
                  method: Any = None, throw: bool = True) -> FleetResult:
    """Solve the fleet chain and return SLO availability, capacity, throughput and losses.

    Args:
        fleet: the instance pool.
        tiers: the recovery ladder.
        max_recovering: truncation of the chain (see :func:`fleet_chain`).
        method: stationary solver (``markovsim.GTH()``, ``markovsim.SparseDirect()``, ...);
            ``None`` lets the engine pick a solver that certifies its answer (GTH: dense,
            banded, or blocked on a wide band such as the CloudMatrix384 decode fleet's,
            as far as it fits; a sparse solver warns when it cannot certify).
        throw: if true, a result that fails its checks raises
            (:class:`~markovsim.SolverError`) and a truncation bound carrying more than 1 % of
            the SLO unavailability issues a :class:`~markovsim.MarkovsimWarning` (raise
            ``max_recovering``); if false, only :attr:`FleetResult.status` says so.

    Returns:
        :class:`FleetResult`.

    Example:
        >>> from markovsim import inference as inf, HOUR, MINUTE, YEAR
        >>> tiers = inf.RecoveryTiers(inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(72 * HOUR))
        >>> fleet = inf.Fleet(instances=1, cards_per_instance=8, card_fault_rate=1 / YEAR,
        ...                   soft_fault_share=0.0, demand=1.0)
        >>> r = inf.analyze_fleet(fleet, tiers)
        >>> round(r.slo_unavailability / (8 / YEAR * 20 * MINUTE / (1 + 8 / YEAR * 20 * MINUTE)), 9)
        1.0
    """
    fc = fleet_chain(fleet, tiers, max_recovering=max_recovering)
    pi = np.asarray(_engine.stationary_distribution(fc.chain, method=method), dtype=float)
    pi = np.clip(pi, 0.0, None)
    pi = pi / pi.sum()
    return _checked(fleet, _summarise(fleet, fc, pi), "analyze_fleet", max_recovering, throw)


def _checked(fleet: Fleet, r: FleetResult, what: str, max_recovering, throw: bool) -> FleetResult:
    """Attach the result's status (its own checks) and, with ``throw``, raise or warn."""
    tol = 1e-9
    shares = {name: getattr(r, name) for name in (
        "slo_availability", "slo_unavailability", "capacity_availability", "request_availability",
        "request_unavailability", "served_fraction")}
    counts = {name: getattr(r, name) for name in (
        "expected_capacity", "served_tokens_per_s", "requests_retried_per_day", "requests_lost_per_day",
        "downtime_per_month", "truncation_mass")}
    values = [*shares.values(), *counts.values(), *np.asarray(r.capacity_probabilities, dtype=float)]
    problem = ""
    if not np.isfinite(values).all():
        status = ResultStatus.NON_FINITE
        problem = ", ".join(k for k, v in {**shares, **counts}.items() if not np.isfinite(v))
    else:
        bad = [f"{k}={v:.6g}" for k, v in shares.items() if not -tol <= v <= 1 + tol]
        bad += [f"{k}={v:.6g}" for k, v in counts.items() if v < -tol]
        probs = np.asarray(r.capacity_probabilities, dtype=float)
        # the product form omits the tail past max_recovering: its breakdowns may fall short
        # of 1 by the truncation mass (which the TRUNCATED test below weighs)
        short = tol + (r.truncation_mass if what == "analyze_independent_fleet" else 0.0)
        if (probs < -tol).any() or not -tol <= 1.0 - probs.sum() <= short:
            bad.append(f"capacity_probabilities (sum {probs.sum():.12g})")
        if not -tol <= 1.0 - (r.slo_availability + r.slo_unavailability) <= short:
            bad.append("slo_availability + slo_unavailability != 1")
        if r.expected_capacity > fleet.instances * (1 + tol):
            bad.append(f"expected_capacity={r.expected_capacity:.6g} above the fleet's {fleet.instances} instances")
        status = ResultStatus.OUT_OF_RANGE if bad else ResultStatus.OK
        problem = "; ".join(bad)
        if any(k.startswith("request_") for k in bad):
            problem += (" (more in-flight requests lost at faults than the demand offers: "
                        "fleet.inflight_requests and fleet.requests_per_s do not fit together)")
        if status is ResultStatus.OK and r.truncation_mass > 0.01 * r.slo_unavailability:
            status = ResultStatus.TRUNCATED
            problem = (f"probability {r.truncation_mass:.3g} on the truncation bound max_recovering={max_recovering} "
                       f"is above 1 % of the SLO unavailability {r.slo_unavailability:.3g}; raise max_recovering "
                       "(in an inference model file: the pool's max_recovering, e.g. --set decode.max_recovering="
                       f"{max_recovering + 1}) for an accurate result; "
                       "the chain grows with it")
    r = dataclasses.replace(r, status=status)
    if throw:
        check_status(status, what=what, detail=lambda _i, _s: problem)
    return r


def analyse_fleet(fleet: Fleet, tiers: RecoveryTiers, *, max_recovering: int | None = DEFAULT_MAX_RECOVERING,
                  method: Any = None, throw: bool = True) -> FleetResult:
    """Deprecated spelling of :func:`analyze_fleet` (one spelling: *analyze*)."""
    warnings.warn("analyse_fleet is deprecated; use analyze_fleet (markovsim spells it 'analyze')",
                  DeprecationWarning, stacklevel=2)
    return analyze_fleet(fleet, tiers, max_recovering=max_recovering, method=method, throw=throw)


def _summarise(fleet: Fleet, fc: FleetChain, pi: np.ndarray) -> FleetResult:
    tol = 1e-12 * max(float(fleet.demand), 1.0)
    fail = fc.lost > tol
    unavail = float(pi[fail].sum())
    ok = float(pi[~fail].sum())
    cap_ok = float(pi[fc.capacity >= fleet.demand - tol].sum())
    values, inverse = np.unique(np.round(fc.capacity, 12), return_inverse=True)
    probs = np.bincount(inverse, weights=pi, minlength=len(values))
    served = float(pi @ fc.served)
    held = float(pi @ fc.held)
    rps = float(fleet.requests_per_s)
    lost_day = DAY * (rps * float(pi @ fc.lost) + float(pi @ fc.lost_impulse))
    retried_day = DAY * (rps * held + float(pi @ fc.retried_impulse))
    rate = fleet.instance_fault_rate
    offered = DAY * rps * float(fleet.demand)
    req_unavail = lost_day / offered if offered > 0 else float(pi @ fc.lost) / float(fleet.demand)
    return FleetResult(
        slo_availability=ok,
        slo_unavailability=unavail,
        capacity_availability=cap_ok,
        request_availability=1.0 - req_unavail,
        request_unavailability=req_unavail,
        capacity_values=values,
        capacity_probabilities=probs,
        expected_capacity=float(pi @ fc.capacity),
        served_tokens_per_s=served * float(fleet.tokens_per_s),
        served_fraction=(served + held) / float(fleet.demand),
        requests_retried_per_day=retried_day,
        requests_lost_per_day=lost_day,
        downtime_per_month=unavail * MONTH,
        instance_mtbf=math.inf if rate == 0 else 1.0 / rate,
        truncation_mass=float(pi[fc.at_bound].sum()),
        states=len(pi),
    )


def instance_chain(fleet: Fleet, tiers: RecoveryTiers):
    """The CTMC of one instance with an unlimited spare pool, over its reachable
    :class:`InstanceState` labels (``UP`` first).

    With an unlimited pool the instances are independent, so the fleet chain is the
    lumped Kronecker sum of K copies of this chain (what the tests check).
    """
    fleet = dataclasses.replace(fleet.validate(), spare_cards=None)
    rules = _Rules(fleet, tiers.validate())

    def successors(st):
        return [(InstanceState(nxt), rate) for rate, nxt, _df, _r, _l in rules.moves(st, -1)]

    return _engine.CTMC.explore(InstanceState.UP, successors)


def analyze_independent_fleet(fleet: Fleet, tiers: RecoveryTiers, *,
                              max_recovering: int = DEFAULT_MAX_RECOVERING_UNLIMITED,
                              throw: bool = True) -> FleetResult:
    """The same figures as :func:`analyze_fleet` for an unlimited spare pool, in product form.

    With an unlimited pool the K instances are independent, so the fleet's counts follow
    a multinomial law over the stationary distribution :math:`\\pi` of one instance
    (:func:`instance_chain`). This sums that law over every count vector with at most
    ``max_recovering`` instances recovering: exact up to the omitted tail (returned as
    ``truncation_mass``), and fast for fleets of hundreds of instances, where the count
    chain is too large.

    Args:
        fleet: the instance pool; ``spare_cards`` must be ``None``.
        tiers: the recovery ladder.
        max_recovering: most instances recovering at once in the sum.
        throw: as in :func:`analyze_fleet`.

    Returns:
        :class:`FleetResult` (``states`` is the number of count vectors summed).
    """
    from scipy.special import gammaln

    fleet = fleet.validate()
    if fleet.spare_cards is not None:
        raise InvalidParameterError(
            f"fleet.spare_cards={fleet.spare_cards!r}: the product form needs an unlimited pool "
            "(spare_cards=None); use analyze_fleet for a finite pool")
    tiers = _validated_tiers(fleet, tiers)
    K = int(fleet.instances)
    J = min(K, check_integer("max_recovering", max_recovering, minimum=1))
    rules = _Rules(fleet, tiers)
    ic = instance_chain(fleet, tiers)
    p_reach = np.asarray(_engine.stationary_distribution(ic), dtype=float)
    p = np.zeros(_N)
    for lab, v in zip(ic.labels, p_reach):
        p[int(lab)] = max(float(v), 0.0)
    p /= p.sum()
    # per-instance impulse rates (in-flight requests retried / lost per second)
    imp = np.zeros((_N, 2))
    for st in range(_N):
        for rate, _nxt, _df, retried, lost in rules.moves(st, -1):
            imp[st] += rate * np.array([retried, lost])
    # The multinomial law aggregates: only five classes matter for serving (up, degraded,
    # held, dead-but-routed, switched out), so sum over those counts, with one
    # representative state per class.
    _cap, _serving, held_s, dead_s, switched_s = rules.routing()
    cls = np.array([p[S.UP], p[S.DEGRADED], p[held_s].sum(), p[dead_s].sum(), p[switched_s].sum()])
    rep = [S.UP, S.DEGRADED, S.RETRY, S.DETECT_SLOW, S.RESTART_SLOW]
    h, x, sw = np.meshgrid(np.arange(J + 1), np.arange(J + 1), np.arange(J + 1), indexing="ij")
    ok = (h + x + sw) <= J
    h, x, sw = h[ok], x[ok], sw[ok]
    nr = h + x + sw
    blocks = []
    for n_deg in range(K + 1):
        sel = nr <= K - n_deg
        c = np.zeros((int(sel.sum()), 5), dtype=np.int64)
        c[:, 1] = n_deg
        c[:, 2], c[:, 3], c[:, 4] = h[sel], x[sel], sw[sel]
        c[:, 0] = K - n_deg - nr[sel]
        blocks.append(c)
    agg = np.concatenate(blocks)
    logp = np.log(np.where(cls > 0, cls, 1.0))
    logpmf = gammaln(K + 1) - gammaln(agg + 1).sum(axis=1) + (agg * logp).sum(axis=1)
    logpmf = np.where((agg[:, cls == 0] > 0).any(axis=1), -np.inf, logpmf)
    w = np.exp(logpmf)
    keep = w > 0
    agg, w = agg[keep], w[keep]
    counts = np.zeros((len(w), _N), dtype=np.int64)
    counts[:, rep] = agg
    capacity, lost, held, served = _serve(rules, counts, K, float(fleet.demand))
    total = float(w.sum())
    fake = FleetChain(None, counts, np.full(len(w), -1), capacity, lost, held, served,
                      np.zeros(len(w)), np.zeros(len(w)), np.zeros(len(w), bool))
    res = _summarise(fleet, fake, w)
    extra = DAY * K * (p @ imp)
    lost_day = res.requests_lost_per_day + float(extra[1])
    offered = DAY * float(fleet.requests_per_s) * float(fleet.demand)
    req_unavail = lost_day / offered if offered > 0 else res.request_unavailability
    res = dataclasses.replace(
        res,
        requests_retried_per_day=res.requests_retried_per_day + float(extra[0]),
        requests_lost_per_day=lost_day,
        request_availability=1.0 - req_unavail,
        request_unavailability=req_unavail,
        truncation_mass=max(0.0, 1.0 - total),
        states=int(len(w)),
    )
    return _checked(fleet, res, "analyze_independent_fleet", max_recovering, throw)


def analyse_independent_fleet(fleet: Fleet, tiers: RecoveryTiers, *,
                              max_recovering: int = DEFAULT_MAX_RECOVERING_UNLIMITED,
                              throw: bool = True) -> FleetResult:
    """Deprecated spelling of :func:`analyze_independent_fleet` (one spelling: *analyze*)."""
    warnings.warn("analyse_independent_fleet is deprecated; use analyze_independent_fleet "
                  "(markovsim spells it 'analyze')", DeprecationWarning, stacklevel=2)
    return analyze_independent_fleet(fleet, tiers, max_recovering=max_recovering, throw=throw)
