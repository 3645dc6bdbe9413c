"""The command lines the ssh transport runs on a node besides the user's own, against golden
files: the wrapper (own process group and session, the task token), the deadline's kill
script, and the exec-channel staging (tar on stdin). Regenerate with NVTEST_REGEN_GOLDEN=1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nvtest.transports.ssh import kill_script, untar_script, wrap_command
from tests.golden import assert_golden, stale_goldens

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = "/tmp/nvtest-20260101-120000-abcd-0123abcd"

CASES: dict[str, Callable[[], str]] = {
    "ssh_wrapper": lambda: wrap_command("nvidia-smi -q -x", "0123456789abcdef") + "\n",
    "ssh_kill_script": lambda: kill_script(4242, 3.0, "0123456789abcdef") + "\n",
    "ssh_untar_staging": lambda: untar_script(ROOT, f"{ROOT}/probes") + "\n",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_golden(case: str) -> None:
    assert_golden(GOLDEN, case, CASES[case]())


def test_no_stale_golden_files() -> None:
    assert not stale_goldens(GOLDEN, CASES)
