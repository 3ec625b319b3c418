"""One rule for estate, role, yard and lane names: printable, no separators, no leading dot.

Control characters (ANSI escapes, newlines, bidi overrides) would otherwise
reach log lines and file names.  Commands and the API refuse them in one
line; names from the network are dropped, and logged escaped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lane import LaneStack, LocalYard
from lane.stats import Drop
from raetlike.cli import main
from raetlike.errors import KeepError, LocalProtocolError
from raetlike.keep import Keep, RemoteEstate
from raetlike.names import (
    MAX_NAME_BYTES,
    InvalidNameError,
    check_name,
    is_valid_name,
    name_problem,
    safe_name,
)
from raetlike.wire.page import paginate

SESSION = "0123456789abcdef01"
HOSTILE = [
    "\x1b[31mred",  # an ANSI escape: repaints the operator's terminal
    "two\nlines",  # forges a log line
    "tab\there",
    "nul\x00",
    "bell\x07",
    "del\x7f",
    "c1\x9b31m",  # the one-character CSI of C1 controls
    "bidi\u202eevil",  # a right-to-left override (Trojan Source)
    "zero\u200bwidth",  # a format character
    "line\u2028sep",
    "no space",
    "nbsp\xa0",
    "a/b",
    "a\\b",
    ".hidden",
    ".",
    "..",
    "",
    "x" * (MAX_NAME_BYTES + 1),
    "é" * (MAX_NAME_BYTES // 2 + 1),  # counted in bytes of UTF-8
]
FINE = ["minion", "minion1.example.com", "web-01_a", "ürün", "名前", "a.b.c", "x" * MAX_NAME_BYTES,
        "main:7530", "UPPER"]


@pytest.mark.parametrize("name", HOSTILE)
def test_names_with_control_characters_separators_or_a_leading_dot_are_invalid(
        name: str) -> None:
    assert not is_valid_name(name)
    problem = name_problem(name)
    assert problem is not None
    assert problem.isprintable()
    with pytest.raises(InvalidNameError) as refused:
        check_name(name, "estate name")
    assert isinstance(refused.value, LocalProtocolError)
    message = str(refused.value)
    assert message.startswith("invalid estate name ")
    assert message.isprintable()  # the name is shown escaped: the message stays one line


@pytest.mark.parametrize("name", FINE)
def test_printable_names_are_valid(name: str) -> None:
    assert is_valid_name(name)
    assert name_problem(name) is None
    assert check_name(name) == name


def test_what_is_wrong_is_said_in_a_few_words() -> None:
    assert name_problem("\x1b[31m") == (
        "must not hold control character '\\x1b' (only printable characters, no whitespace)")
    assert name_problem(".x") == "must not start with '.'"
    assert name_problem("a/b") == "must not hold '/'"
    assert name_problem("") == "must not be empty"
    assert name_problem(7) == "must be a string, not int"


@given(st.text(max_size=30))
def test_a_name_is_valid_exactly_when_printable_without_spaces_separators_or_a_leading_dot(
        name: str) -> None:
    # str.isprintable() is False for every character of Unicode category C* or Z*
    # except the ASCII space
    expected = (0 < len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES
                and name.isprintable() and not {" ", "/", "\\"} & set(name)
                and not name.startswith("."))
    assert is_valid_name(name) is expected


def test_safe_name_escapes_what_could_paint_a_terminal_or_forge_a_line() -> None:
    assert safe_name("minion") == "minion"
    assert safe_name("with space") == "with space"
    assert safe_name("\x1b[31mred\nestate main: joined") == (
        "'\\x1b[31mred\\nestate main: joined'")
    assert safe_name("bidi\u202e") == "'bidi\\u202e'"
    assert safe_name(None) == "None"
    long = safe_name("x" * 1000)
    assert long == "x" * 256 + "... (744 more characters)"


@given(st.text())
def test_safe_name_output_is_always_printable(text: str) -> None:
    assert safe_name(text).isprintable()


# -- where names are used -----------------------------------------------------------------

@pytest.mark.parametrize(
    "args",
    [["estate", "\x1b[31mmain", "--port", "0"],
     ["estate", "main", "--port", "0", "--lane", "la\x1bne"],
     ["yard", "wor\nker", "--lane", "jobs"],
     ["yard", "worker", "--lane", "jo.bs"],
     ["keys", "accept", "mini\x1bon"],
     ["keys", "list", "--estate", ".hidden"],
     ["ping", "--lane", "jobs", "--yard", "a/b"]],
)
def test_the_command_line_refuses_bad_names_in_one_line_naming_them_escaped(
        args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "invalid" in line
    assert line.isprintable()


def test_the_keep_refuses_bad_names_for_its_file_names(tmp_path: Path) -> None:
    with pytest.raises(KeepError, match=r"invalid stack name '\\x1b\[31m"):
        Keep(tmp_path, "\x1b[31mmain")
    keep = Keep(tmp_path, "main")
    for name in ("\x1b[31mevil", "../../etc", ".hidden"):
        with pytest.raises(KeepError, match="invalid estate name"):
            keep.remote_estate_path(name)
        with pytest.raises(KeepError, match="invalid role"):
            keep.remote_role_path(name)
        with pytest.raises(KeepError):
            keep.dump_remote(RemoteEstate(name=name, uid=2, host_address=("h", 1), role="r"))
    assert sorted(p.name for p in (tmp_path / "main" / "remote").iterdir()) == []


def test_lane_and_yard_names_follow_the_rule_and_raet_page_heads() -> None:
    for name in ("\x1b[31mw", "w\x7f", "bidi\u202e", ".w", "名前"):  # the last is not Latin-1
        with pytest.raises(InvalidNameError, match="invalid yard name"):
            LocalYard(name, "jobs", "/tmp/lanes")  # noqa: S108 - never created: refused first
    with pytest.raises(InvalidNameError, match=r"invalid lane name 'jo\.bs': must not hold dots"):
        LocalYard("worker", "jo.bs", "/tmp/lanes")  # noqa: S108
    assert LocalYard("ürün", "jobs", "/tmp/lanes").name == "ürün"  # noqa: S108 - Latin-1


def test_a_page_from_a_yard_with_a_control_character_in_its_name_is_dropped() -> None:
    stack = LaneStack(LocalYard("sink", "jobs", "/tmp/lanes"))  # noqa: S108 - no driver
    (page,) = paginate("\x1b[31mevil", "sink", SESSION, 1, {"k": 1})
    stack.receive_datagram(page, "/tmp/lanes/jobs.evil.uxd", 0.0)  # noqa: S108
    assert stack.next_event() is None
    assert stack.yards == {}
    assert stack.stats.dropped[Drop.MALFORMED] == 1
    (page,) = paginate("good", "sink", SESSION, 1, {"k": 1})
    stack.receive_datagram(page, "/tmp/lanes/jobs.good.uxd", 0.0)  # noqa: S108
    assert list(stack.yards) == ["good"]  # a well-named yard still gets through
