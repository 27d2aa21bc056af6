"""Sim2Train: step time from operators, pipeline schedules, collectives, memory, stragglers,
linearity, calibration against published runs, what-ifs.

Conventions are documented in each private module: the pipeline bubble as the idle share of
the pipeline timeline (``_pipeline``), parameter and FLOP counting and the MFU conventions
(``_workload``), the operators and their kernel model (``_operators``, ``_hardware``), the
alpha-beta collective costs (``_collectives``), memory (``_memory``), the step-time model
(``_step``), linearity and its batch rules (``_linearity``), calibration (``_calibrate``) and
the ``train`` model kind and validation case (``_outputs``).
"""

from ._collectives import (
    Algorithm as Algorithm,
    Collective as Collective,
    alpha_beta_time as alpha_beta_time,
    collective_time as collective_time,
)
from ._hardware import (
    KERNEL_PARAMETERS as KERNEL_PARAMETERS,
    Efficiency as Efficiency,
    Hardware as Hardware,
    KernelModel as KernelModel,
    LinkLevel as LinkLevel,
    SOFTWARE_STACKS as SOFTWARE_STACKS,
    OVERLAP_KEYS as OVERLAP_KEYS,
    STACK_OVERLAPS as STACK_OVERLAPS,
)
from ._pipeline import (
    Block as Block,
    BlockTimes as BlockTimes,
    Schedule as Schedule,
    Timeline as Timeline,
    pipeline_bubble_fraction as pipeline_bubble_fraction,
    pipeline_bubble_time as pipeline_bubble_time,
    simulate_pipeline as simulate_pipeline,
)
from ._plan import (
    FLASH1_SPEED as FLASH1_SPEED,
    FLASH_BACKWARD_FLOPS as FLASH_BACKWARD_FLOPS,
    AttentionKernel as AttentionKernel,
    EAGER_BYTES as EAGER_BYTES,
    Elementwise as Elementwise,
    EPDispatch as EPDispatch,
    ExpertRouting as ExpertRouting,
    LayerSplit as LayerSplit,
    Plan as Plan,
    Precision as Precision,
    FP8Recipe as FP8Recipe,
    validate_plan as validate_plan,
)
from ._dispatch import dispatch_copies as dispatch_copies
from ._inspect import (
    MemoryBreakdown as MemoryBreakdown,
    Operator as Operator,
    memory_breakdown as memory_breakdown,
    operator_table as operator_table,
)
from ._spec import (
    PlanSpec as PlanSpec,
    load_hardware as load_hardware,
    load_plan as load_plan,
    load_workload as load_workload,
)
from ._spec import (
    hardware_from_document as hardware_from_document,
    plan_from_document as plan_from_document,
    workload_from_document as workload_from_document,
)
from ._step import (
    PLAN_KEYS as PLAN_KEYS,
    RECOMPUTE_CODES as RECOMPUTE_CODES,
    SCHEDULE_CODES as SCHEDULE_CODES,
    StepBreakdown as StepBreakdown,
    breakdown_from as breakdown_from,
    evaluate_plans as evaluate_plans,
    step_time as step_time,
)
from ._linearity import (
    BatchRule as BatchRule,
    FixedGlobalBatch as FixedGlobalBatch,
    FixedReplicaBatch as FixedReplicaBatch,
    GlobalBatches as GlobalBatches,
    LinearityBand as LinearityBand,
    Scaling as Scaling,
    ScalingCurve as ScalingCurve,
    effective_throughput as effective_throughput,
    linearity as linearity,
    linearity_band as linearity_band,
    scale_plan as scale_plan,
    scaling_curve as scaling_curve,
)
from ._calibrate import (
    DEFAULT_BOUNDS as DEFAULT_BOUNDS,
    Calibration as Calibration,
    Run as Run,
    calibrate as calibrate,
    calibrate_cases as calibrate_cases,
    kernels_table as kernels_table,
    predict as predict,
    ROLES as ROLES,
    runs_from_cases as runs_from_cases,
)
from ._search import SearchResult as SearchResult, candidate_plans as candidate_plans, search_plans as search_plans, \
    plan_modules as plan_modules, plan_numerics as plan_numerics, NUMERICS as NUMERICS
from ._straggler import (
    SlowNodes as SlowNodes,
    expected_max_standard_normal as expected_max_standard_normal,
    slow_node_probability as slow_node_probability,
    straggler_delay as straggler_delay,
)
from ._whatif import (
    adapt_expert_gain as adapt_expert_gain,
    adapt_pack_gain as adapt_pack_gain,
    adapt_sr_effect as adapt_sr_effect,
    expert_imbalance as expert_imbalance,
    implied_exposed_share as implied_exposed_share,
    pipeline_makespans as pipeline_makespans,
)
from ._workload import (
    MLA as MLA,
    Attention as Attention,
    FFNKind as FFNKind,
    FlopConvention as FlopConvention,
    MoE as MoE,
    ParameterCount as ParameterCount,
    Recompute as Recompute,
    Workload as Workload,
    flops_per_token as flops_per_token,
    model_flops_per_token as model_flops_per_token,
    op_recompute_shares as op_recompute_shares,
    parameter_count as parameter_count,
)

__all__ = [
    "Algorithm", "Collective", "alpha_beta_time", "collective_time",
    "Efficiency", "Hardware", "LinkLevel", "KernelModel", "KERNEL_PARAMETERS", "SOFTWARE_STACKS", "OVERLAP_KEYS",
    "STACK_OVERLAPS",
    "Block", "BlockTimes", "Schedule", "Timeline", "pipeline_bubble_fraction",
    "pipeline_bubble_time", "simulate_pipeline",
    "AttentionKernel", "Elementwise", "EAGER_BYTES", "FLASH1_SPEED", "FLASH_BACKWARD_FLOPS",
    "EPDispatch", "ExpertRouting", "LayerSplit", "Plan",
    "Precision", "FP8Recipe",
    "validate_plan", "dispatch_copies",
    "MemoryBreakdown", "memory_breakdown", "Operator", "operator_table",
    "PlanSpec", "load_hardware", "load_plan", "load_workload",
    "RECOMPUTE_CODES", "SCHEDULE_CODES", "StepBreakdown", "evaluate_plans", "step_time",
    "MLA", "Attention", "FFNKind", "FlopConvention", "MoE", "ParameterCount", "Recompute", "Workload",
    "flops_per_token", "model_flops_per_token", "op_recompute_shares", "parameter_count",
    "BatchRule", "FixedGlobalBatch", "FixedReplicaBatch", "GlobalBatches", "LinearityBand",
    "Scaling", "ScalingCurve", "effective_throughput", "linearity", "linearity_band", "scale_plan",
    "scaling_curve",
    "SearchResult", "candidate_plans", "search_plans", "plan_modules", "plan_numerics", "NUMERICS",
    "SlowNodes", "expected_max_standard_normal", "slow_node_probability", "straggler_delay",
    "adapt_expert_gain", "adapt_pack_gain", "adapt_sr_effect", "expert_imbalance",
    "implied_exposed_share", "pipeline_makespans",
]
__all__ += ["hardware_from_document", "plan_from_document", "workload_from_document"]
__all__ += ["DEFAULT_BOUNDS", "Calibration", "ROLES", "Run", "calibrate", "calibrate_cases", "kernels_table", "predict",
            "runs_from_cases"]

from ._outputs import (  # noqa: E402
    MODEL_KIND as MODEL_KIND,
    PLAN_OUTPUT_UNITS as PLAN_OUTPUT_UNITS,
    batch_rule as batch_rule,
    linearity_points as linearity_points,
    plan_caveats as plan_caveats,
    plan_outputs as plan_outputs,
)
from ._evidence import linearity_evidence as linearity_evidence, plan_evidence as plan_evidence  # noqa: E402

__all__ += ["MODEL_KIND", "PLAN_OUTPUT_UNITS", "batch_rule", "linearity_evidence", "linearity_points", "plan_caveats",
            "plan_evidence", "plan_outputs"]

from .._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
