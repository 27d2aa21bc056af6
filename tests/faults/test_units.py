"""Rate conventions: per running time vs per wall-clock time."""

import pytest
from hypothesis import given, strategies as st

import markovsim
from markovsim import per_running_rate, per_wall_rate


@given(rate=st.floats(1e-12, 1e3), availability=st.floats(1e-6, 1.0))
def test_converters_are_inverse(rate, availability):
    assert per_running_rate(per_wall_rate(rate, availability), availability) == pytest.approx(rate, rel=1e-12)
    assert per_wall_rate(rate, availability) <= rate          # a job down part of the time sees fewer faults


def test_field_count_example():
    # 419 interruptions in 54 days at 90 % running: 7.76 per wall day, 8.62 per running day
    wall = 419 / (54 * markovsim.DAY)
    assert per_running_rate(wall, 0.9) * markovsim.DAY == pytest.approx(419 / 54 / 0.9)


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_availability_outside_range_is_named(bad):
    with pytest.raises(markovsim.InvalidParameterError, match="availability"):
        per_wall_rate(1.0, bad)
