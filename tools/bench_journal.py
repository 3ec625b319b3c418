"""Measure the journal: records/s appended per fsync policy; optionally the pipeline over them.

Each record is what ``JournalWriter.record_delivery`` makes of a road
``MessageReceived`` with a body carrying ``_seq``, ``_sent`` and 60 bytes of
padding, so the figure includes mapping and JSON encoding, not only the
``write``; the default policy is measured again with raw 100-byte bodies (what
``raetlike bench`` sends, written by the compiled path when it is built), and
once more with one time for each chunk's deliveries, as an estate gives them.  The
deliveries are made ahead, a chunk at a time, outside the timing (a stack
hands them over already made), and the writer ticks after each chunk as an
estate does after each loop round.

Usage::

    .venv/bin/python tools/bench_journal.py [--records 200000] [--dir DIR]
    .venv/bin/python tools/bench_journal.py --records 1000000 --sources 10 --pipeline
    .venv/bin/python tools/bench_journal.py --dir DIR --only-pipeline   # DIR's journal again
    .venv/bin/python tools/bench_journal.py --estate 5 [--pairs 9] [--baseline TREE]
    .venv/bin/python tools/bench_journal.py --estate 3 --pairs 9 --cli   # real estates
    .venv/bin/python tools/bench_journal.py --handle 5      # CPU a delivery in an estate

``--pipeline`` keeps the default-policy journal (spread over ``--sources``
sources and ``--hours`` hours, with ~0.1 % of sequence numbers skipped) and
times ``raetlike.pipeline.run_pipeline`` over it on local Spark, twice (the
second run finds nothing new), beside one Spark pass over the same files (read
and count, the first after the session's start, as the issue measured it, and
a second one warm) and, when DuckDB is installed (``pip install -e '.[bench]'``),
DuckDB doing the same audit, quantiles, rate and pair tables into Parquet (run
first, before the JVM starts); each pipeline line gives its seconds as a
multiple of one pass and of DuckDB's.

``--estate N`` measures instead what the journal costs an estate: the part of
``raetlike bench`` that sends fast one-way runs of 60,000 messages to a main
that journals every message and to one that does not, in pairs alternated ABBA
on the peer's CPU (``raetlike.bench.journaled_one_way``), N times over with
fresh peers.  It prints each time's medians (msgs/s, the pairs' ratio, each
main's CPU per message) and the median of the N.  With ``--baseline TREE``
(an older raetlike's sources, e.g. ``git archive main raetlike road lane | tar
-x -C TREE``) it runs instead that tree's journaling and plain mains beside
ours, N x pairs rounds alternated, and prints each tree's ratio and the
journal's CPU per message, measured in the same minutes.  With ``--cli`` the two
mains are real ``raetlike estate`` processes (``--main --auto always``, one with
``--journal``), so the estate's own event loop is measured too.

``--handle N`` gives the CPU a raw delivery takes in ``raetlike estate``'s event
loop (``_Estate.handle_events`` then the journal's tick, rounds of 2,000, in this
process), journaling or not, N times alternated; ``PYTHONPATH=TREE`` runs it on
another tree's sources.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from raetlike.journal import DEFAULT_FSYNC, FsyncPolicy, JournalWriter
from raetlike.journal._delivery import COMPILED
from road.events import MessageReceived

START = 1_767_261_600.0  # 2026-01-01T10:00:00Z


CHUNK = 2_000  # deliveries per simulated loop round


def _deliveries(first: int, last: int, count: int, sources: int,
                hours: float, *, raw: bool = False) -> list[tuple[MessageReceived, float]]:
    step = hours * 3600 / count
    pad = "x" * 60
    made = []
    for n in range(first, last):
        source = n % sources
        sequence = n // sources + 1
        if sequence % 997 == 0:
            continue  # a known loss for the audit
        received = START + n * step
        body: object = b"r" * 100 if raw else {
            "_seq": sequence, "_sent": received - 0.002 - (n % 7) / 1000, "pad": pad}
        event = MessageReceived(remote=f"minion{source}", body=body, session_id=1,
                                transaction_id=n, segments=1)
        made.append((event, received))
    return made


def append(directory: Path, policy: FsyncPolicy, count: int, sources: int,
           hours: float, *, raw: bool = False, one_time: bool = False) -> float:
    """Journal ``count`` deliveries; returns records/s (journal time only).  With
    ``one_time`` a chunk's deliveries share its first one's time, as an estate's loop
    round's do."""
    spent = 0.0
    written = 0
    writer = JournalWriter(directory, "main", fsync=policy)
    for first in range(0, count, CHUNK):
        chunk = _deliveries(first, min(first + CHUNK, count), count, sources, hours, raw=raw)
        if one_time:
            chunk = [(event, chunk[0][1]) for event, _ in chunk]
        started = time.perf_counter()
        for event, received in chunk:
            writer.record_delivery("main", event, received)
        writer.tick()
        spent += time.perf_counter() - started
        written += len(chunk)
    started = time.perf_counter()
    writer.close()
    spent += time.perf_counter() - started
    return written / spent


def duckdb_run(journal: Path, out: Path) -> float | None:
    """Seconds for DuckDB to read the journal's JSON lines once and write the audit (per
    source: records, distinct, range, gaps), latency p50/p90/p99 per kind and per pair,
    and the per-minute rate as Parquet; None when DuckDB is not installed."""
    try:
        import duckdb  # noqa: PLC0415 - a comparison, installed with the bench extra
    except ImportError:
        return None
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    columns = ("{node: 'VARCHAR', source_estate: 'VARCHAR', destination_estate: 'VARCHAR', "
               "kind: 'VARCHAR', topic: 'VARCHAR', sequence: 'BIGINT', body_bytes: 'BIGINT', "
               "resends: 'BIGINT', sent: 'DOUBLE', received: 'DOUBLE'}")
    quantiles = ("quantile_disc(latency, 0.5) p50, quantile_disc(latency, 0.9) p90, "
                 "quantile_disc(latency, 0.99) p99, count(latency) timed, count(*) messages, "
                 "sum(resends) resends")
    started = time.perf_counter()
    db = duckdb.connect()
    # the queries are fixed text over our own temporary directory: nothing is injected
    db.execute(f"CREATE TABLE r AS SELECT *, (received - sent) * 1000 AS latency FROM "  # noqa: S608
               f"read_json('{journal}/*/*/*.jsonl', format='newline_delimited', "
               f"columns={columns})")
    for name, query in {
        "audit": "SELECT source_estate, count(*) records, count(DISTINCT sequence) distinct_, "
                 "min(sequence) first, max(sequence) last FROM r WHERE sequence IS NOT NULL "
                 "GROUP BY ALL",
        "gaps": "SELECT source_estate, previous + 1 first_missing, sequence - 1 last_missing "
                "FROM (SELECT source_estate, sequence, lag(sequence) OVER (PARTITION BY "
                "source_estate ORDER BY sequence) previous FROM (SELECT DISTINCT "
                "source_estate, sequence FROM r WHERE sequence IS NOT NULL)) "
                "WHERE sequence - previous > 1",
        "kinds": f"SELECT kind, {quantiles} FROM r GROUP BY ALL",  # noqa: S608
        "pairs": f"SELECT source_estate, destination_estate, {quantiles} "  # noqa: S608
                 "FROM r GROUP BY ALL",
        "rate": "SELECT time_bucket(INTERVAL 1 MINUTE, to_timestamp(received)) AS window_start, "
                "count(*) messages FROM r GROUP BY ALL",
    }.items():
        db.execute(f"COPY ({query}) TO '{out / name}.parquet' (FORMAT PARQUET)")
    db.close()
    return time.perf_counter() - started


def estate(times: int, pairs: int) -> None:
    """The bench's journaling pair of rows, ``times`` times, each with ``pairs`` pairs."""
    import statistics  # noqa: PLC0415

    from raetlike._native import build  # noqa: PLC0415
    from raetlike.bench._common import BenchOptions, pinned  # noqa: PLC0415
    from raetlike.bench._raetlike import journaled_one_way  # noqa: PLC0415

    print(f"build: {build()}; journal encoder: "
          f"{'compiled' if COMPILED else 'pure Python'} raw-bytes path")
    ratios = []
    with pinned(True) as cpus:
        for time_ in range(times):
            # the bench's 20,000 (times 3) messages a run
            figures = journaled_one_way(BenchOptions(), 20_000, cpus=cpus, pairs=pairs)
            ratios.append(figures["ratio"])
            cpu = (f"; main CPU {figures.get('journal_cpu_us', float('nan')):.2f} / "
                   f"{figures.get('alongside_cpu_us', float('nan')):.2f} us a message")
            print(f"time {time_ + 1}/{times}: journaling {figures['journal']:,.0f} msgs/s, "
                  f"not {figures['alongside']:,.0f}, ratio (median of {pairs} pairs) "
                  f"{figures['ratio']:.3f}{cpu}", flush=True)
    print(f"median of {times}: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")


def baseline(tree: Path, runs: int) -> None:
    """Journaling and plain mains of ``tree`` and of this tree, four peers on the peer's
    CPU, one-way runs of 60,000 messages to each in turn (the order reversed every other
    round): medians of msgs/s and of each main's CPU per message, and each tree's
    journaling/plain ratio (median of the rounds') and extra CPU per message.

    ``tree`` runs as its sources (no compiled road: its plain main is the comparison
    for its journaling one); its journal's C is used when built in place there.
    """
    import os  # noqa: PLC0415
    import statistics  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from raetlike.bench._common import cpu_seconds, pin, pinned  # noqa: PLC0415
    from raetlike.bench._raetlike import Client  # noqa: PLC0415

    def peer(source: Path | None, journal: str | None,
             cpu: int | None) -> tuple[subprocess.Popen[str], int]:
        env = dict(os.environ)
        prelude = ""
        if source is not None:
            env["PYTHONPATH"] = str(source)
            prelude = f"import sys; sys.path.insert(0, {str(source)!r}); "
        process = subprocess.Popen(
            [sys.executable, "-c", prelude + "from raetlike.bench import serve_estate; "
             f"serve_estate(True, {journal!r})"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
            cwd=tempfile.gettempdir())
        pin(process.pid, cpu)
        assert process.stdout is not None  # noqa: S101 - a pipe was asked for
        return process, int(process.stdout.readline())

    count = 60_000
    with tempfile.TemporaryDirectory(prefix="bench-journal-baseline-") as root, \
            pinned(True) as cpus:
        kinds = {"baseline journaling": (tree, f"{root}/old"), "baseline plain": (tree, None),
                 "this journaling": (None, f"{root}/new"), "this plain": (None, None)}
        peers = {}
        try:
            for kind, (source, journal) in kinds.items():
                peers[kind] = peer(source, journal, cpus.peer)
            clients = {kind: Client(port, True) for kind, (_, port) in peers.items()}
            figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
            for run in range(runs):
                for kind in list(kinds) if run % 2 == 0 else list(reversed(kinds)):
                    pid = peers[kind][0].pid
                    before = cpu_seconds(pid) or 0.0
                    rate = count / clients[kind].one_way(count)
                    figures[kind].append((rate, ((cpu_seconds(pid) or 0.0) - before) / count))
            for client in clients.values():
                client.close()
        finally:
            for process, _ in peers.values():
                process.kill()
                process.wait()
    cpu = {kind: statistics.median(run[1] for run in runs_) * 1e6
           for kind, runs_ in figures.items()}
    for kind, runs_ in figures.items():
        print(f"{kind:20} {statistics.median(run[0] for run in runs_):>9,.0f} msgs/s, "
              f"main CPU {cpu[kind]:.2f} us a message")
    for which in ("baseline", "this"):
        ratio = statistics.median(j[0] / p[0] for j, p in zip(
            figures[f"{which} journaling"], figures[f"{which} plain"], strict=True))
        print(f"{which}: journaling / plain {ratio:.3f} (median of {runs}), the journal's "
              f"CPU {cpu[f'{which} journaling'] - cpu[f'{which} plain']:+.2f} us a message")


class _Deliveries:
    """A road that hands out one round's deliveries (the estate's ``road.next_event``)."""

    def __init__(self, delivered: list[MessageReceived]) -> None:
        self.delivered = delivered
        self.waiting: list[MessageReceived] = []

    def refill(self) -> None:
        self.waiting = list(reversed(self.delivered))

    def next_event(self) -> MessageReceived | None:
        return self.waiting.pop() if self.waiting else None


def handle(times: int, rounds: int = 100) -> None:
    """CPU a delivery in ``raetlike estate``'s event loop (``_Estate.handle_events``, then
    the journal's tick, as ``run`` does), journaling raw 100-byte bodies from three remotes
    (default fsync, under a temporary directory of ``/var/tmp``) or not: ``times`` times
    alternated, each ``rounds`` rounds of 2,000 deliveries; medians of the times' medians."""
    import statistics  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from raetlike.cli.estate import EstateOptions, _Estate  # noqa: PLC0415

    def one(journaling: bool, root: Path) -> float:
        options = EstateOptions(name="main", host="127.0.0.1", port=0, main=True,
                                keep_dir=root / "keep", journal_dir=root / "journal"
                                if journaling else None)
        estate = _Estate(options, time.monotonic)
        road = estate.road
        deliveries = _Deliveries([MessageReceived(
            remote=f"minion{n % 3}", body=b"o" * 100, session_id=7, transaction_id=n,
            segments=1) for n in range(CHUNK)])
        estate.road = deliveries  # type: ignore[assignment]  # only next_event is used
        spent = []
        try:
            for _ in range(rounds):
                deliveries.refill()
                started = time.process_time()
                estate.handle_events()
                if estate.journal is not None:
                    estate.journal.tick(time.time())
                spent.append((time.process_time() - started) / CHUNK)
        finally:
            estate.road = road
            estate.close()
        return statistics.median(spent) * 1e6

    print(f"raetlike from {Path(sys.modules['raetlike'].__file__ or '').parent}; journal "
          f"encoder: {'compiled' if COMPILED else 'pure Python'} raw-bytes path")
    figures: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-journal-handle-", dir="/var/tmp") as root:
        for time_ in range(times):
            for journaling in (True, False) if time_ % 2 == 0 else (False, True):
                figures[journaling].append(one(journaling, Path(root, str(len(figures[
                    journaling])), str(journaling))))
    for journaling, name in ((True, "journaling"), (False, "plain")):
        print(f"{name:10} {statistics.median(figures[journaling]):.3f} us a delivery "
              f"(times: {', '.join(f'{x:.3f}' for x in figures[journaling])})")
    print(f"the journal's CPU a delivery: "
          f"{statistics.median(figures[True]) - statistics.median(figures[False]):+.3f} us")


def cli_estates(times: int, pairs: int) -> None:
    """``estate``'s measurement with real ``raetlike estate`` mains (``--main --auto always``,
    one with ``--journal``, one without) in place of the bench's: the estate's own event
    loop included.  Both on the peer's CPU, fresh for each of the ``times``; one-way runs of
    60,000 messages in ``pairs`` pairs alternated ABBA; each time's medians."""
    import statistics  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from raetlike.bench._common import CpuMeter, pin, pinned, stop  # noqa: PLC0415
    from raetlike.bench._raetlike import Client, alternated_one_way  # noqa: PLC0415
    from raetlike.udp import parse_host_port  # noqa: PLC0415

    def main_estate(root: Path, journaling: bool,
                    cpu: int | None) -> tuple[subprocess.Popen[str], int]:
        name = "journaling" if journaling else "plain"
        command = [sys.executable, "-m", "raetlike", "estate", name, "--host", "127.0.0.1",
                   "--port", "0", "--main", "--auto", "always", "--keep", str(root / "keep")]
        if journaling:
            command += ["--journal", str(root / "journal")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
        pin(process.pid, cpu)
        assert process.stdout is not None  # noqa: S101 - a pipe was asked for
        line = process.stdout.readline()
        if not line.startswith(f"estate {name} listening on "):
            stop(process)
            raise RuntimeError(f"raetlike estate did not start: {line!r}")
        return process, parse_host_port(line.rsplit(" ", 1)[1].strip())[1]

    import raetlike  # noqa: PLC0415

    print(f"raetlike estate from {Path(raetlike.__file__ or '').parent}")
    count = 60_000
    ratios = []
    with tempfile.TemporaryDirectory(prefix="bench-journal-cli-", dir="/var/tmp") as root, \
            pinned(True) as cpus:
        for time_ in range(times):
            mains = {}
            try:
                for journaling in (True, False):
                    mains[journaling] = main_estate(Path(root, f"{time_}-{journaling}"),
                                                    journaling, cpus.peer)
                clients = {journaling: Client(port, True) for journaling, (_, port)
                           in mains.items()}
                meters = {journaling: CpuMeter(process.pid) for journaling, (process, _)
                          in mains.items()}
                runs = alternated_one_way(clients, meters, count, pairs)
                for client in clients.values():
                    client.close()
            finally:
                for process, _ in mains.values():
                    stop(process)
            ratio = statistics.median(a / b for a, b in zip(runs[True], runs[False],
                                                             strict=True))
            ratios.append(ratio)
            cpu = {journaling: meters[journaling].per_message().get(
                "one_way_cpu_receiver_us", float("nan")) for journaling in meters}
            print(f"time {time_ + 1}/{times}: journaling {statistics.median(runs[True]):,.0f} "
                  f"msgs/s, not {statistics.median(runs[False]):,.0f}, ratio (median of "
                  f"{pairs} pairs) {ratio:.3f}; main CPU {cpu[True]:.2f} / {cpu[False]:.2f} "
                  f"us a message", flush=True)
    print(f"median of {times}: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")


def _estate_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.estate < 1 or args.pairs < 1:
        parser.error("--estate and --pairs take a count of at least 1")
    if args.cli:
        cli_estates(args.estate, args.pairs)
        return
    if args.baseline is None:
        estate(args.estate, args.pairs)
        return
    if not (args.baseline / "raetlike" / "bench" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a raetlike source tree")
    baseline(args.baseline.resolve(), args.estate * args.pairs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--always-records", type=int, default=5_000,
                        help="records for the fsync-always run (it is slow)")
    parser.add_argument("--sources", type=int, default=10)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary dir)")
    parser.add_argument("--pipeline", action="store_true",
                        help="then run the pipeline over the default-policy journal")
    parser.add_argument("--only-pipeline", action="store_true",
                        help="skip the append runs: the pipeline over the journal an earlier "
                             "--pipeline run left in --dir")
    parser.add_argument("--estate", type=int, metavar="N",
                        help="measure an estate journaling against one not, N times (only that)")
    parser.add_argument("--pairs", type=int, default=9,
                        help="with --estate: alternated pairs of runs each time (default 9)")
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="with --estate: instead, a journaling and a plain main from this "
                             "source tree (an older raetlike) beside ours, alternated")
    parser.add_argument("--cli", action="store_true",
                        help="with --estate: real `raetlike estate` mains instead of the "
                             "bench's (their own event loop measured too)")
    parser.add_argument("--handle", type=int, metavar="N",
                        help="CPU a delivery in raetlike estate's event loop, journaling or "
                             "not, N times alternated (only that)")
    return parser


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.estate is not None:
        _estate_mode(parser, args)
        return
    if args.handle is not None:
        handle(args.handle)
        return
    if args.only_pipeline and (args.dir is None or not (args.dir / DEFAULT_FSYNC.value).is_dir()):
        parser.error("--only-pipeline needs --dir holding an earlier run's journal")
    args.pipeline = args.pipeline or args.only_pipeline
    base = args.dir or Path(tempfile.mkdtemp(prefix="bench-journal-"))
    try:
        print(f"journal encoder: {'compiled' if COMPILED else 'pure Python'} raw-bytes path")
        runs = [(DEFAULT_FSYNC, False, False), (DEFAULT_FSYNC, True, False),
                (DEFAULT_FSYNC, True, True), (FsyncPolicy.NEVER, False, False),
                (FsyncPolicy.ALWAYS, False, False)]
        for policy, raw, one_time in [] if args.only_pipeline else runs:
            count = args.always_records if policy is FsyncPolicy.ALWAYS else args.records
            directory = base / (policy.value + ("-raw" if raw else "")
                                + ("-round" if one_time else ""))
            shutil.rmtree(directory, ignore_errors=True)
            rate = append(directory, policy, count, args.sources, args.hours, raw=raw,
                          one_time=one_time)
            default = " (default)" if policy is DEFAULT_FSYNC else ""
            bodies = ("raw, a time a round" if one_time else "raw 100 B bodies" if raw
                      else "_seq/_sent bodies")
            print(f"fsync {policy.value:8}{default:10} {bodies:18} {count:>9} records  "
                  f"{rate:>10,.0f} records/s")
        if args.pipeline:
            from raetlike.pipeline import (  # noqa: PLC0415 - PySpark only when asked
                PipelineOptions,
                run_pipeline,
                spark_session,
            )
            from raetlike.pipeline._frames import (  # noqa: PLC0415
                hour_directories,
                read_json_journal,
            )

            journal = base / DEFAULT_FSYNC.value
            # DuckDB first, alone on the machine (no JVM beside it)
            duck = duckdb_run(journal, base / "duckdb")
            print("DuckDB, the same tables from the same JSON: " + (
                "not installed (pip install -e '.[bench]')" if duck is None else f"{duck:.1f} s"))
            started = time.perf_counter()
            spark = spark_session()
            print(f"spark session start {time.perf_counter() - started:.1f} s")
            passes = []
            for _ in range(2):
                started = time.perf_counter()
                lines = read_json_journal(spark, hour_directories([journal])).count()
                passes.append(time.perf_counter() - started)
            one_pass = passes[0]
            print(f"one Spark pass (read and count {lines:,} lines): {one_pass:.1f} s "
                  f"(a second, warm: {passes[1]:.1f} s)")
            if duck is not None:  # what Spark's own JSON reader costs against DuckDB
                print(f"one Spark pass = {one_pass / duck:.1f}x DuckDB (a first run converted "
                      "by Spark's JSON reader, --converter spark, cannot beat it)")
            shutil.rmtree(base / "out", ignore_errors=True)
            for run in ("first run", "second run, nothing new"):
                result = run_pipeline(PipelineOptions((journal,), base / "out"), spark)
                versus = "" if duck is None else f", {result.seconds / duck:.1f}x DuckDB"
                print(f"pipeline, {run}, over {result.records:,} records: "
                      f"{result.seconds:.1f} s beside one Spark pass of {one_pass:.1f} s = "
                      f"{result.seconds / one_pass:.1f}x one pass{versus} "
                      f"({result.seconds / passes[1]:.1f}x the warm pass; report {result.report})")
    finally:
        if args.dir is None and not args.pipeline:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
