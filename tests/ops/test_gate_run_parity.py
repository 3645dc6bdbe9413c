"""Every GPU check of the gate is a check of ``nvtest run`` too, under the same name: the same
checks every day, one judgement (a node the gate fails for a GPU reason is never one the
delivery suite passed for lack of a check; ``clocks`` was gate-only until a field case,
tests/field_cases/cases/hw-power-brake-slowdown-at-idle)."""

from __future__ import annotations

import re

from nvtest.ops.gate import checks_gpu
from tests.e2e.test_fail_closed import all_checks


def test_every_gate_gpu_check_is_a_run_check() -> None:
    source = open(checks_gpu.__file__, encoding="utf-8").read()
    gate = set(re.findall(r'GateCheck\("(\w+)"\)', source))
    assert {"gpus", "ecc", "clocks", "nvlink"} <= gate, gate
    missing = sorted(gate - set(all_checks()))
    assert not missing, f"gate GPU checks with no nvtest run check: {missing}"
