"""Sim2Availability: faults, MTBF scaling, checkpoints, recovery tiers and goodput.

For a training job of N accelerators on a described cluster: how much of the wall-clock
time is durable useful training (goodput), where the rest goes, and which change buys the
most. Analytic (exact renewal / semi-Markov, solved with the engine) and a JAX Monte-Carlo
twin that checks it. Times in seconds, rates per second.
"""

from .. import _config  # noqa: F401  (float64 first)
from ._checkpoint import (
    checkpoint_goodput as checkpoint_goodput,
    daly_interval as daly_interval,
    expected_ettr_first_order as expected_ettr_first_order,
    expected_segment_time as expected_segment_time,
    optimal_interval as optimal_interval,
    optimal_interval_and_goodput as optimal_interval_and_goodput,
    young_interval as young_interval,
)
from ._faults import (
    BlastRadius as BlastRadius,
    Component as Component,
    Effect as Effect,
    FaultCatalogue as FaultCatalogue,
    FaultMode as FaultMode,
    interruption_rate as interruption_rate,
    job_mtbf as job_mtbf,
    mode_rates as mode_rates,
    mtbf_doubling_ratio as mtbf_doubling_ratio,
    per_card_fault_rate as per_card_fault_rate,
    superlinear_share_for_ratio as superlinear_share_for_ratio,
)
from ._goodput import (
    CAUSES as CAUSES,
    GoodputResult as GoodputResult,
    analyze as analyze,
    goodput as goodput,
    goodput_sensitivities as goodput_sensitivities,
    time_to_train as time_to_train,
)
from ._optimum import (
    IntervalOptimum as IntervalOptimum,
    checkpoint_interval_optimum as checkpoint_interval_optimum,
    optimal_checkpoint_interval as optimal_checkpoint_interval,
)
from .._estimate import Estimate as Estimate
from .._status import ResultStatus as ResultStatus
from ._lambertw import lambertw as lambertw
from ._model import (
    AvailabilityModel as AvailabilityModel,
    CheckpointPolicy as CheckpointPolicy,
    RecoveryTier as RecoveryTier,
    Rollback as Rollback,
    SaveMode as SaveMode,
    SparePool as SparePool,
    min_background_interval as min_background_interval,
    single_tier_model as single_tier_model,
)
from ._simulate import SimulationResult as SimulationResult, simulate as simulate
from ._spec import (
    RecoveryPlan as RecoveryPlan,
    build_model as build_model,
    load_cluster as load_cluster,
    load_faults as load_faults,
    load_model as load_model,
    load_recovery as load_recovery,
)
from ._topology import (
    ClusterShape as ClusterShape,
    FatTree as FatTree,
    component_counts as component_counts,
    fat_tree_levels as fat_tree_levels,
)

__all__ = [
    # checkpoint formulas
    "young_interval", "daly_interval", "optimal_interval", "expected_segment_time",
    "checkpoint_goodput", "optimal_interval_and_goodput", "expected_ettr_first_order", "lambertw",
    # faults and cluster shape
    "Effect", "BlastRadius", "Component", "FaultMode", "FaultCatalogue", "mode_rates",
    "interruption_rate", "job_mtbf", "per_card_fault_rate", "mtbf_doubling_ratio",
    "superlinear_share_for_ratio", "ClusterShape", "FatTree", "component_counts", "fat_tree_levels",
    # tiered model
    "Rollback", "SaveMode", "RecoveryTier", "CheckpointPolicy", "SparePool", "AvailabilityModel",
    "single_tier_model", "CAUSES", "GoodputResult", "analyze", "goodput", "goodput_sensitivities",
    "optimal_checkpoint_interval", "time_to_train", "IntervalOptimum", "checkpoint_interval_optimum",
    "min_background_interval", "ResultStatus", "Estimate",
    # model files
    "RecoveryPlan", "build_model", "load_cluster", "load_faults", "load_model", "load_recovery",
    # Monte-Carlo twin
    "SimulationResult", "simulate",
]
