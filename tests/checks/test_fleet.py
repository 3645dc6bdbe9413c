"""The check API's fleet fixture, the Judge's start over and the transports' multi-node
launchers: what a multi-node check is written with (docs/interconnect.md, "Where a check
lives")."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nvtest.checks.api import Fleet, Judge
from nvtest.checks.fleet import recipe_model
from nvtest.config.recipes import MpiRecipe
from nvtest.session.context import RunConfig, RunContext
from nvtest.transports import get_transport
from nvtest.transports.base import MultiLauncher


def _ctx(tmp_path: Path, name: str) -> RunContext:
    return RunContext.from_config(RunConfig(run_id=name, run_dir=str(tmp_path / name)))


def test_once_is_computed_once_per_run_and_never_shared_between_runs(tmp_path: Path) -> None:
    one, two = _ctx(tmp_path, "r1"), _ctx(tmp_path, "r2")
    calls: list[str] = []
    barrier = threading.Barrier(4)

    def compute() -> str:
        calls.append("computed")
        return f"value {len(calls)}"

    def item() -> None:
        barrier.wait()
        got.append(Fleet(one).once("launch", compute))

    got: list[str] = []
    threads = [threading.Thread(target=item) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["value 1"] * 4 and calls == ["computed"]  # the others waited for the first
    assert Fleet(two).once("launch", compute) == "value 2"  # another run computes its own
    assert one.fleet_cache is not two.fleet_cache


def test_once_raises_the_first_callers_exception_to_every_caller(tmp_path: Path) -> None:
    fleet = Fleet(_ctx(tmp_path, "r1"))
    tries: list[int] = []

    def broken() -> None:
        tries.append(1)
        raise RuntimeError("the launch did not start")

    for _ in range(3):
        with pytest.raises(RuntimeError, match="the launch did not start"):
            fleet.once("launch", broken)
    assert tries == [1]


def test_recipe_is_the_typed_section_and_nodes_are_the_checks(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, "r1")
    fleet = Fleet(ctx)
    node = ctx.nodes[0]
    mpi = fleet.recipe(node, "mpi")
    assert isinstance(mpi, MpiRecipe) and mpi.ranks_per_node is None  # no profile: the check's defaults
    with pytest.raises(KeyError, match="no recipe section 'mpii'"):
        recipe_model("mpii")
    assert fleet.nodes("mpi") == fleet.launch_nodes("mpi") == [node]


def test_judge_restart_drops_metrics_and_failures_and_keeps_the_rest() -> None:
    judge = Judge(None, "nccl_multinode", "n1", None)
    judge("wrong", 0, "count", op="all_reduce")
    judge.fail("all_reduce: #wrong = 7")
    judge.warn("a warning")
    judge.detail("all_nodes", {"status": "fail"})
    judge.restart("the launch over 4 nodes did not pass")
    assert judge.metrics == [] and judge.failures == []
    assert judge.warnings == ["a warning"] and judge.details == {"all_nodes": {"status": "fail"}}
    assert judge.restarts == ["the launch over 4 nodes did not pass"]


def test_only_a_workload_managers_transport_has_a_multi_node_launcher() -> None:
    assert get_transport("local").multi_launcher() is None
    assert get_transport("ssh").multi_launcher() is None
    slurm = get_transport("slurm", mpi="pmix", container_image="nvcr.io#pytorch", image_id="img-1")
    multi = slurm.multi_launcher()
    assert isinstance(multi, MultiLauncher)
    assert (multi.name, multi.mpi_plugin, multi.container_image, multi.image_id) == (
        "srun",
        "pmix",
        "nvcr.io#pytorch",
        "img-1",
    )
    assert multi.launch == slurm.launch_multi  # type: ignore[attr-defined]
