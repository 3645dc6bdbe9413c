"""A GPU's enforced power limit below its board default warns (a cap left by ``nvidia-smi -pl``).

Both nvidia-smi formats carry the two limits (``-q`` text: ``Current Power Limit`` /
``Default Power Limit``; ``-q -x``: ``current_power_limit`` / ``default_power_limit``); the
text is the ``nvidia-smi -q -d power`` of stackhpc/ansible-slurm-appliance#975 (a 700 W GPU
capped at 500 W), the XML the field case's (tests/field_cases/cases/gpu-power-limit-left-capped).
"""

from __future__ import annotations

from nvtest.checks.health import Outcome
from nvtest.checks.health.gpus import _power_cap
from nvtest.parsers import nvidia_smi_q, nvidia_smi_xml
from nvtest.verdict import Verdict
from tests.conftest import REPO

#: nvidia-smi -q -d power, driver 595.71.05 (stackhpc/ansible-slurm-appliance#975), one GPU
TEXT = """\
==============NVSMI LOG==============

Timestamp                                              : Fri Jun 26 10:53:53 2026
Driver Version                                         : 595.71.05
CUDA Version                                           : 13.2

Attached GPUs                                          : 1
GPU 00000000:06:00.0
    GPU Power Readings
        Average Power Draw                             : 78.83 W
        Instantaneous Power Draw                       : 78.75 W
        Current Power Limit                            : 500.00 W
        Requested Power Limit                          : 700.00 W
        Default Power Limit                            : 700.00 W
        Min Power Limit                                : 200.00 W
        Max Power Limit                                : 700.00 W
"""

XML = REPO / "tests/field_cases/cases/gpu-power-limit-left-capped/nvidia-smi-q-x.xml"


def test_both_formats_read_the_enforced_and_the_default_limit() -> None:
    (g,) = nvidia_smi_q.parse(TEXT).gpus
    assert (g.power_limit_w, g.power_limit_default_w) == (500.0, 700.0)
    gpus = nvidia_smi_xml.parse(XML.read_text()).gpus
    assert [(x.power_limit_w, x.power_limit_default_w) for x in gpus][4:6] == [(700.0, 700.0), (500.0, 700.0)]


def test_a_limit_below_the_default_warns_naming_both() -> None:
    out = Outcome()
    _power_cap(5, 500.0, 700.0, out)
    assert out.verdict is Verdict.WARN
    assert "GPU 5: power limit 500 W, below its default 700 W" in out.text()


def test_at_the_default_or_unknown_nothing_is_said() -> None:
    for limit, default in ((700.0, 700.0), (699.5, 700.0), (None, 700.0), (500.0, None)):
        out = Outcome()
        _power_cap(0, limit, default, out)
        assert out.verdict is Verdict.PASS and not out.text(), (limit, default, out.text())
