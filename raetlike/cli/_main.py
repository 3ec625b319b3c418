"""The ``raetlike`` command line: ``estate``, ``yard``, ``ping``, ``keys`` and ``demo``.

Exit codes: 0 success, 1 failure (with a one-line reason on stderr), 2 usage
error (one line naming the bad argument).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from lane.yard import check_name as check_lane_name
from raetlike import __version__
from raetlike.cli.estate import EstateOptions, default_keep_dir, run_estate
from raetlike.cli.keys import run_keys
from raetlike.cli.ping import (
    DEFAULT_COUNT,
    DEFAULT_SIZE,
    DEFAULT_TIMEOUT,
    DEFAULT_WINDOW,
    PingError,
    ping,
    ping_yard,
)
from raetlike.durable import DurableConfig
from raetlike.errors import AddressError, RaetError
from raetlike.journal import FsyncPolicy
from raetlike.logs import FORMATS, setup_logging
from raetlike.multimain import DEFAULT_MODE, MultiConfig, MultiMode
from raetlike.names import InvalidNameError, name_problem, quoted_name
from raetlike.udp import Address, family_of, parse_host_port, resolve
from raetlike.wire.kinds import AutoMode

__all__ = ["main", "build_parser"]

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: not a number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port}: must be 0..65535")
    return port


def _host_port(text: str) -> Address:
    try:
        host, port = parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if port == 0:
        raise argparse.ArgumentTypeError(f"port 0 in {text!r}: give the port it listens on")
    return host, port


DAY = 86_400.0
"""The longest presence period or keepalive interval the command line takes (a longer
one is a typo: a link silent 3 of them would never be noticed lost)."""


def _positive(kind: type[int] | type[float], least: float, most: float = math.inf) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if value < least:
            raise argparse.ArgumentTypeError(f"{text} is too small (at least {least:g})")
        if value > most:
            raise argparse.ArgumentTypeError(f"{text} is too large (at most {most:g})")
        return value

    parse.__name__ = kind.__name__
    return parse


def _name(text: str) -> str:
    """An estate or role name (:mod:`raetlike.names`)."""
    problem = name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"invalid name {quoted_name(text)}: {problem}")
    return text


def _lane_name(text: str) -> str:
    """A lane name: a yard name (Latin-1) without dots."""
    return _yard_name(text, what="lane", dots=False)


def _yard_name(text: str, what: str = "yard", *, dots: bool = True) -> str:
    """A yard name: a valid name in Latin-1 (RAET's page heads)."""
    try:
        return check_lane_name(what, text, dots=dots)
    except InvalidNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_AUTO = {mode.name.lower(): mode for mode in AutoMode}

_MAIN_EPILOG = """\
examples:
  raetlike demo                                    # four manors, seven yards, a table
  raetlike estate master --port 7530 --main --auto once --echo
  raetlike estate minion1 --port 7531 --join 127.0.0.1:7530
  raetlike ping 127.0.0.1:7530 --count 10000 --json
  raetlike keys list
  raetlike keys accept minion1
"""

_ESTATE_EPILOG = """\
examples:
  raetlike estate master --port 7530 --main
  raetlike estate master --host 127.0.0.1 --port 0 --main --auto once --echo --keep /tmp/keep
  raetlike estate minion1 --port 7531 --join 10.0.0.1:7530
  raetlike estate minion1 --port 7531 --join 10.0.0.1:7530 --durable --durable-sync 10
  raetlike estate minion1 --port 7531 --join 10.0.0.1:7530 --join 10.0.0.2:7530 --multi failover

With several --join the estate joins every main it can reach (and any that
appears later): --multi hot sends its events to all of them, --multi
failover (the default) uses one and moves to the next when presence says it
is gone, within 2 presence periods (docs/multi-main.md).

--durable keeps what transmit accepted on disk until acknowledged, and what
was delivered, so a restart (even after kill -9) sends nothing twice and
loses nothing (docs/reliability.md); the store is DIR, or 'durable' in the
estate's keep.  --durable-sync: fdatasync 'always' (each message), every MS
milliseconds (default 10), or 'never' (a killed process still loses nothing).

A main estate leaves a new joiner pending (--auto never) and logs the
'raetlike keys accept' command that lets it in; --auto once accepts any
keys the first time, --auto always every time.

The first line on stdout is 'estate NAME listening on HOST:PORT'.
Stop it with Ctrl-C or SIGTERM.
"""

_YARD_EPILOG = """\
examples:
  raetlike yard worker --lane jobs --dir /tmp/lanes --echo
  raetlike yard main --lane jobs --dir /tmp/lanes --main

The first line on stdout is 'yard NAME listening on PATH'.  A yard that is
not main routes through the main yard 'main' (a manor started with
'raetlike estate ... --lane LANE').  Stop it with Ctrl-C or SIGTERM.
"""

_PING_EPILOG = """\
examples:
  raetlike ping 127.0.0.1:7530
  raetlike ping 127.0.0.1:7530 --count 10000 --size 1024 --json
  raetlike ping [::1]:7530 --count 1 --size 1000000 --timeout 30
  raetlike ping --lane jobs --dir /tmp/lanes --yard worker --count 10000 --json

The pinged estate must be a main estate started with --echo; a pinged yard
('--lane LANE --yard NAME') one started with 'raetlike yard NAME --echo'.
Exit status 0 only when every echo came back.
"""

_PIPELINE_EPILOG = """\
examples:
  raetlike pipeline journal/ --out report/
  raetlike pipeline j/main j/minion --out report/ --since 2026-01-01T10:00 --until 11:00
  raetlike pipeline journal/ --out report/ --master spark://host:7077
  raetlike pipeline journal/ --out report/ --follow --interval 30

Needs PySpark (pip install 'raetlike[spark]') and Java 17+.  T is ISO 8601
(UTC unless a zone is given) or epoch seconds.  Prints where the report is.
"""

_KEYS_EPILOG = """\
examples:
  raetlike keys list --keep /tmp/keep
  raetlike keys accept minion1 --keep /tmp/keep
  raetlike keys accept --all
  raetlike keys reject intruder
  raetlike keys delete minion1 --json

--keep is the directory given to 'raetlike estate --keep' (holding one keep
per estate; pick one with --estate when it holds several) or one estate's
keep directory itself.
"""


def _verbosity(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="more log output")
    parser.add_argument("-q", "--quiet", action="count", default=default,
                        help="less log output")
    parser.add_argument("--log-format", choices=FORMATS,
                        default="text" if default == 0 else default,
                        help="log lines as text (time, level, logger: message) or one JSON "
                             "object per line (default: text)")


def _add_bench(commands: Any, common: argparse.ArgumentParser) -> None:
    """The ``bench`` subcommand's arguments."""
    bench = commands.add_parser(
        "bench", parents=[common],
        help="measure raw UDP, pyzmq+CURVE, fast mode, RAET mode and RAET 0.6.8",
        description="Run peers in child processes on loopback and print a table, then each "
                    "goal (met or MISSED) as a ratio.",
        epilog="examples:\n  raetlike bench --quick\n  raetlike bench --repeat 5 --json\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("--quick", action="store_true", help="a short run (one repetition)")
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument("--repeat", type=_positive(int, 1), default=None, metavar="N",
                       help="repetitions per figure (median; default 3, quick 1)")
    bench.add_argument("--estates", type=_positive(int, 1), default=None, metavar="N",
                       help="estates joining one main (default 1000, quick 200)")
    bench.add_argument("--no-pin", dest="pin", action="store_false",
                       help="let the scheduler place the processes (default: the bench and "
                            "each peer on two different CPUs)")


def build_parser() -> argparse.ArgumentParser:
    """The ``raetlike`` argument parser with every subcommand."""
    parser = _Parser(
        prog="raetlike",
        description="A secure, reliable, asynchronous event transport (RAET 0.6.8 compatible).",
        epilog=_MAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"raetlike {__version__}")
    _verbosity(parser, 0)
    common = _Parser(add_help=False)
    _verbosity(common, argparse.SUPPRESS)  # a subcommand keeps -v/-q given before it
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    estate = commands.add_parser(
        "estate", parents=[common], help="run an estate until interrupted",
        description="Run an estate on UDP until SIGINT/SIGTERM, logging joins, allows, "
                    "presence and messages.",
        epilog=_ESTATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    estate.add_argument("name", metavar="NAME", type=_name, help="the estate's name")
    estate.add_argument("--port", type=_port, required=True, metavar="P",
                        help="UDP port to listen on (0: any free port)")
    estate.add_argument("--host", default="0.0.0.0", metavar="H",  # noqa: S104 - as RAET
                        help="address to listen on (default: 0.0.0.0)")
    estate.add_argument("--main", action="store_true", help="be the road's main estate")
    _add_multi(estate)
    estate.add_argument("--auto", choices=list(_AUTO), default=None,
                        help="acceptance of keys never seen before (default: never for a "
                             "--main estate, once otherwise)")
    estate.add_argument("--keep", type=Path, metavar="DIR",
                        help=f"keep directory (default: {default_keep_dir()})")
    estate.add_argument("--echo", action="store_true",
                        help="send every message received back to its sender")
    _add_mode(estate, "never negotiate the fast mode with raetlike peers",
              journal=True)
    estate.add_argument("--lane", type=_lane_name, metavar="LANE",
                        help="also run the main yard of LANE: the estate becomes a manor "
                             "routing (estate, yard, share) between road and lane")
    estate.add_argument("--dir", "--lane-dir", dest="lane_dir", type=Path, metavar="DIR",
                        help="the lane's socket directory (with --lane)")
    estate.add_argument("--durable", nargs="?", const=_IN_KEEP, type=Path, metavar="DIR",
                        help="keep the outbox and delivery dedup on disk (in DIR; default: "
                             "'durable' in the keep), so nothing is lost or repeated across "
                             "restarts")
    estate.add_argument("--durable-sync", type=_durable_sync, default=_durable_sync("10"),
                        metavar="always|MS|never",
                        help="when the durable store is fdatasynced (default: every 10 ms)")

    yard = commands.add_parser(
        "yard", parents=[common], help="run a yard on a lane until interrupted",
        description="Run a yard on a UNIX-socket lane until SIGINT/SIGTERM, logging messages.",
        epilog=_YARD_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    yard.add_argument("name", metavar="NAME", type=_yard_name, help="the yard's name")
    yard.add_argument("--lane", type=_lane_name, required=True, metavar="LANE",
                      help="the lane's name")
    yard.add_argument("--dir", dest="lane_dir", type=Path, metavar="DIR",
                      help="the lane's socket directory")
    yard.add_argument("--main", action="store_true", help="be the lane's main yard")
    yard.add_argument("--echo", action="store_true",
                      help="send every message back (routed ones with the route reversed)")
    _add_bus_options(estate, yard)
    _add_watch(estate)
    _add_watch(yard)

    pinger = commands.add_parser(
        "ping", parents=[common], help="time echoes from an --echo estate",
        description="Join an echoing main estate with a temporary estate, send numbered "
                    "messages (many in flight) and report messages/s and round-trip times.",
        epilog=_PING_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    pinger.add_argument("target", metavar="HOST:PORT", type=_host_port, nargs="?",
                        help="the estate to ping (or give --lane and --yard)")
    _add_ping_lane(pinger)
    pinger.add_argument("--count", type=_positive(int, 1), default=DEFAULT_COUNT,
                        metavar="N", help=f"messages to send (default: {DEFAULT_COUNT})")
    pinger.add_argument("--size", type=_positive(int, 0), default=DEFAULT_SIZE,
                        metavar="BYTES", help=f"payload per message (default: {DEFAULT_SIZE})")
    pinger.add_argument("--timeout", type=_positive(float, 0.001), default=DEFAULT_TIMEOUT,
                        metavar="S", help=f"give up after S seconds (default: {DEFAULT_TIMEOUT:g})")
    pinger.add_argument("--window", type=_positive(int, 1), default=DEFAULT_WINDOW,
                        metavar="W", help=f"messages in flight (default: {DEFAULT_WINDOW})")
    pinger.add_argument("--json", action="store_true", help="print one JSON object")

    _add_bench(commands, common)

    keys = commands.add_parser(
        "keys", parents=[common], help="list, accept, reject or delete remote keys",
        description="Manage the keys remote estates presented (by role), like salt-key.",
        epilog=_KEYS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    keys.add_argument("action", choices=["list", "accept", "reject", "delete"])
    keys.add_argument("role", metavar="NAME|ROLE", nargs="?", type=_name,
                      help="the role (or remote estate name) to act on")
    keys.add_argument("--all", action="store_true",
                      help="accept or reject every pending role")
    keys.add_argument("--keep", type=Path, metavar="DIR",
                      help=f"keep directory (default: {default_keep_dir()})")
    keys.add_argument("--estate", type=_name, metavar="NAME",
                      help="which estate's keep, when DIR holds several")
    keys.add_argument("--json", action="store_true", help="print JSON")

    _add_chaos(commands, common)
    _add_flo(commands, common)

    _add_demo(commands, common)
    _add_pipeline(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.INFO - 10 * args.verbose + 10 * args.quiet
    setup_logging(level, args.log_format)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return _run(parser, args)
    except AddressError as exc:
        return _fail(args, str(exc), status=EXIT_USAGE)
    except (RaetError, OSError) as exc:
        return _fail(args, _describe(exc))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "estate":
        _check_estate(parser, args)
        return _estate(args)
    if args.command == "ping":
        _check_ping_target(parser, args)
        return _ping(args)
    if args.command == "bench":
        from raetlike.bench import main as bench_main  # noqa: PLC0415 - only when asked

        return bench_main(args.quick, args.json, args.repeat, args.estates, args.pin)
    if args.command == "yard":
        return _yard(args)
    if args.command == "keys":
        return run_keys(args, parser)
    if args.command == "chaos":
        return _chaos(args)
    if args.command == "flo":
        return _flo(args)
    if args.command == "pipeline":
        return _pipeline(args)
    return _demo(args)


def _describe(exc: BaseException) -> str:
    """One line for an error: an OSError names its file (``[Errno 2] ...`` does not)."""
    if isinstance(exc, OSError) and not isinstance(exc, RaetError) and exc.strerror:
        where = exc.filename if exc.filename is not None else None
        return f"{where}: {exc.strerror}" if where else exc.strerror
    return str(exc)


def _add_watch(parser: argparse.ArgumentParser) -> None:
    """``--metrics HOST:PORT`` and ``--stats-every S`` (docs/operations.md)."""
    parser.add_argument("--metrics", type=_listen_address, metavar="HOST:PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (port 0: "
                             "any free port; the second stdout line says which)")
    parser.add_argument("--stats-every", type=_positive(float, 0.01), metavar="S",
                        help="write one JSON stats line to stderr every S seconds "
                             "(SIGUSR1 writes one at once, with or without this)")


def _add_bus_options(estate: argparse.ArgumentParser, yard: argparse.ArgumentParser) -> None:
    """The ``--bus`` flag of ``estate`` and ``yard``."""
    estate.add_argument("--bus", action="store_true",
                        help="run a bus node serving 'echo.': remotes and (with --lane) "
                             "yards become its links (docs/bus.md)")
    estate.add_argument("--trust-relay", dest="relays", action="append", default=[],
                        type=_name, metavar="ROLE",
                        help="with --bus: a remote of role ROLE is a relay estate below us "
                             "(a --main that joined us): keep the identities it stamps and "
                             "route requests to the estates it has below (docs/relay.md); "
                             "repeat for more roles")
    yard.add_argument("--bus", action="store_true",
                      help="run a bus node serving 'echo.' with the main yard upstream "
                           "(docs/bus.md)")


def _fail(args: argparse.Namespace, reason: str, *, status: int = EXIT_FAILURE,
          printed_json: bool = False) -> int:
    """``raetlike CMD: error: REASON`` on stderr (and, with ``--json``, one JSON object)."""
    if getattr(args, "json", False) and not printed_json:
        print(json.dumps({"ok": False, "error": reason}))
    command = f"raetlike {args.command}" if args.command else "raetlike"
    print(f"{command}: error: {reason}", file=sys.stderr)
    return status


def _add_mode(parser: argparse.ArgumentParser, text: str, *, journal: bool = False) -> None:
    parser.add_argument("--raet-mode", action="store_true", help=text)
    if journal:
        parser.add_argument("--journal", type=Path, metavar="DIR",
                            help="journal every delivered message under DIR (docs/journal.md)")


def _resolved(option: str, address: Address, family: int = socket.AF_UNSPEC) -> Address:
    """``address`` looked up once (getaddrinfo); AddressError names the option."""
    try:
        return resolve(address, family)
    except AddressError as exc:
        raise AddressError(f"{option} {address[0]}:{address[1]}: {exc}") from None


_IN_KEEP = Path("\0keep")
"""``--durable`` without a directory: the store goes into the estate's keep."""


def _durable_sync(text: str) -> DurableConfig:
    """``always``, ``never`` or milliseconds between fdatasyncs, as a DurableConfig."""
    if text in ("always", "never"):
        return DurableConfig(fsync=FsyncPolicy(text))
    try:
        milliseconds = float(text)
    except ValueError:
        milliseconds = -1.0
    if not 0 < milliseconds <= 60_000:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not 'always', 'never' or milliseconds between 0 and 60000")
    return DurableConfig(fsync=FsyncPolicy.INTERVAL, fsync_interval=milliseconds / 1000)


def _add_multi(estate: argparse.ArgumentParser) -> None:
    """``--join`` (repeatable), ``--multi hot|failover`` and ``--failback S``."""
    estate.add_argument("--join", type=_host_port, metavar="HOST:PORT", action="append",
                        help="join the main estate at HOST:PORT; repeat it to join several "
                             "mains (docs/multi-main.md)")
    estate.add_argument("--multi", choices=[mode.value for mode in MultiMode], default=None,
                        help="with several --join: 'hot' uses every main, 'failover' one "
                             f"at a time (default: {DEFAULT_MODE.value})")
    estate.add_argument("--failback", type=_positive(float, 0.0), default=None, metavar="S",
                        help="--multi failover: go back to the first --join main once it "
                             "has been up S seconds (default: stay where it failed over)")
    estate.add_argument("--presence-period", type=_positive(float, 0.05, DAY), default=None,
                        metavar="S", help="check each remote's presence every S seconds "
                        "(RoadConfig.period, default 1; a main of thousands of estates "
                        "wants more: docs/relay.md)")
    estate.add_argument("--bus-keepalive", type=_positive(float, 0.05, DAY), default=None,
                        metavar="S", help="with --bus: a keepalive to every link every S "
                        "seconds, a link silent 3 S is lost (BusConfig.keepalive_interval, "
                        "default 5; a main of thousands of estates wants more: docs/relay.md)")


def _check_estate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--multi and --failback only with several --join; several mains, no --durable yet;
    --trust-relay with --bus."""
    joins = args.join or []
    if len(set(joins)) != len(joins):
        parser.error("estate: the same --join is given twice")
    if args.multi is not None and len(joins) < 2:
        parser.error("estate: --multi needs two or more --join (one main has no mode)")
    if args.failback is not None and (len(joins) < 2 or
                                      (args.multi or DEFAULT_MODE.value) != "failover"):
        parser.error("estate: --failback goes with two or more --join in failover mode")
    if args.durable is not None and len(joins) > 1:
        parser.error("estate: --durable works with one --join only (not several mains yet)")
    if args.bus_keepalive is not None and not args.bus:
        parser.error("estate: --bus-keepalive needs --bus")
    if args.relays and not args.bus:
        parser.error("estate: --trust-relay needs --bus")


def _estate(args: argparse.Namespace) -> int:
    joins = tuple(_resolved("--join", join, family_of(args.host)) for join in args.join or ())
    join = joins[0] if len(joins) == 1 else None
    multi = None if len(joins) < 2 else MultiConfig(
        mode=MultiMode(args.multi or DEFAULT_MODE.value), failback_after=args.failback)
    durable = args.durable
    if durable == _IN_KEEP:
        durable = (args.keep or default_keep_dir()) / args.name / "durable"
    options = EstateOptions(
        name=args.name, host=args.host, port=args.port, main=args.main, join=join,
        mains=joins if multi is not None else (), multi=multi,
        auto=None if args.auto is None else _AUTO[args.auto], keep_dir=args.keep,
        echo=args.echo, raet_mode=args.raet_mode, presence_period=args.presence_period,
        bus_keepalive=args.bus_keepalive,
        lane=args.lane, lane_dir=args.lane_dir, journal_dir=args.journal, bus=args.bus,
        metrics=args.metrics, stats_every=args.stats_every,
        durable=durable, durable_config=args.durable_sync, relays=tuple(args.relays),
    )
    return run_estate(options, sys.stdout)


def _yard(args: argparse.Namespace) -> int:
    from raetlike.cli.yard import YardOptions, run_yard  # noqa: PLC0415 - only this command

    options = YardOptions(name=args.name, lane=args.lane, main=args.main, echo=args.echo,
                          bus=args.bus, metrics=args.metrics, stats_every=args.stats_every,
                          directory=None if args.lane_dir is None else str(args.lane_dir))
    return run_yard(options, sys.stdout)


def _add_ping_lane(pinger: argparse.ArgumentParser) -> None:
    _add_mode(pinger, "never negotiate the fast mode (measure RAET 0.6.8's protocol)")
    """``ping --lane LANE [--dir DIR] --yard NAME``: ping a yard instead of an estate."""
    pinger.add_argument("--lane", type=_lane_name, metavar="LANE",
                        help="ping a yard on this lane instead of an estate")
    pinger.add_argument("--dir", dest="lane_dir", type=Path, metavar="DIR",
                        help="the lane's socket directory (with --lane)")
    pinger.add_argument("--yard", type=_yard_name, metavar="NAME",
                        help="the echoing yard to ping (with --lane)")


def _check_ping_target(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exactly one target: HOST:PORT, or --lane with --yard (--dir only with --lane)."""
    if args.lane is None:
        if args.target is None:
            parser.error("ping: give HOST:PORT, or --lane LANE --yard NAME")
        if args.yard is not None or args.lane_dir is not None:
            parser.error("ping: --yard and --dir go with --lane")
    elif args.target is not None:
        parser.error("ping: give HOST:PORT or --lane, not both")
    elif args.yard is None:
        parser.error("ping: --lane needs --yard NAME")


def _ping(args: argparse.Namespace) -> int:
    show = sys.stdout.isatty() and not args.json

    def progress(done: int, total: int) -> None:
        if show:
            sys.stdout.write(f"\r{done}/{total} echoed")
            sys.stdout.flush()

    try:
        if args.lane is not None:
            result = ping_yard(args.yard, lane=args.lane, count=args.count, size=args.size,
                               directory=None if args.lane_dir is None else str(args.lane_dir),
                               timeout=args.timeout, window=args.window, progress=progress)
        else:
            target = _resolved("HOST:PORT", args.target)
            result = ping(target, count=args.count, size=args.size, timeout=args.timeout,
                          window=args.window, progress=progress, raet_mode=args.raet_mode)
    except PingError as exc:
        if show:
            sys.stdout.write("\n")
        return _fail(args, str(exc))
    if show:
        sys.stdout.write("\r")
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        figures = result.as_dict()
        print(f"{figures['echoed']}/{result.count} echoed by {result.remote} at "
              f"{figures['target']} ({result.size} B each) in {result.seconds:.3f} s: "
              f"{result.messages_per_second:.0f} msgs/s, "
              f"rtt p50 {figures['rtt_p50_ms']:.2f} ms, p99 {figures['rtt_p99_ms']:.2f} ms")
    return EXIT_OK


# -- chaos ------------------------------------------------------------------

_CHAOS_EPILOG = """\
examples:
  raetlike chaos --listen 127.0.0.1:7540 --forward 127.0.0.1:7530 --loss 0.05
  raetlike chaos --listen 127.0.0.1:0 --forward 127.0.0.1:7530 --reorder 0.1 --seed 7
  raetlike ping 127.0.0.1:7540 --count 1000      # through the relay

The first line on stdout is 'chaos listening on HOST:PORT forwarding to HOST:PORT'.
Stop it with Ctrl-C or SIGTERM: it then prints its counters per direction and
one JSON object of them.
"""


def _listen_address(text: str) -> Address:
    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid probability {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not a probability (0..1)")
    return value


def _add_chaos(commands: Any, common: argparse.ArgumentParser) -> None:
    chaos = commands.add_parser(
        "chaos", parents=[common], help="a lossy UDP relay between two estates",
        description="Relay UDP datagrams between clients of --listen and the estate at "
                    "--forward, both ways, losing, duplicating, reordering, corrupting "
                    "and delaying them at random.",
        epilog=_CHAOS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    chaos.add_argument("--listen", type=_listen_address, required=True, metavar="HOST:PORT",
                       help="address clients send to (port 0: any free port)")
    chaos.add_argument("--forward", type=_host_port, required=True, metavar="HOST:PORT",
                       help="the estate datagrams are relayed to")
    for name, what in (("loss", "drop"), ("duplicate", "send twice"),
                       ("reorder", "hold back behind the next one"),
                       ("corrupt", "flip bits in")):
        chaos.add_argument(f"--{name}", type=_probability, default=0.0, metavar="P",
                           help=f"chance to {what} a datagram (default: 0)")
    chaos.add_argument("--delay", type=_positive(float, 0), default=0.0, metavar="MS",
                       help="delay every datagram MS milliseconds (default: 0)")
    chaos.add_argument("--jitter", type=_positive(float, 0), default=0.0, metavar="MS",
                       help="add 0..MS milliseconds at random (default: 0)")
    chaos.add_argument("--seed", type=int, default=None, metavar="N",
                       help="seed the random decisions (default: unseeded)")


def _chaos(args: argparse.Namespace) -> int:
    from raetlike.chaos import Impairment, run_chaos  # noqa: PLC0415 - only chaos needs it

    impairment = Impairment(loss=args.loss, duplicate=args.duplicate, reorder=args.reorder,
                            corrupt=args.corrupt, delay=args.delay / 1000,
                            jitter=args.jitter / 1000)
    return run_chaos(args.listen, args.forward, impairment, args.seed, sys.stdout)


def _add_pipeline(commands: Any, common: argparse.ArgumentParser) -> None:
    pipeline = commands.add_parser(
        "pipeline", parents=[common], help="analyse journals on Spark: tables and a report",
        description="Read the journals of any number of nodes with PySpark and write Parquet "
                    "tables (traffic, latency, resends, delivery audit) and an HTML report.",
        epilog=_PIPELINE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    pipeline.add_argument("journals", metavar="JOURNAL_DIR", nargs="+", type=Path,
                          help="journal directories (as given to 'estate --journal')")
    pipeline.add_argument("--out", type=Path, required=True, metavar="DIR",
                          help="where tables, plots and report.html go")
    pipeline.add_argument("--master", metavar="URL",
                          help="Spark master (default: spark-submit's, else local[*])")
    pipeline.add_argument("--since", metavar="T", help="only records received at or after T")
    pipeline.add_argument("--until", metavar="T", help="only records received before T")
    pipeline.add_argument("--window", type=_positive(float, 0.01), default=None, metavar="S",
                          help="time window of the rate plot and traffic table (default: "
                               "fitted to the run, at most 60 windows of a round width)")
    pipeline.add_argument("--driver-rows", type=_positive(int, 0), default=None, metavar="N",
                          help="compute the tables on the driver when each merged partial "
                               "has at most N rows (default: 20000; 0: always in Spark)")
    pipeline.add_argument("--converter", choices=("arrow", "spark"), default="arrow",
                          help="what turns new segments' JSON into the store: pyarrow in "
                               "Spark tasks (default; units it declines go to Spark) or "
                               "Spark's JSON reader")
    pipeline.add_argument("--follow", action="store_true",
                          help="keep going: pick up new sealed segments (Structured Streaming)")
    pipeline.add_argument("--interval", type=_positive(float, 0.0), default=10.0, metavar="S",
                          help="--follow: seconds between rounds (default: 10)")
    pipeline.add_argument("--rounds", type=_positive(int, 1), metavar="N",
                          help="--follow: stop after N rounds (default: until interrupted)")


def _pipeline(args: argparse.Namespace) -> int:
    try:
        from raetlike.pipeline.cli import run_command  # noqa: PLC0415 - PySpark is optional
    except ImportError as exc:
        return _fail(args, f"the pipeline needs PySpark (pip install 'raetlike[spark]'): {exc}")
    return run_command(args, sys.stdout, sys.stderr)


def _add_demo(commands: Any, common: argparse.ArgumentParser) -> None:
    demo = commands.add_parser(
        "demo", parents=[common], help="four manors and their yards exchanging everything",
        description="On loopback with temporary keeps: a main manor and three minion manors "
                    "(processes) with yards; the minions join (accepted through main's keep), "
                    "then routed messages, bus events and requests and SP surveys flow yard "
                    "to yard; a table at the end.  Exit 0 when everything was delivered.",
        epilog="examples:\n  raetlike demo\n  raetlike demo --quick --json\n"
               "  raetlike demo --out demo-report      # keep journals and report here\n"
               "  raetlike demo --quick --no-pipeline  # no Spark at the end\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--quick", action="store_true", help="less traffic (about 2 s of it)")
    demo.add_argument("--json", action="store_true", help="print one JSON object at the end")
    demo.add_argument("--out", type=Path, metavar="DIR", default=None,
                      help="keep the journals (DIR/journal) and the pipeline's report "
                           "(DIR/report) here (default: a new temporary directory, kept)")
    demo.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                      help="do not run the Spark pipeline over the journals at the end")


def _demo(args: argparse.Namespace) -> int:
    from raetlike.demo import run_demo  # noqa: PLC0415 - only the demo needs subprocesses

    return run_demo(sys.stdout, quick=args.quick, as_json=args.json, out_dir=args.out,
                    pipeline=args.pipeline)


# -- flo --------------------------------------------------------------------

_FLO_EPILOG = """\
examples:
  raetlike flo docs/examples/road.flo                  # master and minion in one process
  raetlike flo docs/examples/road.flo --house master   # one house per process
  raetlike flo docs/examples/lane.flo --period 0.05 --json

Runs until every framer has stopped ('bid stop all') or Ctrl-C/SIGTERM.
Exit status 1 when a house put a reason into meta.failure.  -vv shows
ioflo's own console.
"""


def _plan_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"invalid plan {text!r}: no such file")
    return path


def _add_flo(commands: Any, common: argparse.ArgumentParser) -> None:
    flo = commands.add_parser(
        "flo", parents=[common], help="run a FloScript plan of ioflo houses",
        description="Run the houses of an ioflo FloScript plan with ioflo's skedder; "
                    "'do raetlike road stack ...' and 'do raetlike lane stack ...' deeds "
                    "embed estates and yards (docs/flo.md).",
        epilog=_FLO_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    flo.add_argument("plan", metavar="PLAN.flo", type=_plan_file, help="the FloScript plan")
    flo.add_argument("--house", type=_name, metavar="NAME",
                     help="run only this house of the plan (default: all)")
    flo.add_argument("--period", type=_positive(float, 0.001), default=0.1, metavar="S",
                     help="seconds per tick of the skedder (default: 0.1)")
    flo.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _flo(args: argparse.Namespace) -> int:
    from raetlike.flo import run_plan  # noqa: PLC0415 - only this command needs ioflo

    verbosity = ("mute", "mute", "terse", "concise")[min(args.verbose, 3)]
    outcome = run_plan(args.plan, house=args.house, period=args.period, verbosity=verbosity)
    houses = [str(h.name) for h in outcome.houses]
    if args.json:
        print(json.dumps({"ok": outcome.ok, "plan": str(args.plan), "houses": houses,
                          "failures": outcome.failures, "ticks": outcome.ticks,
                          "seconds": round(outcome.seconds, 3),
                          "interrupted": outcome.interrupted or None}))
    else:
        stopped = f" (stopped by {outcome.interrupted})" if outcome.interrupted else ""
        print(f"plan {args.plan}: {', '.join(houses)} ran {outcome.ticks} ticks "
              f"in {outcome.seconds:.2f} s{stopped}")
    for house, reason in outcome.failures.items():
        _fail(args, f"house {house}: {reason}", printed_json=True)
    return EXIT_OK if outcome.ok else EXIT_FAILURE
