"""Mutations of the shipped model files: every field of every file in ``models/`` set to
each kind of bad value, deleted, or joined by an unknown key, in a tmp copy of ``models/``
(so relative references between files still resolve), then read by the file's own reader.
"""

from __future__ import annotations

import copy
import shutil
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator

from . import toml_text
from .values import bad_values

MODELS = Path(__file__).resolve().parents[2] / "models"


def readers() -> dict[str, Callable[[Path], Any]]:
    """The reader of each folder of ``models/`` (``faults/fitted`` has its own)."""
    from markovsim import availability as av
    from markovsim import inference as inf
    from markovsim import training as tr

    def faults(path: Path):
        if path.name.endswith(".fit.toml"):
            return av.load_fitted_catalogue(path)
        return av.load_faults(path)

    return {"clusters": av.load_cluster, "faults": faults, "fitted": faults, "recovery": av.load_recovery,
            "workloads": tr.load_workload, "hardware": tr.load_hardware, "plans": tr.load_plan,
            "inference": inf.load_inference_model}


def model_files() -> list[Path]:
    """Every shipped model file, relative to ``models/`` (case files: see the CLI part)."""
    return sorted(p.relative_to(MODELS) for p in MODELS.rglob("*.toml") if p.parts[-2] != "cases"
                  and "cases" not in p.relative_to(MODELS).parts)


def leaves(doc: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """``(path, value)`` of every field: tables and arrays of tables are walked (their first
    and last element), every key (tables too) is a field."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield path + (k,), v
            if isinstance(v, dict) or (isinstance(v, list) and v and all(isinstance(x, dict) for x in v)):
                yield from leaves(v, path + (k,))
    elif isinstance(doc, list):
        for i in sorted({0, len(doc) - 1}):
            yield from leaves(doc[i], path + (i,))


def tables(doc: Any, path: tuple = ()) -> Iterator[tuple]:
    """Paths of every table (the top one is ``()``)."""
    if isinstance(doc, dict):
        yield path
        for k, v in doc.items():
            yield from tables(v, path + (k,))
    elif isinstance(doc, list):
        for i in sorted({0, len(doc) - 1}) if doc else ():
            yield from tables(doc[i], path + (i,))


def show(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


_MISSING = object()


def _set(doc: dict, path: tuple, value: Any) -> dict:
    doc = copy.deepcopy(doc)
    node = doc
    for p in path[:-1]:
        node = node[p]
    if value is _MISSING:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def mutations(rel: Path, *, thorough: bool = False) -> Iterator[tuple[str, str, dict]]:
    """``(field, kind, mutated document)`` for one shipped file."""
    doc = tomllib.loads((MODELS / rel).read_text())
    for path, original in leaves(doc):
        field = show(path)
        yield field, "missing", _set(doc, path, _MISSING)
        for kind, value in bad_values(original, thorough=thorough):
            yield field, kind, _set(doc, path, value)
    for path in tables(doc):
        yield show(path + ("no_such_key",)), "unknown key", _set(doc, path + ("no_such_key",), 1)


def copy_models(tmp: Path) -> Path:
    """A copy of ``models/`` under ``tmp`` (the files to mutate)."""
    dst = Path(tmp) / "models"
    if not dst.exists():
        shutil.copytree(MODELS, dst)
    return dst


def write(root: Path, rel: Path, doc: dict) -> Path:
    """Write ``doc`` in place of ``rel`` in the copy ``root`` (the original is restored by
    :func:`restore`)."""
    path = root / rel
    path.write_text(toml_text.dumps(doc))
    return path


def restore(root: Path, rel: Path) -> None:
    shutil.copyfile(MODELS / rel, root / rel)


def reader_for(rel: Path) -> Callable[[Path], Any]:
    return readers()[rel.parts[-2]]
