"""Sealing what a store keeps: encrypted and authenticated under the server's key, bound to
the key it is kept under, and found by a digest that names no one.

A store (Redis above all) must never hold a subject's data in the clear, and a blob it
holds must open only where it was written: `Sealer.seal` encrypts with AES-256-GCM under
a key derived (HKDF-SHA256) from the server's secret, with the store key as associated
data, so a blob copied to another key (another subject's, another session's) does not
open. `Sealer.index` names a subject's entry by an HMAC of the subject and the handle, so
the store holds neither, and another subject's lookup computes another key. The secret is
the one that seals paused programs at the MCP edge (`CODEMODE_REQUEST_STATE_KEY`), under
other derivation labels, so a token of one kind never opens as the other.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_VARIABLE = "CODEMODE_REQUEST_STATE_KEY"
"""Where the server's secret comes from when the host passes none."""
MIN_KEY_BYTES = 32
"""The shortest secret accepted (its UTF-8 bytes for a string)."""
SEAL_INFO = b"codemode/session/v1"
"""The HKDF label of the encryption key (request-state tokens use another)."""
INDEX_INFO = b"codemode/session-index/v1"
"""The HKDF label of the index key, so the digest never reveals the encryption key's use."""
PURPOSES: dict[str, tuple[bytes, bytes]] = {
    "session": (SEAL_INFO, INDEX_INFO),
    "shapes": (b"codemode/shapes/v1", b"codemode/shapes-index/v1"),
    "tasks": (b"codemode/tasks/v1", b"codemode/tasks-index/v1"),
}
"""The HKDF labels (encryption, index) of each use of the secret: what one use sealed
never opens as another's, and its digests are unrelated."""
_VERSION = b"\x01"
_NONCE_BYTES = 12
_TAG_BYTES = 16


def given_key(key: str | bytes | None) -> str | bytes | None:
    """The secret the host gave, else `CODEMODE_REQUEST_STATE_KEY`; an empty one is none."""
    return key or os.environ.get(KEY_VARIABLE) or None


def _derive(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(secret)


def _utf8(text: str) -> bytes:
    """Any string's bytes, a lone surrogate (valid in JSON text) included."""
    return text.encode("utf-8", "surrogatepass")


class Sealer:
    """Seals and opens what a store keeps, and names it, under one secret.

    Without a secret it makes one now: what it seals then opens only in this process,
    which is right for a store of this process alone (`is_ephemeral` says so, and a shared
    store refuses such a sealer). A blob is a version byte, a 12-byte random nonce and the
    AES-GCM ciphertext with its tag. `purpose` picks the derivation labels (`PURPOSES`):
    a session's, a learned shape's and a task's sealers share a secret and nothing else.
    """

    def __init__(self, key: str | bytes | None, *, purpose: str = "session") -> None:
        if key is not None and not isinstance(key, str | bytes):
            raise TypeError("the sealing key must be a str or bytes")
        if purpose not in PURPOSES:
            raise ValueError(f"a sealer's purpose is one of {sorted(PURPOSES)}")
        secret = os.urandom(MIN_KEY_BYTES) if key is None else key
        material = _utf8(secret) if isinstance(secret, str) else bytes(secret)
        if len(material) < MIN_KEY_BYTES:
            raise ValueError(
                f"the sealing key ({KEY_VARIABLE}) must be a secret of at least "
                f'{MIN_KEY_BYTES} bytes; make one with: python -c "import secrets; '
                'print(secrets.token_hex(32))"'
            )
        self.is_ephemeral = key is None
        """Whether the secret was made here (nothing sealed opens in another process)."""
        seal_info, index_info = PURPOSES[purpose]
        self._aead = AESGCM(_derive(material, seal_info))
        self._index_key = _derive(material, index_info)

    def __repr__(self) -> str:
        return "Sealer(ephemeral)" if self.is_ephemeral else "Sealer()"  # never the secret

    def seal(self, value: bytes, key: str) -> bytes:
        """`value` encrypted and authenticated for the store key `key` alone."""
        nonce = os.urandom(_NONCE_BYTES)
        return _VERSION + nonce + self._aead.encrypt(nonce, value, _VERSION + _utf8(key))

    def open(self, blob: bytes, key: str) -> bytes:
        """What `seal` sealed for `key`. `cryptography.exceptions.InvalidTag` for anything
        else: another key or store key, a changed byte, a cut blob, another version."""
        if len(blob) < 1 + _NONCE_BYTES + _TAG_BYTES or blob[:1] != _VERSION:
            raise InvalidTag
        nonce, sealed = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
        return self._aead.decrypt(nonce, sealed, _VERSION + _utf8(key))

    def index(self, subject: str, handle: str) -> str:
        """The digest (64 hex digits) that names `handle` of `subject` in a store: the
        same for the same pair under the same secret, unrelated for any other pair."""
        subject_bytes = _utf8(subject)
        message = len(subject_bytes).to_bytes(8, "big") + subject_bytes + _utf8(handle)
        return hmac.new(self._index_key, message, hashlib.sha256).hexdigest()


__all__ = [
    "INDEX_INFO",
    "KEY_VARIABLE",
    "MIN_KEY_BYTES",
    "PURPOSES",
    "SEAL_INFO",
    "Sealer",
    "given_key",
]
