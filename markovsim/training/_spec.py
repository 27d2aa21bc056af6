"""Model files (TOML) for workloads, hardware and parallel plans.

Files live in ``models/workloads``, ``models/hardware`` and ``models/plans``; a loader
takes a path or the bare name of a file there (``"pangu_ultra_135b"``). A plan names its
workload and hardware by bare name, by a path relative to the plan file, or inline as a
table (``markovsim._io``'s reference rule). Every number in those files carries a source
comment. Reading is strict (unknown keys, missing units and
bad values raise :class:`markovsim.SpecError` naming the file and the key).

A plan names its workload and hardware by file (a path relative to the plan file, or a
bare name of a shipped preset) or writes them inline as tables. The field readers
(``_workload``, ``_hardware``, ``_plan_spec``) take a :class:`~markovsim._io.Table` and a
base directory, so a document held in memory is read the same way as a file.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from .._errors import SpecError
from .._io import Reference, Table, base_of, label, load_with, reads_document, reference
from ._keydocs import KEY_DOCS
from ._hardware import GRAPH_COMPILERS, SOFTWARE_STACKS, Efficiency, Hardware, KernelModel, LinkLevel
from ._pipeline import Schedule
from ._plan import AttentionKernel, Elementwise, EPDispatch, ExpertRouting, FP8Recipe, LayerSplit, Plan, Precision
from ._workload import MLA, Attention, FFNKind, MoE, Recompute, Workload

__all__ = ["load_workload", "load_hardware", "load_plan", "PlanSpec", "workload_from_document",
           "hardware_from_document", "plan_from_document", "PLAN_REFERENCES"]

#: the keys of a plan file that name other model files
PLAN_REFERENCES = {"workload": Reference("workloads"), "hardware": Reference("hardware")}



def _reported(t, key: str) -> float | None:
    """A published parameter count (absent or 0: none), finite and >= 0."""
    value = float(t.raw(key, 0.0, types=(int, float)))
    if not math.isfinite(value) or value < 0:
        raise SpecError(f"{t._name(key)}={value!r}: expected a finite parameter count >= 0 (0 or absent: none)")
    return value or None

def _flag(t: Table, key: str, default: bool) -> bool:
    return t.raw(key, default, types=(bool,))


def _workload(t: Table) -> Workload:
    attention = Attention(t.text("attention", "gqa", choices=tuple(a.value for a in Attention)))
    mla = moe = None
    if "mla" in t:
        m = t.table("mla")
        mla = MLA(m.integer("q_lora_rank", minimum=1), m.integer("kv_lora_rank", minimum=1),
                  m.integer("qk_nope_head_dim", minimum=1), m.integer("qk_rope_head_dim", minimum=0),
                  m.integer("v_head_dim", minimum=1))
        m.finish()
    if "moe" in t:
        m = t.table("moe")
        moe = MoE(m.integer("routed_experts", minimum=1), m.integer("shared_experts", minimum=0),
                  m.integer("top_k", minimum=1), m.integer("expert_ffn", minimum=1),
                  m.integer("dense_layers", minimum=0), m.integer("max_nodes_per_token", 0, minimum=0))
        m.finish()
    w = Workload(
        name=t.text("name"), layers=t.integer("layers", minimum=1), hidden=t.integer("hidden", minimum=1),
        ffn_hidden=t.integer("ffn_hidden", minimum=1), heads=t.integer("heads", minimum=1),
        kv_heads=t.integer("kv_heads", minimum=1), vocab=t.integer("vocab", minimum=1),
        seq_len=t.integer("seq_len", minimum=1),
        ffn_kind=FFNKind(t.text("ffn_kind", "swiglu", choices=tuple(f.value for f in FFNKind))),
        attention=attention, head_dim=t.raw("head_dim", None, types=(int,)), mla=mla, moe=moe,
        mtp_layers=t.integer("mtp_layers", 0, minimum=0),
        reported_total_params=_reported(t, "reported_total_params"),
        reported_active_params=_reported(t, "reported_active_params"),
        reported_params_tolerance=t.quantity("reported_params_tolerance", "ratio", 0.02),
        tied_embeddings=_flag(t, "tied_embeddings", False), dropout=_flag(t, "dropout", False),
        causal=_flag(t, "causal", True), attention_window=t.integer("attention_window", 0, minimum=0),
        window_layers=t.integer("window_layers", 0, minimum=0),
    )
    t.finish()
    return w.validate()


def load_workload(name_or_path) -> Workload:
    """Read a workload file (``models/workloads/<name>.toml`` or a path)."""
    return load_with(workload_from_document, name_or_path, folder="workloads")


@reads_document
def workload_from_document(doc: dict, *, where: str = "workload", base: Path | None = None) -> Workload:
    """A workload from its document; errors name ``where``."""
    return _workload(Table(doc, "", schema="workload", docs=KEY_DOCS["workload"]))


_DIRECTIONS = {"per-direction": 1.0, "bidirectional": 0.5}


def _one_way(t: Table) -> float:
    """A link's ``bandwidth`` per direction, from the figure and its ``direction``."""
    bw = t.quantity("bandwidth", "bandwidth", strictly_positive=True)
    return bw * _DIRECTIONS[t.text("direction", choices=tuple(_DIRECTIONS))]


def _level(lv: Table) -> LinkLevel:
    level = LinkLevel(lv.text("name"), lv.integer("domain_size", minimum=0), _one_way(lv),
                      lv.quantity("latency", "time"))
    lv.finish()
    return level


def _kernels(t: Table) -> KernelModel:
    d = KernelModel()
    times = {"step_overhead_s": "step_overhead", "moe_expert_overhead_s": "moe_expert_overhead"}
    values = {}
    for f in dataclasses.fields(KernelModel):
        if f.name in times:
            values[f.name] = t.quantity(times[f.name], "time", getattr(d, f.name), minimum=0.0)
        else:
            values[f.name] = t.quantity(f.name, "ratio", getattr(d, f.name), minimum=0.0)
    t.finish()
    return KernelModel(**values)


def _hardware(t: Table) -> Hardware:
    name = t.text("name")
    if "peak" in t:
        raise SpecError(f"{t.where + '.' if t.where else ''}peak: write the dense tensor rates as a table "
                        "[peak_dense] with bf16 = \"... TFLOP/s\" (and fp8 = ...); sparse (2:4) rates are "
                        "not used")
    pk = t.table("peak_dense")
    peak = pk.quantity("bf16", "compute", strictly_positive=True)
    fp8 = pk.quantity("fp8", "compute", None, strictly_positive=True) if "fp8" in pk else None
    pk.finish()
    hbm = t.quantity("hbm", "data", strictly_positive=True)
    hbm_bw = t.quantity("hbm_bandwidth", "bandwidth", strictly_positive=True)
    levels = [_level(lv) for lv in t.tables("levels")]
    kernels = _kernels(t.table("kernels")) if "kernels" in t else None
    host = None
    if "host_link" in t:
        hl = t.table("host_link")
        host = _one_way(hl)
        hl.finish()
    hw = Hardware(name, peak, hbm, hbm_bw, tuple(levels), peak_fp8_flop_per_s=fp8, kernels=kernels,
                  host_bandwidth_bytes_per_s=host,
                  default_stack=t.text("default_stack", "default", choices=tuple(SOFTWARE_STACKS)),
                  graph_compiler=t.text("graph_compiler", "", choices=GRAPH_COMPILERS))
    t.finish()
    return hw.validate()


def load_hardware(name_or_path) -> Hardware:
    """Read a hardware file (``models/hardware/<name>.toml`` or a path)."""
    return load_with(hardware_from_document, name_or_path, folder="hardware")


@reads_document
def hardware_from_document(doc: dict, *, where: str = "hardware", base: Path | None = None) -> Hardware:
    """A hardware description from its document; errors name ``where``."""
    return _hardware(Table(doc, "", schema="hardware", docs=KEY_DOCS["hardware"]))


@dataclasses.dataclass(frozen=True)
class PlanSpec:
    """A published plan: the workload, hardware, plan and efficiency inputs it names."""

    name: str
    workload: Workload
    hardware: Hardware
    plan: Plan
    efficiency: Efficiency
    #: the ``[efficiency]`` keys the document wrote (with ``stack``, the stack's overlaps too):
    #: what :func:`~markovsim.training.plan_caveats` reads to tell a stated overlap from a default
    efficiency_keys: frozenset = frozenset()
    #: the software stack the document named (``[efficiency] stack``), or ``""``
    stack: str = ""
    #: the plan keys the document wrote of those a caveat asks a plan to state
    #: (``elementwise``): a written one is not asked for again
    plan_keys: frozenset = frozenset()

    @property
    def applied_stack(self) -> str:
        """The stack whose overlaps the plan's unwritten overlap keys take: the one the
        document named, else the hardware's :attr:`~Hardware.default_stack`."""
        return self.stack or self.hardware.default_stack


def _efficiency(t: Table, default_stack: str = "default") -> tuple[Efficiency, frozenset, str]:
    """The efficiency inputs of an ``[efficiency]`` table, the keys it sets and the stack it
    names (``""`` when none). ``stack`` names a software stack of
    :data:`~markovsim.training.SOFTWARE_STACKS`, whose overlaps become the defaults of the
    keys beside it; a table that names none takes ``default_stack`` (the hardware's,
    :attr:`Hardware.default_stack`) in its place: the overlaps it writes are read as written,
    the ones it leaves out are that stack's."""
    given = "stack" in t
    stack = t.text("stack", default_stack, choices=tuple(SOFTWARE_STACKS))
    d = Efficiency.for_stack(stack)
    written = {f.name for f in dataclasses.fields(Efficiency) if f.name in t}
    if "data_loading" in t:
        written.add("data_loading_s")
    if given:
        written |= set(SOFTWARE_STACKS[stack]["overlaps"]) | {"stack"}
    values = {}
    for f in dataclasses.fields(Efficiency):
        if f.name == "data_loading_s":
            values[f.name] = t.quantity("data_loading", "time", d.data_loading_s)
        elif f.name in ("compute", "bandwidth", "replica_overlap"):  # optional: None when absent
            values[f.name] = t.quantity(f.name, "ratio", None, minimum=0.0, maximum=1.0)
        else:
            values[f.name] = t.quantity(f.name, "ratio", getattr(d, f.name), minimum=0.0, maximum=1.0)
    t.finish()
    return Efficiency(**values).validate(), frozenset(written), stack if given else ""


def _named(t: Table, key: str, folder: str, base: Path | None, read):
    """A workload or hardware named by file (relative to ``base``, else a bare preset name)
    or written inline as a table."""
    doc = reference(t.raw(key, types=(str, dict)), folder=folder, base=base, where=key)
    return read(doc, where=label(key, doc), base=base_of(doc, base))


def _choice(t: Table, key: str, enum, default, allowed=None):
    """A member of ``enum`` named by its value; ``allowed`` narrows the members the key
    takes (a number format that the key does not admit is refused here, by the reader that
    names the file, rather than later by the plan check)."""
    members = tuple(enum) if allowed is None else allowed
    return enum(t.text(key, default.value, choices=tuple(x.value for x in members)))


#: the number formats a plan file's format keys take: GEMMs and the expert dispatch (bf16,
#: fp8); gradient reduction and Adam's moments (fp32, bf16)
_GEMM = (Precision.BF16, Precision.FP8)
_WIDE = (Precision.FP32, Precision.BF16)


def _modules(t: Table) -> tuple[str, ...]:
    """``recompute_modules``: a list of module names (checked against the workload by
    :func:`~markovsim.training.validate_plan`)."""
    from ._plan import RECOMPUTE_MODULES

    names = t.raw("recompute_modules", [], types=(list,))
    for name in names:
        if not isinstance(name, str) or name not in RECOMPUTE_MODULES:
            raise SpecError(f"{t._name('recompute_modules')}: {name!r} is not a module; expected a list of "
                            f"names from {', '.join(map(repr, RECOMPUTE_MODULES))}")
    return tuple(names)


def _plan_spec(t: Table, base: Path | None = None) -> PlanSpec:
    """The fields of a plan document (entry points: :func:`load_plan`, the ``train`` case
    kind). ``name`` is optional (default: workload on hardware)."""
    workload = _named(t, "workload", "workloads", base, workload_from_document)
    hardware = _named(t, "hardware", "hardware", base, hardware_from_document)
    plan = Plan(
        tp=t.integer("tp", minimum=1), pp=t.integer("pp", minimum=1), dp=t.integer("dp", minimum=1),
        global_batch=t.integer("global_batch", minimum=1), micro_batch=t.integer("micro_batch", 1, minimum=1),
        virtual_stages=t.integer("virtual_stages", 1, minimum=1), ep=t.integer("ep", 1, minimum=1),
        cp=t.integer("cp", 1, minimum=1), expert_tp=t.integer("expert_tp", 1, minimum=1),
        zero_stage=t.integer("zero_stage", 1, minimum=0),
        zero_shard_group=t.integer("zero_shard_group", 0, minimum=0),
        sequence_parallel=t.raw("sequence_parallel", True, types=(bool,)),
        schedule=_choice(t, "schedule", Schedule, Schedule.ONE_F_ONE_B),
        recompute=_choice(t, "recompute", Recompute, Recompute.NONE),
        recompute_layers=t.integer("recompute_layers", 0, minimum=0),
        offload_layers=t.integer("offload_layers", 0, minimum=0),
        fp8_params=t.raw("fp8_params", False, types=(bool,)),
        recompute_modules=_modules(t),
        optimizer_moments=_choice(t, "optimizer_moments", Precision, Precision.FP32, _WIDE),
        layer_split=_choice(t, "layer_split", LayerSplit, LayerSplit.EVEN),
        attention_kernel=_choice(t, "attention_kernel", AttentionKernel, AttentionKernel.FLASH),
        elementwise=_choice(t, "elementwise", Elementwise, Elementwise.FUSED),
        precision=_choice(t, "precision", Precision, Precision.BF16, _GEMM),
        grad_reduce=_choice(t, "grad_reduce", Precision, Precision.FP32, _WIDE),
        ep_dispatch=_choice(t, "ep_dispatch", EPDispatch, EPDispatch.PER_EXPERT),
        expert_routing=_choice(t, "expert_routing", ExpertRouting, ExpertRouting.RANDOM),
        ep_dispatch_precision=_choice(t, "ep_dispatch_precision", Precision, Precision.BF16, _GEMM),
        combined_1f1b=t.raw("combined_1f1b", False, types=(bool,)),
        fp8_recipe=_choice(t, "fp8_recipe", FP8Recipe, FP8Recipe.DELAYED),
    )
    if "fp8_recipe" in t and "precision" not in t:
        # a recipe with no precision written most likely means a forgotten precision = "fp8":
        # refused, not read as BF16. A written precision = "bf16" is a choice (a what-if's
        # --set precision="bf16" on an FP8 plan, a swept precision): the recipe then has no
        # effect, as in the library's Plan, which cannot tell a default recipe from a written one
        raise SpecError(f"{t._name('fp8_recipe')}={t.raw('fp8_recipe')!r}: an FP8 scaling recipe without a "
                        "precision; expected precision = \"fp8\" (or precision = \"bf16\" to time the plan "
                        "in BF16, where no recipe applies)")
    eff, eff_keys, stack = (_efficiency(t.table("efficiency"), hardware.default_stack) if "efficiency" in t
                            else (Efficiency.for_stack(hardware.default_stack), frozenset(), ""))
    name = t.text("name", "") or f"{workload.name} on {plan.world_size} x {hardware.name}"
    plan_keys = frozenset(k for k in ("elementwise",) if k in t)
    t.finish()
    from ._plan import validate_plan

    plan = validate_plan(workload, plan)
    return PlanSpec(name, workload, hardware, plan, eff, eff_keys, stack, plan_keys)


def load_plan(name_or_path) -> PlanSpec:
    """Read a plan file (``models/plans/<name>.toml`` or a path) with its workload and
    hardware (bare preset names, paths relative to the plan file, or inline tables) and its
    efficiency inputs."""
    return load_with(plan_from_document, name_or_path, folder="plans")


@reads_document
def plan_from_document(doc: dict, *, where: str = "plan", base: Path | None = None) -> PlanSpec:
    """A plan with its workload and hardware from the plan's document; references resolve
    against ``base`` (the plan file's directory); errors name ``where``."""
    return _plan_spec(Table(doc, "", schema="plan", docs=KEY_DOCS["plan"]), base)
