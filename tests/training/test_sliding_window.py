"""Sliding-window (local) attention: windowed layers attend to ``attention_window`` keys.

References: the mean over query positions of the keys a (causal) banded mask leaves,
counted by brute force on a small sequence, against the continuous form the model uses."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import markovsim
from markovsim.training import Plan, Workload, load_hardware, step_time
from markovsim.training._spec import workload_from_document
from markovsim.training._workload import FlopConvention, attended_keys, flops_per_token, model_flops_per_token

W = Workload("swa-test", layers=12, hidden=1024, ffn_hidden=4096, heads=8, kv_heads=8, vocab=32000, seq_len=4096)
HW = load_hardware("h100_sxm")
PLAN = Plan(tp=1, pp=1, dp=8, global_batch=8)


def _keys_brute(s, w, causal):
    """Mean over the s query positions of the keys a band of w (causal: the w most recent,
    itself included; else the w nearest, clipped to the sequence) leaves."""
    i = np.arange(1, s + 1)
    return float(np.minimum(i, w).mean()) if causal else float(min(w, s))


@settings(max_examples=40, deadline=None)
@given(s=st.integers(64, 4096), w=st.integers(1, 4096), causal=st.booleans(), windowed=st.integers(0, 12))
def test_attended_keys_match_the_brute_force_count(s, w, causal, windowed):
    wl = dataclasses.replace(W, seq_len=s, attention_window=w, window_layers=windowed)
    got = attended_keys(wl, s, causal)
    n = windowed or 12
    full = s / 2 if causal else s
    band = _keys_brute(s, w, causal) if w < s else full
    # the model's continuous form of the causal band (w - w^2/2s) is within 1/2 key of the count
    assert got == pytest.approx((12 - n) * full + n * band, abs=n * 0.5 + 1e-9)


def test_a_window_as_long_as_the_sequence_is_full_attention():
    for causal in (False, True):
        wide = dataclasses.replace(W, attention_window=W.seq_len, causal=causal)
        base = dataclasses.replace(W, causal=causal)
        assert step_time(wide, HW, PLAN).step_time == step_time(base, HW, PLAN).step_time
        for conv in FlopConvention:
            assert model_flops_per_token(wide, conv) == model_flops_per_token(base, conv)


def test_windows_shorten_the_flash_attention_and_the_flops_and_nothing_else():
    local = dataclasses.replace(W, attention_window=128, window_layers=6)
    a, b = step_time(W, HW, PLAN), step_time(local, HW, PLAN)
    assert b.compute < a.compute and b.memory_bytes == a.memory_bytes and b.tp_exposed == a.tp_exposed
    core_per_key = 2 * W.heads * 2 * W.d_head  # forward FLOPs per key per token (scores + values)
    # PaLM convention (no mask): half the layers attend to 128 keys instead of 4096
    saved = 6 * (4096 - 128)
    assert flops_per_token(W)[0] - flops_per_token(local)[0] == pytest.approx(3 * core_per_key * saved)
    # causal: 128 - 128^2/8192 instead of 2048
    saved = 6 * (2048 - (128 - 128 ** 2 / (2 * 4096)))
    got = flops_per_token(W, causal=True)[0] - flops_per_token(local, causal=True)[0]
    assert got == pytest.approx(3 * core_per_key * saved)
    # unfused attention materialises the full score matrix: windows do not change it
    unfused = PLAN.replace(attention_kernel="unfused")
    assert step_time(local, HW, unfused).step_time == step_time(W, HW, unfused).step_time


def test_the_reader_and_bad_values():
    doc = dict(name="x", layers=4, hidden=256, ffn_hidden=1024, heads=4, kv_heads=4, vocab=100, seq_len=1024,
               attention_window=128, window_layers=2)
    assert workload_from_document(doc).window_layers == 2
    with pytest.raises(markovsim.MarkovsimError, match="window_layers=2: needs attention_window"):
        workload_from_document(dict(doc, attention_window=0))
    with pytest.raises(markovsim.MarkovsimError, match="window_layers=5: expected 0..layers=4"):
        workload_from_document(dict(doc, window_layers=5))
    with pytest.raises(markovsim.MarkovsimError, match="attention_window"):
        workload_from_document(dict(doc, attention_window=-1))
