"""markovsim.sweep on a real dask.distributed LocalCluster (scheduler + 2 worker processes)
gives the Dataset of the in-process sweep, bit for bit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
import zarr

import markovsim as ms

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, scheduler_port=0)
    with cluster, distributed.Client(cluster) as c:
        yield c


def repairable_cluster(n_nodes, failure_rate, repair_rate):
    """Groups of 4 nodes with one repair crew each: a birth-death chain solved by the engine;
    outputs the expected number of nodes up out of ``n_nodes`` and the all-up probability."""
    k = jnp.arange(5)
    n = 4
    down = failure_rate * (n - k[:-1])            # k nodes down -> k + 1
    up = jnp.full(n, repair_rate)                  # one crew
    Q = jnp.diag(down, 1) + jnp.diag(up, -1)
    Q = Q - jnp.diag(Q.sum(axis=1))
    pi = ms.stationary_distribution(Q)
    return {"nodes_up": (pi * (n - k)).sum() / n * n_nodes, "p_all_up": pi[0],
            "log_ratio": jnp.log(failure_rate / repair_rate)}


AXES = dict(n_nodes=np.array([4, 8]), failure_rate=np.geomspace(1e-7, 1e-3, 9),
            repair_rate=np.array([0.0, 1e-4, 1e-3, 1e-2]))


def test_local_cluster_gives_the_identical_dataset(client):
    local = ms.sweep(repairable_cluster, chunk_size=8, **AXES)
    with distributed.get_task_stream(client) as stream:
        remote = ms.sweep(repairable_cluster, chunk_size=8, client=client, **AXES)
    xr.testing.assert_identical(remote, local)
    # the chunks really ran on the workers, in the worker processes
    ran = [t for t in stream.data if t["key"].startswith("markovsim-sweep-")]
    assert len(ran) >= 72 // 8 and {t["worker"] for t in ran} <= set(client.scheduler_info()["workers"])
    assert remote["nodes_up"].dtype == np.float64
    # repair_rate = 0 makes log_ratio infinite: failed points stay visible, on both sides
    assert (remote["status"].sel(repair_rate=0.0) != 0).all()
    assert (remote["status"].sel(repair_rate=1e-3) == 0).all()


def test_workers_compute_in_float64(client):
    # 1 + 1e-12 is 1.0 in float32: a worker without float64 would lose it
    ds = ms.sweep(lambda eps: (1.0 + eps) - 1.0, client=client, eps=[1e-12, 2e-12])
    np.testing.assert_allclose(ds["value"].values, [1e-12, 2e-12], rtol=1e-3)


def test_store_started_locally_is_finished_on_the_cluster(client, tmp_path):
    calls = []

    def record(x):
        calls.append(1)
        if len(calls) > 20:
            raise RuntimeError("simulated interruption")

    def crashing(a, b):
        jax.debug.callback(record, a)
        return {"s": a * b}

    axes = dict(a=np.arange(32.0), b=np.array([1.0, 3.0]))
    store = tmp_path / "s.zarr"
    with pytest.raises(Exception, match="simulated interruption"):
        ms.sweep(crashing, chunk_size=8, store=store, **axes)
    done = zarr.open_group(str(store), mode="r")["sweep_progress"]["done"][...]
    assert 0 < done.sum() < len(done)
    resumed = ms.sweep(lambda a, b: {"s": a * b}, chunk_size=8, store=store, client=client, **axes)
    xr.testing.assert_identical(resumed, ms.sweep(lambda a, b: {"s": a * b}, chunk_size=8, **axes))
