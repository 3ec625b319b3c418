"""The writer's batch (the C one and its Python twin) stays sound under odd callers: a
descriptor borrowed from another class, a signal handler or a thread touching it while
its write() waits, a node whose hash runs Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raetlike.journal import JournalWriter, read_journal
from raetlike.journal import _delivery as delivery_module
from raetlike.journal._delivery import COMPILED
from raetlike.journal._writer import _CBATCH, _PyBatch
from road.events import MessageReceived

PATHS = [pytest.param(True, id="compiled"), pytest.param(False, id="pure")]
FIELDS = ("remote", "body", "transaction_id", "segments", "session_id")


def _writer(tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> JournalWriter:
    if not compiled:
        monkeypatch.setattr(delivery_module, "_APPEND_PLAIN", None)
    elif not COMPILED:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    writer = JournalWriter(tmp_path, "main")
    assert (type(writer._batch).__name__ == "Batch") is compiled  # the path under test
    return writer


def _batch(compiled: bool) -> Any:
    if not compiled:
        return _PyBatch()
    if _CBATCH is None:
        pytest.skip("the compiled path is not built (RAETLIKE_PURE_PYTHON)")
    return _CBATCH({}, lambda *_args, **_kwargs: None, lambda: None)


@pytest.mark.parametrize("compiled", PATHS)
def test_slots_borrowed_from_an_unrelated_class_are_not_read_at_their_offsets(
        tmp_path: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """C(B) given A's member descriptors: Python refuses to read them on a C (TypeError);
    the C batch read B's slots at A's offsets as if they were the fields (and past the
    object when A's are further)."""

    class A:
        __slots__ = FIELDS

    class B:
        __slots__ = ("x0", "x1", "x2", "x3", "x4")

    class C(B):
        __slots__ = ()

    for name in FIELDS:
        setattr(C, name, A.__dict__[name])
    foreign: Any = C()
    foreign.x0, foreign.x1, foreign.x2, foreign.x3, foreign.x4 = "peer", b"abc", 1, 9, 7
    writer = _writer(tmp_path, compiled, monkeypatch)
    event = MessageReceived(remote="peer", body=b"x", session_id=1, transaction_id=2,
                            segments=1)
    writer.record_delivery("main", event, 1.7e9)  # the pair's prefix is kept
    for _ in range(3):
        with pytest.raises(TypeError, match="doesn't apply"):
            writer.record_delivery("main", foreign, 1.7e9)
    writer.close()
    assert len(read_journal([tmp_path]).records) == 1
