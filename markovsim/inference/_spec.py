"""Inference model files (TOML): a MoE model served by prefill and decode instance pools.

Read strictly with :mod:`markovsim._io`: unknown keys, missing units, probabilities
above 1 and negative rates are errors that name the field. The layout of each role gives
its cards per instance: ``expert_parallel`` devices carry the routed experts, the
attention runs as ``tensor_parallel x data_parallel`` over the same devices, and a card
holds ``devices_per_card`` devices (CloudMatrix384: two dies per Ascend 910C).

Sections: ``[model]`` (architecture), ``[hardware]``, ``[faults]``, ``[workload]``,
``[prefill]``, ``[decode]``, ``[tiers.*]`` and ``[target]``; see ``models/inference/``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .._errors import SpecError
from .._io import Table, load_with, reads_document
from ._keydocs import KEY_DOCS
from ._fleet import DEFAULT_MAX_RECOVERING, DEFAULT_MAX_RECOVERING_UNLIMITED, Fleet
from ._frontier import DecodeMemoryModel, decode_batch_per_device, decode_tokens_per_s_per_card
from ._tiers import (ElasticContinuation, FastRestart, HardwareRepair, InstanceRestart, RecoveryTiers,
                     TokenRetry, TrafficSwitch)

__all__ = ["Layout", "InferenceModel", "load_inference_model", "inference_model_from_document"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """The parallel layout of one instance.

    Attributes:
        expert_parallel: devices over which the routed experts are spread.
        tensor_parallel: attention tensor-parallel degree.
        data_parallel: attention data-parallel degree (``tp x dp = ep``).
        devices_per_card: devices per card.
    """

    expert_parallel: int
    tensor_parallel: int
    data_parallel: int
    devices_per_card: int

    @property
    def cards(self) -> int:
        """Cards per instance, E."""
        return self.expert_parallel // self.devices_per_card


@dataclasses.dataclass(frozen=True)
class InferenceModel:
    """Everything a model file describes.

    Attributes:
        name: free text.
        serving: decode throughput model (per device).
        prefill, decode: the two instance pools (:class:`Fleet`).
        prefill_layout, decode_layout: their layouts.
        tiers: the recovery ladder.
        target: the SLO availability target.
        decode_demand_tokens_per_s: decode tokens per second the fleet must serve.
        output_tokens_per_request: mean output tokens per request.
        candidate_sizes: decode instance sizes (cards) for the frontier search.
        prefill_max_recovering, decode_max_recovering: the truncation of each pool's
            analysis, most instances recovering at once (``max_recovering`` of
            :func:`~markovsim.inference.analyze_fleet` for a finite spare pool, of
            :func:`~markovsim.inference.analyze_independent_fleet` for an unlimited one);
            None: their defaults (``DEFAULT_MAX_RECOVERING`` and
            ``DEFAULT_MAX_RECOVERING_UNLIMITED`` of the fleet module, 3 and 12).
    """

    name: str
    serving: DecodeMemoryModel
    prefill: Fleet
    decode: Fleet
    prefill_layout: Layout
    decode_layout: Layout
    tiers: RecoveryTiers
    target: float
    decode_demand_tokens_per_s: float
    output_tokens_per_request: float
    candidate_sizes: tuple[int, ...]
    prefill_max_recovering: int | None = None
    decode_max_recovering: int | None = None

    def max_recovering(self, role: str) -> int:
        """The truncation used for ``role`` (``"prefill"`` or ``"decode"``)."""
        given = getattr(self, f"{role}_max_recovering")
        if given is not None:
            return given
        finite_pool = getattr(self, role).spare_cards is not None
        return DEFAULT_MAX_RECOVERING if finite_pool else DEFAULT_MAX_RECOVERING_UNLIMITED


def _layout(t: Table, devices_per_card: int) -> Layout:
    ep = t.integer("expert_parallel", minimum=1)
    tp = t.integer("tensor_parallel", 1, minimum=1)
    dp = t.integer("data_parallel", minimum=1)
    if tp * dp != ep:
        raise SpecError(f"{t.where}: tensor_parallel x data_parallel = {tp} x {dp} = {tp * dp} "
                        f"must equal expert_parallel={ep} (attention and experts share the devices)")
    if ep % devices_per_card:
        raise SpecError(f"{t.where}.expert_parallel={ep}: not a whole number of cards of "
                        f"{devices_per_card} devices (hardware.devices_per_card)")
    return Layout(ep, tp, dp, devices_per_card)


def _max_recovering(t: Table) -> int | None:
    """``max_recovering``: absent means the analysis' default."""
    if "max_recovering" not in t:
        t.raw("max_recovering", None)
        return None
    return t.integer("max_recovering", minimum=1)


def _spares(t: Table) -> int | None:
    """``spare_cards``: absent means an unlimited pool."""
    if "spare_cards" not in t:
        t.raw("spare_cards", None)
        return None
    return t.integer("spare_cards", minimum=0)


def _optional(tiers: Table, key: str):
    if key not in tiers:
        tiers.raw(key, None)
        return None
    return tiers.table(key)


def _tiers(t: Table) -> RecoveryTiers:
    rs = t.table("restart")
    restart = InstanceRestart(rs.quantity("restart_time", "time", strictly_positive=True))
    rs.finish()
    rp = t.table("repair")
    repair = HardwareRepair(rp.quantity("repair_time", "time", strictly_positive=True))
    rp.finish()
    out = {}
    if (s := _optional(t, "token_retry")) is not None:
        out["token_retry"] = TokenRetry(s.quantity("stall_time", "time", strictly_positive=True),
                                        s.probability("coverage"))
        s.finish()
    if (s := _optional(t, "fast_restart")) is not None:
        out["fast_restart"] = FastRestart(s.quantity("restart_time", "time", strictly_positive=True),
                                          s.probability("coverage"))
        s.finish()
    if (s := _optional(t, "traffic_switch")) is not None:
        out["traffic_switch"] = TrafficSwitch(s.quantity("switch_time", "time", strictly_positive=True),
                                              s.probability("coverage"),
                                              s.quantity("manual_time", "time", strictly_positive=True))
        s.finish()
    if (s := _optional(t, "elastic")) is not None:
        out["elastic"] = ElasticContinuation(
            s.quantity("migration_time", "time", strictly_positive=True), s.probability("coverage"),
            s.quantity("reintegration_time", "time", strictly_positive=True),
            s.probability("degraded_capacity", None))
        s.finish()
    t.finish()
    return RecoveryTiers(restart, repair, **out).validate()


def load_inference_model(path: str | Path) -> InferenceModel:
    """Read an inference model file (see ``models/inference/*.toml``).

    Args:
        path: the TOML file, or the bare name of a preset in ``models/inference/``.

    Returns:
        :class:`InferenceModel` with validated fleets and tiers.

    Raises:
        SpecError: unknown keys, missing units, values out of range (the message names the field).
    """
    return load_with(inference_model_from_document, path, folder="inference")


@reads_document
def inference_model_from_document(doc: dict, *, where: str = "inference model",
                                  base: Path | None = None) -> InferenceModel:
    """An inference model from its document (see :func:`load_inference_model`); errors name
    ``where``."""
    return _read(Table(doc, "", schema="inference", docs=KEY_DOCS["inference"]))


def _read(root: Table) -> InferenceModel:
    name = root.text("name")

    m = root.table("model")
    params = m.quantity("total_parameters", "ratio", strictly_positive=True)
    layers = m.integer("layers", minimum=1)
    moe_layers = m.integer("moe_layers", minimum=0)
    if moe_layers > layers:
        raise SpecError(f"model.moe_layers={moe_layers}: more than model.layers={layers}")
    hidden = m.integer("hidden_size", minimum=1)
    expert_ffn = m.integer("expert_ffn_size", minimum=1)
    experts = m.integer("routed_experts", minimum=1)
    bytes_per_param = m.quantity("weight_bytes_per_parameter", "ratio", strictly_positive=True)
    kv_elements = m.integer("kv_cache_elements_per_token_per_layer", minimum=1)
    kv_bytes = m.quantity("kv_cache_bytes_per_element", "ratio", strictly_positive=True)
    m.finish()
    expert_params = 3.0 * hidden * expert_ffn * experts * moe_layers  # gate, up, down
    if expert_params >= params:
        raise SpecError(f"model: routed-expert parameters {expert_params:.4g} exceed "
                        f"model.total_parameters={params:.4g}")

    h = root.table("hardware")
    dpc = h.integer("devices_per_card", 1, minimum=1)
    hbm = h.quantity("hbm", "data", strictly_positive=True)
    bw = h.quantity("hbm_bandwidth", "bandwidth", strictly_positive=True)
    eff = h.probability("bandwidth_efficiency")
    reserved = h.quantity("reserved_memory", "data")
    h.finish()

    f = root.table("faults")
    lam = f.quantity("card_fault_rate", "rate")
    soft = f.probability("soft_fault_share")
    f.finish()

    w = root.table("workload")
    context = w.quantity("context_tokens", "ratio", strictly_positive=True)
    tpot = w.quantity("time_per_output_token", "time", strictly_positive=True)
    out_tokens = w.quantity("output_tokens_per_request", "ratio", strictly_positive=True)
    demand_tokens = w.quantity("decode_demand_tokens_per_s", "ratio", strictly_positive=True)
    prefill_demand = w.quantity("prefill_demand_instances", "ratio", strictly_positive=True)
    w.finish()

    serving = DecodeMemoryModel(
        replicated_weight_bytes=(params - expert_params) * bytes_per_param,
        expert_weight_bytes=expert_params * bytes_per_param,
        kv_bytes_per_token=layers * kv_elements * kv_bytes,
        context_tokens=context, hbm_bytes=hbm, reserved_bytes=reserved, hbm_bandwidth=bw,
        bandwidth_efficiency=eff, time_per_output_token=tpot, devices_per_card=dpc)
    try:
        serving.validate()
    except Exception as exc:  # InvalidParameterError -> SpecError naming the file section
        raise SpecError(str(exc)) from None

    pf = root.table("prefill")
    p_layout = _layout(pf, dpc)
    p_k = pf.integer("instances", minimum=1)
    p_sp = _spares(pf)
    p_j = _max_recovering(pf)
    pf.finish()
    dc = root.table("decode")
    d_layout = _layout(dc, dpc)
    d_k = dc.integer("instances", minimum=1)
    d_sp = _spares(dc)
    d_j = _max_recovering(dc)
    sizes = dc.raw("candidate_sizes", (d_layout.cards,), types=(list, tuple))
    if not sizes or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in sizes):
        raise SpecError(f"decode.candidate_sizes={sizes!r}: expected a list of card counts >= 1")
    dc.finish()

    tiers = _tiers(root.table("tiers"))
    tg = root.table("target")
    target = tg.probability("slo_availability")
    tg.finish()
    root.finish()

    E = d_layout.cards
    tau = decode_tokens_per_s_per_card(serving, E)
    if tau <= 0:
        raise SpecError(f"decode.expert_parallel={d_layout.expert_parallel}: the model's weights do not "
                        "fit in hardware.hbm on this many devices")
    per_instance = tau * E
    decode = Fleet(instances=d_k, cards_per_instance=E, card_fault_rate=lam, soft_fault_share=soft,
                   demand=demand_tokens / per_instance, spare_cards=d_sp,
                   requests_per_s=per_instance / out_tokens,
                   inflight_requests=decode_batch_per_device(serving, E) * E * dpc,
                   tokens_per_s=per_instance)
    prefill = Fleet(instances=p_k, cards_per_instance=p_layout.cards, card_fault_rate=lam,
                    soft_fault_share=soft, demand=prefill_demand, spare_cards=p_sp,
                    requests_per_s=decode.requests_per_s * decode.demand / prefill_demand)
    for role, fl in (("decode", decode), ("prefill", prefill)):
        try:
            fl.validate()
        except Exception as exc:
            raise SpecError(f"{role}: {exc}") from None
    return InferenceModel(name, serving, prefill, decode, p_layout, d_layout, tiers, target,
                          demand_tokens, out_tokens, tuple(sizes), p_j, d_j)
