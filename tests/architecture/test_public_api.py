"""The curated public surface: ``nvtest.__all__`` is exactly this list, every name
loads, and each has a docstring (httpx guards its exports the same way)."""

from __future__ import annotations

import subprocess
import sys

import nvtest

PUBLIC = [
    "CheckFailed",
    "CheckResult",
    "ConfigError",
    "Judge",
    "MetricResult",
    "NodeError",
    "NodeFacts",
    "NvtestError",
    "ParseError",
    "Probe",
    "ProbeError",
    "ProbeSkip",
    "TransportError",
    "Verdict",
    "__version__",
    "declare_metric",
    "detect",
    "load_results",
    "measure_probe",
    "parse",
    "parse_probe_json",
    "raw_output",
    "tool_names",
]


def test_all_is_the_curated_list() -> None:
    assert sorted(nvtest.__all__) == sorted(PUBLIC)


def test_every_public_name_loads_and_is_documented() -> None:
    for name in PUBLIC:
        obj = getattr(nvtest, name)
        if name != "__version__":
            assert getattr(obj, "__doc__", None), f"nvtest.{name} has no docstring"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        nvtest.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("nvtest.no_such_thing did not raise")


def test_import_nvtest_loads_no_layer() -> None:
    code = "import sys, nvtest; print(sorted(m for m in sys.modules if m.startswith('nvtest')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['nvtest']"
