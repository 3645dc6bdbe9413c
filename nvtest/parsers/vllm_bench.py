"""Parser for vLLM's offline throughput benchmark (``vllm bench throughput``, ``benchmark_throughput.py``).

Formats (vLLM's own print statements):

- since vLLM 0.6.3 (2024-10): ``Throughput: R requests/s, T total tokens/s, O output tokens/s``;
- since late 2024, after it: ``Total num prompt tokens:  P`` and ``Total num output tokens:  Q``;
- before 0.6.3: ``Throughput: R requests/s, T tokens/s`` (total tokens only);
- some forks print ``Batch Size: B, TP Size: N`` before each summary.

A log is the benchmark's stdout, often with its stderr (engine ``INFO`` lines,
``Processed prompts`` progress bars, ``(EngineCore_DP0 pid=N)`` prefixed
traceback lines when the engine dies). The last summary of the log is the
result; a log with a Python traceback or an ``Error`` line but no summary is a
failed run (:attr:`VllmThroughput.failure_reason` quotes the tool), and text
with neither is not this tool's output (:class:`ParseError`).

Units: requests/s, tokens/s (prompt plus output tokens for ``total``), token counts.
The elapsed time is derived: (P + Q) / T seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import LineDispatch, ParseError, guarded, numbered_lines

TOOL = "vllm-bench"
DESCRIPTION = "vLLM offline throughput benchmark (vllm bench throughput): requests/s, tokens/s, token counts"

__all__ = ["VllmThroughput", "detect", "parse"]


@dataclass(frozen=True)
class VllmThroughput:
    """One ``vllm bench throughput`` run.

    Attributes:
        requests_per_s: requests completed per second.
        total_tokens_per_s: prompt plus output tokens per second.
        output_tokens_per_s: generated tokens per second (None before vLLM 0.6.3).
        prompt_tokens, output_tokens: totals of the run (None when not printed).
        batch_size, tp_size: from a ``Batch Size: B, TP Size: N`` line (forks), else None.
        summaries: how many summaries the log holds (the last one is reported).
        error: the tool's last error line when the run failed, else None.
        warnings: what the parser noticed (a count that disagrees with the rates).
    """

    requests_per_s: float | None = None
    total_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    batch_size: int | None = None
    tp_size: int | None = None
    summaries: int = 0
    error: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def elapsed_s(self) -> float | None:
        """(prompt + output tokens) / total tokens/s, the benchmark's own elapsed time; None if unknown."""
        if self.prompt_tokens is None or self.output_tokens is None or not self.total_tokens_per_s:
            return None
        return (self.prompt_tokens + self.output_tokens) / self.total_tokens_per_s

    @property
    def failure_reason(self) -> str | None:
        """Why the run gave no result (the tool's words), None when it gave one."""
        if self.summaries:
            return None
        return f"vllm bench throughput failed: {self.error}" if self.error else "no Throughput summary"

    @property
    def passed(self) -> bool:
        return self.failure_reason is None


_THROUGHPUT_RE = re.compile(
    r"Throughput:\s*([\d.]+)\s*requests/s,\s*([\d.]+)\s*(?:total\s+)?tokens/s"
    r"(?:,\s*([\d.]+)\s*output tokens/s)?"
)
_TOTAL_RE = re.compile(r"Total num (prompt|output) tokens:\s*(\d+)")
_BATCH_RE = re.compile(r"Batch Size:\s*(\d+),\s*TP Size:\s*(\d+)")
_ERROR_RE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)|RuntimeError|AssertionError|Error)\b[:\s]")
_PREFIX_RE = re.compile(r"^\((?:EngineCore\w*|APIServer|Worker\w*) pid=\d+\)\s?")


class _Reader:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.summaries = 0
        self.error: str | None = None
        self.traceback = False

    def throughput(self, no: int, line: str, m: re.Match[str]) -> None:
        self.summaries += 1
        self.values.update(requests_per_s=float(m.group(1)), total_tokens_per_s=float(m.group(2)),
                           output_tokens_per_s=float(m.group(3)) if m.group(3) else None,
                           prompt_tokens=None, output_tokens=None)

    def total(self, no: int, line: str, m: re.Match[str]) -> None:
        self.values[f"{m.group(1)}_tokens"] = int(m.group(2))

    def batch(self, no: int, line: str, m: re.Match[str]) -> None:
        self.values.update(batch_size=int(m.group(1)), tp_size=int(m.group(2)))

    def other(self, no: int, line: str) -> None:
        if line.startswith("Traceback (most recent call last)") or line.startswith('File "'):
            self.traceback = True
        elif _ERROR_RE.match(line):
            self.error = line


_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (_THROUGHPUT_RE, _Reader.throughput),
        (_TOTAL_RE, _Reader.total),
        (_BATCH_RE, _Reader.batch),
    ],
    default=_Reader.other,
)


def _warnings(r: VllmThroughput) -> tuple[str, ...]:
    """Counts that disagree with the printed rates (the two are printed from one elapsed time)."""
    out = []
    if r.prompt_tokens is not None and r.output_tokens is not None and r.output_tokens_per_s \
            and r.total_tokens_per_s:
        ratio = r.output_tokens / (r.prompt_tokens + r.output_tokens)
        printed = r.output_tokens_per_s / r.total_tokens_per_s
        if abs(ratio - printed) > 0.01 * max(ratio, 1e-9) + 1e-3:
            out.append(f"output share of tokens {ratio:.4f} from the counts but {printed:.4f} from the rates")
    return tuple(out)


@guarded(TOOL)
def parse(text: str) -> VllmThroughput:
    """Parse a ``vllm bench throughput`` log into a :class:`VllmThroughput`.

    Raises:
        ParseError: no summary and no failure (traceback or error line) in the text.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = _PREFIX_RE.sub("", line.strip()).strip()
        if s:
            _LINES(reader, no, s)
    if not reader.summaries and not (reader.error or reader.traceback):
        raise ParseError(TOOL, "no vLLM throughput summary or failure found",
                         expected="'Throughput: R requests/s, T total tokens/s, O output tokens/s'")
    error = reader.error or (None if reader.summaries else "Python traceback without a final error line")
    rec = VllmThroughput(summaries=reader.summaries, error=error if not reader.summaries else None,
                         **reader.values)  # type: ignore[arg-type]
    warn = _warnings(rec)
    return VllmThroughput(**{**rec.__dict__, "warnings": warn}) if warn else rec


def detect(text: str) -> bool:
    """True when ``text`` looks like vLLM's offline throughput benchmark (summary or its engine log)."""
    head = text[:200000]
    if _THROUGHPUT_RE.search(head):
        return True
    return "vllm" in head.lower() and ("bench throughput" in head or "benchmark_throughput" in head
                                       or "EngineCore" in head)
