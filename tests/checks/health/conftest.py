"""Helpers for the health tests: corpus text, SKU profiles, a Judge-backed verdict."""

from __future__ import annotations

from nvtest.checks.api import Judge, ProbeSkip
from nvtest.checks.health import Outcome, apply
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError
from nvtest.verdict import Verdict
from tests.conftest import CORPUS


def corpus(rel: str) -> str:
    return (CORPUS / rel).read_text(encoding="utf-8")


def judged(outcome: Outcome, sku: SkuProfile | None, check: str = "health") -> Verdict:
    """The item verdict the plugin would give: findings and metric thresholds together."""
    j = Judge(None, check, "node001", sku)
    try:
        apply(outcome, j)
    except ProbeSkip:
        return Verdict.SKIP
    except ProbeError:
        return Verdict.ERROR
    return j.verdict
