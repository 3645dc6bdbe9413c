"""The harness's own work per item does not grow with the number of nodes, for every check.

The delivery suite runs in process over :class:`~nvtest.testing.instant.InstantTransport`
(nodes that answer at once: reachable ones with this machine's inventory, then
unreachable ones) on a small and a larger fleet, with a line counter (``sys.settrace`` with opcode events)
around each item. For each check, the Python bytecodes executed per item on average must
be the same on both fleets: work done once per check (a phase over all nodes) is the
same per item whatever the fleet; a loop over the fleet inside every item is not, and
a 4,096-node run pays it 4,096 times per check (an hour of harness time). Line counts
do not depend on how busy the machine is, unlike timings (those are in
``bench/harness_scale_bench.py``).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import nvtest
from nvtest.config.resources import suites_dir
from nvtest.testing import instant

SMALL, LARGE = 4, 16
#: Where nvtest's and the suites' code is (what is counted).
OURS = (str(Path(nvtest.__file__).parent), str(suites_dir()))


class LineCounter:
    """A pytest plugin that counts the Python bytecodes each item executes, per check."""

    def __init__(self) -> None:
        self.lines: dict[str, int] = defaultdict(int)
        self.items: dict[str, int] = defaultdict(int)
        self._n = 0

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            if not frame.f_code.co_filename.startswith(OURS):
                return None  # pytest's and the libraries' own work is not counted
            frame.f_trace_opcodes = True  # a comprehension's loop is one line: count bytecodes
        elif event == "opcode":
            self._n += 1
        return self._trace

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        from nvtest.run.plugin import check_name

        self._n = 0
        sys.settrace(self._trace)
        try:
            return (yield)
        finally:
            sys.settrace(None)
            check = check_name(item)
            self.lines[check] += self._n
            self.items[check] += 1

    def per_item(self) -> dict[str, float]:
        return {c: self.lines[c] / self.items[c] for c in self.lines}


def _run(tmp: Path, n: int, fleet: str) -> dict[str, float]:
    from nvtest.cli.run import pytest_args
    from nvtest.config.suites import load_suite, suite_targets
    from nvtest.session.context import RunConfig

    run_dir = tmp / f"{fleet}-{n}"
    run_dir.mkdir()
    inv = tmp / f"inventory-{fleet}-{n}.yaml"
    inv.write_text("nodes:\n" + "".join(f"  - names: n{i:05d}\n" for i in range(n)), encoding="utf-8")
    spec = load_suite("delivery")
    cfg = RunConfig(
        run_id=f"scale-{fleet}-{n}",
        run_dir=str(run_dir),
        suite=spec.name,
        backend=instant.register(),
        backend_options={"fleet": fleet},
        inventory=str(inv),
    )
    cfg_path = run_dir / "run_config.json"
    cfg_path.write_text(cfg.model_dump_json(), encoding="utf-8")
    (run_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    counter = LineCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = pytest.main(pytest_args(run_dir, suite_targets(spec), cfg_path, "none", None), plugins=[counter])
    assert rc == pytest.ExitCode.TESTS_FAILED, f"exit {rc}"
    assert sum(counter.items.values()) == n * len(counter.items)
    return counter.per_item()


@pytest.mark.slow
@pytest.mark.parametrize("fleet", instant.FLEETS)
def test_per_item_work_does_not_grow_with_the_fleet(tmp_path: Path, fleet: str) -> None:
    instant.record_inventory()
    small = _run(tmp_path, SMALL, fleet)
    large = _run(tmp_path, LARGE, fleet)
    assert set(small) == set(large) and len(small) >= 20, sorted(small)
    grows = {
        check: f"{small[check]:.0f} -> {large[check]:.0f} bytecodes per item"
        for check in small
        # a loop over the nodes inside each item adds a few bytecodes per node at least
        if large[check] - small[check] >= 2 * (LARGE - SMALL)
    }
    assert not grows, f"per-item work grows with the fleet ({SMALL} -> {LARGE} nodes): {grows}"
