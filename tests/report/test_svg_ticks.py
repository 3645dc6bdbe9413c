"""Chart ticks end for every range, including spans below float resolution."""

from __future__ import annotations

import pytest

from nvtest.report.svg import nice_ticks


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0.0, 10.0), (123.4567, 123.4568), (1e6, 1e6 + 1e-10), (12.3, 12.3 + 2e-15), (-5.0, 5.0), (0.0, 1e-300)],
)
def test_ticks_are_bounded_and_cover_the_range(lo, hi):
    ticks = nice_ticks(lo, hi)
    assert 1 <= len(ticks) <= 18
    assert ticks == sorted(ticks)
    assert ticks[0] >= lo - (hi - lo) and ticks[-1] <= hi + (hi - lo) + 1e-9


def test_round_steps():
    assert nice_ticks(0, 10) == [0.0, 2.5, 5.0, 7.5, 10.0]
