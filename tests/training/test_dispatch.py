"""What the expert all-to-all moves per token (``plan.ep_dispatch``, ``plan.expert_routing``):
the closed forms of ``dispatch_copies`` against brute force (Monte Carlo over random routing
with a confidence bound, exhaustive enumeration of the consecutive gate), the per-expert
default against the formula the kernel had before, and the step time following the copies."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from markovsim._errors import InvalidParameterError, SpecError
from markovsim.training import Plan, Workload, dispatch_copies, load_hardware, load_workload, step_time, validate_plan
from markovsim.training._spec import plan_from_document
from markovsim.training._workload import MoE

H100 = load_hardware("h100_sxm")


def _moe(experts, top_k, limit=0):
    return Workload("dispatch-test", layers=4, hidden=1024, ffn_hidden=4096, ffn_kind="swiglu", heads=8, kv_heads=8,
                    vocab=32000, seq_len=4096,
                    moe=MoE(routed_experts=experts, shared_experts=0, top_k=top_k, expert_ffn=512, dense_layers=0,
                            max_nodes_per_token=limit))


def _monte_carlo(experts, k, ep, node_size, limit, draws=20000, seed=7):
    """Distinct destination ranks and remote nodes of random routing, drawn token by token
    (within ``limit`` random nodes when 0 < limit < nodes); the sender is a random rank."""
    rng = np.random.default_rng(seed)
    per_rank, nodes = experts // ep, math.ceil(ep / node_size)
    ranks_in_node = min(ep, node_size)
    d_rank, remote = np.empty(draws), np.empty(draws)
    for t in range(draws):
        if 0 < limit < nodes:
            chosen = rng.choice(nodes, limit, replace=False)
            pool = np.concatenate([np.arange(n * experts // nodes, (n + 1) * experts // nodes) for n in chosen])
        else:
            pool = np.arange(experts)
        ranks = rng.choice(pool, k, replace=False) // per_rank
        d_rank[t] = len(set(ranks))
        own = rng.integers(nodes)
        remote[t] = len(set(ranks // ranks_in_node) - {own})
    return d_rank, remote


@pytest.mark.parametrize("experts, k, ep, limit", [(128, 8, 8, 0), (256, 8, 64, 4), (384, 8, 32, 0), (32, 4, 8, 0),
                                                    (64, 6, 16, 0)])
def test_random_routing_matches_monte_carlo(experts, k, ep, limit):
    inside, across = dispatch_copies(_moe(experts, k, limit), 8, ep, "per-rank", "random")
    d_rank, remote = _monte_carlo(experts, k, ep, 8, limit)
    for formula, sample in ((inside, d_rank), (across, remote)):
        half = 5 * sample.std(ddof=1) / math.sqrt(sample.size) + 1e-12   # five standard errors
        assert abs(float(formula) - sample.mean()) <= half


@pytest.mark.parametrize("experts, k, ep", [(128, 8, 8), (256, 8, 64), (384, 8, 32), (32, 4, 8), (128, 4, 64),
                                            (256, 8, 256)])
def test_consecutive_routing_matches_enumeration(experts, k, ep):
    """NeMo AutoModel's FakeBalancedGate: indices = arange(T k).view(T, k) % E; a rank holds a
    contiguous block of E / ep experts; every sender sends the same pattern, so a destination
    node is the sender's own for 1 / nodes of the senders."""
    inside, across = dispatch_copies(_moe(experts, k), 8, ep, "per-rank", "consecutive")
    tokens = 5000
    idx = (np.arange(tokens * k).reshape(tokens, k) % experts) // (experts // ep)
    nodes = math.ceil(ep / 8)
    d_rank = np.mean([len(set(r)) for r in idx])
    d_node = np.mean([len(set(r // min(ep, 8))) for r in idx])
    assert float(inside) == pytest.approx(d_rank, rel=2e-3)    # 5000 tokens: whole periods up to a remainder
    assert float(across) == pytest.approx(d_node * (1 - 1 / nodes), rel=2e-3, abs=1e-12)


def test_the_default_is_the_formula_the_kernel_had():
    """per-expert: k copies inside, min(k, M) (1 - 1/N) across, N = ceil(ep / node size)."""
    w = load_workload("deepseek_v3")
    for ep in (1, 8, 16, 32, 64, 256):
        inside, across = dispatch_copies(w, 8, ep)
        assert float(inside) == 8.0
        assert float(across) == min(8, 4) * (1 - 1 / math.ceil(ep / 8))
    inside, across = dispatch_copies(_moe(64, 6), 8, 32)
    assert (float(inside), float(across)) == (6.0, 6 * (1 - 1 / 4))


@settings(max_examples=60, deadline=None)
@given(log_e=st.integers(3, 9), k=st.integers(1, 8), log_ep=st.integers(0, 9),
       routing=st.sampled_from(["random", "consecutive"]))
def test_a_per_rank_dispatch_never_moves_more(log_e, k, log_ep, routing):
    """One copy per destination GPU: between 1 and min(k, ranks) copies, never more than the
    k per expert; across nodes no more than the nodes other than the sender's."""
    experts, ep = 2 ** log_e, 2 ** min(log_ep, log_e)
    if k > experts:
        return
    w = _moe(experts, k)
    inside, across = (float(x) for x in dispatch_copies(w, 8, ep, "per-rank", routing))
    expert_in, expert_across = (float(x) for x in dispatch_copies(w, 8, ep))
    nodes = math.ceil(ep / 8)
    assert 1.0 - 1e-12 <= inside <= min(k, ep) + 1e-12
    assert inside <= expert_in + 1e-12 and across <= expert_across + 1e-12
    assert 0.0 <= across <= nodes - 1 + 1e-12


def test_a_dense_workload_moves_nothing():
    inside, across = dispatch_copies(load_workload("llama3_8b"), 8, np.array([1, 2]), "per-rank", "random")
    assert inside.tolist() == [0.0, 0.0] and across.tolist() == [0.0, 0.0]


def test_the_step_follows_the_copies():
    """One node: the exposed all-to-all is its latency plus a volume proportional to the
    copies, 8 per expert, the distinct GPUs of random routing, 1 for the consecutive gate."""
    w = _moe(128, 8)
    base = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=64, micro_batch=8, zero_stage=1)
    per_expert = step_time(w, H100, base).ep_exposed
    per_rank = step_time(w, H100, base.replace(ep_dispatch="per-rank", expert_routing="consecutive")).ep_exposed
    random = step_time(w, H100, base.replace(ep_dispatch="per-rank")).ep_exposed
    d_random = float(dispatch_copies(w, 8, 8, "per-rank", "random")[0])
    # the all-to-all's time is its latency plus its volume: affine in the copies (8, d, 1)
    assert per_rank < random < per_expert
    assert (random - per_rank) / (per_expert - per_rank) == pytest.approx((d_random - 1) / (8 - 1), rel=1e-9)
    # dense models and EP 1 are untouched by the choice
    dense = load_workload("llama3_8b")
    p = Plan(tp=1, pp=1, dp=8, global_batch=64)
    assert step_time(dense, H100, p).step_time == step_time(dense, H100, p.replace(ep_dispatch="per-rank")).step_time


def test_plan_files_take_the_keys_and_refuse_a_typo():
    doc = {"workload": "deepseek_v3", "hardware": "h100_sxm", "tp": 1, "pp": 4, "dp": 64, "ep": 64,
           "virtual_stages": 8, "schedule": "interleaved", "layer_split": "uneven", "global_batch": 512,
           "ep_dispatch": "per-rank", "expert_routing": "consecutive"}
    spec = plan_from_document(doc)
    assert spec.plan.ep_dispatch.value == "per-rank" and spec.plan.expert_routing.value == "consecutive"
    with pytest.raises(SpecError, match="ep_dispatch='per-token': expected one of 'per-expert', 'per-rank'"):
        plan_from_document({**doc, "ep_dispatch": "per-token"})
    with pytest.raises(SpecError, match="expert_routing"):
        plan_from_document({**doc, "expert_routing": "roundrobin"})
    with pytest.raises(InvalidParameterError, match="ep_dispatch"):
        validate_plan(_moe(64, 4), Plan(tp=1, pp=1, dp=8, ep=8, global_batch=8, ep_dispatch="deepep"))


def test_the_expert_group_is_placed_expert_tp_ranks_apart():
    """``expert_tp`` (Megatron's expert_tensor_parallel_size) places the EP group: its ranks
    sit expert_tp apart, so a node of 8 holds 8 / expert_tp of them and the copies crossing
    nodes are those of a group spread over ep / (8 / expert_tp) nodes. 1 is the default and
    changes nothing; a wider spread moves more over the slower scale-out network."""
    from markovsim.training._step import _plan_arrays, ep_node_size

    w = _moe(128, 8)
    base = Plan(tp=4, pp=1, dp=16, ep=8, global_batch=64, micro_batch=1, zero_stage=1)
    assert step_time(w, H100, base.replace(expert_tp=1)).step_time == step_time(w, H100, base).step_time
    for etp in (1, 2, 4, 8):
        q = _plan_arrays(validate_plan(w, base.replace(expert_tp=etp)), 0.0, w, H100)
        inside, across = dispatch_copies(w, ep_node_size(8, etp), 8)
        assert (q["ep_in"], q["ep_remote"], q["etp"]) == (float(inside), float(across), etp)
    # per expert with 8 of 8 experts' ranks in one node: nothing crosses; over 4 nodes: 8 x 3/4
    assert float(dispatch_copies(w, ep_node_size(8, 1), 8)[1]) == 0.0
    assert float(dispatch_copies(w, ep_node_size(8, 4), 8)[1]) == pytest.approx(6.0)
    exposed = [step_time(w, H100, base.replace(expert_tp=e)).ep_exposed for e in (1, 2, 4)]
    assert exposed[0] < exposed[1] < exposed[2]


def test_expert_tp_is_checked_against_the_plan():
    w = _moe(128, 8)
    with pytest.raises(InvalidParameterError, match="plan.expert_tp=2: places the expert-parallel group, so it needs ep > 1"):
        validate_plan(w, Plan(tp=2, pp=1, dp=8, global_batch=8, expert_tp=2))
    with pytest.raises(InvalidParameterError, match=r"ep x expert_tp = 32 must divide tp\*cp\*dp = 16"):
        validate_plan(w, Plan(tp=2, pp=1, dp=8, ep=8, global_batch=8, expert_tp=4))
    with pytest.raises(InvalidParameterError, match="plan.expert_tp"):
        validate_plan(w, Plan(tp=2, pp=1, dp=8, ep=8, global_batch=8, expert_tp=0))
    doc = {"workload": "deepseek_v3", "hardware": "h100_sxm", "tp": 2, "pp": 4, "dp": 32, "ep": 32, "expert_tp": 2,
           "virtual_stages": 8, "schedule": "interleaved", "layer_split": "uneven", "global_batch": 512}
    assert plan_from_document(doc).plan.expert_tp == 2


def test_the_dispatch_format_times_the_two_transfers_toward_the_experts():
    """``ep_dispatch_precision``: FP8 halves the bytes of the forward dispatch and of the
    backward's gradients sent to the experts; the two combines stay BF16. The GEMM format
    alone no longer moves the all-to-all (Megatron's dispatchers move BF16 in FP8 runs).
    Per MoE layer and micro-batch a BF16 transfer costs L + V (latency, volume): BF16
    4L + 4V, FP8 4L + 3V; full recomputation repeats the forward pair (6L + 6V against
    6L + 4.5V), so the saving grows by exactly 3/2, whatever L is."""
    w = _moe(128, 8)
    base = Plan(tp=1, pp=1, dp=8, ep=8, global_batch=64, micro_batch=8, zero_stage=1, precision="fp8")
    bf16_gemms = step_time(w, H100, base.replace(precision="bf16")).ep_exposed
    held = step_time(w, H100, base).ep_exposed
    fp8 = step_time(w, H100, base.replace(ep_dispatch_precision="fp8")).ep_exposed
    assert held == bf16_gemms and held > 0  # the default moves BF16 whatever the GEMMs
    assert fp8 / held == pytest.approx(3 / 4, rel=1e-2)  # the volume dominates inside one node
    full = base.replace(recompute="full")
    saving_full = (step_time(w, H100, full).ep_exposed
                   - step_time(w, H100, full.replace(ep_dispatch_precision="fp8")).ep_exposed)
    assert saving_full / (held - fp8) == pytest.approx(1.5, rel=1e-9)


def test_the_dispatch_format_is_checked():
    w = _moe(128, 8)
    with pytest.raises(InvalidParameterError, match="plan.ep_dispatch_precision='fp8': .* needs precision='fp8' "
                                                    "\\(got precision='bf16'\\)"):
        validate_plan(w, Plan(tp=1, pp=1, dp=8, ep=8, global_batch=8, ep_dispatch_precision="fp8"))
    with pytest.raises(InvalidParameterError, match="plan.ep_dispatch_precision='fp32': expected 'bf16' or 'fp8'"):
        validate_plan(w, Plan(tp=1, pp=1, dp=8, ep=8, global_batch=8, precision="fp8", ep_dispatch_precision="fp32"))
    doc = {"workload": "deepseek_v3", "hardware": "h100_sxm", "tp": 1, "pp": 4, "dp": 64, "ep": 64,
           "virtual_stages": 8, "schedule": "interleaved", "layer_split": "uneven", "global_batch": 512,
           "precision": "fp8", "ep_dispatch_precision": "fp8"}
    assert plan_from_document(doc).plan.ep_dispatch_precision.value == "fp8"
    with pytest.raises(SpecError, match="ep_dispatch_precision='int8'"):
        plan_from_document({**doc, "ep_dispatch_precision": "int8"})
    # a plan file's format keys list only the formats they admit, and refuse the others by name
    for key, bad, admitted in (("ep_dispatch_precision", "fp32", "'bf16', 'fp8'"), ("precision", "fp32", "'bf16', 'fp8'"),
                               ("grad_reduce", "fp8", "'fp32', 'bf16'"), ("optimizer_moments", "fp8", "'fp32', 'bf16'")):
        with pytest.raises(SpecError, match=f"{key}='{bad}': expected one of {admitted}$"):
            plan_from_document({**doc, key: bad})
