"""The JSON contract every probe keeps: skip, error and usage paths, no traceback."""

from __future__ import annotations

import os

import pytest

SCRIPTS = [
    "stream_probe.py",
    "gemm_probe.py",
    "devmem_probe.py",
    "h2d_probe.py",
    "burnin_probe.py",
    "train_smoke.py",
    "inference_probe.py",
    "sdc_probe.py",
]
NOTHING = {"NVTEST_PROBE_DISABLE": "numpy,torch,cupy,pynvml,cc,nvbandwidth"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_forced_failure_is_an_error_document(probe, script):
    run = probe(script, env={**NOTHING, "NVTEST_PROBE_FORCE_ERROR": "1"})
    assert run.returncode == 1
    assert run.doc["status"] == "error"
    assert "forced failure" in run.doc["reason"]
    assert run.doc["probe"] == script.removesuffix(".py").removesuffix("_probe")


@pytest.mark.parametrize("script", SCRIPTS)
def test_missing_libraries_give_skip_with_reason(probe, script):
    run = probe(script, env=NOTHING)
    assert run.returncode == 0
    assert run.doc["status"] == "skip"
    assert "disabled by NVTEST_PROBE_DISABLE" in run.doc["reason"]
    assert run.doc["results"] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_usage_error_is_json_not_argparse_exit(probe, script):
    run = probe(script, "--no-such-option", env=NOTHING)
    assert run.returncode == 1
    assert run.doc["status"] == "error"
    assert run.doc["reason"].startswith("ProbeError: usage error")
    assert "--no-such-option" in run.doc["reason"]


def test_force_error_can_target_one_probe(probe):
    run = probe("h2d_probe.py", env={**NOTHING, "NVTEST_PROBE_FORCE_ERROR": "gemm,stream"})
    assert run.doc["status"] == "skip"  # h2d not named: runs normally


def test_no_gpu_with_device_auto_is_a_skip_naming_torch_cuda(probe):
    run = probe("devmem_probe.py", env={"NVTEST_PROBE_DISABLE": "cupy"})
    assert run.doc["status"] == "skip"
    assert "no CUDA device: torch.cuda.is_available() is False" in run.doc["reason"]


#: Every probe with a GPU path, and its arguments besides ``--device cuda``.
DEVICE_PROBES = [
    ("gemm_probe.py", ()),
    ("burnin_probe.py", ("--seconds", "1")),
    ("devmem_probe.py", ()),
    ("h2d_probe.py", ("--no-nvbandwidth",)),
    ("collective_probe.py", ("--nproc", "1")),
    ("train_smoke.py", ("--nproc", "1")),
    ("inference_probe.py", ("--width", "32", "--depth", "1", "--heads", "2", "--vocab", "64")),
    ("sdc_probe.py", ("--size", "32", "--steps", "1")),
]


@pytest.mark.parametrize(("script", "args"), DEVICE_PROBES, ids=[s for s, _ in DEVICE_PROBES])
def test_asked_for_cuda_without_a_gpu_is_an_error_in_cudas_words(probe, script, args):
    """Asked for the GPUs (a node whose PCI bus shows them), a probe never skips and never
    measures the CPU instead: it errors with what CUDA said (here torch's CPU build)."""
    run = probe(script, "--device", "cuda", *args, env={"NVTEST_PROBE_DISABLE": "cupy"})
    assert run.doc["status"] == "error", run.doc
    assert "CUDA cannot start" in run.doc["reason"]
    assert "Torch not compiled with CUDA enabled" in run.doc["reason"]
    assert run.doc["cause"] == "cuda:cannot_start", run.doc  # the key travels, not the sentence
    assert not run.doc.get("results"), run.doc["results"]


def test_run_per_device_turns_failures_into_entries():
    import _contract as contract
    import _device_pool as pool

    from tests.probes.spawn_workers import behave

    plan = {"cuda:0": "ok", "cuda:1": "raise", "cuda:2": "skip", "cuda:3": "die", "cuda:4": "hang"}
    answers = pool.run_per_device(behave, list(plan), plan, timeout_s=10)
    assert [a["device"] for a in answers] == list(plan)
    ok, raised, skipped, died, hung = answers
    assert ok["status"] == "ok" and ok["pid"] != os.getpid()
    assert raised["status"] == "error" and "illegal memory access" in raised["reason"]
    assert skipped == {"device": "cuda:2", "status": "skip", "reason": "no such thing here"}
    assert died["status"] == "error" and "exit code 7" in died["reason"]
    assert hung["status"] == "error" and "no answer within 10 s" in hung["reason"]
    assert contract.overall_status(answers)[0] == "error"


def test_sigterm_still_prints_an_error_document(probe_dir):
    import json
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NVTEST_PROBE_DISABLE"] = "torch"
    proc = subprocess.Popen(
        [sys.executable, str(probe_dir / "burnin_probe.py"), "--device", "cpu", "--seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    children = f"/proc/{proc.pid}/task/{proc.pid}/children"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # burning: the worker process exists
        with open(children) as fh:
            if fh.read().strip():
                break
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)
    assert proc.returncode == 1, (doc, err[-2000:])
    assert doc["status"] == "error" and "terminated by signal 15" in doc["reason"], doc


def test_every_probe_with_a_device_option_is_walked():
    """A new probe with ``--device`` joins DEVICE_PROBES (and so the rule above)."""
    from tests.conftest import PROBES

    with_device = {
        p.name
        for p in PROBES.glob("*.py")
        if not p.name.startswith("_") and ('"--device"' in p.read_text() or "base_parser(" in p.read_text())
    }
    assert with_device == {s for s, _ in DEVICE_PROBES}
