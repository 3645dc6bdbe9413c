"""A transport whose nodes answer every command at once, in process: the harness's own cost.

With no network, no process and no waiting, a run over :class:`InstantTransport`
measures what nvtest itself spends per (check, node) item: collection, fixtures, the
phase runner and its evidence files, judging, results.jsonl, the progress lines, then
results.json and the reports (``bench/harness_scale_bench.py``, and the test that per
item work does not grow with the number of nodes).

Two fleets:

- ``reachable``: the inventory probe answers with a recorded inventory document (a
  real one; :func:`record_inventory` takes this machine's), its ``host`` set to the
  node's name; every other command answers with an empty output and exit 0 (the
  checks that measure then error: "probe printed no JSON"; those with nothing to
  measure skip with their reason);
- ``unreachable``: every command fails at once with ``connection refused``.

:func:`register` adds it to the backends as ``instant`` (tests and benches only; it
is never one of ``nvtest run``'s backends).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nvtest.config.inventory import Node
from nvtest.config.resources import probes_dir
from nvtest.transports import BACKENDS
from nvtest.transports.base import Command, CommandResult, Transport, render_command

__all__ = ["FLEETS", "InstantTransport", "record_inventory", "register"]

FLEETS = ("reachable", "unreachable")


class InstantTransport(Transport):
    """Answers every command at once (see the module text).

    Args:
        fleet: ``reachable`` or ``unreachable``.
        inventory_doc: the inventory probe's JSON document the nodes answer with
            (``reachable``); None records this machine's (:func:`record_inventory`).

    Raises:
        ValueError: an unknown fleet.
    """

    name = "instant"

    def __init__(self, *, fleet: str = "reachable", inventory_doc: dict[str, Any] | None = None, **_: Any) -> None:
        if fleet not in FLEETS:
            raise ValueError(f"fleet {fleet!r}: one of {', '.join(FLEETS)}")
        self.fleet = fleet
        self.inventory_doc = inventory_doc if inventory_doc is not None or fleet != "reachable" else record_inventory()
        self.calls = 0

    def run(
        self,
        nodes: Sequence[Node],
        command: Command | Mapping[str, Command],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, CommandResult]:
        out: dict[str, CommandResult] = {}
        now = time.time()
        self.calls += 1
        for node in nodes:
            cmd = command[node.name] if isinstance(command, Mapping) else command
            line = render_command(cmd, env)
            if self.fleet == "unreachable":
                out[node.name] = CommandResult(node.name, line, error="connection refused", started_at=now)
            elif "inventory_probe.py" in line:
                doc = json.dumps({**(self.inventory_doc or {}), "host": node.name})
                out[node.name] = CommandResult(node.name, line, stdout=doc, exit_code=0, started_at=now)
            else:
                out[node.name] = CommandResult(node.name, line, exit_code=0, started_at=now)
        return out

    def stage(self, nodes: Sequence[Node], local_dir: Path) -> dict[str, str]:
        return {n.name: str(local_dir) for n in nodes}


_RECORDED: dict[str, Any] = {}


def record_inventory() -> dict[str, Any]:
    """This machine's inventory probe document (run once per process, then kept).

    Raises:
        subprocess.CalledProcessError: the probe failed here.
    """
    if not _RECORDED:
        proc = subprocess.run(
            [sys.executable, str(probes_dir() / "inventory_probe.py")],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        _RECORDED.update(json.loads(proc.stdout))
    return dict(_RECORDED)


def register() -> str:
    """Add ``instant`` to the transports' backends (this process only); returns the name."""
    BACKENDS["instant"] = f"{__name__}:InstantTransport"
    return "instant"
