"""Host names in HOST:PORT are looked up once (getaddrinfo), and a name that
does not resolve is a one-line error at once, before anything is created."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from raetlike import aio
from raetlike.errors import AddressError
from raetlike.udp import resolve
from tests.test_cli import Estate, _run

TIMEOUT = 20.0
NOWHERE = "nosuchhost.invalid"  # RFC 6761: .invalid never resolves


def _port(address: str) -> str:
    return address.rpartition(":")[2]


def test_resolve_gives_a_numeric_address_for_the_socket_family() -> None:
    assert resolve(("localhost", 7530)) == ("127.0.0.1", 7530)
    assert resolve(("localhost", 7530), socket.AF_INET) == ("127.0.0.1", 7530)
    host, port = resolve(("localhost", 7530), socket.AF_INET6)
    assert port == 7530
    assert host in {"::1", "::ffff:127.0.0.1"}
    assert resolve(("::1", 1), socket.AF_INET6) == ("::1", 1)
    with pytest.raises(AddressError, match="only IPv6 addresses"):
        resolve(("::1", 1), socket.AF_INET)
    with pytest.raises(AddressError, match=f"cannot resolve host '{NOWHERE}'"):
        resolve((NOWHERE, 1))


def test_ping_localhost_joins_and_gets_every_echo(tmp_path: Path) -> None:
    main = Estate(tmp_path, "main", "--main", "--echo", "--auto", "once",
                  "--keep", str(tmp_path / "keep"))
    try:
        result = _run("ping", f"localhost:{_port(main.address)}", "--count", "20", "--json",
                      "--timeout", str(TIMEOUT))
        assert result.returncode == 0, result.stderr
        figures = json.loads(result.stdout)
        assert figures["echoed"] == 20
        assert figures["remote"] == "main"
        assert "immutable" not in main.log.read_text()
    finally:
        main.stop()


def test_an_estate_joins_localhost(tmp_path: Path) -> None:
    main = Estate(tmp_path, "main", "--main", "--auto", "once", "--keep", str(tmp_path / "keep"))
    try:
        minion = Estate(tmp_path, "minion", "--join", f"localhost:{_port(main.address)}",
                        "--keep", str(tmp_path / "keep"))
        try:
            assert minion.wait_for_log("estate minion: allowed main", TIMEOUT), \
                minion.log.read_text()
            assert "immutable" not in main.log.read_text()
        finally:
            minion.stop()
    finally:
        main.stop()


def test_an_unresolvable_join_is_a_usage_error_at_once_and_creates_nothing(
    tmp_path: Path,
) -> None:
    keep = tmp_path / "keep"
    started = time.monotonic()
    result = _run("estate", "minion", "--port", "0", "--keep", str(keep),
                  "--join", f"{NOWHERE}:7530")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"raetlike estate: error: --join {NOWHERE}:7530: cannot resolve host")
    assert time.monotonic() - started < 15  # at once: no join attempts, no timeout
    assert not keep.exists()


def test_an_unresolvable_ping_target_is_one_line_and_one_json_object() -> None:
    result = _run("ping", f"{NOWHERE}:7530", "--json")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"raetlike ping: error: HOST:PORT {NOWHERE}:7530: cannot resolve")
    answer = json.loads(result.stdout)
    assert answer["ok"] is False
    assert NOWHERE in answer["error"]


@pytest.mark.asyncio
async def test_aio_joins_a_host_name_and_refuses_one_that_does_not_resolve() -> None:
    async with aio.Estate("main", main=True, auto="once") as main, aio.Estate("minion") as minion:
        assert await minion.join(("localhost", main.address[1]), timeout=TIMEOUT) == "main"
        with pytest.raises(AddressError, match="cannot resolve"):
            await minion.join((NOWHERE, main.address[1]), timeout=TIMEOUT)
