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
import math
import threading
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from . import _config  # noqa: F401  (float64 on, also in dask workers that unpickle this module)
from ._errors import InvalidParameterError, MarkovsimWarning
from ._grid import (DEFAULT_CHUNK_SIZE, REASON_ATTRS, PointStatus, _block_shape, _describe_chunks, _Lock, _Plan,
                    _reason_width, _Store, open_sweep, point_statuses, status_attrs)

__all__ = ["sweep", "open_sweep", "PointStatus", "DEFAULT_CHUNK_SIZE"]

#: names of the keyword options of :func:`sweep` (they cannot be axis names)
_OPTIONS = ("chunk_size", "client", "store", "progress")
_STATUS = "status"
_REASON = "reason"
_MAX_OUTPUTS = 30

#: Default largest number of grid points evaluated in one vectorised call.
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


# --------------------------------------------------------------------------- the Dataset


def _dataset(plan: _Plan, data: dict[str, np.ndarray]):
    import xarray as xr

    coords = {name: (name, value) for name, value in zip(plan.names, plan.values)}
    variables = {name: (plan.names, data[name]) for name in plan.outputs}
    variables[_STATUS] = (plan.names, data[_STATUS], status_attrs())
    variables[_REASON] = (plan.names, data[_REASON], REASON_ATTRS)
    return xr.Dataset(variables, coords=coords)


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


