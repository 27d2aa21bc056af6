"""Unit helpers. markovsim works in SI seconds and per-second rates throughout.

Annual failure rate (AFR) is the expected number of failures per unit per year of
continuous operation, taken as an exponential rate (``rate = afr / year``), not as the
probability ``1 - exp(-rate * year)``; the two differ by under 2 % for AFR below 4 %.
FIT is failures per 1e9 device-hours.
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
