"""libsodium through ``raetlike/_csodium.c`` and through ctypes make the same bytes and raise
the same errors (``raetlike.crypto`` uses the C when it was built; the ctypes twins are its
fallback).  tests/test_compiled_build.py fails when the C was not built."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raetlike import crypto
from raetlike.errors import CryptoError

_csodium = pytest.importorskip("raetlike._csodium", reason="raetlike._csodium was not built")
# bound here as well, so that the C is tested on a RAETLIKE_PURE_PYTHON run too (bind twice
# is harmless: the same library, the same functions)
_csodium.bind(crypto._sodium._name, CryptoError)

_Bytes = bytes | bytearray | memoryview


def _outcome(function: Callable[..., object], *args: object) -> object:
    """What the call returns, or the CryptoError it raises as (class name, message)."""
    try:
        return function(*args)
    except CryptoError as exc:
        return ("CryptoError", str(exc))


def _as(kind: str, data: bytes) -> _Bytes:
    """``data`` as the bytes-like type ``kind``; "strided" is a non-contiguous memoryview."""
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(data)
    if kind == "strided":
        doubled = bytearray(2 * len(data))
        doubled[::2] = data
        return memoryview(doubled)[::2]
    return data


_KINDS = st.sampled_from(["bytes", "bytearray", "memoryview", "strided"])
_KEYS = st.binary(min_size=32, max_size=32)


@settings(max_examples=300)
@given(key=_KEYS, nonce=st.binary(min_size=12, max_size=12), plain=st.binary(max_size=1500),
       associated=st.binary(max_size=64), kind=_KINDS)
def test_aead_seal_and_open_make_the_same_bytes_on_both_paths(
        key: bytes, nonce: bytes, plain: bytes, associated: bytes, kind: str) -> None:
    sealed = crypto._ctypes_aead_seal(key, plain, nonce, associated)
    assert len(sealed) == len(plain) + crypto.AEAD_TAG_SIZE
    assert _csodium.aead_seal(_as(kind, key), _as(kind, plain), _as(kind, nonce),
                              _as(kind, associated)) == sealed
    assert _csodium.aead_open(key, _as(kind, sealed), nonce, _as(kind, associated)) == plain
    assert crypto._ctypes_aead_open(key, _as(kind, sealed), nonce, associated) == plain


@settings(max_examples=200)
@given(shared=_KEYS, nonce=st.binary(min_size=24, max_size=24), plain=st.binary(max_size=1500),
       kind=_KINDS)
def test_session_box_seal_and_open_make_the_same_bytes_on_both_paths(
        shared: bytes, nonce: bytes, plain: bytes, kind: str) -> None:
    sealed = crypto._ctypes_box_seal(shared, plain, nonce)
    assert _csodium.box_seal(_as(kind, shared), _as(kind, plain), _as(kind, nonce)) == sealed
    assert _csodium.box_open(shared, _as(kind, sealed), nonce) == plain
    assert crypto._ctypes_box_open(shared, _as(kind, sealed), nonce) == plain


@settings(max_examples=50)
@given(seed=_KEYS, message=st.binary(max_size=500), kind=_KINDS)
def test_signatures_are_the_same_bytes_on_both_paths(seed: bytes, message: bytes,
                                                     kind: str) -> None:
    key = crypto.SigningKey(seed)
    signature = crypto._ctypes_sign(key._secret, message)
    assert _csodium.sign(_as(kind, key._secret), _as(kind, message)) == signature
    public = key.verify_key.raw
    assert _csodium.verify(public, _as(kind, signature), _as(kind, message)) is None
    crypto._ctypes_verify(public, _as(kind, signature), _as(kind, message))
    forged = bytes([signature[0] ^ 1]) + signature[1:]
    for verify in (_csodium.verify, crypto._ctypes_verify):
        assert _outcome(verify, public, forged, message) == (
            "CryptoError", "signature does not verify")


_AEAD_KEY = bytes(range(32))
_AEAD_NONCE = bytes(12)


@settings(max_examples=300)
@given(sealed=st.binary(max_size=64), associated=st.binary(max_size=16), kind=_KINDS)
def test_aead_open_of_garbage_raises_the_same_crypto_error_on_both_paths(
        sealed: bytes, associated: bytes, kind: str) -> None:
    compiled = _outcome(_csodium.aead_open, _AEAD_KEY, _as(kind, sealed), _AEAD_NONCE,
                        associated)
    assert compiled == _outcome(crypto._ctypes_aead_open, _AEAD_KEY, _as(kind, sealed),
                                _AEAD_NONCE, associated)
    message = "AEAD packet too short" if len(sealed) < 16 else \
        "AEAD packet does not authenticate"
    assert compiled == ("CryptoError", message)


@settings(max_examples=300)
@given(plain=st.binary(max_size=200), associated=st.binary(max_size=16), data=st.data())
def test_a_tampered_aead_packet_raises_the_same_crypto_error_on_both_paths(
        plain: bytes, associated: bytes, data: st.DataObject) -> None:
    sealed = bytearray(_csodium.aead_seal(_AEAD_KEY, plain, _AEAD_NONCE, associated))
    where = data.draw(st.integers(0, len(sealed) - 1))
    sealed[where] ^= data.draw(st.integers(1, 255))
    for open_ in (_csodium.aead_open, crypto._ctypes_aead_open):
        assert _outcome(open_, _AEAD_KEY, sealed, _AEAD_NONCE, associated) == (
            "CryptoError", "AEAD packet does not authenticate")


@pytest.mark.parametrize("sealed", [b"", b"\x00" * 15, b"\x00" * 16, b"\x00" * 100])
def test_a_short_or_forged_box_raises_the_same_crypto_error_on_both_paths(
        sealed: bytes) -> None:
    shared, nonce = bytes(range(32)), bytes(24)
    message = "box too short" if len(sealed) < 16 else "box does not open"
    for open_ in (_csodium.box_open, crypto._ctypes_box_open):
        assert _outcome(open_, shared, sealed, nonce) == ("CryptoError", message)


@pytest.mark.parametrize("nonce", [b"", b"\x00" * 11, b"\x00" * 13, b"\x00" * 24, "n" * 12, 12])
def test_a_wrong_aead_nonce_raises_the_same_crypto_error_on_both_paths(nonce: object) -> None:
    for seal, open_ in ((_csodium.aead_seal, _csodium.aead_open),
                        (crypto._ctypes_aead_seal, crypto._ctypes_aead_open)):
        if isinstance(nonce, bytes):
            expected = ("CryptoError", f"AEAD nonce must be 12 bytes, got {len(nonce)}")
        else:
            expected = ("CryptoError", f"AEAD nonce must be bytes, not {type(nonce).__name__}")
        assert _outcome(seal, _AEAD_KEY, b"plain", nonce, b"") == expected
        assert _outcome(open_, _AEAD_KEY, b"\x00" * 20, nonce, b"") == expected


@pytest.mark.parametrize("nonce", [b"", b"\x00" * 12, b"\x00" * 25])
def test_a_wrong_box_nonce_raises_the_same_crypto_error_on_both_paths(nonce: bytes) -> None:
    expected = ("CryptoError", f"nonce must be 24 bytes, got {len(nonce)}")
    for seal, open_ in ((_csodium.box_seal, _csodium.box_open),
                        (crypto._ctypes_box_seal, crypto._ctypes_box_open)):
        assert _outcome(seal, bytes(32), b"plain", nonce) == expected
        assert _outcome(open_, bytes(32), b"\x00" * 20, nonce) == expected


@pytest.mark.parametrize("signature", [b"", b"\x00" * 63, b"\x00" * 65])
def test_a_wrong_size_signature_raises_the_same_crypto_error_on_both_paths(
        signature: bytes) -> None:
    public = crypto.SigningKey(bytes(32)).verify_key.raw
    expected = ("CryptoError", f"signature must be 64 bytes, got {len(signature)}")
    for verify in (_csodium.verify, crypto._ctypes_verify):
        assert _outcome(verify, public, signature, b"message") == expected


@pytest.mark.parametrize("size", [0, 16, 31, 33, 63, 64])
def test_the_c_refuses_a_key_of_the_wrong_size_instead_of_reading_past_it(size: int) -> None:
    """The ctypes twins are given only key objects' checked bytes; the C checks again."""
    key = b"\x01" * size
    expected = f"must be 32 bytes, got {size}"
    calls: list[Callable[[], object]] = [
        lambda: _csodium.aead_seal(key, b"p", _AEAD_NONCE, b""),
        lambda: _csodium.aead_open(key, b"\x00" * 16, _AEAD_NONCE, b""),
        lambda: _csodium.box_seal(key, b"p", bytes(24)),
        lambda: _csodium.box_open(key, b"\x00" * 16, bytes(24)),
        lambda: _csodium.verify(key, bytes(64), b"m"),
    ]
    for call in calls:
        with pytest.raises(CryptoError, match=expected):
            call()
    if size != 64:  # an Ed25519 secret is 64 bytes (seed and public key)
        with pytest.raises(CryptoError, match=f"must be 64 bytes, got {size}"):
            _csodium.sign(key, b"m")


def test_the_c_refuses_what_is_not_bytes_like() -> None:
    with pytest.raises(TypeError):
        _csodium.aead_seal(_AEAD_KEY, "plain", _AEAD_NONCE, b"")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _csodium.aead_open(_AEAD_KEY, b"\x00" * 16, _AEAD_NONCE, 3)  # type: ignore[arg-type]
    with pytest.raises(CryptoError, match="AEAD key must be bytes, not NoneType"):
        _csodium.aead_seal(None, b"", _AEAD_NONCE, b"")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _csodium.sign()  # type: ignore[call-arg]


_PATHS = {
    "compiled": {name: getattr(_csodium, name) for name in
                 ("aead_seal", "aead_open", "box_seal", "box_open", "sign", "verify")},
    "ctypes": {name: getattr(crypto, f"_ctypes_{name}") for name in
               ("aead_seal", "aead_open", "box_seal", "box_open", "sign", "verify")},
}


@pytest.mark.parametrize("path", sorted(_PATHS))
def test_the_key_objects_work_the_same_on_either_path(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, function in _PATHS[path].items():
        monkeypatch.setattr(crypto, f"_{name}", function)
    aead = crypto.AeadKey(bytes(range(32)))
    nonce = crypto.counter_nonce(3, 9)
    sealed = aead.seal(b"body", nonce, b"head")
    # the bytes the ctypes path wrote before the C binding existed
    assert sealed.hex() == "0a9300116163f77fcf1489271f050f40de3f0381"
    assert aead.open(memoryview(sealed), nonce, b"head") == b"body"
    with pytest.raises(CryptoError, match="does not authenticate"):
        aead.open(sealed, nonce, b"hea")
    with pytest.raises(CryptoError, match="AEAD key must be 32 bytes"):
        crypto.AeadKey(bytes(31))

    alice, bob = crypto.PrivateKey(bytes(range(32))), crypto.PrivateKey(bytes(range(1, 33)))
    box_nonce = bytes(range(24))
    boxed = crypto.SessionBox(alice, bob.public_key).seal(b"secret", box_nonce)
    assert boxed == crypto.box(b"secret", box_nonce, alice, bob.public_key)
    assert crypto.SessionBox(bob, alice.public_key).open(boxed, box_nonce) == b"secret"

    signer = crypto.SigningKey(bytes(range(32)))
    signature = signer.sign(b"message")
    assert signature.hex() == (
        "7bc0ea578290c8dcf6fc8a6e134a7f3e794ddd7e8922108bccd6202f95de532b"
        "92c2298dc8e161ac2b5e3653f92c5b0e12adf26b3d46e7bd2057715f25d3e205")
    signer.verify_key.verify(signature, b"message")
    assert not signer.verify_key.is_valid(signature, b"massage")
