"""The durable outbox's compiled put (``_cdurable.c``) and its pure-Python twin make the
same bytes, and an outbox on either path reads back what the other wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike.durable import _outbox
from raetlike.durable._outbox import COMPILED, DurableOutbox, Stored, _raw_put_python
from raetlike.journal import FsyncPolicy


def test_the_compiled_put_is_built_here() -> None:
    """The install builds _cdurable.c; a failed build must not pass unnoticed (set
    RAETLIKE_PURE_PYTHON=1 to run on the pure path on purpose)."""
    assert COMPILED is not bool(os.environ.get("RAETLIKE_PURE_PYTHON"))


_U64 = st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=300)
@given(store=_U64, message_id=_U64, seq=_U64, remote=st.text(max_size=300),
       expires=st.floats(allow_nan=False), body=st.binary(max_size=2000))
def test_the_compiled_put_makes_the_pure_path_s_bytes(  # noqa: PLR0917
        store: int, message_id: int, seq: int, remote: str, expires: float,
        body: bytes) -> None:
    if not COMPILED:
        pytest.skip("the compiled put is not built (RAETLIKE_PURE_PYTHON)")
    assert _outbox.raw_put(store, message_id, seq, remote, expires, body) == \
        _raw_put_python(store, message_id, seq, remote, expires, body)


def test_a_remote_name_past_65535_bytes_is_refused_on_both_paths() -> None:
    for put in {_outbox.raw_put, _raw_put_python}:
        with pytest.raises(ValueError, match="65535"):
            put(1, 1, 1, "r" * 65536, 1.0, b"")


@pytest.mark.parametrize("path", ["compiled", "pure"])
def test_an_outbox_reads_back_what_either_path_wrote(tmp_path: Path, path: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "compiled" and not COMPILED:
        pytest.skip("the compiled put is not built (RAETLIKE_PURE_PYTHON)")
    if path == "pure":
        monkeypatch.setattr(_outbox, "raw_put", _raw_put_python)
    outbox = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, segment_bytes=4096)
    ids = [outbox.put_raw("rémote", bytes([n]) * n, 100.0 + n)[0] for n in range(60)]
    ids.append(outbox.put("rémote", {"a mapping": [1, 2]}, 7.0))
    for message_id in ids[::3]:
        outbox.done(message_id)
    outbox.close()
    monkeypatch.undo()
    again = DurableOutbox(tmp_path, fsync=FsyncPolicy.NEVER, segment_bytes=4096)
    expected = [Stored(n + 1, "rémote", 100.0 + n, bytes([n]) * n)
                for n in range(60) if n + 1 not in ids[::3]]
    if ids[-1] not in ids[::3]:
        expected.append(Stored(ids[-1], "rémote", 7.0, {"a mapping": [1, 2]}))
    assert again.pending() == expected
    again.close()
