"""ib_ports judges active_mtu (issue 24): one HCA at 1024 where the SKU expects 4096, or where
the node's other HCAs and the fleet run 4096, fails naming the HCA and ibv_devinfo's line.
The output is the recorded ibv_devinfo of one NDR HCA, its port made active and the HCA
repeated as it would be printed for a second one."""

from __future__ import annotations

from nvtest.checks.interconnect.rdma import mtu_lines, mtu_problems
from nvtest.config.skus import load_catalog
from nvtest.parsers import ibv_devinfo
from tests.conftest import CORPUS

ONE = (CORPUS / "ibstat/ibv_devinfo-port-down-lid-65535-one-hca.txt").read_text()


def _node(mtu_1: str = "4096 (5)", layer: str = "InfiniBand") -> str:
    """Two active HCAs, mlx5_0 at 4096 and mlx5_1 at ``mtu_1``."""
    body = ONE.split("\n", 1)[1].replace("PORT_DOWN (1)", "PORT_ACTIVE (4)").replace("65535", "7")
    second = body.replace("mlx5_0", "mlx5_1").replace(
        "active_mtu:             4096 (5)", f"active_mtu:             {mtu_1}"
    )
    return ONE.split("\n", 1)[0] + "\n" + (body + second).replace("InfiniBand\n", f"{layer}\n")


def _problems(text: str, expected: int | None, fleet: int | None = None) -> list[str]:
    return mtu_problems(ibv_devinfo.parse(text), text, expected, fleet)


def test_the_ib_skus_expect_4096():
    cat = load_catalog()
    for name in ("h100-sxm-80gb", "h200-sxm-141gb", "b200-hgx-180gb", "a100-sxm-80gb", "gb200-nvl72-tray"):
        assert cat.get(name).expect.ib_mtu == 4096, name


def test_one_hca_below_the_skus_mtu_fails_naming_it_and_the_line():
    text = _node("1024 (3)")
    (p,) = _problems(text, 4096)
    no, line = mtu_lines(text)[("mlx5_1", 1)]
    assert (
        p == f"mlx5_1 port 1: active_mtu 1024, the SKU expects 4096 (expect.ib_mtu): '{line}' (ibv_devinfo line {no})"
    )
    assert line == "active_mtu:             1024 (3)" and text.splitlines()[no - 1].strip() == line


def test_without_an_expected_mtu_the_node_and_the_fleet_must_agree():
    (p,) = _problems(_node("1024 (3)"), None, 4096)
    assert p.startswith("mlx5_1 port 1: active_mtu 1024, the fleet's majority is 4096")
    # a node whose HCAs all run 2048 in a fleet at 4096: both named
    both = _node("2048 (4)").replace(
        "4096 (5)\n                        sm_lid", "2048 (4)\n                        sm_lid"
    )
    assert len(_problems(both, None, 4096)) == 2


def test_roce_ports_follow_the_fleet_not_the_ib_figure():
    """RoCE's MTU follows the netdev's: a fleet at 1024 (netdev 1500) passes, one port off it fails."""
    same = _node("1024 (3)", layer="Ethernet").replace(
        "4096 (5)\n                        sm_lid", "1024 (3)\n                        sm_lid"
    )
    assert _problems(same, 4096, None) == []
    (p,) = _problems(_node("1024 (3)", layer="Ethernet"), 4096, None)
    assert p.startswith("mlx5_1 port 1: active_mtu 1024, the node's other Ethernet HCAs run 4096: "), p


def test_uniform_at_the_expected_mtu_passes():
    assert _problems(_node(), 4096) == []


def _devinfo_h100(low: str | None) -> str:
    """ibv_devinfo of the stand-in H100 node (its ibstat's eight NDR HCAs), the HCA ``low`` at
    active_mtu 1024."""
    body = ONE.split("\n", 1)[1].replace("PORT_DOWN (1)", "PORT_ACTIVE (4)").replace("65535", "7")
    at_1024 = ("4096 (5)\n                        sm_lid", "1024 (3)\n                        sm_lid")
    blocks = [body.replace("mlx5_0", f"mlx5_{i}") for i in range(8)]
    return "".join(b.replace(*at_1024) if f"hca_id: {low}\n" in b else b for b in blocks)


def test_ib_ports_on_a_standin_h100_fails_the_hca_at_1024_naming_its_line(tmp_path):
    """``nvtest run`` of ib_ports on the stand-in H100 node with ibv_devinfo on PATH."""
    import json

    from nvtest.testing.standin import Recording
    from nvtest.testing.standin_nodes import install
    from tests.conftest import run_nvtest

    (tmp_path / "s.yaml").write_text("name: ib\ndescription: ib_ports\nchecks:\n  - interconnect/test_ib.py\n")
    verdicts = {}
    for low in (None, "mlx5_4"):
        tools = install("h100_healthy", tmp_path / f"bin-{low}")
        tools.add("ibv_devinfo", Recording(stdout=_devinfo_h100(low)))
        out = tmp_path / f"r-{low}"
        proc = run_nvtest(
            "run",
            "--suite",
            str(tmp_path / "s.yaml"),
            "-k",
            "ib_ports",
            "--out",
            str(out),
            "--progress",
            "none",
            env={"PATH": tools.path_prefix(), "OMP_NUM_THREADS": "1"},
            timeout=300,
        )
        doc = json.loads((out / "latest" / "results.json").read_text())
        verdicts[low] = next(r for r in doc["results"] if r["check"] == "ib_ports"), proc
    ok, bad = verdicts[None][0], verdicts["mlx5_4"][0]
    assert ok["verdict"] == "pass", ok["reason"]
    assert ok["details"]["active_mtu"]["mlx5_7/1"] == 4096
    assert bad["verdict"] == "fail"
    assert (
        "mlx5_4 port 1: active_mtu 1024, the SKU expects 4096 (expect.ib_mtu): 'active_mtu:             1024 (3)' (ibv_devinfo line"
        in bad["reason"]
    )
