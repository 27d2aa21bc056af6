"""Partial full recomputation (``recompute_layers``, Megatron-core's block method): of each
pipeline chunk's layers, ``k`` are recomputed and the rest keep their activations. Every
per-layer quantity lies on the line between no and full recomputation, at ``k / layers per
chunk``; ``k`` = the chunk's layers is full recomputation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import markovsim
from markovsim.training import Plan, Workload, evaluate_plans, load_hardware, step_time
from markovsim.training._inspect import memory_breakdown
from markovsim.training._spec import plan_from_document
from markovsim.training._step import RECOMPUTE_CODES, SCHEDULE_CODES
from markovsim.training._workload import Recompute

# a small vocabulary: the last stage's output layer and logits (held whatever is recomputed)
# stay below the first stage's layers, so the fullest stage is the first at every k and its
# memory is on the line too (with a large one the last stage can take over under full
# recomputation: tests/training/test_output_layer_memory.py)
W = Workload("rec-test", layers=24, hidden=2048, ffn_hidden=8192, heads=16, kv_heads=16, vocab=256, seq_len=4096)
HW = load_hardware("h100_sxm")
FIELDS = ("step_time", "compute", "bubble", "tp_exposed")


def _both(plan):
    return step_time(W, HW, plan), memory_breakdown(W, HW, plan)


@settings(max_examples=12, deadline=None)
@given(pp=st.sampled_from([1, 2, 4]), v=st.sampled_from([1, 3]), tp=st.sampled_from([1, 2]))
def test_partial_recompute_interpolates_between_none_and_full(pp, v, tp):
    chunk = W.layers // (pp * v)
    base = Plan(tp=tp, pp=pp, dp=2, global_batch=8 * pp, micro_batch=1, virtual_stages=v,
                schedule="interleaved" if v > 1 else "1f1b")
    (none, m_none), (full, m_full) = _both(base), _both(base.replace(recompute="full"))
    every = _both(base.replace(recompute="full", recompute_layers=chunk))
    for name in FIELDS:
        assert getattr(every[0], name) == pytest.approx(getattr(full, name), rel=1e-12)
    assert every[1].activations == pytest.approx(m_full.activations, rel=1e-12)
    for k in range(1, chunk):
        b, m = _both(base.replace(recompute="full", recompute_layers=k))
        for name in FIELDS:
            a, z = getattr(none, name), getattr(full, name)
            assert getattr(b, name) == pytest.approx(a + k / chunk * (z - a), rel=1e-9, abs=1e-15), name
        # the FLOPs computed per step (HFU x step time) too; HFU itself is a ratio
        a, z = none.hfu * none.step_time, full.hfu * full.step_time
        assert b.hfu * b.step_time == pytest.approx(a + k / chunk * (z - a), rel=1e-9)
        assert m.activations == pytest.approx(m_none.activations + k / chunk * (m_full.activations - m_none.activations),
                                              rel=1e-9)
        assert m.weights == m_none.weights and m.optimizer == m_none.optimizer


def test_bad_values_are_refused_by_name():
    plan = Plan(tp=1, pp=2, dp=2, global_batch=8, virtual_stages=3, schedule="interleaved")
    with pytest.raises(markovsim.InvalidParameterError, match="recompute_layers=2: .*recompute='full'"):
        step_time(W, HW, plan.replace(recompute="selective", recompute_layers=2))
    with pytest.raises(markovsim.InvalidParameterError, match="recompute_layers=5: a pipeline chunk holds at most 4"):
        step_time(W, HW, plan.replace(recompute="full", recompute_layers=5))
    with pytest.raises(markovsim.InvalidParameterError, match="recompute_layers"):
        step_time(W, HW, plan.replace(recompute="full", recompute_layers=-1))


def test_the_reader_and_the_batched_path_agree():
    doc = dict(workload="llama3_8b", hardware="h100_sxm", tp=1, pp=2, dp=4, global_batch=32,
               recompute="full", recompute_layers=3)
    spec = plan_from_document(doc)
    assert spec.plan.recompute_layers == 3
    one = step_time(spec.workload, spec.hardware, spec.plan)
    arrays = dict(tp=[1], pp=[2], dp=[4], ep=[1], cp=[1], v=[1], mb=[1], gbs=[32], zero=[1], sp=[0],
                  sched=[SCHEDULE_CODES[spec.plan.schedule]], rec=[RECOMPUTE_CODES[Recompute.FULL]], uneven=[0],
                  straggler=[0.0])
    every = np.asarray(evaluate_plans(spec.workload, spec.hardware, arrays)["step_time"])[0]  # no rec_layers: all
    part = np.asarray(evaluate_plans(spec.workload, spec.hardware, dict(arrays, rec_layers=[3]))["step_time"])[0]
    assert part == pytest.approx(one.step_time, rel=1e-12)
    assert every == pytest.approx(step_time(spec.workload, spec.hardware, spec.plan.replace(recompute_layers=0)).step_time,
                                  rel=1e-12)
    assert part < every


def test_the_plan_search_offers_partial_recomputation_and_picks_it_when_it_is_the_fastest_fit():
    """On a card whose memory holds the half-recomputed plan but not the plan without
    recomputation, the fastest fitting candidate recomputes half of each chunk."""
    import dataclasses

    from markovsim.training import candidate_plans

    grid = dict(max_tp=1, max_pp=1, virtual_stages=(1,), context_parallel=(1,), micro_batches=(1,), zero_stages=(1,))
    plans, ok = candidate_plans(W, 8, global_batch=8, **grid)
    assert sorted(set(zip(plans["rec"][ok], plans["rec_layers"][ok]))) == sorted(
        [(RECOMPUTE_CODES[r], 0) for r in Recompute if r is not Recompute.SELECTIVE_OP]
        + [(RECOMPUTE_CODES[Recompute.FULL], 12)])
    base = Plan(tp=1, pp=1, dp=8, global_batch=8)
    need = {k: memory_breakdown(W, HW, base.replace(**kw)).total for k, kw in
            dict(none={}, half=dict(recompute="full", recompute_layers=12)).items()}
    hw = dataclasses.replace(HW, hbm_bytes=(need["none"] + need["half"]) / 2 / 0.9)  # usable 0.9 of it
    out = {k: np.asarray(x) for k, x in evaluate_plans(W, hw, plans).items()}
    step = np.where(ok & out["fits"].astype(bool), out["step_time"], np.inf)
    best = int(np.argmin(step))
    assert plans["rec"][best] == RECOMPUTE_CODES[Recompute.FULL] and plans["rec_layers"][best] == 12
    with pytest.raises(markovsim.InvalidParameterError, match="partial_recompute"):
        candidate_plans(W, 8, global_batch=8, partial_recompute=(1.0,))
