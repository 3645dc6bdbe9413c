"""The h2d check's reading of nvbandwidth: per-GPU host copies and the slowest peer read.

Which testcases count, and how a matrix becomes a figure per GPU, is the parsed result's
(:meth:`~nvtest.parsers.nvbandwidth.NvbandwidthResult.host_copies`,
:meth:`~nvtest.parsers.nvbandwidth.NvbandwidthResult.slowest_peer_reads`): the evidence
summary (:mod:`nvtest.analysis.evidence`) reads the same figures.
"""

from __future__ import annotations

from nvtest.checks.api import Judge
from nvtest.errors import ParseError, ProbeError
from nvtest.parsers import nvbandwidth
from nvtest.text import last_words

__all__ = ["judge_nvbandwidth"]


def judge_nvbandwidth(judge: Judge, text: str, exit_code: int = 0, stderr: str = "") -> None:
    """Judge nvbandwidth's output: per-GPU host copies (``h2d_gbps``, ``d2h_gbps``,
    ``bidir_gbps``, GB/s, ``device=cuda:N``), and the slowest peer read per GPU
    (``d2d_read_ce_gbps``).

    The tool's own failure (``[CUDA_ERROR_NOT_PERMITTED] ...``, an assertion) fails the item
    in its words, and what it measured before is judged too; a non-zero exit without such a
    line fails it with the tool's last words; output that is not nvbandwidth's is an error.

    Raises:
        ProbeError: the output is not nvbandwidth's (the message quotes the tool's words).
    """
    try:
        result = nvbandwidth.parse(text)
    except ParseError as exc:
        raise ProbeError(f"nvbandwidth exit {exit_code}: {last_words(text, stderr)} ({exc})") from None
    if result.failure is not None:  # the tool's own failure: what it measured before is judged too
        judge.fail(f"nvbandwidth: {result.failure.reason}")
    elif exit_code != 0:
        judge.fail(f"nvbandwidth exit {exit_code}: {last_words(text, stderr)}")
    for direction, gpu, value in result.host_copies():
        judge(f"{direction}_gbps", value, "GB/s", device=f"cuda:{gpu}")
    for src, value in result.slowest_peer_reads():
        judge("d2d_read_ce_gbps", value, "GB/s", device=f"cuda:{src}", stat="min over peers")
