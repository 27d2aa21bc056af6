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


def minutes(x):
    """Minutes -> seconds."""
    return x * MINUTE


def hours(x):
    """Hours -> seconds."""
    return x * HOUR


def days(x):
    """Days -> seconds."""
    return x * DAY


def years(x):
    """Years -> seconds."""
    return x * YEAR


def afr_to_rate(afr):
    """Annual failure rate (failures per unit-year, e.g. 0.04 for 4 %) -> per-second rate."""
    return afr / YEAR


def rate_to_afr(rate):
    """Per-second rate -> annual failure rate (failures per unit-year)."""
    return rate * YEAR


def fit_to_rate(fit):
    """FIT (failures per 1e9 device-hours) -> per-second rate."""
    return fit / (1e9 * HOUR)


def rate_to_fit(rate):
    """Per-second rate -> FIT."""
    return rate * 1e9 * HOUR


def mtbf_to_rate(mtbf):
    """Mean time between failures in seconds -> per-second rate."""
    return 1.0 / mtbf


def _check_availability(availability):
    import numpy as np

    from ._errors import InvalidParameterError

    a = np.asarray(availability, dtype=float)
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
    return rate / availability
