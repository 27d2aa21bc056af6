"""Named software stacks (``[efficiency] stack``): the communication overlaps a plan file
states in one key, and the caveat said under a plan that states none."""

import dataclasses
import re
import statistics
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._errors import InvalidParameterError, SpecError
from markovsim.training import SOFTWARE_STACKS, STACK_OVERLAPS, Efficiency, plan_caveats, step_time
from markovsim.training._calibrate import predict, runs_from_cases
from markovsim.training._outputs import OVERLAP_SENSITIVITY, overlap_defaults_caveat
from markovsim.training._spec import plan_from_document

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "models" / "cases"
OVERLAPS = ("tp_overlap", "pp_overlap", "dp_overlap", "param_gather_overlap")
BARE = {"workload": "llama3_70b", "hardware": "h100_sxm", "tp": 4, "pp": 4, "dp": 4, "virtual_stages": 5,
        "schedule": "interleaved", "global_batch": 128}


def _step(spec):
    return step_time(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency).step_time


def test_a_stack_is_its_overlaps_and_keys_beside_it_win():
    core = SOFTWARE_STACKS["megatron-core"]["overlaps"]
    assert all(set(s["overlaps"]) <= set(STACK_OVERLAPS) for s in SOFTWARE_STACKS.values())
    assert Efficiency.for_stack("default") == Efficiency()
    assert Efficiency.for_stack("megatron-core") == Efficiency(**core)
    assert Efficiency.for_stack("megatron-core", pp_overlap=0.0) == Efficiency(**{**core, "pp_overlap": 0.0})
    named = plan_from_document({**BARE, "efficiency": {"stack": "megatron-core"}})
    spelled = plan_from_document({**BARE, "efficiency": dict(core)})
    assert named.efficiency == spelled.efficiency and _step(named) == _step(spelled)
    assert named.stack == "megatron-core" and spelled.stack == ""
    assert named.efficiency_keys == frozenset(core) | {"stack"} and spelled.efficiency_keys == frozenset(core)
    over = plan_from_document({**BARE, "efficiency": {"stack": "megatron-core", "tp_overlap": 0.3}})
    assert over.efficiency.tp_overlap == 0.3 and over.efficiency.pp_overlap == core["pp_overlap"]
    # a plan that states no overlap takes its hardware's default_stack (megatron-core on the
    # H100, the library's defaults on the A100), none of it written
    bare = plan_from_document(BARE)
    assert bare.efficiency == Efficiency.for_stack("megatron-core") and bare.efficiency_keys == frozenset()
    assert bare.stack == "" and bare.applied_stack == "megatron-core" and _step(bare) == _step(named)
    ampere = plan_from_document({**BARE, "hardware": "a100_sxm_80gb"})
    assert ampere.efficiency == Efficiency() and ampere.applied_stack == "default"
    # an overlap written wins; those not written are still the hardware's default_stack's
    one = plan_from_document({**BARE, "efficiency": {"dp_overlap": 0.95}})
    assert one.efficiency == Efficiency.for_stack("megatron-core", dp_overlap=0.95)
    assert one.applied_stack == "megatron-core" and one.efficiency_keys == {"dp_overlap"}
    one = plan_from_document({**BARE, "hardware": "a100_sxm_80gb", "efficiency": {"dp_overlap": 0.95}})
    assert one.efficiency == Efficiency(dp_overlap=0.95) and one.applied_stack == "default"
    assert plan_from_document({**BARE, "efficiency": {"usable_memory": 0.8}}).efficiency == Efficiency.for_stack(
        "megatron-core", usable_memory=0.8)
    old = plan_from_document({**BARE, "efficiency": {"stack": "megatron-lm-2021"}}).efficiency
    assert all(getattr(old, k) == 0.0 for k in OVERLAPS)
    # the overlaps only hide communication: the more a stack hides, the shorter the step
    assert _step(named) < _step(plan_from_document({**BARE, "efficiency": {"stack": "default"}})) < _step(
        plan_from_document({**BARE, "efficiency": {"stack": "megatron-lm-2021"}}))


def test_an_unknown_stack_is_refused_with_the_choices():
    with pytest.raises(SpecError, match=r"efficiency\.stack='nemo'.*'default', 'megatron-core', 'megatron-lm-2021'"):
        plan_from_document({**BARE, "efficiency": {"stack": "nemo"}})
    with pytest.raises(InvalidParameterError, match="stack='nemo'"):
        Efficiency.for_stack("nemo")
    assert plan_from_document({**BARE, "efficiency": {"stack": "Megatron-Core"}}).stack == "megatron-core"


def test_the_caveat_is_said_when_no_overlap_is_stated_and_it_matters():
    """It gives the step with the other reading: the library's defaults where the hardware's
    default_stack is megatron-core (H100), megatron-core's overlaps where it is the
    library's (A100); both seconds are the library's step_time."""
    for hardware, other_stack in (("h100_sxm", "default"), ("a100_sxm_80gb", "megatron-core")):
        bare = plan_from_document({**BARE, "hardware": hardware})
        other_spec = plan_from_document({**BARE, "hardware": hardware, "efficiency": {"stack": other_stack}})
        notes = overlap_defaults_caveat(bare)
        assert len(notes) == 1 and notes in [[n] for n in plan_caveats(bare)]
        base, other = _step(bare), _step(other_spec)
        assert f"{other:.3g} s against {base:.3g} s ({100 * (other / base - 1):+.0f} %)" in notes[0]
        assert ("default_stack" in notes[0]) == (hardware == "h100_sxm")
    # a stack (the defaults named), or all four overlaps written, silences it
    for eff in ({"stack": "default"}, {"stack": "megatron-core"}, {"tp_overlap": 0.0, "dp_overlap": 0.0,
                                                                   "pp_overlap": 0.0, "param_gather_overlap": 0.0}):
        spec = plan_from_document({**BARE, "efficiency": eff})
        assert overlap_defaults_caveat(spec) == [] and not any("communication overlap" in n for n in plan_caveats(spec))
    # some written: the caveat is about the others, read the other way, when that matters
    for hardware, other_stack in (("h100_sxm", "default"), ("a100_sxm_80gb", "megatron-core")):
        part = plan_from_document({**BARE, "hardware": hardware, "efficiency": {"dp_overlap": 0.8}})
        other_spec = plan_from_document({**BARE, "hardware": hardware,
                                         "efficiency": {"stack": other_stack, "dp_overlap": 0.8}})
        base, other = _step(part), _step(other_spec)
        notes = overlap_defaults_caveat(part)
        assert bool(notes) == (abs(other / base - 1) > OVERLAP_SENSITIVITY) and notes
        assert "the overlaps it does not write (tp_overlap, pp_overlap, param_gather_overlap)" in notes[0]
        assert f"{other:.3g} s against {base:.3g} s ({100 * (other / base - 1):+.0f} %)" in notes[0]
    # a plan with only data parallelism and no ZeRO gather: the stacks agree, nothing to say
    small = plan_from_document({"workload": "llama3_8b", "hardware": "h100_sxm", "tp": 1, "pp": 1, "dp": 8,
                                "global_batch": 64, "zero_stage": 0})
    assert overlap_defaults_caveat(small) == []
    assert OVERLAP_SENSITIVITY == 0.02


def test_on_hardware_off_the_nvidia_stack_the_other_reading_is_said_as_what_it_hides():
    """On a TPU (default_stack the library's) Megatron-core's overlaps are the other reading:
    said with their values, as a stack that hides that much, not as the assumption behind the
    NVIDIA fit runs, which a TPU plan has nothing to do with; on an H100 the applied reading
    keeps that provenance."""
    core = SOFTWARE_STACKS["megatron-core"]["overlaps"]
    tpu = plan_from_document({**BARE, "hardware": "tpu_v5p"})
    notes = overlap_defaults_caveat(tpu)
    assert len(notes) == 1
    assert "Hopper and Blackwell" not in notes[0] and "fitted" not in notes[0]
    assert all(f"{k} {v:g}" in notes[0] for k, v in core.items())
    h100 = overlap_defaults_caveat(plan_from_document(BARE))
    assert len(h100) == 1 and "Hopper and Blackwell presets were fitted" in h100[0]


def test_the_nvidia_cases_state_the_megatron_core_overlaps_unless_their_recipe_says_otherwise():
    """The stack's values are those the NeMo, Megatron-Bridge and DGXC cases assume; the
    count of cases whose recipe says otherwise is the one SOFTWARE_STACKS quotes."""
    core = SOFTWARE_STACKS["megatron-core"]["overlaps"]
    other = 0
    for path in sorted(CASES.glob("*.toml")):
        for case in tomllib.loads(path.read_text()).get("case", []):
            if case.get("kind") == "train" and case["name"].startswith(("NeMo", "Megatron-Bridge", "DGXC")):
                written = case.get("efficiency", {})
                other += any(written[k] != v for k, v in core.items() if k in written)
    assert f"({other} of them do)" in SOFTWARE_STACKS["megatron-core"]["about"]


def test_the_accuracy_page_numbers_for_overlaps_left_at_their_defaults():
    """On the GPU holdout outputs that state all four megatron-core overlaps, the median
    error with them and with the library's defaults instead (docs/background/accuracy.md)."""
    core = SOFTWARE_STACKS["megatron-core"]["overlaps"]
    with_, without = [], []
    for run in runs_from_cases(CASES / "gpu_training_runs.toml", role="holdout"):
        if not set(core) <= run.spec.efficiency_keys or any(getattr(run.spec.efficiency, k) != v
                                                            for k, v in core.items()):
            continue  # not all four stated (a stack named states them), or not megatron-core's
        bare = dataclasses.replace(run.spec, efficiency=dataclasses.replace(
            run.spec.efficiency, tp_overlap=0.0, pp_overlap=0.0, param_gather_overlap=0.0))
        a, b = predict(run), predict(dataclasses.replace(run, spec=bare))
        slower = b < a if not run.output.endswith("_s") else b > a
        assert slower or a == b
        with_.append(abs(a / run.value - 1))
        without.append(abs(b / run.value - 1))
    page = (ROOT / "docs" / "background" / "accuracy.md").read_text()
    text = (f"on the {len(with_)} GPU holdout outputs that state all four, doing so moves the\n  median error from "
            f"{100 * statistics.median(with_):.1f} % to {100 * statistics.median(without):.1f} %")
    assert re.sub(r"\s+", " ", text) in re.sub(r"\s+", " ", page)


def test_validate_flags_a_case_that_states_no_overlap(tmp_path):
    """A train case written without any overlap (the library defaults) has its rows flagged
    when the megatron-core overlaps would move its step by more than 2 %; the same case
    with a stack is not."""
    from markovsim.validate import validate_cases

    plan = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in BARE.items())
    case = ('tolerance = "10 %"\n[[case]]\nname = "bare"\nkind = "train"\n' + plan
            + '[case.expect]\nstep_time_s = "15 s"\n')
    bare = tmp_path / "bare.toml"
    bare.write_text(case)
    row = validate_cases(bare).rows[0]
    assert "names no software stack" in row.note
    named = tmp_path / "named.toml"
    named.write_text(case.replace("[case.expect]", '[case.efficiency]\nstack = "megatron-core"\n[case.expect]'))
    assert "communication overlap" not in validate_cases(named).rows[0].note


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 8]),
       zero=st.sampled_from([0, 1, 3]), workload=st.sampled_from(["llama3_8b", "llama3_70b", "mixtral_8x7b"]),
       hardware=st.sampled_from(["a100_sxm_80gb", "h100_sxm", "b200"]))
def test_more_overlap_is_never_slower(tp, pp, dp, zero, workload, hardware):
    """Hiding communication only removes exposed time: for any plan, megatron-core's
    overlaps give a step no longer than the library defaults', and those no longer than
    megatron-lm-2021's (nothing hidden)."""
    doc = {"workload": workload, "hardware": hardware, "tp": tp, "pp": pp, "dp": dp, "zero_stage": zero,
           "global_batch": 8 * dp * pp}
    steps = [_step(plan_from_document({**doc, "efficiency": {"stack": s}}))
             for s in ("megatron-core", "default", "megatron-lm-2021")]
    assert steps[0] <= steps[1] * (1 + 1e-12) and steps[1] <= steps[2] * (1 + 1e-12)


def _stripped_errors(read_with: str | None) -> list[float]:
    """The relative errors of the GPU suite's holdout outputs with every overlap key removed
    from each case (a case written without them), read with the hardware's default_stack
    (``read_with`` None) or with the named stack."""
    from markovsim.training import OVERLAP_KEYS
    from markovsim.training._calibrate import _META, _value
    from markovsim.training._outputs import plan_outputs

    path = CASES / "gpu_training_runs.toml"
    errors = []
    for i, case in enumerate(tomllib.loads(path.read_text())["case"]):
        if case.get("kind") != "train" or case.get("role") != "holdout":
            continue
        doc = {k: v for k, v in case.items() if k not in _META}
        eff = {k: v for k, v in doc.get("efficiency", {}).items() if k not in OVERLAP_KEYS}
        doc["efficiency"] = eff if read_with is None else {**eff, "stack": read_with}
        out = plan_outputs(plan_from_document(doc, where=f"case[{i}]", base=path.parent))
        errors += [abs(out[o] / _value(v, o, o) - 1) for o, v in case["expect"].items() if o != "linearity"]
    return errors


def test_the_accuracy_page_numbers_for_cases_written_without_overlaps():
    """A GPU holdout case written without its overlaps is read with its hardware's
    default_stack; the page quotes the median error so, and with the library's defaults
    (how such a case was read before the presets named a stack)."""
    now, before = _stripped_errors(None), _stripped_errors("default")
    assert len(now) == len(before) > 100
    assert statistics.median(now) < statistics.median(before)
    page = (ROOT / "docs" / "background" / "accuracy.md").read_text()
    text = (f"the {len(now)} GPU holdout outputs, each case stripped of its overlap keys, come out at a median error "
            f"of {100 * statistics.median(now):.2f} % ({sum(e <= 0.10 for e in now)} within 10 %), against "
            f"{100 * statistics.median(before):.2f} % ({sum(e <= 0.10 for e in before)} within 10 %) with the "
            "library's defaults")
    assert re.sub(r"\s+", " ", text) in re.sub(r"\s+", " ", page)


def test_the_presets_name_the_stack_a_silent_plan_gets():
    """Hopper and Blackwell presets name megatron-core (their fit runs' software), the
    others the library's defaults; a hardware file naming an unknown stack is refused with
    the choices."""
    from markovsim.training import load_hardware
    from markovsim.training._spec import hardware_from_document

    hopper_blackwell = {"h100_sxm", "h800_sxm", "h200_sxm", "b200", "b300", "gb200_nvl72", "gb300_nvl72"}
    for path in sorted((ROOT / "models" / "hardware").glob("*.toml")):
        want = "megatron-core" if path.stem in hopper_blackwell else "default"
        assert load_hardware(path.stem).default_stack == want, path.stem
    doc = tomllib.loads((ROOT / "models" / "hardware" / "h100_sxm.toml").read_text())
    with pytest.raises(SpecError, match=r"default_stack='nemo'.*'default', 'megatron-core', 'megatron-lm-2021'"):
        hardware_from_document({**doc, "default_stack": "nemo"})


def test_python_without_an_efficiency_answers_what_a_bare_plan_file_does():
    """step_time, evaluate_plans, search_plans and scaling_curve without an efficiency use
    the hardware's default_stack (Hardware.efficiency), the same a plan file with no
    [efficiency] gets: megatron-core's overlaps on the H100, the library's defaults on the
    A100; an Efficiency passed is used as given."""
    from markovsim.training import FixedGlobalBatch, scaling_curve, search_plans

    for hardware, stack in (("h100_sxm", "megatron-core"), ("a100_sxm_80gb", "default")):
        spec = plan_from_document({**BARE, "hardware": hardware})
        w, hw, plan = spec.workload, spec.hardware, spec.plan
        assert hw.efficiency() == Efficiency.for_stack(stack) == spec.efficiency
        assert step_time(w, hw, plan) == step_time(w, hw, plan, efficiency=spec.efficiency)
        curve = scaling_curve(w, hw, plan, [64, 128], batch=FixedGlobalBatch(128), require_fit=False)
        assert list(curve.linearity) == list(scaling_curve(w, hw, plan, [64, 128], batch=FixedGlobalBatch(128),
                                                           efficiency=Efficiency.for_stack(stack),
                                                           require_fit=False).linearity)
        found = search_plans(w, hw, 64, global_batch=128, max_pp=4)
        assert found.breakdown == search_plans(w, hw, 64, global_batch=128, max_pp=4,
                                               efficiency=Efficiency.for_stack(stack)).breakdown
    h100 = plan_from_document(BARE)
    given = step_time(h100.workload, h100.hardware, h100.plan, efficiency=Efficiency())
    assert given.step_time > step_time(h100.workload, h100.hardware, h100.plan).step_time


def test_a_python_plan_spec_with_its_own_overlaps_is_not_said_to_take_the_stacks():
    """A PlanSpec built in Python writes no keys; an overlap whose value is not the
    hardware's stack's is its own, and the caveat neither names it as taken from the stack
    nor reads it the other way."""
    from markovsim.training._spec import PlanSpec

    doc = plan_from_document(BARE)
    own = Efficiency(tp_overlap=0.8, pp_overlap=0.5, dp_overlap=0.9, param_gather_overlap=0.0)
    spec = PlanSpec("own", doc.workload, doc.hardware, doc.plan, own)
    notes = overlap_defaults_caveat(spec)
    other = _step(dataclasses.replace(spec, efficiency=dataclasses.replace(own, tp_overlap=0.0, pp_overlap=0.0)))
    assert len(notes) == 1 and "the overlaps it does not write (tp_overlap, pp_overlap, dp_overlap)" in notes[0]
    assert f"{other:.3g} s against {_step(spec):.3g} s" in notes[0]
    # all four its own: nothing to say; the stack's own values: the plan-file reading
    assert overlap_defaults_caveat(PlanSpec("own", doc.workload, doc.hardware, doc.plan, Efficiency())) == []
    assert overlap_defaults_caveat(PlanSpec("same", doc.workload, doc.hardware, doc.plan, doc.efficiency)) == \
        overlap_defaults_caveat(doc)
