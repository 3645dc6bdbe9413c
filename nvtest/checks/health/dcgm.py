"""``dcgmi diag`` results: the worst of per-test status and error codes (field cases H9, G3).

Input: ``dcgmi diag -r LEVEL -j`` (or the text table) read by :mod:`nvtest.parsers.dcgmi`.

- a test that failed: fail, naming the GPUs;
- a test that passed with an error code attached (e.g. ``DCGM_FR_MEMORY_ALLOC``): error;
- a *required* test reporting Skip: error ("Skip is not Pass");
- a run with no test at all: error;
- on a SKU without NVLink, findings that only say an NVLink is down are dropped (G3);
- a warning: warn.

DCGM passing says nothing about NVLink (G2): the ``nvlink`` check judges links itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvtest.checks.health import Outcome
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers.dcgmi import DcgmDiag

__all__ = ["DCGM_ERROR_CODE", "DCGM_FAILED", "DCGM_SKIPPED", "dcgm_diag"]


#: The cause keys of a diag's findings: a test that failed; a test skipped that had to run, or
#: a diag that ran nothing but skips; a test that passed with an error code attached.
DCGM_FAILED = "dcgm:test_failed"
DCGM_SKIPPED = "dcgm:skipped"
DCGM_ERROR_CODE = "dcgm:error_code"


def _nvlink_only(texts: Sequence[str]) -> bool:
    return bool(texts) and all("nvlink" in t.lower() for t in texts)


def _skipped(diag: DcgmDiag) -> str:
    """Why a diag whose worst status is Skip is not judged: the skipped tests by name, and
    how many tests passed (a Deployment-only pass measured nothing of the GPUs)."""
    skipped = list(dict.fromkeys(t.name for t in diag.tests if t.status == "skip"))
    passed = [t.name for t in diag.tests if t.status == "pass"]
    names = ", ".join(skipped)
    if not passed:
        return f"every dcgmi test was skipped (Skip is not Pass): {names}"
    return (
        f"dcgmi skipped {len(skipped)} test(s) (Skip is not Pass): {names}; "
        f"only {len(passed)} test(s) ran and passed: {', '.join(passed)[:200]}"
    )


def dcgm_diag(diag: DcgmDiag, sku: SkuProfile | None, required: Sequence[str] = ()) -> Outcome:
    """Judge one dcgmi diag run; ``required`` are test names that must not be skipped."""
    out = Outcome()
    no_nvlink = bool(sku and sku.expect.nvlinks_per_gpu == 0)
    if not diag.tests:
        said = f": {diag.failure.reason}" if diag.failure else ""
        out.error = f"dcgmi diag reported no test{said}"
        out.cause = f"tool:{diag.failure.kind}" if diag.failure else None
        return out
    out.details["dcgm"] = {
        "layout": diag.layout,
        "version": diag.version,
        "tests": {t.name: t.status for t in diag.tests},
    }
    req = {r.lower() for r in required}
    for t in diag.tests:
        texts = list(t.warnings) + [w for r in t.results for w in r.warnings]
        if no_nvlink and t.status in ("fail", "warn") and _nvlink_only(texts):
            out.note(f"{t.name}: NVLink-down findings ignored on a SKU without NVLink")
            continue
        gpus = t.gpus_with("fail")
        on = f" on GPU {','.join(map(str, gpus))}" if gpus else ""
        first = f": {texts[0][:160]}" if texts else ""
        codes = sorted({c for r in t.results for c in r.error_ids})
        if t.status == "fail":
            out.fail(f"dcgmi {t.name} failed{on}{first}", DCGM_FAILED)
        elif t.status == "warn":
            out.warn(f"dcgmi {t.name} warning{first}")
        elif t.status == "skip" and t.name.lower() in req:
            out.error = f"required dcgmi test {t.name} skipped (is_allowed / not supported?)"
            out.cause = out.cause or DCGM_SKIPPED
        elif t.status == "pass" and codes:
            out.error = f"dcgmi {t.name} passed with error code(s) {codes}: not a pass"
            out.cause = out.cause or DCGM_ERROR_CODE
    if diag.status == "skip" and not out.failures:
        out.error = _skipped(diag)
        out.cause = out.cause or DCGM_SKIPPED
    if diag.failure is not None and not out.failures:
        out.error = f"dcgmi diag: {diag.failure.reason}"
        out.cause = f"tool:{diag.failure.kind}"
    return out
