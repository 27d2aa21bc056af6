"""Deprecated location of the strict TOML reader: use :mod:`markovsim._io`.

Kept so that code written against ``markovsim._spec`` keeps working; it re-exports the
reader and adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from ._io import Table, parse_quantity, read_document
from ._io._table import _KINDS, _NUM  # noqa: F401  (old private names some callers used)

__all__ = ["Table", "load_toml", "parse_quantity"]


def load_toml(path: str | Path) -> Table:
    """Read a TOML model file into a strict :class:`Table` (errors name the file)."""
    return Table(read_document(path), "")
