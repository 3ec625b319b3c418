"""Road packet bodies (serialization) and coats (encryption of the body).

Bodies as RAET 0.6.8 writes them: a mapping as compact JSON (``bk`` 1) or
msgpack (``bk`` 3), bytes as they are (``bk`` 2); an empty mapping is no
bytes at all.  msgpack strings are written in the legacy *raw* type (as
msgpack-python did for RAET 0.6.8: no ``str8``, no ``bin``), and read from
either the raw or the str type.

A nacl coat (``ck`` 1) is ``crypto_box`` MAC+ciphertext followed by the
24-byte nonce; an empty body gets an empty coat.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgpack

from raetlike.crypto import MAC_SIZE, NONCE_SIZE, SessionBox, new_nonce
from raetlike.errors import CryptoError, LocalProtocolError, PacketError
from raetlike.wire.kinds import BodyKind

__all__ = ["pack_body", "parse_body", "coat", "uncoat"]

_SEPARATORS = (",", ":")
_BAD_MSGPACK = (ValueError, TypeError, RecursionError, msgpack.UnpackException)


def _mapping(kind: BodyKind, body: object) -> Mapping[str, Any] | None:
    if body is None or isinstance(body, Mapping):
        return body
    raise LocalProtocolError(f"a {kind.name} body must be a mapping, not {type(body).__name__}")


def pack_body(kind: BodyKind, body: Mapping[str, Any] | bytes | None) -> bytes:
    """Serialize ``body`` as ``kind``; :class:`LocalProtocolError` when it cannot be."""
    if kind is BodyKind.RAW:
        if body is None:
            return b""
        if not isinstance(body, bytes | bytearray | memoryview):
            raise LocalProtocolError(f"a RAW body must be bytes, not {type(body).__name__}")
        return bytes(body)
    if kind is BodyKind.NADA:
        if body:
            raise LocalProtocolError("a NADA body must be empty")
        return b""
    mapping = _mapping(kind, body)
    if not mapping:
        return b""
    try:
        if kind is BodyKind.JSON:
            return json.dumps(mapping, separators=_SEPARATORS).encode("ascii")
        if kind is BodyKind.MSGPACK:
            packed: bytes = msgpack.packb(mapping, use_bin_type=False)
            return packed
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise LocalProtocolError(f"body does not serialize as {kind.name}: {exc}") from exc
    raise LocalProtocolError(f"unknown body kind {kind!r}")


def _checked_mapping(value: object, kind: BodyKind) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PacketError("bad-body", f"{kind.name} body is not a mapping")
    if not all(type(key) is str for key in value):
        raise PacketError("bad-body", f"{kind.name} body has a key that is not a string")
    return value


def parse_body(kind: BodyKind, data: bytes) -> dict[str, Any] | bytes:
    """Deserialize ``data`` of body kind ``kind``; :class:`PacketError` on garbage.

    JSON and msgpack bodies must be mappings with string keys; empty bytes
    give an empty mapping.  A RAW body comes back as bytes.
    """
    if kind is BodyKind.RAW:
        return bytes(data)
    if kind is BodyKind.NADA:
        if data:
            raise PacketError("bad-body", "a NADA body must be empty")
        return {}
    if not data:
        return {}
    if kind is BodyKind.JSON:
        try:
            value = json.loads(bytes(data).decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise PacketError("bad-body", f"JSON body does not decode: {exc}") from None
        return _checked_mapping(value, kind)
    if kind is BodyKind.MSGPACK:
        try:
            value = msgpack.unpackb(bytes(data), raw=False, strict_map_key=False)
        except _BAD_MSGPACK as exc:
            raise PacketError("bad-body", f"msgpack body does not decode: {exc}") from None
        return _checked_mapping(value, kind)
    raise PacketError("bad-kind", f"unknown body kind {kind!r}")


def coat(body: bytes, session: SessionBox, nonce: bytes | None = None) -> bytes:
    """Encrypt ``body`` for a nacl coat: MAC+ciphertext, then the nonce.

    An empty body gets an empty coat.  ``nonce`` is for tests and vectors;
    by default a fresh one comes from :func:`raetlike.crypto.new_nonce`.
    """
    if not body:
        return b""
    if nonce is None:
        nonce = new_nonce()
    return session.seal(body, nonce) + nonce


def uncoat(data: bytes, session: SessionBox) -> bytes:
    """Decrypt a nacl coat; raise ``PacketError("bad-coat")`` when it does not open.

    Every failure — too short, wrong key, tampered bytes — is the same
    :class:`PacketError` with reason ``bad-coat`` (the :class:`CryptoError` is
    its ``__cause__``).  An empty coat is an empty body.
    """
    if not data:
        return b""
    if len(data) < MAC_SIZE + NONCE_SIZE:
        raise PacketError("bad-coat", f"coat of {len(data)} bytes is too short")
    try:
        return session.open(data[:-NONCE_SIZE], data[-NONCE_SIZE:])
    except CryptoError as exc:
        raise PacketError("bad-coat", str(exc)) from exc
