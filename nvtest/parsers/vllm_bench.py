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

Failures (:data:`FAILURES`), read only from a log with no summary: ``No CUDA GPUs are
available`` / ``Current node has no GPU available`` (``no_device``), ``Engine core
initialization failed`` / ``EngineCore failed to start`` (``init_failure``, the earlier
exception lines, vLLM's "root cause above", in ``detail``), any other Python exception line
(``error_banner``); a traceback cut before its exception line is an ``error_banner`` with no
line. An exception after a summary is a warning (vLLM often raises while shutting down). A
traceback or exception line alone is vLLM's only with vLLM in it (a ``(EngineCore_DP0 pid=N)``
tag or ``vllm`` in a path or command); otherwise :class:`ParseError`. ``effective``: the echoed
command line's ``--model``, ``--input-len``/``--random-input-len``,
``--output-len``/``--random-output-len``, ``--num-prompts``, ``-tp``, the token totals and,
from them, the mean prompt length that ran.

Units: requests/s, tokens/s (prompt plus output tokens for ``total``), token counts.
The elapsed time is derived: (P + Q) / T seconds.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    ToolFailure,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
)

TOOL = "vllm-bench"
DESCRIPTION = "vLLM offline throughput benchmark (vllm bench throughput): requests/s, tokens/s, token counts"

__all__ = ["FAILURES", "VllmThroughput", "detect", "parse"]

_K = FailureKind

#: vLLM's failure wordings (v0.4-v0.11 engine and torch exception lines; the ``code`` group
#: is the exception class).
FAILURES = FailureTable(
    [
        (
            re.compile(
                r"(?P<code>\w*(?:Error|Exception)): (?:No CUDA GPUs are available"
                r"|Current node has no GPU available|Failed to infer device type)"
            ),
            _K.NO_DEVICE,
            "torch (torch.cuda init) and vLLM 0.7+ (ray executor, platform detection)",
        ),
        (
            re.compile(
                r"(?:(?P<code>\w*Error): )?(?:Engine core initialization failed"
                r"|EngineCore failed to start)"
            ),
            _K.INIT_FAILURE,
            "vLLM v1 engine 0.8+ (v1/engine/utils.py wait_for_engine_startup, v1/engine/core.py)",
        ),
        (
            re.compile(r"(?:^|[\s)\]])(?P<code>[A-Za-z_][\w.]*(?:Error|Exception)): \S"),
            _K.ERROR_BANNER,
            "Python's last traceback line, as vLLM's processes print it",
        ),
    ],
    binaries=r"vllm",
)


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
        warnings: what the parser noticed (a count that disagrees with the rates, an
            exception after the summary).
        failure: the tool's failure when no summary was printed (:data:`FAILURES`), else None.
        effective: what ran (module docstring, docs/parsers.md).
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
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

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
_COMMAND_RE = re.compile(r"vllm bench throughput|benchmark_throughput\.py")
#: command-line options echoed before a summary -> effective key (int-valued unless "model")
_OPTIONS = {
    "--model": "model",
    "--input-len": "input_len",
    "--random-input-len": "input_len",
    "--output-len": "output_len",
    "--random-output-len": "output_len",
    "--num-prompts": "num_prompts",
    "-tp": "tensor_parallel_size",
    "--tensor-parallel-size": "tensor_parallel_size",
}


class _Reader:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.summaries = 0
        self.error: str | None = None
        self.traceback = False
        self.hits: list[ToolFailure] = []
        self.after_summary: list[str] = []
        self.options: dict[str, object] = {}
        self.last_traceback_line: str | None = None

    def throughput(self, no: int, line: str, m: re.Match[str]) -> None:
        self.summaries += 1
        self.values.update(
            requests_per_s=float(m.group(1)),
            total_tokens_per_s=float(m.group(2)),
            output_tokens_per_s=float(m.group(3)) if m.group(3) else None,
            prompt_tokens=None,
            output_tokens=None,
        )

    def total(self, no: int, line: str, m: re.Match[str]) -> None:
        self.values[f"{m.group(1)}_tokens"] = int(m.group(2))

    def batch(self, no: int, line: str, m: re.Match[str]) -> None:
        self.values.update(batch_size=int(m.group(1)), tp_size=int(m.group(2)))

    def other(self, no: int, line: str) -> None:
        if line.startswith("Traceback (most recent call last)") or line.startswith('File "'):
            self.traceback = True
        elif _ERROR_RE.match(line):
            self.error = line
        if self.traceback and any(c.isalnum() for c in line):
            self.last_traceback_line = line
        if _COMMAND_RE.search(line):
            self.command(line)

    def command(self, line: str) -> None:
        """Options of an echoed ``vllm bench throughput`` command line."""
        try:
            words = shlex.split(line.lstrip("$> "))
        except ValueError:
            words = line.split()
        for opt, value in zip(words, [*words[1:], ""], strict=True):
            key = _OPTIONS.get(opt.split("=", 1)[0])
            if key is not None:
                if "=" in opt:
                    value = opt.split("=", 1)[1]
                self.options[key] = value if key == "model" else (int(value) if value.isdigit() else None)

    def failure_line(self, no: int, raw: str) -> None:
        """A line of :data:`FAILURES` (as printed, the process tag kept)."""
        if _PREFIX_RE.sub("", raw).lstrip().startswith("raise "):
            return  # a traceback's source line, not the exception
        f = FAILURES.failure(no, raw)
        if f is not None:
            if self.summaries:
                self.after_summary.append(f.message)
            else:
                self.hits.append(f)


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
    if r.prompt_tokens is not None and r.output_tokens is not None and r.output_tokens_per_s and r.total_tokens_per_s:
        ratio = r.output_tokens / (r.prompt_tokens + r.output_tokens)
        printed = r.output_tokens_per_s / r.total_tokens_per_s
        if abs(ratio - printed) > 0.01 * max(ratio, 1e-9) + 1e-3:
            out.append(f"output share of tokens {ratio:.4f} from the counts but {printed:.4f} from the rates")
    return tuple(out)


def _failure(reader: _Reader) -> ToolFailure | None:
    """The run's failure: a missing device first; else the last plain exception line (Python
    prints the cause last), an ``init_failure`` when the engine said it could not start; the
    other failure lines (vLLM's "see root cause above") in ``detail``."""
    if reader.summaries:
        return None
    for f in reader.hits:
        if f.kind is _K.NO_DEVICE:
            return f
    if reader.hits:
        causes = [f for f in reader.hits if f.kind is _K.ERROR_BANNER]
        main = causes[-1] if causes else reader.hits[-1]
        init = any(f.kind is _K.INIT_FAILURE for f in reader.hits)
        others = tuple(f.message for f in reader.hits if f is not main)[-3:]
        return ToolFailure(
            _K.INIT_FAILURE if init else main.kind, main.message, main.line, main.code, main.device, others
        )
    if reader.traceback:
        tail = (reader.last_traceback_line,) if reader.last_traceback_line else ()
        return ToolFailure(_K.ERROR_BANNER, "Python traceback without a final error line", None, None, None, tail)
    return None


def _effective(reader: _Reader, rec: VllmThroughput) -> Mapping[str, object]:
    mean = None
    num = reader.options.get("num_prompts")
    if isinstance(num, int) and num and rec.prompt_tokens is not None:
        mean = rec.prompt_tokens / num
    return effective(
        **reader.options,
        batch_size=rec.batch_size,
        tp_size=rec.tp_size,
        prompt_tokens=rec.prompt_tokens,
        output_tokens=rec.output_tokens,
        mean_prompt_tokens=mean,
        summaries=rec.summaries,
    )


@guarded(TOOL)
def parse(text: str) -> VllmThroughput:
    """Parse a ``vllm bench throughput`` log into a :class:`VllmThroughput`.

    Raises:
        ParseError: not vLLM's output: no summary, and no traceback or exception line with
            vLLM in the text (a process tag, ``vllm`` in a path or the command).
    """
    reader = _Reader()
    vllm_seen = False
    for no, line in numbered_lines(text):
        raw = line.strip()
        s = _PREFIX_RE.sub("", raw).strip()
        if s:
            vllm_seen = vllm_seen or s != raw or "vllm" in raw.lower()
            _LINES(reader, no, s)
            reader.failure_line(no, raw)
    if not reader.summaries and not (vllm_seen and (reader.error or reader.traceback or reader.hits)):
        raise not_tool_output(TOOL, "'Throughput: R requests/s, T total tokens/s, O output tokens/s'", text)
    error = reader.error or (None if reader.summaries else "Python traceback without a final error line")
    rec = VllmThroughput(summaries=reader.summaries, error=error if not reader.summaries else None, **reader.values)  # type: ignore[arg-type]
    warn = _warnings(rec) + tuple(f"error after the summary: {m}" for m in reader.after_summary[:3])
    return VllmThroughput(
        **{
            **rec.__dict__,
            "warnings": warn,
            "failure": _failure(reader),
            "effective": _effective(reader, rec),
        }
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like vLLM's offline throughput benchmark (summary or its engine log)."""
    head = text[:200000]
    if _THROUGHPUT_RE.search(head):
        return True
    return "vllm" in head.lower() and (
        "bench throughput" in head or "benchmark_throughput" in head or "EngineCore" in head
    )
