"""Kinds of model document: what the command line, sweeps and validation cases evaluate.

Each domain package defines its kinds next to its readers (``markovsim.training``:
``train``; ``markovsim.inference``: ``infer``; ``markovsim.availability``: ``goodput``) as
:class:`ModelKind` values; ``markovsim.validate`` and the command line collect them. The
type lives here, below the domains, so that every import points down.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Mapping

from ._documents import Reference

__all__ = ["ModelKind"]

#: ``fn(doc, *, where, base) -> {output: value in SI units}``
Evaluate = Callable[..., Mapping[str, float]]


@dataclasses.dataclass(frozen=True)
class ModelKind:
    """One kind of model document and its scalar outputs.

    Attributes:
        name: the kind's name, as written in case files (``"train"``).
        folder: the presets folder of its files (``"plans"``).
        detect: whether a document is of this kind, by its keys.
        references: the keys that name other model files (expanded once, in memory, before
            ``--set`` / ``--vary`` change the document).
        outputs: ``outputs(doc, *, where, base) -> {name: value}``: the main outputs in SI
            units (a mapping that may compute each value when first read).
        units: the unit of each output (``"s"``, ``"1"``, ``"tokens/s"``).
        case: ``case(doc, *, where, base)`` for a validation case, when a case may carry
            more than a model file (default: ``outputs``).
    """

    name: str
    folder: str
    detect: Callable[[Mapping], bool]
    references: Mapping[str, Reference]
    outputs: Evaluate
    units: Mapping[str, str]
    case: Evaluate | None = None

    def evaluate_case(self, doc: Mapping, *, where: str, base: Path | None) -> Mapping[str, float]:
        """The outputs of a validation case's model document."""
        return (self.case or self.outputs)(doc, where=where, base=base)
