"""The JSON document contract of the node-side probes: one document, status, exit code.

The probes in this directory are shipped to a node as one flat directory and run
with the node's own interpreter (``python3 DIR/gemm_probe.py ARGS``).  Each probe
script puts its own directory first on ``sys.path`` and imports its helpers as
sibling modules (``import _contract as contract``); the helpers import nothing of
nvtest, only the standard library and each other.

Contract (see docs/probes.md): a probe prints exactly one JSON document on
stdout::

    {"probe": NAME, "probe_version": 1, "status": "ok" | "skip" | "error",
     "reason": str | None, "cause": str (an error's key, where known),
     "host": str, "library": str | None,
     "results": [ {...}, ... ], ...probe specific keys...}

and exits 0 for ``ok`` and ``skip``, 1 for ``error``.  Anything else the probe or
a library writes to stdout (including C libraries writing to fd 1 and child
processes) is redirected to stderr while the probe runs, so stdout carries the
JSON document alone.

Environment switch honoured by :func:`run`:

``NVTEST_PROBE_FORCE_ERROR=1`` (or a comma list of probe names)
    raise inside the probe body after argument parsing: the error path (status
    ``error``, exit 1, JSON still printed) can be exercised on any machine.

(``NVTEST_PROBE_DISABLE`` is read by :mod:`_libraries`.)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

PROBE_VERSION = 1
FORCE_ERROR_ENV = "NVTEST_PROBE_FORCE_ERROR"

EXIT_OK = 0
EXIT_ERROR = 1


class ProbeSkip(Exception):
    """The probe does not apply on this node (no GPU, no library); the message is the reason."""


class ProbeError(Exception):
    """The probe applies but could not measure; the message is the reason, ``cause`` its key
    where the probe knows it (the document's ``cause``: ``cuda:cannot_start``)."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class ProbeTerminated(BaseException):
    """SIGTERM arrived (the controller's timeout); a BaseException so that no
    ``except Exception`` in a probe or library swallows it."""


# --------------------------------------------------------------------------- document


def hostname() -> str:
    """Short host name as the node reports it (``socket.gethostname()``)."""
    return socket.gethostname()


def new_document(probe: str) -> dict[str, Any]:
    """The common skeleton of a probe's JSON document (status None until :func:`run` sets it).

    Keys: ``probe``, ``probe_version``, ``status``, ``reason``, ``host``,
    ``library``, ``results`` (empty list), ``argv`` (``sys.argv[1:]``),
    ``python`` (version), ``started_at`` (ISO-8601 UTC, seconds), ``duration_s``.
    """
    return {
        "probe": probe,
        "probe_version": PROBE_VERSION,
        "status": None,  # None until set: run() derives it from the results
        "reason": None,
        "host": hostname(),
        "library": None,
        "results": [],
        "argv": list(sys.argv[1:]),
        "python": sys.version.split()[0],
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017 (py<3.11 nodes)
        "duration_s": None,
    }


def overall_status(results: Sequence[dict[str, Any]]) -> tuple[str, str | None]:
    """Fold per-entry statuses into the document's ``(status, reason)``.

    Entries without a ``status`` key count as ``ok``.  Any ``error`` entry makes
    the document ``error`` (reason: the first error's reason, prefixed with its
    device); no entry or only ``skip`` entries make it ``skip``; else ``ok``.
    """
    errors = [r for r in results if r.get("status") == "error"]
    if errors:
        first = errors[0]
        where = first.get("device")
        reason = str(first.get("reason"))
        return "error", f"{where}: {reason}" if where else reason
    if not results or all(r.get("status") == "skip" for r in results):
        reasons = sorted({str(r.get("reason")) for r in results if r.get("reason")})
        return "skip", "; ".join(reasons) or "nothing measured"
    return "ok", None


def json_default(obj: Any) -> Any:
    """Make numpy scalars and other odd values JSON-serialisable (``.item()``, ``.tolist()``, str)."""
    for attr in ("item", "tolist"):
        if hasattr(obj, attr):
            return getattr(obj, attr)()
    return str(obj)


def sanitize(obj: Any) -> Any:
    """Replace NaN/inf floats by None recursively (strict JSON has no NaN); tuples become lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    return obj


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[Callable[[str], None]]:
    """Send fd 1 to fd 2 for the duration; yield a writer for the real stdout.

    Works at file-descriptor level so that output of C libraries and of child
    processes started meanwhile cannot end up between the probe's JSON.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    old_stdout = sys.stdout
    sys.stdout = sys.stderr
    real = os.fdopen(saved, "w", closefd=False)

    def write(text: str) -> None:
        real.write(text)
        real.flush()

    try:
        yield write
    finally:
        sys.stdout.flush()
        sys.stdout = old_stdout
        os.dup2(saved, 1)
        real.close()
        os.close(saved)


# --------------------------------------------------------------------------- driver


def _raise_on_sigterm(signum: int, _frame: Any) -> None:
    raise ProbeTerminated(f"terminated by signal {signum}")


def _forced_error(probe: str) -> None:
    """Raise :class:`ProbeError` when ``$NVTEST_PROBE_FORCE_ERROR`` names ``probe`` (or is 1/all)."""
    forced = os.environ.get(FORCE_ERROR_ENV, "")
    if forced and (forced in ("1", "all") or probe in forced.split(",")):
        raise ProbeError(f"forced failure ({FORCE_ERROR_ENV}={forced})")


def run(
    probe: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace, dict[str, Any]], None],
    argv: Sequence[str] | None = None,
    emit: Callable[[argparse.Namespace | None], bool] | None = None,
) -> int:
    """Run a probe body and print its JSON document; return the exit code (0 or 1).

    ``body(args, doc)`` fills ``doc`` (``library``, ``results``, extra keys) and
    may raise :class:`ProbeSkip` (status ``skip``) or any exception, SIGTERM's
    :class:`ProbeTerminated` included (status ``error``, traceback on stderr).
    When ``doc["status"]`` is left None it is derived from the results with
    :func:`overall_status`.  ``emit(args)`` returning False prints the document
    on stderr instead of stdout (non-zero DDP ranks).  ``--help`` prints usage
    on stderr and returns 0 without a document.
    """
    doc = new_document(probe)
    t0 = time.perf_counter()
    args: argparse.Namespace | None = None
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, _raise_on_sigterm)
    with stdout_to_stderr() as write_stdout:
        try:
            args = parser.parse_args(argv)
            _forced_error(probe)
            body(args, doc)
            if doc["status"] is None:
                doc["status"], doc["reason"] = overall_status(doc["results"])
        except ProbeSkip as exc:
            doc["status"], doc["reason"] = "skip", str(exc)
        except SystemExit as exc:  # --help
            if exc.code in (0, None):
                return EXIT_OK
            doc["status"], doc["reason"] = "error", f"exit {exc.code}"
        except BaseException as exc:  # noqa: BLE001 - the contract: JSON, never a traceback
            traceback.print_exc(file=sys.stderr)
            doc["status"] = "error"
            doc["reason"] = f"{type(exc).__name__}: {exc}".strip()
            if getattr(exc, "cause", None):
                doc["cause"] = str(exc.cause)  # type: ignore[attr-defined]
        doc["duration_s"] = round(time.perf_counter() - t0, 3)
        text = json.dumps(sanitize(doc), default=json_default, sort_keys=False)
        if emit is None or emit(args):
            write_stdout(text + "\n")
        else:
            print(text, file=sys.stderr)
    return EXIT_ERROR if doc["status"] == "error" else EXIT_OK


# --------------------------------------------------------------------------- arguments


class ProbeArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors raise :class:`ProbeError` (a JSON document, not exit 2).

    ``--help`` still exits 0 (``SystemExit``), with the usage on stderr.
    """

    def error(self, message: str) -> Any:  # type: ignore[override]
        """Raise :class:`ProbeError` ``"usage error: MESSAGE"`` instead of exiting 2."""
        raise ProbeError(f"usage error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        """Status 0 (``--help``): SystemExit(0); any other status: :class:`ProbeError`."""
        if status:
            raise ProbeError(f"usage error: {message or 'exit ' + str(status)}")
        raise SystemExit(status)  # --help: usage on stderr (stdout is redirected), exit 0


def base_parser(probe: str, description: str) -> ProbeArgumentParser:
    """Parser with the options every device probe shares (``--device``, ``--gpus``).

    ``--device``: ``auto`` (default), ``cpu`` or ``cuda``; ``--gpus``: a comma
    list of CUDA device indices (:func:`parse_index_list`), default None (all).
    """
    parser = ProbeArgumentParser(prog=f"{probe}.py", description=description)
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to measure: cuda GPUs, the host CPU, or auto (GPUs if any)",
    )
    parser.add_argument(
        "--gpus",
        type=parse_index_list,
        default=None,
        help="comma list of CUDA device indices to use (default: all visible)",
    )
    return parser


def parse_index_list(text: str) -> list[int]:
    """``"0,2,3"`` -> ``[0, 2, 3]`` (argparse ``type=``); ArgumentTypeError if not integers."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None


def parse_name_list(text: str) -> list[str]:
    """``"fp32, bf16"`` -> ``["fp32", "bf16"]``: stripped, lower case, empties dropped (argparse ``type=``)."""
    return [x.strip().lower() for x in text.split(",") if x.strip()]
