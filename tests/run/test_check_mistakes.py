"""A check author's mistakes are errors that say what to fix: a metric the catalog does not
declare, one measured in another unit than declared, an exception the check's own code raised.
Each carries its cause key and the Playbook's diagnosis for it, never the generic 'rerun'."""

from __future__ import annotations

from pathlib import Path

from tests.run.test_judged_nothing import run_site_module

SITE = '''"""Site checks with an author's mistake each."""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, declare_metric

declare_metric("site_unit", "read_gbps", "GB/s", kind="bandwidth", bound="host_memory")


@pytest.mark.check("site_undeclared", area="config", title="A metric nobody declared")
def test_site_undeclared(node, judge: Judge) -> None:
    judge("write_gbps", 12.0, "GB/s")


@pytest.mark.check("site_unit", area="config", title="Bytes declared, bits measured")
def test_site_unit(node, judge: Judge) -> None:
    judge("read_gbps", 12.0, "Gb/s")


@pytest.mark.check("site_raises", area="config", title="A bug after a judgement")
def test_site_raises(node, judge: Judge) -> None:
    judge.passed("looked at the mounts")
    {}["mounts"]
'''


def test_a_check_authors_mistakes_carry_their_cause(tmp_path: Path) -> None:
    proc, by = run_site_module(tmp_path, SITE)
    assert proc.returncode == 1, proc.stdout[-1500:]
    expected = {
        "site_undeclared": ("metric:undeclared", "metric_undeclared", "metric not declared"),
        "site_unit": ("metric:unit", "metric_unit", "declared in GB/s"),
        "site_raises": ("check:raised", "check_raised", "check raised KeyError"),
    }
    for check, (cause, rule, words) in expected.items():
        r = by[check]
        assert r["verdict"] == "error" and words in r["reason"], r
        assert r["cause"] == cause and r["diagnosis"]["rule"] == rule, r
