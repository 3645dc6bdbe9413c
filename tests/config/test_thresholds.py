"""Threshold evaluation as table tests, and the threshold schema."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from nvtest.config.thresholds import Threshold, evaluate
from nvtest.verdict import Verdict, worst

T = Threshold


@pytest.mark.parametrize(
    ("value", "unit", "threshold", "verdict"),
    [
        (10.0, "GB/s", T(min=5, unit="GB/s", source="s"), Verdict.PASS),
        (5.0, "GB/s", T(min=5, unit="GB/s", source="s"), Verdict.PASS),
        (4.99, "GB/s", T(min=5, unit="GB/s", source="s"), Verdict.FAIL),
        (90.0, "C", T(max=85, unit="C", source="s"), Verdict.FAIL),
        (85.0, "C", T(max=85, unit="C", source="s"), Verdict.PASS),
        (49.0, "GB/s", T(min=48, warn_min=50.4, unit="GB/s", source="s"), Verdict.WARN),
        (47.0, "GB/s", T(min=48, warn_min=50.4, unit="GB/s", source="s"), Verdict.FAIL),
        (51.0, "GB/s", T(min=48, warn_min=50.4, unit="GB/s", source="s"), Verdict.PASS),
        (81.0, "C", T(max=90, warn_max=80, unit="C", source="s"), Verdict.WARN),
        (400.0, "Gb/s", T(min=380, unit="GB/s", source="s"), Verdict.ERROR),  # units checked
        (None, "GB/s", T(min=1, unit="GB/s", source="s"), Verdict.ERROR),  # missing metric
        (math.nan, "GB/s", T(min=1, unit="GB/s", source="s"), Verdict.ERROR),
        (math.inf, "GB/s", None, Verdict.ERROR),
        (3.0, "GB/s", None, Verdict.PASS),  # measured only
    ],
)
def test_evaluate_table(value, unit, threshold, verdict):
    ev = evaluate(value, unit, threshold)
    assert ev.verdict is verdict, ev.reason
    assert ev.reason


def test_fail_reason_names_value_and_bound():
    ev = evaluate(412.0, "GB/s", T(min=431, unit="GB/s", source="Az"))
    assert ev.reason == "412 GB/s < min 431 GB/s"


def test_unit_mismatch_reason():
    ev = evaluate(400.0, "Gb/s", T(min=380, unit="GB/s", source="s"))
    assert "unit mismatch" in ev.reason and "Gb/s" in ev.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min": 1, "source": "s"},  # no unit
        {"min": 1, "unit": "GB/s"},  # no source
        {"min": 1, "unit": "furlongs", "source": "s"},  # unknown unit
        {"unit": "GB/s", "source": "s"},  # no bound
        {"min": 5, "max": 1, "unit": "GB/s", "source": "s"},
        {"min": 1, "unit": "GB/s", "source": "s", "mni": 3},  # unknown key
    ],
)
def test_threshold_schema_rejects(kwargs):
    with pytest.raises(ValidationError):
        Threshold(**kwargs)


def test_worst_order():
    assert worst([Verdict.PASS, Verdict.WARN]) is Verdict.WARN
    assert worst([Verdict.ERROR, Verdict.FAIL, Verdict.PASS]) is Verdict.FAIL
    assert worst([Verdict.SKIP, Verdict.PASS]) is Verdict.PASS
    assert worst([]) is Verdict.SKIP
    assert Verdict.ERROR.is_bad and Verdict.FAIL.is_bad and not Verdict.WARN.is_bad
