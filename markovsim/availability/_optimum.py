r"""The checkpoint interval that maximises the goodput of the whole tiered model.

**Feasible range.** Any interval :math:`\tau > 0` for blocking saves; for background saves
the write (stretched by its interference) must end within the first in-memory segment,
:math:`\tau > \tau_{min} = n (1 - i) w` (:func:`~markovsim.availability.min_background_interval`).

**Search.** On :math:`\log\tau` over the window :math:`[\tau_0/10^3,\ 10^3\tau_0]` cut to the
feasible range, with :math:`\tau_0 = \sqrt{2 C / \lambda}` (Young's estimate from the save
cost and the rate of faults that roll back to a checkpoint): a grid of 25 points finds the
best cell, golden-section search refines it inside its two neighbouring
cells, and the answer is then **proven** by comparing it with its neighbours at
:math:`\tau e^{\pm 10^{-3}}`: an interior optimum must beat both; an optimum on an end of
the window must beat the point just inside. Goodput need not be unimodal in
:math:`\tau`, so the grid, not a bracket assumption, picks the basin.

**Status.** ``OK`` (interior, proven), ``AT_LOWER_BOUND`` (goodput falls from the lower
end: the smallest feasible background interval, or the window's end), ``AT_UPPER_BOUND``
(goodput still rises at the upper end: no finite optimum, e.g. when no fault rolls back to
a checkpoint), ``NOT_CONVERGED`` (a neighbour beats the answer), or the status of the
goodput itself. All in JAX: ``jit`` and ``vmap`` over models work.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._status import ResultStatus, check_status
from ._checks import concrete
from ._goodput import GoodputResult, _batched, _episodes, _invalid_detail, _solve, analyze, run_checked
from ._model import AvailabilityModel, SaveMode, min_background_interval
from ._packed import as_packed, pack

__all__ = ["IntervalOptimum", "checkpoint_interval_optimum", "optimal_checkpoint_interval"]

_GRID = 25
_GOLDEN_STEPS = 60
_WINDOW = math.log(1e3)  # the window spans Young's estimate / 1e3 .. x 1e3
_INSIDE = 1e-6  # log-distance kept from an open feasibility bound
_ON_BOUND = 1e-7  # log-distance from an end counted as "on the bound"
_NEIGHBOUR = 1e-3  # log-step of the neighbour check
_TIE = 1e-12  # goodput difference below which a neighbour does not beat the answer


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class IntervalOptimum:
    """Outputs of :func:`checkpoint_interval_optimum` (seconds of work unless stated).

    Attributes:
        interval: the best persistent checkpoint interval found.
        goodput: the goodput there.
        status: :class:`~markovsim.ResultStatus` code: ``OK`` for a proven interior
            optimum, ``AT_LOWER_BOUND`` / ``AT_UPPER_BOUND`` when it sits on an end of the
            range searched, ``NOT_CONVERGED`` when a neighbour beats it.
        feasible_lower: the smallest feasible interval (exclusive; 0 for blocking saves).
        search_lower: lower end of the range searched.
        search_upper: upper end of the range searched.
    """

    interval: jnp.ndarray
    goodput: jnp.ndarray
    status: jnp.ndarray
    feasible_lower: jnp.ndarray
    search_lower: jnp.ndarray
    search_upper: jnp.ndarray


def _with_interval(model, interval):
    cp = dataclasses.replace(model.checkpoint, interval=interval)
    return dataclasses.replace(model, checkpoint=cp)


def _optimum(model, analysis: bool = False):
    """The optimum; with ``analysis``, also the model's own result at its interval,
    ``(GoodputResult, IntervalOptimum)``, from one more step of the same loop (the program
    holds the solver once instead of twice: less to trace and compile)."""
    model = as_packed(model)
    cp = model.checkpoint
    ep = _episodes(model)
    rate = jnp.maximum(ep["lam_m"] + ep["lam_p"], 1e-12)
    cost = jnp.maximum(cp.save_time + cp.memory_save_time, 1e-3)
    centre = 0.5 * jnp.log(2.0 * cost / rate)
    lo, hi = centre - _WINDOW, centre + _WINDOW
    feasible = jnp.zeros(())
    if cp.save_mode is SaveMode.BACKGROUND:
        feasible = jnp.asarray(min_background_interval(cp), dtype=float)
        lo = jnp.maximum(lo, jnp.log(jnp.maximum(feasible, 1e-300)) + _INSIDE)
        hi = jnp.maximum(hi, lo + math.log(10.0))
    lo, hi = jax.lax.stop_gradient(lo), jax.lax.stop_gradient(hi)

    def solve_at(s, own):
        r = _solve(_with_interval(model, jnp.where(own, cp.interval, jnp.exp(s))))
        return jnp.where(jnp.isnan(r.goodput), -jnp.inf, r.goodput), r.goodput, r.status, r

    grid = lo + (hi - lo) * jnp.linspace(0.0, 1.0, _GRID)
    step = (3.0 - math.sqrt(5.0)) / 2.0

    def body(k, state):
        # steps 0.._GRID-1: the grid (keeping its best point); then golden-section search from
        # the best grid point x inside its two neighbouring cells [a, b], probing the larger
        # side; then the answer's two neighbours. One evaluation of the model per step (one
        # trace to compile).
        (a, b, x, fx, gx, sx, jbest, nb), own_result = state
        own = k < 0  # step -1 (with ``analysis``): the model at its own interval
        start = k == _GRID
        a = jnp.where(start, grid[jnp.maximum(jbest - 1, 0)], a)
        b = jnp.where(start, grid[jnp.minimum(jbest + 1, _GRID - 1)], b)
        scan = (k >= 0) & (k < _GRID)
        golden = (k >= _GRID) & (k < _GRID + _GOLDEN_STEPS)
        side = k - _GRID - _GOLDEN_STEPS  # 0: left neighbour, 1: right neighbour
        right = (b - x) >= (x - a)
        golden_u = jnp.where(right, x + step * (b - x), x - step * (x - a))
        nbr_u = jnp.clip(x + jnp.where(side == 0, -1.0, 1.0) * _NEIGHBOUR, lo, hi)
        u = jnp.where(scan, grid[jnp.clip(k, 0, _GRID - 1)], jnp.where(golden, golden_u, nbr_u))
        fu, gu, su, r = solve_at(u, own)
        if analysis:
            own_result = jax.tree_util.tree_map(lambda new, old: jnp.where(own, new, old), r, own_result)
        better = (scan | golden) & (fu > fx)
        a2 = jnp.where(golden, jnp.where(better, jnp.where(right, x, a), jnp.where(right, a, u)), a)
        b2 = jnp.where(golden, jnp.where(better, jnp.where(right, b, x), jnp.where(right, u, b)), b)
        nb = jnp.where(side == 0, nb.at[0].set(fu), jnp.where(side == 1, nb.at[1].set(fu), nb))
        return (a2, b2, jnp.where(better, u, x), jnp.where(better, fu, fx), jnp.where(better, gu, gx),
                jnp.where(better, su, sx), jnp.where(better & scan, k, jbest), nb), own_result

    zero = jnp.zeros(())
    search = (zero, zero, lo, -jnp.inf, jnp.asarray(jnp.nan), jnp.asarray(ResultStatus.NON_FINITE, jnp.int32),
              jnp.zeros((), jnp.int32), jnp.full(2, -jnp.inf))
    own_result = jax.eval_shape(_solve, model) if analysis else None
    own_result = jax.tree_util.tree_map(lambda v: jnp.zeros(v.shape, v.dtype), own_result)
    (a, b, x, fx, gx, best_status, _, nb), own_result = jax.lax.fori_loop(
        -1 if analysis else 0, _GRID + _GOLDEN_STEPS + 2, body, (search, own_result))
    at_lo = x - lo <= _ON_BOUND + 1e-9 * jnp.abs(lo)
    at_hi = hi - x <= _ON_BOUND + 1e-9 * jnp.abs(hi)
    beaten = jnp.any(nb > fx + _TIE)
    status = jnp.select(
        [best_status != ResultStatus.OK, beaten, at_lo, at_hi],
        [best_status, jnp.asarray(ResultStatus.NOT_CONVERGED, jnp.int32),
         jnp.asarray(ResultStatus.AT_LOWER_BOUND, jnp.int32), jnp.asarray(ResultStatus.AT_UPPER_BOUND, jnp.int32)],
        jnp.asarray(ResultStatus.OK, jnp.int32)).astype(jnp.int32)
    failed = (status >= ResultStatus.INVALID_INPUT)
    opt = IntervalOptimum(
        interval=jnp.where(failed, jnp.nan, jnp.exp(x)),
        goodput=jnp.where(failed, jnp.nan, gx),
        status=status,
        feasible_lower=feasible,
        search_lower=jnp.exp(lo),
        search_upper=jnp.exp(hi),
    )
    return (own_result, opt) if analysis else opt


_optimum_jit = jax.jit(_optimum)
_optimum_batch = jax.jit(jax.vmap(_optimum))


def _bound_detail(model, result: IntervalOptimum, index, status) -> str:
    pick = (lambda v: float(np.asarray(v)[index])) if index else (lambda v: float(np.asarray(v)))
    tau = pick(result.interval)
    if status == ResultStatus.AT_LOWER_BOUND:
        feasible = pick(result.feasible_lower)
        if feasible > 0 and tau <= feasible * (1 + 1e-5):
            return (f"the best interval is the smallest feasible one, {tau:.6g} s: a background write must end "
                    f"within the first in-memory segment (interval > memory_per_persistent x "
                    f"(1 - write_interference) x write_time = {feasible:.6g} s), and goodput falls as the interval "
                    "grows from there; a shorter write or fewer in-memory copies per persistent one would let it "
                    "shrink")
        return (f"goodput still rises towards the search's lower end {tau:.6g} s (Young's estimate / 1000): "
                "check the save costs and fault rates")
    if status == ResultStatus.AT_UPPER_BOUND:
        return (f"goodput still rises at the search's upper end {tau:.6g} s (1000 x Young's estimate): no finite "
                "optimum, few or no faults roll back to a checkpoint, so saving less often always helps")
    if status == ResultStatus.NOT_CONVERGED:
        return f"a neighbour of {tau:.6g} s has a higher goodput"
    return _invalid_detail(model, index, status)


def checkpoint_interval_optimum(model: AvailabilityModel, *, throw: bool = True) -> IntervalOptimum:
    """The persistent checkpoint interval that maximises the goodput of the whole tiered
    model, with its feasible range, the range searched and a status (module docstring).

    The in-memory level keeps its ``memory_per_persistent`` ratio.

    Args:
        model: the availability model, or a batch of models as in
            :func:`~markovsim.availability.analyze`.
        throw: if true, raise for a failed result and issue a
            :class:`~markovsim.MarkovsimWarning` when the optimum sits on a bound (naming
            the batch indices and the reason); if false, only return the status.

    Returns:
        :class:`IntervalOptimum`.
    """
    return run_checked(model, _optimum, _optimum_jit, _optimum_batch, throw=throw, what="checkpoint_interval_optimum",
                       detail=lambda result, i, st: _bound_detail(model, result, i, st))


def optimal_checkpoint_interval(model: AvailabilityModel, *, throw: bool = True):
    """The persistent checkpoint interval (seconds of work) that maximises the goodput of
    the whole tiered model: :func:`checkpoint_interval_optimum` ``.interval``.

    With ``throw=True`` a :class:`~markovsim.MarkovsimWarning` says when the answer sits on
    a bound of the feasible or searched range (e.g. the smallest interval a background
    write allows), and a failed search raises. Use :func:`checkpoint_interval_optimum` for
    the status and the ranges.
    """
    return checkpoint_interval_optimum(model, throw=throw).interval


_both_jit = jax.jit(functools.partial(_optimum, analysis=True))


def analyze_and_optimum(model: AvailabilityModel, *,
                        throw: bool = True) -> tuple[GoodputResult, IntervalOptimum]:
    """:func:`~markovsim.availability.analyze` and :func:`checkpoint_interval_optimum` of
    one model from one compiled program: the optimum's search contains the goodput solver,
    so compiling both together costs little more than the optimum alone (compiling them
    apart costs both). The same values, checks and statuses as the two calls; a batch of
    models (or a traced one) takes the two calls.

    Args:
        model: the availability model.
        throw: as for :func:`~markovsim.availability.analyze` (validation on the host,
            errors for failed results, a warning when the optimum sits on a bound).

    Returns:
        ``(GoodputResult, IntervalOptimum)``.
    """
    model.check_structure()
    if _batched(model) or not concrete(model):
        return analyze(model, throw=throw), checkpoint_interval_optimum(model, throw=throw)
    if throw:
        model.validate()
    result, opt = _both_jit(pack(model, pad=True))
    if throw:
        check_status(result.status, what="analyze", detail=lambda i, st: _invalid_detail(model, i, st))
        check_status(opt.status, what="checkpoint_interval_optimum",
                     detail=lambda i, st: _bound_detail(model, opt, i, st))
    return result, opt
