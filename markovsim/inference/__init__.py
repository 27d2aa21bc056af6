"""Sim2Infer availability: large expert-parallel inference fleets and tiered recovery."""
from ._catalogue import fault_rates_from_catalogue as fault_rates_from_catalogue
from ._fleet import (
    MONTH as MONTH,
    Fleet as Fleet,
    FleetChain as FleetChain,
    FleetResult as FleetResult,
    InstanceState as InstanceState,
    analyse_fleet as analyse_fleet,
    analyse_independent_fleet as analyse_independent_fleet,
    analyze_fleet as analyze_fleet,
    analyze_independent_fleet as analyze_independent_fleet,
    fleet_chain as fleet_chain,
    instance_chain as instance_chain,
)
from ._frontier import (
    DecodeMemoryModel as DecodeMemoryModel,
    FrontierPoint as FrontierPoint,
    Measure as Measure,
    cheapest_fleet as cheapest_fleet,
    decode_batch_per_device as decode_batch_per_device,
    decode_tokens_per_s_per_card as decode_tokens_per_s_per_card,
    frontier_optimum as frontier_optimum,
    tier_ladder as tier_ladder,
)
from .._estimate import Estimate as Estimate
from .._status import ResultStatus as ResultStatus
from ._simulate import (
    SimulationResult as SimulationResult,
    simulate_fleet as simulate_fleet,
)
from ._spec import (
    InferenceModel as InferenceModel,
    Layout as Layout,
    load_inference_model as load_inference_model,
)
from ._tiers import (
    ElasticContinuation as ElasticContinuation,
    FastRestart as FastRestart,
    HardwareRepair as HardwareRepair,
    InstanceRestart as InstanceRestart,
    RecoveryTiers as RecoveryTiers,
    Tier as Tier,
    TokenRetry as TokenRetry,
    TrafficSwitch as TrafficSwitch,
)

__all__ = [
    "fault_rates_from_catalogue",
    "MONTH", "Fleet", "FleetChain", "FleetResult", "InstanceState", "analyze_fleet", "analyze_independent_fleet",
    "analyse_fleet", "analyse_independent_fleet", "fleet_chain", "frontier_optimum", "ResultStatus",
    "instance_chain", "DecodeMemoryModel", "FrontierPoint", "Measure", "cheapest_fleet", "decode_batch_per_device",
    "decode_tokens_per_s_per_card", "tier_ladder", "InferenceModel", "Layout", "load_inference_model", "Estimate", "SimulationResult", "simulate_fleet",
    "ElasticContinuation", "FastRestart", "HardwareRepair", "InstanceRestart", "RecoveryTiers", "Tier",
    "TokenRetry", "TrafficSwitch",
]

from ._spec import inference_model_from_document as inference_model_from_document  # noqa: E402
from ._outputs import (  # noqa: E402
    FLEET_OUTPUT_UNITS as FLEET_OUTPUT_UNITS,
    MODEL_KIND as MODEL_KIND,
    fleet_outputs as fleet_outputs,
    fleet_results as fleet_results,
)

__all__ += ["inference_model_from_document", "FLEET_OUTPUT_UNITS", "MODEL_KIND", "fleet_outputs", "fleet_results"]

from .._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
