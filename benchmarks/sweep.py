"""Points per second of a 10^7-point goodput sweep: in-process, on dask workers, and a plain
Python loop.

Run: ``.venv/bin/python benchmarks/sweep.py [--points 1e7] [--repeats 3]``

The model is ``markovsim.availability.checkpoint_goodput``: the exact long-run goodput of a
job that checkpoints every ``interval`` seconds of work, blocks ``save_time`` seconds per
checkpoint, fails as a Poisson process of mean ``mtbf``, and restarts in ``restart_time``
seconds (failures during the restart restart it) after ``downtime`` seconds:
:math:`\\tau / ((M + D) e^{R/M} (e^{(\\tau + C)/M} - 1))`. The grid is interval x MTBF x save
time; restart 15 min and downtime 5 min are fixed. The Python-loop peer evaluates the same
formula with ``math`` and is checked against the sweep on its points.

* in-process: ``markovsim.sweep`` (compile included; the compile alone is reported apart
  from a one-chunk sweep), median of ``--repeats`` runs;
* dask: the same call with a ``distributed.LocalCluster`` of 2 worker processes (1 thread
  each), cluster start-up excluded, median of repeats;
* Python loop: ``math.exp`` over the same grid, timed on the first ``--loop-points`` points
  and extrapolated linearly to the full grid (stated in the table).

Timings are wall-clock on whatever the machine is doing; they are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import time

import functools

import numpy as np

import markovsim as ms
from markovsim.availability import checkpoint_goodput

RESTART_S = 900.0
DOWNTIME_S = 300.0
goodput = functools.partial(checkpoint_goodput, restart_time=RESTART_S, downtime=DOWNTIME_S)


def goodput_python(interval, mtbf, save_time):
    """The same formula, one point at a time with ``math``."""
    return interval / ((mtbf + DOWNTIME_S) * math.exp(RESTART_S / mtbf) * math.expm1((interval + save_time) / mtbf))


def grid(points: int) -> dict[str, np.ndarray]:
    """Three axes whose product is ``points`` (rounded): interval x MTBF x save time."""
    n_save = 100
    n_mtbf = 100
    n_interval = max(1, round(points / (n_save * n_mtbf)))
    return dict(interval=np.geomspace(60.0, 86400.0, n_interval),
                mtbf=np.geomspace(0.5, 200.0, n_mtbf) * 3600.0,
                save_time=np.linspace(5.0, 600.0, n_save))


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=float, default=1e7)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=2**16)
    parser.add_argument("--loop-points", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    axes = grid(int(args.points))
    n = math.prod(len(v) for v in axes.values())
    rows = []

    # compile alone: a sweep of exactly one chunk
    one_chunk = dict(axes, interval=axes["interval"][: max(1, args.chunk_size // (100 * 100))])
    t_one, _ = timed(lambda: ms.sweep(goodput, chunk_size=args.chunk_size, **one_chunk), 1)

    t_local, ds = timed(lambda: ms.sweep(goodput, chunk_size=args.chunk_size, **axes), args.repeats)
    assert int(ds["status"].max()) == 0
    rows.append(("markovsim.sweep, in-process", n, t_local, "median of %d; includes one compile" % args.repeats))

    t_default, _ = timed(lambda: ms.sweep(goodput, **axes), 1)
    rows.append(("markovsim.sweep, in-process, default chunk_size", n, t_default, "1 run; includes one compile"))

    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        ms.sweep(goodput, chunk_size=args.chunk_size, client=client, **one_chunk)   # warm workers
        t_dask, ds_dask = timed(lambda: ms.sweep(goodput, chunk_size=args.chunk_size, client=client, **axes),
                                args.repeats)
    identical = ds_dask.identical(ds)
    rows.append((f"markovsim.sweep, dask LocalCluster ({args.workers} workers x 1 thread)", n, t_dask,
                 f"median of {args.repeats}; includes one compile per worker; identical to in-process: {identical}"))

    m = min(args.loop_points, n)
    values = list(axes.values())
    t0 = time.perf_counter()
    looped = [goodput_python(a, b, c) for a, b, c in itertools.islice(itertools.product(*values), m)]
    t_loop = (time.perf_counter() - t0) * n / m
    swept = ds["value"].values.reshape(-1)[:m]
    agree = np.max(np.abs(np.array(looped) - swept) / swept)
    rows.append(("plain Python loop (math)", n, t_loop,
                 f"timed on {m} points, extrapolated x{n / m:.0f}; max rel. difference to the sweep {agree:.1e}"))

    print(f"checkpoint_goodput sweep: {n:,} points (interval x MTBF x save time), chunk_size={args.chunk_size}; "
          f"compile + one chunk: {t_one:.2f} s\n")
    print(f"| {'method':62s} | {'points':>10s} | {'time [s]':>9s} | {'points/s':>10s} | note")
    print(f"|{'-' * 64}|{'-' * 12}|{'-' * 11}|{'-' * 12}|------")
    for name, points, t, note in rows:
        print(f"| {name:62s} | {points:10.3g} | {t:9.2f} | {points / t:10.3g} | {note}")


if __name__ == "__main__":
    main()
