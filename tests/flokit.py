"""Plans for the flo tests: the docs/examples plans with free ports or a private directory."""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["EXAMPLES", "free_udp_ports", "lane_plan", "road_plan"]

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


def free_udp_ports(count: int) -> list[int]:
    """Ports the kernel just handed out on 127.0.0.1 (held until all are chosen)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def road_plan(tmp_path: Path, master_port: int, minion_port: int) -> Path:
    text = (EXAMPLES / "road.flo").read_text()
    assert "7530" in text
    assert "7531" in text
    text = text.replace("7530", str(master_port)).replace("7531", str(minion_port))
    plan = tmp_path / "road.flo"
    plan.write_text(text)
    return plan


def lane_plan(tmp_path: Path) -> tuple[Path, Path]:
    directory = tmp_path / "lanes"
    text = (EXAMPLES / "lane.flo").read_text()
    assert '"/tmp/raetlike/flo"' in text
    plan = tmp_path / "lane.flo"
    plan.write_text(text.replace('"/tmp/raetlike/flo"', f'"{directory}"'))
    return plan, directory
