"""``markovsim train``: step time, MFU/HFU, tokens/s and linearity of a training plan."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap

from .._errors import SpecError
from .._lazy import lazy_module
from . import _common as c

tr = lazy_module("markovsim.training")  # imported when the command runs, not for every command
HELP = "step time, MFU/HFU, tokens/s and linearity of a training plan"
#: how each term of the step breakdown is shown (the terms are ``StepBreakdown.PARTS``)
_LABELS = {"bubble": "pipeline bubble", "tp_exposed": "TP communication (exposed)",
           "ep_exposed": "EP communication (exposed)", "pp_exposed": "PP communication (exposed)",
           "dp_exposed": "DP communication (exposed)", "optimizer": "optimizer step",
           "grad_norm": "gradient norm", "sync": "synchronisation", "overhead": "fixed per-step overhead",
           "data_loading": "data loading", "straggler": "stragglers",
           "offload_exposed": "activation offloading (exposed)"}


def _parts():
    return [(_LABELS.get(p, p.replace("_", " ")), f"{p}_s") for p in tr.StepBreakdown.PARTS]


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "train", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Step-time breakdown (compute, pipeline bubble, exposed TP/EP/PP/DP communication,
            optimizer), MFU, HFU, tokens/s and memory per card of a parallel plan file
            (models/plans/), from markovsim.training.step_time. With --cards (and --baseline)
            the plan is grown by data parallelism and its linearity printed:
            (tokens/s per card at N) / (tokens/s per card at the baseline).
            --plot draws the breakdown (and the linearity curve with --cards)."""),
        epilog="example: markovsim train pangu_ultra_135b_8k --baseline 256 --cards 4096 8192")
    p.add_argument("model", metavar="PLAN.toml", help="plan file, or the bare name of one in models/plans/")
    p.add_argument("--cards", type=int, nargs="+", metavar="N",
                   help="sizes (cards) at which to print step time, tokens/s and linearity")
    p.add_argument("--baseline", type=int, metavar="N",
                   help="baseline size for linearity (default: the plan's own size)")
    p.add_argument("--batch", default="fixed-global", metavar="RULE[=N]",
                   help="the batch rule of the linearity table: fixed-global (the global batch held at every "
                        "size: N sequences, default the plan's) or fixed-replica (the batch of each data-parallel "
                        "replica held: N sequences, default the plan's global batch / dp)")
    p.add_argument("--jitter-cv", type=float, default=0.0, metavar="CV",
                   help="per-rank step-time coefficient of variation for the straggler delay in the "
                        "linearity table (default 0)")
    p.add_argument("--operators", action="store_true",
                   help="also list the per-layer operators of one micro-batch on one rank (GEMM shapes, "
                        "FLOPs, forward and backward times; attention, element-wise kernels and FP8 casts), "
                        "from markovsim.training.operator_table; needs a hardware file with a [kernels] table")
    c.add_common(p)
    return p


def run(args) -> int:
    spec, path, changes = c.load(args.model, tr.MODEL_KIND, tr.plan_from_document, args.sets)
    o = tr.plan_outputs(spec)
    plan = spec.plan
    scaling, gap = None, []
    if args.cards or args.baseline is not None:
        baseline = args.baseline if args.baseline is not None else plan.world_size
        # the baseline first, then each other size once, in the order given
        sizes = [baseline, *(n for n in dict.fromkeys(args.cards or [plan.world_size]) if n != baseline)]
        scaling = tr.linearity_points(spec, sizes, batch=_batch(args.batch), jitter_cv=args.jitter_cv)
        lin_evidence = tr.linearity_evidence(spec.hardware, args.batch)
        gap = _at_median_gap(lin_evidence, scaling)
    usable = o["usable_memory_bytes"]
    # which rank the memory is of: with a pipeline, the fuller of the first and the last stage
    stage = tr.memory_breakdown(spec.workload, spec.hardware, plan, efficiency=spec.efficiency).stage
    step = o["step_time_s"]
    parts = [(name, o[key]) for name, key in _parts() if o[key] > 0 or key == "bubble_s"]
    if args.csv:
        rows = [(k, v, tr.PLAN_OUTPUT_UNITS.get(k, "1")) for k, v in o.items()]
        rows += [(f"linearity@{r['cards']}", r["linearity"], "1") for r in scaling or ()]
        rows += [(f"linearity_at_median_gap@{r['cards']}", m, "1")
                 for r, m in zip(scaling or (), gap) if m is not None]
        c.write_csv(args.csv, ("output", "value", "unit"), rows, force=args.force)
    if args.plot:
        def draw(axes):
            from ..plotting import plot_breakdown

            ax = axes[0] if scaling else axes
            plot_breakdown(dict(parts), unit="s", ax=ax)
            ax.set_title(f"{spec.name}: step time {step:.3g} s")
            if scaling:
                axes[1].plot([r["cards"] for r in scaling], [r["linearity"] for r in scaling], marker="o",
                             label="model")
                shown = [(r["cards"], m) for r, m in zip(scaling, gap) if m is not None]
                if shown:
                    axes[1].plot(*zip(*shown), marker="x", linestyle="--",
                                 label="at the median published gap (a reading, not a prediction)")
                    axes[1].legend(fontsize="small")
                axes[1].set_xscale("log", base=2)
                axes[1].set_xlabel("cards")
                axes[1].set_ylabel(f"linearity (baseline {scaling[0]['cards']})")

        c.save_plot(args.plot, draw, force=args.force, panels=2 if scaling else 1)
    ops = tr.operator_table(spec.workload, spec.hardware, plan) if args.operators else None
    if args.json:
        c.print_json({"command": "train", "file": str(path), "name": spec.name,
                      "workload": spec.workload.name, "hardware": spec.hardware.name,
                      "overrides": [x.text for x in changes], "plan": _plan_info(plan), "outputs": o,
                      **c.efficiency_json(_efficiency_used(spec)),
                      "caveats": tr.plan_caveats(spec), "evidence": tr.plan_evidence(spec),
                      "usable_memory_bytes": usable, "memory_stage": stage,
                      "scaling": None if scaling is None else {
                          "batch": args.batch, "baseline": scaling[0]["cards"], "jitter_cv": args.jitter_cv,
                          "points": [{**r, "linearity_at_median_gap": m} for r, m in zip(scaling, gap)],
                          "evidence": lin_evidence, "caveat": _linearity_caveat()},
                      **({} if ops is None else {"operators": [dataclasses.asdict(r) for r in ops]})})
        return 0
    print(f"{spec.name}  ({path})")
    print(f"{spec.workload.name} on {spec.hardware.name}: {plan.world_size} cards = tp {plan.tp} x pp {plan.pp} "
          f"x dp {plan.dp}" + (f" x cp {plan.cp}" if plan.cp > 1 else "") + (f", ep {plan.ep}" if plan.ep > 1 else "")
          + f"; {plan.schedule.value}" + (f" v={plan.virtual_stages}" if plan.virtual_stages > 1 else "")
          + f"; global batch {plan.global_batch}, micro-batch {plan.micro_batch}, "
          f"{plan.micro_batches} micro-batches per replica; recompute {plan.recompute.value}"
          + (f" ({plan.recompute_layers} layers per chunk)" if plan.recompute_layers else "")
          + (f" ({', '.join(plan.recompute_modules)})" if plan.recompute_modules else "")
          + (f"; Adam moments {plan.optimizer_moments.value}" if plan.optimizer_moments.value != "fp32" else "")
          + ("; eager element-wise operators" if plan.elementwise.value == "eager" else "")
          + (("; fp8 GEMMs" + (" with FP8 weights" if plan.fp8_params else "") + f", {plan.fp8_recipe.value} scaling")
             if plan.precision.value == "fp8" else "")
          + (f"; expert dispatch {plan.ep_dispatch.value} in {plan.ep_dispatch_precision.value}"
             + (", combined 1F1B" if plan.combined_1f1b else "")
             if spec.workload.moe is not None and plan.ep > 1 else ""))
    print(c.efficiency_text(_efficiency_used(spec)))
    for line in c.with_overrides(changes):
        print(line)
    print()
    rows = [(name, f"{t:.4f}", c.pct(t / step, 1)) for name, t in parts]
    rows.append(("step time", f"{step:.4f}", c.pct(1.0, 1)))
    print(c.table(rows, ("step time breakdown", "seconds", "share"), right=(1, 2)))
    print()
    print(c.table([
        ("tokens/s", f"{o['tokens_per_s']:.4g}"),
        ("tokens/s per card", f"{o['tokens_per_s_per_card']:.4g}"),
        ("MFU", c.pct(o["mfu"]) + (" of the BF16 peak" if tr.Precision(plan.precision) is tr.Precision.FP8 else "")),
        ("HFU", c.pct(o["hfu"]) + (" of the BF16 peak" if tr.Precision(plan.precision) is tr.Precision.FP8 else "")),
        ("pipeline bubble", c.pct(o["pipeline_bubble_fraction"]) + " of compute + bubble"),
        ("memory per card", f"{o['memory_bytes'] / 2**30:.1f} GiB of {usable / 2**30:.1f} GiB usable"
         + ("" if stage == "both" else f", on the {stage} pipeline stage (the fuller end)")
         + ("" if o["fits"] else _over(o["memory_bytes"], usable, spec.hardware.hbm_bytes))),
        ("  of which", _memory_parts(o)),
        ("TFLOP/s per card", f"{o['tflops_per_gpu']:.4g}"),
        ("communication before overlap", f"{o['communication_total_s']:.4f} s"),
    ]))
    if ops is not None:
        print()
        print("operators of one micro-batch on one rank (per layer; logits and cross-entropy once, on the "
              "last stage)")
        print(c.table([(r.name, r.where, "" if r.shape is None else " x ".join(f"{x:.0f}" for x in r.shape),
                        f"{r.count:g}", f"{r.flops / 1e9:.4g}", f"{1e3 * r.forward_s:.4f}",
                        f"{1e3 * r.backward_s:.4f}") for r in ops],
                      ("operator", "where", "M x N x K", "count", "GFLOP (fwd)", "forward ms", "backward ms"),
                      right=(3, 4, 5, 6)))
    print(f"\nevidence: {tr.plan_evidence(spec)['text']}")
    for note in tr.plan_caveats(spec):
        print(f"\ncaveat: {note}")
    if scaling is not None:
        print()
        print(f"linearity (batch {args.batch}, baseline {scaling[0]['cards']} cards"
              + (f", rank jitter CV {args.jitter_cv:g}" if args.jitter_cv else "") + ")")
        shown = any(m is not None for m in gap)
        print(c.table([(str(r["cards"]), str(r["dp"]), str(r["global_batch"]), f"{r['step_time_s']:.4f}",
                        f"{r['tokens_per_s']:.4g}", f"{r['linearity']:.4f}")
                       + ((("" if m is None else f"{m:.4f}"),) if shown else ()) for r, m in zip(scaling, gap)],
                      ("cards", "dp", "global batch", "step time (s)", "tokens/s", "linearity")
                      + (("at the median gap",) if shown else ()),
                      right=(0, 1, 2, 3, 4, 5, 6)))
        print(f"\nlinearity evidence: {lin_evidence['text']}")
        if shown:
            print("at the median gap: the linearity less the published runs' median loss per doubling of cards "
                  "beyond the model, times the doublings above the baseline; a reading of the same holdout rows, "
                  "not a prediction")
        print(f"\ncaveat: {_linearity_caveat()}")
    return 0


def _at_median_gap(evidence: dict, points: list[dict]) -> list:
    from ..training._evidence import at_median_gap

    return at_median_gap(evidence, points)


def _linearity_caveat() -> str:
    from ..training._evidence import linearity_caveat

    return linearity_caveat()


def _batch(text: str):
    kind, _, number = text.partition("=")
    if kind not in ("fixed-global", "fixed-replica"):
        raise SpecError(f"--batch {text!r}: expected fixed-global or fixed-replica, optionally =N sequences")
    if not number:
        return tr.batch_rule(kind)
    try:
        n = int(number)
    except ValueError:
        n = 0
    if n < 1:
        raise SpecError(f"--batch {text!r}: N={number!r}: expected a whole number of sequences >= 1")
    return tr.batch_rule(kind, n)


def _efficiency_used(spec) -> list[tuple[str, object, bool]]:
    """``(key, value, is_default)`` of the [efficiency] values this plan's step time uses: the
    overlaps of the communication it has, the usable memory, and any override set (see
    :func:`_common.efficiency_items`)."""
    p = spec.plan
    moe = spec.workload.moe is not None and p.ep > 1
    # micro-batches paired to hide it (ep_pair_overlap); combined 1F1B's unpaired warm-up ones
    # and every micro-batch of other schedules use ep_overlap
    pairs = bool(p.combined_1f1b) or p.schedule is tr.Schedule.DUALPIPE
    used = {
        "tp_overlap": p.tp > 1 or p.cp > 1, "ep_overlap": moe and p.schedule is not tr.Schedule.DUALPIPE,
        "ep_pair_overlap": moe and pairs,
        "pp_overlap": p.pp > 1, "dp_overlap": p.dp * p.cp > 1,
        "param_gather_overlap": p.zero_stage in (1, 2) and p.dp * p.cp > 1, "replica_overlap": p.zero_shard_group > 0}
    return c.efficiency_items(spec.efficiency, used, written=spec.efficiency_keys, stack=spec.stack,
                              default_stack=spec.hardware.default_stack)


def _plan_info(plan) -> dict:
    return {"tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep,
            "virtual_stages": plan.virtual_stages, "schedule": plan.schedule.value,
            "global_batch": plan.global_batch, "micro_batch": plan.micro_batch,
            "micro_batches": plan.micro_batches, "zero_stage": plan.zero_stage,
            "recompute": plan.recompute.value, "recompute_layers": plan.recompute_layers,
            "recompute_modules": list(plan.recompute_modules), "optimizer_moments": plan.optimizer_moments.value,
            "precision": plan.precision.value, "fp8_params": bool(plan.fp8_params), "cards": plan.world_size,
            "grad_reduce": plan.grad_reduce.value, "attention_kernel": plan.attention_kernel.value,
            "elementwise": plan.elementwise.value,
            "expert_tp": plan.expert_tp, "ep_dispatch": plan.ep_dispatch.value,
            "expert_routing": plan.expert_routing.value, "ep_dispatch_precision": plan.ep_dispatch_precision.value,
            "combined_1f1b": bool(plan.combined_1f1b), "fp8_recipe": plan.fp8_recipe.value}


def _memory_parts(o: dict) -> str:
    """Where the memory per card goes: weights, gradients, optimizer states, activations."""
    return ", ".join(f"{name} {o[key] / 2**30:.1f} GiB" for name, key in (
        ("weights", "weights_bytes"), ("gradients", "gradients_bytes"), ("optimizer", "optimizer_state_bytes"),
        ("activations", "activations_bytes")))


def _over(used: float, usable: float, hbm: float) -> str:
    """How far a plan is over its usable memory: within the card's HBM (the reserve kept for
    the runtime, allocator and communication buffers eaten into) or beyond it."""
    by = f"{100 * (used / usable - 1):.0f} % over"
    if used <= hbm:
        return f"  (DOES NOT FIT: {by}, within the {hbm / 2**30:.0f} GiB of HBM: tight, it may run)"
    return f"  (DOES NOT FIT: {by}, beyond the {hbm / 2**30:.0f} GiB of HBM)"
