"""The persistent compilation cache, the 'compiling' note and progress bars (issue 14).

The cache is tested in fresh processes pointed at a temporary directory: JAX reads the
cache setting once per process, and tests never write to the user's home."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from markovsim import _compile_cache as cc
from markovsim._cli import _speed, build_parser

ROOT = Path(__file__).resolve().parent.parent


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in (cc.ENV_OFF, cc.ENV_DIR)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def test_default_dir_follows_the_platform_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(cc.ENV_DIR, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cc.default_cache_dir() == tmp_path / "markovsim" / "jax"
    monkeypatch.setenv(cc.ENV_DIR, str(tmp_path / "elsewhere"))
    assert cc.default_cache_dir() == tmp_path / "elsewhere"


@pytest.mark.parametrize("value, off", [("1", True), ("yes", True), ("0", False), ("", False), ("false", False)])
def test_off_switch(monkeypatch, value, off):
    monkeypatch.setenv(cc.ENV_OFF, value)
    assert cc.cache_disabled_by_env() is off
    if off:
        assert cc.cli_cache(False) is None
    assert cc.cli_cache(True) is None  # --no-compile-cache


def test_enable_writes_compiled_programs(tmp_path):
    code = ("import markovsim, jax, jax.numpy as jnp; markovsim.enable_compilation_cache(r'%s'); "
            "print(float(jax.jit(lambda x: jnp.sin(x) * 2.0)(1.0)))" % tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert any(tmp_path.iterdir()), "no compiled program was written to the cache directory"


@pytest.mark.parametrize("off", [False, True])
def test_cli_uses_the_cache_unless_switched_off(tmp_path, off):
    cache = tmp_path / "cache"
    code = "import sys; from markovsim._cli import main; sys.exit(main())"
    argv = ["train", "pangu_ultra_135b_8k", "--json"] + (["--no-compile-cache"] if off else [])
    done = subprocess.run([sys.executable, "-c", code, *argv], env=_env(**{cc.ENV_DIR: str(cache)}), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    written = cache.exists() and any(cache.iterdir())
    assert written is not off


def test_every_command_has_quiet_and_no_cache():
    parser = build_parser()
    args = parser.parse_args(["train", "pangu_ultra_135b_8k", "--quiet", "--no-compile-cache"])
    assert args.quiet and args.no_compile_cache
    assert _speed.show_progress(args) is False


def test_compile_note_after_a_second_of_compiling(monkeypatch, capsys):
    monkeypatch.setattr(_speed, "NOTE_AFTER_S", 0.2)
    watch = _speed._CompileWatch("goodput", cached=True)
    record = logging.LogRecord("jax", logging.DEBUG, __file__, 1, "Compiling %s", ("f",), None)
    watch.emit(record)  # a compile starts and runs past the threshold
    time.sleep(1.0)
    watch.done.set()
    watch.thread.join(2)
    err = capsys.readouterr().err
    assert err.count("compiling with JAX") == 1 and err.startswith("markovsim goodput:")


def test_no_note_for_a_short_compile(monkeypatch, capsys):
    monkeypatch.setattr(_speed, "NOTE_AFTER_S", 0.3)
    watch = _speed._CompileWatch("train", cached=False)
    for text in ("Compiling %s", "Finished XLA compilation of %s"):  # a short compile, then running
        watch.emit(logging.LogRecord("jax", logging.DEBUG, __file__, 1, text, ("f",), None))
    time.sleep(0.9)
    watch.done.set()
    watch.thread.join(2)
    assert capsys.readouterr().err == ""


def test_progress_bar_off_when_not_a_terminal():
    args = argparse.Namespace(quiet=False, command="sweep")
    with _speed.progress_bar(args, 3, "point") as bar:  # pytest's stderr is not a terminal
        bar.update()
    assert isinstance(bar, _speed._NoBar)


def test_progress_callback_draws_one_bar_to_its_total(monkeypatch):
    made = []

    class Bar:
        def __init__(self, total):
            self.total, self.n, self.closed = total, 0, False
            made.append(self)

        def update(self, n=1):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setattr(_speed, "progress_bar", lambda args, total, unit, desc=None: Bar(total))
    with _speed.progress_callback(argparse.Namespace(quiet=False), unit="case") as progress:
        for done in range(1, 4):
            progress(done, 3)
    assert len(made) == 1 and made[0].total == 3 and made[0].n == 3 and made[0].closed


def test_validate_and_repro_report_progress_per_item(tmp_path):
    from markovsim import repro
    from markovsim.validate import validate_cases

    calls = []
    validate_cases(ROOT / "models" / "cases" / "example.toml", progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1] == len(calls)
    calls.clear()
    repro.run_reproductions(["hw_optical"], tmp_path, log=None, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(k, len(calls)) for k in range(1, len(calls) + 1)]
