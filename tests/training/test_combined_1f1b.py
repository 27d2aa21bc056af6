"""Megatron-core's combined 1F1B (``plan.combined_1f1b``): the expert all-to-all of the
micro-batches that have a partner hides behind the partner's computation, the warm-up ones'
stays exposed. The exposed time against its closed form (the all-to-all and the computation
taken from the model's own breakdown, the warm-up count from Megatron's schedule formula),
its bounds as a property, the checks of the key, and the plan search carrying it only where
it applies."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._errors import InvalidParameterError, SpecError
from markovsim.training import Efficiency, Plan, Workload, load_hardware, search_plans, step_time, validate_plan
from markovsim.training._spec import plan_from_document
from markovsim.training._workload import MoE

H100 = load_hardware("h100_sxm")


def _moe(layers=8):
    return Workload("c1f1b-test", layers=layers, hidden=2048, ffn_hidden=8192, ffn_kind="swiglu", heads=16,
                    kv_heads=16, vocab=32000, seq_len=4096,
                    moe=MoE(routed_experts=64, shared_experts=0, top_k=8, expert_ffn=768, dense_layers=0))


def _warm_up(pp, v, interleaved):
    """Forwards the first stage runs before its first backward, from Megatron-core's schedules
    (get_forward_backward_func: pp - rank - 1; interleaved (pp - rank - 1) * 2 + (v - 1) * pp),
    rank 0; without a pipeline the first micro-batch's forward has no partner."""
    if pp == 1:
        return 1
    return 2 * (pp - 1) + (v - 1) * pp if interleaved else pp - 1


@pytest.mark.parametrize("pp, v, schedule, pair", [(1, 1, "1f1b", 1.0), (4, 1, "1f1b", 1.0),
                                                   (4, 2, "interleaved", 0.6), (2, 4, "interleaved", 1.0)])
def test_the_exposed_all_to_all_against_its_closed_form(pp, v, schedule, pair):
    w = _moe()
    plan = Plan(tp=1, pp=pp, dp=8, ep=8, global_batch=8 * 16, micro_batch=1, virtual_stages=v, schedule=schedule)
    eff = Efficiency(ep_overlap=0.3, ep_pair_overlap=pair)
    # the all-to-all with nothing hidden, and the computation it can hide behind
    comm = step_time(w, H100, plan, efficiency=Efficiency(ep_overlap=0.0)).ep_exposed
    combined = step_time(w, H100, plan.replace(combined_1f1b=True), efficiency=eff)
    m = plan.micro_batches
    pi = 1.0 - _warm_up(pp, v, schedule == "interleaved") / (m * v)
    # the unpaired warm-up micro-batches hide ep_overlap (0.3) of theirs, the paired ones what the partner covers
    expected = (1 - pi) * 0.7 * comm + pi * max(comm - pair * combined.compute, 0.0)
    assert comm > 0 and pi < 1
    assert combined.ep_exposed == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # without the key ep_overlap hides the same fraction of every micro-batch, ep_pair_overlap none
    assert step_time(w, H100, plan, efficiency=eff).ep_exposed == pytest.approx(0.7 * comm, rel=1e-9)


@pytest.mark.parametrize("pair", [0.0, 0.5, 1.0])
def test_dualpipe_pairs_with_the_same_overlap(pair):
    """DualPipe's pairing is timed with ep_pair_overlap too, max(0, C - o T); ep_overlap,
    the unpaired fraction, plays no part in it."""
    w = _moe()
    plan = Plan(tp=1, pp=4, dp=8, ep=8, global_batch=8 * 16, schedule="dualpipe")
    comm = step_time(w, H100, plan, efficiency=Efficiency(ep_pair_overlap=0.0)).ep_exposed
    for unpaired in (0.0, 0.8):
        b = step_time(w, H100, plan, efficiency=Efficiency(ep_overlap=unpaired, ep_pair_overlap=pair))
        assert b.ep_exposed == pytest.approx(max(comm - pair * b.compute, 0.0), rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(pp=st.sampled_from([1, 2, 4]), mb_per_replica=st.integers(1, 64), pair=st.floats(0.0, 1.0),
       hidden=st.sampled_from([1024, 2048, 4096]))
def test_the_pairing_hides_no_more_than_the_partner_and_exposes_no_more_than_nothing(pp, mb_per_replica, pair,
                                                                                     hidden):
    """Between the two extremes: never below what a perfect pairing of every micro-batch
    leaves, max(0, C - o T), never above the whole all-to-all C."""
    w = dataclasses.replace(_moe(), hidden=hidden)
    plan = Plan(tp=1, pp=pp, dp=8, ep=8, global_batch=8 * mb_per_replica, combined_1f1b=True)
    eff = Efficiency(ep_pair_overlap=pair)
    comm = step_time(w, H100, plan.replace(combined_1f1b=False), efficiency=Efficiency(ep_overlap=0.0)).ep_exposed
    b = step_time(w, H100, plan, efficiency=eff)
    assert max(comm - pair * b.compute, 0.0) - 1e-12 <= b.ep_exposed <= comm * (1 + 1e-12)


def test_a_single_micro_batch_has_no_partner():
    w = _moe()
    plan = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=8, micro_batch=1)
    bare = step_time(w, H100, plan, efficiency=Efficiency(ep_overlap=0.0)).ep_exposed
    assert step_time(w, H100, plan.replace(combined_1f1b=True), efficiency=Efficiency(ep_pair_overlap=1.0)).ep_exposed \
        == pytest.approx(bare, rel=1e-12)


def test_the_key_is_checked():
    w = _moe()
    with pytest.raises(InvalidParameterError, match=r"plan.combined_1f1b=True: .* needs expert parallelism "
                                                    r"\(got ep=1\)"):
        validate_plan(w, Plan(tp=1, pp=2, dp=8, global_batch=64, combined_1f1b=True))
    for schedule in ("gpipe", "dualpipe", "zb-h1"):
        with pytest.raises(InvalidParameterError, match=f"got schedule='{schedule}'.*expected schedule='1f1b' or "
                                                        "'interleaved'"):
            validate_plan(w, Plan(tp=1, pp=2, dp=8, ep=8, global_batch=64, schedule=schedule, combined_1f1b=True))
    with pytest.raises(InvalidParameterError, match="plan.combined_1f1b='yes': expected true or false"):
        validate_plan(w, Plan(tp=1, pp=2, dp=8, ep=8, global_batch=64, combined_1f1b="yes"))
    doc = {"workload": "deepseek_v3", "hardware": "h100_sxm", "tp": 1, "pp": 4, "dp": 64, "ep": 64,
           "virtual_stages": 8, "schedule": "interleaved", "layer_split": "uneven", "global_batch": 512,
           "combined_1f1b": True}
    assert plan_from_document(doc).plan.combined_1f1b is True
    assert plan_from_document({k: v for k, v in doc.items() if k != "combined_1f1b"}).plan.combined_1f1b is False
    with pytest.raises(SpecError, match="combined_1f1b"):
        plan_from_document({**doc, "combined_1f1b": "yes"})


def test_the_search_holds_it_where_it_applies():
    """Held like the numerics: the best plan carries it only with expert parallelism and a
    1F1B or interleaved schedule, and the search's time for it is the single plan's."""
    w = _moe(layers=16)
    eff = Efficiency()  # pairs hide all they can (the default), unpaired micro-batches nothing
    held = Plan(tp=1, pp=1, dp=1, global_batch=1, combined_1f1b=True)
    best = search_plans(w, H100, 64, global_batch=256, efficiency=eff, numerics=held)
    validate_plan(w, best.plan)
    applies = best.plan.ep > 1 and best.plan.schedule.value in ("1f1b", "interleaved")
    assert best.plan.combined_1f1b is applies
    assert best.breakdown.step_time == pytest.approx(step_time(w, H100, best.plan, efficiency=eff).step_time,
                                                     rel=1e-9)
    assert search_plans(w, H100, 64, global_batch=256, efficiency=eff).plan.combined_1f1b is False


def test_markovsim_train_says_it(tmp_path, capsys):
    """The header names the combined 1F1B and --json's plan carries it; a plan file that
    sets it where it cannot apply gets one line naming the key."""
    import json

    from markovsim import _cli

    doc = ('workload = "deepseek_v3"\nhardware = "h100_sxm"\ntp = 1\npp = 4\ndp = 64\nep = 64\nvirtual_stages = 8\n'
           'schedule = "interleaved"\nlayer_split = "uneven"\nglobal_batch = 512\ncombined_1f1b = true\n'
           '[efficiency]\ndp_overlap = 0.9\n')
    path = tmp_path / "c1f1b.toml"
    path.write_text(doc)
    assert _cli.main(["train", str(path)]) == 0
    out = capsys.readouterr().out
    assert "; expert dispatch per-expert in bf16, combined 1F1B" in out
    assert "ep_overlap 0, ep_pair_overlap 1" in out  # the warm-up's share and the pairing's, both used
    assert _cli.main(["train", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan"]["combined_1f1b"] is True
    path.write_text(doc.replace('schedule = "interleaved"', 'schedule = "gpipe"').replace("virtual_stages = 8\n", ""))
    assert _cli.main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "combined_1f1b=True" in err and "got schedule='gpipe'" in err and len(err.strip().splitlines()) == 1


def test_the_caveat_says_what_the_published_run_shows():
    """The caveat said under a combined-1F1B plan quotes the one published run with it
    (Qwen3-235B on 256 H100, Megatron-Bridge 26.02): the model's error (+32 %) and how much
    more of the all-to-all the model hides than the run did (about twice), recomputed here
    from the case; the plan's own numbers are computed."""
    from pathlib import Path

    from markovsim.training._calibrate import predict, runs_from_cases
    from markovsim.training._outputs import COMBINED_1F1B_CAVEAT, PAIRING_NO_OVERLAP, plan_caveats

    suite = Path(__file__).resolve().parents[2] / "models" / "cases" / "gpu_training_runs.toml"
    runs = [r for r in runs_from_cases(suite, role="holdout") if r.spec.plan.combined_1f1b]
    assert [r.name.split(" [")[0] for r in runs] == ["Megatron-Bridge 26.02: Qwen3-235B-A22B on 256 H100, FP8"]
    run = runs[0]
    spec = run.spec
    error = predict(run) / run.value - 1
    assert f"+{round(100 * error)} % fast" in COMBINED_1F1B_CAVEAT
    tokens = spec.plan.global_batch * spec.workload.seq_len
    measured = tokens / (run.value * spec.plan.world_size)  # the run's step, s
    paired = step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency).step_time
    exposed = step_time(spec.workload, spec.hardware, spec.plan.replace(combined_1f1b=False),
                        efficiency=dataclasses.replace(spec.efficiency, ep_overlap=0.0)).step_time
    assert paired < measured < exposed
    assert round((exposed - paired) / (exposed - measured)) == 2 and "about twice" in COMBINED_1F1B_CAVEAT
    said = [n for n in plan_caveats(spec) if n.startswith("combined 1F1B")]
    assert said == [COMBINED_1F1B_CAVEAT.format(hidden=exposed - paired, paired=paired, exposed=exposed)]
    # a pairing told to hide nothing: said, not silent (the case keeps the default, 1)
    combined, dualpipe = (PAIRING_NO_OVERLAP.format(pairing=p) for p in ("combined 1F1B", "DualPipe"))
    assert combined not in plan_caveats(spec)
    bare = dataclasses.replace(spec, efficiency=dataclasses.replace(spec.efficiency, ep_pair_overlap=0.0))
    assert combined in plan_caveats(bare)
    dual = dataclasses.replace(bare, plan=bare.plan.replace(combined_1f1b=False, schedule="dualpipe",
                                                            virtual_stages=1))
    assert dualpipe in plan_caveats(dual)
    assert dualpipe not in plan_caveats(dataclasses.replace(dual, efficiency=spec.efficiency))
    # a DualPipe plan whose ep_overlap (unused there) is set is told where the value belongs
    unused = [n for n in plan_caveats(dataclasses.replace(dual, efficiency=Efficiency(ep_overlap=0.5)))
              if n.startswith("efficiency.ep_overlap = 0.5 plays no part under DualPipe")]
    assert len(unused) == 1
    assert not [n for n in plan_caveats(dataclasses.replace(dual, efficiency=Efficiency()))
                if "plays no part" in n]
    assert not [n for n in plan_caveats(dataclasses.replace(spec, plan=spec.plan.replace(combined_1f1b=False)))
                if n.startswith("combined 1F1B")]
