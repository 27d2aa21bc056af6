r"""The checkpoint interval that maximises the goodput of the whole tiered model.

**Feasible range.** Any interval :math:`\tau > 0` for blocking saves; for background saves
the write (stretched by its interference) must end within the first in-memory segment,
:math:`\tau > \tau_{min} = n (1 - i) w` (:func:`~markovsim.availability.min_background_interval`).

**Search.** On :math:`\log\tau` over the window :math:`[\tau_0/10^3,\ 10^3\tau_0]` cut to the
feasible range, with :math:`\tau_0 = \sqrt{2 C / \lambda}` (Young's estimate from the save
cost and the rate of faults that roll back to a checkpoint): a grid of 25 points finds the
best cell, Brent's method (parabolic interpolation, golden-section steps where it fails)
refines it inside its two neighbouring cells to ~1e-8 in :math:`\log\tau` (goodput is flat
at its optimum: intervals that close tie to rounding), and the answer is then **proven** by comparing it with its neighbours at
:math:`\tau e^{\pm 10^{-3}}`: an interior optimum must beat both; an optimum on an end of
the window must beat the point just inside. Goodput need not be unimodal in
:math:`\tau`, so the grid, not a bracket assumption, picks the basin.

**Status.** ``OK`` (interior, proven), ``AT_LOWER_BOUND`` (goodput falls from the lower
end: the smallest feasible background interval, or the window's end), ``AT_UPPER_BOUND``
(goodput still rises at the upper end: no finite optimum, e.g. when no fault rolls back to
a checkpoint), ``NOT_CONVERGED`` (a neighbour beats the answer), or the status of the
goodput itself. One code for numpy (a single concrete model, :mod:`markovsim._backend`) and
JAX: ``jit`` and ``vmap`` over models work.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .._backend import numpy_single, ops_of, run_numpy
from .._status import ResultStatus, check_status
from ._checks import concrete
from ._goodput import GoodputResult, _batched, _episode_parts, _invalid_detail, _solve, analyze, run_checked
from ._model import AvailabilityModel, SaveMode, min_background_interval
from ._packed import as_packed, pack

__all__ = ["IntervalOptimum", "checkpoint_interval_optimum", "optimal_checkpoint_interval"]

_GRID = 25
_BRENT_STEPS = 60  # at most (it stops when the bracket is within its tolerance; ~10-15 steps)
_XTOL, _XTOL_ABS = 1e-9, 1e-10  # Brent's tolerance on log(interval): the optimum is flat, known to ~1e-8
_CGOLD = (3.0 - math.sqrt(5.0)) / 2.0
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
    ops = ops_of(model)
    xp = ops.xp
    cp = model.checkpoint
    ep = _episode_parts(model)
    rate = xp.maximum(ep["lam_m"] + ep["lam_p"], 1e-12)
    cost = xp.maximum(cp.save_time + cp.memory_save_time, 1e-3)
    centre = 0.5 * xp.log(2.0 * cost / rate)
    lo, hi = centre - _WINDOW, centre + _WINDOW
    feasible = xp.zeros(())
    if cp.save_mode is SaveMode.BACKGROUND:
        feasible = xp.asarray(min_background_interval(cp), dtype=float)
        lo = xp.maximum(lo, xp.log(xp.maximum(feasible, 1e-300)) + _INSIDE)
        hi = xp.maximum(hi, lo + math.log(10.0))
    lo, hi = ops.stop_gradient(lo), ops.stop_gradient(hi)

    def solve_at(s, own):
        r = _solve(_with_interval(model, xp.where(own, cp.interval, xp.exp(s))), ep)
        return xp.where(xp.isnan(r.goodput), -xp.inf, r.goodput), r.goodput, r.status, r

    grid = lo + (hi - lo) * xp.linspace(0.0, 1.0, _GRID)

    def body(state):
        # One evaluation of the model per step (one trace to compile). Stage 0: the model at
        # its own interval (step -1, with ``analysis``), then the grid, keeping its best point;
        # stage 1: Brent's method (parabolic steps, golden-section when they fail) from the
        # best grid point inside its two neighbouring cells [a, b], on F = -goodput; stages 2
        # and 3: the answer's left and right neighbours; stage 4: done.
        k, stage, n_brent, (a, b, x, w, v, Fx, Fw, Fv, d, e), gx, sx, jbest, nb, own_result = state
        own = k < 0
        brent = stage == 1
        xm = 0.5 * (a + b)
        tol1 = _XTOL * xp.abs(x) + _XTOL_ABS
        r_ = (x - w) * (Fx - Fv)
        q_ = (x - v) * (Fx - Fw)
        p_ = (x - v) * q_ - (x - w) * r_
        q_ = 2.0 * (q_ - r_)
        p_ = xp.where(q_ > 0.0, -p_, p_)
        q_ = xp.abs(q_)
        parabolic = ((xp.abs(e) > tol1) & (xp.abs(p_) < xp.abs(0.5 * q_ * e))
                     & (p_ > q_ * (a - x)) & (p_ < q_ * (b - x)))
        golden_e = xp.where(x >= xm, a - x, b - x)
        d_par = p_ / xp.where(q_ == 0.0, 1.0, q_)
        u_par = x + d_par
        d_par = xp.where((u_par - a < 2.0 * tol1) | (b - u_par < 2.0 * tol1), xp.copysign(tol1, xm - x), d_par)
        e_new = xp.where(parabolic, d, golden_e)
        d_new = xp.where(parabolic, d_par, _CGOLD * golden_e)
        u_brent = x + xp.where(xp.abs(d_new) >= tol1, d_new, xp.copysign(tol1, d_new))
        u_nbr = xp.clip(x + xp.where(stage == 2, -1.0, 1.0) * _NEIGHBOUR, lo, hi)
        u = xp.where(stage == 0, grid[xp.clip(k, 0, _GRID - 1)], xp.where(brent, u_brent, u_nbr))
        fu, gu, su, r = solve_at(u, own)
        Fu = -fu
        if analysis and own_result is None:  # numpy: the first step is the model at its own interval
            own_result = r
        elif analysis:
            own_result = jax.tree_util.tree_map(lambda new, old: xp.where(own, new, old), r, own_result)
        on_grid = (stage == 0) & ~own & (Fu < Fx)
        on_brent = brent & (Fu <= Fx)
        worse = brent & ~on_brent
        # Brent's bookkeeping: the bracket, and x (best), w (second best), v (previous w)
        a2 = xp.where(brent, xp.where(on_brent, xp.where(u >= x, x, a), xp.where(u < x, u, a)), a)
        b2 = xp.where(brent, xp.where(on_brent, xp.where(u >= x, b, x), xp.where(u < x, b, u)), b)
        to_w = worse & ((Fu <= Fw) | (w == x))
        to_v = worse & ~to_w & ((Fu <= Fv) | (v == x) | (v == w))
        v2 = xp.where(on_brent | to_w, w, xp.where(to_v, u, v))
        Fv2 = xp.where(on_brent | to_w, Fw, xp.where(to_v, Fu, Fv))
        w2 = xp.where(on_brent, x, xp.where(to_w, u, w))
        Fw2 = xp.where(on_brent, Fx, xp.where(to_w, Fu, Fw))
        better = on_grid | on_brent
        x2, Fx2 = xp.where(better, u, x), xp.where(better, Fu, Fx)
        gx2, sx2 = xp.where(better, gu, gx), xp.where(better, su, sx)
        jbest2 = xp.where(on_grid, k, jbest)
        d2, e2 = xp.where(brent, d_new, d), xp.where(brent, e_new, e)
        nb = xp.where(stage == 2, ops.set(nb, 0, fu), xp.where(stage == 3, ops.set(nb, 1, fu), nb))
        # after the grid: Brent starts from its best point, inside the two neighbouring cells
        end_grid = (stage == 0) & (k == _GRID - 1)
        a2 = xp.where(end_grid, grid[xp.maximum(jbest2 - 1, 0)], a2)
        b2 = xp.where(end_grid, grid[xp.minimum(jbest2 + 1, _GRID - 1)], b2)
        w2, v2 = xp.where(end_grid, x2, w2), xp.where(end_grid, x2, v2)
        Fw2, Fv2 = xp.where(end_grid, Fx2, Fw2), xp.where(end_grid, Fx2, Fv2)
        d2, e2 = xp.where(end_grid, 0.0, d2), xp.where(end_grid, 0.0, e2)
        n_brent = n_brent + brent.astype(n_brent.dtype)
        tol2 = 2.0 * (_XTOL * xp.abs(x2) + _XTOL_ABS)
        converged = xp.abs(x2 - 0.5 * (a2 + b2)) <= tol2 - 0.5 * (b2 - a2)
        stage2 = xp.where(end_grid, xp.where(xp.isfinite(Fx2), 1, 2),
                          xp.where(brent & (converged | (n_brent >= _BRENT_STEPS)), 2,
                                   xp.where(stage >= 2, stage + 1, stage)))
        return (k + 1, stage2.astype(stage.dtype), n_brent, (a2, b2, x2, w2, v2, Fx2, Fw2, Fv2, d2, e2), gx2, sx2,
                jbest2, nb, own_result)

    zero = xp.zeros(())
    int0 = xp.zeros((), xp.int32)
    own_result = jax.eval_shape(_solve, model) if analysis and ops.traced else None
    own_result = jax.tree_util.tree_map(lambda v: xp.zeros(v.shape, v.dtype), own_result)
    start = (int0 - 1 if analysis else int0, int0, int0, (zero, zero, lo, zero, zero, zero + xp.inf, zero, zero, zero, zero),
             xp.asarray(xp.nan), xp.asarray(ResultStatus.NON_FINITE, xp.int32), int0, xp.full(2, -xp.inf), own_result)
    _, _, _, (a, b, x, _, _, Fx, _, _, _, _), gx, best_status, _, nb, own_result = ops.while_loop(
        lambda st: st[1] < 4, body, start)
    fx = -Fx
    at_lo = x - lo <= _ON_BOUND + 1e-9 * xp.abs(lo)
    at_hi = hi - x <= _ON_BOUND + 1e-9 * xp.abs(hi)
    beaten = xp.any(nb > fx + _TIE)
    status = xp.select(
        [best_status != ResultStatus.OK, beaten, at_lo, at_hi],
        [best_status, xp.asarray(ResultStatus.NOT_CONVERGED, xp.int32),
         xp.asarray(ResultStatus.AT_LOWER_BOUND, xp.int32), xp.asarray(ResultStatus.AT_UPPER_BOUND, xp.int32)],
        xp.asarray(ResultStatus.OK, xp.int32)).astype(xp.int32)
    failed = (status >= ResultStatus.INVALID_INPUT)
    opt = IntervalOptimum(
        interval=xp.where(failed, xp.nan, xp.exp(x)),
        goodput=xp.where(failed, xp.nan, gx),
        status=status,
        feasible_lower=feasible,
        search_lower=xp.exp(lo),
        search_upper=xp.exp(hi),
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
    if numpy_single():  # no compilation (markovsim._backend)
        result, opt = run_numpy(functools.partial(_optimum, analysis=True), pack(model, host=True))
    else:
        result, opt = _both_jit(pack(model, pad=True))
    if throw:
        check_status(result.status, what="analyze", detail=lambda i, st: _invalid_detail(model, i, st))
        check_status(opt.status, what="checkpoint_interval_optimum",
                     detail=lambda i, st: _bound_detail(model, opt, i, st))
    return result, opt
