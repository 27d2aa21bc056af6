"""FP8 scaling recipes (``plan.fp8_recipe``): under Transformer Engine's delayed scaling each
forward and each backward of a pipeline chunk ends with a blocking all-reduce of the amaxes
over the pipeline stage's tp x cp x dp ranks (Megatron-core's fp8_group). Its time against
a closed form inside one node, its count (two per micro-batch and chunk), its growth with the
group, the recipes that pay nothing, and the readers and the search carrying the key."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._errors import InvalidParameterError, SpecError
from markovsim.training import FP8Recipe, Plan, Workload, load_hardware, plan_numerics, step_time, validate_plan
from markovsim.training._spec import plan_from_document

H100 = load_hardware("h100_sxm")
W = Workload("amax-test", layers=8, hidden=2048, ffn_hidden=8192, ffn_kind="swiglu", heads=16, kv_heads=16,
             vocab=32000, seq_len=2048)


def _plan(**kw):
    base = dict(tp=2, pp=2, dp=2, global_batch=32, micro_batch=1, precision="fp8", fp8_recipe="current")
    return validate_plan(W, Plan(**(base | kw)))


def _amax(plan):
    """The step's extra sync time under delayed scaling against the same plan under current
    scaling (the only term the recipe moves)."""
    delayed = step_time(W, H100, plan.replace(fp8_recipe=FP8Recipe.DELAYED))
    current = step_time(W, H100, plan.replace(fp8_recipe=FP8Recipe.CURRENT))
    assert delayed.step_time - current.step_time == pytest.approx(delayed.sync - current.sync, rel=1e-9, abs=1e-15)
    return delayed.sync - current.sync


def test_inside_one_node_the_cost_is_two_nvlink_rings_per_micro_batch_and_chunk():
    """tp 4 x dp 2 = 8 ranks in one NVLink domain: each all-reduce is a reduce-scatter and an
    all-gather ring over the node, (n - 1) (alpha + bytes / (n beta)) each, and the step has
    2 m v of them (m micro-batches, v chunks per rank)."""
    plan = _plan(tp=4, dp=2, pp=2, virtual_stages=2, schedule="interleaved", global_batch=16)
    nvlink = H100.levels[0]
    n, m, v = 8, 16 // 2, 2
    size = 48.0 * (W.layers / 2) / v  # three FP32 amaxes of four GEMMs per layer of the chunk
    beta = nvlink.bandwidth_bytes_per_s * H100.kernels.collective_bandwidth_fraction
    ring = (n - 1) * (nvlink.latency_s + size / n / beta)
    assert _amax(plan) == pytest.approx(2 * m * v * 2 * ring, rel=1e-9)


def test_two_all_reduces_per_micro_batch_and_chunk():
    one = _amax(_plan(global_batch=32))
    assert _amax(_plan(global_batch=64)) == pytest.approx(2 * one, rel=1e-9)
    chunks = _amax(_plan(global_batch=32, virtual_stages=2, schedule="interleaved"))
    assert chunks == pytest.approx(2 * one, rel=1e-2)  # the bytes halve with the chunk (negligible)


@settings(max_examples=25, deadline=None)
@given(dp=st.sampled_from([1, 2, 4, 16, 64, 256]), tp=st.sampled_from([1, 2, 8]))
def test_the_cost_grows_with_the_group_and_vanishes_for_one_rank(dp, tp):
    plan = _plan(tp=tp, dp=dp, pp=1, global_batch=4 * dp)
    cost = _amax(plan)
    assert cost >= 0
    if tp * dp == 1:
        assert cost == 0
    else:  # one micro-batch of each replica more costs more; a group twice the size no less
        bigger = _amax(_plan(tp=tp, dp=2 * dp, pp=1, global_batch=4 * dp * 2))
        assert bigger >= cost


@pytest.mark.parametrize("recipe", ["current", "mxfp8", "blockwise"])
def test_only_delayed_fp8_pays(recipe):
    plan = _plan(fp8_recipe=recipe)
    assert step_time(W, H100, plan).sync == step_time(W, H100, plan.replace(fp8_recipe=FP8Recipe.MXFP8)).sync
    bf16 = plan.replace(precision="bf16")
    assert (step_time(W, H100, bf16.replace(fp8_recipe=FP8Recipe.DELAYED)).sync
            == step_time(W, H100, bf16.replace(fp8_recipe=FP8Recipe(recipe))).sync)
    assert _amax(plan) > 0


def test_the_default_is_transformer_engines_delayed_scaling():
    assert Plan(tp=1, pp=1, dp=1, global_batch=1).fp8_recipe is FP8Recipe.DELAYED


def _doc(**kw):
    return {"workload": "llama3_8b", "hardware": "h100_sxm", "tp": 1, "pp": 1, "dp": 8, "global_batch": 64,
            "precision": "fp8", **kw}


def test_plan_files_read_the_recipe_and_refuse_a_wrong_one():
    assert plan_from_document(_doc()).plan.fp8_recipe is FP8Recipe.DELAYED
    assert plan_from_document(_doc(fp8_recipe="mxfp8")).plan.fp8_recipe is FP8Recipe.MXFP8
    with pytest.raises(SpecError, match=r"fp8_recipe='tensorwise': expected one of 'delayed', 'current'"):
        plan_from_document(_doc(fp8_recipe="tensorwise"))
    with pytest.raises(InvalidParameterError, match=r"plan.fp8_recipe='nope': expected one of"):
        validate_plan(W, Plan(tp=1, pp=1, dp=1, global_batch=1, fp8_recipe="nope"))


def test_a_recipe_without_a_precision_is_refused_in_a_file():
    """fp8_recipe written with no precision is a forgotten precision = "fp8" more likely than
    a wish for BF16: the file is refused, naming the key and both ways out. A written
    precision = "bf16" is a choice (a what-if's --set on an FP8 plan): read, the recipe
    without effect."""
    doc = {k: v for k, v in _doc(fp8_recipe="Current").items() if k != "precision"}
    with pytest.raises(SpecError, match=r"fp8_recipe='Current': an FP8 scaling recipe without a precision; "
                                        r"expected precision = \"fp8\""):
        plan_from_document(doc)
    bf16 = plan_from_document(doc | {"precision": "bf16"})
    assert bf16.plan.precision.value == "bf16" and bf16.plan.fp8_recipe is FP8Recipe.CURRENT
    # BF16 pays no amax reduction whatever the recipe says
    p = _plan(precision="bf16")
    assert step_time(W, H100, p.replace(fp8_recipe=FP8Recipe.DELAYED)).sync == step_time(W, H100, p).sync


def test_the_search_holds_the_recipe():
    assert plan_numerics(_plan(fp8_recipe="blockwise"))["fp8_recipe"] is FP8Recipe.BLOCKWISE
