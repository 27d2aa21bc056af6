"""``markovsim plan``: the fastest parallel plans for a workload on N cards (top k, filtered)."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap

import numpy as np

from .._errors import SpecError
from .._lazy import lazy_module
from . import _common as c

tr = lazy_module("markovsim.training")  # imported when the command runs, not for every command
HELP = "search parallel plans: the k fastest valid plans for a workload on N cards, with filters"
_FILTERS = ("tp", "pp", "ep", "cp", "zero")
#: ``markovsim.training.Schedule`` / ``Recompute`` values for the parser's choices (held equal
#: by tests/test_speed_paths.py; written out so that building the parser imports no domain package)
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe")
RECOMPUTES = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp8")
#: ``markovsim.training.SOFTWARE_STACKS`` names (held equal by tests/test_speed_paths.py)
STACKS = ("default", "megatron-core", "megatron-lm-2021")
#: ``markovsim.training.Elementwise`` values (held equal by tests/test_speed_paths.py)
ELEMENTWISE = ("fused", "eager")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plan", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Every candidate plan (TP, PP, virtual stages, EP, CP, micro-batch, ZeRO stage,
            recomputation, schedule) of a workload on N cards, checked for validity and HBM fit
            and evaluated in one vectorised pass (markovsim.training.candidate_plans and
            evaluate_plans, the search behind markovsim.training.search_plans); the k fastest
            that pass the filters are listed. Workload, hardware, cards, global batch and
            efficiency come from a plan file, or from the options. The numerics are held, not
            searched: GEMM precision, FP8 weights, attention kernel and the gradient and
            Adam-moment formats and the element-wise operators are the plan file's
            (--precision and --elementwise change them), else BF16 with flash attention, FP32
            gradients and moments and fused element-wise kernels. --plot draws the step
            time of the k plans."""),
        epilog="example: markovsim plan pangu_ultra_135b_8k --top 5 --schedule interleaved")
    p.add_argument("model", metavar="PLAN.toml", nargs="?",
                   help="a plan file (or bare name in models/plans/) whose workload, hardware, cards, "
                        "global batch and efficiency to use")
    p.add_argument("--workload", help="workload file or bare name in models/workloads/")
    p.add_argument("--hardware", help="hardware file or bare name in models/hardware/")
    p.add_argument("--cards", type=int, metavar="N", help="cards (default: the plan file's)")
    p.add_argument("--global-batch", type=int, metavar="B", help="sequences per step (default: the plan file's)")
    p.add_argument("--top", type=int, default=10, metavar="K", help="how many plans to list (default 10)")
    p.add_argument("--schedule", action="append", choices=SCHEDULES, type=str.lower,
                   help="keep only these pipeline schedules (repeatable)")
    p.add_argument("--recompute", action="append", choices=RECOMPUTES, type=str.lower,
                   help="keep only these recomputation settings (repeatable)")
    for name in _FILTERS:
        p.add_argument(f"--{name}", type=int, metavar="N", help=f"keep only plans with {name} = N")
    p.add_argument("--precision", choices=PRECISIONS, type=str.lower,
                   help="GEMM precision of every candidate (default: the plan file's, else bf16)")
    p.add_argument("--elementwise", choices=ELEMENTWISE, type=str.lower,
                   help="how every candidate's element-wise operators run: fused (Megatron, Transformer Engine, "
                        "torch.compile) or eager (PyTorch eager mode; default: the plan file's, else fused)")
    p.add_argument("--stack", choices=STACKS, type=str.lower,
                   help="the communication overlaps of a software stack for every candidate, over the plan "
                        "file's (default: the plan file's [efficiency], the overlaps it does not write from the "
                        "hardware's default_stack)")
    p.add_argument("--max-tp", type=int, default=8, metavar="N", help="largest tensor-parallel degree (default 8)")
    p.add_argument("--max-pp", type=int, default=64, metavar="N", help="largest pipeline degree (default 64)")
    c.add_common(p)
    return p


def _inputs(args):
    """(workload, hardware, cards, global batch, efficiency, changes) from a plan file and options."""
    changes = c.overrides(args.sets)
    spec = None
    if args.model is not None:
        spec, _, changes = c.load(args.model, tr.MODEL_KIND, tr.plan_from_document, args.sets)
    elif changes:
        raise SpecError("--set needs a plan file (the document the keys are paths into)")

    def pick(option, attr, load, what):
        if option is not None:
            return load(option)
        if spec is None:
            raise SpecError(f"no {what} given: pass a plan file or --{what.replace('_', '-')}")
        return attr(spec)

    workload = pick(args.workload, lambda s: s.workload, tr.load_workload, "workload")
    hardware = pick(args.hardware, lambda s: s.hardware, tr.load_hardware, "hardware")
    cards = pick(args.cards, lambda s: s.plan.world_size, int, "cards")
    batch = pick(args.global_batch, lambda s: s.plan.global_batch, int, "global_batch")
    efficiency = spec.efficiency if spec is not None else tr.Efficiency()
    written = spec.efficiency_keys if spec is not None else frozenset()
    stack = spec.stack if spec is not None else ""
    if args.stack is not None:
        overlaps = tr.SOFTWARE_STACKS[args.stack]["overlaps"]
        efficiency = efficiency.with_stack(args.stack)  # every overlap a stack sets, the file's too
        written, stack = written | set(overlaps) | {"stack"}, args.stack
    if not stack:
        # no stack named: the overlaps not written are the hardware's default_stack's (again,
        # where --hardware replaced the file's)
        efficiency = efficiency.with_stack(hardware.default_stack, written)
    numerics = spec.plan if spec is not None else tr.Plan(tp=1, pp=1, dp=1, global_batch=1)  # the defaults
    if args.precision is not None:
        numerics = numerics.replace(precision=tr.Precision(args.precision),
                                    fp8_params=numerics.fp8_params and args.precision == "fp8",
                                    ep_dispatch_precision=(numerics.ep_dispatch_precision if args.precision == "fp8"
                                                           else tr.Precision.BF16))
    if args.elementwise is not None:
        numerics = numerics.replace(elementwise=tr.Elementwise(args.elementwise))
    return workload, hardware, cards, batch, efficiency, changes, numerics, (written, stack)


def _numerics_text(numerics, workload_moe=None) -> str:
    n = tr.plan_numerics(numerics)
    fp8 = tr.Precision(n['precision']) is tr.Precision.FP8
    return (f"{tr.Precision(n['precision']).value} GEMMs" + (" with FP8 weights" if n["fp8_params"] else "")
            + (f" ({tr.FP8Recipe(n['fp8_recipe']).value} scaling)" if fp8 else "")
            + f", {tr.AttentionKernel(n['attention_kernel']).value} attention"
            + (", eager element-wise operators" if tr.Elementwise(n['elementwise']) is tr.Elementwise.EAGER else "")
            + ", gradients reduced in "
            f"{tr.Precision(n['grad_reduce']).value}, Adam moments in {tr.Precision(n['optimizer_moments']).value}"
            + ("" if workload_moe is None else
               f", {tr.EPDispatch(n['ep_dispatch']).value} expert dispatch in "
               f"{tr.Precision(n['ep_dispatch_precision']).value}"
               + ("" if tr.EPDispatch(n['ep_dispatch']) is tr.EPDispatch.PER_EXPERT else
                  f" ({tr.ExpertRouting(n['expert_routing']).value} routing)")
               + (", combined 1F1B where a plan has expert parallelism and a 1f1b or interleaved schedule"
                  if n["combined_1f1b"] else "")))


def run(args) -> int:
    from ..training._outputs import long_context_caveat, overlap_defaults_caveat
    from ..training._search import NEAR_FIT_EXCESS, near_fit_mask

    if args.top < 1:
        raise SpecError(f"--top {args.top}: expected a number of plans >= 1")
    for name, limit in (("tp", "max_tp"), ("pp", "max_pp")):
        want, most = getattr(args, name), getattr(args, limit)
        if want is not None and want > most:
            raise SpecError(f"--{name} {want}: larger than --{limit.replace('_', '-')} {most}, the largest the search "
                            f"tries; expected --{name} <= {most} (or give --{limit.replace('_', '-')} {want})")
    workload, hardware, cards, batch, efficiency, changes, numerics, held = _inputs(args)
    plans, ok = tr.candidate_plans(workload, cards, global_batch=batch, max_tp=args.max_tp, max_pp=args.max_pp,
                                   numerics=numerics)
    out = {k: np.asarray(v) for k, v in tr.evaluate_plans(workload, hardware, plans, efficiency=efficiency).items()}
    fits = out["fits"].astype(bool)
    keep = ok & fits
    valid, tiled = int(keep.sum()), int(np.asarray(ok).sum())
    passed = np.ones_like(fits)
    if args.schedule:
        passed &= np.isin(plans["sched"], [tr.SCHEDULE_CODES[tr.Schedule(s)] for s in args.schedule])
    if args.recompute:
        passed &= np.isin(plans["rec"], [tr.RECOMPUTE_CODES[tr.Recompute(r)] for r in args.recompute])
    for name in _FILTERS:
        if getattr(args, name) is not None:
            passed &= plans[name] == getattr(args, name)
    keep &= passed
    index = np.flatnonzero(keep)
    usable = efficiency.usable_memory * hardware.hbm_bytes
    near = np.flatnonzero(ok & passed & near_fit_mask(out, usable))
    if index.size == 0:
        raise SpecError(f"no valid plan of {workload.name} on {cards} cards (global batch {batch}) fits in "
                        f"{usable / 2**30:.1f} GiB per card and passes the "
                        f"filters (of {np.asarray(ok).size} candidates {tiled} split the cards, the layers and the "
                        f"global batch validly, {valid} of them fit in memory"
                        + (f"; {near.size} more that pass the filters exceed it by at most "
                           f"{100 * NEAR_FIT_EXCESS:.0f} %, which the memory model can overstate" if near.size else "")
                        + ")")
    best = index[np.argsort(out["step_time"][index], kind="stable")][: args.top]
    caveats = tr.plan_caveats(workload, hardware=hardware, precision=numerics.precision)
    caveats += _kernel_caveat(workload, hardware, efficiency, plans, int(best[0]), numerics.attention_kernel,
                              float(out["step_time"][best[0]]))
    fastest = _fastest_spec(workload, hardware, efficiency, plans, int(best[0]), batch, numerics, held)
    caveats += long_context_caveat(fastest)
    caveats += overlap_defaults_caveat(fastest, float(out["step_time"][best[0]]))
    from ..training._evidence import evidence_for

    evidence = evidence_for(hardware, workload, numerics.precision)
    rows = [_row(plans, out, i) for i in best]
    near_fit = None
    if near.size:
        j = int(near[np.argmin(out["step_time"][near])])
        near_fit = {"count": int(near.size), "excess_at_most": NEAR_FIT_EXCESS, "fastest": _row(plans, out, j),
                    "over_usable": float(out["memory_bytes"][j] / usable)}
    if args.csv:
        c.write_csv(args.csv, tuple(rows[0]), [tuple(r.values()) for r in rows], force=args.force)
    if args.plot:
        def draw(ax):
            from ..plotting import plot_breakdown

            plot_breakdown({f"#{k + 1} {_label(r)}": r["step_time_s"] for k, r in enumerate(rows)}, unit="step time [s]",
                           ax=ax)
            ax.set_title(f"{workload.name} on {cards} cards: the {len(rows)} fastest plans")

        c.save_plot(args.plot, draw, force=args.force)
    if args.json:
        c.print_json({"command": "plan", "workload": workload.name, "hardware": hardware.name, "cards": cards,
                      "global_batch": batch, "overrides": [x.text for x in changes],
                      "numerics": {k: getattr(v, "value", v) for k, v in tr.plan_numerics(numerics).items()},
                      "candidates": int(ok.size), "valid": valid, "after_filters": int(index.size), "plans": rows,
                      "near_fit": near_fit,
                      **c.efficiency_json(_efficiency_held(efficiency, workload, hardware, held)),
                      "caveats": caveats, "evidence": evidence})
        return 0
    print(f"{workload.name} on {cards} x {hardware.name}, global batch {batch}: {ok.size} candidates, "
          f"{valid} valid and fitting, {index.size} after the filters")
    print(f"held, not searched: {_numerics_text(numerics, workload.moe)}")
    print(c.efficiency_text(_efficiency_held(efficiency, workload, hardware, held)))
    print()
    head = ("#", "tp", "pp", "dp", "ep", "cp", "v", "mb", "zero", "schedule", "recompute", "step (s)", "MFU",
            "memory (GiB)")
    body = [(str(k + 1), *(str(r[x]) for x in ("tp", "pp", "dp", "ep", "cp", "virtual_stages", "micro_batch", "zero_stage",
                                                "schedule")), _recompute(r),
             f"{r['step_time_s']:.4f}", c.pct(r["mfu"]), f"{r['memory_bytes'] / 2**30:.1f}") for k, r in enumerate(rows)]
    print(c.table(body, head, right=(0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13)))
    if near_fit is not None:
        print(f"\n{_near_fit_text(near_fit, rows[0])}")
    print(f"\nevidence: {evidence['text']}")
    for note in caveats:
        print(f"\ncaveat: {note}")
    return 0


def _efficiency_held(efficiency, workload, hardware, held) -> list[tuple[str, object, bool]]:
    """The efficiency every candidate is evaluated with: every overlap a candidate can use
    (EP only for a mixture of experts; the replicas' all-reduce only with hybrid sharding,
    which the search does not propose), the usable memory and any override; first the stack
    named, or the hardware's default_stack where it gives an overlap not written."""
    moe = workload.moe is not None
    return c.efficiency_items(efficiency, {"tp_overlap": True, "ep_overlap": moe, "ep_pair_overlap": moe,
                                           "pp_overlap": True, "dp_overlap": True, "param_gather_overlap": True},
                            written=held[0], stack=held[1], default_stack=hardware.default_stack)


def _kernel_caveat(workload, hardware, efficiency, plans: dict, i: int, kernel, step_s: float) -> list[str]:
    """The attention-kernel caveat of ``markovsim train`` for the fastest plan ``i``: its step
    with the other generation of its fused attention kernel, evaluated here."""
    from ..training._plan import ATTENTION_CODES
    from ..training._outputs import attention_kernel_caveat, other_fused_kernel

    other = other_fused_kernel(kernel)
    if other is None:
        return []
    first = {k: np.asarray(v)[i:i + 1] for k, v in plans.items()}
    first["attn"] = np.full(1, float(ATTENTION_CODES[other]))
    alt = float(np.asarray(tr.evaluate_plans(workload, hardware, first, efficiency=efficiency)["step_time"])[0])
    return attention_kernel_caveat(kernel, step_s, alt)


def _fastest_spec(workload, hardware, efficiency, plans: dict, i: int, batch: int, numerics, held):
    """The fastest plan ``i`` as a :class:`~markovsim.training._spec.PlanSpec` (with the
    efficiency keys and the stack the plan file or --stack wrote), for the caveats
    ``markovsim train`` says of a plan file (long context, communication overlap)."""
    from ..training._search import _plan_at
    from ..training._spec import PlanSpec

    return PlanSpec(workload.name, workload, hardware, _plan_at(plans, i, batch, numerics), efficiency, *held)


def _near_fit_text(near: dict, best: dict) -> str:
    """The line under the table about the plans left out for memory by at most
    ``NEAR_FIT_EXCESS`` (``markovsim.training._search``): how many, and the fastest of them
    against plan #1."""
    from ..training._search import PUBLISHED_DENSE_EXCESS, plan_layout

    r = near["fastest"]
    gain = 1.0 - r["step_time_s"] / best["step_time_s"]
    layout = plan_layout(*(r[k] for k in ("tp", "pp", "dp", "ep", "cp", "virtual_stages", "micro_batch", "zero_stage",
                                          "schedule")), _recompute(r))
    return (f"near fits: {near['count']} more valid plans exceed the modelled memory by at most "
            f"{100 * near['excess_at_most']:.0f} % (on published dense runs that ran the model's memory was up to "
            f"{PUBLISHED_DENSE_EXCESS:.2f}x the usable); the fastest, {layout}, "
            f"{100 * (near['over_usable'] - 1):.0f} % over, would take {r['step_time_s']:.4g} s "
            + (f"({100 * gain:.1f} % less than #1)" if gain > 0 else "(no faster than #1)"))


def _row(plans: dict, out: dict, i: int) -> dict:
    schedules = {code: s for s, code in tr.SCHEDULE_CODES.items()}
    recomputes = {code: r for r, code in tr.RECOMPUTE_CODES.items()}
    return {"tp": int(plans["tp"][i]), "pp": int(plans["pp"][i]), "dp": int(plans["dp"][i]),
            "ep": int(plans["ep"][i]), "cp": int(plans["cp"][i]), "virtual_stages": int(plans["v"][i]),
            "micro_batch": int(plans["mb"][i]), "zero_stage": int(plans["zero"][i]),
            "schedule": schedules[int(plans["sched"][i])].value, "recompute": recomputes[int(plans["rec"][i])].value,
            "recompute_layers": int(plans["rec_layers"][i]),
            "recompute_modules": list(tr.plan_modules(plans, i)), "uneven_layers": bool(plans["uneven"][i]),
            "step_time_s": float(out["step_time"][i]),
            "mfu": float(out["mfu"][i]), "tokens_per_s": float(out["tokens_per_s"][i]),
            "memory_bytes": float(out["memory_bytes"][i])}


def _recompute(r: dict) -> str:
    """``full``; for partial recomputation ``full (k per chunk)``; for selective recomputation
    of named modules ``selective (mla_up_proj)``."""
    if r["recompute_layers"]:
        return f"{r['recompute']} ({r['recompute_layers']} per chunk)"
    if r.get("recompute_modules"):
        return f"{r['recompute']} ({', '.join(r['recompute_modules'])})"
    return r["recompute"]


def _label(r: dict) -> str:
    return f"tp{r['tp']} pp{r['pp']} dp{r['dp']} {r['schedule']}"
