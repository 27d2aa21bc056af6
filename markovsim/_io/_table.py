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

Every key a :class:`Table` reads is also described: its kind (and so its unit), default,
allowed range and an optional one-line ``doc``. Inside :func:`recording_keys` these
descriptions are collected, which is how the reference page of every model-file key is
generated from the readers themselves (``markovsim keys``).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from typing import Any, Iterator

from .._errors import SpecError
from .._units import DAY, HOUR, MINUTE, YEAR

__all__ = ["Table", "parse_quantity", "quantity_kind", "KeyInfo", "recording_keys", "UNITS"]

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


#: the units of each kind of quantity, name -> factor to SI
UNITS = _KINDS


def quantity_kind(unit: str) -> str | None:
    """The kind (``"time"``, ``"data"``, ...) a unit belongs to; ``None`` for an unknown unit.

    The empty unit and ``%`` are ``"ratio"``.

    >>> quantity_kind("min"), quantity_kind("GB"), quantity_kind("%"), quantity_kind("parsec")
    ('time', 'data', 'ratio', None)
    """
    for kind, units in _KINDS.items():
        if unit in units:
            return kind
    return None


# --------------------------------------------------------------------------- key descriptions


#: the largest integer a model file may hold (2**53, exact in float64)
MAX_INTEGER = 2**53
#: the longest time a model file may hold, seconds
MAX_TIME = 1e15


@dataclasses.dataclass(frozen=True)
class KeyInfo:
    """How a reader reads one key of one kind of model file.

    Attributes:
        schema: the kind of file (``"recovery"``, ``"plan"``, ...).
        key: the key's path in the file, ``[]`` marking an array of tables
            (``"tiers[].rollback"``).
        kind: ``text``, ``integer``, ``boolean``, ``number``, ``list``, ``table``,
            ``array of tables``, ``any``, or a quantity kind (``time``, ``rate``, ``data``,
            ``bandwidth``, ``compute``, ``ratio``) whose units the reference lists.
        required: whether the key must be present.
        default: the default as written (empty when required or without a default).
        constraint: the allowed values (``">= 1"``, ``"0 to 1"``, ``"one of 'a', 'b'"``).
        doc: one line saying what the key means (empty when the reader gives none).
    """

    schema: str
    key: str
    kind: str
    required: bool
    default: str
    constraint: str
    doc: str


_RECORD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("markovsim_keys", default=None)


@contextlib.contextmanager
def recording_keys() -> Iterator[dict[tuple[str, str], KeyInfo]]:
    """Collect a :class:`KeyInfo` for every key that a :class:`Table` with a schema reads.

    Yields the dict ``{(schema, key): KeyInfo}`` being filled (the first description of a
    key wins, a later ``doc`` fills an empty one).
    """
    found: dict[tuple[str, str], KeyInfo] = {}
    token = _RECORD.set(found)
    try:
        yield found
    finally:
        _RECORD.reset(token)


def _shown_default(default: Any) -> str:
    if default is ... or default is None:
        return ""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):
        return repr(default) if default else '""'
    return f"{default:g}" if isinstance(default, float) else repr(default)


def _range(minimum: Any, maximum: Any, strictly_positive: bool = False) -> str:
    low = "> 0" if strictly_positive else (f">= {minimum:g}" if minimum is not None else "")
    high = f"<= {maximum:g}" if maximum is not None else ""
    if low.startswith(">=") and high:
        return f"{minimum:g} to {maximum:g}"
    return " and ".join(x for x in (low, high) if x)


class Table:
    """A TOML table read strictly: every key must be consumed, unknown keys are errors.

    Read each expected key with an accessor (:meth:`text`, :meth:`integer`, :meth:`quantity`,
    :meth:`probability`, :meth:`table`, :meth:`tables`, :meth:`raw`) for each expected key,
    then :meth:`finish` to reject the rest. Each accessor takes an optional ``doc``: one line
    saying what the key means, for the generated reference of model-file keys.

    Args:
        data: the table (a dict, as read by ``tomllib``).
        where: the table's name in error messages (``"tiers[0]"``; empty for a file's top).
        schema: the kind of model file (``"recovery"``); keys of a table with a schema are
            described to :func:`recording_keys`. Nested tables inherit it.
        docs: ``{key path: one-line meaning}`` for keys read without a ``doc`` (the reader's
            descriptions kept beside it); nested tables inherit it.
    """

    def __init__(self, data: dict, where: str = "", *, schema: str = "", docs: dict | None = None,
                 _path: str = ""):
        if not isinstance(data, dict):
            raise SpecError(f"{where}: expected a table, got {type(data).__name__} {data!r}")
        self._data = dict(data)
        self._seen: set[str] = set()
        self.where = where
        self.schema = schema
        self._docs = docs or {}
        self._path = _path

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def keys(self):
        return self._data.keys()

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _key_path(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def _note(self, key: str, kind: str, default: Any, constraint: str = "", doc: str | None = None) -> None:
        found = _RECORD.get()
        if found is None or not self.schema:
            return
        ident = (self.schema, self._key_path(key))
        doc = doc or self._docs.get(ident[1], "")
        old = found.get(ident)
        if old is None or (old.kind == "any" and kind != "any"):
            found[ident] = KeyInfo(self.schema, ident[1], kind, default is ..., _shown_default(default),
                                   constraint, doc or (old.doc if old else ""))
        elif doc and not old.doc:
            found[ident] = dataclasses.replace(old, doc=doc)

    def _get(self, key: str, default: Any = ..., types: tuple = ()) -> Any:
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

    def raw(self, key: str, default: Any = ..., *, types: tuple = (), doc: str | None = None) -> Any:
        """The value of ``key`` as written (``default`` when absent; required if none)."""
        kinds = {(int,): "integer", (bool,): "boolean", (str,): "text", (dict,): "table",
                 (list,): "list", (list, tuple): "list", (int, float): "number",
                 (str, dict): "file reference or table"}
        self._note(key, kinds.get(tuple(types), "any"), default, doc=doc)
        return self._get(key, default, types)

    def text(self, key: str, default: Any = ..., *, choices: tuple[str, ...] | None = None,
             doc: str | None = None) -> str:
        self._note(key, "text", default, f"one of {', '.join(map(repr, choices))}" if choices else "", doc)
        if choices is not None and key in self._data and not isinstance(self._data[key], str):
            # a number or a list where a name belongs: say the names, not only "expected str"
            raise SpecError(f"{self._name(key)}={self._data[key]!r}: expected one of {', '.join(map(repr, choices))} "
                            "(a quoted name)")
        value = self._get(key, default, (str,))
        if choices is not None and value not in choices:
            # A choice written in another case ("FP8", "Fixed-Global") is the choice: the
            # library's own API reads these names case-insensitively, and so does a file.
            folded = [c for c in choices if c.casefold() == value.casefold()] if isinstance(value, str) else []
            if len(folded) != 1:
                raise SpecError(f"{self._name(key)}={value!r}: expected one of {', '.join(map(repr, choices))}")
            value = folded[0]
        return value

    def integer(self, key: str, default: Any = ..., *, minimum: int | None = None, doc: str | None = None) -> int:
        self._note(key, "integer", default, f">= {minimum}" if minimum is not None else "", doc)
        value = self._get(key, default, (int,))
        if value is not None and minimum is not None and value < minimum:
            raise SpecError(f"{self._name(key)}={value!r}: expected an integer >= {minimum}")
        if value is not None and abs(value) > MAX_INTEGER:
            raise SpecError(f"{self._name(key)}={value!r}: expected an integer of at most {MAX_INTEGER} (2**53; "
                            "no count in a model file is larger, and larger ones lose precision in float64)")
        return value

    def quantity(self, key: str, kind: str, default: Any = ..., *,
                 minimum: float | None = 0.0, maximum: float | None = None,
                 strictly_positive: bool = False, doc: str | None = None) -> float:
        """A dimensioned value in SI units; checks the range and names the field on error."""
        self._note(key, kind, default, _range(minimum, maximum, strictly_positive), doc)
        value: Any = ...
        for suffix, factor in _SUFFIX[kind].items():
            if suffix and (key + suffix) in self._data:
                value = float(self._get(key + suffix, types=(int, float))) * factor
                shown = f"{self._name(key + suffix)}={self._data[key + suffix]!r}"
                break
        if value is ...:
            raw = self._get(key, default)
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
        if kind == "time" and value > MAX_TIME:
            raise SpecError(f"{shown}: expected a time of at most {MAX_TIME:g} s (about 32 million years); "
                            "longer ones overflow the models' arithmetic")
        return value

    def probability(self, key: str, default: Any = ..., *, doc: str | None = None) -> float:
        return self.quantity(key, "ratio", default, minimum=0.0, maximum=1.0, doc=doc)

    def table(self, key: str, default: Any = ..., *, doc: str | None = None) -> "Table":
        self._note(key, "table", default, doc=doc)
        value = self._get(key, default, (dict,))
        return Table(value, self._name(key), schema=self.schema, docs=self._docs, _path=self._key_path(key))

    def tables(self, key: str, default: Any = ..., *, doc: str | None = None) -> list["Table"]:
        """An array of tables (``[[key]]``)."""
        self._note(key, "array of tables", default, doc=doc)
        value = self._get(key, default, (list,))
        path = self._key_path(key) + "[]"
        return [Table(v, f"{self._name(key)}[{i}]", schema=self.schema, docs=self._docs, _path=path)
                for i, v in enumerate(value)]

    def finish(self) -> None:
        """Raise :class:`SpecError` for every key that was never read (unknown keys)."""
        unknown = sorted(set(self._data) - self._seen)
        if unknown:
            raise SpecError(
                f"{self.where or 'model file'}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"expected only {', '.join(map(repr, sorted(self._seen))) or 'no keys'}"
            )
