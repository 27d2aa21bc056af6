"""Gridded results on disk and the status of each point, shared by :func:`markovsim.sweep`
and ``markovsim sweep``.

A grid is cut into rectangular chunks (:class:`_Plan`). A zarr store (:class:`_Store`)
holds the outputs, each point's ``status`` (:class:`PointStatus`) and ``reason``, and per
chunk a record that it is done and a checksum of its data; while a sweep writes a store it
holds a lock file beside it (``<store>.lock``). :func:`open_sweep` reads a store back and
checks every chunk; :func:`save_sweep` writes a finished Dataset (netCDF or a checksummed
zarr store) and, like every output of markovsim, refuses to overwrite data unless forced.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import socket
import time
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np

from ._errors import InvalidParameterError, SpecError

__all__ = ["PointStatus", "point_statuses", "status_attrs", "open_sweep", "save_sweep", "check_output",
           "DEFAULT_CHUNK_SIZE"]

DEFAULT_CHUNK_SIZE = 8192

_STATUS = "status"
_REASON = "reason"
_STORE_FORMAT = "markovsim.sweep/2"
_PROGRESS_GROUP = "sweep_progress"


class PointStatus(enum.IntEnum):
    """Status of one grid point (variable ``status``; the ``reason`` variable says why).

    Attributes:
        OK: every output is finite.
        NOT_FINITE: an output is NaN or infinite (``reason`` names them).
        INVALID_INPUT: the model refused the point's values (a ``SpecError`` or
            ``InvalidParameterError``; ``reason`` is its message).
        FAILED: the model raised another markovsim error (a solver that failed, ...).
    """

    OK = 0
    NOT_FINITE = 1
    INVALID_INPUT = 2
    FAILED = 3


def status_attrs() -> dict:
    """The attributes of the ``status`` variable (CF flag conventions)."""
    return {"long_name": "evaluation status of each point",
            "flag_values": [int(s) for s in PointStatus],
            "flag_meanings": " ".join(s.name.lower() for s in PointStatus),
            "description": "0 ok; 1 an output is NaN or infinite; 2 the model refused the point's "
                           "values; 3 the model failed otherwise. Why: the 'reason' variable"}


REASON_ATTRS = {"long_name": "why the point's status is not ok (empty where it is)"}


def _reason_width(outputs) -> int:
    return len("not finite: " + ", ".join(outputs))


def point_statuses(data: Mapping[str, np.ndarray], shape: tuple[int, ...],
                   errors: Mapping[tuple[int, ...], BaseException] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The status and reason of every point, from the outputs and the errors raised.

    Args:
        data: the outputs on the grid.
        shape: the grid's shape.
        errors: ``{index: exception}`` for the points where the model raised.

    Returns:
        (``status``: int8 codes of :class:`PointStatus`; ``reason``: strings, empty where ok)
    """
    status = np.zeros(shape, dtype=np.int8)
    reason = np.full(shape, "", dtype=object)
    names = sorted(data)
    bad = {n: ~np.isfinite(data[n]) for n in names if np.issubdtype(np.asarray(data[n]).dtype, np.inexact)}
    for index in zip(*np.nonzero(np.logical_or.reduce([*bad.values(), np.zeros(shape, bool)]))):
        status[index] = PointStatus.NOT_FINITE
        reason[index] = "not finite: " + ", ".join(n for n in names if n in bad and bad[n][index])
    for index, exc in (errors or {}).items():
        invalid = isinstance(exc, (SpecError, InvalidParameterError))
        status[index] = PointStatus.INVALID_INPUT if invalid else PointStatus.FAILED
        reason[index] = " ".join(str(exc).split())
    width = max(1, max((len(r) for r in reason.ravel()), default=1))
    return status, reason.astype(f"<U{width}")


# --------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything needed to evaluate one chunk, small enough to ship to a dask worker."""

    token: str                       # identifies the compiled function in a worker's cache
    names: tuple[str, ...]           # axis names, in grid order
    values: tuple[np.ndarray, ...]   # axis values
    block: tuple[int, ...]           # block (chunk) shape
    outputs: tuple[str, ...]         # output names (sorted), without status
    dtypes: tuple[str, ...]          # output dtypes
    scalar_output: bool              # fn returns a bare scalar (stored under outputs[0])

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.values)

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of blocks along each axis."""
        return tuple(-(-n // b) for n, b in zip(self.shape, self.block))

    @property
    def n_chunks(self) -> int:
        return math.prod(self.grid)

    def region(self, chunk: int) -> tuple[slice, ...]:
        """The grid region covered by chunk number ``chunk`` (C order over blocks)."""
        index = np.unravel_index(chunk, self.grid)
        return tuple(slice(int(i) * b, min((int(i) + 1) * b, n))
                     for i, b, n in zip(index, self.block, self.shape))


def _block_shape(shape: tuple[int, ...], chunk_size: int) -> tuple[int, ...]:
    """Rectangular blocks of at most ``chunk_size`` points, filled from the last axis.

    Along each axis the blocks are balanced (sizes differ by at most one before the edge), so
    that padding of edge blocks stays small.
    """
    block = [1] * len(shape)
    room = chunk_size
    for d in reversed(range(len(shape))):
        n = shape[d]
        if room <= 1:
            break
        pieces = -(-n // room)
        block[d] = -(-n // pieces)
        room //= block[d]
    return tuple(block)


# --------------------------------------------------------------------------- the store


def _fingerprint(plan: _Plan) -> dict:
    digest = hashlib.sha256()
    for name, value in zip(plan.names, plan.values):
        digest.update(name.encode())
        digest.update(str(value.dtype).encode())
        digest.update(value.tobytes())
    return {"format": _STORE_FORMAT, "axes": list(plan.names), "shape": list(plan.shape),
            "block": list(plan.block), "outputs": list(plan.outputs), "dtypes": list(plan.dtypes),
            "axis_values_sha256": digest.hexdigest()}


def _fill(dtype: np.dtype):
    if dtype.kind == "f":
        return float("nan")
    if dtype.kind == "b":
        return False
    return 0


def checksum(values: Mapping[str, np.ndarray]) -> int:
    """A 64-bit checksum of some arrays (by name, in sorted order; strings by their text)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(values):
        v = np.asarray(values[name])
        h.update(name.encode())
        h.update(str(v.shape).encode())
        if v.dtype.kind in "UOT":
            h.update("\0".join(map(str, v.ravel())).encode())
        else:
            h.update(np.ascontiguousarray(v).tobytes())
    return int.from_bytes(h.digest(), "little")


class _Lock:
    """A lock file beside a store (``<store>.lock``): one writer at a time.

    A lock left by a process of this machine that no longer runs is taken over.
    """

    def __init__(self, path: Path):
        self.path = path.with_name(path.name + ".lock")
        self.held = False

    def _stale(self) -> bool:
        try:
            info = json.loads(self.path.read_text())
            if info.get("host") != socket.gethostname():
                return False
            os.kill(int(info["pid"]), 0)
        except ProcessLookupError:
            return True
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return False

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})
        for attempt in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if attempt == 0 and self._stale():
                    self.path.unlink(missing_ok=True)
                    continue
                try:
                    holder = json.loads(self.path.read_text())
                except (OSError, ValueError):
                    holder = {}
                raise InvalidParameterError(
                    f"sweep store {str(self.path)[:-5]!r}: another sweep is writing it (lock file "
                    f"{self.path}, process {holder.get('pid', '?')} on {holder.get('host', '?')}); wait for it, "
                    "or delete the lock file if no sweep is running") from None
            with os.fdopen(fd, "w") as fh:
                fh.write(info)
            self.held = True
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def __exit__(self, *exc):
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
        return False


class _Store:
    """A zarr store holding the gridded outputs, status and reason and, per chunk, whether it
    is done and the checksum of its data."""

    def __init__(self, path: Path, plan: _Plan):
        import zarr

        self.path = path
        self.plan = plan
        fingerprint = _fingerprint(plan)
        if path.suffix in (".nc", ".nc4", ".netcdf", ".h5"):
            raise InvalidParameterError(
                f"sweep store={str(path)!r}: netCDF files cannot record finished chunks safely; "
                "use a zarr directory (e.g. 'sweep.zarr') and, if you need netCDF, write the "
                "returned Dataset with ds.to_netcdf(...)"
            )
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            found = _read_fingerprint(path)
            if found is None:
                raise InvalidParameterError(
                    f"sweep store={str(path)!r}: exists but is not a markovsim sweep store; "
                    "choose a new path (nothing was overwritten)"
                )
            if found != fingerprint:
                diff = [k for k in fingerprint if found.get(k) != fingerprint[k]]
                raise InvalidParameterError(
                    f"sweep store={str(path)!r}: holds a different sweep (differs in "
                    f"{', '.join(diff)}); use a new path or delete the old store"
                )
            self.root = zarr.open_group(str(path), mode="r+")
        else:
            self._create(path, fingerprint)

    def _create(self, path: Path, fingerprint: dict) -> None:
        import zarr

        plan = self.plan
        root = zarr.open_group(str(path), mode="w-" if not path.exists() else "a")
        for name, value in zip(plan.names, plan.values):
            arr = root.create_array(name, shape=value.shape, dtype=value.dtype,
                                    dimension_names=[name], chunks=value.shape)
            arr[...] = value
        for name, dtype in {**dict(zip(plan.outputs, plan.dtypes)), _STATUS: "int8"}.items():
            dtype = np.dtype(dtype)
            root.create_array(name, shape=plan.shape, dtype=dtype, chunks=plan.block,
                              dimension_names=list(plan.names),
                              fill_value=-1 if name == _STATUS else _fill(dtype))
        root.create_array(_REASON, shape=plan.shape, dtype=str, chunks=plan.block,   # variable-length text
                          dimension_names=list(plan.names), fill_value="")
        root[_STATUS].attrs.update(status_attrs())
        root[_REASON].attrs.update(REASON_ATTRS)
        progress = root.create_group(_PROGRESS_GROUP)
        progress.create_array("done", shape=(plan.n_chunks,), dtype=bool, chunks=(1,),
                              fill_value=False, dimension_names=["chunk"])
        progress.create_array("checksum", shape=(plan.n_chunks,), dtype=np.uint64, chunks=(1,),
                              fill_value=0, dimension_names=["chunk"])
        # written last: a store with the fingerprint is complete enough to resume
        root.attrs["markovsim_sweep"] = fingerprint
        self.root = root

    @property
    def variables(self) -> tuple[str, ...]:
        return (*self.plan.outputs, _STATUS, _REASON)

    def done_chunks(self) -> np.ndarray:
        return np.asarray(self.root[_PROGRESS_GROUP]["done"][...], dtype=bool)

    def read(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(self.root[name][...]) for name in self.variables}

    def damaged(self, data: Mapping[str, np.ndarray], chunks) -> list[int]:
        """The chunks among ``chunks`` whose data (read as ``data``) no longer matches the
        checksum recorded when they were written (a missing chunk reads as fill values)."""
        sums = np.asarray(self.root[_PROGRESS_GROUP]["checksum"][...])
        bad = []
        for chunk in chunks:
            region = self.plan.region(int(chunk))
            if checksum({n: data[n][region] for n in self.variables}) != int(sums[chunk]):
                bad.append(int(chunk))
        return bad

    def write(self, chunk: int, result: dict[str, np.ndarray]) -> None:
        region = self.plan.region(chunk)
        for name, value in result.items():
            self.root[name][region] = value
        written = {n: np.asarray(self.root[n][region]) for n in self.variables}
        self.root[_PROGRESS_GROUP]["checksum"][chunk] = np.uint64(checksum(written))
        # the record comes after the data: an interrupted write is recomputed on resume
        self.root[_PROGRESS_GROUP]["done"][chunk] = True


def _read_fingerprint(path: Path) -> dict | None:
    import zarr

    try:
        return zarr.open_group(str(path), mode="r").attrs.get("markovsim_sweep")
    except Exception:
        return None


def _describe_chunks(plan: _Plan, chunks) -> str:
    shown = []
    for c in list(chunks)[:5]:
        region = plan.region(int(c))
        shown.append(f"chunk {c} (" + ", ".join(f"{n}[{r.start}:{r.stop}]" for n, r in zip(plan.names, region)) + ")")
    more = f" and {len(chunks) - 5} more" if len(chunks) > 5 else ""
    return ", ".join(shown) + more


def open_sweep(store: str | Path):
    """Read a sweep store (written by :func:`sweep` with ``store=`` or by ``markovsim sweep
    --out DIR.zarr``) and check every chunk against its checksum.

    Args:
        store: the zarr directory.

    Returns:
        xarray.Dataset: the sweep, loaded into memory.

    Raises:
        InvalidParameterError: not a sweep store, a chunk that was never finished, or a
            chunk whose data is missing or changed since it was written (the message names
            the chunks and their grid regions).
    """
    import xarray as xr

    path = Path(store)
    fingerprint = _read_fingerprint(path) if path.exists() else None
    if fingerprint is None or fingerprint.get("format") != _STORE_FORMAT:
        raise InvalidParameterError(f"open_sweep({str(path)!r}): not a markovsim sweep store "
                                    f"(format {_STORE_FORMAT})")
    import zarr

    root = zarr.open_group(str(path), mode="r")
    names = tuple(fingerprint["axes"])
    plan = _Plan(token="", names=names, values=tuple(np.asarray(root[n][...]) for n in names),
                 block=tuple(fingerprint["block"]), outputs=tuple(fingerprint["outputs"]),
                 dtypes=tuple(fingerprint["dtypes"]), scalar_output=False)
    target = _Store.__new__(_Store)
    target.path, target.plan, target.root = path, plan, root
    done = target.done_chunks()
    if not done.all():
        missing = np.flatnonzero(~done)
        raise InvalidParameterError(f"open_sweep({str(path)!r}): {len(missing)} of {plan.n_chunks} chunks were "
                                    f"never finished: {_describe_chunks(plan, missing)}; resume the sweep")
    data = target.read()
    bad = target.damaged(data, range(plan.n_chunks))
    if bad:
        raise InvalidParameterError(
            f"open_sweep({str(path)!r}): {len(bad)} chunk(s) missing or changed since they were written "
            f"(checksum mismatch): {_describe_chunks(plan, bad)}; rerun the sweep into a new store")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*onsolidated metadata.*")
        ds = xr.open_zarr(str(path), consolidated=False).load()
    ds.attrs.pop("markovsim_sweep", None)
    return ds


# --------------------------------------------------------------------------- writing a finished grid


def check_output(path: str | Path, *, force: bool, what: str = "output") -> None:
    """Refuse to overwrite a file or a non-empty directory unless ``force``.

    Raises:
        InvalidParameterError: ``path`` exists (a file, or a directory with something in it)
            and ``force`` is false; nothing was written.
    """
    path = Path(path)
    taken = path.is_file() or (path.is_dir() and any(path.iterdir())) or (path.exists() and not path.is_dir())
    if taken and not force:
        raise InvalidParameterError(f"{what} {path}: exists and is not empty; nothing was written "
                                    "(choose a new path, or pass --force to overwrite it)")


def save_sweep(ds, path: str | Path, *, force: bool = False) -> Path:
    """Write a gridded Dataset (``status`` and ``reason`` included) to ``FILE.nc`` (netCDF3,
    written beside and moved into place) or to a checksummed, locked zarr store ``DIR.zarr``
    (readable with :func:`open_sweep`).

    Args:
        ds: the Dataset; its dims are the axes (each with a 1-D coordinate).
        path: ``*.nc`` or ``*.zarr``.
        force: overwrite an existing output (a zarr store is deleted first).

    Raises:
        InvalidParameterError: the output exists and ``force`` is false, or another sweep is
            writing the store.
    """
    import shutil

    path = Path(path)
    if path.suffix == ".nc":
        check_output(path, force=force)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            ds.to_netcdf(partial, engine="scipy")
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
        return path
    with _Lock(path):
        check_output(path, force=force, what="sweep store")
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        names = tuple(ds.dims)
        outputs = tuple(sorted(n for n in ds.data_vars if n not in (_STATUS, _REASON)))
        shape = tuple(ds.sizes[n] for n in names)
        plan = _Plan(token="", names=names, values=tuple(np.asarray(ds[n].values) for n in names),
                     block=_block_shape(shape, min(DEFAULT_CHUNK_SIZE, math.prod(shape))), outputs=outputs,
                     dtypes=tuple(str(ds[n].dtype) for n in outputs), scalar_output=False)
        target = _Store(path, plan)
        data = {n: np.asarray(ds[n].transpose(*names).values) for n in (*outputs, _STATUS, _REASON)}
        for chunk in range(plan.n_chunks):
            region = plan.region(chunk)
            target.write(chunk, {n: v[region] for n, v in data.items()})
        for name in (*names, *outputs):
            target.root[name].attrs.update({k: v for k, v in ds[name].attrs.items()})
        target.root.attrs.update(dict(ds.attrs))
        import zarr

        with warnings.catch_warnings():   # zarr 3: consolidated metadata is outside the v3 spec
            warnings.filterwarnings("ignore", message=".*onsolidated metadata.*")
            zarr.consolidate_metadata(str(path))   # written once: xarray.open_zarr opens it directly
    return path
