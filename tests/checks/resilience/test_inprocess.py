"""The in-process restart drill here: nvidia-resiliency-ext's Wrapper restarts both gloo ranks inside
their processes after one raises, and training continues from the in-memory snapshot."""

from __future__ import annotations

import pytest

from tests.checks.resilience.conftest import run_probe

pytestmark = pytest.mark.slow


def test_inprocess_restart_resumes_from_the_snapshot():
    pytest.importorskip("nvidia_resiliency_ext.inprocess")
    doc = run_probe(
        "resilience_train.py",
        "drill",
        "inprocess",
        "--steps",
        "10",
        "--ckpt-every",
        "4",
        "--kill-step",
        "6",
        "--timeout-s",
        "240",
    )
    assert doc["status"] == "ok", doc["reason"]
    r = doc["results"][0]
    assert r["resumed"], r["reason"]
    assert r["fault"]["rank"] == 1 and r["fault"]["step"] == 6
    assert r["resumed_from_step"] == 4
    assert {e["pid"] for e in r["events"] if e["incarnation"] == 0} == {
        e["pid"] for e in r["events"] if e["incarnation"] == 1
    }
    assert 0 < r["recovery_s"] < 120 and "gloo" in r["backend_note"]
