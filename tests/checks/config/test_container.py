"""container_identity: the rank script run for real by sh (marker file, env, neither), and the
judgement of a launch's lines. The Slurm launch itself is tested in tests/e2e/test_config_audit_slurm.py."""

from __future__ import annotations

import os
import subprocess

from nvtest.checks.config.container import IDENTITY_SCRIPT, judge_identities, parse_identities
from nvtest.verdict import Verdict
from tests.checks.config.conftest import verdict_of


def _rank(env: dict[str, str]) -> str:
    base = {"PATH": os.environ["PATH"], "SLURM_PROCID": "3", "SLURMD_NODENAME": "gpu002"}
    return subprocess.run(
        ["sh", "-c", IDENTITY_SCRIPT], env={**base, **env}, capture_output=True, text=True, check=True, timeout=10
    ).stdout


def test_the_rank_script_reads_the_marker_file_then_the_env(tmp_path):
    marker = tmp_path / "nvtest-image-id"
    marker.write_text("pytorch 24.05 nvtest\nbuilt by ci\n")
    line = _rank({"NVTEST_IMAGE_MARKER": str(marker), "NVTEST_IMAGE_ID": "ignored"})
    assert line == f"nvtest-rank rank=3 node=gpu002 image=pytorch_24.05_nvtest source={marker}\n"
    assert "image=img-7 source=env:NVTEST_IMAGE_ID" in _rank(
        {"NVTEST_IMAGE_MARKER": str(tmp_path / "none"), "NVTEST_IMAGE_ID": "img-7"}
    )
    assert "image=- source=none" in _rank({"NVTEST_IMAGE_MARKER": str(tmp_path / "none")})


def test_a_rank_on_the_host_fails_its_node_only():
    text = (
        "0: nvtest-rank rank=0 node=gpu001 image=img-7 source=/etc/nvtest-image-id\n"
        "srun: launch step\n"
        "nvtest-rank rank=1 node=gpu001 image=img-7 source=/etc/nvtest-image-id\n"
        "nvtest-rank rank=2 node=gpu002 image=- source=none\n"
        "nvtest-rank rank=3 node=gpu002 image=img-7 source=env:NVTEST_IMAGE_ID\n"
    )
    layout = {0: "gpu001", 1: "gpu001", 2: "gpu002", 3: "gpu002"}
    outs = judge_identities(parse_identities(text), layout, "img-7", "srun ...")
    assert verdict_of(outs["gpu001"]) == Verdict.PASS
    assert verdict_of(outs["gpu002"]) == Verdict.FAIL
    assert "rank 2 on gpu002 ran on the host" in outs["gpu002"].text() and "plugstack.conf" in outs["gpu002"].text()
    assert [r["image"] for r in outs["gpu002"].details["ranks"]] == [None, "img-7"]


def test_another_image_and_a_silent_rank_fail():
    text = "nvtest-rank rank=0 node=a image=img-7 source=x\nnvtest-rank rank=1 node=b image=img-6 source=x\n"
    outs = judge_identities(parse_identities(text), {0: "a", 1: "b", 2: "b"}, None, "srun")
    # no expected identity: the ranks' majority is taken (a tie goes to the first seen, img-7)
    assert verdict_of(outs["a"]) == Verdict.PASS and verdict_of(outs["b"]) == Verdict.FAIL
    b = outs["b"].text()
    assert "rank 1 on b ran in image 'img-6'; the other ranks report 'img-7'" in b
    assert "rank 2 (launched on b) printed no identity line" in b


def test_submit_passes_the_container_options_to_the_run_inside_the_job():
    import inspect

    from nvtest.cli.submit import RUN_ONLY, submit
    from nvtest.transports.options import SlurmOptions

    params = set(inspect.signature(submit).parameters)
    assert (
        {"container_image", "container_mounts", "image_id"} <= set(RUN_ONLY) <= set(SlurmOptions.__dataclass_fields__)
    )
    assert not params & set(RUN_ONLY)  # not consumed by submit: they reach `nvtest run` in the job
