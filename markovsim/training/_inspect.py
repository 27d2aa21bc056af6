"""What a plan holds per rank: its memory (with a ``fits`` flag) and its operator table.

Both read the step-time model's host-side constants (:mod:`._step`), the memory formulas
(:mod:`._memory`) and the operator formulas (:mod:`._operators`); see those modules for the
mathematics.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._errors import InvalidParameterError
from ._hardware import Hardware
from ._operators import _attention_core, _elementwise_bytes, _gemms, cast_bytes, eager_bytes, gemm_precision, \
    gemm_seconds
from ._plan import Plan, validate_plan
from ._step import _plan_arrays, holds_both_ends, kernel_constants, recompute_split, stage_memory, \
    stage_shares
from ._workload import Workload

__all__ = ["MemoryBreakdown", "memory_breakdown", "Operator", "operator_table"]


@dataclasses.dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per rank on the fuller of the first and the last pipeline stage, and whether
    it fits.

    ``usable_bytes`` = ``usable_memory`` x HBM; ``fits`` = ``total <= usable_bytes``;
    ``stage``: which rank the numbers are of, ``"first"`` or ``"last"`` (the first on a tie),
    or ``"both"`` where one rank holds both ends (no pipeline, or DualPipe).
    """

    weights: float
    gradients: float
    optimizer: float
    activations: float
    total: float
    usable_bytes: float
    fits: bool
    stage: str


def memory_breakdown(workload, hardware, plan, *, efficiency=None) -> MemoryBreakdown:
    """Memory of ``plan`` per rank (module docstring), as a number with a ``fits`` flag.

    >>> from markovsim.training import load_plan
    >>> spec = load_plan("pangu_ultra_135b_8k")
    >>> m = memory_breakdown(spec.workload, spec.hardware, spec.plan, efficiency=spec.efficiency)
    >>> m.fits, round(m.total / 2**30, 1) == round(m.weights / 2**30 + m.gradients / 2**30 + m.optimizer / 2**30 + m.activations / 2**30, 1)
    (True, True)
    """
    eff = hardware.efficiency(efficiency)
    plan = validate_plan(workload, plan)
    c = {k: np.asarray(v) for k, v in kernel_constants(workload, hardware, eff).items()}
    q = {k: np.asarray(v, dtype=float) for k, v in _plan_arrays(plan, 0.0, workload, hardware).items()}
    sh = stage_shares(c, q, np)
    q_kept, q_full, phi = recompute_split(c, q, sh, np)
    mem = stage_memory(c, q, sh, q_kept, q_full, phi, q["gbs"] / (q["dp"] * q["mb"]), np)
    weights, grads, opt, act = mem["weights"], mem["grads"], mem["optimizer"], mem["activations"]
    total = float(mem["total"])
    usable = eff.usable_memory * hardware.hbm_bytes
    stage = "both" if bool(holds_both_ends(q)) else ("first" if bool(mem["first"]) else "last")
    return MemoryBreakdown(float(weights), float(grads), float(opt), float(act), total, usable, total <= usable,
                           stage)


@dataclasses.dataclass(frozen=True)
class Operator:
    """One operator of a layer, per micro-batch on one rank.

    Attributes:
        name: the operator (``qkv``, ``attn_out``, ``ffn_in``, ``attention_core``, ...).
        where: ``attn``, ``dense``, ``moe``, ``logit`` (which layers hold it) or
            ``elementwise``.
        shape: ``(M, N, K)`` of one GEMM (``None`` for other operators).
        count: GEMMs of that shape (e.g. local experts).
        flops: forward FLOPs, all counted GEMMs.
        forward_s: forward seconds on the hardware's kernel model.
        backward_s: backward seconds.
    """

    name: str
    where: str
    shape: tuple[float, float, float] | None
    count: float
    flops: float
    forward_s: float
    backward_s: float


def operator_table(workload: Workload, hardware: Hardware, plan: Plan) -> tuple[Operator, ...]:
    """The per-layer operator list of ``plan`` with shapes, FLOPs and times (module
    docstring), for one micro-batch on one rank; operators absent from the model (MLA
    projections of a GQA model, experts of a dense one) are left out.

    Raises:
        InvalidParameterError: the hardware has no fitted kernel model, or a bad plan.
    """
    plan = validate_plan(workload, plan)
    if hardware.kernels is None:
        raise InvalidParameterError(
            f"{hardware.name}: no fitted kernel model ([kernels] in its file): the operator table "
            "needs one")
    c = {k: np.asarray(v) for k, v in kernel_constants(workload, hardware).items()}
    q = {k: np.asarray(v, dtype=float) for k, v in _plan_arrays(plan, 0.0, workload, hardware).items()}
    precision = tuple(float(x) for x in gemm_precision(c, q, np))
    rows = []
    for name, where, M, N, K, count in _gemms(c, q, np):
        cnt = float(count)
        if cnt <= 0 or float(M) <= 0 or (where == "moe" and workload.moe is None):
            continue
        if where == "dense" and workload.moe is not None and workload.moe_layers == workload.layers:
            continue
        t = float(gemm_seconds(name, M, N, K, count, c, precision))
        rows.append(Operator(name, where, (float(M), float(N), float(K)), cnt, float(2 * M * N * K * count),
                             t, 2.0 * t))
    core_f, core_b = _attention_core(c, q, np)
    s, cp, b, t = c["seq"], q["cp"], q["mb"], q["tp"]
    flops = float(2.0 * b * (s / cp) * s * (c["heads"] / t) * (c["d_qk"] + c["d_v"]))
    rows.append(Operator("attention_core", "attn", None, 1.0, flops, float(core_f), float(core_b)))
    common, dense_b, moe_b, logit_b = _elementwise_bytes(c, q, np)
    bw = float(c["mem_bw"])
    if float(q["fp8"]) > 0:
        # FP8 casts (cast_bytes) by part of the layer
        for label, where in (("attention", "attn"), ("mlp", "dense"), ("moe", "moe")):
            part = [cast_bytes(r.name, *r.shape, r.count) for r in rows if r.where == where and r.shape]
            if part:
                fwd, bwd = (sum(x) for x in zip(*part))
                rows.append(Operator(f"fp8_casts_{label}", "elementwise", None, 1.0, 0.0, fwd / bw, bwd / bw))
    # under elementwise = "eager" the rotary embedding, GQA's key/value repeat and the
    # attention output's copy get a row of their own (their bytes are in common)
    eager_attn = float(eager_bytes(c, q, np)[0])
    for name, where, by in (("norms_residuals_dropout", "attn", common - eager_attn),
                            ("eager_rotary_repeat_copy", "attn", eager_attn), ("activation", "dense", dense_b),
                            ("moe_permute_activation", "moe", moe_b), ("cross_entropy", "logit", logit_b / 3.0)):
        if float(by) > 0 and not (where == "moe" and workload.moe is None):
            rows.append(Operator(name, "elementwise", None, 1.0, 0.0, float(by) / bw, 2.0 * float(by) / bw))
    return tuple(rows)
