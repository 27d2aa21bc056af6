"""Modules imported on first use: ``scipy.stats`` and ``scipy.optimize`` cost about as much
to import as JAX's own start-up, and a goodput, train or infer command never calls them
(issue 14: the first answer in seconds)."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["lazy_module"]


class _LazyModule:
    """Stands for a module until an attribute is read, then imports it (once)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_module(name: str):
    """A stand-in for ``import name`` that imports the module when first used."""
    return _LazyModule(name)
