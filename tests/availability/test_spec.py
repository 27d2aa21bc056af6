"""Model files: the shipped files load, every number cites a source, bad files fail clearly."""

import re
from pathlib import Path

import pytest

import markovsim
from markovsim.availability import (
    Effect,
    analyze,
    component_counts,
    fat_tree_levels,
    interruption_rate,
    load_cluster,
    load_faults,
    load_model,
    load_recovery,
    mtbf_doubling_ratio,
    per_card_fault_rate,
    superlinear_share_for_ratio,
)

ROOT = Path(__file__).resolve().parents[2] / "models"
CLUSTERS = sorted((ROOT / "clusters").glob("*.toml"))
RECOVERY = sorted((ROOT / "recovery").glob("*.toml"))
FILES = CLUSTERS + RECOVERY + sorted((ROOT / "faults").glob("*.toml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_number_carries_a_source(path):
    number = re.compile(r"^\s*(?!name\b)\w+\s*=\s*\"?[-+]?\d")
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if number.search(line.split("#")[0]):
            assert re.search(r"#\s*(source|assumption|derived)", line), f"{path.name}:{i}: {line}"


@pytest.mark.filterwarnings("ignore::markovsim.MarkovsimWarning")  # a plan written for another catalogue warns
@pytest.mark.parametrize("cluster", CLUSTERS, ids=lambda p: p.stem)
@pytest.mark.parametrize("recovery", RECOVERY, ids=lambda p: p.stem)
def test_shipped_models_load(cluster, recovery):
    m = load_model(cluster, recovery, cards=4096)
    assert m.cards == 4096 and len(m.fault_names) == len(m.fault_tier)


@pytest.mark.parametrize("cluster,recovery", [("gpu_8x_16k", "checkpoint_only"),
                                              ("cloudmatrix384_160k", "ascend_tiered")])
def test_shipped_models_solve(cluster, recovery):
    m = load_model(ROOT / "clusters" / f"{cluster}.toml", ROOT / "recovery" / f"{recovery}.toml", cards=4096)
    g = float(analyze(m).goodput)
    assert 0 < g < 1


def test_topology_counts_and_mtbf_scaling():
    assert fat_tree_levels(10240, 64) == 3 and fat_tree_levels(2048, 64) == 2 and fat_tree_levels(64, 64) == 1
    shape, cat = load_cluster(ROOT / "clusters" / "atlas800t_a2_10k.toml")
    counts = component_counts(shape)
    # 3 levels: (2L - 1) E / k switches, E + 2E links, two modules per optical link
    assert counts["switch"] == pytest.approx(5 * 10240 / 64)
    assert counts["optical_module"] == pytest.approx(2 * 3 * 10240)
    # per-card components alone halve the MTBF on doubling; the network's extra level can only worsen it
    ratio = mtbf_doubling_ratio(cat, shape, 2048)  # 2 -> 3 levels
    assert ratio < 0.5
    assert mtbf_doubling_ratio(cat, shape, 4096) == pytest.approx(0.5, rel=1e-12)  # 3 levels both
    assert superlinear_share_for_ratio(1 / 3) == pytest.approx(0.5)
    assert per_card_fault_rate(cat, shape) * shape.cards == pytest.approx(interruption_rate(cat, shape))
    assert per_card_fault_rate(cat, shape, effect=Effect.TOLERATED) > 0


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD_RECOVERY = (ROOT / "recovery" / "checkpoint_only.toml").read_text()
GOOD_FAULTS = (ROOT / "faults" / "ascend_training.toml").read_text()


@pytest.mark.parametrize("old,new,field", [
    ('rate = "0.0809 AFR"', 'rate = "-0.0809 AFR"', "rate"),
    ('share = 0.8 ', 'share = 1.8 ', "share"),
    ('detection_time = "15 min"', 'detection_time = 900', "detection_time"),
    ('scope = "card"', 'scope = "rack"', "scope"),
    ('name = "hbm"\n', 'name = "hbm"\ncolour = "red"\n', "colour"),
    ('effect = "degrade"', 'effect = "sometimes"', "effect"),
])
def test_bad_fault_files_name_the_field(tmp_path, old, new, field):
    assert old in GOOD_FAULTS
    p = _write(tmp_path, "f.toml", GOOD_FAULTS.replace(old, new, 1))
    with pytest.raises(markovsim.SpecError, match=field):
        load_faults(p)


TIERED = (ROOT / "recovery" / "ascend_tiered.toml").read_text()


@pytest.mark.parametrize("text,old,new,field", [
    (GOOD_RECOVERY, 'detection = "30 min"', 'detection = 1800', "detection"),
    (GOOD_RECOVERY, 'interval = "1 h"', 'interval = "1 h"\nperiod = "2 h"', "period"),
    (GOOD_RECOVERY, 'save_time = "120 s"', 'save_time = "-120 s"', "save_time"),
    (TIERED, 'fallback = "online recovery"', 'fallback = "operator retry"', "escalate to itself"),
    (TIERED, 'fallback = "step rescheduling"', 'fallback = "operator retry"', "up the ladder"),
    (TIERED, 'fallback = "pod restart"', 'fallback = "nowhere"', "no such tier"),
    (TIERED, 'coverage = 0.9               # assumption: most network', 'coverage = 1.2 # ', "coverage"),
    (TIERED, 'coverage = 1.0               # assumption: every', 'coverage = "120 %" # ', "coverage"),
    (TIERED, 'rollback = "memory"', 'rollback = "some"', "rollback"),
    (TIERED, 'size = 16 ', 'size = -1 ', "size"),
])
def test_bad_recovery_files_name_the_field(tmp_path, text, old, new, field):
    assert old in text, old
    p = _write(tmp_path, "r.toml", text.replace(old, new, 1))
    with pytest.raises(markovsim.SpecError, match=field):
        load_recovery(p)


def test_missing_fault_file_is_a_spec_error(tmp_path):
    text = (ROOT / "clusters" / "gpu_8x_16k.toml").read_text().replace("../faults/gpu_training.toml", "nope.toml")
    with pytest.raises(markovsim.SpecError, match="not found"):
        load_cluster(_write(tmp_path, "c.toml", text))
