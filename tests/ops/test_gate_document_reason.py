"""A gate decision's reason is one line within the bound every result has; the whole text
stays in the check's notes and the next step is read from it."""

from __future__ import annotations

from nvtest.ops.gate.document import GateCheck
from nvtest.results import REASON_MAX_CHARS


def test_a_long_multi_line_reason_is_one_line_and_kept_whole_in_the_notes():
    words = "; ".join(f"package nvidia-driver-{i} 570.{i} differs from the fleet's 565.57.01" for i in range(40))
    reason = "Failed to initialize NVML: Driver/library version mismatch\n" + words
    c = GateCheck("driver")
    c.add("fail", "driver", reason)
    doc = c.to_json()
    assert "\n" not in doc["reason"] and len(doc["reason"]) <= REASON_MAX_CHARS
    assert doc["reason"].startswith("Failed to initialize NVML")
    assert any(n.endswith(reason) for n in doc["notes"])
    step = doc["decisions"][0]["next_step"]
    assert step is not None and step["rule"]


def test_a_short_reason_is_kept_as_it_is():
    c = GateCheck("gpus")
    c.add("fail", "gpus", "7 of 8 GPUs")
    assert c.to_json()["reason"] == "7 of 8 GPUs" and c.notes == []
