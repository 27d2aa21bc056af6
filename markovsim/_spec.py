"""Reading model files (TOML) strictly: unknown keys, missing units and bad values are errors.

Quantities with a dimension are written as strings with a unit, ``"20 min"``,
``"4 %"``, ``"200 FIT"``, or as a number under a key whose name carries the unit
(``save_time_s = 120``). A bare number for a time is refused: the unit is the most common
silent error in reliability models.

Supported units
    time: ``s``, ``ms``, ``us``, ``min``, ``h``, ``d`` (day), ``y`` (Julian year)
    rate: ``/s``, ``/h``, ``/d``, ``/y``, ``FIT`` (per 1e9 h), ``AFR`` (per year)
    ratio: ``%`` or a bare number
    data: ``B``, ``kB``, ``MB``, ``GB``, ``TB``, ``KiB``, ``MiB``, ``GiB``, ``TiB``
    bandwidth: ``B/s``, ``GB/s``, ``Gb/s`` (bits), ``GiB/s``, ``TB/s``, ``TiB/s``
    compute: ``FLOP/s``, ``TFLOP/s``, ``PFLOP/s``
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from ._errors import SpecError
from ._units import DAY, HOUR, MINUTE, YEAR

__all__ = ["Table", "load_toml", "parse_quantity"]

_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": MINUTE, "h": HOUR, "d": DAY, "y": YEAR}
_RATE = {"/s": 1.0, "/min": 1 / MINUTE, "/h": 1 / HOUR, "/d": 1 / DAY, "/y": 1 / YEAR,
         "FIT": 1 / (1e9 * HOUR), "AFR": 1 / YEAR}
_DATA = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
         "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}
_BANDWIDTH = {"B/s": 1.0, "kB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
              "Gb/s": 1e9 / 8, "Mb/s": 1e6 / 8, "MiB/s": 2.0**20, "GiB/s": 2.0**30, "TiB/s": 2.0**40}
_COMPUTE = {"FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15}
_RATIO = {"%": 0.01, "": 1.0}
_KINDS = {"time": _TIME, "rate": _RATE, "data": _DATA, "bandwidth": _BANDWIDTH,
          "compute": _COMPUTE, "ratio": _RATIO}
#: key suffixes that carry the unit, for plain numbers
_SUFFIX = {"time": {"_s": 1.0, "_min": MINUTE, "_h": HOUR, "_d": DAY},
           "rate": {"_per_s": 1.0, "_per_h": 1 / HOUR, "_per_d": 1 / DAY, "_fit": 1 / (1e9 * HOUR), "_afr": 1 / YEAR},
           "data": {"_bytes": 1.0, "_gb": 1e9, "_gib": 2.0**30},
           "bandwidth": {"_bytes_per_s": 1.0, "_gb_per_s": 1e9},
           "compute": {"_flop_per_s": 1.0, "_tflop_per_s": 1e12},
           "ratio": {"": 1.0}}
_NUM = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def parse_quantity(text: Any, kind: str, *, where: str = "value") -> float:
    """Parse ``"20 min"`` (or a number for a ratio) into SI units of ``kind``.

    Args:
        text: the string (or number, only for ``kind="ratio"``).
        kind: one of ``time``, ``rate``, ``data``, ``bandwidth``, ``compute``, ``ratio``.
        where: the field's name, for the error message.

    >>> parse_quantity("20 min", "time")
    1200.0
    >>> parse_quantity("4 %", "ratio")
    0.04
    """
    units = _KINDS[kind]
    if isinstance(text, bool):
        raise SpecError(f"{where}={text!r}: expected a {kind} quantity, got a boolean")
    if isinstance(text, (int, float)):
        if kind == "ratio":
            return float(text)
        raise SpecError(
            f"{where}={text!r}: missing unit; write it as a string with a unit, "
            f"e.g. \"{text} {next(iter(units))}\" (units: {', '.join(u for u in units if u)})"
        )
    if not isinstance(text, str):
        raise SpecError(f"{where}={text!r}: expected a {kind} quantity such as \"10 {next(iter(units))}\"")
    m = _NUM.match(text)
    if not m:
        raise SpecError(f"{where}={text!r}: expected a number followed by a unit")
    number, unit = float(m.group(1)), m.group(2)
    if unit not in units:
        if unit == "" :
            raise SpecError(f"{where}={text!r}: missing unit (expected one of {', '.join(u for u in units if u)})")
        raise SpecError(
            f"{where}={text!r}: unknown {kind} unit {unit!r} (expected one of {', '.join(u for u in units if u)})"
        )
    return number * units[unit]


class Table:
    """A TOML table read strictly: every key must be consumed, unknown keys are errors.

    Use :meth:`take` for each expected key, then :meth:`finish` to reject the rest.
    """

    def __init__(self, data: dict, where: str):
        if not isinstance(data, dict):
            raise SpecError(f"{where}: expected a table, got {type(data).__name__} {data!r}")
        self._data = dict(data)
        self._seen: set[str] = set()
        self.where = where

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def keys(self):
        return self._data.keys()

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def raw(self, key: str, default: Any = ..., *, types: tuple = ()) -> Any:
        """The value of ``key`` as written (``default`` when absent; required if none)."""
        self._seen.add(key)
        if key not in self._data:
            if default is ...:
                raise SpecError(f"{self._name(key)}: required key is missing")
            return default
        value = self._data[key]
        if types and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            names = " or ".join(t.__name__ for t in types)
            raise SpecError(f"{self._name(key)}={value!r}: expected {names}")
        return value

    def text(self, key: str, default: Any = ..., *, choices: tuple[str, ...] | None = None) -> str:
        value = self.raw(key, default, types=(str,))
        if choices is not None and value not in choices:
            raise SpecError(f"{self._name(key)}={value!r}: expected one of {', '.join(map(repr, choices))}")
        return value

    def integer(self, key: str, default: Any = ..., *, minimum: int | None = None) -> int:
        value = self.raw(key, default, types=(int,))
        if value is not None and minimum is not None and value < minimum:
            raise SpecError(f"{self._name(key)}={value!r}: expected an integer >= {minimum}")
        return value

    def quantity(self, key: str, kind: str, default: Any = ..., *,
                 minimum: float | None = 0.0, maximum: float | None = None,
                 strictly_positive: bool = False) -> float:
        """A dimensioned value in SI units; checks the range and names the field on error."""
        value: Any = ...
        for suffix, factor in _SUFFIX[kind].items():
            if suffix and (key + suffix) in self._data:
                value = float(self.raw(key + suffix, types=(int, float))) * factor
                shown = f"{self._name(key + suffix)}={self._data[key + suffix]!r}"
                break
        if value is ...:
            raw = self.raw(key, default)
            if raw is default and key not in self._data:
                return default
            value = parse_quantity(raw, kind, where=self._name(key))
            shown = f"{self._name(key)}={raw!r}"
        self._seen.add(key)
        if value != value or value in (float("inf"), float("-inf")):
            raise SpecError(f"{shown}: expected a finite value")
        if strictly_positive and value <= 0:
            raise SpecError(f"{shown}: expected a positive value")
        if minimum is not None and value < minimum:
            raise SpecError(f"{shown}: expected a value >= {minimum}")
        if maximum is not None and value > maximum:
            raise SpecError(f"{shown}: expected a value <= {maximum}")
        return value

    def probability(self, key: str, default: Any = ...) -> float:
        return self.quantity(key, "ratio", default, minimum=0.0, maximum=1.0)

    def table(self, key: str, default: Any = ...) -> "Table":
        value = self.raw(key, default, types=(dict,))
        return Table(value, self._name(key))

    def tables(self, key: str, default: Any = ...) -> list["Table"]:
        """An array of tables (``[[key]]``)."""
        value = self.raw(key, default, types=(list,))
        return [Table(v, f"{self._name(key)}[{i}]") for i, v in enumerate(value)]

    def finish(self) -> None:
        """Raise :class:`SpecError` for every key that was never read (unknown keys)."""
        unknown = sorted(set(self._data) - self._seen)
        if unknown:
            raise SpecError(
                f"{self.where or 'model file'}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"expected only {', '.join(map(repr, sorted(self._seen))) or 'no keys'}"
            )


def load_toml(path: str | Path) -> Table:
    """Read a TOML model file into a strict :class:`Table` (errors name the file)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: model file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None
    return Table(data, "")
