"""The InfiniteHBD trace: its fitted catalogue files and the prediction of its held-back part.

The trace's README: 400 GPU servers of an LLM pre-training cluster, 348.98 days from
2024-03-30; the project ships the first 209.39 days (60 %). The rest is kept back to check a
prediction made from the shipped part, which :func:`infinitehbd_rest_prediction` states.
"""

from __future__ import annotations

from pathlib import Path

from ._catalogue_io import fault_catalogue_from_fit, write_fault_catalogue, write_fitted_catalogue
from ._faults import Effect
from ._fit import FaultModelFit, fit_fault_log
from ._logs import INFINITEHBD_REST, infinitehbd_trace
from ._predict import WindowPrediction, predict_next_window

__all__ = ["INFINITEHBD_EFFECTS", "infinitehbd_fit", "write_infinitehbd_catalogue", "infinitehbd_rest_prediction"]

#: effect on a running job of each trace class that does not interrupt it (all others do):
#: stress-test failures are found while the node is under test, out of production
INFINITEHBD_EFFECTS = {"Stress Test Failure": Effect.TOLERATED}


def infinitehbd_fit(**options) -> FaultModelFit:
    """:func:`fit_fault_log` on the shipped part of the trace (options passed through)."""
    return fit_fault_log(infinitehbd_trace(), **options)


def write_infinitehbd_catalogue(folder: str | Path, *, fit: FaultModelFit | None = None) -> tuple[Path, Path]:
    """Write ``infinitehbd.toml`` (plain catalogue) and ``infinitehbd.fit.toml`` (fitted model) to ``folder``.

    These are the files shipped in ``models/faults/fitted/``; the GPU catalogue
    ``models/faults/gpu_training.toml`` takes its node-fault rates from them.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fit = fit or infinitehbd_fit()
    header = (
        "Fault catalogue fitted on the InfiniteHBD trace (stepfun-ai/InfiniteHBD-Trace 7aacdc8, Apache-2.0;\n"
        "arXiv 2502.03885): 400 GPU servers, days 0-209.39. Written by\n"
        "markovsim.availability.write_infinitehbd_catalogue; do not edit by hand.\n"
        "One component per fault class; rate = events per node-day up (faults of a class at the same\n"
        "instant are one event), up-time weighted by each node's fitted rate class. Every class\n"
        "interrupts a running job except stress-test failures (found under test, out of production).\n"
        "The fitted model with intervals, bursts, lemons and phase-type repair: infinitehbd.fit.toml.")
    plain = write_fault_catalogue(fault_catalogue_from_fit(fit, effects=INFINITEHBD_EFFECTS), folder / "infinitehbd.toml",
                                  name="InfiniteHBD trace, days 0-209.39 (fitted)", header=header)
    fitted = write_fitted_catalogue(fit, folder / "infinitehbd.fit.toml", name="InfiniteHBD trace, days 0-209.39",
                                    catalogue="infinitehbd.toml")
    return plain, fitted


def infinitehbd_rest_prediction(*, simulations: int = 1000, seed: int = 0) -> WindowPrediction:
    """Prediction of the held-back part of the trace (days 209.39 to 348.98) from the shipped part.

    Fits :func:`fit_fault_log` with its defaults on days 0-209.39 and simulates the next
    139.59 days of the same 400 nodes with parameter uncertainty
    (:func:`predict_next_window`). To check it once the rest of the trace is at hand::

        full = read_fault_log(path, nodes=400, window=348.98 * DAY, time_unit="d")
        later, node, end = full.after(209.39 * DAY)
        observed = window_statistics(later, carried_node=node, carried_end=end)

    and compare each observed value with the prediction's interval.
    """
    return predict_next_window(infinitehbd_fit(), INFINITEHBD_REST, simulations=simulations, seed=seed)
