r"""Unit helpers. markovsim works in SI seconds and per-second rates throughout.

Annual failure rate (AFR) is the expected number of failures per unit per year of
continuous operation, taken as an exponential rate (``rate = afr / year``), not as the
probability ``1 - exp(-rate * year)``; the two differ by under 2 % for AFR below 4 %.
FIT is failures per 1e9 device-hours.

Running time and wall-clock time
    A fault rate is *per second of running* when it counts faults per second that the unit
    (or the job) was up and working, and *per second of wall-clock time* when it counts
    faults per second of calendar time, downtime included. Field reports ("419
    interruptions in 54 days") are per wall-clock time; the availability chain and the fault
    catalogues take rates per running time (a job cannot be interrupted while it is down).
    With availability :math:`A` (the share of wall-clock time spent running)

    .. math::  \lambda_{\text{wall}} = A\, \lambda_{\text{run}}.

    :func:`per_wall_rate` and :func:`per_running_rate` convert between the two.
"""

from __future__ import annotations

__all__ = [
    "MINUTE",
    "HOUR",
    "DAY",
    "YEAR",
    "minutes",
    "hours",
    "days",
    "years",
    "afr_to_rate",
    "rate_to_afr",
    "fit_to_rate",
    "rate_to_fit",
    "mtbf_to_rate",
    "per_wall_rate",
    "per_running_rate",
]

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
#: Julian year, 365.25 days, in seconds.
YEAR = 365.25 * DAY


def _scaled(name, x, factor, *, positive=False, unit=""):
    """``x * factor`` after checking ``x`` is a finite number >= 0 (> 0 with ``positive``) and
    that the product is finite (a JAX tracer passes unchecked)."""
    from ._errors import InvalidParameterError, _is_traced, check_number

    if _is_traced(x):
        return x * factor
    import numpy as np

    checked = check_number(name, x, minimum=None if positive else 0.0, positive=positive, unit=unit)
    out = x * factor if not isinstance(x, (list, tuple)) else checked * factor

    if not np.all(np.isfinite(np.asarray(out, dtype=float))):
        raise InvalidParameterError(
            f"{name}={x!r}: too large, the converted value overflows float64; expected at most "
            f"{np.finfo(float).max / factor:.4g}{' ' + unit if unit else ''}")
    return out


def minutes(x):
    """Minutes (>= 0) -> seconds."""
    return _scaled("minutes", x, MINUTE, unit="min")


def hours(x):
    """Hours (>= 0) -> seconds."""
    return _scaled("hours", x, HOUR, unit="h")


def days(x):
    """Days (>= 0) -> seconds."""
    return _scaled("days", x, DAY, unit="d")


def years(x):
    """Years (>= 0) -> seconds."""
    return _scaled("years", x, YEAR, unit="years")


def afr_to_rate(afr):
    """Annual failure rate (failures per unit-year, e.g. 0.04 for 4 %, >= 0) -> per-second rate."""
    return _scaled("afr", afr, 1.0 / YEAR, unit="per year")


def rate_to_afr(rate):
    """Per-second rate (>= 0) -> annual failure rate (failures per unit-year)."""
    return _scaled("rate", rate, YEAR, unit="per s")


def fit_to_rate(fit):
    """FIT (failures per 1e9 device-hours, >= 0) -> per-second rate."""
    return _scaled("fit", fit, 1.0 / (1e9 * HOUR), unit="FIT")


def rate_to_fit(rate):
    """Per-second rate (>= 0) -> FIT."""
    return _scaled("rate", rate, 1e9 * HOUR, unit="per s")


def mtbf_to_rate(mtbf):
    """Mean time between failures in seconds (> 0) -> per-second rate."""
    from ._errors import _is_traced, check_number

    if not _is_traced(mtbf):
        check_number("mtbf", mtbf, positive=True, unit="s")
    return 1.0 / mtbf


def _check_availability(availability):
    import numpy as np

    from ._errors import InvalidParameterError, _as_floats, _is_traced

    if _is_traced(availability):
        return
    a = _as_floats("availability", availability)
    bad = ~np.isfinite(a) | (a <= 0) | (a > 1)
    if bad.any():
        shown = a.item() if a.ndim == 0 else a[bad].ravel()[0]
        raise InvalidParameterError(
            f"availability={shown!r}: expected the share of wall-clock time spent running, in (0, 1]")


def per_wall_rate(rate, availability):
    """Rate per second of running -> rate per second of wall-clock time.

    ``rate * availability``: a unit that runs a share ``availability`` of the time sees
    that share of its running-time faults per wall-clock second.

    Args:
        rate: faults per second of running (per unit or per job).
        availability: share of wall-clock time spent running, in (0, 1].

    >>> per_wall_rate(1.0 / 3600, 0.9) * 3600
    0.9
    """
    _check_availability(availability)
    _scaled("rate", rate, 1.0, unit="per s")
    return rate * availability


def per_running_rate(rate, availability):
    """Rate per second of wall-clock time -> rate per second of running.

    ``rate / availability``: the inverse of :func:`per_wall_rate`. Use it to turn a field
    count ("419 interruptions in 54 days") into the running-time rate a catalogue holds.

    Args:
        rate: faults per wall-clock second.
        availability: share of wall-clock time spent running, in (0, 1].

    >>> round(per_running_rate(0.9 / 3600, 0.9) * 3600, 12)
    1.0
    """
    _check_availability(availability)
    _scaled("rate", rate, 1.0, unit="per s")
    return _scaled("rate", rate, 1.0 / availability, unit="per s")
