"""Sim2Infer availability: large expert-parallel inference fleets and tiered recovery."""
from ._fleet import (
    MONTH as MONTH,
    Fleet as Fleet,
    FleetChain as FleetChain,
    FleetResult as FleetResult,
    InstanceState as InstanceState,
    analyse_fleet as analyse_fleet,
    fleet_chain as fleet_chain,
    instance_chain as instance_chain,
)
from ._simulate import (
    Estimate as Estimate,
    SimulationResult as SimulationResult,
    simulate_fleet as simulate_fleet,
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
    "MONTH", "Fleet", "FleetChain", "FleetResult", "InstanceState", "analyse_fleet", "fleet_chain",
    "instance_chain", "Estimate", "SimulationResult", "simulate_fleet",
    "ElasticContinuation", "FastRestart", "HardwareRepair", "InstanceRestart", "RecoveryTiers", "Tier",
    "TokenRetry", "TrafficSwitch",
]
