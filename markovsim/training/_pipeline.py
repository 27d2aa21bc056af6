r"""Pipeline-parallel schedules: closed-form bubble fractions and an explicit timeline simulator.

Convention (used by every function here)
    One training iteration of ``m`` micro-batches on ``p`` pipeline stages, all stages
    starting at :math:`t=0` and a synchronous optimizer step after the last block of any
    stage (the usual flush). A micro-batch's work on one stage is three blocks: forward
    ``F``, backward with respect to the inputs ``B`` and backward with respect to the
    weights ``W``. Schedules that do not split the backward run ``B`` and ``W`` as one
    block. With ``v`` model chunks per stage (virtual stages) every block of a chunk takes
    ``1/v`` of the stage's time. Sending activations between stages takes no time here
    (point-to-point cost is charged separately by the step-time model).

    The *bubble fraction* is the idle share of the pipeline timeline,

    .. math:: \beta = \frac{\sum_{s} \text{idle}_s}{p \cdot T_\text{makespan}}
              = \frac{b}{b + m (t_F + t_B + t_W)},

    where :math:`b` is each stage's idle time. (Megatron-LM quotes :math:`b / (m\,t)`
    instead, the bubble relative to the ideal time: :math:`(p-1)/m` for 1F1B. The idle
    share is the definition that gives the Pangu Ultra figures 7/23 = 30.43 % and
    7/103 = 6.80 % for ``p=8, m=16, v=6``.)

    The block-time ratio ``F:B:W`` is :math:`1:1:1` unless given (the convention of the
    zero-bubble papers); for schedules with a fused backward the ratio does not matter.

Closed forms (per-stage idle time :math:`b`, with :math:`t = t_F + t_B + t_W`)
    ============  ======================================  ==============================
    schedule      :math:`b`                               domain
    ============  ======================================  ==============================
    gpipe         :math:`(p-1)\,t`                        any ``m``
    1f1b          :math:`(p-1)\,t`                        any ``m``
    interleaved   :math:`(p-1)\,t / v`                    ``m`` a multiple of ``p``
    zb-h1         :math:`(p-1)(t_F + t_B - t_W)`          ``m >= p``, :math:`t_W \le t_B`, :math:`t_W | t_F`
    zb-h2         :math:`(p-1)\,t_F`                      ``m >= 2p-1``, F = B = W
    zb-v          :math:`(p-1)\,t_F / 2`                  ``m >= 2p``, F = B = W
    dualpipe      :math:`(p/2-1)\,t_F`                    even ``p``, even ``m >= 3p``, F = B = W
    ============  ======================================  ==============================

    The zero-bubble papers quote smaller bubbles for ZB-H2 and ZB-V because they also
    remove the optimizer synchronisation (post-update validation), letting the next
    iteration's warm-up overlap this one's cool-down. Under the synchronous convention used
    here the stage that waits longest for its first forward block bounds the bubble from
    below: :math:`(p-1)\,t_F` with one chunk per stage, :math:`(p-1)\,t_F/2` with ZB-V's
    V-shaped placement of two half chunks, and :math:`(p/2-1)\,t_F` for DualPipe, whose
    middle stages receive the first micro-batch of either direction after
    :math:`p/2-1` forward blocks. The list-scheduled ZB-H2, ZB-V and DualPipe timelines of
    :func:`simulate_pipeline` reach these bounds in the stated domains (tests check it);
    DeepSeek-V3's table quotes :math:`(p/2-1)(t_{F\&B} + t_{B} - 3 t_W)` for its hand-built
    DualPipe, which is larger, and whose benefit is mainly the overlap of one micro-batch's
    forward with another's backward (all-to-all hidden behind compute), modelled in the
    step-time model as overlap, not here.
"""

from __future__ import annotations

import dataclasses
import enum
import heapq
from fractions import Fraction
from typing import Sequence

import numpy as np

from .._errors import InvalidParameterError, check_integer, check_size

#: memory of one placed block of a simulated timeline (Python objects with exact times), and
#: the most a simulation may take; larger pipelines are refused up front
_BLOCK_BYTES = 1024
_MAX_TIMELINE_BYTES = 4 * 2**30

__all__ = [
    "SCHEDULE_CODES",
    "idle_per_stage",
    "Schedule",
    "BlockTimes",
    "Block",
    "Timeline",
    "pipeline_bubble_fraction",
    "pipeline_bubble_time",
    "simulate_pipeline",
]


class Schedule(enum.Enum):
    """Pipeline-parallel schedules (values are the accepted names)."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    ZB_H1 = "zb-h1"
    ZB_H2 = "zb-h2"
    ZB_V = "zb-v"
    DUALPIPE = "dualpipe"

    @property
    def splits_backward(self) -> bool:
        """Whether the schedule runs weight gradients (``W``) as separate blocks."""
        return self in (Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V, Schedule.DUALPIPE)


def _schedule(schedule) -> Schedule:
    if isinstance(schedule, Schedule):
        return schedule
    try:
        return Schedule(str(schedule).lower())
    except ValueError:
        raise InvalidParameterError(
            f"schedule={schedule!r}: expected one of {', '.join(s.value for s in Schedule)}"
        ) from None


@dataclasses.dataclass(frozen=True)
class BlockTimes:
    """Relative times of the forward, input-backward and weight-backward blocks of one
    micro-batch on one stage (any unit; only ratios matter). Default ``1:1:1``."""

    forward: float = 1.0
    backward_input: float = 1.0
    backward_weight: float = 1.0

    @property
    def total(self) -> float:
        return self.forward + self.backward_input + self.backward_weight


_DEFAULT_TIMES = BlockTimes()


def _check(sched: Schedule, pp, micro_batches, virtual_stages, times: BlockTimes):
    p = check_integer("pp", pp, minimum=1)
    m = check_integer("micro_batches", micro_batches, minimum=1)
    v = check_integer("virtual_stages", virtual_stages, minimum=1)
    for name in ("forward", "backward_input", "backward_weight"):
        val = getattr(times, name)
        if not (np.isfinite(val) and val > 0):
            raise InvalidParameterError(f"block_times.{name}={val!r}: expected a positive time")
    if sched is Schedule.INTERLEAVED:
        if m % p:
            raise InvalidParameterError(
                f"micro_batches={m}: the interleaved schedule needs a multiple of pp={p}"
            )
    elif sched is Schedule.ZB_V:
        if v not in (1, 2):
            raise InvalidParameterError(
                f"virtual_stages={v}: ZB-V always places 2 chunks per stage (pass 1 or 2)"
            )
        v = 2
    elif sched is Schedule.DUALPIPE:
        if p % 2 or m % 2:
            raise InvalidParameterError(
                f"pp={p}, micro_batches={m}: DualPipe needs an even pp and an even number of "
                "micro-batches (half are fed from each end)"
            )
        if v != 1:
            raise InvalidParameterError(
                f"virtual_stages={v}: DualPipe places one chunk per direction on each stage "
                "(pass 1)"
            )
    elif v != 1:
        raise InvalidParameterError(
            f"virtual_stages={v}: only the interleaved and zb-v schedules use virtual stages "
            f"(got schedule {sched.value!r})"
        )
    if sched is Schedule.ZB_H1:
        if m < p:
            raise InvalidParameterError(f"micro_batches={m}: ZB-H1 needs at least pp={p} micro-batches")
        ratio = (Fraction(times.forward).limit_denominator(10**6)
                 / Fraction(times.backward_weight).limit_denominator(10**6))
        if times.backward_weight > times.backward_input or ratio.denominator != 1:
            raise InvalidParameterError(
                f"block_times={times}: ZB-H1's closed form is stated for backward_weight <= "
                "backward_input and forward a whole multiple of backward_weight (where the "
                "list-scheduled timeline is verified to reach it)"
            )
    if sched in (Schedule.ZB_H2, Schedule.ZB_V, Schedule.DUALPIPE) and not (
            times.forward == times.backward_input == times.backward_weight):
        raise InvalidParameterError(
            f"block_times={times}: the {sched.value} closed form is stated for F = B = W "
            "(the zero-bubble papers' convention); pass equal block times"
        )
    if sched is Schedule.ZB_H2 and m < 2 * p - 1:
        raise InvalidParameterError(
            f"micro_batches={m}: ZB-H2 needs at least 2*pp-1={2 * p - 1} micro-batches"
        )
    if sched is Schedule.ZB_V and m < 2 * p:
        raise InvalidParameterError(f"micro_batches={m}: ZB-V needs at least 2*pp={2 * p} micro-batches")
    if sched is Schedule.DUALPIPE and m < 3 * p:
        raise InvalidParameterError(
            f"micro_batches={m}: DualPipe's closed form needs at least 3*pp={3 * p} micro-batches"
        )
    return p, m, v


#: integer code of each schedule (the order of :class:`Schedule`), for vectorised kernels
SCHEDULE_CODES = {s: i for i, s in enumerate(Schedule)}


def idle_per_stage(code, pp, virtual_stages, forward, backward_input, backward_weight, xp=np):
    """The closed forms of the module table, vectorised: each stage's idle time for schedule
    ``code`` (:data:`SCHEDULE_CODES`), ``pp`` stages, ``virtual_stages`` chunks and block
    times ``forward``, ``backward_input``, ``backward_weight`` (per micro-batch, per stage).

    ``xp`` is the array namespace (``numpy`` or ``jax.numpy``); the one copy of the formulas,
    used by :func:`pipeline_bubble_time` and by the step-time kernel.
    """
    c = SCHEDULE_CODES
    p, v = pp, virtual_stages
    f, b, w = forward, backward_input, backward_weight
    t = f + b + w
    return xp.select(
        [code == c[Schedule.GPIPE], code == c[Schedule.ONE_F_ONE_B], code == c[Schedule.INTERLEAVED],
         code == c[Schedule.ZB_H1], code == c[Schedule.ZB_H2], code == c[Schedule.ZB_V]],
        [(p - 1) * t, (p - 1) * t, (p - 1) * t / v, (p - 1) * (f + b - w), (p - 1) * f, (p - 1) * f / 2],
        default=(p // 2 - 1) * f,
    )


def pipeline_bubble_time(schedule, pp, micro_batches, *, virtual_stages=1,
                         block_times: BlockTimes = _DEFAULT_TIMES) -> float:
    """Idle time of each stage in one iteration, in the unit of ``block_times``.

    See the module docstring for the convention and the table of closed forms.
    """
    sched = _schedule(schedule)
    p, m, v = _check(sched, pp, micro_batches, virtual_stages, block_times)
    return float(idle_per_stage(SCHEDULE_CODES[sched], p, v, block_times.forward,
                                block_times.backward_input, block_times.backward_weight))


def pipeline_bubble_fraction(schedule, pp, micro_batches, *, virtual_stages=1,
                             block_times: BlockTimes = _DEFAULT_TIMES) -> float:
    r"""Idle share of the pipeline timeline of one iteration.

    Args:
        schedule: a :class:`Schedule` or its name: ``"gpipe"``, ``"1f1b"``,
            ``"interleaved"``, ``"zb-h1"``, ``"zb-h2"``, ``"zb-v"``, ``"dualpipe"``.
        pp: number of pipeline stages :math:`p`.
        micro_batches: micro-batches per iteration :math:`m` (per data-parallel replica).
        virtual_stages: model chunks per stage :math:`v` (interleaved; ZB-V uses 2).
        block_times: relative ``F:B:W`` times (default 1:1:1; irrelevant for schedules
            with a fused backward).

    Returns:
        :math:`b / (b + m\,(t_F+t_B+t_W))` with the per-stage idle time :math:`b` of the
        module docstring's table, dimensionless.

    >>> round(pipeline_bubble_fraction("1f1b", 8, 16), 4), round(pipeline_bubble_fraction("interleaved", 8, 16, virtual_stages=6), 4)
    (0.3043, 0.068)
    """
    bubble = pipeline_bubble_time(schedule, pp, micro_batches, virtual_stages=virtual_stages,
                                  block_times=block_times)
    work = int(micro_batches) * block_times.total
    return bubble / (bubble + work)


# --------------------------------------------------------------------------------------
# explicit timeline simulator
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Block:
    """One block of the timeline: ``kind`` in ``"F"``, ``"B"``, ``"W"`` (``"BW"`` for a
    fused backward), on ``stage`` for ``micro_batch`` and model ``chunk``, over
    ``[start, end)``."""

    kind: str
    stage: int
    micro_batch: int
    chunk: int
    start: Fraction
    end: Fraction


@dataclasses.dataclass(frozen=True)
class Timeline:
    """The result of :func:`simulate_pipeline`: every block, the makespan, the per-stage
    busy time and the bubble fraction (idle / (stages x makespan))."""

    blocks: tuple[Block, ...]
    stages: int
    makespan: Fraction
    busy: tuple[Fraction, ...]

    @property
    def bubble_fraction(self) -> float:
        idle = self.stages * self.makespan - sum(self.busy)
        return float(idle / (self.stages * self.makespan))

    @property
    def idle_per_stage(self) -> tuple[Fraction, ...]:
        return tuple(self.makespan - b for b in self.busy)

    def peak_in_flight(self) -> tuple[int, ...]:
        """Per stage, the largest number of (micro-batch, chunk) activations held at once
        (from the start of ``F`` to the end of the last backward block)."""
        events: dict[int, list[tuple[Fraction, int]]] = {s: [] for s in range(self.stages)}
        last = {}
        for blk in self.blocks:
            if blk.kind == "F":
                events[blk.stage].append((blk.start, 1))
            key = (blk.stage, blk.micro_batch, blk.chunk)
            if blk.kind in ("W", "BW"):
                last[key] = blk.end
        for (s, _, _), end in last.items():
            events[s].append((end, -1))
        peaks = []
        for s in range(self.stages):
            level = peak = 0
            for _, d in sorted(events[s], key=lambda e: (e[0], e[1])):
                level += d
                peak = max(peak, level)
            peaks.append(peak)
        return tuple(peaks)


class _Layout:
    """Where each (micro-batch, chunk) runs, and the chunk order of a micro-batch."""

    def __init__(self, sched: Schedule, p: int, m: int, v: int):
        self.p, self.m, self.v = p, m, v
        self.chunks = p * v if sched is not Schedule.DUALPIPE else p
        self.sched = sched

    def enters(self, mb: int, c: int) -> bool:
        """Whether chunk ``c`` is the first chunk of ``mb`` on its stage (a new activation
        the stage must find memory for)."""
        s = self.stage(mb, c)
        return all(self.stage(mb, k) != s for k in range(c))

    def stage(self, mb: int, c: int) -> int:
        p = self.p
        if self.sched is Schedule.ZB_V:
            return c if c < p else 2 * p - 1 - c
        if self.sched is Schedule.DUALPIPE:
            return c if mb < self.m // 2 else p - 1 - c
        return c % p


def _durations(sched: Schedule, v: int, times: BlockTimes) -> dict[str, Fraction]:
    f = Fraction(times.forward).limit_denominator(10**6) / v
    b = Fraction(times.backward_input).limit_denominator(10**6) / v
    w = Fraction(times.backward_weight).limit_denominator(10**6) / v
    return {"F": f, "B": b, "W": w, "BW": b + w}


def _deps(kind: str, mb: int, c: int, n_chunks: int, fused: bool) -> list[tuple[str, int, int]]:
    back = "BW" if fused else "B"
    if kind == "F":
        return [("F", mb, c - 1)] if c > 0 else []
    if kind in ("B", "BW"):
        return [(back, mb, c + 1)] if c < n_chunks - 1 else [("F", mb, c)]
    return [("B", mb, c)]  # W after its own B


def _orders_1f1b(p: int, m: int) -> list[list[tuple[str, int, int]]]:
    orders = []
    for s in range(p):
        warm = min(p - 1 - s, m)
        seq = [("F", i, s) for i in range(warm)]
        for k in range(m - warm):
            seq += [("F", warm + k, s), ("BW", k, s)]
        seq += [("BW", i, s) for i in range(m - warm, m)]
        orders.append(seq)
    return orders


def _orders_gpipe(p: int, m: int):
    return [[("F", i, s) for i in range(m)] + [("BW", i, s) for i in range(m)] for s in range(p)]


def _orders_interleaved(p: int, m: int, v: int):
    """Megatron-LM's interleaved 1F1B order (``m`` a multiple of ``p``)."""
    total = m * v
    orders = []
    for s in range(p):
        def fwd(k):
            chunk = (k // p) % v
            mb = (k // (p * v)) * p + k % p
            return ("F", mb, chunk * p + s)

        def bwd(k):
            chunk = v - 1 - (k // p) % v
            mb = (k // (p * v)) * p + k % p
            return ("BW", mb, chunk * p + s)

        warm = min((p - s - 1) * 2 + (v - 1) * p, total)
        seq = [fwd(k) for k in range(warm)]
        for k in range(total - warm):
            seq += [fwd(warm + k), bwd(k)]
        seq += [bwd(k) for k in range(total - warm, total)]
        orders.append(seq)
    return orders


def _run_orders(orders, layout: _Layout, dur, fused: bool) -> list[Block]:
    p = layout.p
    done: dict[tuple[str, int, int], Fraction] = {}
    free = [Fraction(0)] * p
    pos = [0] * p
    blocks = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, mb, c = orders[s][pos[s]]
                deps = _deps(kind, mb, c, layout.chunks, fused)
                if any(d not in done for d in deps):
                    break
                start = max([free[s]] + [done[d] for d in deps])
                end = start + dur[kind]
                done[(kind, mb, c)] = end
                free[s] = end
                blocks.append(Block(kind, s, mb, c, start, end))
                pos[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - the orders above never deadlock
            raise RuntimeError("pipeline order deadlocked")
    return blocks


def _run_greedy(layout: _Layout, dur, caps: Sequence[int], w_caps: Sequence[int],
                priority) -> list[Block]:
    """Event-driven list scheduling with split backward. When a stage is idle it starts
    the ready block of highest ``priority``, subject to two memory rules: a new ``F`` only
    while fewer than ``caps[stage]`` activations wait for their ``B``; and once
    ``w_caps[stage]`` weight gradients are pending, a ready ``W`` goes first."""
    p, m, n = layout.p, layout.m, layout.chunks
    pending: list[set] = [set() for _ in range(p)]
    for mb in range(m):
        for c in range(n):
            s = layout.stage(mb, c)
            for kind in ("F", "B", "W"):
                pending[s].add((kind, mb, c))
    done: dict[tuple[str, int, int], Fraction] = {}
    busy_until = [Fraction(0)] * p
    held = [0] * p
    w_pending = [0] * p
    running: list[tuple[Fraction, int, tuple[str, int, int]]] = []
    blocks: list[Block] = []
    t = Fraction(0)
    total = 3 * m * n
    while len(done) < total:
        for s in range(p):
            if busy_until[s] > t:
                continue
            ready = []
            for op in pending[s]:
                kind, mb, c = op
                if kind == "F" and held[s] >= caps[s] and layout.enters(mb, c):
                    continue
                if all(d in done for d in _deps(kind, mb, c, n, False)):
                    ready.append(op)
            if not ready:
                continue
            urgent = w_pending[s] >= w_caps[s]
            op = min(ready, key=lambda o: (not (urgent and o[0] == "W"), priority(s, o)))
            pending[s].discard(op)
            kind, mb, c = op
            end = t + dur[kind]
            busy_until[s] = end
            if kind == "F":
                held[s] += 1
            heapq.heappush(running, (end, s, op))
            blocks.append(Block(kind, s, mb, c, t, end))
        if not running:  # pragma: no cover - caps >= 1 always make progress
            raise RuntimeError("greedy pipeline schedule deadlocked")
        t = running[0][0]
        while running and running[0][0] == t:
            end, s, op = heapq.heappop(running)
            done[op] = end
            if op[0] == "B":
                held[s] -= 1
                w_pending[s] += 1
            elif op[0] == "W":
                w_pending[s] -= 1
    return blocks


def simulate_pipeline(schedule, pp, micro_batches, *, virtual_stages=1,
                      block_times: BlockTimes = _DEFAULT_TIMES) -> Timeline:
    """Place every ``F``, ``B`` and ``W`` block of one iteration on the stages and time it.

    Dependencies: ``F`` of chunk ``c`` after ``F`` of chunk ``c-1`` of the same
    micro-batch; the backward of chunk ``c`` after the backward of chunk ``c+1`` (the last
    chunk's backward after its own forward); ``W`` after its own ``B``. A stage runs one
    block at a time. GPipe, 1F1B and interleaved 1F1B follow their fixed per-stage orders
    (Megatron-LM's for the interleaved one) with the backward fused (``BW``); the
    zero-bubble schedules and DualPipe are list-scheduled: an idle stage starts the ready
    block of highest priority (backward first, then forward under the schedule's
    activation-memory cap, then weight gradients), which is how those schedules are built.

    Returns:
        a :class:`Timeline` with exact (rational) times.
    """
    sched = _schedule(schedule)
    p, m, v = _check(sched, pp, micro_batches, virtual_stages, block_times)
    check_size("simulate_pipeline", 3 * p * m * v, item_bytes=_BLOCK_BYTES, what="blocks (3 x pp x micro_batches"
               " x virtual_stages)", limit_bytes=_MAX_TIMELINE_BYTES)
    layout = _Layout(sched, p, m, v)
    dur = _durations(sched, v, block_times)
    if sched is Schedule.GPIPE:
        blocks = _run_orders(_orders_gpipe(p, m), layout, dur, True)
    elif sched is Schedule.ONE_F_ONE_B:
        blocks = _run_orders(_orders_1f1b(p, m), layout, dur, True)
    elif sched is Schedule.INTERLEAVED:
        blocks = _run_orders(_orders_interleaved(p, m, v), layout, dur, True)
    else:
        caps, w_caps = _caps(sched, p)
        blocks = _run_greedy(layout, dur, caps, w_caps, _priority(sched, layout))
    makespan = max(b.end for b in blocks)
    busy = [Fraction(0)] * p
    for b in blocks:
        busy[b.stage] += b.end - b.start
    return Timeline(tuple(blocks), p, makespan, tuple(busy))


def _caps(sched: Schedule, p: int) -> tuple[list[int], list[int]]:
    """Per stage: the most activations waiting for their ``B``, and the most pending
    weight gradients before a ``W`` is forced (``p * 10**6`` means never)."""
    never = [p * 10**6] * p
    if sched is Schedule.ZB_H1:
        return [p - s for s in range(p)], [p] * p  # 1F1B's activation memory
    if sched is Schedule.ZB_H2:
        return [2 * (p - s) - 1 for s in range(p)], never  # ZB-H2: (2p-1) at the first stage
    return [2 * p] * p, never  # two half-size chunks: 1F1B's memory of p full activations


def _priority(sched: Schedule, layout: _Layout):
    order = {"B": 0, "F": 1, "W": 2}

    def key(s, op):
        kind, mb, c = op
        # backward: the oldest micro-batch, deepest chunk first; forward: the oldest
        # micro-batch, then the later chunk (finish one micro-batch before starting more)
        return (order[kind], mb, -c)

    return key
