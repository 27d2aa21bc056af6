"""Sim2Train: step time, pipeline schedules, collectives, stragglers, linearity, what-ifs.

Conventions are documented in each private module: the pipeline bubble as the idle share of
the pipeline timeline (``_pipeline``), parameter and FLOP counting (``_workload``), the
alpha-beta collective costs (``_collectives``), and the step-time model (``_step``).
"""

from ._collectives import (
    Algorithm as Algorithm,
    Collective as Collective,
    alpha_beta_time as alpha_beta_time,
    collective_time as collective_time,
)
from ._hardware import Efficiency as Efficiency, Hardware as Hardware, LinkLevel as LinkLevel
from ._pipeline import (
    Block as Block,
    BlockTimes as BlockTimes,
    Schedule as Schedule,
    Timeline as Timeline,
    pipeline_bubble_fraction as pipeline_bubble_fraction,
    pipeline_bubble_time as pipeline_bubble_time,
    simulate_pipeline as simulate_pipeline,
)
from ._plan import LayerSplit as LayerSplit, Plan as Plan, validate_plan as validate_plan
from ._spec import (
    PlanSpec as PlanSpec,
    load_hardware as load_hardware,
    load_plan as load_plan,
    load_workload as load_workload,
)
from ._step import (
    RECOMPUTE_CODES as RECOMPUTE_CODES,
    SCHEDULE_CODES as SCHEDULE_CODES,
    StepBreakdown as StepBreakdown,
    evaluate_plans as evaluate_plans,
    step_time as step_time,
)
from ._workload import (
    MLA as MLA,
    Attention as Attention,
    FFNKind as FFNKind,
    MoE as MoE,
    ParameterCount as ParameterCount,
    Recompute as Recompute,
    Workload as Workload,
    flops_per_token as flops_per_token,
    parameter_count as parameter_count,
)

__all__ = [
    "Algorithm", "Collective", "alpha_beta_time", "collective_time",
    "Efficiency", "Hardware", "LinkLevel",
    "Block", "BlockTimes", "Schedule", "Timeline", "pipeline_bubble_fraction",
    "pipeline_bubble_time", "simulate_pipeline",
    "LayerSplit", "Plan", "validate_plan",
    "PlanSpec", "load_hardware", "load_plan", "load_workload",
    "RECOMPUTE_CODES", "SCHEDULE_CODES", "StepBreakdown", "evaluate_plans", "step_time",
    "MLA", "Attention", "FFNKind", "MoE", "ParameterCount", "Recompute", "Workload",
    "flops_per_token", "parameter_count",
]
