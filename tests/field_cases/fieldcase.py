"""The field-case suite's model and runner (tests/field_cases/README.md gives the shape).

A case is a folder ``cases/<id>/`` holding ``case.yaml`` and the files its stand-in tools
print. :func:`load_case` validates ``case.yaml`` (pydantic: a bad file fails naming the
file and the key); :func:`run_case` builds each node's stand-in tools (a profile of
``nvtest/testing/standin_nodes.py`` plus the case's overrides), runs the real ``nvtest run`` CLI on
the case's backend and returns what it wrote; :func:`check_expectations` lists every way
the run differs from the case's ``expect:``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from nvtest.report.model import build_view
from nvtest.testing.standin import Recording, StandInTools
from nvtest.testing.standin_nodes import H100, PROFILES, NodeProfile, Tool
from tests.conftest import PROBES, run_nvtest

__all__ = [
    "CASES",
    "Case",
    "CaseError",
    "CaseRun",
    "Clusters",
    "all_case_dirs",
    "check_expectations",
    "load_case",
    "run_case",
]

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"

Verdict = Literal["pass", "warn", "fail", "error", "skip"]
RANK = {"skip": 0, "pass": 1, "warn": 2, "error": 3, "fail": 4}
#: Nodes of the shared sshd cluster (the most a multi-node case may name).
SSH_NODES = 4
#: The shared Slurm cluster's node names (a slurm case names these; three, the fewest that
#: can show a systemic failure).
SLURM_NODES = ("node1", "node2", "node3")


class CaseError(Exception):
    """A case folder that cannot be used: the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Output(_Strict):
    """One recorded run of a tool: ``stdout``/``stderr`` name files of the case folder,
    ``stdout_text``/``stderr_text`` give the text inline; ``exit`` its status; ``sleep_s``
    seconds before it prints (a slow or hung tool); ``wedged``: the call leaves a process
    SIGKILL cannot end (a ``sleep`` in a frozen cgroup, state D: :mod:`nvtest.testing.wedged`)
    and waits for it, as a tool stuck in the driver does (root and the cgroup-v1 freezer; the
    case is skipped, saying why, where they are missing)."""

    stdout: str | None = None
    stdout_text: str | None = None
    stderr: str | None = None
    stderr_text: str | None = None
    exit: int = Field(default=0, ge=0, le=255)
    sleep_s: float = Field(default=0.0, ge=0)
    wedged: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> Output:
        if self.stdout is not None and self.stdout_text is not None:
            raise ValueError("give stdout (a file) or stdout_text, not both")
        if self.stderr is not None and self.stderr_text is not None:
            raise ValueError("give stderr (a file) or stderr_text, not both")
        return self

    def recording(self, folder: Path, wedge: str = "") -> Recording:
        """The :class:`Recording` this output stands for (files read from ``folder``; ``wedge``:
        the shell that leaves an unkillable process, for a ``wedged`` output)."""

        def text(name: str | None, inline: str | None) -> str:
            return (folder / name).read_text(encoding="utf-8") if name else (inline or "")

        return Recording(
            stdout=text(self.stdout, self.stdout_text),
            stderr=text(self.stderr, self.stderr_text),
            exit_code=self.exit,
            sleep_s=self.sleep_s,
            prelude=f"{wedge}; wait" if self.wedged else "",
        )


class Arrangement(_Strict):
    """How the case is run: backend, nodes, SKU, suite, the checks (``-k``), more options."""

    backend: Literal["local", "ssh", "slurm"] = "local"
    #: the verb: ``nvtest run`` (``checks``: ``-k``), or ``nvtest gate`` on the one local node
    #: (``checks``: ``--check``; ``options``: more gate options, ``{case}`` is the case folder)
    verb: Literal["run", "gate"] = "run"
    nodes: list[str] = Field(default_factory=list)
    #: instead of ``nvtest run``: ``nvtest parse <these> --json`` in the case folder (a log
    #: collected elsewhere, read standalone); no nodes then
    parse: list[str] = Field(default_factory=list)
    sku: str | None = None
    suite: str = "delivery"
    checks: list[str] = Field(default_factory=list)
    options: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=120.0, gt=0, le=600)
    #: slurm: node -> reason; the node is drained before the run (and resumed after)
    drained: dict[str, str] = Field(default_factory=dict)
    #: ssh: every node behind one address, each at its own port (NAT, port forwarding), as
    #: the nodes of a second shared sshd cluster on 127.0.0.1
    one_address: bool = False
    #: ssh: nodes whose sshd is down for the run (powered off, unreachable); started again after
    down: list[str] = Field(default_factory=list)
    #: slurm: name the nodes (``--nodes``) or give the partition alone (``--partition``)
    select: Literal["nodes", "partition"] = "nodes"

    @model_validator(mode="after")
    def _fits_backend(self) -> Arrangement:
        if self.parse:
            if self.nodes or self.backend != "local":
                raise ValueError("parse: reads a file; give no nodes and no backend")
            return self
        if not self.nodes:
            raise ValueError("nodes: name at least one node (or give parse)")
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("nodes: a name appears twice")
        if self.verb == "gate" and self.backend != "local":
            raise ValueError("verb: gate runs on the node itself: the local backend only")
        if self.backend == "local" and len(self.nodes) != 1:
            raise ValueError("nodes: the local backend runs exactly one node")
        if self.backend == "ssh" and len(self.nodes) > SSH_NODES:
            raise ValueError(f"nodes: the shared sshd cluster has {SSH_NODES} nodes")
        if self.backend == "slurm" and not set(self.nodes) <= set(SLURM_NODES):
            raise ValueError(f"nodes: the shared Slurm cluster's nodes are {', '.join(SLURM_NODES)}")
        if self.drained and self.backend != "slurm":
            raise ValueError("drained: only the slurm backend drains nodes")
        if self.down and (self.backend != "ssh" or not set(self.down) <= set(self.nodes)):
            raise ValueError("down: ssh nodes of arrangement.nodes only")
        if self.one_address and self.backend != "ssh":
            raise ValueError("one_address: only the ssh backend puts nodes behind one address")
        if self.select != "nodes" and self.backend != "slurm":
            raise ValueError("select: only the slurm backend selects by partition")
        if not set(self.drained) <= set(self.nodes):
            raise ValueError("drained: names a node not in nodes")
        return self


class NodeCase(_Strict):
    """One node: its base profile (``nvtest/testing/standin_nodes.py``), tool overrides (tool ->
    ``missing`` or {``default`` | an argument glob: :class:`Output`}), environment
    (``{case}`` is the case folder), and inventory settings (ssh)."""

    profile: str = "h100_healthy"
    tools: dict[str, Literal["missing"] | dict[str, Output]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    inventory: dict[str, Any] = Field(default_factory=dict)

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v not in PROFILES:
            raise ValueError(
                f"unknown profile {v!r} (nvtest/testing/standin_nodes.py has {', '.join(sorted(PROFILES))})"
            )
        return v


Pattern = str


class CheckExpect(_Strict):
    """What one check's item on a node must show."""

    verdict: Verdict | None = None
    cause: Pattern | None = None
    next_step: Pattern | None = None
    reason: Pattern | None = None


class NodeExpect(_Strict):
    """What a node must show: its worst verdict, per-check verdicts (a verdict or a
    :class:`CheckExpect`; a key matches the check names it prefixes), the diagnosis
    cause and next step of its worst items, a reason of its items, and words none of its
    reasons and causes may contain (``absent``)."""

    verdict: Verdict | None = None
    checks: dict[str, Verdict | CheckExpect] = Field(default_factory=dict)
    cause: Pattern | None = None
    next_step: Pattern | None = None
    reason: Pattern | None = None
    absent: list[str] = Field(default_factory=list)
    #: no reason of the node's items is longer than this (a reason is one readable sentence)
    reason_max_chars: int | None = Field(default=None, gt=0)


class Expect(_Strict):
    """The run's exit code, words its console output must hold, and each node's expectations."""

    exit: int | None = None
    output: list[Pattern] = Field(default_factory=list)
    #: patterns the console output must not hold
    output_absent: list[Pattern] = Field(default_factory=list)
    #: the run ends within this many seconds (a deadline, a check blocked before its timeout)
    within_s: float | None = Field(default=None, gt=0)
    #: the nodes the run drained (results.json ``run.drained``; slurm ``--drain-failed``)
    drained: list[str] | None = None
    nodes: dict[str, NodeExpect] = Field(default_factory=dict)


class Case(_Strict):
    """One field case (``case.yaml``)."""

    title: str = Field(min_length=1)
    family: str = Field(min_length=1)
    source: list[str] = Field(min_length=1)
    situation: str = Field(min_length=1)
    arrangement: Arrangement
    nodes: dict[str, NodeCase] = Field(default_factory=dict)
    expect: Expect
    pending: str | None = None

    @field_validator("source")
    @classmethod
    def _sources(cls, v: list[str]) -> list[str]:
        for s in v:
            if not (s.startswith("https://") or s == "issue 24 example"):
                raise ValueError(f"a source is a public https URL (or 'issue 24 example'), not {s!r}")
        return v

    @model_validator(mode="after")
    def _names_agree(self) -> Case:
        names = set(self.arrangement.nodes)
        for key, what in ((self.nodes, "nodes"), (self.expect.nodes, "expect.nodes")):
            extra = set(key) - names
            if extra:
                raise ValueError(f"{what}: {', '.join(sorted(extra))} not in arrangement.nodes")
        if not self.expect.nodes and self.expect.exit is None:
            raise ValueError("expect: expects nothing (give exit or nodes)")
        return self


def _where(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top)"


def load_case(folder: Path) -> Case:
    """Read and validate ``folder/case.yaml``; check that every file it names exists.

    Raises:
        CaseError: the file is missing, not YAML, or invalid (the message names the file
            and each bad key with pydantic's reason).
    """
    path = folder / "case.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CaseError(f"{path}: {exc}") from exc
    try:
        case = Case.model_validate(raw)
    except ValidationError as exc:
        lines = [f"{path}: {_where(e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise CaseError("\n".join(lines)) from exc
    for node, nc in case.nodes.items():
        for tool, spec in nc.tools.items():
            if spec == "missing":
                continue
            for pattern, out in spec.items():
                for key in ("stdout", "stderr"):
                    name = getattr(out, key)
                    if name is not None and not (folder / name).is_file():
                        raise CaseError(
                            f"{path}: nodes.{node}.tools.{tool}.{pattern}.{key}: no file {name!r} in {folder}"
                        )
    return case


def all_case_dirs() -> list[Path]:
    """Every case folder (``cases/*/`` holding a ``case.yaml``), in name order."""
    return sorted(p.parent for p in CASES.glob("*/case.yaml"))


# -- building the nodes ------------------------------------------------------------------------


def node_tools(nc: NodeCase, folder: Path, bin_dir: Path, *, gate: bool = False, wedge: str = "") -> StandInTools:
    """Write the node's stand-ins into ``bin_dir`` (emptied first): its profile's tools with
    the case's overrides: an override with a ``default`` replaces the profile's tool (its
    argument globs, then the default); one without is layered on the profile's (its globs
    tried first, then the profile's globs and default). ``gate``: ``h100_healthy`` answers
    the gate's ``nvidia-smi -q`` (text) too, with the real H100 capture of the gate's stand-ins.
    ``wedge``: the shell a ``wedged`` output runs (:meth:`~nvtest.testing.wedged.Freezer.wedge_command`)."""
    if bin_dir.exists():
        shutil.rmtree(bin_dir)
    tools = StandInTools(bin_dir)
    prof: NodeProfile = PROFILES[nc.profile]
    merged: dict[str, Tool | None] = dict(prof.tools)
    smi = merged.get("nvidia-smi")
    if gate and nc.profile == "h100_healthy" and smi is not None:
        merged["nvidia-smi"] = Tool(smi.default, {"-q": Recording.of_file(H100["smi_q"]), **smi.by_args})
    for name, spec in nc.tools.items():
        if spec == "missing":
            merged[name] = None
            continue
        by_args = {k: o.recording(folder, wedge) for k, o in spec.items() if k != "default"}
        if "default" in spec:  # the whole tool, as the case gives it
            merged[name] = Tool(spec["default"].recording(folder, wedge), by_args)
            continue
        base = merged.get(name) or Tool()
        merged[name] = Tool(base.default, {**by_args, **{k: v for k, v in base.by_args.items() if k not in by_args}})
    for name, tool in merged.items():
        if tool is None:
            tools.add_missing(name)
        else:
            tools.add(name, tool.default, by_args=dict(tool.by_args))
    return tools


def _point(link: Path, target: str) -> None:
    """Make ``link`` a symbolic link to ``target`` (replacing the one there)."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(link.name + ".new")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(link)


def _node_env(nc: NodeCase, folder: Path) -> dict[str, str]:
    return {k: v.replace("{case}", str(folder)) for k, v in nc.env.items()}


# -- the shared clusters ---------------------------------------------------------------------


@dataclass
class Clusters:
    """The sshd and Slurm clusters shared by every case of the session, started on first
    use; each node's ``PATH`` starts with a fixed stand-in directory that a case refills."""

    base: Path
    _ssh: dict[bool, Any] = field(default_factory=dict)
    _slurm: Any = None
    _stack: list[Any] = field(default_factory=list)

    def ssh_bin(self, i: int, one_address: bool = False) -> Path:
        """Node ``i``'s stand-in directory (first on its ``PATH``) in the sshd cluster."""
        return self.base / ("nat-bins" if one_address else "ssh-bins") / f"n{i}"

    def ssh_root(self, i: int, one_address: bool = False) -> Path:
        """Node ``i``'s ``$NVTEST_SYSFS_ROOT`` in the sshd cluster: a symbolic link to ``/``
        (the node's own /sys and /proc) that a case re-points at its folder for its run."""
        return self.base / ("nat-roots" if one_address else "ssh-roots") / f"n{i}"

    def ssh(self, one_address: bool = False) -> Any:
        """The shared :class:`~nvtest.testing.sshd_cluster.SSHDCluster` (``fc01``...; with
        ``one_address``, ``nat01``... all on 127.0.0.1), started on first use."""
        if one_address not in self._ssh:
            import pytest

            from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason

            reason = sshd_unavailable_reason()
            if reason:
                print(f"skipping: {reason}")
                pytest.skip(reason)
            prefix = "nat" if one_address else "fc"
            path = os.environ.get("PATH", "")
            env = {
                f"{prefix}{i + 1:02d}": {
                    "PATH": f"{self.ssh_bin(i, one_address)}:{path}",
                    "NVTEST_SYSFS_ROOT": str(self.ssh_root(i, one_address)),
                }
                for i in range(SSH_NODES)
            }
            for i in range(SSH_NODES):
                self.ssh_bin(i, one_address).mkdir(parents=True, exist_ok=True)
                _point(self.ssh_root(i, one_address), "/")
            self._ssh[one_address] = SSHDCluster(
                SSH_NODES, prefix=prefix, python=sys.executable, node_env=env, distinct_addresses=not one_address
            ).start()
        return self._ssh[one_address]

    def slurm_env_dir(self) -> Path:
        return Path(self.slurm().dir) / "task-env"

    def slurm(self) -> Any:
        """The shared 2-node Slurm (``node1``, ``node2``, partition ``nvt``); each node's tasks
        get the ``PATH`` written in its ``task-env`` file (a TaskProlog)."""
        if self._slurm is None:
            from tests.conftest import started_slurm_cluster

            cm = started_slurm_cluster(
                nodes=SLURM_NODES, task_env={n: {"PATH": os.environ.get("PATH", "")} for n in SLURM_NODES}
            )
            self._slurm = cm.__enter__()
            self._stack.append(cm)
        return self._slurm

    def close(self) -> None:
        """Stop whatever was started."""
        for cluster in self._ssh.values():
            cluster.stop()
        while self._stack:
            self._stack.pop().__exit__(None, None, None)


# -- running ---------------------------------------------------------------------------------


@dataclass
class CaseRun:
    """What one case's ``nvtest run`` left: exit code, console text, results.json (None when
    it wrote none), and the case's node name -> the node name in the results."""

    exit: int
    output: str
    doc: dict[str, Any] | None
    names: dict[str, str]
    wall_s: float = 0.0
    #: ``nvtest gate``: node -> its verdict (the gate's ``unknown`` as the run's ``error``)
    verdicts: dict[str, str] | None = None


def _args(case: Case, out: Path, folder: Path) -> list[str]:
    a = case.arrangement
    args = ["run", "--suite", a.suite, "--out", str(out), "--progress", "plain"]
    if a.checks:
        args += ["-k", " or ".join(a.checks)]
    if a.sku:
        args += ["--sku", a.sku]
    return [*args, *(o.replace("{case}", str(folder)) for o in a.options)]


def _run_local(case: Case, folder: Path, work: Path, wedge: str = "") -> CaseRun:
    (name,) = case.arrangement.nodes
    nc = case.nodes.get(name, NodeCase())
    tools = node_tools(nc, folder, work / "bin", wedge=wedge)
    env = {"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1", **_node_env(nc, folder)}
    proc = run_nvtest(*_args(case, work / "r", folder), env=env, timeout=case.arrangement.timeout_s + 60)
    return _finish(proc, work / "r", {name: ""})


#: The gate's verdicts in the run's words.
GATE_VERDICT = {"unknown": "error"}


def _run_gate(case: Case, folder: Path, work: Path, wedge: str = "") -> CaseRun:
    """``nvtest gate`` on the one node; its document read as results: one per decision (the
    check, verdict, reason, and its next step as the diagnosis: cause and action)."""
    (name,) = case.arrangement.nodes
    nc = case.nodes.get(name, NodeCase())
    tools = node_tools(nc, folder, work / "bin", gate=True, wedge=wedge)
    env = {"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1", **_node_env(nc, folder)}
    args = ["gate", "--node", name, "--state-dir", str(work / "state"), "--history", "off"]
    args += [a for c in case.arrangement.checks for a in ("--check", c)]
    args += [o.replace("{case}", str(folder)) for o in case.arrangement.options]
    proc = run_nvtest(*args, env=env, timeout=case.arrangement.timeout_s + 60)
    try:
        gate = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return CaseRun(proc.returncode, proc.stdout[-6000:] + proc.stderr[-4000:], None, {name: name}, verdicts={})
    results = [
        {
            "node": name,
            "check": c["check"],
            "verdict": GATE_VERDICT.get(d["verdict"], d["verdict"]),
            "reason": d["reason"],
            "diagnosis": d.get("next_step"),
        }
        for c in gate.get("checks", [])
        for d in c.get("decisions", [])
    ]
    verdict = GATE_VERDICT.get(gate.get("verdict"), gate.get("verdict"))
    return CaseRun(
        proc.returncode, proc.stderr[-4000:], {"results": results}, {name: name}, verdicts={name: str(verdict)}
    )


def _run_ssh(case: Case, folder: Path, work: Path, clusters: Clusters, wedge: str = "") -> CaseRun:
    nat = case.arrangement.one_address
    cluster = clusters.ssh(nat)
    entries = []
    for i, name in enumerate(case.arrangement.nodes):
        nc = case.nodes.get(name, NodeCase())
        node_tools(nc, folder, clusters.ssh_bin(i, nat), wedge=wedge)
        sim = cluster.nodes[i]
        entries.append({"names": name, "address": sim.address, "port": sim.port, **nc.inventory})
        extra = set(nc.env) - {"NVTEST_SYSFS_ROOT"}
        if extra:
            raise CaseError(
                f"{folder}/case.yaml: nodes.{name}.env: over ssh a node takes only NVTEST_SYSFS_ROOT, not {sorted(extra)}"
            )
        _point(clusters.ssh_root(i, nat), _node_env(nc, folder).get("NVTEST_SYSFS_ROOT", "/"))
    inv = {
        "cluster": "field-case",
        "defaults": {
            "user": cluster.user,
            "python": cluster.python,
            "key_file": str(cluster.user_key_path),
            "probe_dir": str(PROBES),  # one shared copy, as on a shared file system: nothing to ship
        },
        "nodes": entries,
    }
    inv_path = work / "inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inv, sort_keys=False), encoding="utf-8")
    args = _args(case, work / "r", folder)
    args[1:1] = ["--backend", "ssh", "--inventory", str(inv_path)]
    env = {"HOME": str(cluster.client_home()), "OMP_NUM_THREADS": "1"}
    down = [cluster.nodes[case.arrangement.nodes.index(n)].name for n in case.arrangement.down]
    for sim in down:
        cluster.stop_node(sim)
    try:
        proc = run_nvtest(*args, env=env, timeout=case.arrangement.timeout_s + 60)
    finally:
        for sim in down:
            cluster.start_node(sim)
        for i in range(len(case.arrangement.nodes)):
            _point(clusters.ssh_root(i, nat), "/")
    return _finish(proc, work / "r", {n: n for n in case.arrangement.nodes})


def _run_slurm(case: Case, folder: Path, work: Path, clusters: Clusters, wedge: str = "") -> CaseRun:
    cluster = clusters.slurm()
    for name in SLURM_NODES:
        nc = case.nodes.get(name, NodeCase())
        tools = node_tools(nc, folder, work / f"bin-{name}", wedge=wedge)
        path = tools.path_prefix(os.environ.get("PATH", ""))
        (clusters.slurm_env_dir() / name).write_text(f"export PATH={path}\n", encoding="utf-8")
    for node, reason in case.arrangement.drained.items():
        cluster.client("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")
    try:
        args = _args(case, work / "r", folder)
        args[1:1] = ["--backend", "slurm", "--partition", "nvt", "--time", "15"]
        if case.arrangement.select == "nodes":
            args[1:1] = ["--nodes", ",".join(case.arrangement.nodes)]
        env = {**cluster.env, "OMP_NUM_THREADS": "1"}
        proc = run_nvtest(*args, env=env, timeout=case.arrangement.timeout_s + 60)
    finally:  # every node back in service for the next case (drained here or by the run)
        for node in SLURM_NODES:
            cluster.client("scontrol", "update", f"nodename={node}", "state=resume")
    return _finish(proc, work / "r", {n: n for n in case.arrangement.nodes})


def _finish(proc: subprocess.CompletedProcess[str], out: Path, names: dict[str, str]) -> CaseRun:
    results = out / "latest" / "results.json"
    doc = json.loads(results.read_text()) if results.exists() else None
    if doc is not None and "" in names.values():  # local: the one node is whatever the run named it
        ran = sorted({r["node"] for r in doc.get("results", [])} | set(doc.get("nodes") or {}))
        names = {k: (ran[0] if len(ran) == 1 else v) for k, v in names.items()}
    return CaseRun(proc.returncode, proc.stdout[-6000:] + proc.stderr[-4000:], doc, names)


def run_case(case: Case, folder: Path, work: Path, clusters: Clusters) -> CaseRun:
    """Run ``case`` (from ``folder``) with its stand-in nodes; ``work``: a fresh directory. A
    case with a ``wedged`` output runs inside one frozen cgroup (thawed after the run), and is
    skipped, saying why, where the freezer cannot work here."""
    if not any(
        o.wedged for nc in case.nodes.values() for spec in nc.tools.values() if spec != "missing" for o in spec.values()
    ):
        return _run_case(case, folder, work, clusters)
    from nvtest.testing.wedged import Freezer, freezer_unavailable_reason

    reason = freezer_unavailable_reason()
    if reason:
        import pytest

        pytest.skip(f"a wedged tool: {reason}")
    with Freezer() as freezer:
        return _run_case(case, folder, work, clusters, freezer.wedge_command())


def _run_case(case: Case, folder: Path, work: Path, clusters: Clusters, wedge: str = "") -> CaseRun:
    backend = case.arrangement.backend
    start = time.monotonic()
    if case.arrangement.parse:
        args = [str(folder / a) if (folder / a).is_file() else a for a in case.arrangement.parse]
        proc = run_nvtest("parse", *args, "--json", timeout=case.arrangement.timeout_s)
        run = CaseRun(proc.returncode, proc.stdout[-20000:] + proc.stderr[-4000:], None, {})
    elif case.arrangement.verb == "gate":
        run = _run_gate(case, folder, work, wedge)
    elif backend == "local":
        run = _run_local(case, folder, work, wedge)
    elif backend == "ssh":
        run = _run_ssh(case, folder, work, clusters, wedge)
    else:
        run = _run_slurm(case, folder, work, clusters, wedge)
    run.wall_s = time.monotonic() - start
    return run


# -- judging -----------------------------------------------------------------------------------


def matches(pattern: str, text: str) -> bool:
    """``/regex/`` searched in ``text``, or a case-insensitive substring."""
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return re.search(pattern[1:-1], text) is not None
    return pattern.lower() in text.lower()


def _worst(items: list[Mapping[str, Any]]) -> str:
    return max((str(r["verdict"]) for r in items), key=lambda v: RANK.get(v, 0), default="skip")


def _diag(items: list[Mapping[str, Any]], key: str) -> list[str]:
    return [str((r.get("diagnosis") or {}).get(key) or "") for r in items]


def _expect_items(
    label: str, items: list[Mapping[str, Any]], exp: CheckExpect | NodeExpect, verdict: str
) -> Iterator[str]:
    """The differences between ``items`` (one node's, or one check's on it) and ``exp``."""
    if exp.verdict is not None and verdict != exp.verdict:
        brief = "; ".join(
            f"{r['check']}={r['verdict']}: {str(r.get('reason') or '')[:160]}" for r in items if r["verdict"] != "pass"
        )
        yield f"{label}: verdict {verdict}, expected {exp.verdict} ({brief or 'all pass'})"
    worst = [r for r in items if r["verdict"] == verdict] or items
    for key, got_key, pool in (
        ("cause", "cause", worst),
        ("next_step", "action", worst),
    ):
        pattern = getattr(exp, key)
        if pattern is not None:
            got = _diag(pool, got_key)
            if not any(matches(pattern, g) for g in got):
                yield f"{label}: {key} {pattern!r} not in the diagnosis of its {verdict} items: {got}"
    if exp.reason is not None:
        bad = [r for r in items if r["verdict"] != "pass"] or items
        reasons = [_whole_reason(r) for r in bad]
        if not any(matches(exp.reason, t) for t in reasons):
            yield f"{label}: reason {exp.reason!r} in none of {[t[:300] for t in reasons]}"


def _whole_reason(r: Mapping[str, Any]) -> str:
    """A result's reason as a whole: its one bounded line, or where words were left out of
    it (nvtest.results.REASON_MAX_CHARS) the whole text kept in ``details.reason_full``."""
    return str((r.get("details") or {}).get("reason_full") or r.get("reason") or "")


def check_expectations(case: Case, run: CaseRun) -> list[str]:
    """Every way ``run`` differs from ``case.expect`` (empty: the case holds)."""
    problems: list[str] = []
    exp = case.expect
    if exp.exit is not None and run.exit != exp.exit:
        problems.append(f"exit {run.exit}, expected {exp.exit}")
    for pattern in exp.output:
        if not matches(pattern, run.output):
            problems.append(f"console output lacks {pattern!r}")
    for pattern in exp.output_absent:
        if matches(pattern, run.output):
            problems.append(f"console output holds {pattern!r}")
    if exp.within_s is not None and run.wall_s > exp.within_s:
        problems.append(f"the run took {run.wall_s:.1f} s, expected within {exp.within_s:g} s")
    if run.doc is None:
        return [*problems, "nvtest wrote no results.json"] if exp.nodes or exp.drained is not None else problems
    if exp.drained is not None:
        drained = sorted((run.doc.get("run") or {}).get("drained") or {})
        if drained != sorted(exp.drained):
            problems.append(f"drained {drained}, expected {sorted(exp.drained)}")
    nodes = (
        {n: {"verdict": v} for n, v in run.verdicts.items()} if run.verdicts is not None else build_view(run.doc).nodes
    )
    results = list(run.doc.get("results") or [])
    for name, ne in exp.nodes.items():
        node = run.names.get(name, name)
        items = [r for r in results if r["node"] == node]
        if node not in nodes:
            problems.append(f"{name}: not in the report (nodes: {sorted(nodes)})")
            continue
        verdict = str(nodes[node].get("verdict") or _worst(items))
        problems += _expect_items(name, items, ne, verdict)
        for check, ce in ne.checks.items():
            ce = CheckExpect(verdict=ce) if isinstance(ce, str) else ce
            mine = [r for r in items if str(r["check"]).startswith(check)]
            if not mine:
                problems.append(f"{name}: no result of check {check!r} (has {sorted({r['check'] for r in items})})")
                continue
            problems += _expect_items(f"{name} {check}", mine, ce, _worst(mine))
        texts = [_whole_reason(r) for r in items] + _diag(items, "cause")
        if ne.reason_max_chars is not None:
            long = [
                f"{r['check']}: {len(str(r.get('reason') or ''))} chars"
                for r in items
                if len(str(r.get("reason") or "")) > ne.reason_max_chars
            ]
            if long:
                problems.append(f"{name}: reasons longer than {ne.reason_max_chars} chars: {long}")
        for word in ne.absent:
            hits = [t[:200] for t in texts if matches(word, t)]
            if hits:
                problems.append(f"{name}: {word!r} must not appear, found in {hits}")
    return problems
