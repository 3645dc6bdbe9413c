"""Clock-throttle reasons at idle: one judgement (:mod:`nvtest.checks.health.clocks`) for the
run's ``clocks`` check and the gate's. The input is the field case's ``nvidia-smi -q -x``
(tests/field_cases/cases/hw-power-brake-slowdown-at-idle): GPU 2 in HW Slowdown and HW Power
Brake Slowdown while idle, every GPU ``gpu_idle``."""

from __future__ import annotations

from nvtest.checks.health import clocks
from nvtest.ops.gate import checks_gpu
from nvtest.parsers import nvidia_smi_xml
from nvtest.verdict import Verdict
from tests.conftest import REPO

XML = REPO / "tests/field_cases/cases/hw-power-brake-slowdown-at-idle/nvidia-smi-q-x.xml"


def test_a_hardware_slowdown_at_idle_fails_naming_the_gpu_and_the_reason() -> None:
    out = clocks.idle_throttle(nvidia_smi_xml.parse(XML.read_text()))
    assert out.verdict is Verdict.FAIL
    assert len(out.failures) == 2 and all(f.startswith("GPU 2 (00000000:52:00.0): hw_") for f in out.failures), (
        out.failures
    )
    assert out.details["clock_event_reasons"] == ["hw_power_brake_slowdown", "hw_slowdown"]


def test_idle_alone_and_a_software_thermal_slowdown() -> None:
    healthy = (
        XML.read_text()
        .replace("hw_slowdown>Active<", "hw_slowdown>Not Active<")
        .replace("hw_power_brake_slowdown>Active<", "hw_power_brake_slowdown>Not Active<")
    )
    assert clocks.idle_throttle(nvidia_smi_xml.parse(healthy)).verdict is Verdict.PASS
    warm = healthy.replace("sw_thermal_slowdown>Not Active<", "sw_thermal_slowdown>Active<", 1)
    assert clocks.idle_throttle(nvidia_smi_xml.parse(warm)).verdict is Verdict.WARN


def test_the_gate_uses_the_same_judgement() -> None:
    assert checks_gpu.idle_throttle is clocks.idle_throttle
    assert not hasattr(checks_gpu, "THROTTLE_SEVERITY")
