"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/<name>.py``,
so this folder is on ``sys.path``)."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int, warmup: int = 0) -> float:
    """Median wall time of ``repeats`` calls after ``warmup`` untimed ones (the first calls
    after a compile pay for fresh memory pages)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
