"""Model documents: reading TOML once, the shipped presets, and the one rule for references.

A model file is read once into a :class:`Document` (a dict that remembers its file). The
domain readers (``*_from_document(doc, *, where, base)``) take documents, so a document
changed in memory (``--set``, ``--vary``, a validation case) is read without writing any
file.

The reference rule, the same in Python, on the command line and in case files
    A value that names another model file (a plan's ``workload``, a cluster's ``faults``,
    a job's ``cluster``) is

    * a **bare name** (no ``/`` and no ``.toml`` suffix): the preset of that name shipped
      with markovsim, ``models/<folder>/<name>.toml``;
    * a **path**: relative to the directory of the file that contains the reference (for
      a name given on the command line or to a Python function: the working directory);
    * a **table**: the document itself, inline; or ``{file = "...", <changes>}``, the
      file with the changes deep-merged over it.

The presets (``models/``) and reproduction scripts (``paper_repro/``) live at the top of the
source repository and are packed into the wheel as package data (``markovsim/_shipped/``);
:func:`shipped_dir` finds them through :mod:`importlib.resources` in an installed wheel and
in the source checkout otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.resources
import inspect
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping

from .._errors import InvalidParameterError, MarkovsimError, SpecError

__all__ = ["Document", "Reference", "base_of", "expand", "label", "load_with", "merge", "presets", "read_document",
           "reads_document", "reference", "resolve", "shipped_dir", "sources"]

#: where the wheel keeps the top-level ``models/`` and ``paper_repro/`` folders
_SHIPPED = "_shipped"


class Document(dict):
    """A model document (a dict as read by :mod:`tomllib`) that remembers its file.

    Attributes:
        origin: the file it was read from (``None`` for a document written inline).
    """

    origin: Path | None = None

    @classmethod
    def of(cls, data: Mapping, origin: Path | None = None) -> "Document":
        doc = cls(data)
        doc.origin = origin
        return doc


def shipped_dir(name: str) -> Path:
    """The folder ``models`` or ``paper_repro`` shipped with markovsim.

    In an installed wheel: ``markovsim/_shipped/<name>`` (package data, found through
    :mod:`importlib.resources`); in a source checkout: ``<name>/`` at the top of the
    repository.

    Raises:
        SpecError: neither exists (a broken installation).
    """
    packaged = importlib.resources.files("markovsim").joinpath(_SHIPPED, name)
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / name
    if checkout.is_dir():
        return checkout
    raise SpecError(f"markovsim's {name}/ folder is missing (looked for {packaged} and {checkout}); "
                    "reinstall markovsim")


def presets(folder: str) -> tuple[str, ...]:
    """The names of the shipped presets in ``models/<folder>/``."""
    directory = shipped_dir("models") / folder
    return tuple(sorted(p.stem for p in directory.glob("*.toml"))) if directory.is_dir() else ()


def _is_bare(ref: str) -> bool:
    return "/" not in ref and "\\" not in ref and not ref.endswith(".toml")


def _near_presets(ref: str, names) -> list[str]:
    """The presets a mistyped bare name most likely meant: those that match it ignoring case
    and the separators ``-``, ``_`` and space, or start with it so read, else the closest by
    :func:`difflib.get_close_matches` (at most three)."""
    import difflib

    def norm(text: str) -> str:
        return "".join(ch for ch in text.casefold() if ch not in "-_ ")

    key = norm(ref)
    same = [n for n in names if norm(n) == key or (key and norm(n).startswith(key))]
    if same:
        return same[:3]
    folded = {norm(n): n for n in names}
    return [folded[m] for m in difflib.get_close_matches(key, list(folded), n=3, cutoff=0.75)]


def resolve(ref: str | Path, *, folder: str, base: Path | None = None, where: str = "") -> Path:
    """The file a reference names (see the module documentation for the rule).

    Args:
        ref: a bare preset name (``"ascend_tiered"``) or a path (``"my/plan.toml"``,
            a :class:`~pathlib.Path`).
        folder: the presets folder for bare names (``"recovery"``).
        base: the directory of the file holding the reference (``None``: the working
            directory; the path is then returned as written).
        where: the reference's name for error messages.

    Raises:
        SpecError: a bare name with no preset of that name (the message lists the presets).
    """
    if isinstance(ref, str) and ref and _is_bare(ref):
        candidate = shipped_dir("models") / folder / f"{ref}.toml"
        if candidate.is_file():
            return candidate
        names = presets(folder)
        known = ", ".join(names) or "none"
        label = f"{where}={ref!r}" if where else repr(ref)
        near = _near_presets(ref, names)
        hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
        raise SpecError(f"{label}: model file not found: {hint}no preset {ref!r} in models/{folder}/ "
                        f"(presets: {known}); a path needs a '/' or the .toml suffix")
    if not isinstance(ref, (str, Path)) or not str(ref):
        raise SpecError(f"{where or 'reference'}={ref!r}: expected a file name or a preset name")
    path = Path(ref)
    if base is not None and not path.is_absolute():
        path = Path(base) / path
    return path


def read_document(path: str | Path) -> Document:
    """The TOML document at ``path``, read once (:class:`SpecError` when missing or invalid)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: model file not found") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, expected a model file (TOML)") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file (expected a TOML model file)") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc})") from None
    return Document.of(data, path)


def load_with(reader: Callable[..., Any], ref: str | Path, *, folder: str) -> Any:
    """``reader(doc, where=..., base=...)`` on the file ``ref`` names (a path, or a bare preset
    name in ``models/<folder>/``): how every ``load_*`` function of the domains reads a file."""
    path = resolve(ref, folder=folder)
    return reader(read_document(path), where=str(path), base=path.parent)


def merge(base: Mapping, over: Mapping) -> dict:
    """A deep copy of ``base`` with ``over`` deep-merged into it (tables merge, values replace)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def reference(value: Any, *, folder: str, base: Path | None, where: str) -> Document:
    """The document a reference names: a file (read), an inline table, or ``{file = ..., ...}``.

    The returned document's ``origin`` is the file read (``None`` for an inline table).
    """
    if isinstance(value, Mapping):
        if "file" not in value:
            return Document.of(value, getattr(value, "origin", None))
        changes = {k: v for k, v in value.items() if k != "file"}
        found = reference(value["file"], folder=folder, base=base, where=f"{where}.file")
        return Document.of(merge(found, changes), found.origin)
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}={value!r}: expected a file name, the bare name of a preset in "
                        f"models/{folder}/, or a table")
    return read_document(resolve(value, folder=folder, base=base, where=where))


def base_of(doc: Mapping, base: Path | None) -> Path | None:
    """The directory that references inside ``doc`` are relative to."""
    origin = getattr(doc, "origin", None)
    return origin.parent if origin is not None else base


def label(key: str, doc: Mapping) -> str:
    """How errors name a referenced document: ``cluster (models/clusters/x.toml)``."""
    origin = getattr(doc, "origin", None)
    return f"{key} ({origin})" if origin is not None else key


@dataclasses.dataclass(frozen=True)
class Reference:
    """A key of a model document that names another model file.

    Attributes:
        folder: the presets folder of bare names (``"faults"``).
        nested: the referenced document's own references.
    """

    folder: str
    nested: Mapping[str, "Reference"] = dataclasses.field(default_factory=dict)


def expand(doc: Mapping, references: Mapping[str, Reference], *, base: Path | None, where: str) -> Document:
    """``doc`` with every reference replaced by the document it names (recursively), so that
    ``--set`` and ``--vary`` reach every value and each file is read once.

    Each inlined document keeps its ``origin`` (for error messages); references left in
    an inline table resolve against the directory of the file that holds them.
    """
    out = Document.of(copy.deepcopy(dict(doc)), getattr(doc, "origin", None))
    here = base_of(doc, base)
    for key, ref in references.items():
        if key not in out:
            continue
        found = reference(out[key], folder=ref.folder, base=here, where=f"{where}.{key}")
        out[key] = expand(found, ref.nested, base=here, where=label(f"{where}.{key}", found))
    return out


def sources(doc: Mapping, references: Mapping[str, Reference], prefix: str = "") -> dict[str, Path | None]:
    """``{"cluster": path, "cluster.faults": path, ...}``: the files an expanded document
    was read from (``None`` for inline tables)."""
    out: dict[str, Path | None] = {}
    for key, ref in references.items():
        value = doc.get(key)
        if isinstance(value, Mapping):
            name = f"{prefix}{key}"
            out[name] = getattr(value, "origin", None)
            out.update(sources(value, ref.nested, f"{name}."))
    return out


def _prefixed(where: str, message: str) -> str:
    return message if not where or message.startswith(where) else f"{where}: {message}"


def reads_document(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a domain reader ``x_from_document(doc, *, where, base)``.

    Checks that ``doc`` is a table, passes ``base`` (the directory of the document's own file
    when it has one, else the ``base`` given) and names ``where`` in every error raised; a value
    error (:class:`~markovsim.InvalidParameterError`) from a model's own checks becomes a
    :class:`~markovsim.SpecError` (the value came from a model file).
    """

    default = inspect.signature(fn).parameters["where"].default

    @functools.wraps(fn)
    def reader(doc: Mapping, *, where: str = default, base: Path | None = None):
        if not isinstance(doc, Mapping):
            raise SpecError(f"{where or 'model'}: expected a table (a model document), got "
                            f"{type(doc).__name__} {doc!r}")
        try:
            return fn(doc, where=where, base=base_of(doc, None if base is None else Path(base)))
        except InvalidParameterError as exc:
            error = SpecError(_prefixed(where, str(exc)))
            # a value of the right type that the model's own checks refuse (a schedule that
            # does not tile, a rate out of range), as opposed to a malformed document
            error.refused_value = not isinstance(exc, TypeError) or getattr(exc, "refused_value", False)
            raise error from None
        except MarkovsimError as exc:
            message = _prefixed(where, str(exc))
            if message == str(exc):
                raise
            error = type(exc)(message)
            error.refused_value = getattr(exc, "refused_value", False)
            raise error from None

    return reader
