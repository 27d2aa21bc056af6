"""The strict TOML reader shared by every model file (markovsim._io; markovsim._spec is the
deprecated old name of the same objects)."""

import pytest

import markovsim as ms
from markovsim._io import Table, parse_quantity, recording_keys, resolve


@pytest.mark.parametrize("text,kind,expected", [
    ("20 min", "time", 1200.0), ("3 h", "time", 10800.0), ("4 %", "ratio", 0.04),
    ("200 Gb/s", "bandwidth", 25e9), ("1 /h", "rate", 1 / 3600.0), ("0.5", "ratio", 0.5),
])
def test_quantities_convert_to_si(text, kind, expected):
    assert parse_quantity(text, kind) == pytest.approx(expected, rel=1e-15)


def test_bare_number_for_a_time_is_a_missing_unit():
    with pytest.raises(ms.SpecError, match=r"restart=120: missing unit"):
        parse_quantity(120, "time", where="restart")


def test_unknown_key_is_named():
    t = Table({"a": 1, "typo": 2}, "cluster")
    t.integer("a")
    with pytest.raises(ms.SpecError, match="'typo'"):
        t.finish()


def test_raw_without_types_accepts_booleans_and_typed_rejects_them():
    t = Table({"flag": True, "n": True}, "x")
    assert t.raw("flag") is True
    with pytest.raises(ms.SpecError, match="x.n=True"):
        t.integer("n")


def test_a_choice_in_another_case_is_the_choice_and_a_typo_is_refused():
    t = Table({"precision": "FP8", "batch": "Fixed-Global", "dtype": "fp9"}, "plan")
    assert t.text("precision", choices=("bf16", "fp8")) == "fp8"
    assert t.text("batch", choices=("fixed-global", "fixed-replica")) == "fixed-global"
    with pytest.raises(ms.SpecError, match=r"plan.dtype='fp9': expected one of 'bf16', 'fp8'"):
        t.text("dtype", choices=("bf16", "fp8"))


def test_a_number_or_a_flag_where_a_choice_belongs_is_refused_with_the_choices():
    t = Table({"elementwise": 3, "recompute": True, "name": 7}, "plan")
    with pytest.raises(ms.SpecError, match=r"plan.elementwise=3: expected one of 'fused', 'eager'"):
        t.text("elementwise", choices=("fused", "eager"))
    with pytest.raises(ms.SpecError, match=r"plan.recompute=True: expected one of 'none', 'full'"):
        t.text("recompute", choices=("none", "full"))
    with pytest.raises(ms.SpecError, match=r"plan.name=7: expected str"):  # free text: the type is the rule
        t.text("name")


def test_optional_integer_with_minimum_may_be_absent():
    assert Table({}, "x").integer("n", None, minimum=1) is None


def test_the_old_module_name_is_the_same_reader():
    import markovsim._spec as old

    assert old.Table is Table and old.parse_quantity is parse_quantity


def test_a_table_with_a_schema_describes_every_key_it_reads():
    doc = {"interval": "1 h", "tiers": [{"name": "a"}, {"name": "b", "coverage": 0.5}]}
    with recording_keys() as found:
        t = Table(doc, "", schema="demo", docs={"tiers[].name": "the tier's name"})
        t.quantity("interval", "time", strictly_positive=True, doc="work between checkpoints")
        for tier in t.tables("tiers"):
            tier.text("name")
            tier.probability("coverage", 1.0)
        t.integer("count", 3, minimum=1)
    got = {key: (i.kind, i.required, i.default, i.constraint, i.doc) for (_, key), i in found.items()}
    assert got == {
        "interval": ("time", True, "", "> 0", "work between checkpoints"),
        "tiers": ("array of tables", True, "", "", ""),
        "tiers[].name": ("text", True, "", "", "the tier's name"),
        "tiers[].coverage": ("ratio", False, "1", "0 to 1", ""),
        "count": ("integer", False, "3", ">= 1", ""),
    }
    Table(doc, "", schema="demo").raw("interval")     # outside recording_keys: nothing is kept
    assert len(found) == 5


def test_one_reference_rule(tmp_path):
    assert resolve("ascend_tiered", folder="recovery").name == "ascend_tiered.toml"
    assert resolve("mine.toml", folder="recovery", base=tmp_path) == tmp_path / "mine.toml"
    assert resolve("sub/mine", folder="recovery", base=tmp_path) == tmp_path / "sub" / "mine"
    assert resolve("mine.toml", folder="recovery") == __import__("pathlib").Path("mine.toml")
    with pytest.raises(ms.SpecError, match=r"no preset 'nope' in models/recovery/ \(presets: ascend_tiered"):
        resolve("nope", folder="recovery")


@pytest.mark.parametrize("typed,meant", [
    ("H100_SXM", "'h100_sxm'"), ("h100", "'h100_sxm'"), ("H100 SXM", "'h100_sxm'"), ("gb200", "'gb200_nvl72'"),
])
def test_a_mistyped_preset_name_is_refused_with_the_preset_it_likely_meant(typed, meant):
    # refused, not resolved: a near name is a guess, so the error offers it and stops
    with pytest.raises(ms.SpecError, match=f"did you mean {meant}\\? no preset '{typed}' in models/hardware/"):
        resolve(typed, folder="hardware")


def test_a_name_near_no_preset_gets_only_the_list():
    with pytest.raises(ms.SpecError) as e:
        resolve("zzz", folder="hardware")
    assert "did you mean" not in str(e.value) and "(presets: a100_sxm_40gb" in str(e.value)
