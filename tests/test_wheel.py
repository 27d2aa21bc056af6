"""The built wheel works anywhere (issue 15): installed into a fresh virtual environment,
outside the checkout, it finds its presets and reproduction scripts, and every command-line
example of the README runs from an empty directory.

No network: the wheel is built with the hatchling of this environment (the ``test`` extra)
and installed with ``--no-deps``; the fresh environment sees this environment's third-party
packages through a ``.pth`` line, but not its (editable) markovsim.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The command lines of the README's "Command line" block (comments dropped)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Command line\s+```\w*\n(.*?)```", text, flags=re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("markovsim ")]


def test_readme_commands_are_runnable_and_each_has_a_plot_shown_in_the_docs():
    """Every README command is a concrete command line (no placeholders), and the how-to page
    on the command line shows each numeric one with --plot."""
    commands = readme_commands()
    assert len(commands) >= 6
    page = (ROOT / "docs" / "how-to" / "command-line.md").read_text()
    shown = [" ".join(shlex.split(line)) for line in re.findall(r"^markovsim .*$", page, flags=re.M)]
    for command in commands:
        assert "[" not in command and "MODEL" not in command, command
        words = shlex.split(command)
        if words[1] == "repro":      # the reproductions draw their own plots into --out
            continue
        with_plot = [s for s in shown if s.split()[1] == words[1] and "--plot" in s.split()]
        assert with_plot, f"docs/how-to/command-line.md shows no --plot for `{command}`"


@pytest.fixture(scope="session")
def fresh(tmp_path_factory):
    """A fresh venv with the wheel installed; returns (bin directory, environment)."""
    pytest.importorskip("hatchling")
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    built = subprocess.run([sys.executable, "-c", f"from hatchling.build import build_wheel; "
                                                  f"print(build_wheel({str(dist)!r}))"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = dist / built.stdout.strip().splitlines()[-1]
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                           "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    shared = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "zz_shared_third_party.pth").write_text("\n".join(sorted(shared)) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["MPLBACKEND"] = "Agg"
    return venv / "bin", env, purelib


def run_in(tmp_path, fresh, command: str, timeout: int = 600):
    bin_dir, env, _ = fresh
    words = shlex.split(command)
    return subprocess.run([str(bin_dir / words[0]), *words[1:]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_the_installed_package_is_the_wheel_not_the_checkout(tmp_path, fresh):
    bin_dir, env, purelib = fresh
    got = subprocess.run([str(bin_dir / "python"), "-c",
                          "import markovsim, markovsim._io as io; print(markovsim.__file__); "
                          "print(io.shipped_dir('models')); print(io.shipped_dir('paper_repro'))"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    module, models, scripts = got.stdout.split()
    assert module.startswith(purelib) and not module.startswith(str(ROOT))
    assert models == f"{purelib}/markovsim/_shipped/models"
    assert scripts == f"{purelib}/markovsim/_shipped/paper_repro"


@pytest.mark.slow
def test_repro_and_goodput_from_an_empty_directory(tmp_path, fresh):
    out = run_in(tmp_path, fresh, "markovsim repro S-HW-1 --out DIR")
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "DIR" / "results.json").is_file() and (tmp_path / "DIR" / "report.md").is_file()
    got = run_in(tmp_path, fresh, "markovsim goodput --cluster atlas800t_a2_10k --recovery ascend_tiered")
    assert got.returncode == 0, got.stderr[-3000:]
    assert "goodput" in got.stdout and "optimal checkpoint interval" in got.stdout


@pytest.mark.slow
def test_every_readme_command_runs_from_an_empty_directory(tmp_path, fresh):
    for command in readme_commands():
        done = run_in(tmp_path, fresh, command)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
