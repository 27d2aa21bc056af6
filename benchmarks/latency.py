"""Interactive latency: how long a person waits for a first answer, as a ratio to
``python -c "import jax"`` measured in the same run (issue 14).

Every figure runs in a fresh process (the interpreter, imports, JAX tracing and XLA
compilation are what a person pays), and is the median of ``--repeat`` runs:

- ``import jax``: the floor every call pays;
- ``markovsim goodput --cluster atlas800t_a2_10k --recovery ascend_tiered``: cold (no
  persistent compilation cache: ``MARKOVSIM_NO_COMPILE_CACHE=1``) and warm (the cache in a
  temporary directory, populated by one earlier run);
- ``markovsim train pangu_ultra_135b_8k`` and ``markovsim infer deepseek_v3_8gpu``, cold;
- in one Python process: the first ``analyze`` + ``optimal_checkpoint_interval`` +
  ``goodput_sensitivities`` on the same job's model (after the imports), then the same
  three on a model with one more fault mode and one more recovery tier.

For the in-process calls and the CLI commands it also says where the time goes: imports,
JAX tracing (Python), lowering to MLIR, XLA compilation and the rest (running), from JAX's
monitoring events (``/jax/core/compile/*``; tracing is the remainder of the first call
minus lowering, compilation and a second, compiled call).

Usage: ``.venv/bin/python benchmarks/latency.py [--repeat 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOODPUT = ["goodput", "--cluster", "atlas800t_a2_10k", "--recovery", "ascend_tiered", "--json"]
TRAIN = ["train", "pangu_ultra_135b_8k", "--json"]
INFER = ["infer", "deepseek_v3_8gpu", "--json"]

#: acceptance of issue 14 (ratio to `import jax`)
TARGETS = {
    "goodput_cold": 3.0, "goodput_warm": 1.5, "train_cold": 3.0, "infer_cold": 3.0,
    "session_first": 2.0, "session_grown": 0.3,
}

_EVENTS = {"/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
           "/jax/core/compile/backend_compile_duration": "compile"}


# ----------------------------------------------------------------------------- workers (fresh processes)


def _listen():
    import jax

    totals = {"lower": 0.0, "compile": 0.0}

    def on(event, duration, **_):
        if event in _EVENTS:
            totals[_EVENTS[event]] += duration

    jax.monitoring.register_event_duration_secs_listener(on)
    return totals


def _worker_cli(argv: list[str]) -> dict:
    t0 = time.perf_counter()
    import markovsim._cli as cli
    import markovsim.availability  # noqa: F401
    import markovsim.inference  # noqa: F401
    import markovsim.training  # noqa: F401

    imports = time.perf_counter() - t0
    totals = _listen()
    t1 = time.perf_counter()
    with open(os.devnull, "w") as null:
        old, sys.stdout = sys.stdout, null
        try:
            cli.main(argv)
        finally:
            sys.stdout = old
    call = time.perf_counter() - t1
    return dict(imports=imports, call=call, **totals, rest=call - totals["lower"] - totals["compile"])


def _grown(model):
    """The model with one more fault mode (a copy of the first at a tenth of its rate,
    starting at a new tier) and one more recovery tier (a copy of the last)."""
    import dataclasses

    import jax.numpy as jnp

    k = len(model.tiers)
    tiers = model.tiers + (dataclasses.replace(model.tiers[-1], fallback=-1),)

    def more(a, v):
        return jnp.concatenate([jnp.asarray(a, dtype=float), jnp.asarray([v], dtype=float)])

    return dataclasses.replace(
        model, tiers=tiers,
        fault_names=model.fault_names + ("extra_mode",), fault_tier=model.fault_tier + (k,),
        fault_interrupts=model.fault_interrupts + (True,),
        fault_rates=more(model.fault_rates, float(model.fault_rates[0]) / 10),
        fault_degraded_throughput=more(model.fault_degraded_throughput, 1.0),
        fault_detection_time=more(model.fault_detection_time, 0.0),
        fault_spare_nodes=more(model.fault_spare_nodes, 0.0),
        fault_predicted=more(model.fault_predicted, 0.0)).validate()


def _worker_session() -> dict:
    t0 = time.perf_counter()
    import markovsim.availability as av
    from markovsim._cli._goodput import job_document
    from markovsim._cli import _common as c

    imports = time.perf_counter() - t0
    doc, label, base, changes = job_document(None, "atlas800t_a2_10k", "ascend_tiered", None, [])
    model = c.build(av.job_from_document, doc, label, base, changes).model
    out = dict(imports=imports)
    totals = _listen()
    for name, m in (("first", model), ("grown", _grown(model))):
        parts = {}
        before = dict(totals)
        t_all = time.perf_counter()
        for call, fn in (("analyze", av.analyze), ("optimum", av.optimal_checkpoint_interval),
                         ("sensitivities", av.goodput_sensitivities)):
            t = time.perf_counter()
            fn(m)
            first = time.perf_counter() - t
            t = time.perf_counter()
            fn(m)
            parts[call] = dict(first=first, again=time.perf_counter() - t)
        out[name] = dict(total=time.perf_counter() - t_all - sum(p["again"] for p in parts.values()),
                         calls=parts, **{k: totals[k] - before[k] for k in totals})
    return out


# ----------------------------------------------------------------------------- driver


def _wall(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
    return wall


def _json_worker(kind: str, env: dict, *args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--worker", kind, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"worker {kind} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _markovsim() -> list[str]:
    exe = shutil.which("markovsim", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-c", "import sys; from markovsim._cli import main; sys.exit(main())"]


def _load() -> str:
    try:
        return "load average %.2f %.2f %.2f" % os.getloadavg()
    except OSError:  # pragma: no cover
        return "load average unknown"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:  # a fresh process measuring one thing
        kind, rest = argv[1], argv[2:]
        print(json.dumps(_worker_cli(rest) if kind == "cli" else _worker_session()))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args(argv)

    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")]))
    cold = dict(base, MARKOVSIM_NO_COMPILE_CACHE="1")
    ms = _markovsim()
    print(f"markovsim latency benchmark: {os.cpu_count()} CPUs, {_load()} at the start")
    figs: dict[str, float] = {}

    def median(cmd, env):
        return statistics.median(_wall(cmd, env) for _ in range(args.repeat))

    figs["import_jax"] = median([sys.executable, "-c", "import jax"], base)
    figs["goodput_cold"] = median(ms + GOODPUT, cold)
    with tempfile.TemporaryDirectory() as cache:
        warm = dict(base, MARKOVSIM_COMPILE_CACHE_DIR=cache)
        warm.pop("MARKOVSIM_NO_COMPILE_CACHE", None)
        _wall(ms + GOODPUT, warm)  # populates the cache
        figs["goodput_warm"] = median(ms + GOODPUT, warm)
    figs["train_cold"] = median(ms + TRAIN, cold)
    figs["infer_cold"] = median(ms + INFER, cold)
    sessions = [_json_worker("session", cold) for _ in range(args.repeat)]
    figs["session_first"] = statistics.median(s["first"]["total"] for s in sessions)
    figs["session_grown"] = statistics.median(s["grown"]["total"] for s in sessions)
    breakdown = {name: _json_worker("cli", cold, *cmd) for name, cmd in
                 (("goodput", GOODPUT), ("train", TRAIN), ("infer", INFER))}

    floor = figs["import_jax"]
    rows = [
        ("python -c 'import jax'", "import_jax", "1 (the floor)"),
        ("markovsim goodput (default models), cold", "goodput_cold", "<= 3"),
        ("markovsim goodput, warm (cache populated)", "goodput_warm", "<= 1.5"),
        ("markovsim train pangu_ultra_135b_8k, cold", "train_cold", "<= 3"),
        ("markovsim infer deepseek_v3_8gpu, cold", "infer_cold", "<= 3"),
        ("analyze + optimum + sensitivities, fresh model (one process, after imports)", "session_first", "<= 2"),
        ("the same, one more fault mode and tier, afterwards", "session_grown", "<= 0.3"),
    ]
    print(f"\n| figure | wall (s) | ratio to import jax | target | met |\n|---|---|---|---|---|")
    for text, key, target in rows:
        ratio = figs[key] / floor
        met = "-" if key == "import_jax" else ("yes" if ratio <= TARGETS[key] else "no")
        print(f"| {text} | {figs[key]:.2f} | {ratio:.2f} | {target} | {met} |")

    print("\nWhere the time goes (one cold run each; seconds):")
    print("| entry point | imports | first call | lowering | XLA compile | tracing + running |\n|---|---|---|---|---|---|")
    for name, b in breakdown.items():
        print(f"| markovsim {name} | {b['imports']:.2f} | {b['call']:.2f} | {b['lower']:.2f} | {b['compile']:.2f} | "
              f"{b['rest']:.2f} |")
    s = sessions[0]
    for name in ("first", "grown"):
        for call, p in s[name]["calls"].items():
            print(f"| {name} model: {call} | - | {p['first']:.2f} | | | (second call {p['again'] * 1e3:.1f} ms) |")
        print(f"| {name} model: all three | {s['imports']:.2f} | {s[name]['total']:.2f} | {s[name]['lower']:.2f} | "
              f"{s[name]['compile']:.2f} | {s[name]['total'] - s[name]['lower'] - s[name]['compile']:.2f} |")
    print(f"\n{_load()} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(figures=figs, breakdown=breakdown, sessions=sessions), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
