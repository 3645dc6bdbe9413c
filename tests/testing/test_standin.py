"""Stand-in tools replay recorded outputs by argument, locally and on one node of the
sshd cluster (the mechanism every GPU/RDMA end-to-end test builds on)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nvtest.testing.standin import Recording, StandInTools
from tests.conftest import CORPUS

SMI = CORPUS / "nvidia-smi"


def _run(tools: StandInTools, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env={"PATH": tools.path_prefix()})


def test_replays_by_arguments_with_exit_codes(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    plain = SMI / "plain-h100-sxm-x8-driver565.txt"
    tools.add(
        "nvidia-smi",
        Recording.of_file(plain),
        by_args={
            "-q -x": Recording(stdout="<nvidia_smi_log/>\n"),
            "--query-gpu=*": Recording(
                stderr="Failed to initialize NVML: Driver/library version mismatch\n", exit_code=18
            ),
        },
    )
    got = _run(tools, "nvidia-smi")
    assert got.returncode == 0 and got.stdout == plain.read_text()
    assert _run(tools, "nvidia-smi", "-q", "-x").stdout == "<nvidia_smi_log/>\n"
    bad = _run(tools, "nvidia-smi", "--query-gpu=name", "--format=csv")
    assert bad.returncode == 18 and "version mismatch" in bad.stderr and bad.stdout == ""
    assert tools.calls() == ["nvidia-smi ", "nvidia-smi -q -x", "nvidia-smi --query-gpu=name --format=csv"]


def test_unknown_arguments_and_missing_tools_exit_127(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    tools.add("ibstat", by_args={"": Recording(stdout="CA 'mlx5_0'\n")})
    got = _run(tools, "ibstat", "-p")
    assert got.returncode == 127 and "no recording for: -p" in got.stderr
    tools.add_missing("dcgmi")
    assert _run(tools, "dcgmi", "diag", "-r", "1").returncode == 127


def test_a_slow_tool_sleeps_before_it_prints(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    tools.add("dmesg", Recording(stdout="late\n", sleep_s=5))
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["dmesg"], capture_output=True, timeout=0.5, env={"PATH": tools.path_prefix()})


def test_bad_tool_names_are_refused(tmp_path: Path) -> None:
    tools = StandInTools(tmp_path / "bin")
    for name in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(ValueError):
            tools.add(name, Recording())


@pytest.mark.sshd
def test_one_node_of_the_sshd_cluster_sees_its_stand_ins(tmp_path: Path) -> None:
    from nvtest.testing.sshd_cluster import SSHDCluster

    tools = StandInTools(tmp_path / "bin")
    tools.add("nvidia-smi", Recording(stdout="stand-in GPU\n"))
    try:
        cluster = SSHDCluster(
            2, base_dir=tmp_path / "c", node_homes=True, node_env={"node02": {"PATH": tools.path_prefix()}}
        )
        cluster.start()
    except Exception as exc:  # noqa: BLE001 - sshd missing on this machine
        pytest.skip(f"sshd cluster did not start: {exc}")
    try:
        base = ["ssh", "-F", str(cluster.ssh_config_path)]
        on2 = subprocess.run([*base, "node02", "nvidia-smi"], capture_output=True, text=True, timeout=30)
        on1 = subprocess.run(
            [*base, "node01", "command -v nvidia-smi || echo none"], capture_output=True, text=True, timeout=30
        )
    finally:
        cluster.stop()
    assert on2.stdout == "stand-in GPU\n", on2.stderr
    assert str(tools.bin_dir) not in on1.stdout
