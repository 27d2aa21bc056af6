"""Uneven pipeline splits: the fullest stage holds the least load whole chunks allow."""

from itertools import combinations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim.training._step import stage_shares


def _fullest_stage_brute_force(layers, pp, v):
    """The least possible load of the fullest stage when every chunk holds floor(L/(pp v))
    or one layer more, v chunks per stage: try every placement of the bigger chunks."""
    chunks = pp * v
    small, bigger = divmod(layers, chunks)
    best = None
    for placed in combinations(range(chunks), bigger):
        load = [v * small] * pp
        for k in placed:
            load[k // v] += 1
        best = max(load) if best is None else min(best, max(load))
    return best


@settings(max_examples=60, deadline=None)
@given(pp=st.integers(1, 4), v=st.integers(1, 3), extra=st.integers(0, 11))
def test_the_fullest_stage_of_an_uneven_split_is_the_least_possible(pp, v, extra):
    layers = pp * v + extra  # at least one layer per chunk
    c = {"layers": float(layers), "moe_layers": 0.0, "dense_params": 1.0, "expert_params": 0.0}
    q = {k: np.asarray(float(x)) for k, x in dict(pp=pp, v=v, uneven=1, tp=1, ep=1, cp=1, dp=1).items()}
    got = float(stage_shares(c, q, np)["stage_layers"])
    assert got == _fullest_stage_brute_force(layers, pp, v)
    assert got >= -(-layers // pp)  # never below an even share


def test_llama3_405b_with_six_chunks_per_stage_holds_eight_layers():
    """126 layers on 16 stages x 6 chunks: 30 chunks of two layers, 66 of one; the fullest
    stage holds 8 layers (ceil(126/16)), not 6 x ceil(126/96) = 12."""
    c = {"layers": 126.0, "moe_layers": 0.0, "dense_params": 1.0, "expert_params": 0.0}
    q = {k: np.asarray(float(x)) for k, x in dict(pp=16, v=6, uneven=1, tp=1, ep=1, cp=1, dp=1).items()}
    assert float(stage_shares(c, q, np)["stage_layers"]) == 8.0


@settings(max_examples=40, deadline=None)
@given(pp=st.integers(1, 4), v=st.integers(2, 3), fewer=st.integers(1, 2))
def test_up_to_two_chunks_without_a_layer_are_still_the_least_fullest_stage(pp, v, fewer):
    """Megatron-core's embedding / loss slots: L = pp v - 1 or - 2 layers on pp v chunks."""
    layers = max(pp * v - fewer, 1)
    c = {"layers": float(layers), "moe_layers": 0.0, "dense_params": 1.0, "expert_params": 0.0}
    q = {k: np.asarray(float(x)) for k, x in dict(pp=pp, v=v, uneven=1, tp=1, ep=1, cp=1, dp=1).items()}
    assert float(stage_shares(c, q, np)["stage_layers"]) == _fullest_stage_brute_force(layers, pp, v)


def test_validate_plan_allows_the_embedding_and_loss_slots_and_no_more():
    import pytest

    from markovsim import InvalidParameterError
    from markovsim.training import Plan, Workload
    from markovsim.training._plan import validate_plan

    w = Workload("slots", layers=126, hidden=1024, ffn_hidden=4096, heads=8, kv_heads=8, vocab=1000, seq_len=512)
    ok = Plan(tp=1, pp=16, dp=1, virtual_stages=8, schedule="interleaved", layer_split="uneven",
              global_batch=16, micro_batch=1)
    validate_plan(w, ok)  # 128 chunks: 126 layers + embedding + loss (Megatron-Bridge 26.02, 405B on GB200)
    with pytest.raises(InvalidParameterError, match="at most layers \\+ 2"):
        validate_plan(w, ok.replace(pp=16, virtual_stages=9, global_batch=16))
