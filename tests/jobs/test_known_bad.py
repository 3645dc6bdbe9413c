"""Issue 24, class 3: known-bad nodes are left out, and one node's fault is not copied to others.

- every multi-node launch of the suites (walked from their source: each check whose item
  reaches a launcher) leaves out the nodes an earlier check failed or hung on, and names them;
- a hang is pinned on the node the evidence names, which is paired no further, and its peers
  are not errors for it (:mod:`nvtest.jobs.blame`, on outcomes);
- over a real sshd cluster: one node's checkpoint probe stuck in D state (a frozen cgroup, the
  closest real thing) fails that node alone, "stuck on storage (<path>)", the aggregate and
  the other nodes' items stand on their own probes, and the next real launch (mpirun) and
  pair schedule run without it and name it; too few nodes left is an error, never a pass.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import time
from pathlib import Path

import pytest
import yaml

from nvtest.checks.interconnect.pair_check import pair_report
from nvtest.checks.resilience.ckpt import aggregate
from nvtest.checks.resilience.probes import CKPT
from nvtest.checks.resilience.spanning import run_span_drill
from nvtest.config.resources import suites_dir
from nvtest.errors import NodeError, NodeWedged
from nvtest.jobs.base import MULTI_NODE_CHECKS, known_bad, launch_nodes, require_launched
from nvtest.jobs.blame import PairOutcome, attribute, find_suspects, repair_rounds
from nvtest.jobs.mpi import node_share as mpi_share
from nvtest.jobs.mpi import run_mpi
from nvtest.jobs.pair_jobs import TcpPairJob
from nvtest.jobs.pair_runner import run_pair_schedule
from nvtest.jobs.pairs import build_schedule
from nvtest.jobs.torchrun import node_share, run_torchrun
from nvtest.playbook.diagnosis import diagnose
from nvtest.session.context import RunConfig, RunContext
from nvtest.session.probe import Probe, measure_probe
from nvtest.testing.sshd_cluster import SSHDCluster
from nvtest.testing.wedged import Freezer, freezer_unavailable_reason
from tests.conftest import PROBES
from tests.jobs.conftest import SIM_SKU

#: What a suite item calls to launch one job (or a pair schedule) over several nodes.
LAUNCHERS = frozenset({"run_torchrun", "run_mpi", "pair_report", "multi_launcher", "run_span_drill", "mpirun_argv"})
#: Checks that reach a launcher's name without launching over several nodes (each with why).
NOT_LAUNCHES = {"numa_affinity": "reads the --bind-to of a one-node mpirun line it never runs"}
#: Launching checks that do not leave known-bad nodes out yet (each with why), so the walk
#: names them instead of missing them (none now: nvlink_multinode selects with launch_nodes).
NOT_YET: dict[str, str] = {}


def _calls(tree: ast.Module) -> dict[str, set[str]]:
    """function name -> the names it calls, through the module's own functions (transitively)."""
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    direct = {
        name: {
            (c.func.id if isinstance(c.func, ast.Name) else c.func.attr)
            for c in ast.walk(f)
            if isinstance(c, ast.Call) and isinstance(c.func, (ast.Name, ast.Attribute))
        }
        for name, f in funcs.items()
    }
    out = {}
    for name in funcs:
        seen, todo = set(), [name]
        while todo:
            for called in direct.get(todo.pop(), ()):
                if called not in seen:
                    seen.add(called)
                    todo.append(called)
        out[name] = seen
    return out


def _check_functions(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """name -> (module, function or None for a module) imported from ``nvtest.checks.<area>``."""
    out: dict[str, tuple[str, str | None]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("nvtest.checks."):
            for a in stmt.names:
                sub = f"{stmt.module}.{a.name}"
                is_module = importlib.util.find_spec(stmt.module) is not None and _is_module(sub)
                out[a.asname or a.name] = (sub, None) if is_module else (str(stmt.module), a.name)
    return out


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _module_tree_calls(module: str) -> dict[str, set[str]]:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module
    return _calls(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))


def _followed(f: ast.FunctionDef, local: set[str], imported: dict[str, tuple[str, str | None]]) -> set[str]:
    """The calls ``f`` makes into the check modules it imports (``nccl.multinode(...)``,
    ``multinode(...)``), each followed through its own module's helpers."""
    out: set[str] = set()
    for c in ast.walk(f):
        if not isinstance(c, ast.Call):
            continue
        target: tuple[str, str] | None = None
        if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name):
            mod, fn = imported.get(c.func.value.id, ("", ""))
            if mod and fn is None:
                target = (mod, c.func.attr)
        elif isinstance(c.func, ast.Name) and c.func.id not in local:
            mod, fn = imported.get(c.func.id, ("", None))
            if mod and fn is not None:
                target = (mod, fn)
        if target is not None:
            calls = _module_tree_calls(target[0])
            out |= {target[1], *calls.get(target[1], set())}
    return out


def _suite_checks() -> dict[str, set[str]]:
    """check name -> every name its suite item calls (the module's helpers followed, and the
    functions of ``nvtest.checks.<area>`` it calls, through their own module's helpers)."""
    out: dict[str, set[str]] = {}
    for path in sorted(suites_dir().rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = _calls(tree)
        imported = _check_functions(tree)
        funcs = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
        local = {f.name for f in funcs}
        followed = {f.name: _followed(f, local, imported) for f in funcs}
        for f in funcs:
            for dec in f.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "check" and dec.args:
                    reached = set(calls[f.name])
                    for helper in {f.name} | (calls[f.name] & local):
                        reached |= followed[helper]
                    out[ast.literal_eval(dec.args[0])] = reached
    return out


def test_every_multi_node_launch_leaves_known_bad_nodes_out_and_names_them():
    checks = _suite_checks()
    launching = {c for c, calls in checks.items() if calls & LAUNCHERS} - set(NOT_YET) - set(NOT_LAUNCHES)
    assert launching == set(MULTI_NODE_CHECKS), (launching, MULTI_NODE_CHECKS)
    for check in sorted(launching):
        calls = checks[check]
        # the item names the left-out nodes (its own error, or every item's `left_out`) ...
        assert "require_launched" in calls, f"{check}: its item never calls require_launched"
        # ... and the launch runs without them: chosen by launch_nodes, here or in the launcher
        inside = {n for n in calls & LAUNCHERS if n not in ("multi_launcher", "mpirun_argv")}
        chosen = "launch_nodes" in calls or any(
            "launch_nodes(" in inspect.getsource(f)
            for f in (run_torchrun, run_mpi, run_span_drill, pair_report)
            if f.__name__ in inside
        )
        assert chosen, f"{check}: its launch does not leave the known-bad nodes out"
    for launcher in (run_torchrun, run_mpi, run_span_drill, pair_report):
        assert "launch_nodes(" in inspect.getsource(launcher), launcher.__name__


def _hung(a: str, b: str, pinned: str = "", reason: str = "timed out after 90 s") -> PairOutcome:
    return PairOutcome((a, b), "error", reason=f"{pinned or a}: {reason}", hung=(a, b), pinned=pinned)


def _ok(a: str, b: str, second: bool = False) -> PairOutcome:
    return PairOutcome((a, b), "pass", 12.0, "Gb/s", second_pass=second)


def test_a_hang_pinned_on_one_node_is_not_copied_onto_its_peers():
    names = ["a", "b", "c", "d"]
    wedged = "timed out after 90 s; unkillable: stuck on the network (HCA or its driver) on b (...)"
    first = [
        _hung("a", "b", "b", wedged),
        _ok("c", "d"),
        PairOutcome(("b", "c"), "error", reason="not run: the hang is pinned on b", pinned="b"),
        _ok("d", "a"),
    ]
    sus = find_suspects(names, first)
    assert sus.pinned == {"b": f"b: {wedged}"} and "b" not in sus.known_good and not sus.suspects
    found = attribute(names, first, [], sus)
    assert found["b"].verdict == "fail" and "hung on this node" in found["b"].reason  # its own process
    for peer in ("a", "c"):
        assert found[peer].verdict == "pass" and "pinned on b" in found[peer].reason, found[peer]
    assert "hung tool" not in " ".join(f.reason for f in found.values())


def test_a_node_common_to_two_hangs_is_pinned_and_an_orphan_is_re_paired():
    names = ["a", "b", "c", "d"]
    first = [_hung("a", "b"), _hung("b", "c"), _ok("c", "d"), _ok("d", "a")]
    sus = find_suspects(names, first)
    assert set(sus.pinned) == {"b"}, sus.pinned  # b hung with two peers; a and c once each
    found = attribute(names, first, [], sus)
    assert found["b"].verdict == "error" and {found["a"].verdict, found["c"].verdict} == {"pass"}
    # a's only pair hung on the pinned node: it is re-paired with a known-good node, not an error
    only = [_hung("a", "b", "b", "blocked: network hung on this node"), _ok("c", "d")]
    sus = find_suspects(names, only)
    assert sus.orphans == ("a",) and repair_rounds(sus) == [(("c", "a"),)]
    found = attribute(names, only, [_ok("c", "a", second=True)], sus)
    assert found["a"].verdict == "pass" and "known-good node c" in found["a"].reason, found["a"]
    none = attribute(names, only, [], sus)["a"]  # no known-good node left: an error naming b
    assert none.verdict == "error" and "hung on b" in none.reason


# --- over a real sshd cluster ------------------------------------------------------------


@pytest.fixture
def wedge_cluster(sim_cluster: SSHDCluster, tmp_path: Path):
    """(context, freezer, shared dir): the 3-node cluster where sim02's checkpoint probe sleeps
    in a frozen cgroup (state D, survives SIGKILL) until the freezer thaws it."""
    reason = freezer_unavailable_reason()
    if reason:
        pytest.skip(reason)
    shared = tmp_path / "shared"
    shared.mkdir()
    skus = tmp_path / "skus"
    skus.mkdir()
    (skus / "sim-cpu.yaml").write_text(yaml.safe_dump({**SIM_SKU, "recipe": {**SIM_SKU["recipe"]}}))
    with Freezer() as freezer:
        wrapper = tmp_path / "python-wedged"
        wrapper.write_text(
            "#!/bin/sh\n"
            f'case "$*" in *ckpt_probe.py*) {freezer.wedge_command()}; wait ;; esac\n'
            f'exec {sys.executable} "$@"\n'
        )
        wrapper.chmod(0o755)
        inv = yaml.safe_load(sim_cluster.inventory_path.read_text())
        inv["defaults"]["probe_dir"] = str(PROBES)
        for entry in inv["nodes"]:
            if entry["names"] == "sim02":
                entry["python"] = str(wrapper)
        (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
        cfg = RunConfig(
            run_id="known-bad",
            run_dir=str(tmp_path / "run"),
            backend="ssh",
            inventory=str(tmp_path / "inventory.yaml"),
            sku="sim-cpu",
            sku_dirs=[str(skus)],
            backend_options={"known_hosts": str(sim_cluster.known_hosts_path)},
        )
        ctx = RunContext.from_config(cfg)
        try:
            ctx.gather_facts()
            yield ctx, freezer, shared
        finally:
            ctx.close(interrupted=False)


@pytest.mark.sshd
def test_one_wedged_node_fails_alone_and_is_left_out_of_the_next_launches(wedge_cluster):
    ctx, freezer, shared = wedge_cluster
    by = {n.name: n for n in ctx.nodes}
    # the shared checkpoint tier, as the check declares it, at a test's size and deadline
    probe = Probe(
        "ckpt_shared",
        script="ckpt_probe.py",
        timeout_s=4,
        needs=CKPT["shared"].needs,
        args=["--tier", "shared", "--path", str(shared), "--size-mib", "2", "--chunk-mib", "1"],
    )
    with pytest.raises(NodeWedged) as err:
        measure_probe(ctx, probe, by["sim02"], ctx.nodes)
    assert freezer.pids(), "the stand-in never wedged"
    why = str(err.value)
    assert f"unkillable: stuck on storage ({shared}) on sim02" in why, why  # by what it touched
    assert "GPU" not in why
    assert err.value.cause == "transport:unkillable:storage"
    diag = diagnose(
        {"check": "ckpt_shared", "verdict": "fail", "reason": f"NodeWedged: {why}", "cause": err.value.cause}
    )
    assert diag is not None and diag.rule == "unkillable_storage", diag
    # the others' items: their own probes, their own verdicts; the aggregate names sim02
    for name in ("sim01", "sim03"):
        doc = measure_probe(ctx, probe, by[name], ctx.nodes)
        assert doc["status"] == "ok" and "sim02" not in str(doc)
    agg = aggregate(ctx, probe, ctx.nodes)
    assert agg["nodes"] == 2 and agg["write_gbps"] > 0, agg
    assert len(agg["left_out"]) == 1 and agg["left_out"][0].startswith("sim02: NodeWedged"), agg

    # the next multi-node launches leave sim02 out and name it
    bad = known_bad(ctx, "mpi")
    assert list(bad) == ["sim02"] and bad["sim02"].startswith("ckpt_shared hung on this node"), bad
    with pytest.raises(NodeError, match="left out of the multi-node launch: ckpt_shared hung"):
        require_launched(ctx, "mpi", by["sim02"])
    notes: dict = {}
    assert require_launched(ctx, "mpi", by["sim01"], notes.__setitem__) == bad
    assert notes == {"left_out": bad}
    job = run_mpi(ctx, "mpi", ["--iters", "2", "--barriers", "20"], ranks_per_node=1, timeout_s=120)
    assert set(job.nodes) == {"sim01", "sim03"}, job
    for name in ("sim01", "sim03"):
        share = mpi_share(job, by[name])
        assert share.doc["world_size"] == 2 and not share.misplaced, share
    # torchrun's launches take the same nodes (run_torchrun selects them with launch_nodes:
    # the walk above; tests/jobs/test_cluster_runs.py runs torchrun itself)
    for check in ("collectives_multinode", "train_multinode", "restart_injob", "nccl_multinode"):
        assert [n.name for n in launch_nodes(ctx, check)] == ["sim01", "sim03"], check

    # the pair runner itself spends no deadline on a node whose network hung earlier: its
    # pairs are not run, its peers pass on their own pair and are not errors for it
    ctx.phases.mark_hung("sim02", "ib_write_bw", ("network",), "timed out after 120 s")
    job = TcpPairJob(ctx, seconds=0.5)
    t0 = time.monotonic()
    report = run_pair_schedule(ctx, job, ctx.nodes, build_schedule("ring", list(by)))
    assert time.monotonic() - t0 < job.timeout_s
    for o in [*report.first, *report.second]:
        if "sim02" in o.pair:
            assert o.status == "error" and o.reason.startswith("not run: the hang is pinned on sim02"), o
    assert report.findings["sim02"].verdict == "error", report.findings["sim02"]
    for name in ("sim01", "sim03"):
        assert report.findings[name].verdict == "pass", report.findings[name]
        assert "pinned on sim02" in report.findings[name].reason

    # a node failing an earlier check is left out too; a check failing on every node (three
    # or more: systemic) leaves no one out; too few nodes left is an error naming why
    ctx.note_result("ib_ports", "sim03", "fail", "HCA mlx5_1 missing: 7 of 8")
    for name in by:
        ctx.note_result("package_drift", name, "fail", "kernel differs from the image")
    bad = known_bad(ctx, "tcp_bw")
    assert set(bad) == {"sim02", "sim03"} and bad["sim03"].startswith("ib_ports failed on this node"), bad
    assert [n.name for n in launch_nodes(ctx, "tcp_bw")] == ["sim01"]
    with pytest.raises(NodeError, match=r"too few nodes left for the multi-node launch: 1 of 3 \(sim01\)"):
        require_launched(ctx, "tcp_bw", by["sim01"])
    with pytest.raises(NodeError, match="a pair test needs two nodes"):
        pair_report(ctx, "tcp_bw", TcpPairJob(ctx, seconds=0.5))


def test_ranks_that_waited_for_a_wedged_node_name_it_not_a_hung_tool():
    """torchrun over three nodes: sim02's ranks left a process SIGKILL cannot end; the others'
    ranks waited for them until the deadline. Each item says whose fault it is."""
    from nvtest.jobs.torchrun import TorchrunJob
    from nvtest.transports.base import CommandResult

    wedged = CommandResult(
        node="sim02",
        command="torchrun",
        failure="unkillable",
        timed_out=True,
        error="timed out after 660 s; unkillable: GPU or driver wedged on sim02 (still alive after SIGKILL: "
        "python3 (pid 9, state D))",
    )
    waited = {
        n: CommandResult(
            node=n,
            command="torchrun",
            failure="timeout",
            timed_out=True,
            error="timed out after 660 s; process group and session killed",
        )
        for n in ("sim01", "sim03")
    }
    job = TorchrunJob(
        "train_multinode", ("sim01", "sim02", "sim03"), {"sim02": wedged, **waited}, None, "no output", {}, "sim01"
    )
    from nvtest.config.inventory import Node

    with pytest.raises(NodeWedged, match="GPU or driver wedged on sim02"):
        node_share(job, Node(name="sim02"))
    for name in ("sim01", "sim03"):
        with pytest.raises(NodeError) as err:
            node_share(job, Node(name=name))
        assert "the job hung on sim02" in str(err.value), err.value
        assert err.value.cause == "launch:peer_wedged"
        d = diagnose(
            {
                "check": "train_multinode",
                "verdict": "error",
                "reason": f"NodeError: {err.value}",
                "cause": err.value.cause,
            }
        )
        assert d is not None and d.rule == "waited_for_wedged_peer" and "hung tool" not in d.cause, d
