"""The published checkpoint chart, the MindCluster rollback rule and the one-node timings.

Mechanism: the exact optimal checkpoint interval (Lambert W) of a job with exponential
failures, the exact mean rollback E[t | t < L], and state bytes / storage bandwidth.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from _common import ATLAS, cluster_inputs, path

from markovsim import DAY, HOUR
from markovsim.availability import job_mtbf, load_cluster, optimal_interval
from markovsim.repro import ModelValue, assumed, cited, sweep

IDS = ["PI-CKPT-CHART", "PI-LOSS-T0", "PI-TIMING"]

# source: public_inputs.md, vendor chart (save time s, recommended period s)
CHART = [(50, 600), (100, 2000), (150, 5000), (200, 8000), (250, 12000), (300, 17000), (350, 21000),
         (400, 27000), (450, 32000)]
MTBF_H = (1, 2, 4, 8, 16, 24, 48, 96, 192, 384, 768)  # assumption: one cluster's MTBF, 1 h to a month


def _implied_mtbf(save, period):
    """The MTBF at which ``period`` is the exact optimum for ``save`` (bisection on log M)."""
    lo, hi = math.log(save * 1e-3), math.log(save * 1e9)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(optimal_interval(save, math.exp(mid))) < period else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def run(out_dir: Path) -> list[ModelValue]:
    atlas, cat = load_cluster(path(ATLAS))
    mtbf_10k = job_mtbf(cat, atlas)
    saves = np.array([c for c, _ in CHART], dtype=float)
    out = []

    def periods(mtbf_h):
        return [float(x) for x in np.asarray(optimal_interval(saves, mtbf_h * HOUR))]

    implied = [_implied_mtbf(c, p) / HOUR for c, p in CHART]
    chart_inputs = [cited("save times of the chart", list(saves), "s", "public_inputs vendor chart"),
                    assumed("job MTBF of the chart's cluster", f"{mtbf_10k / HOUR:.1f} h (1 h to 32 days)", "h",
                            "the chart names no MTBF: the 10,240-card catalogue's as central, swept over 1 h to a month")]
    out.append(ModelValue(
        key="PI-CKPT-CHART", model=periods(mtbf_10k / HOUR), unit="s",
        quantity="exact goodput-optimal period at each save time, one MTBF for the whole chart",
        inputs=cluster_inputs(ATLAS) + chart_inputs, sweep=sweep(periods, mtbf_h=MTBF_H),
        note=("the MTBF at which each chart point is the exact optimum: "
              + ", ".join(f"{c} s -> {m:.1f} h" for (c, _), m in zip(CHART, implied))
              + ". Each point implies its own MTBF, from about an hour to about two weeks, rising with the save "
                "time, while longer saves (bigger jobs) would come with shorter MTBFs.")))
    _plot(out_dir, mtbf_10k)

    # MindCluster loss per fault: T0 = period / 2
    def rollback_share(mtbf_h):
        lam_l = HOUR / (mtbf_h * HOUR)
        return 1 / lam_l - 1 / math.expm1(lam_l)  # E[t | t < L] / L, exponential failures

    out.append(ModelValue(
        key="PI-LOSS-T0", model=rollback_share(mtbf_10k / HOUR), unit="1",
        quantity="exact mean rollback E[t | t < L] / L with hourly checkpoints",
        inputs=cluster_inputs(ATLAS) + [
            cited("checkpoint period L", 1, "h", "public_inputs MindCluster 'at least hourly'"),
            assumed("job MTBF", f"{mtbf_10k / HOUR:.1f} h (1 h to 1 day)", "h",
                    "the 10,240-card catalogue's as central; 1 h to 1 day swept")],
        sweep=sweep(rollback_share, mtbf_h=(1.0, 2.0, 4.0, 8.0, 24.0)),
        note="E[t | t < L] / L = 1/(lambda L) - 1/(e^(lambda L) - 1) = 1/2 - lambda L / 12 + ...: the rule is the "
             "first term, good while checkpoints are far more frequent than faults."))

    # MindCluster one-node timings: state bytes / NFS bandwidth
    write, read = 2.7e9, 4.8e9  # source: public_inputs MindCluster, NFS write 2.7 GB/s, read 4.8 GB/s
    bytes_per_parameter = (2, 4, 14, 16)
    bpp_input = assumed("checkpoint bytes per parameter", "14 (2, 4, 14, 16)", "B",
                        "not published: BF16 weights only (2), FP32 weights (4), BF16 weights + FP32 master + two "
                        "Adam moments (14), the same with FP32 weights (16)")
    for size, name in ((3e9, "3b"), (15e9, "15b")):
        for what, bandwidth, quoted in (("save", write, {"3b": 30, "15b": 120}[name]),
                                        ("load", read, {"3b": 3, "15b": 90}[name])):
            def seconds(bpp, size=size, bandwidth=bandwidth):
                return size * bpp / bandwidth

            out.append(ModelValue(
                key=f"PI-TIMING/{what}-{name}", model=seconds(14), unit="s",
                quantity=f"{what} of a {size / 1e9:.0f}B model's state at the NFS {what} bandwidth",
                inputs=[cited("parameters", size, "1", "public_inputs MindCluster table"),
                        cited(f"NFS {'write' if what == 'save' else 'read'} bandwidth", bandwidth / 1e9, "GB/s",
                              "public_inputs MindCluster"), bpp_input],
                sweep=sweep(seconds, bpp=bytes_per_parameter),
                mechanism=_timing_mechanism(what, quoted * bandwidth / size),
            ))
    return out


def _timing_mechanism(what: str, measured_bpp: float) -> str:
    """What a measured time that moves ``measured_bpp`` bytes per parameter suggests."""
    why = ("overheads beyond the raw state (serialisation, host copies, many small files)" if measured_bpp > 16 else
           "less than the BF16 weights: a cached or partial read" if measured_bpp < 2 else
           "a state size between weights only and the full optimizer state")
    return f"the measured {what} moves {measured_bpp:.1f} bytes per parameter at the quoted bandwidth: {why}"


def _plot(out_dir: Path, mtbf_10k: float) -> None:
    """The vendor chart against the exact optimum for several MTBFs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2), layout="constrained")
    cs = np.linspace(20, 500, 100)
    for m in (HOUR, 6 * HOUR, DAY, 4 * DAY, 13 * DAY):
        ax.plot(cs, np.asarray(optimal_interval(cs, m)), label=f"exact optimum, MTBF {m / HOUR:.0f} h")
    ax.plot(cs, np.asarray(optimal_interval(cs, mtbf_10k)), "k--",
            label=f"exact optimum, 10K-card model MTBF {mtbf_10k / HOUR:.1f} h")
    ax.plot([c for c, _ in CHART], [p for _, p in CHART], "ko", label="vendor chart (public_inputs)")
    ax.set_xlabel("time of one save [s]")
    ax.set_ylabel("checkpoint period [s]")
    ax.set_yscale("log")
    ax.set_title("Checkpoint period: vendor chart vs exact optimum")
    ax.legend(fontsize=7)
    fig.savefig(out_dir / "availability_checkpoint_chart.png", dpi=100)
    plt.close(fig)
