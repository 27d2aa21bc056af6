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
    time_to_train as time_to_train,
)
from ._sensitivity import goodput_sensitivities as goodput_sensitivities
from ._optimum import (
    IntervalOptimum as IntervalOptimum,
    analyze_and_optimum as analyze_and_optimum,
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
from ._spec import (
    cluster_from_document as cluster_from_document,
    faults_from_document as faults_from_document,
    recovery_from_document as recovery_from_document,
)
from ._job import (
    JOB_OUTPUT_UNITS as JOB_OUTPUT_UNITS,
    JOB_REFERENCES as JOB_REFERENCES,
    MODEL_KIND as MODEL_KIND,
    Job as Job,
    is_cluster as is_cluster,
    is_job as is_job,
    is_recovery as is_recovery,
    job_from_document as job_from_document,
    job_outputs as job_outputs,
    load_job as load_job,
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
__all__ += ["cluster_from_document", "faults_from_document", "recovery_from_document"]
__all__ += ["JOB_OUTPUT_UNITS", "JOB_REFERENCES", "MODEL_KIND", "Job", "is_cluster", "is_job", "is_recovery",
            "job_from_document", "job_outputs", "load_job"]

# fault models from data (faults helper): logs, fits, phase-type repair, bursts, predictions
from ._calibrate import (  # noqa: E402
    CalibrationResult as CalibrationResult,
    PublishedRunCheck as PublishedRunCheck,
    calibrate_catalogue as calibrate_catalogue,
    poisson_rate_interval as poisson_rate_interval,
    published_run_check as published_run_check,
)
from ._catalogue_io import (  # noqa: E402
    FittedCatalogue as FittedCatalogue,
    fault_catalogue_from_fit as fault_catalogue_from_fit,
    load_fitted_catalogue as load_fitted_catalogue,
    write_fault_catalogue as write_fault_catalogue,
    write_fitted_catalogue as write_fitted_catalogue,
)
from ._common_cause import (  # noqa: E402
    BurstSizes as BurstSizes,
    MarkovModulatedPoisson as MarkovModulatedPoisson,
    MMPPFit as MMPPFit,
    Shocks as Shocks,
    cluster_shocks as cluster_shocks,
    fit_burst_sizes as fit_burst_sizes,
    fit_mmpp as fit_mmpp,
)
from ._faultsim import InitialState as InitialState, simulate_fault_log as simulate_fault_log  # noqa: E402
from ._fit import (  # noqa: E402
    FaultModel as FaultModel,
    FaultModelFit as FaultModelFit,
    FittedValue as FittedValue,
    RateClassFit as RateClassFit,
    fit_fault_log as fit_fault_log,
    fit_rate_classes as fit_rate_classes,
)
from ._gof import (  # noqa: E402
    CheckRow as CheckRow,
    GoodnessOfFit as GoodnessOfFit,
    goodness_of_fit as goodness_of_fit,
    kaplan_meier as kaplan_meier,
    ks_distance as ks_distance,
    window_statistics as window_statistics,
)
from ._logs import (  # noqa: E402
    INFINITEHBD_NODES as INFINITEHBD_NODES,
    INFINITEHBD_REST as INFINITEHBD_REST,
    INFINITEHBD_WINDOW as INFINITEHBD_WINDOW,
    FaultLog as FaultLog,
    IncidentLog as IncidentLog,
    dispersion_index as dispersion_index,
    infinitehbd_trace as infinitehbd_trace,
    read_fault_log as read_fault_log,
    read_incident_log as read_incident_log,
)
from ._mtbf_scaling import (  # noqa: E402
    MtbfScalingFinding as MtbfScalingFinding,
    Reach as Reach,
    cluster_fault_rate as cluster_fault_rate,
    job_interruption_rate as job_interruption_rate,
    mtbf_elasticity as mtbf_elasticity,
    mtbf_ratio as mtbf_ratio,
    mtbf_scaling_finding as mtbf_scaling_finding,
)
from ._phasetype import (  # noqa: E402
    PhaseForm as PhaseForm,
    PhaseType as PhaseType,
    PhaseTypeFit as PhaseTypeFit,
    coxian as coxian,
    erlang as erlang,
    exponential as exponential,
    fit_phase_type as fit_phase_type,
    hyperexponential as hyperexponential,
)
from ._predict import (  # noqa: E402
    Band as Band,
    TrainingDistributions as TrainingDistributions,
    TrainingJob as TrainingJob,
    WindowPrediction as WindowPrediction,
    predict_next_window as predict_next_window,
    training_distributions as training_distributions,
)

__all__ += [
    # logs
    "FaultLog", "IncidentLog", "read_fault_log", "read_incident_log", "infinitehbd_trace", "dispersion_index",
    "INFINITEHBD_NODES", "INFINITEHBD_WINDOW", "INFINITEHBD_REST",
    # phase-type distributions
    "PhaseType", "PhaseForm", "PhaseTypeFit", "exponential", "hyperexponential", "coxian", "erlang",
    "fit_phase_type",
    # bursts and common cause
    "Shocks", "cluster_shocks", "BurstSizes", "fit_burst_sizes", "MarkovModulatedPoisson", "MMPPFit", "fit_mmpp",
    # fitted fault models, checks, predictions
    "FaultModel", "FaultModelFit", "FittedValue", "RateClassFit", "fit_fault_log", "fit_rate_classes",
    "InitialState", "simulate_fault_log", "CheckRow", "GoodnessOfFit", "goodness_of_fit", "kaplan_meier",
    "ks_distance", "window_statistics", "Band", "WindowPrediction", "predict_next_window", "TrainingJob",
    "TrainingDistributions", "training_distributions",
    # catalogues and calibration
    "fault_catalogue_from_fit", "write_fault_catalogue", "write_fitted_catalogue", "FittedCatalogue",
    "load_fitted_catalogue", "CalibrationResult", "calibrate_catalogue", "PublishedRunCheck",
    "published_run_check", "poisson_rate_interval",
    # MTBF scaling with correlated failures
    "Reach", "cluster_fault_rate", "mtbf_ratio", "mtbf_elasticity", "job_interruption_rate",
    "MtbfScalingFinding", "mtbf_scaling_finding",
]
from ._infinitehbd import (  # noqa: E402
    INFINITEHBD_EFFECTS as INFINITEHBD_EFFECTS,
    infinitehbd_fit as infinitehbd_fit,
    infinitehbd_rest_prediction as infinitehbd_rest_prediction,
    write_infinitehbd_catalogue as write_infinitehbd_catalogue,
)

__all__ += ["INFINITEHBD_EFFECTS", "infinitehbd_fit", "infinitehbd_rest_prediction", "write_infinitehbd_catalogue"]
from ._pool_chain import (  # noqa: E402
    MAX_POOL_STATES as MAX_POOL_STATES,
    PoolChainTooLargeError as PoolChainTooLargeError,
    cluster_fault_rate_with_repair as cluster_fault_rate_with_repair,
    repair_mixture as repair_mixture,
)

__all__ += ["MAX_POOL_STATES", "PoolChainTooLargeError", "cluster_fault_rate_with_repair", "repair_mixture"]
__all__ += ["analyze_and_optimum"]


from .._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
