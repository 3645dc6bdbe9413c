"""Training smoke: loss criterion, launcher detection, standalone and launched DDP runs."""

from __future__ import annotations

import math

import _ports
import pytest
import train_smoke as ts


def test_loss_fell_needs_a_margin_and_finite_losses():
    falling = [4.0] * 5 + [3.0] * 10 + [1.0] * 5
    assert ts.loss_fell(falling, 0.1)
    assert not ts.loss_fell([4.0] * 20, 0.1)
    assert not ts.loss_fell([4.0] * 5 + [3.7] * 15, 0.1)  # fell 7.5 %: below the margin
    assert not ts.loss_fell(falling[:-1] + [math.nan], 0.1)
    assert not ts.loss_fell([4.0, 1.0], 0.1)  # too few steps to judge


def test_launch_env_torchrun_slurm_and_standalone():
    base = {"MASTER_ADDR": "n1", "MASTER_PORT": "29500"}
    assert ts.launch_env({**base, "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}) == (3, 8, 3)
    assert ts.launch_env({**base, "SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1"}) == (5, 16, 1)
    assert ts.launch_env({"RANK": "0", "WORLD_SIZE": "2"}) is None  # no rendezvous address
    assert ts.launch_env({}) is None


def test_only_rank_zero_prints_json(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert ts._is_rank0(None) is False
    monkeypatch.setenv("RANK", "0")
    assert ts._is_rank0(None) is True


def _check_result(r, world):
    assert r["world_size"] == world and r["backend"] == "gloo"
    assert r["steps"] == len(r["losses"]) == 20
    assert r["loss_fell"] is True and r["any_nan"] is False
    assert r["last_loss"] < 0.9 * r["first_loss"]
    assert r["first_loss"] == pytest.approx(math.log(ts.VOCAB), rel=0.2)  # starts near chance
    assert [x["rank"] for x in r["ranks"]] == list(range(world))
    assert all(x["host"] for x in r["ranks"])
    assert r["tokens_per_s"] == pytest.approx(world * ts.BATCH * ts.SEQ / r["step_time_median_s"])


def test_standalone_two_ranks_on_cpu(probe):
    run = probe(
        "train_smoke.py",
        "--device",
        "cpu",
        "--nproc",
        "2",
        "--steps",
        "20",
        "--timeout-s",
        "120",
        timeout=240,
    )
    assert run.doc["status"] == "ok", run.doc
    assert run.doc["mode"] == "standalone"
    _check_result(run.doc["results"][0], 2)


def test_launched_as_rank_zero_of_one(probe):
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_ports.free_port()),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
    }
    run = probe("train_smoke.py", "--device", "cpu", "--steps", "20", env=env, timeout=180)
    assert run.doc["status"] == "ok", run.doc
    assert run.doc["mode"] == "launched"
    _check_result(run.doc["results"][0], 1)


def test_too_few_steps_is_a_usage_error(probe):
    run = probe("train_smoke.py", "--steps", "5", env={"NVTEST_PROBE_DISABLE": "torch"})
    assert run.doc["status"] == "error" and "--steps" in run.doc["reason"]
