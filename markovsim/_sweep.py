"""Parameter sweeps: a model function evaluated over a Cartesian grid, as an ``xarray.Dataset``.

:func:`sweep` evaluates a JAX-traceable function of scalar keyword arguments at every point
of the grid spanned by its axes. The grid is cut into rectangular blocks ("chunks") of at
most ``chunk_size`` points; each block is one call of a compiled, ``jax.vmap``-ed function
of fixed shape (edge blocks are padded by repeating their last point, and the padding is
dropped), so a sweep compiles once, whatever its size.

The same chunks are evaluated in three ways that give the same numbers:

* in this process (default);
* on a ``dask.distributed`` cluster (``client=``): one task per chunk, results gathered
  back into one Dataset;
* resumably (``store=``): each finished chunk is written to a zarr store together with a
  record that it is done and a checksum of its data; calling :func:`sweep` again with the
  same store computes only the chunks that are missing, and recomputes (with a warning) any
  chunk whose data no longer matches its checksum (deleted or swapped chunk files). While a
  sweep writes a store it holds a lock file beside it (``<store>.lock``), so two sweeps
  cannot mix their chunks; :func:`open_sweep` reads a store back and checks every chunk.

Every point carries a status (variable ``status``, :class:`PointStatus`: ``ok``,
``not_finite``, ``invalid_input``, ``failed``) and, where it is not ``ok``, the reason
(variable ``reason``: the outputs that are NaN or infinite, or the error the model raised).

xarray, dask and zarr stay here, at the edge: the compiled code sees plain arrays.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import hashlib
import json
import math
import os
import socket
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from . import _config  # noqa: F401  (float64 on, also in dask workers that unpickle this module)
from ._errors import InvalidParameterError, MarkovsimWarning, SpecError

__all__ = ["sweep", "open_sweep", "PointStatus", "DEFAULT_CHUNK_SIZE"]

#: Default largest number of grid points evaluated in one vectorised call.
DEFAULT_CHUNK_SIZE = 8192

#: Names of the keyword options of :func:`sweep` (they cannot be axis names).
_OPTIONS = ("chunk_size", "client", "store", "progress")
_STATUS = "status"
_REASON = "reason"
_MAX_OUTPUTS = 30
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


# --------------------------------------------------------------------------- evaluation

_COMPILED: "collections.OrderedDict[str, Callable]" = collections.OrderedDict()
_COMPILED_LOCK = threading.Lock()
_COMPILED_KEEP = 8


def _compile(fn: Callable, plan: _Plan) -> Callable:
    """The jitted function evaluating one padded block, starting at a grid origin."""
    import jax
    import jax.numpy as jnp

    block = plan.block
    size = math.prod(block)
    shape = plan.shape
    names = plan.names
    outputs = plan.outputs

    def point(kwargs):
        out = fn(**kwargs)
        if plan.scalar_output:
            return {outputs[0]: out}
        return dict(out)

    def evaluate(origin, *values):
        local = jnp.arange(size)
        coords = []
        for d in reversed(range(len(block))):
            coords.append(local % block[d])
            local = local // block[d]
        coords.reverse()
        kwargs = {}
        for d, name in enumerate(names):
            index = jnp.minimum(origin[d] + coords[d], shape[d] - 1)   # pad edge blocks
            kwargs[name] = values[d][index]
        out = jax.vmap(point)(kwargs)
        return {name: out[name].reshape(block) for name in outputs}

    return jax.jit(evaluate)


def _compiled(fn: Callable, plan: _Plan) -> Callable:
    with _COMPILED_LOCK:
        got = _COMPILED.get(plan.token)
        if got is None:
            got = _compile(fn, plan)
            _COMPILED[plan.token] = got
            while len(_COMPILED) > _COMPILED_KEEP:
                _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(plan.token)
        return got


def _dispatch(fn: Callable, plan: _Plan, chunk: int) -> dict:
    """Start the evaluation of one chunk (asynchronous: JAX arrays, not yet ready)."""
    origin = np.array([r.start for r in plan.region(chunk)], dtype=np.int64)
    return _compiled(fn, plan)(origin, *plan.values)


def _collect(plan: _Plan, chunk: int, raw: dict) -> dict[str, np.ndarray]:
    """Host copies of one chunk's results with the padding removed, and each point's status."""
    region = plan.region(chunk)
    trim = tuple(slice(0, r.stop - r.start) for r in region)
    out = {name: np.asarray(value)[trim] for name, value in raw.items()}
    out[_STATUS], out[_REASON] = point_statuses(out, tuple(r.stop - r.start for r in region))
    return out


def _evaluate_chunk(fn: Callable, plan: _Plan, chunk: int) -> tuple[int, dict[str, np.ndarray]]:
    """One chunk, start to finish (the task a dask worker runs)."""
    return chunk, _collect(plan, chunk, _dispatch(fn, plan, chunk))


def _run_local(fn: Callable, plan: _Plan, todo: list[int]):
    """Yield ``(chunk, results)`` in order, dispatching the next chunk before copying one."""
    pending: collections.deque = collections.deque()
    for chunk in todo:
        try:
            started = _dispatch(fn, plan, chunk)
        except BaseException:
            # hand over the chunk that did finish before failing (so a store records it)
            while pending:
                done, raw = pending.popleft()
                yield done, _collect(plan, done, raw)
            raise
        pending.append((chunk, started))
        if len(pending) > 1:
            done, raw = pending.popleft()
            yield done, _collect(plan, done, raw)
    while pending:
        done, raw = pending.popleft()
        yield done, _collect(plan, done, raw)


def _run_dask(fn: Callable, plan: _Plan, todo: list[int], client):
    """Yield ``(chunk, results)`` as the cluster's workers finish them."""
    from distributed import as_completed

    if not todo:
        return
    [fn_future] = client.scatter([fn], broadcast=True, hash=False)
    [plan_future] = client.scatter([plan], broadcast=True, hash=False)
    futures = [client.submit(_evaluate_chunk, fn_future, plan_future, chunk, pure=False,
                             key=f"markovsim-sweep-{plan.token}-{chunk}")
               for chunk in todo]
    try:
        for future in as_completed(futures):
            chunk, result = future.result()
            future.release()
            yield chunk, result
    finally:
        for future in futures:
            future.cancel()
        fn_future.release()
        plan_future.release()


# --------------------------------------------------------------------------- checks


def _check_axes(axes: dict[str, Any]) -> tuple[tuple[str, ...], tuple[np.ndarray, ...]]:
    if not axes:
        raise InvalidParameterError(
            "sweep: no axes given; pass each swept parameter as a keyword, "
            "e.g. sweep(fn, interval_s=np.linspace(600, 7200, 50))"
        )
    names, values = [], []
    for name, value in axes.items():
        arr = np.asarray(value)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise InvalidParameterError(
                f"sweep axis {name}: got an array of shape {arr.shape}; expected a 1-D sequence "
                "of values (fix other parameters with functools.partial)"
            )
        if arr.size == 0:
            raise InvalidParameterError(f"sweep axis {name}: got no values; expected at least one")
        if arr.dtype.kind not in "biuf":
            raise InvalidParameterError(
                f"sweep axis {name}: got values of dtype {arr.dtype}; expected numbers (int, float or bool)"
            )
        names.append(name)
        values.append(np.ascontiguousarray(arr))
    return tuple(names), tuple(values)


def _describe_outputs(fn: Callable, names, values) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """Trace ``fn`` once on scalars: output names, dtypes, and whether it returns a scalar."""
    import jax

    args = {n: jax.ShapeDtypeStruct((), jax.numpy.asarray(v[:1]).dtype) for n, v in zip(names, values)}
    tracer_errors = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                     jax.errors.TracerIntegerConversionError, jax.errors.TracerArrayConversionError)
    try:
        shapes = jax.eval_shape(lambda kw: fn(**kw), args)
    except tracer_errors as exc:
        raise TypeError(
            f"sweep: {getattr(fn, '__name__', fn)!r} is not JAX-traceable: it turns a swept parameter "
            "into a Python value (if/else, int(), float(), numpy). Use jax.numpy and jnp.where "
            f"instead. JAX said: {str(exc).splitlines()[0]}"
        ) from None
    if isinstance(shapes, Mapping):
        scalar = False
        items = dict(shapes)
    elif isinstance(shapes, jax.ShapeDtypeStruct):
        scalar = True
        name = getattr(fn, "__name__", "")
        items = {name if name.isidentifier() and name != "<lambda>" else "value": shapes}
    else:
        raise TypeError(
            f"sweep: the model function returned {type(shapes).__name__}; expected a scalar or a "
            "dict of scalars, e.g. {'goodput': g, 'mtbf_h': m}"
        )
    if not items:
        raise TypeError("sweep: the model function returned an empty dict; expected at least one output")
    for key, s in items.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise TypeError(f"sweep: output name {key!r} is not a valid identifier")
        if not isinstance(s, jax.ShapeDtypeStruct) or s.shape != ():
            shape = getattr(s, "shape", type(s).__name__)
            raise TypeError(
                f"sweep: output {key!r} has shape {shape}; expected a scalar per grid point "
                "(return one dict entry per number)"
            )
        if key in (_STATUS, _REASON):
            raise TypeError(f"sweep: output name {key!r} is reserved for the sweep's status; rename it")
        if key in names:
            raise TypeError(f"sweep: output {key!r} has the name of a swept axis; rename one of them")
    if len(items) > _MAX_OUTPUTS:
        raise TypeError(f"sweep: {len(items)} outputs; at most {_MAX_OUTPUTS} are supported")
    outputs = tuple(sorted(items))
    dtypes = tuple(str(np.dtype(items[k].dtype)) for k in outputs)
    return outputs, dtypes, scalar


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


# --------------------------------------------------------------------------- the Dataset


def _dataset(plan: _Plan, data: dict[str, np.ndarray]):
    import xarray as xr

    coords = {name: (name, value) for name, value in zip(plan.names, plan.values)}
    variables = {name: (plan.names, data[name]) for name in plan.outputs}
    variables[_STATUS] = (plan.names, data[_STATUS], status_attrs())
    variables[_REASON] = (plan.names, data[_REASON], REASON_ATTRS)
    return xr.Dataset(variables, coords=coords)


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


def _progress_bar(progress: bool, total: int, initial: int):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the 'dist' extra
        raise InvalidParameterError(
            "sweep progress=True: needs tqdm (pip install 'markovsim[dist]')"
        ) from None
    return tqdm(total=total, initial=initial, unit="chunk", desc="sweep")


# --------------------------------------------------------------------------- public


def sweep(fn: Callable[..., Any], *, chunk_size: int = DEFAULT_CHUNK_SIZE, client: Any = None,
          store: str | Path | None = None, progress: bool = False, **axes: Any):
    r"""Evaluate a model function over the Cartesian grid of its parameters.

    ``fn`` is called with one scalar per swept parameter, as keyword arguments, and returns
    either a scalar or a dict of scalars. It must be JAX-traceable (``jax.numpy``,
    ``jnp.where`` instead of ``if``): the grid is evaluated in chunks of at most
    ``chunk_size`` points by one compiled ``jax.vmap`` of ``fn``. Fix the parameters you do
    not sweep with ``functools.partial`` or a closure.

    The result has one dimension and coordinate per swept parameter (in the order given),
    one variable per output, a ``status`` variable (:class:`PointStatus`: 0 where every
    output is finite, 1 where one is NaN or infinite) and a ``reason`` variable naming the
    outputs that are not finite, so failed points stay visible.

    Args:
        fn: the model function, ``fn(**point) -> scalar | dict[str, scalar]``. A scalar
            output is named after ``fn.__name__`` (``"value"`` for a lambda or partial). Put
            units in output names where they are not SI (``mtbf_h``).
        chunk_size: largest number of grid points per vectorised call (memory against
            per-call overhead). The chunking is part of the result's identity: use the same
            value to resume a store.
        client: a ``dask.distributed.Client``. The chunks then run as tasks on its workers
            and the same Dataset comes back. ``fn`` must be picklable (cloudpickle handles
            closures and lambdas); workers import markovsim and so compute in float64.
        store: path of a zarr directory. Each finished chunk is written there, with a record
            that it is done; calling ``sweep`` again with the same arguments and store
            computes only the chunks that are missing (after an interruption) and returns the
            same Dataset as an uninterrupted run; a finished chunk whose data no longer matches
            its checksum is recomputed, with a :class:`~markovsim.MarkovsimWarning`. While it
            runs, the sweep holds the lock file ``<store>.lock``: a second sweep on the same
            store is refused. Read the store back with :func:`open_sweep` (checks every chunk)
            or ``xarray.open_zarr(store)``.
        progress: show a progress bar (tqdm) over chunks.
        **axes: the swept parameters: ``name=values`` with a 1-D sequence of numbers each.
            Names must differ from the options above.

    Returns:
        xarray.Dataset: dims and coordinates = the axes; data variables = the outputs and
        ``status``.

    Raises:
        InvalidParameterError: no axes, an axis that is not a 1-D numeric sequence, a bad
            ``chunk_size``, a store that holds a different sweep or something else, or a store
            another sweep is writing.
        TypeError: ``fn`` is not traceable or does not return scalars.

    Example:
        >>> import jax.numpy as jnp
        >>> import markovsim as ms
        >>> def goodput(interval_s, mtbf_h):
        ...     rate = 1 / (mtbf_h * 3600.0)
        ...     return interval_s / ((jnp.exp(rate * (interval_s + 60.0)) - 1) / rate)
        >>> ds = ms.sweep(goodput, interval_s=[600.0, 1800.0, 3600.0], mtbf_h=[2.0, 24.0])
        >>> ds["goodput"].dims, int(ds["status"].max())
        (('interval_s', 'mtbf_h'), 0)
    """
    from ._errors import check_integer

    chunk_size = check_integer("chunk_size", chunk_size, minimum=1)
    if not callable(fn):
        raise TypeError(f"sweep: fn={fn!r} is not callable; expected a model function")
    names, values = _check_axes(axes)
    outputs, dtypes, scalar = _describe_outputs(fn, names, values)
    shape = tuple(len(v) for v in values)
    block = _block_shape(shape, min(chunk_size, math.prod(shape)))
    plan = _Plan(token=uuid.uuid4().hex, names=names, values=values, block=block,
                 outputs=outputs, dtypes=dtypes, scalar_output=scalar)

    if store is None:
        data = {name: np.empty(shape, dtype=np.dtype(dt)) for name, dt in zip(outputs, dtypes)}
        data[_STATUS] = np.empty(shape, dtype=np.int8)
        data[_REASON] = np.empty(shape, dtype=f"<U{_reason_width(outputs)}")
        _evaluate(fn, plan, data, None, list(range(plan.n_chunks)), client, progress)
        return _dataset(plan, data)
    path = Path(store)
    with _Lock(path):
        target = _Store(path, plan)
        done = target.done_chunks()
        data = target.read()
        damaged = target.damaged(data, np.flatnonzero(done))
        if damaged:
            warnings.warn(f"sweep store {str(path)!r}: {len(damaged)} finished chunk(s) are missing or changed "
                          f"since they were written (checksum mismatch): {_describe_chunks(plan, damaged)}; "
                          "recomputing them", MarkovsimWarning, stacklevel=2)
            done[damaged] = False
        _evaluate(fn, plan, data, target, [int(c) for c in np.flatnonzero(~done)], client, progress)
    return _dataset(plan, data)


def _evaluate(fn, plan: _Plan, data: dict, target: _Store | None, todo: list[int], client, progress: bool) -> None:
    """Evaluate the chunks ``todo`` into ``data`` (and the store)."""
    bar = _progress_bar(progress, plan.n_chunks, plan.n_chunks - len(todo))
    runner = _run_local(fn, plan, todo) if client is None else _run_dask(fn, plan, todo, client)
    try:
        for chunk, result in runner:
            region = plan.region(chunk)
            for name, value in result.items():
                data[name][region] = value
            if target is not None:
                target.write(chunk, result)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        with _COMPILED_LOCK:
            _COMPILED.pop(plan.token, None)


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
    return path
