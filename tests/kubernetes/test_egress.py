"""The TCP ranges a namespace keeps when some ports are closed to its pods."""

from __future__ import annotations

from components.kubernetes.egress import egress_without_tcp_ports, open_tcp_ranges


def test_one_closed_port_leaves_the_ranges_on_either_side() -> None:
    assert open_tcp_ranges((2049,)) == [(1, 2048), (2050, 65535)]


def test_adjacent_and_edge_ports_leave_no_empty_range() -> None:
    assert open_tcp_ranges((1, 2, 65535)) == [(3, 65534)]


def test_a_single_port_gap_is_a_port_not_a_range() -> None:
    ports = egress_without_tcp_ports((10, 12))["egress"][0]["ports"]
    assert {"protocol": "TCP", "port": 11} in ports
