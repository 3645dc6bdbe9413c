"""Worker functions for run_per_device tests (importable by spawned children)."""

from __future__ import annotations

import os
import time
from typing import Any

import _contract as contract


def behave(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Do what ``payload[device]`` says: answer, raise, skip, die or hang."""
    action = payload[device]
    if action == "raise":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    if action == "skip":
        raise contract.ProbeSkip("no such thing here")
    if action == "die":
        os._exit(7)
    if action == "hang":
        time.sleep(60)
    return {"device": device, "pid": os.getpid(), "status": "ok"}
