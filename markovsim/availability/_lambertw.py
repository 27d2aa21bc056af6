r"""The Lambert W function on its principal branch, in JAX (vectorised, differentiable).

:math:`W_0(z)` solves :math:`w e^{w} = z` with :math:`w \ge -1`, for real
:math:`z \ge -1/e`. It is computed by a few Halley iterations from a starting point that
is already close: the branch-point series near :math:`-1/e`, Winitzki's approximation in
the middle and :math:`\log z - \log\log z` for large :math:`z`. The derivative is given
analytically, :math:`W'(z) = W / (z (1 + W)) = 1 / (e^{W} (1 + W))`.

The checkpoint optimum needs :math:`1 + W_0(-e^{-1-c})` for tiny :math:`c`, where forming
the argument loses every digit of :math:`c`; :func:`one_plus_w0_of_neg_exp` solves that
quantity directly from its own equation :math:`x + \log(1 - x) = -c`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["lambertw", "one_plus_w0_of_neg_exp"]

_HALLEY_STEPS = 8
_SERIES_HALLEY_STEPS = 4  # cubic convergence from the 4-term series: 4 steps reach float64
_INV_E = 0.36787944117144233


def _start(z):
    # Near the branch point: w = -1 + p - p^2/3 + 11/72 p^3, p = sqrt(2 (e z + 1)).
    p = jnp.sqrt(jnp.maximum(2.0 * (jnp.e * z + 1.0), 0.0))
    near = -1.0 + p - p * p / 3.0 + 11.0 / 72.0 * p**3
    # Winitzki (2003) for moderate z.
    lz = jnp.log1p(jnp.maximum(z, -0.3))
    mid = lz * (1.0 - jnp.log1p(lz) / (2.0 + lz))
    big_z = jnp.maximum(z, 3.0)
    big = jnp.log(big_z) - jnp.log(jnp.log(big_z))
    return jnp.where(z < -0.25, near, jnp.where(z < 20.0, mid, big))


@jax.custom_jvp
def _lambertw(z):
    r"""Principal branch :math:`W_0(z)` of the Lambert W function, element-wise.

    Args:
        z: real array, :math:`z \ge -1/e` (values below give NaN).

    Returns:
        :math:`w \ge -1` with :math:`w e^w = z`, same shape as ``z``.

    >>> import markovsim, jax.numpy as jnp
    >>> from markovsim.availability import lambertw
    >>> round(float(lambertw(jnp.e)), 12)
    1.0
    """
    z = jnp.asarray(z, dtype=jnp.result_type(float))
    w = _start(z)

    def step(_, w):
        ew = jnp.exp(w)
        f = w * ew - z
        wp1 = w + 1.0
        safe = jnp.where(wp1 == 0.0, 1.0, wp1)
        denom = ew * safe - (w + 2.0) * f / (2.0 * safe)
        denom = jnp.where(denom == 0.0, 1.0, denom)
        new = w - jnp.where(wp1 == 0.0, 0.0, f / denom)
        return jnp.maximum(new, -1.0)

    w = jax.lax.fori_loop(0, _HALLEY_STEPS, step, w)
    return jnp.where(z < -_INV_E * (1 + 1e-15), jnp.nan, w)


lambertw = jax.jit(_lambertw)
lambertw.__doc__ = _lambertw.__doc__


@_lambertw.defjvp
def _lambertw_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    w = _lambertw(z)
    return w, dz / (jnp.exp(w) * (1.0 + w))


def _h(x):
    """x + log(1 - x) without cancellation for small x (a series)."""
    xs = jnp.minimum(x, 0.05)
    series = jnp.zeros_like(xs)
    for k in range(14, 1, -1):
        series = (series + 1.0 / k) * xs
    series = -series * xs
    direct = x + jnp.log1p(-jnp.minimum(x, 1.0 - 1e-300))
    return jnp.where(x < 0.05, series, direct)


@jax.custom_jvp
def one_plus_w0_of_neg_exp(c):
    r""":math:`x = 1 + W_0(-e^{-1-c})` for :math:`c \ge 0`, accurate for tiny ``c``.

    Equivalently the root in :math:`[0, 1)` of :math:`x + \log(1 - x) + c = 0`. For small
    :math:`c`, :math:`x \approx \sqrt{2c} - 2c/3`; for large :math:`c`,
    :math:`1 - x \approx e^{-1-c}`.

    Args:
        c: non-negative real array (dimensionless).

    Returns:
        ``x`` in ``[0, 1)``, same shape as ``c``.
    """
    c = jnp.asarray(c, dtype=jnp.result_type(float))
    # c < 1/2: Halley on h(x) + c = 0 from the branch-point series in
    # p = sqrt(2 (1 - e^{-c})); c >= 1/2: the contraction y = e^{-1-c} e^{y} for y = 1 - x
    # (factor y <= e^{-3/2} per step), which keeps the digits of the tiny 1 - x.
    cs = jnp.minimum(c, 0.5)
    p = jnp.sqrt(-2.0 * jnp.expm1(-cs))
    x = p - p * p / 3.0 + 11.0 / 72.0 * p**3 - 43.0 / 540.0 * p**4

    def halley(_, x):
        one_minus = 1.0 - x
        f = _h(x) + cs
        d1 = jnp.where(x == 0.0, -1e-300, -x / one_minus)
        d2 = -1.0 / (one_minus * one_minus)
        newton = f / d1
        new = x - f / (d1 - 0.5 * newton * d2)
        return jnp.clip(new, 0.5 * x, x + 0.5 * one_minus)

    x = jax.lax.fori_loop(0, _SERIES_HALLEY_STEPS, halley, x)
    # y = 1 - x solves y = a e^y with a = e^{-1-c} <= e^{-3/2}: Newton from y = a e^a
    a = jnp.exp(-1.0 - jnp.maximum(c, 0.5))

    def newton(_, y):
        ey = a * jnp.exp(y)
        return y - (y - ey) / (1.0 - ey)

    y = jax.lax.fori_loop(0, 4, newton, a * jnp.exp(a))
    return jnp.where(c == 0.0, 0.0, jnp.where(c < 0.5, x, 1.0 - y))


@one_plus_w0_of_neg_exp.defjvp
def _one_plus_jvp(primals, tangents):
    (c,), (dc,) = primals, tangents
    x = one_plus_w0_of_neg_exp(c)
    # implicit function theorem on x + log(1 - x) + c = 0: dx/dc = (1 - x) / x
    safe = jnp.where(x == 0.0, 1.0, x)
    return x, dc * jnp.where(x == 0.0, jnp.inf, (1.0 - x) / safe)
