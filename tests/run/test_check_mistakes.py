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


DECLARED = '''"""A site check that declares the metric it judges."""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, declare_metric

declare_metric("site_scratch", "scratch_free_gib", "GiB", kind="capacity", bound="non_negative")


@pytest.mark.check("site_scratch", area="config", title="Free scratch space")
def test_site_scratch(node, judge: Judge) -> None:
    judge("scratch_free_gib", 12.5, "GiB")
'''


def test_a_site_checks_declared_metric_is_judged_again_by_evaluate(tmp_path: Path) -> None:
    """The run records the site's declaration (checks.<name>.declared_metrics); nvtest evaluate,
    which never imports the module, judges the metric again as declared, not 'not declared'."""
    from nvtest.analysis.reevaluate import evaluate_run

    proc, by = run_site_module(tmp_path, DECLARED)
    assert proc.returncode == 0 and by["site_scratch"]["verdict"] == "pass", proc.stdout[-1500:]
    run_dir = (tmp_path / "reports" / "latest").resolve()
    _, doc = evaluate_run(run_dir, out=tmp_path / "evaluated")
    assert doc["checks"]["site_scratch"]["declared_metrics"][0]["unit"] == "GiB"
    again = next(r for r in doc["results"] if r["check"] == "site_scratch")
    assert again["verdict"] == "pass", again
