"""Parser for ``dcgmi diag`` (DCGM 2.x-4.x): the ``-j`` JSON and the text table.

JSON: DCGM 3.x puts results under ``"DCGM GPU Diagnostic"`` with per-result ``status`` and
``gpu_ids`` (a ``"0,1,2"`` string or an integer); DCGM 4.x uses ``"DCGM Diagnostic"``, a
``test_summary.status`` per test and per-entity results (``entity_id``), and a top-level
``"metadata"`` object (``"version"``, ``"Driver Version Detected"``) read into ``metadata``. Non-JSON lines before
the first ``{`` (``WARNING: ...``) are skipped and ``null`` entries in ``tests`` ignored.

Text: ``| Name | Result |`` rows, ``|-----  Category  ---`` separators, a result split across
continuation rows (``Pass - GPUs: 1, 2`` / ``Fail - GPU: 0``), and ``Warning``/``Info`` cells
that DCGM wraps at a fixed width, even mid-word; these are rejoined.

DCGM 4.x tables add one ``GPUn: Pass`` row per GPU under each test; these become per-GPU
results.

Statuses are normalised to ``pass``, ``fail``, ``warn``, ``skip`` (``not run`` and other
spellings kept lower-cased); Skip is never counted as a pass.

Failures (:data:`FAILURES`): the host engine not reachable (``Error: unable to establish a
connection to the specified host``: ``could_not_start``), a diagnostic plugin that did not load
or whose child process died (``Couldn't load a definition for ... in plugin``, ``There was an
internal error during the test: 'A child process ... exited'``: ``plugin_not_loaded``), CUDA that
could not initialise under the diagnostic (``Unable to initialize CUDA library: 'system not yet
initialized'``: ``init_failure``), a DCGM JSON schema this parser does not read
(``unsupported_format``). Warning cells are read after DCGM's wrapping is undone, so a wrapped
message still matches. ``effective``: the run level named on the command line, DCGM and driver
version, GPU device ids, and which tests ran and which were skipped.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    ParseError,
    ToolFailure,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
)

TOOL = "dcgmi"
DESCRIPTION = "dcgmi diag (-j JSON of DCGM 3.x/4.x, or the text table): per test and per GPU status"

__all__ = ["FAILURES", "DcgmDiag", "DcgmGpuResult", "DcgmTest", "detect", "parse"]

_K = FailureKind

#: dcgmi's and the diagnostic's (nvvs) failure wordings, DCGM 2.4-4.5; the last rows are found
#: in Warning cells once rejoined.
#: dcgmi's own log lines (``2023-10-26 12:30:41.636 ERROR [pid:tid] ...``, the timestamp
#: perhaps removed as a collector's prefix),
#: read for their failure words and otherwise passed over: not a poster's.
OWN_SENTENCES = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ )?(?:ERROR|WARN(?:ING)?|INFO|DEBUG) \[\d+:\d+\] ")

FAILURES = FailureTable(
    [
        (
            re.compile(r"Error: unable to establish a connection to the specified host: (?P<device>\S+)"),
            _K.COULD_NOT_START,
            "dcgmi 2.x-4.x: nv-hostengine not running or not listening",
        ),
        (
            re.compile(r"Error: Unable to connect to host engine\. (?P<code>.+)$"),
            _K.COULD_NOT_START,
            "dcgmi 2.x-4.x",
        ),
        (
            re.compile(r"Couldn't load a definition for \w+ in plugin (?P<code>\S+?):"),
            _K.PLUGIN_NOT_LOADED,
            "nvvs PluginLib (DCGM 3.2/3.3 with mismatched plugin packages)",
        ),
        (
            re.compile(
                r"There was an internal error during the test: '(?P<code>A child process \(\d+\) exited"
                r" with non-zero status \d+|Output of child process \(\d+\) couldn't be parsed)"
            ),
            _K.PLUGIN_NOT_LOADED,
            "DCGM 4.x: a test plugin's child process failed (pcie, nvbandwidth)",
        ),
        (
            re.compile(r"nvvs binary was not found", re.I),
            _K.PLUGIN_NOT_LOADED,
            "dcgmi 3.3+ (dcgm-exporter#324): the diagnostic's nvvs is not installed",
        ),
        (
            re.compile(r"Diagnostic could not be run because the Tesla recommended driver is not being used"),
            _K.COULD_NOT_START,
            "dcgmi 2.x-4.x Diag.cpp",
        ),
        (
            re.compile(
                r"Unable to complete diagnostic(?: for (?:group|entities) [^.]*)?\.\s*"
                r"Return:\s*(?:\((?P<code>-?\d+)\))?"
            ),
            _K.ERROR_BANNER,
            "dcgmi 2.x-4.x Diag.cpp: the diagnostic ended in an error (-30: nvvs returned one)",
        ),
        (
            re.compile(r"Unable to initiali[sz]e CUDA library: '(?P<code>[^']+)'"),
            _K.INIT_FAILURE,
            "nvvs 3.x/4.x: cuInit failed under the diagnostic",
        ),
        (
            re.compile(r"Error using CUDA API (?P<code>\w+)"),
            _K.INIT_FAILURE,
            "nvvs: a CUDA call the test needs failed",
        ),
    ],
    binaries=r"dcgmi|nvvs",
)
_RUN_RE = re.compile(r"dcgmi\s+diag\b.*?(?:-r|--run)\s+(\S+)")
_GPU_RESULT_RE = re.compile(r"^GPU\s*(\d+):\s*(Pass|Fail|Warn|Skip|Not Run|Passed|Failed|Skipped|Warning)\b", re.I)

_RANK = {"fail": 4, "warn": 3, "skip": 2, "pass": 1}


def _status(raw: str) -> str:
    s = raw.strip().lower()
    return {"passed": "pass", "failed": "fail", "warning": "warn", "skipped": "skip"}.get(s, s)


@dataclass(frozen=True)
class DcgmGpuResult:
    """One status for a set of GPUs: ``gpus`` empty means all GPUs."""

    status: str
    gpus: tuple[int, ...] = ()
    warnings: tuple[str, ...] = ()
    error_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class DcgmTest:
    """One diagnostic test: its overall status (the worst of its results) and per-GPU results."""

    name: str
    status: str
    category: str | None = None
    results: tuple[DcgmGpuResult, ...] = ()
    warnings: tuple[str, ...] = ()
    info: tuple[str, ...] = ()

    def gpus_with(self, status: str) -> tuple[int, ...]:
        """GPU ids reported with ``status`` (pass/fail/warn/skip)."""
        return tuple(sorted({g for r in self.results if r.status == status for g in r.gpus}))


@dataclass(frozen=True)
class DcgmDiag:
    """A dcgmi diag run. ``layout`` is ``json-3``, ``json-4`` or ``text``."""

    tests: tuple[DcgmTest, ...]
    layout: str
    version: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    def test(self, name: str) -> DcgmTest | None:
        """The test called ``name`` (case-insensitive), or None."""
        return next((t for t in self.tests if t.name.lower() == name.lower()), None)

    @property
    def status(self) -> str:
        """Worst status over all tests (``fail`` > ``warn`` > ``skip`` > ``pass``); ``skip`` if none ran."""
        if not self.tests:
            return "skip"
        return max((t.status for t in self.tests), key=lambda s: _RANK.get(s, 2))

    @property
    def passed(self) -> bool:
        """True only when tests ran and every one of them passed (Skip and Warn are not a pass),
        and the diagnostic reported no failure of its own."""
        return bool(self.tests) and all(t.status == "pass" for t in self.tests) and self.failure is None

    @property
    def failure_reason(self) -> str | None:
        """Why the run is not a pass: the tool's failure, else the first test not passing."""
        if self.failure is not None:
            return self.failure.reason
        bad = next((t for t in self.tests if t.status != "pass"), None)
        if bad is not None:
            return f"{bad.name}: {bad.status}"
        return None if self.tests else "no test ran"


def _worst(statuses: list[str]) -> str:
    return max(statuses, key=lambda s: _RANK.get(s, 2)) if statuses else "skip"


def _gpu_ids(value: object) -> tuple[int, ...]:
    if isinstance(value, bool):
        return ()
    if isinstance(value, int):
        return (value,)
    if isinstance(value, str):
        return tuple(int(x) for x in re.findall(r"\d+", value))
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return ()


def _warning_texts(value: object) -> tuple[list[str], list[int]]:
    texts: list[str] = []
    ids: list[int] = []
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, list):
        for w in value:
            if isinstance(w, dict):
                t = w.get("warning") or w.get("message") or w.get("msg")
                if isinstance(t, str):
                    texts.append(t)
                eid = w.get("error_id")
                if isinstance(eid, int) and not isinstance(eid, bool):
                    ids.append(eid)
            elif isinstance(w, str):
                texts.append(w)
    elif isinstance(value, str):
        texts.append(value)
    return texts, ids


def _json_test(category: str | None, t: dict[str, object]) -> DcgmTest:
    results: list[DcgmGpuResult] = []
    warnings: list[str] = []
    info: list[str] = []
    raw_results = t.get("results")
    for r in raw_results if isinstance(raw_results, list) else []:
        if not isinstance(r, dict):
            continue
        gpus = _gpu_ids(r.get("gpu_ids", r.get("gpu_id", r.get("entity_id"))))
        texts, ids = _warning_texts(r.get("warnings", r.get("warning")))
        warnings.extend(texts)
        inf, _ = _warning_texts(r.get("info"))
        info.extend(inf)
        st = r.get("status")
        results.append(DcgmGpuResult(_status(st) if isinstance(st, str) else "unknown", gpus, tuple(texts), tuple(ids)))
    summary = t.get("test_summary")
    sst = summary.get("status") if isinstance(summary, dict) else None
    status = _status(sst) if isinstance(sst, str) else _worst([r.status for r in results])
    name = t.get("name")
    return DcgmTest(
        str(name) if name is not None else "?",
        status,
        category,
        tuple(results),
        tuple(warnings),
        tuple(info),
    )


def _parse_json(text: str, start: int) -> DcgmDiag:
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip()) - 1:
            # the document ends before it closes: cut by its poster or the tool died writing it
            cut = ToolFailure(
                FailureKind.CRASH_AFTER_PARTIAL_OUTPUT,
                f"JSON document ends before it closes (line {line}): {exc.msg}",
                None,
                "cut",
            )
            return DcgmDiag((), "json-cut", failure=cut, warnings=("JSON output cut short",))
        raise ParseError(
            TOOL, f"invalid JSON: {getattr(exc, 'msg', exc)}", line=line, expected="dcgmi -j JSON"
        ) from None
    if not isinstance(doc, dict):
        raise ParseError(TOOL, "JSON document is not an object", expected="{'DCGM GPU Diagnostic': ...}")
    layout = "json-4" if "DCGM Diagnostic" in doc else "json-3"
    body = doc.get("DCGM Diagnostic", doc.get("DCGM GPU Diagnostic"))
    if not isinstance(body, dict):
        keys = ", ".join(map(str, doc)) or "none"
        if any("dcgm" in str(k).lower() for k in doc):
            unsupported = ToolFailure(
                FailureKind.UNSUPPORTED_FORMAT,
                f"DCGM JSON with top-level keys: {keys}",
                None,
                "json schema",
            )
            return DcgmDiag((), "json-unknown", failure=unsupported)
        raise ParseError(
            TOOL,
            f"unrecognised dcgmi JSON schema (top-level keys: {keys})",
            expected="'DCGM GPU Diagnostic' (3.x) or 'DCGM Diagnostic' (4.x)",
        )
    tests: list[DcgmTest] = []
    cats = body.get("test_categories")
    for cat in cats if isinstance(cats, list) else []:
        if not isinstance(cat, dict):
            continue
        cname = cat.get("category")
        ctests = cat.get("tests")
        for t in ctests if isinstance(ctests, list) else []:
            if isinstance(t, dict):
                tests.append(_json_test(str(cname) if cname is not None else None, t))
    # DCGM 4.x moves the versions to a top-level "metadata" object
    meta = doc.get("metadata")
    metadata = tuple(
        (str(k), str(v))
        for k, v in (meta.items() if isinstance(meta, dict) else ())
        if isinstance(v, (str, int, float))
    )
    version = body.get("version", doc.get("version", dict(metadata).get("version")))
    warnings = [] if tests else ["no test in the document"]
    return DcgmDiag(
        tuple(tests),
        layout,
        str(version) if version is not None else None,
        metadata,
        warnings=tuple(warnings),
    )


_RESULT_RE = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run|Passed|Failed|Skipped|Warning)\b\s*(?:-\s*(.*))?$", re.I)
_CATEGORY_RE = re.compile(r"^-+\s+([A-Za-z][\w ]*?)\s+-+$")


def _rejoin(pieces: list[str]) -> str:
    """Rejoin a cell DCGM wrapped at a fixed width (pieces at full width continue mid-word)."""
    stripped = [p.rstrip() for p in pieces]
    width = max((len(p) for p in stripped), default=0)
    out = stripped[0].lstrip() if stripped else ""
    for prev, piece in zip(stripped, stripped[1:], strict=False):
        out += piece if len(prev) >= width else " " + piece.lstrip()
    return out.strip()


def _parse_text(text: str) -> DcgmDiag:
    tests: list[DcgmTest] = []
    metadata: list[tuple[str, str]] = []
    category: str | None = None
    # current test: name, list of (status, gpus), notes {kind: [pieces]}
    name: str | None = None
    results: list[DcgmGpuResult] = []
    notes: dict[str, list[list[str]]] = {}
    last_kind = "result"

    def close() -> None:
        nonlocal name, results, notes
        if name is not None and results:
            warns = tuple(_rejoin(p) for p in notes.get("warning", []))
            infos = tuple(_rejoin(p) for p in notes.get("info", []))
            tests.append(
                DcgmTest(
                    name,
                    _worst([r.status for r in results]),
                    category,
                    tuple(results),
                    warns,
                    infos,
                )
            )
        name, results, notes = None, [], {}

    for _, line in numbered_lines(text):
        s = line.strip()
        if not s.startswith("|"):
            continue
        parts = s.split("|")
        cells = parts[1:-1] if s.endswith("|") and len(parts) > 2 else parts[1:]
        if len(cells) == 1:
            cm = _CATEGORY_RE.match(cells[0].split("+")[0].strip())
            if cm:
                close()
                category = cm.group(1)
            continue
        if len(cells) < 2:
            continue
        key, value = cells[0].strip(), cells[1][1:] if cells[1].startswith(" ") else cells[1]
        cm = _CATEGORY_RE.match(key)
        if cm:
            close()
            category = cm.group(1)
            continue
        if key in ("Diagnostic", "") and value.strip() == "Result":
            continue
        if key.lower() in ("warning", "info"):
            last_kind = key.lower()
            notes.setdefault(last_kind, []).append([value])
            continue
        gm = _GPU_RESULT_RE.match(value.strip())
        if gm and key == "" and name is not None:  # DCGM 4.x: one row per GPU
            results.append(DcgmGpuResult(_status(gm.group(2)), (int(gm.group(1)),)))
            last_kind = "result"
            continue
        rm = _RESULT_RE.match(value.strip())
        if key == "" and last_kind in ("warning", "info") and notes.get(last_kind):
            notes[last_kind][-1].append(value)
            continue
        if rm and key == "" and name is not None:
            results.append(DcgmGpuResult(_status(rm.group(1)), _gpu_ids(rm.group(2) or "")))
            continue
        if rm and key:
            close()
            name = key
            last_kind = "result"
            results.append(DcgmGpuResult(_status(rm.group(1)), _gpu_ids(rm.group(2) or "")))
            continue
        if key:
            close()
            metadata.append((key, value.strip()))
    close()
    version = next((v for k, v in metadata if k.lower() in ("dcgm version", "version")), None)
    return DcgmDiag(tuple(tests), "text", version, tuple(metadata))


def _failure(text: str, diag: DcgmDiag) -> ToolFailure | None:
    """The first failure line of :data:`FAILURES` outside the table, else the first Warning
    cell (rejoined) that is one, with the test it belongs to in ``detail``."""
    head = text if diag.layout == "text" else text[: text.find("{")]  # JSON: the lines before it
    # an error row with no test row around it is the whole output: read table rows too then
    outside = ((no, ln) for no, ln in numbered_lines(head) if not diag.tests or not ln.lstrip().startswith("|"))
    f = FAILURES.scan(outside)
    if f is not None:
        return f
    for t in diag.tests:
        for w in (*t.warnings, *(w for r in t.results for w in r.warnings)):
            f = FAILURES.failure(None, w, detail=(f"test {t.name}: {t.status}",))
            if f is not None:
                return f
    return None


def _effective(text: str, diag: DcgmDiag) -> Mapping[str, object]:
    """What ran: the level named on the command line, versions, GPUs, tests run and skipped."""
    meta = {k.lower(): v for k, v in diag.metadata}
    rm = _RUN_RE.search(text[:2000])
    return effective(
        run=rm.group(1) if rm else None,
        dcgm_version=diag.version,
        driver_version=meta.get("driver version detected"),
        gpu_device_ids=meta.get("gpu device ids detected"),
        tests_run=tuple(t.name for t in diag.tests if t.status != "skip"),
        tests_skipped=tuple(t.name for t in diag.tests if t.status == "skip"),
    )


@guarded(TOOL)
def parse(text: str) -> DcgmDiag:
    """Parse ``dcgmi diag`` output (JSON when a ``{`` starts a line, else the text table).

    dcgmi's own failure outputs (:data:`FAILURES`) give a record with ``failure`` set.

    Raises:
        ParseError: not dcgmi's output (no test row, no DCGM JSON, no failure line), invalid
            JSON, or JSON of another schema than DCGM's.
    """
    m = re.search(r"^\s*\{", text, re.M)
    diag = _parse_json(text, m.start() + (len(m.group(0)) - 1)) if m else _parse_text(text)
    failure = diag.failure or _failure(text, diag)
    if not diag.tests and failure is None and diag.layout == "text":
        raise not_tool_output(TOOL, "'| <test> | Pass/Fail/Warn/Skip |' rows or dcgmi -j JSON", text)
    return dataclasses.replace(diag, failure=failure, effective=_effective(text, diag))


def detect(text: str) -> bool:
    """True when ``text`` looks like dcgmi diag output."""
    head = text[:20000]
    if "DCGM GPU Diagnostic" in head or "DCGM Diagnostic" in head:
        return True
    if re.search(r"^\|\s*[\w/ .-]+\|\s*(Pass|Fail|Warn|Skip)\b", head, re.M):
        return True
    return any(FAILURES.match(ln) for ln in head.splitlines()[:10])
