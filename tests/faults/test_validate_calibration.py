"""``markovsim validate --calibrate``: a catalogue fitted to a log from the command line.

The CLI must add nothing: its numbers are those of ``calibrate_catalogue`` on the same
inputs, and those are checked against closed forms in ``test_calibrate.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import markovsim
from markovsim import DAY, _cli
from markovsim.availability import (INFINITEHBD_NODES, IncidentLog, calibrate_catalogue, infinitehbd_trace,
                                    load_cluster)
from markovsim.validate import run_calibration

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _write(tmp_path, text, name="calibration.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _infinitehbd_direct(availability, **kw):
    """The same calibration by the Python call (each fault start: one incident of a job on all nodes)."""
    shape, cat = load_cluster("gpu_8x_16k")
    log = infinitehbd_trace()
    order = np.argsort(log.start, kind="stable")
    inc = IncidentLog(time=log.start[order], cause=tuple(log.classes[c] for c in log.fault_class[order]),
                      downtime=np.full(log.n_faults, np.nan), window=log.window,
                      cards=INFINITEHBD_NODES * shape.cards_per_node)
    return calibrate_catalogue(cat, shape, inc, availability=availability, **kw)


def test_cli_calibrates_the_gpu_catalogue_to_the_shipped_infinitehbd_trace(tmp_path, capsys):
    path = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nfault_log = "infinitehbd"\navailability = 0.95\n')
    code, out, _ = run(capsys, "validate", "--calibrate", path)
    direct = _infinitehbd_direct(0.95)
    scale = direct.fitted[0]
    assert scale.name == "rate scale (all modes)" and scale.low < scale.estimate < scale.high
    assert f"{scale.estimate:10.4g} [{scale.low:.4g}, {scale.high:.4g}]" in out   # fitted value with its interval
    assert "incidents" in out and "(fitted output)" in out                    # the fitted total is marked
    # 349 faults in the shipped window: the fitted count is the observed one, as fitted
    assert direct.checks[0].observed == infinitehbd_trace().n_faults == 349
    # the trace is bursty (daily dispersion far above a Poisson log): an unfitted check fails, exit 1
    disp = next(r for r in direct.checks if r.statistic == "daily dispersion")
    assert not disp.passed and not disp.fitted
    assert code == 1

    code, out, _ = run(capsys, "validate", "--calibrate", path, "--json")
    payload = json.loads(out)
    assert payload["passed"] is False and code == 1
    assert payload["fitted"][0]["estimate"] == pytest.approx(scale.estimate, rel=1e-12)
    assert all(v["fitted"] for v in payload["fitted"])
    assert [c["fitted"] for c in payload["checks"]] == [c.fitted for c in direct.checks]


def test_per_component_calibration_with_a_cause_map(tmp_path):
    classes = infinitehbd_trace().classes
    to = {"GPU": "gpu", "NIC": "nic", "Parameter Plane Cable": "network_link", "Power Supply": "power_supply",
          "Fan": "fan", "Stress Test Failure": "stress_test", "Software Tool": "node_software",
          "System Crash": "node_software", "File System": "node_software", "Unknown Error": "unknown"}
    cmap = {c: to.get(c, "host_other") for c in classes}
    lines = "\n".join(f'"{k}" = "{v}"' for k, v in cmap.items())
    path = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nfault_log = "infinitehbd"\navailability = 0.95\n'
                            f'scale = "component"\nsimulations = 200\n[calibrate.cause_map]\n{lines}\n')
    report = run_calibration(path)
    direct = _infinitehbd_direct(0.95, scale="component", cause_map=cmap, simulations=200)
    assert [(v.name, v.estimate, v.low, v.high) for v in report.result.fitted] == \
        [(v.name, v.estimate, v.low, v.high) for v in direct.fitted]
    gpu = next(v for v in report.result.fitted if v.name == "rate scale gpu")
    assert gpu.low < gpu.estimate < gpu.high
    assert all(r.fitted for r in report.result.checks if r.statistic.startswith("incidents"))


def test_incident_log_file_and_cases_together(tmp_path, capsys):
    rng = np.random.default_rng(3)
    times = np.sort(rng.uniform(0, 30, 120))
    (tmp_path / "log.csv").write_text("time_d,cause\n" + "".join(f"{t:.6f},gpu\n" for t in times))
    path = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nincidents = "log.csv"\nwindow = "30 d"\n'
                            'cards = 8192\navailability = 0.95\n')
    report = run_calibration(path)
    rate = next(v for v in report.result.fitted if v.name == "interruption rate (running)")
    assert rate.estimate == pytest.approx(120 / (0.95 * 30), rel=1e-12)
    assert report.result.running_time == pytest.approx(0.95 * 30 * DAY)
    code, out, _ = run(capsys, "validate", "--calibrate", path, ROOT / "models" / "cases" / "example.toml")
    assert out.index("fitted values:") < out.index("checks against the fitted model:")
    assert code in (0, 1)   # the case file's own verdict joins the calibration's


def test_calibration_file_errors_name_the_key(tmp_path, capsys):
    both = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nfault_log = "infinitehbd"\nincidents = "x.csv"\n')
    with pytest.raises(markovsim.SpecError, match="exactly one of 'incidents'"):
        run_calibration(both)
    typo = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nfault_log = "infinitehbd"\navailabilty = 0.9\n')
    with pytest.raises(markovsim.SpecError, match="availabilty"):
        run_calibration(typo)
    no_avail = _write(tmp_path, '[calibrate]\ncluster = "gpu_8x_16k"\nfault_log = "infinitehbd"\n')
    with pytest.raises(markovsim.InvalidParameterError, match="availability"):
        run_calibration(no_avail)
    code, _, err = run(capsys, "validate")
    assert code == 2 and "--calibrate" in err
