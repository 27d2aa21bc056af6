"""Exact answers for small chains with symbolic rates (sympy), and their JAX twins.

The algorithms are the subtraction-free eliminations of the numeric engine done in
rational-function arithmetic: GTH for the stationary distribution and the GTH-style
elimination of :math:`-Q_{TT}` for the mean time to absorption. Only off-diagonal entries
are read (the diagonal is checked, never used), every intermediate is put over a common
denominator with ``sympy.cancel``, and the final entries are factored when that is cheap.
Rates are best declared positive (``sympy.symbols("lam mu", positive=True)``).

sympy stays out of compiled code: :func:`to_jax_function` turns a finished expression
into a plain JAX function (``sympy.lambdify`` with the ``jax`` printer) that works under
``jax.jit``, ``jax.vmap`` and ``jax.grad``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from .._errors import InvalidChainError, InvalidParameterError, ReducibleChainError
from ._absorption import _never_surely
from ._chain import CTMC, DTMC
from ._checks import state_mask
from ._structure import recurrent_classes

__all__ = ["symbolic_stationary_distribution", "symbolic_mean_time_to_absorption", "to_jax_function"]

#: Factor a final expression only when it has at most this many operations.
_FACTOR_OPS = 400


def _sympy():
    import sympy

    return sympy


def _matrix(chain: Any):
    """(sympy Matrix, is_dtmc) from a sympy Matrix (a generator), or a CTMC/DTMC holding one."""
    sympy = _sympy()
    dtmc = isinstance(chain, DTMC)
    m = chain.matrix if isinstance(chain, (CTMC, DTMC)) else chain
    try:
        M = sympy.Matrix(m)
    except Exception:
        raise InvalidChainError(f"expected a square sympy Matrix of rates, got {type(m).__name__}") from None
    name = "P" if dtmc else "Q"
    if M.rows != M.cols:
        raise InvalidChainError(f"{name}: expected a square matrix, got shape {M.shape}")
    if M.rows == 0:
        raise InvalidChainError(f"{name}: empty matrix (a chain needs at least one state)")
    n = M.rows
    for i in range(n):
        for j in range(n):
            v = M[i, j]
            if i != j and v.is_negative:
                raise InvalidChainError(f"{name}[{i}, {j}]={v}: off-diagonal entries must be >= 0")
        total = sympy.simplify(sum(M.row(i)) - (1 if dtmc else 0))
        if total != 0:
            raise InvalidChainError(
                f"{name} row {i} sums to {sympy.simplify(sum(M.row(i)))}: rows must sum to "
                f"{'1' if dtmc else '0'} (set the diagonal to "
                f"{'1 minus' if dtmc else 'minus'} the sum of the row's off-diagonal entries)")
    return M, dtmc


def _finish(expr):
    sympy = _sympy()
    expr = sympy.cancel(expr)
    if sympy.count_ops(expr) <= _FACTOR_OPS:
        expr = sympy.factor(expr)
    return expr


def symbolic_stationary_distribution(chain: Any):
    """Exact stationary distribution of a small chain with symbolic rates (GTH in sympy).

    Args:
        chain: a sympy ``Matrix`` generator ``Q`` (rates per second, symbols or exact
            numbers; rows sum to 0), or a :class:`CTMC` / :class:`DTMC` holding a sympy
            Matrix (a DTMC's rows sum to 1).

    Returns:
        A ``1 x n`` sympy Matrix (row vector) of rational functions of the rates.

    Raises:
        InvalidChainError: not square, negative off-diagonal entry, rows not summing to
            0 (or 1).
        ReducibleChainError: several recurrent classes (structurally, taking every
            non-zero entry as a positive rate), or a zero pivot. A chain with transient
            states and one recurrent class is solved on that class (zeros elsewhere).

    Example:
        >>> import sympy, markovsim
        >>> a, b = sympy.symbols("a b", positive=True)
        >>> markovsim.symbolic_stationary_distribution(sympy.Matrix([[-a, a], [b, -b]]))
        Matrix([[b/(a + b), a/(a + b)]])
    """
    sympy = _sympy()
    M, _ = _matrix(chain)
    N = M.rows
    nz = np.array([[i != j and M[i, j] != 0 for j in range(N)] for i in range(N)], dtype=float)
    classes = recurrent_classes(CTMC(nz))
    if len(classes) > 1:
        shown = "; ".join("{" + ", ".join(map(str, c.tolist())) + "}" for c in classes[:5])
        raise ReducibleChainError(
            f"the chain has {len(classes)} recurrent classes ({shown}), so it has no unique "
            "stationary distribution", [c.tolist() for c in classes])
    keep = [int(i) for i in classes[0]]  # transient states get probability 0
    n = len(keep)
    A = [[sympy.S.Zero if i == j else sympy.sympify(M[i, j]) for j in keep] for i in keep]
    for k in range(n - 1):
        s = sympy.cancel(sum(A[k][k + 1:], sympy.S.Zero))
        if s == 0:
            raise ReducibleChainError(
                f"state {keep[k]}: zero pivot (its rates cancel to 0), so the chain is "
                "reducible for these rates and has no unique stationary distribution")
        for i in range(k + 1, n):
            A[i][k] = sympy.cancel(A[i][k] / s)
        for i in range(k + 1, n):
            if A[i][k] == 0:
                continue
            for j in range(k + 1, n):
                if i != j and A[k][j] != 0:
                    A[i][j] = sympy.cancel(A[i][j] + A[i][k] * A[k][j])
    x = [sympy.S.Zero] * n
    x[n - 1] = sympy.S.One
    for k in range(n - 2, -1, -1):
        x[k] = sympy.cancel(sum((x[j] * A[j][k] for j in range(k + 1, n)), sympy.S.Zero))
    total = sympy.cancel(sum(x, sympy.S.Zero))
    pi = [sympy.S.Zero] * N
    for pos, i in enumerate(keep):
        pi[i] = _finish(x[pos] / total)
    return sympy.Matrix([pi])


def symbolic_mean_time_to_absorption(chain: Any, p0: Sequence[Any], absorbing: Any):
    """Exact mean time to absorption of a small chain with symbolic rates.

    Solves :math:`(-Q_{TT}) m = \\mathbf 1` by the subtraction-free elimination of the
    numeric :func:`mean_time_to_absorption`, in rational-function arithmetic, and returns
    :math:`p_{0,T}\\, m`.

    Args:
        chain: a sympy ``Matrix`` generator (rates per second), or a :class:`CTMC` /
            :class:`DTMC` (time in steps) holding one.
        p0: initial distribution, ``n`` exact numbers or expressions summing to 1.
        absorbing: boolean mask or state indices.

    Returns:
        A sympy expression (seconds for a CTMC, steps for a DTMC).

    Raises:
        InvalidParameterError: empty ``absorbing``, ``p0`` of the wrong length or not
            summing to 1, or absorption not certain from ``p0`` (structurally).

    Example:
        >>> import sympy, markovsim
        >>> lam, mu = sympy.symbols("lambda mu", positive=True)
        >>> Q = sympy.Matrix([[-2*lam, 2*lam, 0], [mu, -lam - mu, lam], [0, 0, 0]])
        >>> markovsim.symbolic_mean_time_to_absorption(Q, [1, 0, 0], [2])
        (3*lambda + mu)/(2*lambda**2)
    """
    sympy = _sympy()
    M, _ = _matrix(chain)
    n = M.rows
    mask = state_mask("absorbing", absorbing, n)
    p = [sympy.sympify(v) for v in p0]
    if len(p) != n:
        raise InvalidParameterError(f"p0: got {len(p)} entries, expected {n} (one per state)")
    if sympy.simplify(sum(p) - 1) != 0:
        raise InvalidParameterError(f"p0 sums to {sympy.simplify(sum(p))}: expected 1")
    for i, v in enumerate(p):
        if v.is_negative:
            raise InvalidParameterError(f"p0[{i}]={v}: expected a probability >= 0")
    off = [[sympy.S.Zero if i == j else sympy.sympify(M[i, j]) for j in range(n)] for i in range(n)]
    nz = np.array([[off[i][j] != 0 for j in range(n)] for i in range(n)], dtype=float)
    _, bad = _never_surely(sp.csr_matrix(nz), mask)
    for i in range(n):
        if bad[i] and p[i] != 0:
            raise InvalidParameterError(
                f"absorbing: from state {i}, where p0 puts mass, the chain can reach a state that "
                "never reaches the absorbing set: the mean time to absorption is infinite")
    live = [i for i in range(n) if not mask[i] and not bad[i]]
    stopped = [j for j in range(n) if mask[j] or bad[j]]
    R = {(i, j): off[i][j] for i in live for j in live if i != j}
    e = {i: sympy.cancel(sum((off[i][j] for j in stopped), sympy.S.Zero)) for i in live}
    b = {i: sympy.S.One for i in live}
    d = {}
    for pos, k in enumerate(live):
        later = live[pos + 1:]
        dk = sympy.cancel(sum((R[k, j] for j in later), sympy.S.Zero) + e[k])
        if dk == 0:  # pragma: no cover - excluded by the structural check above
            raise InvalidParameterError(f"state {k} cannot leave the transient states")
        d[k] = dk
        for i in later:
            if R[i, k] == 0:
                continue
            f = sympy.cancel(R[i, k] / dk)
            for j in later:
                if j != i and R[k, j] != 0:
                    R[i, j] = sympy.cancel(R[i, j] + f * R[k, j])
            e[i] = sympy.cancel(e[i] + f * e[k])
            b[i] = sympy.cancel(b[i] + f * b[k])
    x = {}
    for pos in range(len(live) - 1, -1, -1):
        k = live[pos]
        x[k] = sympy.cancel((b[k] + sum((R[k, j] * x[j] for j in live[pos + 1:]), sympy.S.Zero)) / d[k])
    return _finish(sum((p[i] * x[i] for i in live), sympy.S.Zero))


def to_jax_function(expr: Any, symbols: Any) -> Callable[..., Any]:
    """A JAX function of ``symbols`` computing ``expr`` (via ``sympy.lambdify``).

    Args:
        expr: a sympy expression, a sympy Matrix, or a list of expressions.
        symbols: a sympy Symbol or a sequence of them: the positional arguments of the
            returned function, in this order.

    Returns:
        ``f(*values)`` returning a JAX array (float): a scalar for an expression, 1-D for
        a list or a row/column Matrix (markovsim's row-vector convention), 2-D for other
        matrices. It works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

    Raises:
        InvalidParameterError: ``expr`` has free symbols not in ``symbols``.

    Example:
        >>> import sympy, jax, markovsim
        >>> a, b = sympy.symbols("a b", positive=True)
        >>> f = markovsim.to_jax_function(b / (a + b), [a, b])
        >>> float(jax.grad(f)(1.0, 3.0))
        -0.1875
    """
    sympy = _sympy()
    import jax.numpy as jnp

    syms = (symbols,) if isinstance(symbols, sympy.Basic) else tuple(symbols)
    for s in syms:
        if not isinstance(s, sympy.Symbol):
            raise InvalidParameterError(f"symbols: {s!r} is not a sympy Symbol")
    vector = False
    if isinstance(expr, (list, tuple)):
        expr = sympy.Matrix([list(expr)])
        vector = True
    elif isinstance(expr, sympy.MatrixBase):
        vector = 1 in expr.shape
    else:
        expr = sympy.sympify(expr)
    free = expr.free_symbols - set(syms)
    if free:
        raise InvalidParameterError(
            f"expr has free symbols {sorted(map(str, free))} that are not in symbols "
            f"{[str(s) for s in syms]}: pass every symbol the expression uses")
    raw = sympy.lambdify(syms, expr, modules="jax")

    def f(*values):
        if len(values) != len(syms):
            raise TypeError(f"expected {len(syms)} arguments ({', '.join(map(str, syms))}), got {len(values)}")
        out = jnp.asarray(raw(*values))
        if not jnp.issubdtype(out.dtype, jnp.floating):
            out = out.astype(jnp.result_type(float))
        return out.reshape(-1) if vector else out

    f.__doc__ = f"JAX function of ({', '.join(map(str, syms))}) computing {expr}"
    return f
