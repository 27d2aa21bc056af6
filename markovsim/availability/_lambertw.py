r"""The Lambert W function on its principal branch, in JAX (vectorised, differentiable).

:math:`W_0(z)` solves :math:`w e^{w} = z` with :math:`w \ge -1`, for real
:math:`z \ge -1/e`. It is computed by a few Halley iterations from a starting point that
is already close: the branch-point series near :math:`-1/e`, Winitzki's approximation in
the middle and :math:`\log z - \log\log z` for large :math:`z`. The derivative is given
analytically, :math:`W'(z) = W / (z (1 + W)) = 1 / (e^{W} (1 + W))`.

The checkpoint optimum needs :math:`1 + W_0(-e^{-1-c})` for tiny :math:`c`, where forming
the argument loses every digit of :math:`c`; :func:`one_plus_w0_of_neg_exp` computes that
quantity from its own equation :math:`x + \log(1 - x) = -c`: a 30-term series in
:math:`\sqrt{2c}` up to :math:`c = 1/2`, two Halley steps above.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["lambertw", "one_plus_w0_of_neg_exp", "one_plus_w0_and_complement", "with_w0_pair"]

_HALLEY_STEPS = 8
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


#: Taylor coefficients of x = 1 + W_0(-e^{-1-c}) in s = sqrt(2 c): x = sum_k a_k s^(k+1).
#: x + log(1 - x) = -s^2/2 reads s = x g(x) with g(x)^2 = 2 (-x - log(1 - x)) / x^2, and
#: Lagrange inversion gives a_k = [x^k] g(x)^-(k+1) / (k+1) (exact rationals, rounded; the
#: test suite recomputes them). The series converges for |s| < sqrt(4 pi) (the next branch
#: point, c = 2 pi i); 30 terms leave a truncation error below 3e-19 up to c = 1/2.
_S_SERIES = (
    1.0, -0.3333333333333333, 0.027777777777777776, 0.003703703703703704,
    0.0002314814814814815, -5.878894767783657e-05, -2.553644914756026e-05, -4.899078973153047e-06,
    -2.428276122977769e-07, 1.85406221071516e-07, 7.542464855411896e-08, 1.47216272806884e-08,
    5.159887341078076e-10, -7.32986413160022e-10, -2.921357345635569e-10, -5.717312238897994e-11,
    -1.5008349408791911e-12, 3.239317851416903e-12, 1.2822077905614429e-12, 2.513834640057088e-13,
    5.2401866818838735e-15, -1.5326196647277207e-14, -6.053864010513748e-15, -1.1889539086269768e-15,
    -2.055644733697029e-17, 7.59703395936517e-17, 2.999822650631319e-17, 5.900904005856487e-18,
    8.726010378440995e-20, -3.895646579519859e-19,
)
_SERIES_UP_TO = 0.5
#: Taylor coefficients of u s^(k+1) for u = -log(1 - x) (the start of the Halley path).
_U_SERIES = (1.0, 1.0 / 6.0, 1.0 / 36.0, 1.0 / 270.0, 1.0 / 4320.0, -1.0 / 17010.0, -139.0 / 5443200.0)
_INV_FACT = tuple(1.0 / math.factorial(j + 2) for j in range(18))  # phi(u) = u^2 sum (-u)^j/(j+2)!
_EXP_SERIES = tuple(1.0 / math.factorial(k) for k in range(1, 11))  # expm1(d) = d sum d^k/(k+1)!


def _horner(coefs, s):
    out = jnp.full_like(s, coefs[-1])
    for a in coefs[-2::-1]:
        out = out * s + a
    return out * s


def _phi(u, em):
    """u + expm1(-u) without cancellation: the series sum_{k>=2} (-u)^k / k! below u = 1."""
    us = jnp.minimum(u, 1.0)
    return jnp.where(u < 1.0, -us * _horner(_INV_FACT, -us), u + em)


def _expm1_small(d, terms):
    """expm1(d) by its Taylor polynomial, for |d| <= 0.1 (``terms`` = 10 gives 1e-17)."""
    return _horner(_EXP_SERIES[:terms], d)


def _halley_path(c):
    """x for any c >= 0: two Halley steps on phi(u) = c in u = -log(1 - x).

    phi(u) = u + expm1(-u), phi' = -expm1(-u) = x, phi'' = e^{-u} = 1 - x. The start (the
    series in sqrt(2c) below c = 2, u = 1 + c above) is within 2e-4 relative; the first
    step leaves 1e-11, the second full precision. Two transcendental calls in all:
    expm1(-u) and e^{-u} are carried across the steps as expm1(-u - d) = em + e^{-u}
    expm1(-d) and e^{-u-d} = e^{-u} (1 + expm1(-d)), with a short Taylor polynomial for the
    small step d (|d| < 0.06).
    """
    s = jnp.sqrt(2.0 * jnp.minimum(c, 2.0))
    u = jnp.where(c < 2.0, _horner(_U_SERIES, s), 1.0 + c)
    em, y = jnp.expm1(-u), jnp.exp(-u)  # y = 1 + em, kept apart: it underflows relative digits of em
    for terms in (10, 3):
        f = _phi(u, em) - c
        d1 = -em
        newton = f / d1
        d = -f / (d1 - 0.5 * newton * y)
        u = u + d
        step = _expm1_small(-d, terms)
        em, y = em + y * step, y + y * step
    return -em, y


def one_plus_w0_of_neg_exp(c):
    r""":math:`x = 1 + W_0(-e^{-1-c})` for :math:`c \ge 0`, accurate for tiny ``c``.

    Equivalently the root in :math:`[0, 1)` of :math:`x + \log(1 - x) + c = 0`. For small
    :math:`c`, :math:`x \approx \sqrt{2c} - 2c/3`; for large :math:`c`,
    :math:`1 - x \approx e^{-1-c}`.

    For :math:`c \le 1/2` (a save shorter than half the MTBF: every practical checkpoint)
    ``x`` is a 30-term polynomial in :math:`\sqrt{2c}` (no transcendental call); above, two
    Halley steps in :math:`u = -\log(1 - x)`. Both are within 3e-16 relative of a 40-digit
    reference. When no element of ``c`` exceeds 1/2 the Halley path is skipped (a
    ``lax.cond``; under ``vmap`` both run).

    Args:
        c: non-negative real array (dimensionless).

    Returns:
        ``x`` in ``[0, 1)``, same shape as ``c``.
    """
    return with_w0_pair(c, lambda x, y: x)


def _pair_jvp(pair):
    """Attach the implicit-function derivative dx/dc = (1 - x)/x (= -d(1 - x)/dc) to ``pair``."""
    pair = jax.custom_jvp(pair)

    @pair.defjvp
    def _jvp(primals, tangents):
        (c,), (dc,) = primals, tangents
        x, y = pair(c)
        safe = jnp.where(x == 0.0, 1.0, x)
        dx = dc * jnp.where(x == 0.0, jnp.inf, y / safe)
        return (x, y), (dx, -dx)

    return pair


@_pair_jvp
def _series_pair(c):
    """(x, 1 - x) by the series in sqrt(2c); valid for c <= 1/2 (clamped above)."""
    x = _horner(_S_SERIES, jnp.sqrt(2.0 * jnp.minimum(c, _SERIES_UP_TO)))
    return x, 1.0 - x


@_pair_jvp
def _general_pair(c):
    """(x, 1 - x) for any c >= 0: the series up to 1/2, two Halley steps above."""
    xs, ys = _series_pair(c)
    xh, yh = _halley_path(c)
    high = c > _SERIES_UP_TO
    return jnp.where(high, xh, xs), jnp.where(high, yh, ys)


def with_w0_pair(c, finish):
    """``finish(x, 1 - x)`` for :math:`x = 1 + W_0(-e^{-1-c})`, skipping the Halley path
    (a ``lax.cond`` on the whole array) when no element of ``c`` exceeds 1/2.

    The branches return one array, the smaller of ``x`` and ``1 - x`` (``x`` up to
    ``c = 1/2``, where ``x < 0.7``; ``1 - x`` above), from which both follow without losing
    digits: a second output of a ``lax.cond`` costs a pass over memory on the CPU.
    """
    c = jnp.asarray(c, dtype=jnp.result_type(float))
    high = c > _SERIES_UP_TO

    def general():
        x, y = _general_pair(c)
        return jnp.where(high, y, x)

    z = jax.lax.cond(jnp.any(high), general, lambda: _series_pair(c)[0])
    return finish(jnp.where(high, 1.0 - z, z), jnp.where(high, z, 1.0 - z))


def one_plus_w0_and_complement(c):
    r"""``(x, 1 - x)`` for :math:`x = 1 + W_0(-e^{-1-c})`, both to full relative precision.

    ``1 - x`` (:math:`= e^{-u}`) stays accurate where ``x`` rounds towards 1 (large ``c``),
    which ``1 - one_plus_w0_of_neg_exp(c)`` would not (up to its conditioning: a relative
    change of ``c`` moves ``1 - x`` by ``c / x`` times as much).
    """
    return with_w0_pair(c, lambda x, y: (x, y))
