"""S-INF-1..4, S-HW-4 and the 99.95 % inference availability target (Sim2Infer availability).

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
pools are checked on the count chain for the full ladder of the 8-GPU file, where they
change the figure by less than the note says.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from markovsim import HOUR, MINUTE  # noqa: E402
from markovsim import inference as inf  # noqa: E402
from markovsim.repro import Input, Row  # noqa: E402

IDS = ["S-HW-4", "S-INF-1", "S-INF-2", "S-INF-3", "S-INF-4", "INF-TARGET"]

_ROOT = Path(__file__).resolve().parent.parent / "models" / "inference"
_FILES = {"CloudMatrix384": "deepseek_v3_cloudmatrix384.toml", "8-GPU nodes": "deepseek_v3_8gpu.toml"}
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
    p = inf.analyse_independent_fleet(_unlimited(model.prefill), tiers)
    d = inf.analyse_independent_fleet(_unlimited(model.decode), tiers)
    return p, d, _both(p.request_unavailability, d.request_unavailability)


def _inputs(model, file):
    t = model.tiers
    src = f"models/inference/{file}"
    return [
        Input("card fault rate", model.decode.card_fault_rate * HOUR, "1/h", f"{src} [faults] (S-MTBF-5 / S-MTBF-2, derived)"),
        Input("soft fault share", model.decode.soft_fault_share, "1", "assumption: no published split"),
        Input("decode cards per instance", model.decode.cards_per_instance, "cards", f"{src} [decode] (arXiv 2412.19437 EP320)"),
        Input("decode instances / demand", f"{model.decode.instances} / {model.decode.demand:.2f}", "instances",
              "assumption: N+1 over a stated demand"),
        Input("slow restart", t.restart.restart_time / MINUTE, "min", "S-INF-2 (before)"),
        Input("fast restart", t.fast_restart.restart_time / MINUTE, "min", "S-INF-2 (after); coverage 0.9 assumption"),
        Input("token retry stall", t.token_retry.stall_time, "s", "S-INF-3 (30-60 s); coverage 0.9 assumption"),
        Input("traffic switch", t.traffic_switch.switch_time, "s", "public_inputs 'Detection 1 min'; coverage 0.95 assumption"),
        Input("elastic migration", t.elastic.migration_time, "s", "S-INF-4 'seconds'; coverage 0.5 assumption (work in progress)"),
    ]


def _switch_time_for(model, target):
    """The automatic switch time that brings the full ladder to ``target`` (bisection), or None."""
    def avail(sw):
        tiers = dataclasses.replace(model.tiers, traffic_switch=dataclasses.replace(model.tiers.traffic_switch, switch_time=sw))
        return 1.0 - _service(model, tiers)[2]
    lo, hi = 0.5, model.tiers.traffic_switch.switch_time
    if avail(lo) < target:
        return None
    for _ in range(30):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if avail(mid) >= target else (lo, mid)
    return lo


def run(out_dir: Path) -> list[Row]:
    rows: list[Row] = []
    models = {k: inf.load_inference_model(_ROOT / f) for k, f in _FILES.items()}
    cm = models["CloudMatrix384"]
    cm_inputs = _inputs(cm, _FILES["CloudMatrix384"])

    # ---- S-HW-4: blast radius grows with the instance
    d_mtbf = cm.decode.validate() and 1.0 / cm.decode.instance_fault_rate / HOUR
    p_mtbf = 1.0 / cm.prefill.instance_fault_rate / HOUR
    bare = cm.tiers.only()
    sizes = [16, 32, 64, 160]
    unav = []
    for E in sizes:
        fl = dataclasses.replace(_unlimited(cm.decode), cards_per_instance=E)
        unav.append(inf.analyse_independent_fleet(fl, bare).slo_unavailability)
    ratio = unav[-1] / unav[0]
    rows.append(Row(
        id="S-HW-4", quantity="decode instance MTBF on CloudMatrix384 (160 NPUs, any card fault stops it)",
        reported="whole decode instance down on any single fault", model=d_mtbf, unit="h", tolerance=None,
        status="explained", inputs=cm_inputs[:3],
        note=(f"blast radius = the instance: MTBF 1/(E lambda) = {d_mtbf:.1f} h for a 160-NPU decode instance "
              f"against {p_mtbf:.0f} h for a 16-NPU prefill instance; with no recovery tier the fleet's SLO "
              f"unavailability grows {ratio:.1f}x from 16- to 160-NPU instances at a fixed card fault rate "
              f"(fleet of {cm.decode.instances} instances). The mechanism is the claim itself; the figure is its consequence.")))

    # ---- the ladder on both platforms: what each tier reaches (INF-TARGET rows)
    target = cm.target
    ladder = {}
    for name, model in models.items():
        ladder[name] = []
        for i in range(len(_ORDER) + 1):
            on = _ORDER[:i]
            p, d, u = _service(model, model.tiers.only(*on))
            ladder[name].append((on, p, d, u))
    for name, model in models.items():
        ins = _inputs(model, _FILES[name])
        for on, p, d, u in ladder[name]:
            a = 1.0 - u
            full = len(on) == len(_ORDER)
            slo = 1.0 - _both(p.slo_unavailability, d.slo_unavailability)
            cap = d.capacity_availability * p.capacity_availability
            note = (f"requests served {a:.5%} (decode {d.request_availability:.5%}, prefill "
                    f"{p.request_availability:.5%}); time with no request lost {slo:.5%}; time with capacity >= "
                    f"demand {cap:.5%}; SLO downtime "
                    f"{(d.downtime_per_month + p.downtime_per_month) / MINUTE:.1f} min/month; decode lost "
                    f"{d.requests_lost_per_day:.3g} and retried {d.requests_retried_per_day:.3g} requests/day; "
                    f"served {d.served_tokens_per_s / 1e6:.3f} of {model.decode_demand_tokens_per_s / 1e6:.3f} M tokens/s")
            if not full:
                status = "explained"
                note = f"partial ladder ({'meets' if a >= target else 'below'} target): " + note
            elif a >= target:
                status = "explained"
                note = "full ladder meets the target under the stated assumptions: " + note
            else:
                sw = _switch_time_for(model, target)
                status = "inconsistent"
                need = (f"it would need the automatic traffic switch within {sw:.0f} s instead of "
                        f"{model.tiers.traffic_switch.switch_time:.0f} s" if sw else "no switch time reaches it")
                note = (f"with the stated inputs the full ladder stays below 99.95 % of requests served: {need} "
                        f"(or other instance sizes, see the frontier row): " + note)
            rows.append(Row(id="INF-TARGET", quantity=f"{name} service, requests served, {_LABEL[on]}",
                            reported=target, model=a, unit="1", tolerance=None, status=status, inputs=ins, note=note))

    # ---- S-INF-1: the three tiers
    cm_l = ladder["CloudMatrix384"]
    rows.append(Row(
        id="S-INF-1", quantity="three inference tiers (switch instance / restart in instance / lossless in instance)",
        reported="three tiers", model=f"{cm_l[0][3]:.3%} -> {cm_l[1][3]:.3%} -> {cm_l[2][3]:.3%} -> {cm_l[3][3]:.3%} lost",
        unit="share of requests lost", tolerance=None, status="explained", inputs=cm_inputs,
        note=("each tier is a branch of the instance chain with its duration, coverage and fall-back; on the "
              "CloudMatrix384 fleet the service unavailability falls as the three tiers are added in turn "
              "(switch, fast restart, token-level retry). The switch turns an instance outage into a capacity "
              "loss, so it buys the most while the fleet keeps N+1 headroom.")))

    # ---- S-INF-2: 20 min -> 5 min, what it buys when traffic is not switched
    noswitch = [inf.analyse_independent_fleet(_unlimited(cm.decode), cm.tiers.only()),
                inf.analyse_independent_fleet(_unlimited(cm.decode), dataclasses.replace(
                    cm.tiers.only(inf.Tier.FAST_RESTART), fast_restart=inf.FastRestart(cm.tiers.fast_restart.restart_time, 1.0)))]
    gain = noswitch[0].slo_unavailability / noswitch[1].slo_unavailability
    rows.append(Row(
        id="S-INF-2", quantity="SLO downtime ratio, slow (20 min) vs fast (5 min) restart, no traffic switch",
        reported=4.0, model=gain, unit="x", tolerance=0.2, status="explained",
        inputs=cm_inputs[:6],
        note=(f"the 20 -> 5 min restart is an input (S-INF-2), so this is not an independent reproduction; the "
              f"row shows that the 4x carries over to fleet downtime "
              f"({noswitch[0].downtime_per_month / MINUTE:.0f} -> {noswitch[1].downtime_per_month / MINUTE:.0f} min/month "
              "on the CloudMatrix384 decode fleet) only while traffic stays routed to the dead instance; with the "
              "switch and N+1 headroom the restart time hardly matters (compare the INF-TARGET rows).")))

    # ---- S-INF-3: token-level retry; consistency of its two quotes with S-INF-2
    usual = 10.0 * 60
    rows.append(Row(
        id="S-INF-3", quantity="industry-usual recovery implied by '<10 s, 1/60 of usual' (KV-cache faults)",
        reported="5-20 min (S-INF-2 restart range)", model=usual / MINUTE, unit="min", tolerance=None,
        status="reproduced" if 5 <= usual / MINUTE <= 20 else "inconsistent",
        inputs=[Input("token retry of HBM KV-cache faults", 10, "s", "S-INF-3"), Input("ratio", 60, "x", "S-INF-3")],
        note="10 s x 60 = 10 min lies inside the 5-20 min in-instance restart of S-INF-2: the two claims agree."))
    t3 = ladder["CloudMatrix384"]
    rows.append(Row(
        id="S-INF-3", quantity="decode requests lost per day: without vs with token-level retry (30-60 s stall)",
        reported="request stream survives", model=f"{t3[2][2].requests_lost_per_day:.3g} -> {t3[3][2].requests_lost_per_day:.3g}",
        unit="requests/day", tolerance=None, status="explained", inputs=cm_inputs,
        note=(f"a covered soft fault holds its requests for the stall and retries them "
              f"({t3[3][2].requests_retried_per_day:.3g} retried/day) instead of losing the in-flight batch "
              "and the minute before the switch; the 45 s stall is the S-INF-3 midpoint (an input).")))

    # ---- S-INF-4: reduced-card elastic continuation
    e4 = t3[4][2]
    deg = (cm.decode.cards_per_instance - 1) / cm.decode.cards_per_instance
    rows.append(Row(
        id="S-INF-4", quantity="decode SLO unavailability without vs with reduced-card elastic continuation",
        reported="recovery in seconds (work in progress)", model=f"{t3[3][2].slo_unavailability:.3e} -> {e4.slo_unavailability:.3e}",
        unit="1", tolerance=None, status="explained", inputs=cm_inputs,
        note=(f"experts migrate off the failed NPU in 10 s (requests held) and the instance serves at "
              f"{deg:.2%} of full until a spare is hot-added; coverage 0.5 is an assumption since S-INF-4 "
              "is unpublished work in progress. Without N+1 headroom a degraded instance sheds load until "
              "it is re-integrated, so the tier helps only where the fleet absorbs 1/E of an instance.")))

    # ---- frontier: instance size and headroom reaching the target at least cost, per ladder
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
    desc = "; ".join(f"{_LABEL[on]}: " + (f"E={b.cards_per_instance} NPUs x {b.instances} = {b.cards} NPUs"
                                          if b else "none within +3 instances") for on, b in best.items())
    rows.append(Row(
        id="INF-TARGET", quantity="cheapest CloudMatrix384 decode fleet reaching 99.95 % (size x instances)",
        reported=target, model=full_best.availability if full_best else float("nan"), unit="1",
        tolerance=None, status="explained" if full_best else "inconsistent", inputs=cm_inputs,
        note=(f"search over instance sizes {list(cm.candidate_sizes)} NPUs and up to 3 extra instances, "
              f"unlimited spare pool, decode throughput from the memory-bound model, target on requests served: "
              f"{desc}. Measured as time with no request lost, no size reaches 99.95 % with a 1-min switch: "
              "every fault's unswitched minute counts in full whatever the instance size, so that measure "
              "follows the number of cards (faults), not the blast radius.")))

    # ---- finite spare pool check (8-GPU decode, full ladder, count chain)
    g = models["8-GPU nodes"]
    fin = inf.analyse_fleet(g.decode, g.tiers, max_recovering=3)
    unl = ladder["8-GPU nodes"][4][2]
    rows[-1] = dataclasses.replace(rows[-1], note=rows[-1].note + (
        f" Finite pool check (8-GPU decode, {g.decode.spare_cards} spare GPUs, 72 h repair, count chain of "
        f"{fin.states} states): requests lost {fin.request_unavailability:.3e} against {unl.request_unavailability:.3e} "
        "with an unlimited pool."))

    _plot(out_dir, frontier, ladder, sizes, unav, target)
    return rows


def _plot(out_dir, frontier, ladder, sizes, unav, target):
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for on, pts in frontier.items():
        ax[0].plot([p.cards_per_instance for p in pts], [p.cards for p in pts], "o-",
                   label=_LABEL[on] + " (hollow: misses target)")
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
