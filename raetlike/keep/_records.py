"""Typed keep records and their RAET 0.6.8 JSON form.

Each record maps RAET's terse JSON keys (``ha``, ``sid``, ``fuid``, ...) to
whole-word fields exactly once, here.  ``to_json`` writes exactly the key set
RAET 0.6.8 writes (RAET discards a file whose key set differs), in RAET's
order; ``from_json`` reads what RAET writes, tolerates keys it does not know,
and raises :class:`KeepError` naming the file and the field for anything else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from raetlike.crypto import PrivateKey, PublicKey, SigningKey, VerifyKey
from raetlike.errors import CryptoError, KeepError
from raetlike.names import name_problem, quoted_name
from raetlike.wire.kinds import Acceptance

__all__ = [
    "HostAddress",
    "LocalEstate",
    "LocalRole",
    "RemoteEstate",
    "RemoteRole",
    "StackTraits",
    "check_name",
]

HostAddress = tuple[str, int]
"""A UDP host address: ``(host, port)``."""

_MAX_PORT = 0xFFFF


def check_name(name: str, what: str) -> str:
    """Return ``name`` if it can name a keep file, else raise :class:`KeepError`.

    Names become part of file names (``estate.<name>.json``), so the rule of
    :mod:`raetlike.names` applies: printable, no whitespace (RAET refuses it
    too), no ``/`` or ``\\``, no leading dot, at most 200 bytes.  Dots inside
    a name are fine (RAET splits on the first dot only).
    """
    problem = name_problem(name)
    if problem is not None:
        raise KeepError(f"invalid {what} {quoted_name(name)}: {problem}")
    return name


def _check_address(address: HostAddress | None, what: str) -> None:
    if address is None:
        return
    host, port = address
    if not isinstance(host, str) or isinstance(port, bool) or not isinstance(port, int):
        raise KeepError(f"invalid {what} {address!r}: must be (host: str, port: int)")
    if not 0 <= port <= _MAX_PORT:
        raise KeepError(f"invalid {what} {address!r}: port out of range")


@dataclass(frozen=True, slots=True)
class LocalEstate:
    """The local estate as RAET keeps it in ``local/estate.json`` (no keys)."""

    name: str
    """The estate's name on the road (``name``)."""
    uid: int
    """The local estate's uid (``uid``)."""
    host_address: HostAddress
    """Where remotes reach this estate (``ha``)."""
    role: str
    """The role whose keys this estate holds (``role``); RAET defaults it to the name."""
    last_uid: int
    """The uid counter: the last uid the stack handed out (``puid``)."""
    session_id: int = 0
    """The local session id (``sid``)."""
    inner_host_address: HostAddress | None = None
    """The address behind a NAT, if any (``iha``)."""
    natted: bool | None = None
    """Whether the estate sits behind a NAT (``natted``)."""
    fqdn: str = ""
    """The fully qualified domain name of the host (``fqdn``)."""
    dynamic: bool | None = None
    """Whether the host address is dynamic (``dyned``)."""
    listen_host_address: HostAddress | None = None
    """Where the stack's socket binds (``aha``); ``None`` means ``host_address``."""

    def __post_init__(self) -> None:
        check_name(self.name, "estate name")
        check_name(self.role, "role")
        _check_address(self.host_address, "host address")
        _check_address(self.inner_host_address, "inner host address")
        _check_address(self.listen_host_address, "listen host address")
        if self.listen_host_address is None:
            object.__setattr__(self, "listen_host_address", self.host_address)

    def to_json(self) -> dict[str, Any]:
        """RAET's ``local/estate.json`` object."""
        return {
            "name": self.name,
            "uid": self.uid,
            "ha": _address_json(self.host_address),
            "iha": _address_json(self.inner_host_address),
            "natted": self.natted,
            "fqdn": self.fqdn,
            "dyned": self.dynamic,
            "sid": self.session_id,
            "puid": self.last_uid,
            "aha": _address_json(self.listen_host_address),
            "role": self.role,
        }

    @classmethod
    def from_json(cls, data: object, path: Path) -> LocalEstate:
        """Read RAET's ``local/estate.json`` object read from ``path``."""
        fields = _Fields(data, path)
        name = fields.text("name")
        return fields.build(
            lambda: cls(
                name=name,
                uid=fields.integer("uid"),
                host_address=fields.address("ha"),
                role=fields.text("role", default=name),
                last_uid=fields.integer("puid"),
                session_id=fields.integer("sid", default=0),
                inner_host_address=fields.optional_address("iha"),
                natted=fields.optional_flag("natted"),
                fqdn=fields.text("fqdn", default=""),
                dynamic=fields.optional_flag("dyned"),
                listen_host_address=fields.optional_address("aha"),
            )
        )


@dataclass(frozen=True, slots=True)
class StackTraits:
    """What raetlike also keeps about the local stack (``local/stack.json``).

    RAET 0.6.8 does not persist these (it takes them as stack arguments) and
    never reads this file, so keeping them here leaves RAET compatibility intact.
    """

    main: bool | None = None
    """Whether the local estate is the road's main estate."""
    kind: int | None = None
    """The application kind of the local estate."""
    mutable: bool | None = None
    """Whether remotes' road data may change after their first join."""

    def to_json(self) -> dict[str, Any]:
        """The ``local/stack.json`` object."""
        return {"main": self.main, "kind": self.kind, "mutable": self.mutable}

    @classmethod
    def from_json(cls, data: object, path: Path) -> StackTraits:
        """Read a ``local/stack.json`` object read from ``path``."""
        fields = _Fields(data, path)
        return cls(
            main=fields.optional_flag("main"),
            kind=fields.optional_integer("kind"),
            mutable=fields.optional_flag("mutable"),
        )


@dataclass(frozen=True, slots=True)
class LocalRole:
    """The local estate's long-term keys (``role/local/role.json``)."""

    role: str
    """The role these keys belong to (``role``)."""
    signing_key: SigningKey
    """The Ed25519 signing key seed (``sighex``)."""
    private_key: PrivateKey
    """The Curve25519 private key (``prihex``)."""

    def __post_init__(self) -> None:
        check_name(self.role, "role")

    @classmethod
    def generate(cls, role: str) -> LocalRole:
        """Fresh random keys for ``role``."""
        return cls(role=role, signing_key=SigningKey.generate(), private_key=PrivateKey.generate())

    def to_json(self) -> dict[str, Any]:
        """RAET's ``role/local/role.json`` object."""
        return {
            "role": self.role,
            "sighex": self.signing_key.hex(),
            "prihex": self.private_key.hex(),
        }

    @classmethod
    def from_json(cls, data: object, path: Path) -> LocalRole:
        """Read RAET's ``role/local/role.json`` object read from ``path``."""
        fields = _Fields(data, path)
        signing_key = fields.key("sighex", SigningKey)
        private_key = fields.key("prihex", PrivateKey)
        if signing_key is None or private_key is None:
            raise KeepError(f"{path}: local role file has no keys")
        return fields.build(
            lambda: cls(role=fields.text("role"), signing_key=signing_key, private_key=private_key)
        )


@dataclass(frozen=True, slots=True)
class RemoteEstate:
    """A remote estate as RAET keeps it in ``remote/estate.<name>.json`` (no keys)."""

    name: str
    """The remote's name (``name``); also its file name."""
    uid: int
    """Our uid for the remote (``uid``)."""
    host_address: HostAddress
    """Where the remote is reached (``ha``)."""
    role: str
    """The role whose keys the remote presents (``role``)."""
    far_uid: int = 0
    """The remote's uid for us (``fuid``); 0 before a join."""
    session_id: int = 0
    """This stack's session id with the remote (``sid``); RAET bumps it at each restart."""
    main: bool | None = False
    """Whether the remote is the road's main estate (``main``)."""
    kind: int | None = 0
    """The remote's application kind (``kind``)."""
    joined: bool | None = None
    """Whether the remote has joined (``joined``)."""
    inner_host_address: HostAddress | None = None
    """The remote's address behind a NAT, if any (``iha``)."""
    natted: bool | None = None
    """Whether the remote sits behind a NAT (``natted``)."""
    fqdn: str = ""
    """The remote host's fully qualified domain name (``fqdn``)."""
    dynamic: bool | None = None
    """Whether the remote's host address is dynamic (``dyned``)."""

    def __post_init__(self) -> None:
        check_name(self.name, "estate name")
        check_name(self.role, "role")
        _check_address(self.host_address, "host address")
        _check_address(self.inner_host_address, "inner host address")

    def to_json(self) -> dict[str, Any]:
        """RAET's ``remote/estate.<name>.json`` object."""
        return {
            "name": self.name,
            "uid": self.uid,
            "fuid": self.far_uid,
            "ha": _address_json(self.host_address),
            "iha": _address_json(self.inner_host_address),
            "natted": self.natted,
            "fqdn": self.fqdn,
            "dyned": self.dynamic,
            "sid": self.session_id,
            "main": self.main,
            "kind": self.kind,
            "joined": self.joined,
            "role": self.role,
        }

    @classmethod
    def from_json(cls, data: object, path: Path) -> RemoteEstate:
        """Read RAET's ``remote/estate.<name>.json`` object read from ``path``."""
        fields = _Fields(data, path)
        name = fields.text("name")
        return fields.build(
            lambda: cls(
                name=name,
                uid=fields.integer("uid"),
                host_address=fields.address("ha"),
                role=fields.text("role", default=name),
                far_uid=fields.integer("fuid", default=0),
                session_id=fields.integer("sid", default=0),
                main=fields.optional_flag("main", default=False),
                kind=fields.optional_integer("kind", default=0),
                joined=fields.optional_flag("joined"),
                inner_host_address=fields.optional_address("iha"),
                natted=fields.optional_flag("natted"),
                fqdn=fields.text("fqdn", default=""),
                dynamic=fields.optional_flag("dyned"),
            )
        )


@dataclass(frozen=True, slots=True)
class RemoteRole:
    """A remote role's keys and acceptance (``role/remote/role.<role>.json``).

    ``acceptance`` is ``None`` when RAET stored no decision yet; the keys are
    ``None`` when RAET stored them empty (a remote dumped before its join).
    """

    role: str
    """The role (``role``); also the file name."""
    acceptance: Acceptance | None = None
    """Pending, accepted or rejected (``acceptance``)."""
    verify_key: VerifyKey | None = field(default=None)
    """The role's Ed25519 verify key (``verhex``)."""
    public_key: PublicKey | None = field(default=None)
    """The role's Curve25519 public key (``pubhex``)."""

    def __post_init__(self) -> None:
        check_name(self.role, "role")

    def has_keys(self, verify_key: VerifyKey, public_key: PublicKey) -> bool:
        """True when the stored keys are exactly these two."""
        return self.verify_key == verify_key and self.public_key == public_key

    def to_json(self) -> dict[str, Any]:
        """RAET's ``role/remote/role.<role>.json`` object."""
        return {
            "role": self.role,
            "acceptance": None if self.acceptance is None else int(self.acceptance),
            "verhex": "" if self.verify_key is None else self.verify_key.hex(),
            "pubhex": "" if self.public_key is None else self.public_key.hex(),
        }

    @classmethod
    def from_json(cls, data: object, path: Path) -> RemoteRole:
        """Read RAET's ``role/remote/role.<role>.json`` object read from ``path``."""
        fields = _Fields(data, path)
        return fields.build(
            lambda: cls(
                role=fields.text("role"),
                acceptance=fields.acceptance("acceptance"),
                verify_key=fields.key("verhex", VerifyKey),
                public_key=fields.key("pubhex", PublicKey),
            )
        )


def _address_json(address: HostAddress | None) -> list[Any] | None:
    return None if address is None else [address[0], address[1]]


_MISSING: Any = object()
_R = TypeVar("_R")
_K = TypeVar("_K", SigningKey, PrivateKey, VerifyKey, PublicKey)


class _Fields:
    """Typed reads of one JSON object, with errors that name the file and the key."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: object, path: Path) -> None:
        if not isinstance(data, dict):
            raise KeepError(f"{path}: expected a JSON object, got {type(data).__name__}")
        self._data: dict[str, Any] = data
        self._path = path

    def _fail(self, key: str, expected: str) -> KeepError:
        value = self._data.get(key, _MISSING)
        got = "nothing" if value is _MISSING else repr(value)
        return KeepError(f"{self._path}: field {key!r} must be {expected}, got {got}")

    def _get(self, key: str, default: Any, expected: str) -> Any:
        if key in self._data:
            return self._data[key]
        if default is _MISSING:
            raise self._fail(key, expected)
        return default

    def build(self, make: Callable[[], _R]) -> _R:
        """Call ``make()``; a record's own validation error gets the file name."""
        try:
            return make()
        except KeepError as exc:
            if str(self._path) in str(exc):
                raise
            raise KeepError(f"{self._path}: {exc}") from exc

    def text(self, key: str, default: Any = _MISSING) -> str:
        value = self._get(key, default, "a string")
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def integer(self, key: str, default: Any = _MISSING) -> int:
        value = self._get(key, default, "an integer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer")
        return value

    def optional_integer(self, key: str, default: Any = None) -> int | None:
        value = self._get(key, default, "an integer or null")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer or null")
        return value

    def optional_flag(self, key: str, default: Any = None) -> bool | None:
        value = self._get(key, default, "true, false or null")
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int) and value in {0, 1}:  # tolerate 0/1 for false/true
            return bool(value)
        raise self._fail(key, "true, false or null")

    def address(self, key: str) -> HostAddress:
        value = self.optional_address(key, default=_MISSING)
        if value is None:
            raise self._fail(key, "[host, port]")
        return value

    def optional_address(self, key: str, default: Any = None) -> HostAddress | None:
        value = self._get(key, default, "[host, port] or null")
        if value is None:
            return None
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not isinstance(value[0], str)
            or isinstance(value[1], bool)
            or not isinstance(value[1], int)
        ):
            raise self._fail(key, "[host, port] or null")
        return (value[0], value[1])

    def acceptance(self, key: str) -> Acceptance | None:
        value = self._get(key, None, "0, 1, 2 or null")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "0, 1, 2 or null")
        try:
            return Acceptance(value)
        except ValueError:
            raise self._fail(key, "0, 1, 2 or null") from None

    def key(self, key: str, kind: type[_K]) -> _K | None:
        value = self._get(key, None, "64 hex digits")
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise self._fail(key, "64 hex digits")
        try:
            return kind.from_hex(value)
        except CryptoError as exc:
            raise KeepError(f"{self._path}: field {key!r}: {exc}") from exc
