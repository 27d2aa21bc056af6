"""The memory per card split into weights, gradients, optimizer states and activations
(``StepBreakdown.weights_bytes`` ... ``activations_bytes``): the ZeRO stages' bytes per
parameter (Rajbhandari et al. 2020: 2 + 2 + 12 with FP16 gradients; Megatron keeps FP32 main
gradients, 4), the activations against Korthikanti et al. (2022) eq. 1, and the four parts
adding up to the total for any plan."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim.training import Plan, Workload, load_hardware, step_time
from markovsim.training._workload import parameter_count

A100 = load_hardware("a100_sxm_80gb")
GPT = Workload("gpt-split", layers=4, hidden=2048, ffn_hidden=8192, ffn_kind="gelu", heads=16, kv_heads=16,
               vocab=32000, seq_len=2048, dropout=True, tied_embeddings=True)


@pytest.mark.parametrize("zero, weights, grads, optimizer", [
    (0, 2.0, 4.0, 12.0),            # BF16 weights, FP32 main gradients, FP32 master weights and moments
    (1, 2.0, 4.0, 12.0 / 8),        # ZeRO-1 shards the optimizer states over the 8 ranks
    (2, 2.0, 4.0 / 8, 12.0 / 8),    # ZeRO-2 the gradients too
    (3, 2.0 / 8 + 2 * 2.0 / 4, 4.0 / 8, 12.0 / 8),  # ZeRO-3 the weights, plus two layers gathered (of 4)
])
def test_the_model_states_follow_the_zero_stage(zero, weights, grads, optimizer):
    b = step_time(GPT, A100, Plan(tp=1, pp=1, dp=8, global_batch=8, zero_stage=zero))
    p = parameter_count(GPT).total
    assert b.weights_bytes / p == pytest.approx(weights, rel=1e-12)
    assert b.gradients_bytes / p == pytest.approx(grads, rel=1e-12)
    assert b.optimizer_state_bytes / p == pytest.approx(optimizer, rel=1e-12)


@pytest.mark.parametrize("kernel, per_token", [("unfused", lambda h, a, s: 34 * h + 5 * a * s),
                                               ("flash", lambda h, a, s: 34 * h + 4 * a)])
def test_the_activations_are_korthikanti_eq_1(kernel, per_token):
    """One micro-batch of one sequence through the 4 layers, no parallelism: s b h (34 + 5 a s / h)
    bytes per layer with the unfused scores; a fused kernel keeps the log-sum-exp instead
    (4 bytes per head and token). The input and output layers add (sec. 4.3, p = 1) the
    embedding's dropout mask, s b h, and the final norm's and the output layer's inputs with
    the FP32 logits, 4 s b h (1 + v / h)."""
    b = step_time(GPT, A100, Plan(tp=1, pp=1, dp=8, global_batch=8, attention_kernel=kernel))
    h, a, s, v = GPT.hidden, GPT.heads, GPT.seq_len, GPT.vocab
    ends = s * h + 4 * s * h * (1 + v / h)
    assert b.activations_bytes == pytest.approx(GPT.layers * s * per_token(h, a, s) + ends, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4]), zero=st.integers(0, 3),
       recompute=st.sampled_from(["none", "selective", "full"]), precision=st.sampled_from(["bf16", "fp8"]),
       micro_batch=st.sampled_from([1, 2]))
def test_the_four_parts_are_the_memory(tp, pp, zero, recompute, precision, micro_batch):
    plan = Plan(tp=tp, pp=pp, dp=4, global_batch=16, micro_batch=micro_batch, zero_stage=zero,
                recompute=recompute, precision=precision, schedule="1f1b")
    b = step_time(GPT, load_hardware("h100_sxm"), plan)
    parts = (b.weights_bytes, b.gradients_bytes, b.optimizer_state_bytes, b.activations_bytes)
    assert all(x > 0 for x in parts)
    assert sum(parts) == pytest.approx(b.memory_bytes, rel=1e-12)


def test_markovsim_train_shows_the_split(capsys):
    from markovsim import _cli
    assert _cli.main(["train", "llama3_70b_h100_64"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  of which"))
    assert all(f"{part} " in line for part in ("weights", "gradients", "optimizer", "activations"))
    assert _cli.main(["train", "llama3_70b_h100_64", "--json"]) == 0
    o = json.loads(capsys.readouterr().out)["outputs"]
    assert sum(o[k] for k in ("weights_bytes", "gradients_bytes", "optimizer_state_bytes", "activations_bytes")) \
        == pytest.approx(o["memory_bytes"], rel=1e-12)
