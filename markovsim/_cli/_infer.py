"""``markovsim infer``: availability of an inference fleet (prefill and decode pools)."""

from __future__ import annotations

import argparse
import textwrap

from .._lazy import lazy_module
from . import _common as c

inf = lazy_module("markovsim.inference")  # imported when the command runs, not for every command

HELP = "availability of an inference fleet (prefill and decode pools)"
_ROLES = ("decode", "prefill")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "infer", help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            SLO, capacity and request availability, losses and downtime of the prefill and
            decode pools of an inference model file (models/inference/), from
            markovsim.inference.analyze_fleet (finite spare pool: the fleet count chain) or
            analyze_independent_fleet (unlimited pool: product form). --plot draws the
            distribution of serving capacity of each pool."""),
        epilog="example: markovsim infer models/inference/deepseek_v3_8gpu.toml --set decode.instances=5")
    p.add_argument("model", metavar="MODEL.toml", help="inference model file, or a bare name in models/inference/")
    c.add_common(p)
    return p


def run(args) -> int:
    model, path, changes = c.load(args.model, inf.MODEL_KIND, inf.inference_model_from_document, args.sets)
    res = inf.fleet_results(model)
    fl = {r: getattr(model, r) for r in _ROLES}
    layouts = {"prefill": model.prefill_layout, "decode": model.decode_layout}
    if args.csv:
        rows = [(k, v, inf.FLEET_OUTPUT_UNITS.get(k, "1")) for k, v in inf.fleet_outputs(model, res).items()]
        c.write_csv(args.csv, ("output", "value", "unit"), rows, force=args.force)
    if args.plot:
        def draw(axes):
            from ..plotting import plot_distribution

            for ax, role in zip(axes, _ROLES):
                plot_distribution(res[role].capacity_values, res[role].capacity_probabilities, ax=ax,
                                  xlabel="serving capacity (instances)")
                ax.set_title(f"{role}: SLO availability {c.pct(res[role].slo_availability, 3)}")

        c.save_plot(args.plot, draw, force=args.force, panels=2)
    if args.json:
        roles = {}
        for role, r in res.items():
            d = {k: getattr(r, k) for k in r.__dataclass_fields__}
            d.update(instances=fl[role].instances, cards_per_instance=fl[role].cards_per_instance,
                     spare_cards=fl[role].spare_cards, demand_instances=fl[role].demand,
                     meets_target=bool(r.slo_availability >= model.target),
                     method="count chain" if fl[role].spare_cards is not None else "product form")
            roles[role] = d
        c.print_json({"command": "infer", "file": str(path), "name": model.name,
                      "overrides": [o.text for o in changes], "slo_target": model.target,
                      "decode_demand_tokens_per_s": model.decode_demand_tokens_per_s, **roles})
        return 0
    print(f"{model.name}  ({path})")
    for line in c.with_overrides(changes):
        print(line)
    print()

    def row(label, f):
        return (label, *(f(r) for r in _ROLES))

    rows = [
        row("instances x cards", lambda r: f"{fl[r].instances} x {fl[r].cards_per_instance}"),
        row("layout (EP = TP x DP)", lambda r: f"{layouts[r].expert_parallel} = {layouts[r].tensor_parallel} x "
                                               f"{layouts[r].data_parallel}"),
        row("demand (instances)", lambda r: f"{fl[r].demand:.3g}"),
        row("spare cards", lambda r: "unlimited" if fl[r].spare_cards is None else str(fl[r].spare_cards)),
        row("SLO availability", lambda r: c.pct(res[r].slo_availability, 4)),
        row("SLO unavailability", lambda r: f"{res[r].slo_unavailability:.3e}"),
        row("capacity availability", lambda r: c.pct(res[r].capacity_availability, 4)),
        row("request availability", lambda r: c.pct(res[r].request_availability, 4)),
        row("expected capacity (instances)", lambda r: f"{res[r].expected_capacity:.4g}"),
        row("served fraction", lambda r: c.pct(res[r].served_fraction, 4)),
        row("requests retried / day", lambda r: f"{res[r].requests_retried_per_day:.4g}"),
        row("requests lost / day", lambda r: f"{res[r].requests_lost_per_day:.4g}"),
        row("downtime outside SLO / month", lambda r: c.duration(res[r].downtime_per_month)),
        row("instance MTBF", lambda r: c.duration(res[r].instance_mtbf)),
        row(f"meets SLO target {c.pct(model.target)}", lambda r: "yes" if res[r].slo_availability >= model.target
            else "no"),
        row("solved by", lambda r: (f"count chain, {res[r].states} states" if fl[r].spare_cards is not None
                                    else "product form")),
    ]
    print(c.table(rows, ("", *_ROLES), right=(1, 2)))
    print()
    print(f"decode tokens/s served: {res['decode'].served_tokens_per_s:.4g} of "
          f"{model.decode_demand_tokens_per_s:.4g} demanded")
    return 0
