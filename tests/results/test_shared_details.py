"""A large detail that every node's item of a check repeats (an MPMD command line, a job's
rank map) is stored once, so results.jsonl grows with the fleet, not with its square."""

from __future__ import annotations

from pathlib import Path

from nvtest.results import SHARED_DETAIL_BYTES, CheckResult, ResultStore, assemble
from nvtest.verdict import Verdict


def test_a_repeated_large_detail_is_stored_once(tmp_path: Path) -> None:
    command = "mpirun " + " : ".join(f"--host n{i:04d}:1 python3 mpi_probe.py" for i in range(400))
    assert len(command) > SHARED_DETAIL_BYTES
    store = ResultStore(tmp_path)
    for i in range(3):
        store.result(
            CheckResult(
                check="mpi",
                node=f"n{i:04d}",
                verdict=Verdict.PASS,
                details={"command": command, "node_ranks": [i], "launcher": "mpirun"},
            )
        )
    store.result(CheckResult(check="mpi", node="n0003", verdict=Verdict.PASS, details={"command": command + " -x A"}))
    store.close()
    by = {r["node"]: r["details"] for r in assemble(tmp_path / "results.jsonl")["results"]}
    assert by["n0000"]["command"] == command
    assert by["n0001"]["command"] == by["n0002"]["command"] == {"same_as": "mpi[n0000]"}
    assert by["n0001"]["node_ranks"] == [1] and by["n0001"]["launcher"] == "mpirun"  # small: as they were
    assert by["n0003"]["command"] == command + " -x A"  # not the same: kept
    assert (tmp_path / "results.jsonl").stat().st_size < 3 * len(command)
