"""Real network namespaces for tests: hosts on veth links to a bridge, and raetlike inside.

A :class:`Lab` makes N network namespaces ("hosts"), each with one interface
``eth0`` whose veth peer sits on a bridge in a hub namespace, and an address in
10.231.0.0/24.  Nothing is made in the root namespace: every ``ip`` command names
a lab namespace (``ip -n NS``), so no address, route or interface leaks out.  A
test can set a link's MTU, re-address a host, take its link down and up, and run
``python -m raetlike ...`` inside a host (``ip netns exec``), reading the output
from files in deadline loops.

Namespaces are named ``rlkt-<pid>-<hex>-<host>``: ``remove_stale`` deletes those
of processes no longer running (a crashed run), and :meth:`Lab.close` deletes the
lab's own on every exit path, after stopping what runs in them.

:func:`unavailable` says why no namespace can be made here (not root, no ``ip``,
refused by the kernel or a sandbox), for a one-line skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "rlkt-"
SUBNET = "10.231.0"
"""Every lab's hosts are SUBNET.1, .2, ... /24: private, and only inside the lab."""
SUBNET6 = "fd31:231::"
"""With ``ipv6=True`` hosts also get SUBNET6 + 1, 2, ... /64 (a unique local range)."""
IP_TIMEOUT = 10.0
POLL = 0.02


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message names it and what it said."""


def _ip(*args: str, check: bool = True) -> str:
    """Run ``ip ARGS``; its stdout (NetnsError with stderr when it fails and ``check``)."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT,
                          check=False)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


_why: list[str | None] = []


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (one line), or None when they can.

    Checked once per process: root, the ``ip`` command, and a probe namespace with
    a veth pair in it and a command run inside, made and removed.
    """
    if _why:
        return _why[0]
    reason: str | None = None
    if not sys.platform.startswith("linux"):
        reason = "network namespaces need Linux"
    elif os.geteuid() != 0:
        reason = "network namespaces need root (ip netns add)"
    elif shutil.which("ip") is None:
        reason = "no 'ip' command (iproute2)"
    else:
        remove_stale()
        probe = f"{PREFIX}{os.getpid()}-probe"
        try:
            _ip("netns", "add", probe)
            try:
                _ip("-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
                _ip("netns", "exec", probe, "true")  # (exec mounts /sys: a sandbox may refuse)
            finally:
                _ip("netns", "del", probe, check=False)
        except (NetnsError, OSError, subprocess.SubprocessError) as exc:
            reason = f"cannot make and enter a network namespace with a veth pair: {exc}"
    _why.append(reason)
    return reason


def ipv6_unavailable() -> str | None:
    """Why a lab cannot have IPv6 addresses here (one line), or None."""
    if not Path("/proc/net/if_inet6").exists():
        return "IPv6 is disabled in this kernel"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(namespace: str) -> None:
    """SIGKILL whatever still runs in ``namespace`` (only processes a lab started)."""
    for word in _ip("netns", "pids", namespace, check=False).split():
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(word), signal.SIGKILL)


def remove_stale() -> list[str]:
    """Delete lab namespaces (and lab directories, ``rlkt<pid>-*`` in the temporary
    directory) left by runs whose process is gone; returns the namespaces' names."""
    for directory in Path(tempfile.gettempdir()).glob("rlkt*-*"):
        owner = directory.name[len("rlkt"):].split("-", 1)[0]
        if directory.is_dir() and owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(directory, ignore_errors=True)
    removed = []
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].split("-", 1)[0]
        if owner.isdigit() and _alive(int(owner)):
            continue  # a run still going (this one, or another test process)
        _kill_inside(name)
        _ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


@dataclass
class Proc:
    """A process run inside a host; stdout and stderr go to files read in deadline loops."""

    label: str
    popen: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def wait_for(self, found: Callable[[str, str], Any], timeout: float, what: str) -> Any:
        """Poll until ``found(stdout, stderr)`` is truthy; its value.  AssertionError naming
        ``what`` (with the output) at the deadline, or when the process ends first."""
        deadline = time.monotonic() + timeout
        while True:
            out, err = self.stdout(), self.stderr()
            value = found(out, err)
            if value:
                return value
            if self.popen.poll() is not None:
                out, err = self.stdout(), self.stderr()
                value = found(out, err)
                if value:
                    return value
                raise AssertionError(f"{self.label} exited {self.popen.returncode} before "
                                     f"{what}:\n{out}\n{err[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.label}: no {what} in {timeout:g} s:\n{out}\n"
                                     f"{err[-4000:]}")
            time.sleep(POLL)

    def first_line(self, prefix: str, timeout: float = 20.0) -> str:
        """The rest of the first stdout line, which must start with ``prefix``."""
        def line(out: str, _err: str) -> str | None:
            if "\n" not in out:
                return None
            first = out.split("\n", 1)[0]
            assert first.startswith(prefix), f"{self.label}: {first!r}\n{self.stderr()}"
            return first.removeprefix(prefix)
        value: str = self.wait_for(line, timeout, f"first line {prefix!r}")
        return value

    def finish(self, timeout: float) -> int:
        """Wait for the process to end by itself (it is killed at the deadline)."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(f"{self.label} still running after {timeout:g} s:\n"
                                 f"{self.stdout()}\n{self.stderr()[-4000:]}") from None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then wait (SIGKILL past ``timeout``); the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def signal(self, signum: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signum)

    def stats_lines(self) -> list[dict[str, Any]]:
        """The JSON stats lines (``--stats-every``) on stderr so far."""
        lines = []
        for line in self.stderr().splitlines():
            if line.startswith('{"ts"'):
                with contextlib.suppress(ValueError):
                    lines.append(json.loads(line))
        return lines


@dataclass
class Host:
    """One namespace with ``eth0`` on the lab's bridge."""

    name: str
    namespace: str
    port: str
    """The veth peer's name on the hub's bridge."""
    address: str
    address6: str | None = None


@dataclass
class Lab:
    """Hosts in network namespaces on one bridge; see the module docstring."""

    names: tuple[str, ...]
    ipv6: bool = False
    run: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}")
    hosts: dict[str, Host] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix=f"rlkt{os.getpid()}-")))
    made: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        hub = self._namespace("hub")
        _ip("-n", hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", hub, "link", "set", "br0", "up")
        for number, name in enumerate(self.names, start=1):
            namespace = self._namespace(name)
            port = f"v{number}"
            _ip("-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", port,
                "netns", hub)
            _ip("-n", hub, "link", "set", port, "master", "br0")
            _ip("-n", hub, "link", "set", port, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            address = f"{SUBNET}.{number}"
            _ip("-n", namespace, "address", "add", f"{address}/24", "dev", "eth0")
            address6 = None
            if self.ipv6:  # usable at once: no duplicate address detection on a private bridge
                address6 = f"{SUBNET6}{number}"
                _ip("-n", namespace, "-6", "address", "add", f"{address6}/64", "dev", "eth0",
                    "nodad")
            self.hosts[name] = Host(name, namespace, port, address, address6)

    def _namespace(self, name: str) -> str:
        namespace = f"{self.run}-{name}"
        _ip("netns", "add", namespace)
        self.made.append(namespace)
        return namespace

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- links ---------------------------------------------------------------------------
    def address(self, host: str) -> str:
        return self.hosts[host].address

    def address6(self, host: str) -> str:
        address6 = self.hosts[host].address6
        assert address6 is not None, "a lab made with ipv6=True"
        return address6

    def set_mtu(self, host: str, mtu: int) -> None:
        """The MTU of ``host``'s link, both ends (its eth0 and its port on the bridge)."""
        entry = self.hosts[host]
        _ip("-n", entry.namespace, "link", "set", "eth0", "mtu", str(mtu))
        _ip("-n", self._hub, "link", "set", entry.port, "mtu", str(mtu))

    def readdress(self, host: str, address: str) -> None:
        """Give ``host`` a new address in the subnet (the old one goes first, as a new lease)."""
        entry = self.hosts[host]
        _ip("-n", entry.namespace, "address", "del", f"{entry.address}/24", "dev", "eth0")
        _ip("-n", entry.namespace, "address", "add", f"{address}/24", "dev", "eth0")
        entry.address = address

    def link_down(self, host: str) -> None:
        """Unplug ``host``'s cable at the bridge: nothing passes either way."""
        _ip("-n", self._hub, "link", "set", self.hosts[host].port, "down")

    def link_up(self, host: str) -> None:
        _ip("-n", self._hub, "link", "set", self.hosts[host].port, "up")

    @property
    def _hub(self) -> str:
        return f"{self.run}-hub"

    def snmp(self, host: str) -> dict[str, int]:
        """The IP counters of ``host``'s namespace: IPv4's ``Ip:`` rows of /proc/net/snmp
        (``FragCreates``, ...) and IPv6's of /proc/net/snmp6 (``Ip6FragCreates``, ...)."""
        done = self.tool(host, "cat", "/proc/net/snmp", "/proc/net/snmp6")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        rows = [line.split() for line in lines if line.startswith("Ip:")]
        counters = {key: int(value) for key, value in zip(rows[0][1:], rows[1][1:], strict=True)}
        for line in lines:
            words = line.split()
            if len(words) == 2 and words[0].startswith("Ip6") and words[1].isdigit():
                counters[words[0]] = int(words[1])
        return counters

    # -- processes -----------------------------------------------------------------------
    def spawn(self, host: str, label: str, *args: str) -> Proc:
        """Run ``python -m raetlike ARGS`` (the project's own interpreter) inside ``host``."""
        out, err = self.base / f"{label}.out", self.base / f"{label}.err"
        return self.exec(host, label, [sys.executable, "-m", "raetlike", *args], out, err)

    def exec(self, host: str, label: str, command: list[str], out: Path, err: Path) -> Proc:
        """Run ``command`` inside ``host``, its output in the files ``out`` and ``err``."""
        with out.open("wb") as stdout, err.open("wb") as stderr:
            popen = subprocess.Popen(
                ["ip", "netns", "exec", self.hosts[host].namespace, *command],
                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)})
        proc = Proc(label, popen, out, err)
        self.procs.append(proc)
        return proc

    def tool(self, host: str, *command: str,
             timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run a short system command inside ``host`` and wait for it."""
        return subprocess.run(["ip", "netns", "exec", self.hosts[host].namespace, *command],
                              capture_output=True, text=True, timeout=timeout, check=False)

    # -- the end -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every process, delete every namespace of the lab, remove its files."""
        for proc in self.procs:
            proc.stop(timeout=5.0)
        for namespace in reversed(self.made):
            _kill_inside(namespace)
            _ip("netns", "del", namespace, check=False)
        self.made.clear()
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def lab(*names: str, ipv6: bool = False) -> Iterator[Lab]:
    """A :class:`Lab` of hosts ``names``, closed however the block ends."""
    made = Lab(tuple(names), ipv6=ipv6)
    try:
        yield made
    finally:
        made.close()
