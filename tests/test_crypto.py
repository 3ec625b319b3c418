import pytest

from raetlike import crypto
from raetlike.errors import CryptoError


def test_signatures_verify_and_tampering_is_caught() -> None:
    key = crypto.SigningKey.generate()
    sig = key.sign(b"hello")
    assert len(sig) == 64
    key.verify_key.verify(sig, b"hello")
    with pytest.raises(CryptoError):
        key.verify_key.verify(sig, b"hellp")
    assert not crypto.SigningKey.generate().verify_key.is_valid(sig, b"hello")


def test_signing_key_is_the_seed_and_round_trips_through_hex() -> None:
    key = crypto.SigningKey(bytes(range(32)))
    again = crypto.SigningKey.from_hex(key.hex())
    assert again == key
    assert again.verify_key == key.verify_key
    assert key.hex() == bytes(range(32)).hex()


def test_hex_is_explicit_and_wrong_sizes_are_rejected() -> None:
    with pytest.raises(CryptoError, match="32 bytes"):
        crypto.PublicKey(b"\x00" * 64)
    with pytest.raises(CryptoError, match="not valid hex"):
        crypto.PublicKey.from_hex("zz" * 32)


def test_box_and_session_box_write_the_same_bytes() -> None:
    alice, bob = crypto.PrivateKey.generate(), crypto.PrivateKey.generate()
    nonce = crypto.new_nonce()
    sealed = crypto.box(b"secret", nonce, alice, bob.public_key)
    assert len(sealed) == len(b"secret") + crypto.MAC_SIZE
    assert crypto.SessionBox(alice, bob.public_key).seal(b"secret", nonce) == sealed
    assert crypto.box_open(sealed, nonce, bob, alice.public_key) == b"secret"
    assert crypto.SessionBox(bob, alice.public_key).open(sealed, nonce) == b"secret"
    with pytest.raises(CryptoError):
        crypto.box_open(sealed[:-1] + bytes([sealed[-1] ^ 1]), nonce, bob, alice.public_key)


def test_session_boxes_of_both_sides_derive_the_same_key() -> None:
    alice, bob = crypto.PrivateKey.generate(), crypto.PrivateKey.generate()
    a = crypto.SessionBox(alice, bob.public_key).derive(b"ctx")
    assert a == crypto.SessionBox(bob, alice.public_key).derive(b"ctx")
    assert a != crypto.SessionBox(bob, alice.public_key).derive(b"other")


def test_aead_authenticates_associated_data() -> None:
    key = crypto.AeadKey(crypto.random_bytes(32))
    nonce = crypto.counter_nonce(1, 7)
    sealed = key.seal(b"body", nonce, b"head")
    assert key.open(sealed, nonce, b"head") == b"body"
    with pytest.raises(CryptoError):
        key.open(sealed, nonce, b"hea")
    with pytest.raises(CryptoError):
        key.open(sealed, crypto.counter_nonce(1, 8), b"head")


def test_nonces_are_fresh() -> None:
    assert len({crypto.new_nonce() for _ in range(100)}) == 100
