"""``markovsim goodput``: goodput, availability and the optimal checkpoint interval of a job."""

from __future__ import annotations

import argparse
import textwrap
from typing import Sequence

from .._errors import SpecError
from .._io import Document, apply_overrides, expand, read_document, reference, sources
from .._lazy import lazy_module
from . import _common as c

av = lazy_module("markovsim.availability")  # imported when the command runs, not for every command

HELP = "goodput, availability and the optimal checkpoint interval of a training job"


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "goodput", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Goodput, availability, interruptions per day, job MTBF, the lost-time breakdown by
            cause and the optimal checkpoint interval of a training job, from
            markovsim.availability.analyze and optimal_checkpoint_interval; with
            --sensitivities, the elasticity of goodput to every input
            (markovsim.availability.goodput_sensitivities). --plot draws where the time goes.

            A job is a cluster file (models/clusters/, naming its fault catalogue in
            models/faults/) and a recovery file (models/recovery/). Give them as
              markovsim goodput --cluster atlas800t_a2_10k --recovery ascend_tiered
              markovsim goodput models/recovery/ascend_tiered.toml --cluster atlas800t_a2_10k
            or as a job file, MODEL.toml:
              name = "10K-card pre-training"   # optional
              cluster = "atlas800t_a2_10k"     # path relative to the job file, or a bare name
              recovery = "ascend_tiered"
              cards = 4096                     # optional job size (default: the whole cluster)
            --set keys are paths in the job: recovery.checkpoint.interval,
            recovery.tiers[0].coverage, cluster.network.radix,
            cluster.faults.components[0].rate, cards.

            The first run of a model compiles it with JAX (seconds to tens of seconds for a
            many-tier ladder)."""),
        epilog="example: markovsim goodput --cluster atlas800t_a2_10k --recovery checkpoint_only "
               "--set 'recovery.checkpoint.interval=30 min'")
    p.add_argument("model", metavar="MODEL.toml", nargs="?",
                   help="job file, or a recovery or cluster file (the other one given by an option)")
    add_job_options(p)
    p.add_argument("--cards", type=int, metavar="N", help="cards of the job (default: the whole cluster)")
    p.add_argument("--sensitivities", action="store_true",
                   help="also print d ln(goodput) / d ln(input) for every input, largest first")
    c.add_common(p)
    return p


def add_job_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="CLUSTER", help="cluster file, or a bare name in models/clusters/")
    p.add_argument("--recovery", metavar="RECOVERY", help="recovery file, or a bare name in models/recovery/")


def job_document(model: str | None, cluster: str | None, recovery: str | None, cards: int | None,
                 sets: Sequence[str] | None, *, read: Document | None = None):
    """The job document (cluster, faults and recovery inlined, each file read once) with the
    overrides applied: ``(document, label, base, overrides)``. ``read``: the model file's
    document when the caller has read it already."""
    changes = c.overrides(sets)
    job, base, label = Document(), None, "job"
    if model is not None:
        doc = read if read is not None else read_document(c.named(model, ("recovery", "clusters")))
        path = doc.origin
        if av.is_job(doc):
            job, base, label = doc, path.parent, str(path)
        elif av.is_recovery(doc):
            job = Document(recovery=doc)
        elif av.is_cluster(doc):
            job = Document(cluster=doc)
        else:
            raise SpecError(f"{path}: not a job, cluster or recovery file (a job file has cluster and recovery; "
                            "a recovery file has catch_all, [checkpoint] and [[tiers]]; a cluster file has cards, "
                            "faults and [network])")
    for key, arg, folder in (("cluster", cluster, "clusters"), ("recovery", recovery, "recovery")):
        if arg is not None:   # relative to the working directory, like every command-line path
            job[key] = reference(arg, folder=folder, base=None, where=f"--{key}")
    if cards is not None:
        job["cards"] = cards
    for key in ("cluster", "recovery"):
        if key not in job:
            raise SpecError(f"no {key} given: pass --{key} FILE (a file, or a bare name in models/"
                            f"{'clusters' if key == 'cluster' else 'recovery'}/), or a job file that names it")
    expanded = expand(job, av.JOB_REFERENCES, base=base, where=label)
    return apply_overrides(expanded, changes), label, base, changes


def run(args) -> int:
    doc, label, base, changes = job_document(args.model, args.cluster, args.recovery, args.cards, args.sets)
    job = c.build(av.job_from_document, doc, label, base, changes)
    o = dict(av.job_outputs(job.model))
    lost = {cause: o[f"lost_{cause}"] for cause in av.CAUSES}
    files = {k: (str(v) if v is not None else None) for k, v in sources(doc, av.JOB_REFERENCES).items()}
    sens = av.goodput_sensitivities(job.model) if args.sensitivities else None
    if args.csv:
        rows = [(k, v, av.JOB_OUTPUT_UNITS.get(k, "1")) for k, v in o.items()]
        rows += [(f"sensitivity {k}", v, "1") for k, v in (sens or {}).items()]
        c.write_csv(args.csv, ("output", "value", "unit"), rows, force=args.force)
    if args.plot:
        def draw(ax):
            from ..plotting import plot_breakdown

            plot_breakdown({"goodput": o["goodput"], **{k.replace("_", " "): v for k, v in lost.items()}},
                           unit="share of wall time", ax=ax)
            ax.set_title(job.name)

        c.save_plot(args.plot, draw, force=args.force)
    if args.json:
        c.print_json({"command": "goodput", "file": label if base is not None else None, "name": job.name,
                      "cluster": job.cluster.name, "recovery": job.plan.name, "sources": files,
                      "overrides": [x.text for x in changes], "outputs": o, "lost": lost,
                      "sensitivities": sens})
        return 0
    print(f"{job.name}  ({label})" if base is not None else job.name)
    print("files: " + ", ".join(f"{k} {v}" for k, v in files.items() if v is not None))
    for line in c.with_overrides(changes):
        print(line)
    print()
    print(c.table([
        ("cards", f"{o['cards']:.0f}"),
        ("goodput", c.pct(o["goodput"])),
        ("availability", c.pct(o["availability"], 3)),
        ("unavailability", f"{o['unavailability']:.3e}"),
        ("interruptions / day", f"{o['interruptions_per_day']:.4g}"),
        ("job MTBF (running time)", c.duration(o["job_mtbf_s"])),
        ("work lost per interruption", c.duration(o["lost_work_per_interruption_s"])),
        ("checkpoint interval", c.duration(o["checkpoint_interval_s"]) + f"  (goodput {c.pct(o['goodput'])})"),
        ("optimal checkpoint interval", c.duration(o["optimal_checkpoint_interval_s"])
         + f"  (goodput {c.pct(o['goodput_at_optimal_interval'])})"),
    ]))
    print()
    rows = [(cause.replace("_", " "), c.pct(v)) for cause, v in lost.items()]
    rows.append(("total lost", c.pct(sum(lost.values()))))
    print(c.table(rows, ("lost time by cause", "share of wall time"), right=(1,)))
    if sens is not None:
        print()
        ranked = sorted(sens.items(), key=lambda kv: -abs(kv[1]))
        print(c.table([(k, f"{v:+.4g}") for k, v in ranked[:20]],
                      ("input (largest effect first)", "d ln goodput / d ln input"), right=(1,)))
        if len(ranked) > 20:
            print(f"... {len(ranked) - 20} more with --json")
    return 0
