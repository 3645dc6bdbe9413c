"""The Xid catalog and the public surface of nvtest.parsers."""

from __future__ import annotations

import json

import pytest

import nvtest.parsers as P
from nvtest.errors import ParseError
from nvtest.playbook import XID_CATALOG, describe_xid, is_hardware_fault, lookup_xid

REQUIRED = [
    13,
    31,
    32,
    43,
    45,
    48,
    61,
    62,
    63,
    64,
    68,
    69,
    73,
    74,
    79,
    92,
    94,
    95,
    109,
    119,
    120,
    121,
    122,
    123,
    124,
    140,
    143,
    *range(144, 151),
]


@pytest.mark.parametrize("code", REQUIRED)
def test_catalog_covers_code(code):
    info = lookup_xid(code)
    assert info is not None and info.code == code and info.known
    assert info.severity in ("fatal", "error", "warning", "info") and info.action and "NVIDIA" in info.source


def test_catalog_facts():
    assert lookup_xid(79).severity == "fatal" and is_hardware_fault(79) and is_hardware_fault(48)
    assert not is_hardware_fault(13) and not is_hardware_fault(31)
    assert is_hardware_fault(100) and lookup_xid(100).resolution == "RESTART_APP"  # from NVIDIA's catalog
    assert not describe_xid(9999).known and describe_xid(9999).severity == "error"
    assert all(v.hardware == is_hardware_fault(k) for k, v in XID_CATALOG.items())


def test_public_surface():
    assert set(P.__all__) == {
        "PARSERS",
        "FailureKind",
        "ParseError",
        "ParserInfo",
        "ToolFailure",
        "ValueState",
        "detect",
        "parse",
        "readable",
        "to_jsonable",
        "tool_names",
    }
    assert len(P.PARSERS) == 18
    for name, info in P.PARSERS.items():
        assert info.name == name and info.description and "\n" not in info.description


def test_unknown_tool_raises_parse_error():
    with pytest.raises(ParseError, match="unknown tool"):
        P.parse("nope", "x")


def test_to_jsonable_enums_and_tuples():
    rec = P.parse("nvidia-smi-csv", "index, fan.speed [%]\n0, [N/A]\n")
    doc = P.to_jsonable(rec)
    assert doc["rows"][0]["values"] == [0.0, "N/A"] and isinstance(doc["columns"], list)
    json.dumps(doc)
