"""The interfaces NCCL picks: predicted from recorded ``ip -j addr`` output with NCCL's rules,
and read from NCCL's own INFO lines; and the environment nvtest gives NCCL per node."""

from __future__ import annotations

import pytest

from nvtest.checks.config.network import (
    interfaces_from_ip_json,
    interfaces_from_log,
    judge_interfaces,
    nccl_interfaces,
    predict,
)
from nvtest.checks.health import Outcome
from nvtest.config.inventory import InventoryFile, build_inventory
from nvtest.config.loader import validate_model
from nvtest.errors import ConfigError
from nvtest.jobs.nccl import NcclRecipe, inventory_nccl_env, nccl_env
from nvtest.verdict import Verdict
from tests.checks.config.conftest import DESKTOP_IP, verdict_of
from tests.checks.config.fakesys import CONFIG_DATA

NETNS_IP = (CONFIG_DATA / "ip-d-j-addr-netns-virbr0-vnet0-veth-up.json").read_text()


def _log(name: str) -> str:
    return (CONFIG_DATA / name).read_text()


def test_ip_json_reader_keeps_running_state_addresses_and_link_kind():
    desk = {i.name: i for i in interfaces_from_ip_json(DESKTOP_IP)}
    assert desk["enp8s0"].running and desk["enp8s0"].addresses == ("10.0.0.6", "fd00::6", "fe80::6")
    assert not desk["docker0"].running and desk["docker0"].addresses == ("172.17.0.1",)
    assert desk["lo"].addresses == ("127.0.0.1",)  # ::1 left out as NCCL does
    ns = {i.name: i for i in interfaces_from_ip_json(NETNS_IP)}
    assert ns["virbr0"].kind == "bridge" and ns["vnet0"].kind == "veth" and ns["vnet0"].master == "virbr0"


def test_default_rules_on_the_desktop_pick_enp8s0_not_the_no_carrier_bridges():
    chosen, rule = predict(interfaces_from_ip_json(DESKTOP_IP), {})
    assert [i.name for i in chosen] == ["enp8s0"] and "'^docker,lo,virbr'" in rule


def test_default_rules_on_a_libvirt_host_pick_its_veths_and_fail():
    out = nccl_interfaces(NETNS_IP, "", {}, ["192.168.0.0/16"], None)
    assert verdict_of(out) == Verdict.FAIL
    assert [p["name"] for p in out.details["nccl_interfaces"]["predicted"]] == ["vnet0-peer", "vnet0"]
    assert "is a container or VM link (veth)" in out.failures[0] and "socket_ifname" in out.failures[0]


def test_exact_ifname_from_the_inventory_on_the_desktop():
    env = {"NCCL_SOCKET_IFNAME": "=enp8s0"}
    good = nccl_interfaces(DESKTOP_IP, "", env, ["10.0.0.0/24"], None)
    assert verdict_of(good) == Verdict.PASS, good.text()
    assert good.details["nccl_interfaces"]["effective_env"] == env
    outside = nccl_interfaces(DESKTOP_IP, "", env, ["10.10.0.0/16"], None)
    assert verdict_of(outside) == Verdict.FAIL and "outside the node's networks 10.10.0.0/16" in outside.text()
    nothing = nccl_interfaces(DESKTOP_IP, "", {"NCCL_SOCKET_IFNAME": "=eth0"}, ["10.0.0.0/24"], None)
    assert verdict_of(nothing) == Verdict.FAIL and "no usable interface" in nothing.text()
    # a prefix would match too, the exact form only the name
    assert [i.name for i in predict(interfaces_from_ip_json(DESKTOP_IP), {"NCCL_SOCKET_IFNAME": "enp"})[0]] == [
        "enp8s0"
    ]
    assert predict(interfaces_from_ip_json(DESKTOP_IP), {"NCCL_SOCKET_IFNAME": "=enp"})[0] == []


def test_no_networks_declared_warns_rather_than_passes():
    out = nccl_interfaces(DESKTOP_IP, "", {}, [], None)
    assert verdict_of(out) == Verdict.WARN and "declares no networks" in out.text()


def test_an_hca_the_node_lacks_fails_and_ip_that_cannot_report_errors():
    env = {"NCCL_IB_HCA": "=mlx5_0,mlx5_9"}
    out = nccl_interfaces(DESKTOP_IP, "", env, ["10.0.0.0/24"], ["mlx5_0", "mlx5_1"])
    assert verdict_of(out) == Verdict.FAIL and "names mlx5_9" in out.text()
    err = nccl_interfaces(None, "sh: 1: ip: not found", {}, [], None)
    assert verdict_of(err) == Verdict.ERROR and "ip: not found" in (err.error or "")


@pytest.mark.parametrize(
    ("log", "networks", "verdict", "words"),
    [
        ("nccl-info-bootstrap-ip6tnl0-veth0-nccl2.5.6.txt", ["2001:db8::/32"], Verdict.FAIL, "ip6tnl0"),
        (
            "nccl-info-bootstrap-eth0-docker-default-network-rccl2.17.txt",
            ["10.0.0.0/8"],
            Verdict.FAIL,
            "eth0 (172.17.0.2) is outside the node's networks 10.0.0.0/8",
        ),
        ("nccl-info-ifname-eth0-ib-hca-exact-roce-oob-nccl2.21.5.txt", ["10.244.0.0/16"], Verdict.PASS, ""),
    ],
)
def test_what_nccl_said_it_used(log, networks, verdict, words):
    uses = interfaces_from_log(_log(log))
    out = Outcome()
    judge_interfaces(out, uses, networks, "NCCL INFO lines")
    assert verdict_of(out) == verdict, out.text()
    assert words in out.text()


def test_log_reader_roles():
    uses = interfaces_from_log(_log("nccl-info-ifname-eth0-ib-hca-exact-roce-oob-nccl2.21.5.txt"))
    assert {(u.role, u.name, u.address) for u in uses} == {
        ("bootstrap", "eth0", "10.244.1.10"),
        ("oob", "eth0", "10.244.2.21"),
        ("oob", "eth0", "10.244.1.10"),
    }
    v6 = interfaces_from_log(_log("nccl-info-bootstrap-ip6tnl0-veth0-nccl2.5.6.txt"))
    assert [(u.role, u.name, u.address) for u in v6][:2] == [
        ("bootstrap", "ip6tnl0", "fe80::1"),
        ("bootstrap", "veth0", "2001:db8::600a"),
    ]


# -- the environment nvtest gives NCCL ------------------------------------------------------


def _inv():
    return build_inventory(
        InventoryFile.model_validate(
            {
                "defaults": {"networks": ["10.10.0.0/16"]},
                "nodes": [
                    {"names": "gpu[01-02]", "socket_ifname": "ens1f0", "ib_hca": "mlx5_0,mlx5_1"},
                    {"names": "gpu03", "socket_ifname": "=ens2f0"},
                ],
            }
        )
    )


def test_inventory_interfaces_become_exact_match_nccl_variables():
    n1, n2, n3 = _inv().nodes
    assert n1.networks == ("10.10.0.0/16",) and n3.socket_ifname == ("ens2f0",)
    assert inventory_nccl_env([n1]) == {"NCCL_SOCKET_IFNAME": "=ens1f0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}
    assert inventory_nccl_env([n1, n2, n3]) == {"NCCL_SOCKET_IFNAME": "=ens1f0,ens2f0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1"}


def test_the_node_setting_wins_over_the_controller_and_the_recipe():
    n1 = _inv().nodes[0]
    recipe = NcclRecipe.from_recipe({"env": {"NCCL_SOCKET_IFNAME": "eth", "NCCL_ALGO": "Ring"}})
    env = nccl_env(recipe, {"NCCL_SOCKET_IFNAME": "^docker", "NCCL_IB_HCA": "mlx5"}, nodes=[n1])
    assert env["NCCL_SOCKET_IFNAME"] == "=ens1f0" and env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    assert env["NCCL_ALGO"] == "Ring" and env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_SOCKET_IFNAME" not in inventory_nccl_env(
        build_inventory(InventoryFile.model_validate({"nodes": [{"names": "a"}]})).nodes
    )


def test_inventory_rejects_what_nccl_would_misread():
    for bad in ({"socket_ifname": "^docker"}, {"networks": ["10.0.0.0/33"]}):
        with pytest.raises(ConfigError):
            validate_model(InventoryFile, {"nodes": [{"names": "a", **bad}]}, path="inv.yaml", lines={})
