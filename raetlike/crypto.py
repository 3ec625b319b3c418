"""The one facade over libsodium (through libnacl).

No other module imports :mod:`libnacl`.  Keys are typed objects made from raw
bytes or from hex *explicitly* (``from_hex``) — an encoding is never guessed
from a length.  Nonces for boxes are made in exactly one place,
:func:`new_nonce`; AEAD nonces of the fast path come from packet counters
(:func:`counter_nonce`) and are never random.

The calls made per packet (AEAD seal and open, the session box, Ed25519 sign and
verify) go through ``raetlike/_csodium.c`` when it was built at install: the
same libsodium functions, without ctypes' per-call conversions
(docs/performance.md, "The compiled build").  Their ctypes twins below make the
same bytes and raise the same errors, and run when the C module is missing or
``RAETLIKE_PURE_PYTHON`` is set.

RAET 0.6.8's keys map onto these as: a signing key is the Ed25519 *seed*
(``sighex``), a verify key the Ed25519 public key (``verhex``), a private key
the Curve25519 secret (``prihex``), a public key the Curve25519 public key
(``pubhex``).
"""

from __future__ import annotations

import ctypes
import hmac
import logging
import struct
from collections.abc import Callable
from typing import Self, TypeVar

from raetlike._native import compiled
from raetlike.errors import CryptoError, LibsodiumMissingError

try:
    import libnacl
except OSError as exc:  # libnacl looks for libsodium as it is imported
    raise LibsodiumMissingError(
        "libsodium not found: raetlike uses the system's libsodium (Debian and Ubuntu: "
        f"apt-get install libsodium23; Fedora: dnf install libsodium) ({exc})") from None

# libnacl 2.1's crypto_box_easy wrapper calls the zero-padded crypto_box and
# fails on short messages, so the box functions call libsodium directly.
_sodium = libnacl.nacl

log = logging.getLogger(__name__)

__all__ = [
    "KEY_SIZE",
    "NONCE_SIZE",
    "MAC_SIZE",
    "SIGNATURE_SIZE",
    "AEAD_KEY_SIZE",
    "AEAD_NONCE_SIZE",
    "AEAD_TAG_SIZE",
    "SigningKey",
    "VerifyKey",
    "PrivateKey",
    "PublicKey",
    "SessionBox",
    "AeadKey",
    "box",
    "box_open",
    "new_nonce",
    "counter_nonce",
    "random_bytes",
    "derive_key",
]

KEY_SIZE = 32
NONCE_SIZE = 24
MAC_SIZE = 16
SIGNATURE_SIZE = 64
AEAD_KEY_SIZE = 32
AEAD_NONCE_SIZE = 12
AEAD_TAG_SIZE = 16


def _raw(data: bytes, size: int, what: str) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CryptoError(f"{what} must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) != size:
        raise CryptoError(f"{what} must be {size} bytes, got {len(raw)}")
    return raw


def _from_hex(text: str | bytes, size: int, what: str) -> bytes:
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("ascii")
        except UnicodeDecodeError as exc:
            raise CryptoError(f"{what} hex is not ASCII") from exc
    try:
        raw = bytes.fromhex(text)
    except ValueError as exc:
        raise CryptoError(f"{what} is not valid hex") from exc
    return _raw(raw, size, what)


class _Key:
    """Common shape of the four key types: 32 raw bytes, explicit hex."""

    __slots__ = ("_raw",)
    _what = "key"

    def __init__(self, raw: bytes) -> None:
        self._raw = _raw(raw, KEY_SIZE, self._what)

    @classmethod
    def from_hex(cls, text: str | bytes) -> Self:
        """Make the key from 64 hex characters."""
        return cls(_from_hex(text, KEY_SIZE, cls._what))

    def __bytes__(self) -> bytes:
        return self._raw

    @property
    def raw(self) -> bytes:
        """The 32 raw bytes."""
        return self._raw

    def hex(self) -> str:
        """64 lowercase hex characters, as RAET writes them."""
        return self._raw.hex()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return hmac.compare_digest(self._raw, other._raw)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._raw))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._raw[:4].hex()}…)"


class VerifyKey(_Key):
    """An Ed25519 public key: checks signatures."""

    __slots__ = ()
    _what = "verify key"

    def verify(self, signature: bytes, message: bytes) -> None:
        """Raise :class:`CryptoError` unless ``signature`` signs ``message``."""
        _verify(self._raw, signature, message)

    def is_valid(self, signature: bytes, message: bytes) -> bool:
        """True when ``signature`` signs ``message``."""
        try:
            self.verify(signature, message)
        except CryptoError:
            return False
        return True


class SigningKey(_Key):
    """An Ed25519 signing key, held as its 32-byte seed (RAET's ``sighex``)."""

    __slots__ = ("_secret", "_verify")
    _what = "signing key seed"

    def __init__(self, raw: bytes) -> None:
        super().__init__(raw)
        public, secret = libnacl.crypto_sign_seed_keypair(self._raw)
        self._secret: bytes = secret
        self._verify = VerifyKey(public)

    @classmethod
    def generate(cls) -> Self:
        """A fresh random signing key."""
        return cls(random_bytes(KEY_SIZE))

    @property
    def verify_key(self) -> VerifyKey:
        """The matching verify key."""
        return self._verify

    def sign(self, message: bytes) -> bytes:
        """The 64-byte detached signature of ``message``."""
        return _sign(self._secret, message)


class PublicKey(_Key):
    """A Curve25519 public key (RAET's ``pubhex``)."""

    __slots__ = ()
    _what = "public key"


class PrivateKey(_Key):
    """A Curve25519 private key (RAET's ``prihex``)."""

    __slots__ = ("_public",)
    _what = "private key"

    def __init__(self, raw: bytes) -> None:
        super().__init__(raw)
        self._public = PublicKey(libnacl.crypto_scalarmult_base(self._raw))

    @classmethod
    def generate(cls) -> Self:
        """A fresh random private key."""
        return cls(random_bytes(KEY_SIZE))

    @property
    def public_key(self) -> PublicKey:
        """The matching public key."""
        return self._public


def random_bytes(size: int) -> bytes:
    """``size`` bytes from libsodium's CSPRNG."""
    data: bytes = libnacl.randombytes(size)
    return data


def new_nonce() -> bytes:
    """A fresh random 24-byte box nonce — the one place box nonces are made."""
    return random_bytes(NONCE_SIZE)


def counter_nonce(prefix: int, counter: int) -> bytes:
    """The 12-byte AEAD nonce for packet number ``counter`` in direction ``prefix``.

    4 bytes of direction/epoch prefix, then the 64-bit counter, big endian.
    Each (key, prefix, counter) must be used once: callers rekey before the
    counter could wrap.
    """
    if not 0 <= counter < 1 << 64:
        raise CryptoError("AEAD packet counter out of range")
    return _NONCE.pack(prefix & 0xFFFFFFFF, counter)


_NONCE = struct.Struct(">IQ")  # counter_nonce's layout, packed in one call


def box(plain: bytes, nonce: bytes, secret: PrivateKey, peer: PublicKey) -> bytes:
    """``crypto_box``: MAC ‖ ciphertext of ``plain`` (the nonce is not included)."""
    _raw(nonce, NONCE_SIZE, "nonce")
    plain = bytes(plain)
    out = ctypes.create_string_buffer(len(plain) + MAC_SIZE)
    if _sodium.crypto_box_easy(
        out, plain, ctypes.c_ulonglong(len(plain)), nonce, peer.raw, secret.raw
    ):
        raise CryptoError("box failed (weak public key?)")
    return out.raw


def box_open(sealed: bytes, nonce: bytes, secret: PrivateKey, peer: PublicKey) -> bytes:
    """Open a ``crypto_box``; raise :class:`CryptoError` when it does not authenticate."""
    _raw(nonce, NONCE_SIZE, "nonce")
    if len(sealed) < MAC_SIZE:
        raise CryptoError("box too short")
    sealed = bytes(sealed)
    out = ctypes.create_string_buffer(len(sealed) - MAC_SIZE)
    if _sodium.crypto_box_open_easy(
        out, sealed, ctypes.c_ulonglong(len(sealed)), nonce, peer.raw, secret.raw
    ):
        raise CryptoError("box does not open")
    return out.raw


class SessionBox:
    """A precomputed ``crypto_box`` between one secret key and one peer key.

    ``beforenm`` runs once; each :meth:`seal` / :meth:`open` is then a
    symmetric XSalsa20-Poly1305 operation, the same bytes as :func:`box`.
    """

    __slots__ = ("_shared",)

    def __init__(self, secret: PrivateKey, peer: PublicKey) -> None:
        try:
            self._shared: bytes = libnacl.crypto_box_beforenm(peer.raw, secret.raw)
        except (ValueError, libnacl.CryptError) as exc:
            raise CryptoError(f"key agreement failed: {exc}") from exc

    def seal(self, plain: bytes, nonce: bytes) -> bytes:
        """MAC ‖ ciphertext of ``plain``."""
        return _box_seal(self._shared, plain, nonce)

    def open(self, sealed: bytes, nonce: bytes) -> bytes:
        """Plaintext of ``sealed``; :class:`CryptoError` when it does not authenticate."""
        return _box_open(self._shared, sealed, nonce)

    def derive(self, context: bytes) -> bytes:
        """A 32-byte key bound to this shared secret and ``context`` (BLAKE2b keyed)."""
        return derive_key(self._shared, context)


def derive_key(secret: bytes, context: bytes) -> bytes:
    """32 bytes of BLAKE2b keyed by ``secret`` over ``context``."""
    out: bytes = libnacl.crypto_generichash(bytes(context), bytes(secret))
    return out


class AeadKey:
    """ChaCha20-Poly1305 (IETF) with one key: the fast path's packet protection."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = _raw(key, AEAD_KEY_SIZE, "AEAD key")

    def seal(self, plain: bytes, nonce: bytes, associated: bytes) -> bytes:
        """Ciphertext ‖ 16-byte tag; ``associated`` is authenticated, not encrypted."""
        return _aead_seal(self._key, plain, nonce, associated)

    def open(self, sealed: bytes, nonce: bytes, associated: bytes) -> bytes:
        """Plaintext; :class:`CryptoError` when the packet does not authenticate."""
        return _aead_open(self._key, sealed, nonce, associated)


# -- the per-packet calls: libsodium through ctypes, or through raetlike/_csodium.c -------
# Each ctypes twin takes the arguments the C function takes, checks the nonce and packet in
# the same order and raises the same errors; tests/test_csodium.py holds the two to the same
# bytes.  The key is the key object's own bytes, whose size was checked when it was made
# (the C checks it again: it must not read past a short one).

def _aead_function(name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """libsodium's ``crypto_aead_chacha20poly1305_ietf_<name>`` with its argument types set.

    Declared argument types let ctypes pass ``bytes`` and ints straight through,
    which costs a third of libnacl's per-call wrapper on small packets.
    """
    # item access makes a function object of our own: libnacl's cached attribute (which
    # its wrappers call with their own argument conventions) keeps no argtypes
    function = _sodium[f"crypto_aead_chacha20poly1305_ietf_{name}"]
    size = ctypes.c_ulonglong
    pointer = ctypes.c_char_p
    if name == "encrypt":  # c, &clen, m, mlen, ad, adlen, nsec, npub, k
        function.argtypes = [pointer, ctypes.c_void_p, pointer, size, pointer, size,
                             ctypes.c_void_p, pointer, pointer]
    else:  # m, &mlen, nsec, c, clen, ad, adlen, npub, k
        function.argtypes = [pointer, ctypes.c_void_p, ctypes.c_void_p, pointer, size,
                             pointer, size, pointer, pointer]
    function.restype = ctypes.c_int
    return function


_aead_encrypt = _aead_function("encrypt")
_aead_decrypt = _aead_function("decrypt")


def _ctypes_aead_seal(key: bytes, plain: bytes, nonce: bytes, associated: bytes) -> bytes:
    nonce = _raw(nonce, AEAD_NONCE_SIZE, "AEAD nonce")
    plain = bytes(plain)
    associated = bytes(associated)
    out = ctypes.create_string_buffer(len(plain) + AEAD_TAG_SIZE)
    _aead_encrypt(out, None, plain, len(plain), associated, len(associated), None, nonce, key)
    return out.raw


def _ctypes_aead_open(key: bytes, sealed: bytes, nonce: bytes, associated: bytes) -> bytes:
    nonce = _raw(nonce, AEAD_NONCE_SIZE, "AEAD nonce")
    sealed = bytes(sealed)
    if len(sealed) < AEAD_TAG_SIZE:
        raise CryptoError("AEAD packet too short")
    associated = bytes(associated)
    out = ctypes.create_string_buffer(len(sealed) - AEAD_TAG_SIZE)
    if _aead_decrypt(out, None, None, sealed, len(sealed), associated, len(associated),
                     nonce, key):
        raise CryptoError("AEAD packet does not authenticate")
    return out.raw


def _ctypes_box_seal(shared: bytes, plain: bytes, nonce: bytes) -> bytes:
    nonce = _raw(nonce, NONCE_SIZE, "nonce")
    plain = bytes(plain)
    out = ctypes.create_string_buffer(len(plain) + MAC_SIZE)
    if _sodium.crypto_box_easy_afternm(out, plain, ctypes.c_ulonglong(len(plain)), nonce,
                                       shared):
        raise CryptoError("box failed")
    return out.raw


def _ctypes_box_open(shared: bytes, sealed: bytes, nonce: bytes) -> bytes:
    nonce = _raw(nonce, NONCE_SIZE, "nonce")
    sealed = bytes(sealed)
    if len(sealed) < MAC_SIZE:
        raise CryptoError("box too short")
    out = ctypes.create_string_buffer(len(sealed) - MAC_SIZE)
    if _sodium.crypto_box_open_easy_afternm(out, sealed, ctypes.c_ulonglong(len(sealed)),
                                            nonce, shared):
        raise CryptoError("box does not open")
    return out.raw


def _ctypes_sign(secret: bytes, message: bytes) -> bytes:
    signature: bytes = libnacl.crypto_sign_detached(bytes(message), secret)
    return signature


def _ctypes_verify(public: bytes, signature: bytes, message: bytes) -> None:
    signature = _raw(signature, SIGNATURE_SIZE, "signature")
    try:
        libnacl.crypto_sign_verify_detached(signature, bytes(message), public)
    except (ValueError, libnacl.CryptError) as exc:
        raise CryptoError("signature does not verify") from exc


def _bind_compiled() -> bool:
    """True when ``raetlike._csodium`` was built, is wanted, and found libnacl's libsodium."""
    bind = compiled("raetlike._csodium", "bind")
    if bind is None:
        return False
    try:
        bind(_sodium._name, CryptoError)  # the name ctypes loaded the library by
    except OSError as exc:
        log.warning("raetlike: the compiled libsodium binding did not bind (%s); "
                    "using ctypes", exc)
        return False
    return True


_COMPILED = _bind_compiled()
"""True when the per-packet calls go through ``raetlike/_csodium.c``, False for ctypes."""

_Twin = TypeVar("_Twin", bound=Callable[..., object])


def _chosen(name: str, twin: _Twin) -> _Twin:
    """``raetlike._csodium.<name>`` when :data:`_COMPILED`, else its ctypes ``twin``."""
    function: _Twin = compiled("raetlike._csodium", name) if _COMPILED else twin
    return function


_aead_seal = _chosen("aead_seal", _ctypes_aead_seal)
_aead_open = _chosen("aead_open", _ctypes_aead_open)
_box_seal = _chosen("box_seal", _ctypes_box_seal)
_box_open = _chosen("box_open", _ctypes_box_open)
_sign = _chosen("sign", _ctypes_sign)
_verify = _chosen("verify", _ctypes_verify)
