"""Activation offloading (``offload_layers``, Megatron-core's ``cpu_offloading_num_layers``):
the offloaded layers' activations leave HBM, and their transfers over the host link cost
time only where the micro-batch's forward (for the copy out) or backward (for the copy back)
is too short to hide them."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import markovsim
from markovsim.training import Plan, Workload, load_hardware, step_time
from markovsim.training._inspect import memory_breakdown
from markovsim.training._spec import hardware_from_document, plan_from_document

W = Workload("off-test", layers=16, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=32000, seq_len=8192)
HW = load_hardware("h100_sxm")
PLAN = Plan(tp=1, pp=1, dp=8, global_batch=16, micro_batch=1, zero_stage=3)


@settings(max_examples=10, deadline=None)
@given(k=st.integers(0, 15), pp=st.sampled_from([1, 2]), rec=st.sampled_from(["none", "selective"]))
def test_memory_drops_by_the_offloaded_share_of_each_chunk(k, pp, rec):
    base = PLAN.replace(pp=pp, dp=8 // pp, recompute=rec)
    chunk = W.layers // pp
    k = min(k, chunk - 1)
    m0, mk = memory_breakdown(W, HW, base), memory_breakdown(W, HW, base.replace(offload_layers=k))
    # the last stage's output layer and loss stay in HBM: 4h + 4v bytes per token of one
    # micro-batch (Korthikanti et al. 2022, sec. 4.3; FP32 logits); under 1F1B the first of two
    # stages holds two micro-batches of its layers, the last one and the head
    head = W.seq_len * (4.0 * W.hidden + 4.0 * W.vocab)
    if pp == 1:
        layers0 = m0.activations - head
    else:
        layers0 = m0.activations / 2 if m0.activations / 2 >= head else m0.activations - head
    kept = layers0 * (1 - k / chunk)
    expected = kept + head if pp == 1 else max(2 * kept, kept + head)
    assert mk.activations == pytest.approx(expected, rel=1e-12)
    # the model states do not move (with a pipeline the fuller end may change from the first
    # stage to the last, whose states differ from the first's by the final norm only: the
    # embedding and the untied output layer are the same size)
    for a, b in ((mk.weights, m0.weights), (mk.gradients, m0.gradients), (mk.optimizer, m0.optimizer)):
        assert a == pytest.approx(b, rel=1e-5)
    b0, bk = step_time(W, HW, base), step_time(W, HW, base.replace(offload_layers=k))
    assert bk.memory_bytes == pytest.approx(mk.total, rel=1e-12)
    assert bk.step_time >= b0.step_time and bk.offload_exposed >= 0


@pytest.mark.parametrize("host", [1e15, 64e9, 2e9, 1e8])
def test_transfers_cost_what_compute_does_not_hide(host):
    """Independent arithmetic: bytes moved per micro-batch = the offloaded share of one
    micro-batch's layers' activations (pp = 1 holds one; the output layer's, 4h + 4v bytes per
    token, stay); out during the forward (a third of the micro-batch's compute), back during the
    backward (two thirds)."""
    hw = HW.replace(host_bandwidth_bytes_per_s=host)
    k = 6
    plan = PLAN.replace(offload_layers=k)
    b0, bk = step_time(W, hw, PLAN), step_time(W, hw, plan)
    head = W.seq_len * (4.0 * W.hidden + 4.0 * W.vocab)
    moved = (memory_breakdown(W, hw, PLAN).activations - head) * k / W.layers
    m = PLAN.micro_batches
    t_mb = b0.compute / m
    x = moved / host
    want = m * (max(x - t_mb / 3, 0.0) + max(x - 2 * t_mb / 3, 0.0))
    assert bk.offload_exposed == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert bk.step_time == pytest.approx(b0.step_time + want, rel=1e-12)
    assert sum(getattr(bk, p) for p in bk.PARTS) == pytest.approx(bk.step_time, rel=1e-12)
    if host >= 64e9:  # a PCIe Gen5 link hides this plan's transfers
        assert bk.offload_exposed == 0.0


def test_refusals_name_the_field():
    with pytest.raises(markovsim.InvalidParameterError, match="offload_layers=16: .*expected 0..15"):
        step_time(W, HW, PLAN.replace(offload_layers=16))
    with pytest.raises(markovsim.InvalidParameterError, match="offload_layers=-1"):
        step_time(W, HW, PLAN.replace(offload_layers=-1))
    with pytest.raises(markovsim.InvalidParameterError, match="offload_layers=4: .*no host_link"):
        step_time(W, load_hardware("tpu_v5p"), PLAN.replace(offload_layers=4))


def test_the_readers_take_the_host_link_and_the_plan_key():
    doc = {"name": "x", "hbm": "80 GB", "hbm_bandwidth": "3 TB/s", "peak_dense": {"bf16": "900 TFLOP/s"},
           "levels": [{"name": "net", "domain_size": 0, "bandwidth": "400 Gb/s", "direction": "per-direction",
                       "latency": "10 us"}],
           "host_link": {"bandwidth": "128 GB/s", "direction": "bidirectional"}}
    assert hardware_from_document(doc).host_bandwidth_bytes_per_s == pytest.approx(64e9)
    bad = dict(doc, host_link={"bandwidth": "128 GB/s", "direction": "both"})
    with pytest.raises(markovsim.MarkovsimError, match="host_link.direction"):
        hardware_from_document(bad)
    spec = plan_from_document({"workload": "llama3_70b", "hardware": "gb200_nvl72", "tp": 1, "pp": 1, "dp": 64,
                               "global_batch": 256, "micro_batch": 2, "zero_stage": 3, "precision": "fp8",
                               "offload_layers": 40})
    assert spec.plan.offload_layers == 40
    b = step_time(spec.workload, spec.hardware, spec.plan)
    assert b.offload_exposed == 0.0  # NVLink-C2C hides it behind a 70B layer's compute
