"""The h2d check reads nvbandwidth's copy-engine figures per GPU (recorded v0.10 output)."""

from __future__ import annotations

import importlib.util

from nvtest.checks.api import Judge
from nvtest.config.resources import suites_dir
from tests.conftest import CORPUS as CORPUS_ROOT

CORPUS = CORPUS_ROOT / "nvbandwidth"


def _module():
    spec = importlib.util.spec_from_file_location("h2d_check", suites_dir() / "memory" / "test_h2d.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_v010_seven_gpus():
    text = (CORPUS / "v0.10-7gpu-cov-lines-na-diagonal-bidir-read1-read2-total-excerpt.txt").read_text()
    j = Judge(None, "h2d", "node001", None)
    _module().judge_nvbandwidth(j, text)
    h2d = [m for m in j.metrics if m.name == "h2d_gbps"]
    assert len(h2d) == 7 and all(55.5 <= m.value <= 55.7 for m in h2d), h2d
    d2h = [m for m in j.metrics if m.name == "d2h_gbps"]
    assert len(d2h) == 7 and abs(sum(m.value for m in d2h) - 399.86) < 0.05
    peer = [m for m in j.metrics if m.name == "d2d_read_ce_gbps"]
    assert len(peer) == 7 and all(764.0 <= m.value <= 766.4 for m in peer)
    assert {m.labels["device"] for m in peer} == {f"cuda:{i}" for i in range(7)}


def test_the_tools_own_failure_words_fail_the_item():
    """nvbandwidth prints its CUDA errors on stdout and exits 1: its words are the reason."""
    text = (CORPUS / "v0.8-multinode-4xh200-cuda-error-not-permitted-cumemcreate-imex-cut.txt").read_text()
    j = Judge(None, "h2d", "node001", None)
    _module().judge_nvbandwidth(j, text, 1, "")
    assert j.failures and "CUDA_ERROR_NOT_PERMITTED" in j.failures[0], j.failures
    j2 = Judge(None, "h2d", "node001", None)
    _module().judge_nvbandwidth(j2, "nvbandwidth Version: v0.8\n", 2, "terminate called: bad_alloc\n")
    assert j2.failures == ["nvbandwidth exit 2: nvbandwidth Version: v0.8 / terminate called: bad_alloc"]
