"""S-INF-1..4, S-HW-4, S-SIM-2 and the 99.95 % inference availability target (Sim2Infer availability).

The target is read as the share of requests served (lost requests / offered); each row's
note also gives the time with no request lost (strictest) and the time with capacity >=
demand (P(C >= D)).

Mechanism: a fleet of prefill and decode instances of DeepSeek-V3 (models/inference/*.toml),
each instance on E cards; any card fault takes its instance down (S-HW-4); recovery tiers
(traffic switch, fast in-instance restart, token-level retry, reduced-card elastic
continuation, hardware repair) each with a duration, a coverage and a fall-back. The
fleet's CTMC over instance counts gives the SLO availability (no request lost), served
throughput, lost and retried requests and downtime. The service needs both pools; they
are taken as independent (separate spare pools), so their availabilities multiply.

The ladder rows use an unlimited spare pool (product form, exact); the model files' finite
pools are checked on the count chain for the full ladder of the 8-GPU file.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from _common import file_inputs, path  # noqa: E402

from markovsim import MINUTE  # noqa: E402
from markovsim import inference as inf  # noqa: E402
from markovsim.repro import ModelValue, Sweep, assumed, cited, sweep  # noqa: E402

IDS = ["S-HW-4", "S-INF-1", "S-INF-2", "S-INF-3", "S-INF-4", "S-SIM-2", "INF-TARGET"]

_FILES = {"CloudMatrix384": "models/inference/deepseek_v3_cloudmatrix384.toml",
          "8-GPU nodes": "models/inference/deepseek_v3_8gpu.toml"}
_ORDER = (inf.Tier.TRAFFIC_SWITCH, inf.Tier.FAST_RESTART, inf.Tier.TOKEN_RETRY, inf.Tier.ELASTIC)
_LABEL = {(): "no tier (slow restart, traffic stays routed)",
          _ORDER[:1]: "+ traffic switch (S-INF-1)",
          _ORDER[:2]: "+ fast in-instance restart (S-INF-2)",
          _ORDER[:3]: "+ token-level retry (S-INF-3)",
          _ORDER[:4]: "+ reduced-card elastic (S-INF-4)"}


def _unlimited(fleet):
    return dataclasses.replace(fleet, spare_cards=None)


def _both(a, b):
    """Unavailability of a service that needs two independent parts."""
    return a + b - a * b


def _service(model, tiers):
    """Prefill and decode results and the service's request unavailability (independent pools)."""
    p = inf.analyze_independent_fleet(_unlimited(model.prefill), tiers)
    d = inf.analyze_independent_fleet(_unlimited(model.decode), tiers)
    return p, d, _both(p.request_unavailability, d.request_unavailability)


def run(out_dir: Path) -> list[ModelValue]:
    out: list[ModelValue] = []
    models = {k: inf.load_inference_model(path(f)) for k, f in _FILES.items()}
    cm = models["CloudMatrix384"]
    cm_inputs = file_inputs(_FILES["CloudMatrix384"])

    out.append(ModelValue(key="S-SIM-2", model=None, unit="1",
                          note="operator-level performance prediction is not modelled: the inference model covers "
                               "availability, with throughput from a memory-bound decode model."))

    # S-HW-4: blast radius grows with the instance
    sizes = (16, 32, 64, 160)

    def unavailability(cards_per_instance):
        fleet = dataclasses.replace(_unlimited(cm.decode), cards_per_instance=cards_per_instance)
        return inf.analyze_independent_fleet(fleet, cm.tiers.only()).slo_unavailability

    unav = [unavailability(e) for e in sizes]
    out.append(ModelValue(
        key="S-HW-4", model=unav[-1] / unav[0], unit="x",
        quantity="fleet SLO unavailability with 160-NPU decode instances / with 16-NPU ones, no recovery tier",
        inputs=cm_inputs, sweep=sweep(lambda cards_per_instance: unavailability(cards_per_instance) / unav[0],
                                          cards_per_instance=sizes),
        note=(f"any card fault stops its instance: decode instance MTBF 1/(E lambda) = "
              f"{1.0 / cm.decode.instance_fault_rate / 3600:.1f} h for 160 NPUs against "
              f"{1.0 / cm.prefill.instance_fault_rate / 3600:.0f} h for a 16-NPU prefill instance, at a fixed card "
              f"fault rate and a fleet of {cm.decode.instances} instances.")))

    # the ladder on both platforms
    ladder = {}
    for name, model in models.items():
        ladder[name] = [(_ORDER[:i], *_service(model, model.tiers.only(*_ORDER[:i]))) for i in range(len(_ORDER) + 1)]
    for name, key in (("CloudMatrix384", "INF-TARGET/cloudmatrix384"), ("8-GPU nodes", "INF-TARGET/8gpu")):
        steps = ladder[name]
        on, p, d, u = steps[-1]
        slo = 1.0 - _both(p.slo_unavailability, d.slo_unavailability)
        out.append(ModelValue(
            key=key, model=1.0 - u, unit="1", quantity=f"{name} service, requests served, full ladder",
            inputs=file_inputs(_FILES[name]),
            sweep=Sweep(("tiers on",), tuple((_LABEL[s[0]],) for s in steps), tuple(1.0 - s[3] for s in steps)),
            note=(f"full ladder: requests served {1.0 - u:.5%} (decode {d.request_availability:.5%}, prefill "
                  f"{p.request_availability:.5%}); time with no request lost {slo:.5%}; SLO downtime "
                  f"{(d.downtime_per_month + p.downtime_per_month) / MINUTE:.1f} min/month; served "
                  f"{d.served_tokens_per_s / 1e6:.3f} of {models[name].decode_demand_tokens_per_s / 1e6:.3f} M tokens/s. "
                  f"The target ({models[name].target:.2%}) is {'met' if 1.0 - u >= models[name].target else 'not met'} "
                  "under the file's assumptions.")))

    cm_l = ladder["CloudMatrix384"]
    out.append(ModelValue(
        key="S-INF-1", model=cm_l[2][3], unit="1",
        quantity="share of requests lost on the CloudMatrix384 service with the three tiers (switch, fast restart, "
                 "token retry)",
        inputs=cm_inputs, sweep=Sweep(("tiers on",), tuple((_LABEL[s[0]],) for s in cm_l[:4]),
                                      tuple(s[3] for s in cm_l[:4])),
        note=("each tier is a branch of the instance chain with its duration, coverage and fall-back; the switch "
              "turns an instance outage into a capacity loss, so it buys the most while the fleet keeps N+1 "
              "headroom.")))

    # S-INF-2: 20 min -> 5 min, what it buys when traffic is not switched
    slow = inf.analyze_independent_fleet(_unlimited(cm.decode), cm.tiers.only())
    fast = inf.analyze_independent_fleet(_unlimited(cm.decode), dataclasses.replace(
        cm.tiers.only(inf.Tier.FAST_RESTART), fast_restart=inf.FastRestart(cm.tiers.fast_restart.restart_time, 1.0)))
    out.append(ModelValue(
        key="S-INF-2", model=slow.slo_unavailability / fast.slo_unavailability, unit="x",
        quantity="decode-fleet SLO downtime, slow (20 min) over fast (5 min) restart, no traffic switch",
        inputs=cm_inputs,
        note=(f"{slow.downtime_per_month / MINUTE:.0f} -> {fast.downtime_per_month / MINUTE:.0f} min/month on the "
              "CloudMatrix384 decode fleet while traffic stays routed to the dead instance; with the switch and "
              "N+1 headroom the restart time hardly matters (INF-TARGET rows).")))

    # S-INF-3: token-level retry
    out.append(ModelValue(
        key="S-INF-3/stall", model=[cm_l[2][2].requests_lost_per_day, cm_l[3][2].requests_lost_per_day],
        unit="requests/day", quantity="decode requests lost per day without / with token-level retry (45-s stall)",
        inputs=cm_inputs,
        note=(f"a covered soft fault holds its requests for the stall and retries them "
              f"({cm_l[3][2].requests_retried_per_day:.3g} retried a day) instead of losing the in-flight batch.")))
    retry = 10.0
    usual_min = np.linspace(5.0, 20.0, 31)
    out.append(ModelValue(
        key="S-INF-3/kv-ratio", model=cm.tiers.restart.restart_time / retry, unit="x",
        quantity="in-instance restart without fast restart (the usual way) / token-level retry",
        inputs=[cited("token-level retry of a KV-cache fault", retry, "s", "S-INF-3 'under 10 seconds'"),
                cited("usual instance recovery", "20 min (5 to 20 min)", "min",
                      "S-INF-2: 20 min before, 5 min after the fast restart")],
        sweep=sweep(lambda usual: usual * MINUTE / retry, usual=tuple(float(x) for x in usual_min)),
        note="1/60 of the usual time is 10 min for a 10-s retry: inside S-INF-2's 5-20 min."))

    # S-INF-4: reduced-card elastic continuation
    e3, e4 = cm_l[3][2], cm_l[4][2]
    out.append(ModelValue(
        key="S-INF-4", model=[e3.slo_unavailability, e4.slo_unavailability], unit="1",
        quantity="decode SLO unavailability without / with reduced-card elastic continuation",
        inputs=cm_inputs,
        note=(f"experts migrate off the failed NPU in 10 s (requests held) and the instance serves at "
              f"{(cm.decode.cards_per_instance - 1) / cm.decode.cards_per_instance:.2%} of full until a spare is "
              "hot-added; coverage 0.5 is an assumption, S-INF-4 being work in progress.")))

    # the cheapest fleet reaching the target, per ladder
    target = cm.target
    frontier = {}
    for i in (1, 3, 4):
        on = _ORDER[:i]
        frontier[on] = inf.cheapest_fleet(
            cm.decode_demand_tokens_per_s, cm.candidate_sizes, cm.tiers.only(*on), serving=cm.serving,
            card_fault_rate=cm.decode.card_fault_rate, soft_fault_share=cm.decode.soft_fault_share,
            target=target, extra_instances=3, output_tokens_per_request=cm.output_tokens_per_request,
            measure=inf.Measure.REQUESTS)
    best = {on: min((p for p in pts if p.meets_target), key=lambda p: p.cards, default=None)
            for on, pts in frontier.items()}
    full_best = best[_ORDER[:4]]
    g = models["8-GPU nodes"]
    fin = inf.analyze_fleet(g.decode, g.tiers, max_recovering=3)
    unl = ladder["8-GPU nodes"][4][2]
    out.append(ModelValue(
        key="INF-TARGET/cheapest-fleet", unit="1",
        model=max(p.availability for p in frontier[_ORDER[:4]]) if full_best is None else full_best.availability,
        quantity="requests served by the cheapest CloudMatrix384 decode fleet that reaches the target, full ladder",
        inputs=cm_inputs + [assumed("search", f"sizes {list(cm.candidate_sizes)} NPUs, up to 3 extra instances",
                                    "", "the file's candidate sizes")],
        note=("; ".join(f"{_LABEL[on]}: " + (f"E={b.cards_per_instance} NPUs x {b.instances} = {b.cards} NPUs"
                                             if b else "none within +3 instances") for on, b in best.items())
              + f". Finite spare pool check (8-GPU decode, {g.decode.spare_cards} spare GPUs, count chain of "
              f"{fin.states} states): requests lost {fin.request_unavailability:.3e} against "
              f"{unl.request_unavailability:.3e} with an unlimited pool.")))

    _plot(out_dir, frontier, ladder, sizes, unav, target)
    return out


def _plot(out_dir, frontier, ladder, sizes, unav, target):
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for on, pts in frontier.items():
        ax[0].plot([p.cards_per_instance for p in pts], [p.cards for p in pts], "o-",
                   label=_LABEL[on] + " (hollow: below target)")
        for p in pts:
            if not p.meets_target:
                ax[0].plot(p.cards_per_instance, p.cards, "o", mfc="white", mec="k")
    ax[0].set(xlabel="NPUs per decode instance", ylabel="NPUs for the fleet (cheapest found)",
              title="Cost frontier, 99.95 % of requests (CloudMatrix384)")
    ax[0].legend(fontsize=6)
    for name, steps in ladder.items():
        ax[1].semilogy(range(len(steps)), [s[3] for s in steps], "o-", label=name)
    ax[1].axhline(1 - target, color="k", ls=":", label="99.95 % target")
    ax[1].set(xticks=range(5), xticklabels=["none", "+switch", "+fast", "+retry", "+elastic"],
              ylabel="share of requests lost", title="Each tier's contribution")
    ax[1].legend(fontsize=7)
    ax[2].loglog(sizes, unav, "o-")
    ax[2].set(xlabel="NPUs per decode instance", ylabel="SLO unavailability (no tier)",
              title="Blast radius (S-HW-4)")
    fig.tight_layout()
    fig.savefig(Path(out_dir) / "inference_tiers.png", dpi=110)
    plt.close(fig)
