"""``raetlike bench`` names each measurement on one redrawn line, on a terminal only."""

from __future__ import annotations

import io
import os
import select
import time

from raetlike.bench import BenchOptions, StatusLine
from raetlike.bench._raw import measure_raw


def test_the_status_line_writes_nothing_when_the_output_is_not_a_terminal() -> None:
    out = io.StringIO()
    status = StatusLine(out)
    status("raw UDP: round trips")
    status.clear()
    assert out.getvalue() == ""


READ_DEADLINE = 10.0  # seconds the pty gets to hand over what was written to it


def read_until(fd: int, expected_length: int, timeout: float = READ_DEADLINE) -> bytes:
    """Read from ``fd`` until ``expected_length`` bytes came or ``timeout`` ran out.

    A pty hands writes over as they reach it, not all at once: one read may
    return only the first of several writes.
    """
    deadline = time.monotonic() + timeout
    shown = b""
    while len(shown) < expected_length:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        shown += os.read(fd, 4096)
    return shown


def test_on_a_terminal_each_measurement_redraws_one_line_and_clear_removes_it() -> None:
    expected = ("\r\x1b[Kmeasuring raw UDP: one-way ..."
                "\r\x1b[Kmeasuring raw UDP: round trips ...\r\x1b[K")
    master, slave = os.openpty()
    try:
        with open(slave, "w", closefd=False) as terminal:
            status = StatusLine(terminal)
            status("raw UDP: one-way")
            status("raw UDP: round trips")
            status.clear()
        shown = read_until(master, len(expected.encode())).decode()
        # anything more (a stray newline) would be there by now: the writes are done
        assert not select.select([master], [], [], 0)[0]
    finally:
        os.close(master)
        os.close(slave)
    assert shown == expected
    assert "\n" not in shown


def test_a_measurement_reports_each_step_by_name_as_it_starts() -> None:
    steps: list[str] = []
    figures = measure_raw(BenchOptions(quick=True, repeat=1, scale=100), steps.append)
    assert steps == ["raw UDP: one-way, 500 datagrams", "raw UDP: round trips",
                     "raw UDP: 10 MB"]
    assert figures["one_way_msgs_per_s"] > 0
