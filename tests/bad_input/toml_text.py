"""A minimal TOML writer for the campaign's mutated model files (no third-party writer).

Every table is written inline (``key = {a = 1, b = [{c = 2}]}``) so the output is one
``key = value`` line per top-level key; floats keep ``nan``/``inf``, integers of any size are
written as digits (``tomllib`` reads them back as Python ints).
"""

from __future__ import annotations

import json
import math


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"not writable as TOML: {v!r}")


def dumps(doc: dict) -> str:
    return "".join(f"{_key(k)} = {value(v)}\n" for k, v in doc.items())
