"""The strict TOML reader shared by every model file."""

import pytest

import markovsim as ms
from markovsim._spec import Table, parse_quantity


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


def test_optional_integer_with_minimum_may_be_absent():
    assert Table({}, "x").integer("n", None, minimum=1) is None
