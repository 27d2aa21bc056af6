"""S-OUT-*, the press-reported outcomes and the published checkpoint chart and timings.

Mechanism: the tiered goodput model (semi-Markov renewal on the engine) on the model files
(models/clusters, models/faults, models/recovery), and the exact checkpoint formulas.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from markovsim import DAY, HOUR, MINUTE
from markovsim.availability import (
    analyze,
    interruption_rate,
    load_cluster,
    load_model,
    optimal_interval,
    young_interval,
)
from markovsim.repro import Input, Row

IDS = ["S-OUT-1", "S-OUT-2", "PR-TRAIN-AVAIL", "PR-HW-MTBF", "PR-DETECT", "PI-CKPT-CHART", "PI-LOSS-T0",
       "PI-TIMING"]
MODELS = Path(__file__).resolve().parent.parent / "models"
CHART = [(50, 600), (100, 2000), (150, 5000), (200, 8000), (250, 12000), (300, 17000), (350, 21000),
         (400, 27000), (450, 32000)]  # source: public_inputs, vendor chart (save time s, period s)


def _implied_mtbf(save, period):
    """The MTBF at which `period` is the exact optimum for `save` (bisection on log M)."""
    lo, hi = math.log(save * 1e-3), math.log(save * 1e9)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(optimal_interval(save, math.exp(mid))) < period:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def run(out_dir: Path) -> list[Row]:
    rows = []
    cm_path = MODELS / "clusters" / "cloudmatrix384_160k.toml"
    atlas_path = MODELS / "clusters" / "atlas800t_a2_10k.toml"
    tiered_path = MODELS / "recovery" / "ascend_tiered.toml"
    base_path = MODELS / "recovery" / "checkpoint_only.toml"
    cm, cat_cm = load_cluster(cm_path)
    atlas, cat = load_cluster(atlas_path)

    faults_30d = interruption_rate(cat_cm, cm) * 30 * DAY
    rows.append(Row(id="S-OUT-1", quantity="interrupting faults in 30 days on the 160K-card CloudMatrix384 cluster",
                    reported=0, model=faults_30d, unit="faults", tolerance="P(none) > 1 %", status="inconsistent",
                    inputs=[Input("cards", cm.cards, "cards", "S-OUT-1"),
                            Input("catalogue", "models/faults/ascend_training.toml", "-", "see the file")],
                    note=(f"Independent failures give {faults_30d:,.0f} expected faults, P(none) = e^-{faults_30d:,.0f}; "
                          "even a per-card rate 100x below the catalogue's leaves ~36. 'Without a fault' can only mean "
                          "without a job-visible interruption, i.e. > 99.97 % of faults hidden by the tiers.")))

    base = analyze(load_model(atlas_path, base_path))
    tiered = analyze(load_model(atlas_path, tiered_path))
    avail = float(tiered.availability)
    rows.append(Row(id="S-OUT-2", quantity="availability of a 10K-card pool with tiered recovery", reported=0.999,
                    model=avail, unit="1", tolerance=0.0005,
                    status="reproduced" if abs(avail - 0.999) <= 0.0005 else "explained",
                    inputs=[Input("cluster", "models/clusters/atlas800t_a2_10k.toml", "-", "see the file"),
                            Input("recovery", "models/recovery/ascend_tiered.toml", "-", "see the file")],
                    note=(f"Job availability (not down recovering or waiting) is {avail:.4f}; goodput "
                          f"{float(tiered.goodput):.3f}. 99.9 % needs the down time per fault ~{(1 - 0.999) / (float(tiered.interruptions_per_day) / DAY):.0f} s "
                          "on average, i.e. nearly every fault handled by the retry/online tiers.")))
    shorter = 1 - float(base.goodput) / float(tiered.goodput)
    rows.append(Row(id="S-OUT-2", quantity="training time saved by tiered recovery over checkpoint-only (10K cards)",
                    reported=1 / 3, model=shorter, unit="1", tolerance=0.05,
                    status="reproduced" if abs(shorter - 1 / 3) <= 0.05 else "explained",
                    inputs=[Input("baseline goodput", float(base.goodput), "1", "models/recovery/checkpoint_only.toml"),
                            Input("tiered goodput", float(tiered.goodput), "1", "models/recovery/ascend_tiered.toml")],
                    note=("time to train W = W / goodput; saved share = 1 - G_base / G_tiered. The baseline detects "
                          "faults by the 30-min collective timeout (public_inputs).")))
    rows.append(Row(id="PR-TRAIN-AVAIL", quantity="training availability, 10K-card cluster (press, June 2025)",
                    reported=0.98, model=avail, unit="1", tolerance=0.01,
                    status="explained",  # within tolerance, but the tier phases are largely assumptions
                    inputs=[Input("recovery", "models/recovery/ascend_tiered.toml", "-", "see the file")],
                    note=f"Checkpoint-only gives {float(base.availability):.3f}; goodput (useful share) {float(tiered.goodput):.3f}."))
    cluster_mtbf = 1 / interruption_rate(cat, atlas) / HOUR
    sn_mtbf = 1 / interruption_rate(cat_cm, cm, 384) / HOUR
    rows.append(Row(id="PR-HW-MTBF", quantity="hardware MTBF above 24 h (scope unclear): supernode vs 10K cluster",
                    reported=">24", model=[sn_mtbf, cluster_mtbf], unit="h", tolerance="lower bound",
                    status="explained",
                    inputs=[Input("catalogue", "models/faults/ascend_training.toml", "-", "see the file")],
                    note="Holds for one CloudMatrix384 supernode; a 10K-card cluster is far below it, so the scope must be a supernode."))
    job_tier = load_model(atlas_path, tiered_path).tiers[-1]
    restart = (float(job_tier.downtime()) + float(job_tier.restart_time(atlas.cards))) / MINUTE
    rows.append(Row(id="PR-DETECT", quantity="detection / localisation / recovery of a 10K-card cluster",
                    reported=[1, 5, 15], model=[float(job_tier.detection) / MINUTE, None, restart], unit="min",
                    tolerance="-", status="explained",
                    inputs=[Input("job-restart tier", "models/recovery/ascend_tiered.toml", "-", "see the file")],
                    note=(f"Our job-level restart takes {restart:.0f} min with the 6-min watchdog; 15 min needs detection "
                          "in 1 min (as reported) and the rest of the phases under 14 min.")))

    # vendor checkpoint chart: the MTBF each point implies
    implied = [_implied_mtbf(c, p) for c, p in CHART]
    young = [p * p / (2 * c) for c, p in CHART]
    for (c, p), m_exact, m_young in zip(CHART, implied, young):
        rows.append(Row(id="PI-CKPT-CHART", quantity=f"MTBF that makes a {p} s period optimal for a {c} s save",
                        reported=p, model=m_exact / HOUR, unit="h (implied MTBF)", tolerance="-",
                        status="inconsistent",
                        inputs=[Input("save time", c, "s", "public_inputs vendor chart"),
                                Input("period", p, "s", "public_inputs vendor chart")],
                        note=(f"Exact (Lambert W) {m_exact / HOUR:.1f} h, square-root rule {m_young / HOUR:.1f} h. Across the "
                              f"chart the implied MTBF runs from {implied[0] / HOUR:.1f} h to {implied[-1] / DAY:.1f} days: "
                              "no single MTBF, and longer saves (bigger jobs) would have shorter MTBFs, not longer.")))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        cs = np.linspace(20, 500, 100)
        for m in (HOUR, 6 * HOUR, DAY, 4 * DAY, 13 * DAY):
            ax.plot(cs, np.asarray(optimal_interval(cs, m)), label=f"exact optimum, MTBF {m / HOUR:.0f} h")
        ax.plot([c for c, _ in CHART], [p for _, p in CHART], "ko", label="vendor chart")
        ax.set_xlabel("save time (s)")
        ax.set_ylabel("checkpoint period (s)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "availability_checkpoint_chart.png", dpi=100)
        plt.close(fig)
    except ImportError:  # pragma: no cover
        pass

    # MindCluster loss per fault: T0 = period / 2 (the first-order mean rollback)
    lam_l = 0.25  # hourly checkpoints, MTBF ~4 h (the 10K cluster's)
    exact = 1 / lam_l - 1 / math.expm1(lam_l)  # E[t | t < L] / L for exponential failures
    rows.append(Row(id="PI-LOSS-T0", quantity="mean rollback per failure as a share of the period (T0)",
                    reported=0.5, model=exact, unit="1", tolerance=0.03,
                    status="reproduced" if abs(exact - 0.5) <= 0.03 else "inconsistent",
                    inputs=[Input("period / MTBF", lam_l, "1", "public_inputs hourly checkpoints; models: ~4.6 h MTBF")],
                    note="Exact E[t | t < L] / L = 1/(lambda L) - 1/(e^(lambda L) - 1) = 1/2 - lambda L / 12 + ..."))

    # MindCluster measured timings on one node against bytes / bandwidth
    write, read = 2.7e9, 4.8e9  # public_inputs: NFS write 2.7 GB/s, read 4.8 GB/s
    bpp = 14  # assumption: BF16 weights + FP32 master + two FP32 Adam moments
    for size, save, load in [(3e9, 30, 3), (15e9, 120, 90)]:
        state = size * bpp
        rows.append(Row(id="PI-TIMING", quantity=f"{size / 1e9:.0f}B checkpoint save on one node", reported=save,
                        model=state / write, unit="s", tolerance="factor 2", status="explained",
                        inputs=[Input("state", state / 1e9, "GB", "assumption: 14 bytes per parameter"),
                                Input("NFS write", write / 1e9, "GB/s", "public_inputs MindCluster")],
                        note=f"The measured save writes {save * write / size:.0f} bytes per parameter at 2.7 GB/s: serialisation and extra copies."))
        status = "explained" if size > 5e9 else "inconsistent"
        rows.append(Row(id="PI-TIMING", quantity=f"{size / 1e9:.0f}B checkpoint load on one node", reported=load,
                        model=state / read, unit="s", tolerance="factor 2", status=status,
                        inputs=[Input("state", state / 1e9, "GB", "assumption: 14 bytes per parameter"),
                                Input("NFS read", read / 1e9, "GB/s", "public_inputs MindCluster")],
                        note=(f"The measured load reads {load * read / size:.1f} bytes per parameter at 4.8 GB/s"
                              + ("; below the 2 bytes of BF16 weights plus optimizer state it must restore: a cached "
                                 "read, or the 3B run reloads weights only." if size < 5e9 else "."))))
    return rows
