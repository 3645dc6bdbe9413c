"""Pure parts: the effective-training-time model and the recovery timeline from events."""

from __future__ import annotations

import math

import pytest

from nvtest.resilience.effective import daly_interval, effective_fraction, estimate, young_interval
from nvtest.resilience.timeline import compare_losses, recovery_figures


def test_effective_fraction_formula():
    # 1 - C/T - (T/2 + R)/M with C=60 s, T=1800 s, R=120 s, M=24 h
    expected = 1 - 60 / 1800 - (900 + 120) / 86400
    assert effective_fraction(1800, 60, 120, 86400) == pytest.approx(expected)
    assert effective_fraction(10, 100, 0, 50) == 0.0  # clamped
    with pytest.raises(ValueError):
        effective_fraction(0, 1, 1, 1)


def test_daly_optimum_beats_neighbours():
    c, m, r = 60.0, 86400.0, 120.0
    t = daly_interval(c, m, r)
    assert t == pytest.approx(math.sqrt(2 * c * (m + r)) - c)
    assert young_interval(c, m) == pytest.approx(math.sqrt(2 * c * m))
    best = effective_fraction(t, c, r, m)
    assert best >= effective_fraction(t / 2, c, r, m) and best >= effective_fraction(t * 2, c, r, m)
    est = estimate(m, 1800, c, r)
    assert est.effective_at_daly == pytest.approx(best)
    assert est.save_share + est.failure_share == pytest.approx(1 - est.effective_fraction)


def _ev(t, ev, rank, inc, **kw):
    return {"t": t, "ev": ev, "rank": rank, "incarnation": inc, "pid": 100 * inc + rank, **kw}


EVENTS = [
    _ev(0.0, "start", 0, 0),
    _ev(0.0, "start", 1, 0),
    _ev(1.0, "step", 0, 0, step=9),
    _ev(1.0, "step", 1, 0, step=9),
    _ev(1.1, "step", 0, 0, step=10),
    _ev(1.1, "step", 1, 0, step=10),
    _ev(1.35, "error", 0, 0, reason="RuntimeError: Connection closed by peer"),
    _ev(1.4, "sigterm", 0, 0),
    _ev(2.0, "start", 0, 1),
    _ev(2.1, "start", 1, 1),
    _ev(5.0, "ready", 0, 1),
    _ev(5.2, "ready", 1, 1),
    _ev(5.5, "resume", 0, 1, step=8),
    _ev(5.6, "resume", 1, 1, step=8),
    _ev(5.8, "step", 0, 1, step=9),
    _ev(5.9, "step", 1, 1, step=9),
]


def test_recovery_figures_split_the_timeline():
    fig = recovery_figures(EVENTS, {"t": 1.2, "rank": 1, "at_step": 10})
    assert fig.detect_s == pytest.approx(0.15)
    assert "collective failed" in fig.detected_by
    assert fig.restart_s == pytest.approx(5.2 - 1.35)
    assert fig.reload_s == pytest.approx(0.4)
    assert fig.recovery_s == pytest.approx(5.9 - 1.2)
    assert fig.detect_s + fig.restart_s + fig.reload_s + fig.first_step_s == pytest.approx(
        fig.recovery_s
    )
    assert (fig.resumed_from_step, fig.last_step_before_kill, fig.steps_lost) == (8, 10, 2)


def test_no_restart_gives_no_recovery():
    fig = recovery_figures(EVENTS[:8], {"t": 1.2, "rank": 1, "at_step": 10})
    assert fig.recovery_s is None and fig.incarnation is None and fig.steps_lost is None


def test_loss_comparison_catches_a_different_trajectory():
    ref = {str(s): 4.0 - 0.1 * s for s in range(1, 11)}
    same = {str(s): ref[str(s)] for s in range(9, 11)}
    assert compare_losses(ref, same, 8).matches
    off = {**same, "10": ref["10"] + 1e-3}
    bad = compare_losses(ref, off, 8)
    assert not bad.matches and bad.max_abs_diff == pytest.approx(1e-3)
    missing = compare_losses(ref, {"9": ref["9"]}, 8)
    assert not missing.matches and missing.missing_steps == (10,)
