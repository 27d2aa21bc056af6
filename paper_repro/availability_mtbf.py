"""S-MTBF-*: fault rates of large clusters from a component catalogue and the cluster's shape.

Mechanism: component failures (rates in models/faults/*.toml: the Ascend catalogue's
per-card and per-node rates from the Llama 3 report's interruption table, optical modules
from S-MTBF-3; the GPU catalogue's node rates fitted on the public InfiniteHBD trace)
counted on the cluster's shape (models/clusters/*.toml: cards per node, supernodes,
fat-tree levels and optical modules). S-MTBF-1 uses the fault model fitted on the
InfiniteHBD trace with its correlated failures (shocks that take several nodes at once).
Unpublished inputs that decide a figure (job size, network optics, price of a card-hour,
how far a burst reaches as the cluster grows) are swept over a stated range.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from _common import ATLAS, CM384, GPU, INFINITEHBD, cluster_inputs, mtbf_with_prediction, path

from markovsim import DAY, HOUR, YEAR
from markovsim.availability import (
    Reach,
    component_counts,
    infinitehbd_fit,
    interruption_rate,
    job_mtbf,
    load_cluster,
    mtbf_doubling_ratio,
    mtbf_ratio,
    mtbf_scaling_finding,
)
from markovsim.repro import ModelValue, Sweep, assumed, cited, sweep

IDS = ["S-MTBF-1", "S-MTBF-2", "S-MTBF-3", "S-MTBF-4", "S-MTBF-5", "S-MTBF-6"]
BASE_NODES = (128, 256, 400, 640)  # assumption: base size of the doubling, 1,024 to 5,120 cards of 8 per node
REACHES = (Reach.LOCAL, Reach.PROPORTIONAL)  # assumption: the trace (one cluster) cannot tell how a burst's reach grows


def _share_draws(fit, level, draws=1000, seed=0):
    """The fitted model and the parameter draws at the ends of the correlated share's interval."""
    models = fit.sample_models(np.random.default_rng(seed), draws)
    shares = np.array([m.correlated_share() for m in models])
    order = np.argsort(shares)
    pick = [order[int(round(q * (draws - 1)))] for q in ((1 - level) / 2, (1 + level) / 2)]
    return {"trace low": models[pick[0]], "trace estimate": fit.model, "trace high": models[pick[1]]}


def _mtbf_1(fit, finding, independent: float) -> tuple[ModelValue, dict]:
    """S-MTBF-1 from the correlated failures of the fitted InfiniteHBD model."""
    models = _share_draws(fit, fit.level)
    points, values = [], []
    for label, m in models.items():
        for reach in REACHES:
            for n in BASE_NODES:
                points.append((f"{label} ({m.correlated_share():.3f})", reach.value, n))
                values.append(mtbf_ratio(m, n, reach=reach))
    est, lo, hi = finding.trace_share
    r0, r_lo, r_hi = finding.ratio_proportional
    n0, n_lo, n_hi = finding.nodes_for_target
    lemon = "{:.3f} [{:.3f}, {:.3f}]".format(*finding.ratio_lemon_placement)
    value = ModelValue(
        key="S-MTBF-1", model=r0, unit="1",
        quantity=(f"cluster MTBF(2N) / MTBF(N) at N = {finding.nodes} nodes (the fitted fleet), the InfiniteHBD "
                  "fault model with its correlated failures, reach proportional to the cluster"),
        inputs=[
            cited("fault model (shock arrivals, burst sizes, class shares)", "fit_fault_log defaults", "",
                  "fitted on " + INFINITEHBD + " (markovsim.availability.infinitehbd_fit)"),
            cited("correlated share of faults (beyond the first of a shock)", f"{est:.3f} [{lo:.3f}, {hi:.3f}]", "1",
                  f"fitted on the InfiniteHBD trace, {finding.level:.0%} interval from parameter draws; the sweep "
                  "takes the estimate and the draws at the interval's ends"),
            assumed("reach of a burst as the cluster grows", "local or proportional", "",
                    "the trace is one cluster of 400 nodes: it cannot tell whether a burst takes a fixed number of "
                    "nodes (a rack, a switch: local) or a fixed share of the cluster (a storm, a bad push, a stress "
                    "campaign: proportional); both swept"),
            assumed("base size of the doubling", "128 to 640 (1,024 to 5,120 cards)", "nodes",
                    "the article names no size; its subject is 10,000-card clusters, whose last doubling starts near "
                    "5,000 cards; 400 nodes is the fitted fleet itself (no extrapolation)"),
            assumed("the clusters of the claim fail like the InfiniteHBD GPU servers", "8-GPU servers", "",
                    "the blog names no cluster; the trace is the only public node-level log with correlated faults "
                    "the project has")],
        sweep=Sweep(("correlated share", "reach", "base nodes"), tuple(points), tuple(values)),
        mechanism=(f"one third needs {finding.required_share:.0%} of the faults correlated with a reach that grows "
                   "with the cluster; the trace gives less, and nothing when the reach is local"),
        note=(f"markovsim.availability.mtbf_scaling_finding(infinitehbd_fit()): one third needs a correlated share "
              f"of {finding.required_share:.0%} (proportional reach, large clusters); the trace's is {est:.1%} "
              f"[{lo:.1%}, {hi:.1%}]. Doubling {finding.nodes} nodes gives {r0:.3f} [{r_lo:.3f}, {r_hi:.3f}] with "
              f"proportional reach and {finding.ratio_local:.2f} with local reach; proportional reach reaches 1/3 "
              f"from a base of {n0:,.0f} [{n_lo:,.0f}, {n_hi:,.0f}] nodes. Counted as the interruptions of one job on "
              f"a fixed fleet the picture reverses (half the fleet to all of it: {finding.ratio_job[0]:.3f}, a shock "
              "interrupts a job once however many of its nodes it takes); heterogeneity alone, with a job placed "
              f"on the best nodes first, gives {lemon} from half the fleet to all of it. The independent Ascend "
              f"catalogue gives {independent:.3f} from 5,120 to 10,240 cards."))
    return value, models


def run(out_dir: Path) -> list[ModelValue]:
    atlas, cat = load_cluster(path(ATLAS))
    cm, cat_cm = load_cluster(path(CM384))
    gpu, cat_gpu = load_cluster(path(GPU))
    out = []

    # S-MTBF-1: MTBF ratio on doubling, correlated failures fitted on the InfiniteHBD trace
    fit = infinitehbd_fit()
    finding = mtbf_scaling_finding(fit)
    row, models = _mtbf_1(fit, finding, mtbf_doubling_ratio(cat, atlas, 5120))
    out.append(row)

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
            note=("no job size is published, so no single model value is given: the band is over job sizes. The "
                  "catalogue's node rates are fitted on the InfiniteHBD trace, which sees node faults only: job-level "
                  "software faults (training-stack bugs, collective timeouts on healthy nodes) are not in it and would "
                  "shorten every stretch.")))

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
    _plot(out_dir, cat, atlas, models)
    return out


def _plot(out_dir: Path, cat, atlas, models: dict) -> None:
    """Left: job MTBF against job size (independent failures, Ascend catalogue) against the seed's
    'one third per doubling'. Right: S-MTBF-1's ratio against the base size, from the
    InfiniteHBD fit with local and proportional reach, against the figure's tolerance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cards = np.unique(np.concatenate([2 ** np.arange(3, 14), [atlas.cards]]))
    cards = cards[cards <= atlas.cards]
    mtbf_h = np.array([job_mtbf(cat, atlas, int(n)) / HOUR for n in cards])
    anchor = 1024
    m0 = job_mtbf(cat, atlas, anchor) / HOUR
    third = m0 * (1 / 3) ** np.log2(cards / anchor)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12.0, 4.6), layout="constrained")
    ax.loglog(cards, mtbf_h, "o-", label="model: independent component failures (about x1/2 per doubling)")
    ax.loglog(cards, third, "--", color="C3", label=f"S-MTBF-1: x1/3 per doubling (anchored at {anchor} cards)")
    ax.axhspan(24, 72, color="C2", alpha=0.15, label="S-MTBF-4: 1-3 days of stable training")
    ax.annotate(f"{atlas.cards:,} cards: {mtbf_h[-1]:.1f} h", (cards[-1], mtbf_h[-1]), xytext=(-110, -20),
                textcoords="offset points", fontsize="small", arrowprops=dict(arrowstyle="->", lw=0.6))
    ax.set_xlabel("job size [cards]")
    ax.set_ylabel("job MTBF [h]")
    ax.set_title("Job MTBF vs job size, 10K Atlas 800T A2 catalogue", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")

    nodes = np.geomspace(16, 4096, 60)
    ratio = {k: np.array([mtbf_ratio(m, n, reach=Reach.PROPORTIONAL) for n in nodes]) for k, m in models.items()}
    bx.fill_between(nodes, ratio["trace low"], ratio["trace high"], color="C0", alpha=0.25,
                    label="proportional reach, trace's 90 % interval of the correlated share")
    bx.plot(nodes, ratio["trace estimate"], color="C0", label="proportional reach, trace estimate")
    bx.plot(nodes, [mtbf_ratio(models["trace estimate"], n, reach=Reach.LOCAL) for n in nodes], color="C1",
            label="local reach (any share), or independent failures")
    bx.axhspan(0.2917, 0.4167, color="C3", alpha=0.12, label="S-MTBF-1: about 1/3 (tolerance)")
    bx.axhline(1 / 3, color="C3", ls="--", lw=0.8)
    bx.axvspan(min(BASE_NODES), max(BASE_NODES), color="0.5", alpha=0.12, label="swept base sizes")
    bx.axvline(400, color="0.3", lw=0.8, ls=":")
    bx.set_xscale("log")
    bx.set_xlabel("base size of the doubling [nodes of 8 GPUs]")
    bx.set_ylabel("MTBF(2N) / MTBF(N)")
    bx.set_title("S-MTBF-1 from the InfiniteHBD fit (400 nodes, dotted)", fontsize="medium")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize="small", loc="lower left")
    fig.savefig(out_dir / "availability_mtbf.png", dpi=90)
    plt.close(fig)
