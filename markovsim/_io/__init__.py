"""Model files at the edge: strict TOML tables with units, the one reference rule, the
shipped presets, and in-memory overrides (``--set`` / ``--vary``).

Layer: above the base utilities (``_errors``, ``_units``, ``_config``), below the engine
and the domain packages, which read their model documents with :class:`Table`.
"""

from ._documents import (
    Document as Document,
    Reference as Reference,
    base_of as base_of,
    expand as expand,
    label as label,
    load_with as load_with,
    merge as merge,
    presets as presets,
    read_document as read_document,
    reads_document as reads_document,
    reference as reference,
    resolve as resolve,
    shipped_dir as shipped_dir,
    sources as sources,
)
from ._kinds import ModelKind as ModelKind
from ._overrides import (
    Override as Override,
    Variation as Variation,
    annotate as annotate,
    apply_overrides as apply_overrides,
    parse_override as parse_override,
    parse_value as parse_value,
    parse_variation as parse_variation,
)
from ._table import (
    UNITS as UNITS,
    KeyInfo as KeyInfo,
    Table as Table,
    parse_quantity as parse_quantity,
    quantity_kind as quantity_kind,
    recording_keys as recording_keys,
)

__all__ = [
    "Document", "Reference", "base_of", "expand", "label", "load_with", "merge", "presets", "read_document",
    "reads_document", "reference", "resolve", "shipped_dir", "sources", "ModelKind", "Override",
    "Variation", "annotate", "apply_overrides", "parse_override", "parse_value", "parse_variation",
    "UNITS", "KeyInfo", "Table", "parse_quantity", "quantity_kind", "recording_keys",
]
