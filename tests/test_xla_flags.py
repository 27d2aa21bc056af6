"""Importing markovsim asks XLA's CPU backend for its classic emitters (markovsim._config):
only where that is safe, never over the user's own choice, and with the same results."""

import json
import os
import subprocess
import sys

import pytest

from markovsim import _config

FLAG = _config.CPU_EMITTER_FLAG
LOW, HIGH = _config.CHECKED_JAXLIB


@pytest.fixture
def fresh(monkeypatch):
    """The rule as a fresh import would apply it: no XLA_FLAGS, backends not started, a jaxlib
    inside the checked range."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.delenv("MARKOVSIM_KEEP_XLA_FLAGS", raising=False)
    monkeypatch.setattr(_config, "_backends_started", lambda: False)
    monkeypatch.setattr(_config, "_jaxlib_version", lambda: LOW)
    return monkeypatch


def test_added_to_empty_flags(fresh):
    assert _config._prefer_classic_cpu_emitters() is True
    assert os.environ["XLA_FLAGS"] == FLAG


def test_appended_to_the_users_other_flags(fresh):
    fresh.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert _config._prefer_classic_cpu_emitters() is True
    assert os.environ["XLA_FLAGS"] == f"--xla_force_host_platform_device_count=2 {FLAG}"


@pytest.mark.parametrize("flags", ["--xla_cpu_use_fusion_emitters=true", "--xla_cpu_use_fusion_emitters"])
def test_the_users_own_setting_stands(fresh, flags):
    fresh.setenv("XLA_FLAGS", flags)
    assert _config._prefer_classic_cpu_emitters() is False
    assert os.environ["XLA_FLAGS"] == flags


@pytest.mark.parametrize("value,kept", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_keep_switch(fresh, value, kept):
    fresh.setenv("MARKOVSIM_KEEP_XLA_FLAGS", value)
    assert _config._prefer_classic_cpu_emitters() is (not kept)
    assert ("XLA_FLAGS" in os.environ) is (not kept)


@pytest.mark.parametrize("version", [(0, 9), HIGH, (1, 0)])
def test_never_named_to_an_unchecked_jaxlib(fresh, version):
    # XLA aborts the process on an option it does not know
    fresh.setattr(_config, "_jaxlib_version", lambda: version)
    assert _config._prefer_classic_cpu_emitters() is False
    assert "XLA_FLAGS" not in os.environ


def test_not_set_once_the_backends_have_started(fresh):
    # XLA has read its flags by then: setting them would claim an effect they cannot have
    fresh.setattr(_config, "_backends_started", lambda: True)
    assert _config._prefer_classic_cpu_emitters() is False
    assert "XLA_FLAGS" not in os.environ


def test_version_parsing(monkeypatch):
    import jaxlib

    for text, parsed in [("0.10.2", (0, 10)), ("0.11.0rc1", (0, 11)), ("1.2.dev20260101", (1, 2))]:
        monkeypatch.setattr(jaxlib, "__version__", text)
        assert _config._jaxlib_version() == parsed


_PROBE = """
import json, os, sys
import numpy as np
{before}
import markovsim, jax, jax.numpy as jnp
if {report_only}:
    print(json.dumps({{"flags": os.environ.get("XLA_FLAGS"), "set": markovsim._config.CPU_EMITTER_FLAG_SET}}))
    sys.exit()
rng = np.random.default_rng(3)
R = rng.exponential(size=(9, 9)); np.fill_diagonal(R, 0.0)
Q = jnp.asarray(np.stack([R - np.diag(R.sum(1)), 2 * R - np.diag(2 * R.sum(1))]))
w = jnp.arange(9.0)
pi = jax.jit(jax.vmap(markovsim.stationary_distribution))(Q)
g = jax.jit(jax.vmap(jax.grad(lambda q: markovsim.stationary_distribution(q) @ w)))(Q)
print(json.dumps({{"flags": os.environ.get("XLA_FLAGS"), "set": markovsim._config.CPU_EMITTER_FLAG_SET,
                  "pi": np.asarray(pi).tolist(), "g": np.asarray(g).tolist()}}))
"""


def _probe(env_changes, before="", report_only=False):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MARKOVSIM_KEEP_XLA_FLAGS")}
    env.update(env_changes)
    out = subprocess.run([sys.executable, "-c", _PROBE.format(before=before, report_only=report_only)], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_fresh_import_sets_it_and_results_do_not_change():
    """In a fresh process the import sets the flag (on a checked jaxlib); a process with
    XLA's default emitters computes the same distributions and gradients."""
    import numpy as np

    ours = _probe({})
    checked = LOW <= _config._jaxlib_version() < HIGH
    assert ours["set"] is checked
    assert (ours["flags"] == FLAG) is checked
    default = _probe({"MARKOVSIM_KEEP_XLA_FLAGS": "1"})
    assert default["set"] is False and default["flags"] is None
    np.testing.assert_allclose(ours["pi"], default["pi"], rtol=1e-13)
    np.testing.assert_allclose(ours["g"], default["g"], rtol=1e-10, atol=1e-15)
    # a process whose JAX started before markovsim was imported is left alone
    late = _probe({}, before="import jax; jax.devices()", report_only=True)
    assert late["set"] is False and late["flags"] is None
