"""Command-line changes to a model document: ``--set key=value`` and ``--vary key=start:stop:num``.

A model file is read once into a document (a dict); the overrides change a copy of it in
memory and the domain reader checks the result as strictly as the file itself (unknown
keys, missing units). Nothing is written to disk.

Syntax
    ``--set`` ``key.path=value``: the key is a dotted path into the document
    (``efficiency.compute``, ``tiers.restart.restart_time``; ``levels[1].bandwidth`` for an
    element of an array of tables). The value is a TOML literal (``0.55``, ``8``, ``true``,
    ``"30 min"``, ``[16, 32]``); anything that is not a TOML literal is taken as a string,
    so ``--set 'checkpoint.interval=30 min'`` works without the inner quotes. A missing
    table on the path is created; whether the key is allowed is for the model's loader to
    say (its error names the key).

    ``--vary`` ``key.path=start:stop:num`` (``num`` points from ``start`` to ``stop``,
    both included, evenly spaced) or ``key.path=v1,v2,...``. Each endpoint may carry a
    unit (``10min:60min:6``, ``"10 min:1 h:6"``); a bare number is in the unit the model
    file writes the key in (``checkpoint.interval = "30 min"`` makes ``10:60:6`` minutes)
    and plain if the file writes a plain number. A key that is an integer in the file gets
    integer values (an error if the points are not whole numbers); so does a key absent from
    the file whose values are all written as integers.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
from typing import Any, Sequence

import numpy as np

from .._errors import MarkovsimError, SpecError
from ._table import _KINDS, _NUM, parse_quantity, quantity_kind

__all__ = [
    "Override", "Variation", "parse_override", "parse_variation", "parse_value", "apply_overrides",
    "annotate",
]

_SEGMENT = re.compile(r"^([A-Za-z0-9_\-]+)((?:\[\d+\])*)$")


# --------------------------------------------------------------------------- key paths


def _parse_path(key: str, where: str) -> tuple[str | int, ...]:
    key = key.strip()
    if not key:
        raise SpecError(f"{where}: empty key; expected key=value with a dotted key such as efficiency.compute")
    path: list[str | int] = []
    for part in key.split("."):
        m = _SEGMENT.match(part.strip())
        if not m:
            raise SpecError(f"{where}: key {key!r} is not a dotted path of names "
                            "(letters, digits, '_', '-'; [i] for an element of an array of tables)")
        path.append(m.group(1))
        path.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return tuple(path)


def _show(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def parse_value(text: str) -> Any:
    """A TOML literal (``0.55``, ``true``, ``"30 min"``, ``[1, 2]``), else the text as a string."""
    stripped = text.strip()
    try:
        return tomllib.loads(f"v = {stripped}")["v"]
    except tomllib.TOMLDecodeError:
        return stripped


@dataclasses.dataclass(frozen=True)
class Override:
    """One ``--set`` change: the key path, the new value and the text as given."""

    path: tuple[str | int, ...]
    value: Any
    text: str

    @property
    def key(self) -> str:
        return _show(self.path)


def parse_override(text: str) -> Override:
    """Parse ``key.path=value`` (see the module documentation)."""
    where = f"--set {text!r}"
    if "=" not in text:
        raise SpecError(f"{where}: expected key=value, e.g. --set efficiency.compute=0.55")
    key, value = text.split("=", 1)
    if not value.strip():
        raise SpecError(f"{where}: no value after '='; expected key=value, e.g. --set efficiency.compute=0.55")
    return Override(_parse_path(key, where), parse_value(value), text)


def _get(doc: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` or ``...`` when absent (a non-table on the way is absent too)."""
    node = doc
    for p in path:
        if isinstance(p, int):
            if not isinstance(node, list) or p >= len(node):
                return ...
        elif not isinstance(node, dict) or p not in node:
            return ...
        node = node[p]
    return node


def _set(doc: dict, path: tuple[str | int, ...], value: Any, where: str) -> None:
    node: Any = doc
    for i, p in enumerate(path[:-1]):
        here = _show(path[: i + 1])
        nxt = path[i + 1]
        if isinstance(p, int):
            if not isinstance(node, list):
                raise SpecError(f"{where}: {_show(path[:i]) or 'the document'} is not an array; "
                                f"cannot take element [{p}]")
            if p >= len(node):
                raise SpecError(f"{where}: {_show(path[:i])} has {len(node)} element(s); "
                                f"index [{p}] is out of range")
            node = node[p]
            continue
        if p not in node:
            if isinstance(nxt, int):
                raise SpecError(f"{where}: {here} is not in the model file; cannot take element [{nxt}]")
            node[p] = {}
        child = node[p]
        if isinstance(nxt, int):
            if not isinstance(child, list):
                raise SpecError(f"{where}: {here}={child!r} is not an array; cannot take element [{nxt}]")
        elif not isinstance(child, dict):
            raise SpecError(f"{where}: {here}={child!r} is a value, not a table; "
                            f"cannot set {_show(path)} inside it")
        node = child
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise SpecError(f"{where}: index [{last}] is out of range")
    node[last] = value


def apply_overrides(doc: dict, overrides: list[Override]) -> dict:
    """A deep copy of ``doc`` with every override applied, in order."""
    out = copy.deepcopy(doc)
    for o in overrides:
        _set(out, o.path, o.value, f"--set {o.text!r}")
    return out


def annotate(exc: MarkovsimError, overrides: Sequence[Override]) -> MarkovsimError:
    """The error with the ``--set`` that introduced a key the reader rejects pointed at."""
    message = str(exc)
    hits = [o for o in overrides if isinstance(o.path[-1], str) and f"'{o.path[-1]}'" in message]
    if hits and "unknown key" in message:
        return type(exc)(message + " (introduced by " + ", ".join(f"--set {o.text}" for o in hits) + ")")
    return exc


# --------------------------------------------------------------------------- --vary


@dataclasses.dataclass(frozen=True)
class Variation:
    """One ``--vary`` axis: the key path, the values to write into the document, and the
    coordinate (numbers, in ``unit``) for the Dataset."""

    path: tuple[str | int, ...]
    text: str
    written: tuple[Any, ...]
    coordinate: np.ndarray
    unit: str

    @property
    def key(self) -> str:
        return _show(self.path)

    @property
    def named(self) -> bool:
        """Whether the axis holds names or flags (no unit) rather than numbers."""
        return self.coordinate.dtype.kind in "US"


def _number_unit(text: str, where: str) -> tuple[float, str]:
    m = _NUM.match(text)
    if not m:
        raise SpecError(f"{where}: {text!r} is not a number with an optional unit (e.g. 600, 10min, \"10 min\")")
    return float(m.group(1)), m.group(2)


def _kind_of(unit: str, where: str) -> str:
    kind = quantity_kind(unit)
    if kind is not None:
        return kind
    known = sorted({u for units in _KINDS.values() for u in units if u})
    raise SpecError(f"{where}: unknown unit {unit!r} (expected one of {', '.join(known)})")


def _fmt(x: float) -> str:
    return f"{x:.12g}"


#: the most points one --vary axis may have
MAX_POINTS = 1_000_000


def _categorical(original, texts) -> bool:
    """Whether a listed ``--vary`` axis names choices rather than numbers: the file writes the
    key as a name (a string that is not a number with a unit: ``recompute = "full"``), or
    does not write it and no listed value is a number."""
    if isinstance(original, str):
        return not _NUM.match(original)
    return original is ... and not any(_NUM.match(t.strip()) for t in texts)


def _text_variation(path, text: str, texts, where: str) -> Variation:
    """A ``--vary`` axis of names (``recompute=none,selective,full``): written as the names,
    its coordinate the names too; the model's reader checks each (a point with a name it
    refuses fails with that reader's message, as any refused point does)."""
    names = tuple(t.strip().strip('"').strip("'") for t in texts)
    if any(not n for n in names):
        raise SpecError(f"{where}: an empty name in the list; expected key=name1,name2,...")
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: a name appears twice in the list")
    return Variation(path, text, names, np.asarray(names, dtype=str), "")


def _flag_variation(path, text: str, texts, where: str) -> Variation:
    """A ``--vary`` axis of a true/false key (``sequence_parallel=true,false``): written as
    booleans, its coordinate the words."""
    words = tuple(t.strip().lower() for t in texts)
    if any(w not in ("true", "false") for w in words) or len(set(words)) != len(words):
        raise SpecError(f"{where}: {_show(path)} is true or false; expected key=true,false (each once)")
    return Variation(path, text, tuple(w == "true" for w in words), np.asarray(words, dtype=str), "")


def parse_variation(text: str, doc: dict) -> Variation:
    """Parse ``key=start:stop:num`` or ``key=v1,v2,...`` against the model document ``doc``
    (whose value of the key sets the unit of bare numbers and whether values are integers)."""
    where = f"--vary {text!r}"
    if "=" not in text:
        raise SpecError(f"{where}: expected key=start:stop:num or key=v1,v2,...")
    key, spec = text.split("=", 1)
    path = _parse_path(key, where)
    spec = spec.strip()
    original = _get(doc, path)
    file_unit = ""
    if isinstance(original, str):
        m = _NUM.match(original)
        if m:
            file_unit = m.group(2)
    integer = isinstance(original, int) and not isinstance(original, bool)

    if ":" in spec:
        parts = spec.split(":")
        if len(parts) != 3:
            raise SpecError(f"{where}: expected start:stop:num (three fields separated by ':')")
        try:
            num = int(parts[2])
        except ValueError:
            raise SpecError(f"{where}: num={parts[2]!r}: expected a whole number of points >= 1") from None
        if num < 1:
            raise SpecError(f"{where}: num={num}: expected a whole number of points >= 1")
        if num > MAX_POINTS:
            raise SpecError(f"{where}: num={num}: expected at most {MAX_POINTS} points per axis (each point is "
                            "a model evaluation; split a larger sweep)")
        texts = parts[:2]
        ends = [_number_unit(p, where) for p in texts]
    elif spec:
        texts = spec.split(",")
        if isinstance(original, bool) or (original is ... and all(t.strip().lower() in ("true", "false")
                                                                  for t in texts)):
            return _flag_variation(path, text, texts, where)
        if _categorical(original, texts):
            return _text_variation(path, text, texts, where)
        ends = [_number_unit(p, where) for p in texts]
        num = None
    else:
        raise SpecError(f"{where}: no values; expected key=start:stop:num or key=v1,v2,...")

    units = {u for _, u in ends if u}
    if units:
        # explicit units: SI in between, written back in the first explicit unit
        unit = next(u for _, u in ends if u)
        kind = _kind_of(unit, where)
        for _, u in ends:
            if u:
                _kind_of(u, where)
                if u not in _KINDS[kind]:
                    raise SpecError(f"{where}: units {unit!r} and {u!r} measure different things")
        factor = _KINDS[kind][unit]
        si = [parse_quantity(f"{x} {u or unit}".strip(), kind, where=where) for x, u in ends]
        values = np.linspace(si[0], si[1], num) if num is not None else np.asarray(si)
        coordinate = values / factor
        written = tuple(f"{_fmt(c)} {unit}" if unit != "%" else f"{_fmt(c)} %" for c in coordinate)
        return Variation(path, text, written, coordinate, unit)

    raw = [x for x, _ in ends]
    values = np.linspace(raw[0], raw[1], num) if num is not None else np.asarray(raw)
    if file_unit:
        return Variation(path, text, tuple(f"{_fmt(v)} {file_unit}" for v in values), values, file_unit)
    literal_ints = original is ... and all(re.fullmatch(r"[-+]?\d+", t.strip()) for t in texts)
    if integer or literal_ints:
        whole = np.round(values)
        if not np.allclose(values, whole, rtol=0, atol=1e-9):
            if not integer:
                return Variation(path, text, tuple(float(v) for v in values), values.astype(float), "")
            raise SpecError(f"{where}: {_show(path)} is an integer in the model file but the points "
                            f"{', '.join(_fmt(v) for v in values)} are not whole numbers; choose start, stop "
                            "and num so that they are, or list the values")
        ints = tuple(int(v) for v in whole)
        return Variation(path, text, ints, np.asarray(ints, dtype=np.int64), "")
    return Variation(path, text, tuple(float(v) for v in values), values.astype(float), "")
