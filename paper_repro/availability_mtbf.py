"""S-MTBF-*: fault rates of large clusters from a component catalogue and the cluster's shape.

Mechanism: independent component failures (rates in models/faults/*.toml: per-card and
per-node rates from the Llama 3 report's interruption table, optical modules from
S-MTBF-3) counted on the cluster's shape (models/clusters/*.toml: cards per node,
supernodes, fat-tree levels and optical modules). Unpublished inputs that decide a figure
(job size, network optics, price of a card-hour) are swept over a stated range.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from _common import ATLAS, CM384, GPU, cluster_inputs, mtbf_with_prediction, path

from markovsim import DAY, HOUR, YEAR
from markovsim.availability import (
    component_counts,
    interruption_rate,
    job_mtbf,
    load_cluster,
    mtbf_doubling_ratio,
    superlinear_share_for_ratio,
)
from markovsim.repro import ModelValue, assumed, cited, sweep

IDS = ["S-MTBF-1", "S-MTBF-2", "S-MTBF-3", "S-MTBF-4", "S-MTBF-5", "S-MTBF-6"]


def run(out_dir: Path) -> list[ModelValue]:
    atlas, cat = load_cluster(path(ATLAS))
    cm, cat_cm = load_cluster(path(CM384))
    gpu, cat_gpu = load_cluster(path(GPU))
    out = []

    # S-MTBF-1: MTBF ratio on doubling, independent failures, whatever the starting size
    ratio = mtbf_doubling_ratio(cat, atlas, 5120)
    share = superlinear_share_for_ratio(1 / 3)
    out.append(ModelValue(
        key="S-MTBF-1", model=ratio, unit="1",
        quantity="job MTBF at 10,240 cards / at 5,120 cards, independent component failures",
        inputs=cluster_inputs(ATLAS) + [
            assumed("starting size of the doubling", "512 to 5,120", "cards",
                    "the article names no size; swept, with the network re-sized (extra switch levels) at each")],
        sweep=sweep(lambda cards: mtbf_doubling_ratio(cat, atlas, cards), cards=(512, 1024, 2048, 4096, 5120)),
        mechanism=(f"independent failures give 1/2 per doubling, a little less where the network needs another "
                   f"switch level; one third needs a rate term growing as N^2 that is {share:.0%} of the rate at the "
                   "starting size (correlated or common-cause failures: a failing node taking its communicator's "
                   "peers down, shared power or cooling), which the library's catalogue does not have yet"),
        note="the fault-data work adds common-cause terms to the catalogue; this row is then re-run with that term "
             "fitted on fault logs (not on this figure)."))

    # S-MTBF-2: several faults per day; the cost of days of training thrown away
    per_day = interruption_rate(cat, atlas) * DAY
    out.append(ModelValue(
        key="S-MTBF-2/faults-per-day", model=per_day, unit="1/day",
        quantity="interrupting faults per day on the 10,240-card Atlas 800T A2 cluster",
        inputs=cluster_inputs(ATLAS),
        note="interrupting modes only; single-lane optical faults absorbed by lane grouping (S-HW-1) are excluded."))

    def loss(days, price):
        return atlas.cards * days * 24.0 * price

    out.append(ModelValue(
        key="S-MTBF-2/loss", model=loss(2, 8.0), unit="CNY",
        quantity="cards x hours thrown away x price of a card-hour",
        inputs=[cited("cards", atlas.cards, "cards", "S-MTBF-2 (10,000-card cluster; 10,240 in the cluster file)"),
                cited("training thrown away", "2 to 3", "days", "S-MTBF-2 'days of training' (plural: 2 and 3 taken)"),
                assumed("price of an accelerator card-hour", "8 (4 to 16)", "CNY/card-h",
                        "not published; rental prices of training accelerators in China span about 4-16 CNY "
                        "per card-hour, central 8")],
        sweep=sweep(loss, days=(2, 3), price=(4.0, 8.0, 16.0)),
        note="above 2 million CNY for two days needs more than 4.07 CNY per card-hour."))

    # S-MTBF-3: optical-module interruptions per year, 4 % AFR, all optical faults interrupting
    afr = cat.component("optical_module").rate * YEAR

    def optical_per_year(first_optical_level, radix):
        net = dataclasses.replace(atlas.network, first_optical_level=first_optical_level, radix=radix, levels=None)
        return component_counts(dataclasses.replace(atlas, network=net))["optical_module"] * afr

    model = optical_per_year(atlas.network.first_optical_level, atlas.network.radix)
    out.append(ModelValue(
        key="S-MTBF-3", model=model, unit="1/year",
        quantity="optical modules of a 10,240-card fat tree x 4 % AFR",
        inputs=[cited("optical-module AFR", afr, "1/module-year", "S-MTBF-3"),
                cited("cards", atlas.cards, "cards", "S-MTBF-3 (10,000-card cluster)"),
                assumed("first optical level", "0 (0 to 2)", "level",
                        "not published: 0 = every link optical, 1 = card-to-leaf copper, 2 = only the top level optical"),
                assumed("switch radix", "64 (32 to 128)", "ports", "not published: common RoCE switch radices")],
        sweep=sweep(optical_per_year, first_optical_level=(0, 1, 2), radix=(32, 64, 128)),
        note=(f"60 per year at 4 % needs {60 / afr:,.0f} modules ({60 / afr / atlas.cards:.2f} per card); a fat tree "
              "for 10,240 cards with one NIC per card holds several per card even with only its top level optical. "
              "Only the 10 % of faults that are not single-lane would still be far above 60.")))

    # S-MTBF-4: stable stretches on a typical GPU cluster, job size unknown
    sizes = (512, 1024, 2048, 4096, 8192, 16384)
    gpu_inputs = cluster_inputs(GPU) + [assumed("job size", "512 to 16,384", "GPUs",
                                                "not published; from a few hundred GPUs to the 16,384 of the Llama 3 run")]

    def gpu_mtbf_days(cards):
        return job_mtbf(cat_gpu, gpu, cards) / DAY

    for key in ("S-MTBF-4/range", "S-MTBF-4/measured"):
        out.append(ModelValue(
            key=key, model=None, unit="days", quantity="job MTBF on the 8-GPU-node catalogue, over job sizes",
            inputs=gpu_inputs, sweep=sweep(gpu_mtbf_days, cards=sizes),
            note="no job size is published, so no single model value is given: the band is over job sizes."))

    # S-MTBF-5: CloudMatrix384 supernode MTBF with predictive maintenance
    supernode_mtbf = mtbf_with_prediction(cat_cm, cm, 384)
    out.append(ModelValue(
        key="S-MTBF-5", model=supernode_mtbf(1.0), unit="h",
        quantity="MTBF of one 384-NPU supernode, predictable faults moved off",
        inputs=cluster_inputs(CM384) + [assumed("share of predictable faults acted on", "1 (0 to 1)", "1",
                                                "S-MTBF-5 names the signals, not how many faults they catch")],
        sweep=sweep(supernode_mtbf, coverage=(0.0, 0.5, 1.0)),
        note=f"without predictive maintenance the supernode already gets {supernode_mtbf(0.0):.0f} h."))

    # S-MTBF-6: three days lost to one node failure
    rollback = 0.5 * HOUR
    restart = 45 * 60.0

    def lost_days(diagnosis_days):
        return diagnosis_days + (rollback + restart) / DAY

    out.append(ModelValue(
        key="S-MTBF-6", model=None, unit="days",
        quantity="manual fault demarcation + rollback + restart",
        inputs=[cited("manual fault demarcation", "2 to 7", "days", "S-REC-7 ('days' for hard faults by hand; "
                      "read as 2 days to a week)"),
                cited("rollback", rollback / HOUR, "h", "public_inputs MindCluster T0 = period / 2, hourly checkpoints"),
                cited("restart", restart / 60, "min", "S-REC-1 (up to 45 min)")],
        sweep=sweep(lost_days, diagnosis_days=(2, 3, 5, 7)),
        note="days are lost only while the failure is found by hand (S-REC-7) and the whole job waits; rollback and "
             "restart alone cost about an hour, so the figure is essentially the diagnosis time, itself an input."))
    _plot(out_dir, cat, atlas)
    return out


def _plot(out_dir: Path, cat, atlas) -> None:
    """Job MTBF against job size: independent failures against the seed's 'one third per doubling'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cards = np.unique(np.concatenate([2 ** np.arange(3, 14), [atlas.cards]]))
    cards = cards[cards <= atlas.cards]
    mtbf_h = np.array([job_mtbf(cat, atlas, int(n)) / HOUR for n in cards])
    anchor = 1024
    m0 = job_mtbf(cat, atlas, anchor) / HOUR
    third = m0 * (1 / 3) ** np.log2(cards / anchor)
    fig, ax = plt.subplots(figsize=(7.0, 4.5), layout="constrained")
    ax.loglog(cards, mtbf_h, "o-", label="model: independent component failures (about x1/2 per doubling)")
    ax.loglog(cards, third, "--", color="C3", label=f"S-MTBF-1: x1/3 per doubling (anchored at {anchor} cards)")
    ax.axhspan(24, 72, color="C2", alpha=0.15, label="S-MTBF-4: 1-3 days of stable training")
    ax.annotate(f"{atlas.cards:,} cards: {mtbf_h[-1]:.1f} h", (cards[-1], mtbf_h[-1]), xytext=(-110, -20),
                textcoords="offset points", fontsize="small", arrowprops=dict(arrowstyle="->", lw=0.6))
    ax.set_xlabel("job size [cards]")
    ax.set_ylabel("job MTBF [h]")
    ax.set_title("Job MTBF vs job size, 10K Atlas 800T A2 catalogue (interrupting faults)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    fig.savefig(out_dir / "availability_mtbf.png", dpi=90)
    plt.close(fig)
