r"""Sensitivities of goodput: its derivative with respect to every numeric input.

Two paths give the same numbers (``tests/availability/test_numpy_path.py``):

- **compiled** (``jax.grad`` through the solver, :func:`_goodput_and_gradient`): exact
  derivatives of the formulas, one backward pass; pays tracing and XLA compilation once
  per model structure;
- **numpy** (the default for one concrete model, :mod:`markovsim._backend`): complex-step
  derivatives of the same formulas, :math:`\partial f/\partial x = \mathrm{Im}\,f(x + ih)/h`,
  one evaluation per input at the spare pool's fixed point (the implicit-function form
  below), nothing compiled. No difference of two values is taken, so there is no
  cancellation: the derivative is exact to rounding for formulas analytic in the input
  (comparisons read the real part; ``stop_gradient`` takes it). The tests hold it equal to
  the compiled gradient to 1e-10 relative on random models.

With the pool's running share :math:`s^*` the root of :math:`h(\theta, s) = S(\theta, s) - s`
and goodput :math:`G(\theta, s)`,
:math:`dG/d\theta = \partial_\theta G - (\partial_s G / \partial_s h)\,\partial_\theta h`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._backend import NUMPY, numpy_single
from .._compile_cache import QUICK_COMPILE
from ._goodput import _illinois, _solve, _solve_given, analyze
from ._model import AvailabilityModel
from ._packed import as_packed, pack

__all__ = ["goodput_sensitivities"]

#: the inputs the sensitivities report (their derivatives are all the numpy path computes)
_MODE_FIELDS = ("fault_rates", "fault_degraded_throughput", "fault_detection_time", "fault_spare_nodes",
                "fault_predicted")
_TOP_FIELDS = ("cards", "migration_time", "step_time")


#: relative size of the complex step (numpy path): any tiny value gives the same derivative
_STEP = 1e-20


def goodput_sensitivities(model: AvailabilityModel, *, relative: bool = True) -> dict[str, float]:
    r"""Derivative of goodput with respect to every numeric input, by name.

    The model's fault rates are inputs of their own, so ``cards`` alone moves only the
    communication set-up that grows with the job (its sensitivity is tiny). The effect of
    the job's size is reported as ``"job size (fault rates ∝ cards)"``: every fault rate
    scaled in proportion to the cards along with them, :math:`\sum_i \partial \ln G/\partial
    \ln \lambda_i + \partial \ln G / \partial \ln N` (exact for per-card components, the
    first-order effect of a job whose fault rates grow linearly with it).

    Args:
        model: the availability model (validated on the host).
        relative: if true, the elasticity :math:`\partial \ln G / \partial \ln x`
            (the % change of goodput per % change of the input); else :math:`\partial G/\partial x`
            in goodput per unit of the input (per second, per (1/s), per card, ...).

    Returns:
        ``{"fault_rates[optical single lane]": ..., "tiers[job restart].detection": ..., ...}``.
        An input held at infinity (a tier's bandwidth without state to move) is left out.
    """
    analyze(model)  # validates and checks the value
    pm = pack(model, host=True)  # numpy leaves: reading them compiles nothing
    if numpy_single():  # complex steps on numpy leaves: nothing to compile
        g, grads = _numpy_value_and_grad(pm)
    else:
        g, grads = _value_and_grad(pack(model, pad=True))  # a PackedModel of gradients
        grads = jax.tree_util.tree_map(np.asarray, grads)
    out: dict[str, float] = {}
    names = model.fault_names
    elasticity: dict[str, float] = {}

    def add(label, value, d):
        value, d = float(value), float(d)
        if not np.isfinite(value):
            return
        e = 0.0 if d == 0.0 else d * value / float(g)
        elasticity[label] = e
        out[label] = e if relative else d

    for field in _MODE_FIELDS:
        for i, nm in enumerate(names):
            add(f"{field}[{nm}]", getattr(pm, field)[i], getattr(grads, field)[i])
    for k, t in enumerate(model.tiers):
        for f in dataclasses.fields(t):
            if not f.metadata.get("static"):
                add(f"tiers[{t.name}].{f.name}", getattr(pm.tiers, f.name)[k], getattr(grads.tiers, f.name)[k])
    for f in dataclasses.fields(model.checkpoint):
        if not f.metadata.get("static"):
            add(f"checkpoint.{f.name}", getattr(pm.checkpoint, f.name), getattr(grads.checkpoint, f.name))
    if model.spares is not None:
        for f in ("repair_time", "activation_time"):
            add(f"spares.{f}", getattr(pm.spares, f), getattr(grads.spares, f))
    for f in _TOP_FIELDS:
        add(f, getattr(pm, f), getattr(grads, f))
    size = sum(elasticity[f"fault_rates[{nm}]"] for nm in names) + elasticity["cards"]
    out["job size (fault rates ∝ cards)"] = size if relative else size * float(g) / float(pm.cards)
    return out


def _goodput_and_gradient(model):
    r"""Goodput and its gradient for the sensitivities: the derivative ``jax.grad`` takes
    through :func:`_solve` (whose spare-pool fixed point is differentiated implicitly by
    ``custom_root``), in a smaller program. With the pool's running share :math:`s^*` the
    root of :math:`h(\theta, s) = S(\theta, s) - s` and goodput :math:`G(\theta, s)`,
    :math:`dG/d\theta = \partial_\theta G - (\partial_s G / \partial_s h)\,\partial_\theta h`:
    one forward evaluation at :math:`s^*` and one backward pass for both rows."""
    model = as_packed(model)
    if model.spares is None:
        return jax.value_and_grad(lambda m: _solve_given(m, 1.0)[0].goodput)(model)
    share = jax.lax.stop_gradient(_illinois(lambda sh: _solve_given(model, sh)[1] - sh, None))

    def rows(m, s):
        r, out = _solve_given(m, s)
        return jnp.stack([r.goodput, out - s])

    value, back = jax.vjp(rows, model, share)
    d_model, d_share = jax.vmap(back)(jnp.eye(2))
    k = d_share[0] / d_share[1]
    return value[0], jax.tree_util.tree_map(lambda d: d[0] - k * d[1], d_model)


_value_and_grad = jax.jit(_goodput_and_gradient, compiler_options=QUICK_COMPILE)


def _replace_in(model, path: tuple, index, value):
    """``model`` with the leaf at ``path`` (attribute names) set to ``value`` at ``index``
    (``None``: a scalar leaf)."""
    head, rest = path[0], path[1:]
    old = getattr(model, head)
    if rest:
        new = _replace_in(old, rest, index, value)
    elif index is None:
        new = value
    else:
        new = np.array(old, dtype=np.result_type(old, value), copy=True)
        new[index] = value
    return dataclasses.replace(model, **{head: new})


def _inputs(pm):
    """``(path, index, value)`` of every input the sensitivities report."""
    for f in _MODE_FIELDS:
        for i, v in enumerate(np.asarray(getattr(pm, f))):
            yield (f,), i, float(v)
    for f in dataclasses.fields(pm.tiers):
        if not f.metadata.get("static"):
            for k, v in enumerate(np.asarray(getattr(pm.tiers, f.name))):
                yield ("tiers", f.name), k, float(v)
    for f in dataclasses.fields(pm.checkpoint):
        if not f.metadata.get("static"):
            yield ("checkpoint", f.name), None, float(getattr(pm.checkpoint, f.name))
    if pm.spares is not None:
        for f in ("repair_time", "activation_time"):
            yield ("spares", f), None, float(getattr(pm.spares, f))
    for f in _TOP_FIELDS:
        yield (f,), None, float(getattr(pm, f))


def _complex_step(fn, x: float):
    """``d fn / dx`` at ``x`` by a complex step: ``Im fn(x + i h) / h``, exact to rounding
    (no difference of two values, so no cancellation) for a ``fn`` analytic in ``x``."""
    h = _STEP * max(abs(x), 1e-280)
    return np.imag(fn(x + 1j * h)) / h


def _numpy_value_and_grad(pm):
    """Goodput and a :class:`PackedModel` of its derivatives (the inputs of :func:`_inputs`;
    0 elsewhere) by central differences at the pool's fixed point (module docstring)."""
    with np.errstate(all="ignore"):
        value = float(_solve(pm).goodput)
        if pm.spares is None:
            share = 1.0
            d_share = None
        else:
            share = _illinois(lambda sh: _solve_given(pm, sh)[1] - sh, None, NUMPY)

            def rows_s(s):
                r, out = _solve_given(pm, s)
                return np.stack([r.goodput, out - s])

            d_share = _complex_step(rows_s, float(share))
        grads = jax.tree_util.tree_map(lambda v: np.zeros(np.shape(v)), pm)
        for path, index, x in _inputs(pm):
            if not np.isfinite(x):
                continue

            def rows(v, path=path, index=index):
                r, out = _solve_given(_replace_in(pm, path, index, v), share)
                return np.stack([r.goodput, out - share])

            d = _complex_step(rows, x)
            grad = d[0] if d_share is None else d[0] - d_share[0] / d_share[1] * d[1]
            grads = _replace_in(grads, path, index, grad)
    return value, grads

