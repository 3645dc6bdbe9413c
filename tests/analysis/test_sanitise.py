"""The evidence sanitiser: identifying values become stable placeholders, everything else stays,
every corpus sample still parses as it did, and a whole directory is rewritten consistently."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from nvtest.analysis.sanitise import Sanitiser
from nvtest.parsers import detect, parse, to_jsonable
from tests.parsers.conftest import corpus_files

HOST = "gpu-a17-03.cluster.example.com"

SYNTHETIC = """\
    Serial Number                         : 1654922000123
    GPU UUID                              : GPU-5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a
    GPU PDI                               : 0x8ad5b7c3e1f0a129
    Board Part Number                     : 692-2G520-0200-000
    Bus Id                                : 00000000:1B:00.0
        ClusterUUID                       : 8f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b
Node GUID: 0x1070fd0300123456
        node_guid:                      1070:fd03:0012:3456
        GID[  0]:               fe80:0000:0000:0000:1070:fd03:0012:3456
        GID[  1]:               0000:0000:0000:0000:0000:ffff:ac14:0307, RoCE v2
    link/ether b8:59:9f:12:34:56 brd ff:ff:ff:ff:ff:ff
\tCapabilities: [140 v1] Device Serial Number b8-59-9f-03-00-12-34-56
\t\t\t[SN] Serial number: MT2232X12345
\t\t\t[V3] Vendor specific: 6a38a0f31b86ed11800010701fa7a2d0
\t\t\t[PN] Part number: MCX755106AS-HEAT
inet 172.20.3.7/24 brd 172.20.3.255 scope global eth0
MLNX_OFED_LINUX-24.04-0.7.0.0 VBIOS 96.00.74.00.01 time 10:53:12 2026-12-01T10:53:19
gpu-a17-03 says hi; gpu-a17-03.cluster.example.com; gpu-a17-030 is another; /home/alice/x /tmp/.scratch/home/.cache
<serial>1654922000456</serial><uuid>GPU-11111111-2222-3333-4444-555555555555</uuid>
fe80::1270:fdff:fe03:3456 and ::1 and std::vector and 2001:db8::5 and 2a00:1450:4001:81b::200e
name, serial, uuid, pci.bus_id
NVIDIA H200, 1654922000789, GPU-5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a, 00000000:1B:00.0
clocks_throttle_reasons.active 0x0000000000000004 127.0.0.1 0.0.0.0 255.255.255.0
"""

IDENTIFYING = (
    "1654922000123",
    "5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a",
    "8ad5b7c3e1f0a129",
    "8f1e2d3c-4b5a",
    "1070fd0300123456",
    "1070:fd03:0012:3456",
    "ac14:0307",
    "b8:59:9f:12:34:56",
    "b8-59-9f-03-00-12-34-56",
    "MT2232X12345",
    "6a38a0f31b86ed11800010701fa7a2d0",
    "172.20.3.7",
    "172.20.3.255",
    "gpu-a17-03 ",
    "cluster.example.com",
    "alice",
    "1654922000456",
    "11111111-2222",
    "1270:fdff",
    "2a00:1450",
    "1654922000789",
)
KEPT = (
    "692-2G520-0200-000",
    "00000000:1B:00.0",
    "MCX755106AS-HEAT",
    "MLNX_OFED_LINUX-24.04-0.7.0.0",
    "96.00.74.00.01",
    "10:53:12",
    "2026-12-01T10:53:19",
    "ff:ff:ff:ff:ff:ff",
    "::1 ",
    "std::vector",
    "2001:db8::5",
    "gpu-a17-030",
    "0x0000000000000004",
    "127.0.0.1",
    "0.0.0.0",
    "255.255.255.0",
    "/tmp/.scratch/home/.cache",
    "[SN] Serial number: ",
    "RoCE v2",
)


def test_identifying_values_are_replaced_and_the_rest_kept() -> None:
    s = Sanitiser([HOST])
    out = s.text(SYNTHETIC)
    for value in IDENTIFYING:
        assert value not in out, value
    for value in KEPT:
        assert value in out, value
    assert "GPU-00000000-0000-0000-0000-000000000001" in out
    assert "node001 says hi; node001;" in out and "/home/user/x" in out
    assert "192.0.2.1/24" in out
    # the RoCE GID ac14:0307 is 172.20.3.7: one address in two spellings
    assert s.counts() == {
        "uuid": 3,
        "guid": 3,
        "ipv4": 2,
        "ipv6": 1,
        "hwaddr": 2,
        "serial": 5,
        "hostname": 1,
        "user": 1,
    }


def test_placeholders_keep_length_so_columns_stay_aligned() -> None:
    out = Sanitiser([HOST]).text(SYNTHETIC)
    for before, after in zip(SYNTHETIC.splitlines(), out.splitlines(), strict=True):
        if re.search(r"Serial|UUID|GUID|guid|PDI|GID|link/ether|\[V3\]", before):
            assert len(after) == len(before), (before, after)


def test_the_same_value_gets_the_same_placeholder_and_a_second_pass_changes_nothing() -> None:
    s = Sanitiser([HOST])
    out = s.text(SYNTHETIC)
    # the same UUID in the -q block and in the CSV row; the same GUID as 0x, colon and GID
    assert out.count("GPU-00000000-0000-0000-0000-000000000001") == 2
    n = int(re.search(r"Node GUID: 0x(0{15}\d)", out).group(1), 16)  # numbered in order of appearance
    assert f"node_guid:                      0000:0000:0000:{n:04x}" in out
    assert f"fe80:0000:0000:0000:0000:0000:0000:{n:04x}" in out
    assert s.text(out) == out
    assert Sanitiser([HOST]).text(out) == out


def test_json_keys_values_and_serial_keys(tmp_path: Path) -> None:
    doc = {
        "nodes": {"gpu-a17-03": {"host": "gpu-a17-03", "serial": "PKMF1234A"}},
        "raw": "Node GUID: 0x1070fd0300123456\n",
        "n": 1.5,
        "none": None,
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    assert Sanitiser([HOST]).file(path) == "changed"
    back = json.loads(path.read_text())
    assert back == {
        "nodes": {"node001": {"host": "node001", "serial": "000000001"}},
        "raw": "Node GUID: 0x0000000000000001\n",
        "n": 1.5,
        "none": None,
    }


def test_a_tree_is_sanitised_renamed_and_stripped_of_what_cannot_be_read(tmp_path: Path) -> None:
    root = tmp_path / "out"
    logs = root / "runs" / "r1" / "logs" / "gpu-a17-03"
    logs.mkdir(parents=True)
    (logs / "gemm.log").write_text("host gpu-a17-03 GPU-5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a\n")
    (root / "capture.txt").write_text("GPU UUID : GPU-5e1c2d3a-9b8f-4c7d-a6e5-1f2e3d4c5b6a\n")
    (root / "events.jsonl").write_text('{"node": "gpu-a17-03"}\nnot json gpu-a17-03\n')
    (root / "results.parquet").write_bytes(b"PAR1\x00\x01gpu-a17-03")
    (root / "latest").symlink_to("runs")
    (root / "odd.txt").write_bytes(b"caf\xe9 gpu-a17-03\n")  # not UTF-8: bytes kept, name replaced
    report = Sanitiser([HOST]).tree(root)
    assert (
        root / "runs/r1/logs/node001/gemm.log"
    ).read_text() == "host node001 GPU-00000000-0000-0000-0000-000000000001\n"
    assert (root / "capture.txt").read_text() == "GPU UUID : GPU-00000000-0000-0000-0000-000000000001\n"
    assert (root / "events.jsonl").read_text() == '{"node": "node001"}\nnot json node001\n'
    assert (root / "odd.txt").read_bytes() == b"caf\xe9 node001\n"
    assert not (root / "results.parquet").exists() and not (root / "latest").exists()
    assert {r["path"] for r in report.removed} == {"results.parquet", "latest"}
    assert report.renamed == ["runs/r1/logs/node001"]
    assert report.replaced == {"hostname": 1, "uuid": 1}
    assert "gpu-a17" not in json.dumps(report.as_dict())
    leftovers = [p for p in root.rglob("*") if p.is_file() and b"gpu-a17" in p.read_bytes()]
    assert leftovers == []


def test_short_and_local_names_are_not_hostnames() -> None:
    s = Sanitiser(["localhost", "a", "x.example.com"])
    assert s.text("localhost a b x") == "localhost a b x"  # 'x' (one letter) kept, FQDN form absent
    assert s.text("x.example.com up") == "node001 up"  # the FQDN is still replaced


# ------------------------------------------------------------------ every corpus sample

_RNG = random.Random(19)


def _hex(n: int) -> str:
    return "".join(_RNG.choice("0123456789abcdef") for _ in range(n))


def _inject(text: str) -> tuple[str, list[str], list[str]]:
    """The corpus text with its placeholders replaced by realistic identifying values; the
    values injected and the host names used."""
    injected: list[str] = []
    hosts: list[str] = []

    def put(value: str) -> str:
        injected.append(value)
        return value

    names: dict[int, str] = {}

    def host(m: re.Match[str]) -> str:  # one host keeps one name throughout the text
        number = int(m.group(1))
        if number not in names:
            names[number] = f"gpu-b{number:02d}-{_RNG.randrange(10, 99)}"
            hosts.append(names[number])
        return put(names[number])

    text = re.sub(
        r"GPU-00000000-0000-0000-0000-0000000000\d\d",
        lambda m: "GPU-" + put(f"{_hex(8)}-{_hex(4)}-{_hex(4)}-{_hex(4)}-{_hex(12)}"),
        text,
    )
    text = re.sub(r"0x000000000000000\d", lambda m: "0x" + put("1070fd03" + _hex(8)), text)
    text = re.sub(r"0000:0000:0000:000\d", lambda m: put(f"1070:fd03:{_hex(4)}:{_hex(4)}"), text)
    text = re.sub(
        r"(?m)(Serial Number\s*:\s*|<serial>)0{8,}",
        lambda m: m.group(1) + put("".join(_RNG.choice("0123456789") for _ in range(13))),
        text,
    )
    text = re.sub(r"\b10\.0\.0\.(\d+)\b", lambda m: put(f"172.20.{_RNG.randrange(1, 250)}.{m.group(1)}"), text)
    text = re.sub(r"\bnode0*(\d+)\b", host, text)
    return text, injected, hosts


def _masked(value: Any) -> Any:
    """A parsed record with identifier shapes masked (placeholders of either numbering)."""
    if isinstance(value, dict):
        return {_masked(k): _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if isinstance(value, str):
        value = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", value)
        value = re.sub(r"0x[0-9a-f]{16}", "<guid>", value)
        value = re.sub(r"\b[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}\b", "<guid>", value)
        value = re.sub(r"\b(?:gpu-b\d\d-\d\d|node\d+)\b", "<host>", value)
        value = re.sub(r"\b(?:10\.0\.0|172\.20\.\d+|192\.0\.2)\.\d+\b", "<ip>", value)
        value = re.sub(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.])", "<ip>", value)  # a server in a log line
        value = re.sub(r"\b\d{13}\b", "<serial>", value)
    return value


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_corpus_sample_parses_alike_after_sanitising(path: Path) -> None:
    """The class rule: a sanitised capture is still the tool's output. Identifying values put
    into the sample are gone, and its parse equals the original's but for identifiers."""
    original = path.read_text(encoding="utf-8")
    tool = detect(original)
    assert tool is not None
    text, injected, hosts = _inject(original)
    s = Sanitiser(hosts)
    clean = s.text(text)
    for value in injected:
        assert value not in clean, value
    assert s.text(clean) == clean
    assert detect(clean) == tool
    assert _masked(to_jsonable(parse(tool, clean))) == _masked(to_jsonable(parse(tool, original)))


def test_an_address_given_as_a_name_is_replaced_whole_and_numbers_stay() -> None:
    """An inventory ``address`` (``10.0.0.5``, ``fd00::10:5``) handed over with the host names is
    an address, never a name: ``10`` is not the node's alias; a name is a whole word only."""
    s = Sanitiser(["10.0.0.5", "fd00::10:5", "[fd00::7]", "gpu1", "10.0.0", "gpu1.example.com"])
    text = (
        '{"reps": 10, "size": 0, "peer": "10.0.0.5"} -r 10 -n 5 10.0.0.50 10.0.0.5:22 100.0.0.5\n'
        "fd00::10:5 fd00::10:50 gpu1 gpu10 gpu1x gpu1.example.com 10.0.0.5\n"
    )
    out = s.text(text)
    assert out == (
        '{"reps": 10, "size": 0, "peer": "192.0.2.1"} -r 10 -n 5 192.0.2.2 192.0.2.1:22 192.0.2.3\n'
        "2001:db8::1 2001:db8::2 node001 gpu10 gpu1x node001 192.0.2.1\n"
    )
    assert s.counts() == {"ipv4": 3, "ipv6": 2, "hostname": 1}


def test_a_file_is_sanitised_a_line_at_a_time_as_text_is(tmp_path: Path) -> None:
    """``file`` streams (one line in memory) and gives what ``text`` gives, CSV serial columns
    across lines included."""
    path = tmp_path / "x.log"
    path.write_text(SYNTHETIC * 3)
    assert Sanitiser([HOST]).file(path) == "changed"
    assert path.read_text() == Sanitiser([HOST]).text(SYNTHETIC * 3)
    assert [p.name for p in tmp_path.iterdir()] == ["x.log"]
