r"""One solver, two array backends: numpy for a single concrete model, JAX for the rest.

A JAX program pays tracing and XLA compilation before its first answer (seconds on two
cores), which a person asking one what-if question after another waits for each time the
structure changes (issue 14). The availability solver is therefore written once against a
small set of operations, :class:`Ops`, that numpy and JAX both provide:

- :data:`NUMPY`: ``numpy`` arrays, in-place updates on copies, Python loops; derivatives
  by complex steps (complex leaves flow through unchanged); no compilation, so the first
  answer costs what the arithmetic costs;
- :data:`JAX`: ``jax.numpy`` with functional updates (``x.at[i].set``), ``lax`` loops
  and ``stop_gradient``; traceable under ``jit`` / ``vmap`` / ``grad``.

:func:`ops_of` picks the backend from the arrays it is given: JAX when any leaf is a JAX
array or tracer, numpy otherwise. The public functions hand a concrete single model to the
numpy path as numpy leaves (:func:`markovsim.availability._packed.pack` with
``host=True``); batches, traced models and gradients take the JAX path. Both run the same
operations in the same order; the tests hold them equal to 1e-12
(``tests/availability/test_numpy_path.py``).
"""

from __future__ import annotations

import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Ops", "NUMPY", "JAX", "ops_of", "gth_numpy", "gth_band", "numpy_single", "compiled_single", "run_numpy"]


def gth_numpy(Q) -> np.ndarray:
    """Stationary vector of an irreducible chain by GTH elimination, in numpy (no checks).

    The same elimination order and back substitution as the JAX
    :func:`markovsim.engine.gth` (states eliminated first to last, the last one the
    anchor; each back-substitution step renormalised); only off-diagonal entries are read.
    A reducible chain gives NaN, as there.
    """
    A = np.array(Q, dtype=np.result_type(Q, float), copy=True)  # complex for a complex step
    n = A.shape[-1]
    if n == 1:
        return np.ones(1, dtype=A.dtype)
    np.fill_diagonal(A, 0.0)
    with np.errstate(all="ignore"):
        for k in range(n - 1):  # (array methods: numpy's function wrappers cost more than the arithmetic here)
            row = A[k, k + 1:]
            col = A[k + 1:, k] / row.sum()
            A[k + 1:, k] = col
            A[k + 1:, k + 1:] += col[:, None] * row
        x = np.zeros(n, dtype=A.dtype)
        x[n - 1] = 1.0
        for k in range(n - 2, -1, -1):
            x[k] = x[k + 1:] @ A[k + 1:, k]
            x /= x.sum()
    return x


def gth_band(Q, band: int) -> np.ndarray:
    """:func:`gth_numpy` for a chain whose rates join only states at most ``band`` apart
    (elimination keeps the band): scalar Python arithmetic on the band, cheaper than numpy's
    per-call cost for the small chains of a spare pool. Works on complex entries (a complex
    step). The same elimination order as :func:`gth_numpy`; the back substitution is
    normalised once at the end (rescaled on the way only if a weight passes 1e200). A
    reducible chain gives NaN, as :func:`gth_numpy`."""
    A = np.asarray(Q).tolist()
    n = len(A)
    for k in range(n - 1):
        hi = min(n, k + band + 1)
        row = A[k]
        total = sum(row[k + 1:hi])
        if not total:  # reducible as eliminated (a rate underflowed to 0): NaN, as gth_numpy
            return np.full(n, np.nan, dtype=np.result_type(np.asarray(Q), float))
        for i in range(k + 1, hi):
            Ai = A[i]
            c = Ai[k] / total
            Ai[k] = c
            if c:
                for j in range(k + 1, hi):
                    Ai[j] += c * row[j]
    x = [0.0] * n
    x[n - 1] = 1.0
    for k in range(n - 2, -1, -1):
        hi = min(n, k + band + 1)
        xk = sum(x[i] * A[i][k] for i in range(k + 1, hi))
        x[k] = xk
        if abs(xk) > 1e200:
            x = [v / abs(xk) for v in x]
    out = np.array(x)
    return out / out.sum()


class Ops:
    """The operations the solver needs beyond the array namespace ``xp``.

    Attributes:
        xp: ``numpy`` or ``jax.numpy``.
        name: ``"numpy"`` or ``"jax"``.
    """

    def __init__(self, name: str):
        self.name = name
        self.xp = np if name == "numpy" else jnp

    @property
    def traced(self) -> bool:
        return self.name == "jax"

    def set(self, x, index, value):
        """``x`` with ``x[index] = value`` (a new array)."""
        if self.traced:
            return x.at[index].set(value)
        y = np.array(x, dtype=np.result_type(x, value), copy=True)
        y[index] = value
        return y

    def add(self, x, index, value):
        """``x`` with ``value`` added at ``index`` (repeated indices accumulate)."""
        if self.traced:
            return x.at[index].add(value)
        y = np.array(x, dtype=np.result_type(x, value), copy=True)
        np.add.at(y, index, value)
        return y

    def while_loop(self, cond, body, init):
        if self.traced:
            return jax.lax.while_loop(cond, body, init)
        state = init
        while bool(cond(state)):
            state = body(state)
        return state

    def fori_loop(self, lower: int, upper: int, body, init):
        if self.traced:
            return jax.lax.fori_loop(lower, upper, body, init)
        state = init
        for k in range(lower, upper):
            state = body(np.int64(k), state)
        return state

    def stop_gradient(self, x):
        """No derivative through ``x``: ``lax.stop_gradient``, or numpy's real part (the
        complex-step derivatives of :mod:`markovsim.availability._sensitivity`)."""
        if self.traced:
            return jax.lax.stop_gradient(x)
        return np.real(x) if np.iscomplexobj(x) else x

    def real_dtype(self, *values):
        """float64, or complex128 when a numpy value is complex (a complex step)."""
        if not self.traced and any(np.iscomplexobj(v) for v in values):
            return np.complex128
        return self.xp.result_type(float)

    def gth(self, Q, *, unroll: bool | None = None, band: int | None = None):
        """The engine's bare GTH (:func:`markovsim.engine.gth`), or :func:`gth_numpy`
        (:func:`gth_band` when the chain's rates join states at most ``band`` apart)."""
        if self.traced:
            from .engine import gth

            return gth(Q, unroll=unroll)
        return gth_numpy(Q) if band is None else gth_band(Q, band)


NUMPY = Ops("numpy")
JAX = Ops("jax")


def ops_of(*trees) -> Ops:
    """:data:`JAX` when any leaf of ``trees`` is a JAX array or tracer, else :data:`NUMPY`.

    A packed availability model (``PackedModel``) is JAX or numpy as a whole (its mode
    arrays say which), so only its ``fault_rates`` is looked at."""
    rest = []
    for tree in trees:
        if hasattr(tree, "tier_takes_spare"):  # a PackedModel
            if isinstance(tree.fault_rates, jax.Array):
                return JAX
        elif isinstance(tree, jax.Array):
            return JAX
        elif not isinstance(tree, (float, int, complex, np.ndarray, np.generic)):
            rest.append(tree)
    for leaf in jax.tree_util.tree_leaves(rest):
        if isinstance(leaf, jax.Array):
            return JAX
    return NUMPY


#: a concrete single model takes the numpy path unless ``MARKOVSIM_COMPILED=1`` (or
#: :func:`compiled_single`) asks for the compiled JAX program
_NUMPY_SINGLE = [os.environ.get("MARKOVSIM_COMPILED", "") != "1"]


def numpy_single() -> bool:
    """Whether a concrete single model takes the numpy path (the default)."""
    return _NUMPY_SINGLE[-1]


@contextlib.contextmanager
def compiled_single(on: bool = True):
    """Within the block, concrete single models take the compiled JAX program instead of
    the numpy path (``on=False``: the numpy path). For comparisons and benchmarks."""
    _NUMPY_SINGLE.append(not on)
    try:
        yield
    finally:
        _NUMPY_SINGLE.pop()


def run_numpy(fn, *args):
    """``fn(*args)`` on numpy leaves with floating-point warnings off (the JAX path does
    not warn either: results are checked and carry a status); the leaves come back as
    numpy arrays (0-d for scalars), which every JAX function accepts (turning them into
    JAX arrays here would compile a small program per shape)."""
    with np.errstate(all="ignore"):
        out = fn(*args)
    return jax.tree_util.tree_map(lambda v: np.asarray(v) if isinstance(v, np.generic) else v, out)
