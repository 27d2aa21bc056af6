"""The catalogue of bad values, by kind, derived from the value a field holds.

A model-file field holding ``"10 s"`` gets ``"-10 s"``, ``"0 s"``, ``"nan s"``, ... and a
wrong unit; a plain number gets ``-1``, ``0``, ``nan``, ...; every field also gets wrong types.
``bad_values(original)`` returns ``[(kind, value), ...]``, one value per kind first; the
``thorough`` profile adds the values in ``EXTRA``.
"""

from __future__ import annotations

import re

HUGE_INT = 2**63
HUGER_INT = 2**200
_QUANTITY = re.compile(r"^\s*([-+0-9.eE]+)\s*(\S.*)$")


def _quantity(text: str):
    m = _QUANTITY.match(text)
    if not m:
        return None
    try:
        float(m.group(1))
    except ValueError:
        return None
    return m.group(2)


def bad_values(original, *, thorough: bool = False) -> list[tuple[str, object]]:
    """Bad values for a field whose good value is ``original``."""
    out: list[tuple[str, object]] = []
    unit = _quantity(original) if isinstance(original, str) else None
    if unit is not None:
        out += [("negative", f"-1 {unit}"), ("zero", f"0 {unit}"), ("nan", f"nan {unit}"),
                ("inf", f"inf {unit}"), ("huge", f"1e308 {unit}"), ("huge int", f"{HUGER_INT} {unit}"),
                ("wrong unit", "5 s" if "B" in unit else "5 GB"),
                ("no unit", "5"), ("wrong type", 5.0)]
        if thorough:
            out += [("negative", f"-1e308 {unit}"), ("tiny", f"1e-320 {unit}"), ("text", "five seconds")]
    elif isinstance(original, bool):
        out += [("wrong type", "yes"), ("wrong type", 1)]
    elif isinstance(original, (int, float)):
        out += [("negative", -1), ("zero", 0), ("nan", float("nan")), ("inf", float("inf")),
                ("huge", 1e308), ("huge int", HUGE_INT), ("huge int", HUGER_INT),
                ("wrong type", "5 min"), ("wrong unit", "5 GB")]
        if isinstance(original, int):
            out += [("fraction", 0.5)]
        if thorough:
            out += [("negative", -HUGER_INT), ("tiny", 1e-320), ("negative", -1e308), ("inf", float("-inf"))]
    elif isinstance(original, str):
        out += [("unknown text", "no-such-value"), ("empty", ""), ("wrong type", 5)]
        if thorough:
            out += [("wrong type", 1.5), ("text", "\x00")]
    elif isinstance(original, list):
        out += [("empty list", []), ("wrong type", "x"), ("wrong type", ["x"])]
    elif isinstance(original, dict):
        out += [("empty table", {}), ("wrong type", 5)]
    out += [("wrong type", [1.0]), ("wrong type", {"x": 1}), ("wrong type", True)]
    return out
