"""The public-API part of the campaign: every name in the ``__all__`` of markovsim and its
public packages, each either called with bad arguments or listed in :data:`NOT_CALLED`
with the reason (exceptions, enumerations, constants, result types, and the few
functions reached through the model-file and CLI parts instead).

A call is built from good sample arguments, found by parameter name (:func:`good`), with
one argument replaced by a bad value. Functions whose arguments are all objects get the
wrong-type values only.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib
import inspect
from typing import Any, Callable, Iterator

import numpy as np

MODULES = ("markovsim", "markovsim.availability", "markovsim.training", "markovsim.inference",
           "markovsim.engine", "markovsim.validate")

#: numeric bad values, one per kind (default profile)
NUMBERS = (("negative", -1.0), ("zero", 0.0), ("nan", float("nan")), ("inf", float("inf")),
           ("huge", 1e308), ("huge int", 2**63), ("huge int", 2**200), ("wrong type", "5 min"),
           ("wrong unit", "5 GB"), ("none", None), ("complex", 1 + 2j), ("list", [1.0, "x"]))
#: more under the thorough profile
MORE_NUMBERS = (("negative", -(2**200)), ("inf", float("-inf")), ("tiny", 1e-320), ("bool", True),
                ("wrong type", b"\xff\xfe"), ("array nan", np.array([np.nan, 1.0])))
#: for parameters that take an object (a model, a chain, a catalogue)
OBJECTS = (("wrong type", "5 min"), ("none", None), ("complex", 1 + 2j), ("wrong type", 5),
           ("list", [1.0]))


def public_names() -> dict[str, Any]:
    """``{"module.name": object}`` for every public name (first module that exports it)."""
    out: dict[str, Any] = {}
    seen: set[int] = set()
    for m in MODULES:
        mod = importlib.import_module(m)
        for n in mod.__all__:
            obj = getattr(mod, n)
            key = id(obj) if not isinstance(obj, (int, float, str, tuple, dict)) else (m, n)
            if key in seen:
                continue
            seen.add(key)
            out[f"{m}.{n}"] = obj
    return out


def kind_of(obj: Any) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return "exception"
        if issubclass(obj, enum.Enum):
            return "enum"
        return "class"
    return "function" if callable(obj) else "constant"


# ---------------------------------------------------------------- good sample arguments

@functools.cache
def _av():
    from markovsim import availability as av
    return av


@functools.cache
def cluster():
    return _av().load_cluster("gpu_8x_16k")


@functools.cache
def av_model():
    return _av().single_tier_model(3600.0, 60.0, 36000.0, 600.0)


@functools.cache
def chain():
    from markovsim import CTMC
    return CTMC(np.array([[-1.0, 1.0, 0.0], [0.5, -1.5, 1.0], [0.0, 2.0, -2.0]]))


@functools.cache
def dchain():
    from markovsim import DTMC
    return DTMC(np.array([[0.5, 0.5, 0.0], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5]]))


@functools.cache
def plan_spec():
    from markovsim import training as tr
    return tr.load_plan("llama3_70b_h100_64")


@functools.cache
def inference_model():
    from markovsim import inference as inf
    return inf.load_inference_model("deepseek_v3_8gpu")


@functools.cache
def fault_log():
    return _av().infinitehbd_trace()


_GOOD: dict[str, Callable[[], Any]] = {
    # units and closed forms (seconds, per-second rates)
    "afr": lambda: 0.04, "x": lambda: 2.0, "fit": lambda: 100.0, "mtbf": lambda: 36000.0,
    "rate": lambda: 1e-5, "availability": lambda: 0.9, "save_time": lambda: 60.0,
    "restart_time": lambda: 600.0, "downtime": lambda: 0.0, "interval": lambda: 3600.0, "z": lambda: 1.0,
    "ratio": lambda: 2.0, "endpoints": lambda: 1024, "radix": lambda: 64, "work": lambda: 1e6,
    # engine
    "chain": chain, "Q": lambda: chain().Q if hasattr(chain(), "Q") else np.array(chain().generator),
    "P": lambda: np.array([[0.5, 0.5], [0.5, 0.5]]), "p0": lambda: np.array([1.0, 0.0, 0.0]),
    "t": lambda: 1.0, "rewards": lambda: np.array([1.0, 0.0, 0.0]),
    "state_rewards": lambda: np.array([1.0, 0.0, 0.0]), "absorbing": lambda: [2], "targets": lambda: [0],
    "key": lambda: __import__("jax").random.PRNGKey(0), "t_end": lambda: 1.0, "steps": lambda: 5,
    "replicas": lambda: 8, "max_events": lambda: 200, "level": lambda: 0.9,
    # availability
    "catalogue": lambda: cluster()[1], "shape": lambda: cluster()[0], "cards": lambda: 1024,
    "model": av_model, "cp": lambda: av_model().checkpoint, "counts": lambda: np.array([1.0, 3.0, 2.0, 5.0]),
    "durations": lambda: np.random.default_rng(1).exponential(100.0, 60),
    "censored": lambda: np.zeros(60, dtype=bool),
    "probabilities": lambda: [0.5, 0.5], "rates": lambda: [1.0, 2.0], "continue_probabilities": lambda: [0.5],
    "phases": lambda: 2, "count": lambda: 3, "exposure": lambda: 10.0, "log": fault_log, "window": lambda: 3600.0,
    # training
    "workload": lambda: plan_spec().workload, "hardware": lambda: plan_spec().hardware, "spec": plan_spec,
    "schedule": lambda: "1f1b", "pp": lambda: 4, "micro_batches": lambda: 8, "virtual_stages": lambda: 1,
    "kind": lambda: "all-reduce", "size_bytes": lambda: 1e9, "ranks": lambda: 8, "latency_s": lambda: 1e-5,
    "bandwidth_bytes_per_s": lambda: 1e11, "throughput": lambda: 1e6, "goodput": lambda: 0.9,
    "base_throughput": lambda: 1e6, "base_cards": lambda: 64, "n": lambda: 8, "step_time_s": lambda: 10.0,
    "moe_share": lambda: 0.5, "imbalance_before": lambda: 1.5, "imbalance_after": lambda: 1.1,
    "work_cv": lambda: 0.1, "exposed_share": lambda: 0.2, "hidden_fraction": lambda: 0.5,
    "experts": lambda: 64, "devices": lambda: 8, "zipf_exponent": lambda: 1.0, "step_cut": lambda: 0.1,
    "exposed_cut": lambda: 0.2, "work": lambda: np.ones(8), "global_batch": lambda: 128,
    # inference
    "fleet": lambda: inference_model().decode, "tiers": lambda: inference_model().tiers,
    "serving": lambda: inference_model().serving, "demand_tokens_per_s": lambda: 1e5,
    "card_fault_rate": lambda: 3e-9, "soft_fault_share": lambda: 0.5,
}
#: per function, when the parameter name means something else there
_GOOD_FOR: dict[str, dict[str, Callable[[], Any]]] = {
    "markovsim.training.plan_outputs": {},
    "markovsim.training.validate_plan": {"plan": lambda: plan_spec().plan},
    "markovsim.training.memory_breakdown": {"plan": lambda: plan_spec().plan},
    "markovsim.training.operator_table": {"plan": lambda: plan_spec().plan},
    "markovsim.training.step_time": {"plan": lambda: plan_spec().plan},
    "markovsim.training.plan_numerics": {"plan": lambda: plan_spec().plan},
    "markovsim.training.dispatch_copies": {"workload": lambda: __import__("markovsim.training").training.load_workload(
        "deepseek_v3"), "node_size": lambda: 8, "ep": lambda: 64, "dispatch": lambda: "per-rank",
        "routing": lambda: "consecutive"},
    "markovsim.training.scale_plan": {"plan": lambda: plan_spec().plan, "cards": lambda: 128},
    "markovsim.training.linearity_evidence": {"batch": lambda: "fixed-replica"},
    "markovsim.training.pipeline_makespans": {"work": lambda: np.ones((4, 8))},
    "markovsim.availability.build_model": {"plan": lambda: _av().load_recovery("gpu_checkpoint_only")},
    "markovsim.availability.time_to_train": {"work": lambda: 1e6},
    "markovsim.decode_batch_per_device": {},
    "markovsim.inference.decode_batch_per_device": {"model": lambda: inference_model().serving, "cards": lambda: 8},
    "markovsim.inference.decode_tokens_per_s_per_card": {"model": lambda: inference_model().serving,
                                                         "cards": lambda: 8},
    "markovsim.inference.fleet_outputs": {"model": inference_model},
    "markovsim.inference.fleet_results": {"model": inference_model},
    "markovsim.availability.job_outputs": {},
    "markovsim.absorption_probabilities": {"chain": lambda: __import__("markovsim").CTMC(
        np.array([[-1.0, 0.5, 0.5], [0.5, -1.0, 0.5], [0.0, 0.0, 0.0]]))},
    "markovsim.mean_time_to_absorption": {"chain": lambda: __import__("markovsim").CTMC(
        np.array([[-1.0, 0.5, 0.5], [0.5, -1.0, 0.5], [0.0, 0.0, 0.0]]))},
    "markovsim.simulate_dtmc": {"chain": dchain},
    "markovsim.kronecker_product": {},
}


@functools.cache
def fit():
    return _av().infinitehbd_fit()


def _shipped(folder: str, name: str) -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parents[2] / "models" / folder / f"{name}.toml")


def _doc(folder: str, name: str):
    import tomllib
    with open(_shipped(folder, name), "rb") as fh:
        return tomllib.load(fh)


_PATHS = {  # the good file of each reader; bad paths, bad files and bad documents replace it
    "markovsim.availability.load_cluster": ("clusters", "gpu_8x_16k"),
    "markovsim.availability.load_faults": ("faults", "gpu_training"),
    "markovsim.availability.load_recovery": ("recovery", "gpu_tiered"),
    "markovsim.training.load_hardware": ("hardware", "h100_sxm"),
    "markovsim.training.load_plan": ("plans", "llama3_70b_h100_64"),
    "markovsim.training.load_workload": ("workloads", "llama3_70b"),
    "markovsim.inference.load_inference_model": ("inference", "deepseek_v3_8gpu"),
    "markovsim.availability.load_fitted_catalogue": ("faults/fitted", "infinitehbd.fit"),
    "markovsim.validate.validate_cases": ("cases", "example"),
    "markovsim.training.runs_from_cases": ("cases", "gpu_training_runs"),
}
_DOCS = {
    "markovsim.availability.cluster_from_document": ("clusters", "gpu_8x_16k"),
    "markovsim.availability.faults_from_document": ("faults", "gpu_training"),
    "markovsim.availability.recovery_from_document": ("recovery", "gpu_tiered"),
    "markovsim.training.hardware_from_document": ("hardware", "h100_sxm"),
    "markovsim.training.plan_from_document": ("plans", "llama3_70b_h100_64"),
    "markovsim.training.workload_from_document": ("workloads", "llama3_70b"),
    "markovsim.inference.inference_model_from_document": ("inference", "deepseek_v3_8gpu"),
    "markovsim.availability.is_cluster": ("clusters", "gpu_8x_16k"),
    "markovsim.availability.is_job": ("clusters", "gpu_8x_16k"),
    "markovsim.availability.is_recovery": ("recovery", "gpu_tiered"),
}
for _name, (_folder, _file) in _PATHS.items():
    _GOOD_FOR.setdefault(_name, {})["path"] = (lambda f=_folder, n=_file: _shipped(f, n))
    _GOOD_FOR[_name]["name_or_path"] = _GOOD_FOR[_name]["path"]
for _name, (_folder, _file) in _DOCS.items():
    _GOOD_FOR.setdefault(_name, {})["doc"] = (lambda f=_folder, n=_file: _doc(f, n))
_GOOD_FOR["markovsim.availability.job_from_document"] = {
    "doc": lambda: {"cluster": "gpu_8x_16k", "recovery": "gpu_checkpoint_only", "cards": 1024}}
_GOOD_FOR["markovsim.availability.load_model"] = {"cluster": lambda: "gpu_8x_16k",
                                                  "recovery": lambda: "gpu_checkpoint_only"}
_GOOD.update({
    "fit": fit, "nodes": lambda: 400, "job_nodes": lambda: np.array([8.0, 64.0]),
    "sizes": lambda: [4, 8], "extra_instances": lambda: 1, "points": lambda: [],
    "shocks": lambda: _av().cluster_shocks(fault_log(), 3600.0), "n_classes": lambda: 2,
    "times": lambda: np.array([1.0, 5.0, 9.0, 20.0]), "duration": lambda: 86400.0,
    "days": lambda: 54.0, "reported": lambda: 419.0,
})
_GOOD_FOR["markovsim.training.calibrate_cases"] = {  # a reader with a second argument: the API part only
    "path": lambda: _shipped("cases", "gpu_training_runs"), "params": lambda: ["gemm_peak_fraction"]}
_GOOD_FOR["markovsim.training.kernels_table"] = {
    "kernels": lambda: __import__("markovsim.training", fromlist=["x"]).KernelModel()}
_GOOD_FOR["markovsim.training.scaling_curve"] = {"plan": lambda: plan_spec().plan, "cards": lambda: [64, 128]}
_GOOD_FOR["markovsim.training.linearity_band"] = {
    "plan": lambda: plan_spec().plan, "base_cards": lambda: 64, "cards": lambda: 128,
    "batches": lambda: [__import__("markovsim.training", fromlist=["x"]).batch_rule("fixed-global")]}
_GOOD_FOR["markovsim.training.linearity_points"] = {
    "sizes": lambda: [64, 128], "batch": lambda: __import__("markovsim.training", fromlist=["x"]).batch_rule(
        "fixed-global")}
_GOOD_FOR["markovsim.availability.mtbf_ratio"] = {"model": lambda: fit().model}
_GOOD_FOR["markovsim.availability.mtbf_elasticity"] = {"model": lambda: fit().model}
_GOOD_FOR["markovsim.availability.cluster_fault_rate"] = {"model": lambda: fit().model}
_GOOD_FOR["markovsim.availability.job_interruption_rate"] = {"model": lambda: fit().model}
_GOOD_FOR["markovsim.availability.predict_next_window"] = {"simulations": lambda: 20}
_GOOD_FOR["markovsim.availability.published_run_check"] = {"cards": lambda: 16384, "availability": lambda: 0.9}
_GOOD_FOR["markovsim.inference.cheapest_fleet"] = {
    "target": lambda: 0.99, "sizes": lambda: [8], "extra_instances": lambda: 1}

#: public functions not called with bad arguments here, with the reason (each is reached
#: another way, or takes only arguments a user cannot get wrong in kind)
NOT_CALLED: dict[str, str] = {
    "markovsim.validate.run_calibration": "reads a calibration file (a path); its named errors for bad "
                                          "files: tests/faults/test_validate_calibration.py",
    "markovsim.to_jax_function": "takes a sympy expression and its symbols (symbolic part of the engine)",
    "markovsim.sweep": "takes a function and axes; its CLI (markovsim sweep) is in the CLI part",
    "markovsim.open_sweep": "reads a store written by sweep; bad stores: tests/test_sweep_store.py",
    "markovsim.availability.read_fault_log": "bad files: the file part (test_bad_files)",
    "markovsim.availability.read_incident_log": "bad files: the file part (test_bad_files)",
    "markovsim.availability.simulate_fault_log": "takes a numpy Generator and a fitted model",
    "markovsim.availability.fit_mmpp": "slow maximum-likelihood fit (6 starts); not in the default profile",
    "markovsim.availability.ks_distance": "takes a CDF callable",
    "markovsim.availability.training_distributions": "takes a TrainingJob and runs 500 Monte-Carlo runs",
    "markovsim.availability.write_fault_catalogue": "writes files (output side)",
    "markovsim.availability.write_fitted_catalogue": "writes files (output side)",
    "markovsim.availability.write_infinitehbd_catalogue": "writes files (output side)",
    "markovsim.availability.calibrate_catalogue": "takes an IncidentLog read from a file",
    "markovsim.training.evaluate_plans": "takes a dict of plan arrays (the vectorised search behind search_plans)",
    "markovsim.training.plan_modules": "reads the plan arrays of candidate_plans at an index (the CLI's plan table)",
    "markovsim.training.slow_node_probability": "takes a SlowNodes object",
    "markovsim.training.calibrate": "takes Runs from a case file (runs_from_cases is called)",
    "markovsim.training.predict": "takes a Run from a case file (runs_from_cases is called)",
    "markovsim.inference.frontier_optimum": "takes FrontierPoints from cheapest_fleet",
    "markovsim.validate.register_case_kind": "registers a callable (extension point)",
    "markovsim.availability.load_job": "bad job files: the CLI part (markovsim goodput JOB.toml)",
}


def signature_params(fn) -> list[inspect.Parameter]:
    try:
        return [p for p in inspect.signature(fn).parameters.values()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def good_arguments(name: str, fn) -> dict[str, Any] | None:
    """Good keyword arguments for every required parameter (``None`` when one is unknown)."""
    table = {**_GOOD, **_GOOD_FOR.get(name, {})}
    out: dict[str, Any] = {}
    for p in signature_params(fn):
        if p.name in table:
            out[p.name] = table[p.name]()
        elif p.default is inspect.Parameter.empty:
            return None
    return out


def _is_object(value: Any) -> bool:
    return not isinstance(value, (int, float, np.ndarray, list, tuple, np.floating, np.integer, str))


def calls(name: str, fn, *, thorough: bool = False) -> Iterator[tuple[str, Callable[[], Any]]]:
    """``(label, thunk)`` for every bad call of one public function."""
    args = good_arguments(name, fn)
    if args is None:
        return
    params = {p.name: p for p in signature_params(fn)}
    positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for pname in args:
        values = OBJECTS if _is_object(args[pname]) else NUMBERS + (MORE_NUMBERS if thorough else ())
        for kind, value in values:
            kwargs = {**args, pname: value}

            def thunk(kwargs=kwargs):
                pos = [kwargs[n] for n in positional if n in kwargs]
                kw = {n: v for n, v in kwargs.items() if n not in positional}
                return fn(*pos, **kw)
            yield f"{name}({pname}={kind}: {value!r:.40})", thunk
