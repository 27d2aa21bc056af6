"""markovsim.sweep in this process: values against direct evaluation, chunking, status,
errors, and resuming from a zarr store after an interruption."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import given, strategies as st

import markovsim as ms


def goodput(interval_s, mtbf_h):
    """Checkpointed job, exponential failures, restart 60 s: interval / E[segment time]."""
    rate = 1.0 / (mtbf_h * 3600.0)
    return interval_s * rate / jnp.expm1(rate * (interval_s + 60.0))


def goodput_numpy(interval_s, mtbf_h):
    rate = 1.0 / (mtbf_h * 3600.0)
    return interval_s * rate / math.expm1(rate * (interval_s + 60.0))


def test_values_match_direct_evaluation_at_every_point():
    interval = np.array([300.0, 900.0, 1800.0, 3600.0, 7200.0])
    mtbf = np.array([1.0, 3.0, 24.0])
    ds = ms.sweep(goodput, interval_s=interval, mtbf_h=mtbf, chunk_size=4)
    assert ds["goodput"].dims == ("interval_s", "mtbf_h")
    np.testing.assert_array_equal(ds["interval_s"].values, interval)
    np.testing.assert_array_equal(ds["mtbf_h"].values, mtbf)
    assert ds["goodput"].dtype == np.float64
    for (i, a), (j, b) in itertools.product(enumerate(interval), enumerate(mtbf)):
        assert ds["goodput"].values[i, j] == pytest.approx(goodput_numpy(a, b), rel=1e-13)
    assert (ds["status"].values == 0).all() and (ds["reason"].values == "").all()
    assert set(ds.data_vars) == {"goodput", "status", "reason"}


@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    chunk_size=st.integers(1, 40),
)
def test_every_point_is_evaluated_once_whatever_the_chunking(shape, chunk_size):
    # each point's output encodes its own coordinates: a wrong or missing block shows up
    names = ["x", "y", "z"][: len(shape)]
    axes = {n: np.arange(k, dtype=np.float64) * 10.0 ** (2 * d) for d, (n, k) in enumerate(zip(names, shape))}

    def code(**point):
        return {"code": sum(point.values())}

    ds = ms.sweep(code, chunk_size=chunk_size, **axes)
    expected = sum(np.meshgrid(*axes.values(), indexing="ij"))
    np.testing.assert_array_equal(ds["code"].values, expected)
    assert ds["code"].dims == tuple(names)


def test_chunk_size_does_not_change_the_result():
    axes = dict(interval_s=np.geomspace(60.0, 86400.0, 23), mtbf_h=np.geomspace(0.5, 100.0, 17))
    a = ms.sweep(goodput, chunk_size=5, **axes)
    b = ms.sweep(goodput, chunk_size=10_000, **axes)
    xr.testing.assert_allclose(a, b, rtol=1e-14)


def test_scalar_output_is_named_after_the_function_or_value():
    assert list(ms.sweep(goodput, interval_s=[600.0], mtbf_h=[2.0]).data_vars) == ["goodput", "status", "reason"]
    ds = ms.sweep(lambda a: 2 * a, a=[1.0, 2.0])
    np.testing.assert_array_equal(ds["value"].values, [2.0, 4.0])


def test_status_and_reason_name_each_non_finite_output():
    def model(a, b):
        return {"ratio": a / b, "log_a": jnp.log(a), "count": jnp.int64(3)}

    ds = ms.sweep(model, a=[-1.0, 0.0, 1.0], b=[0.0, 1.0])
    flags = dict(zip(ds["status"].attrs["flag_meanings"].split(), ds["status"].attrs["flag_values"]))
    assert flags == {"ok": 0, "not_finite": 1, "invalid_input": 2, "failed": 3}
    assert flags["not_finite"] == ms.PointStatus.NOT_FINITE
    expected = np.array([["log_a, ratio", "log_a"],     # -1/0 = -inf, log(-1) = nan
                         ["log_a, ratio", "log_a"],     # 0/0 = nan, log(0) = -inf
                         ["ratio", ""]])                # 1/0 = inf
    np.testing.assert_array_equal(ds["status"].values, np.where(expected == "", 0, 1))
    np.testing.assert_array_equal(ds["reason"].values,
                                  np.where(expected == "", "", np.char.add("not finite: ", expected)))
    assert ds["count"].dtype == np.int64


def test_integer_and_boolean_axes_keep_their_dtype():
    seen = {}

    def model(n_cards, spares):
        seen["dtypes"] = (n_cards.dtype, spares.dtype)
        return n_cards * jnp.where(spares, 2, 1)

    ds = ms.sweep(model, n_cards=np.array([1024, 8192]), spares=np.array([False, True]))
    assert ds["n_cards"].dtype == np.int64 and ds["spares"].dtype == bool
    assert seen["dtypes"] == (jnp.int64, jnp.bool_)
    np.testing.assert_array_equal(ds["model"].values, [[1024, 2048], [8192, 16384]])


def test_traces_once_for_many_chunks():
    traces = []

    def model(a):
        traces.append(1)
        return a * a

    ds = ms.sweep(model, a=np.arange(100.0), chunk_size=7)
    np.testing.assert_array_equal(ds["model"].values, np.arange(100.0) ** 2)
    assert len(traces) <= 2   # one shape inspection, one compile; not one per chunk (15)


def test_engine_function_availability_of_a_repairable_unit():
    # closed form: availability of an up/down unit = mu / (lambda + mu)
    def availability(failure_rate, repair_rate):
        Q = jnp.array([[-failure_rate, failure_rate], [repair_rate, -repair_rate]])
        return ms.stationary_distribution(Q)[0]

    lam = np.geomspace(1e-9, 1e-3, 7)
    mu = np.geomspace(1e-4, 1.0, 5)
    ds = ms.sweep(availability, failure_rate=lam, repair_rate=mu)
    np.testing.assert_allclose(ds["availability"].values, mu[None, :] / (lam[:, None] + mu[None, :]),
                               rtol=1e-13)


def test_progress_bar_is_shown(capsys):
    ms.sweep(goodput, interval_s=np.arange(1.0, 50.0), mtbf_h=[1.0], chunk_size=10, progress=True)
    err = capsys.readouterr().err
    assert "sweep" in err and "5/5" in err


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, "no axes"),
        ({"a": np.ones((2, 2))}, "1-D"),
        ({"a": []}, "at least one"),
        ({"a": ["x", "y"]}, "numbers"),
        ({"a": [1.0], "chunk_size": 0}, "chunk_size"),
        ({"a": [1.0], "chunk_size": 2.5}, "chunk_size"),
    ],
)
def test_bad_axes_raise_a_clear_error(kwargs, match):
    with pytest.raises(ms.InvalidParameterError, match=match):
        ms.sweep(lambda a: a, **kwargs)


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda a: 1.0 if a > 0 else 0.0, "not JAX-traceable"),
        (lambda a: jnp.ones(3) * a, "shape"),
        (lambda a: {"status": a}, "reserved"),
        (lambda a: {"a": a}, "name of a swept axis"),
        (lambda a: (a, a), "expected a scalar or a dict"),
        (lambda a: {}, "empty"),
    ],
)
def test_bad_model_functions_raise_type_errors(fn, match):
    with pytest.raises(TypeError, match=match):
        ms.sweep(fn, a=[1.0, 2.0])


# --------------------------------------------------------------------------- stores


class Crash(Exception):
    pass


def counting_model(calls, crash_after=None):
    """A model that records every point it evaluates, and crashes after ``crash_after``."""

    def record(a):
        calls.append(float(a))
        if crash_after is not None and len(calls) > crash_after:
            raise Crash("simulated interruption")

    def model(a, b):
        jax.debug.callback(record, a)
        return {"s": jnp.sin(a) + b, "q": a / b}

    return model


AXES = dict(a=np.arange(64.0), b=np.array([0.0, 0.5]))   # 128 points, chunks of 16: 8 chunks


def test_interrupted_sweep_resumes_without_recomputing(tmp_path):
    reference_calls = []
    reference = ms.sweep(counting_model(reference_calls), chunk_size=16, **AXES)
    assert len(reference_calls) == 128

    store = tmp_path / "run.zarr"
    first = []
    with pytest.raises(Exception, match="simulated interruption"):
        ms.sweep(counting_model(first, crash_after=50), chunk_size=16, store=store, **AXES)
    done = zarr.open_group(str(store), mode="r")["sweep_progress"]["done"][...]
    assert 0 < done.sum() < len(done)              # really interrupted half way
    finished_points = 16 * int(done.sum())
    assert finished_points <= 50

    resumed = []
    result = ms.sweep(counting_model(resumed), chunk_size=16, store=store, **AXES)
    xr.testing.assert_identical(result, reference)
    assert len(resumed) == 128 - finished_points   # finished chunks were not recomputed

    again = []
    xr.testing.assert_identical(ms.sweep(counting_model(again), chunk_size=16, store=store, **AXES), reference)
    assert again == []


def test_store_is_readable_with_xarray(tmp_path):
    store = tmp_path / "s.zarr"
    ds = ms.sweep(goodput, store=store, chunk_size=3, interval_s=[600.0, 1200.0], mtbf_h=[1.0, 2.0, 4.0])
    on_disk = xr.open_zarr(store, consolidated=False).load()
    xr.testing.assert_identical(on_disk.drop_attrs(deep=False), ds)


def test_store_of_another_sweep_is_refused(tmp_path):
    store = tmp_path / "s.zarr"
    ms.sweep(goodput, store=store, interval_s=[600.0], mtbf_h=[1.0])
    with pytest.raises(ms.InvalidParameterError, match="different sweep"):
        ms.sweep(goodput, store=store, interval_s=[900.0], mtbf_h=[1.0])
    with pytest.raises(ms.InvalidParameterError, match="different sweep"):
        ms.sweep(goodput, store=store, chunk_size=1, interval_s=[600.0], mtbf_h=[1.0, 2.0])


def test_foreign_directory_and_netcdf_are_refused(tmp_path):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ms.InvalidParameterError, match="not a markovsim sweep store"):
        ms.sweep(goodput, store=other, interval_s=[600.0], mtbf_h=[1.0])
    assert (other / "keep.txt").read_text() == "mine"
    with pytest.raises(ms.InvalidParameterError, match="zarr"):
        ms.sweep(goodput, store=tmp_path / "x.nc", interval_s=[600.0], mtbf_h=[1.0])


# --------------------------------------------------------------------------- plots


def test_sweep_plots_draw_the_data():
    import matplotlib

    matplotlib.use("Agg")
    from markovsim import plotting

    ds = ms.sweep(goodput, interval_s=[600.0, 1200.0, 2400.0], mtbf_h=[1.0, 4.0])
    ax = plotting.plot_sweep(ds, "goodput", x="interval_s")
    assert len(ax.get_lines()) == 2                       # one line per mtbf_h
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), ds["goodput"].sel(mtbf_h=4.0).values)
    ax = plotting.plot_sweep_map(ds, "goodput", x="interval_s", y="mtbf_h")
    assert ax.collections
    with pytest.raises(ValueError, match="dims"):
        plotting.plot_sweep(ds, "goodput", x="nope")


# --------------------------------------------------------------------------- store integrity (issue 11, item 7)


def test_a_deleted_or_swapped_chunk_is_detected_on_read_and_recomputed_on_resume(tmp_path):
    """On 82057e9 a deleted chunk read back as NaN with status 0 and a swapped chunk as wrong
    values, undetected. Now each chunk's checksum is checked on read and on resume."""
    store = tmp_path / "s.zarr"
    axes = dict(a=np.arange(8.0), b=np.array([1.0, 2.0]))
    reference = ms.sweep(lambda a, b: {"s": a * b}, chunk_size=4, store=store, **axes)   # 4 chunks
    xr.testing.assert_identical(ms.open_sweep(store), ms.sweep(lambda a, b: {"s": a * b}, **axes))
    chunk_files = sorted(p for p in (store / "s").rglob("*") if p.is_file() and p.name != "zarr.json")
    assert len(chunk_files) == 4
    chunk_files[1].unlink()                                  # a deleted chunk
    with pytest.raises(ms.InvalidParameterError, match=r"chunk 1 \(a\[2:4\]"):
        ms.open_sweep(store)
    with pytest.warns(ms.MarkovsimWarning, match="recomputing"):
        resumed = ms.sweep(lambda a, b: {"s": a * b}, chunk_size=4, store=store, **axes)
    xr.testing.assert_identical(resumed, reference)
    ms.open_sweep(store)                                     # repaired
    chunk_files[2].write_bytes(chunk_files[0].read_bytes())  # a swapped chunk: chunk 0's data in chunk 2
    with pytest.raises(ms.InvalidParameterError, match="chunk 2"):
        ms.open_sweep(store)


def test_two_sweeps_cannot_write_one_store_at_once(tmp_path):
    """On 82057e9 two sweeps writing one store at once mixed their chunks without a lock."""
    store = tmp_path / "s.zarr"
    axes = dict(a=np.arange(4.0), b=np.array([1.0]))

    def model(a, b):
        jax.debug.callback(lambda x: second(), a)   # a second sweep starts while the first runs
        return {"s": a * b}

    errors = []

    def second():
        if not errors:
            try:
                ms.sweep(lambda a, b: {"s": -a}, store=store, **axes)
            except ms.InvalidParameterError as exc:
                errors.append(str(exc))

    ms.sweep(model, store=store, **axes)
    assert errors and "another sweep is writing" in errors[0]
    np.testing.assert_array_equal(ms.open_sweep(store)["s"].values[:, 0], np.arange(4.0))
    assert not (tmp_path / "s.zarr.lock").exists()            # released


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    import json
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    store = tmp_path / "s.zarr"
    (tmp_path / "s.zarr.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    ms.sweep(lambda a: {"s": a}, store=store, a=[1.0])
    assert not (tmp_path / "s.zarr.lock").exists()
