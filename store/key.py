"""The record's key: what makes the chain something only carelens can extend.

The record's hashes are HMAC-SHA256 under a key that never enters the database
(`store.chain`): whoever holds only the file can neither recompute a hash after
changing a row nor add a row that verifies. The key comes, in this order, from

1. the environment, `CARELENS_RECORD_KEY` (a team's server: keep it with the
   other secrets);
2. Streamlit's secrets, `record_key` under `[carelens]` (the app passes it in:
   `use_secret`; nothing below the pages reads Streamlit);
3. a key file made on first use, one per record, in the account's own
   configuration folder (`$CARELENS_KEY_DIR`, else
   `$XDG_CONFIG_HOME/carelens/keys`, else `~/.config/carelens/keys`), named by
   the key's fingerprint, mode 0600 in a folder of mode 0700: never beside the
   database, so that a copy of the database (or of its folder, or a backup)
   does not carry its key. Making one is said in one line on stderr, with where
   it is kept and that it must be kept like a password.

A database records its key's fingerprint (`record` table, m110), never the key:
the fingerprint finds the key among those given, and says which one is missing.
A key given in the environment or the secrets has at least `MIN_CHARS`
characters.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

ENV = "CARELENS_RECORD_KEY"
KEY_DIR_ENV = "CARELENS_KEY_DIR"
SECRET_NAME = "[carelens] record_key"
MIN_CHARS = 32
MAKE_ONE = "python -c 'import secrets; print(secrets.token_hex(32))'"


class RecordKeyError(RuntimeError):
    """The record's key is missing or unusable; the message says so in one line."""


@dataclass(frozen=True)
class RecordKey:
    secret: bytes
    where: str
    """Where it came from, in words (never the key itself)."""

    @property
    def id(self) -> str:
        """The key's fingerprint: 16 hex digits that name it and reveal nothing of it."""
        return fingerprint(self.secret)

    def __repr__(self) -> str:  # never print the secret
        return f"RecordKey({self.id}, {self.where})"


def fingerprint(secret: bytes) -> str:
    return hmac.new(secret, b"carelens record key fingerprint", hashlib.sha256).hexdigest()[:16]


_secret: str | None = None
_lock = threading.Lock()
_cache: dict[str, RecordKey] = {}


def use_secret(value: object) -> None:
    """The key from Streamlit's secrets (`[carelens] record_key`), given by the app
    at the start of each run (None: none there)."""
    global _secret
    _secret = value if isinstance(value, str) and value.strip() else None


def _given(text: str, where: str) -> RecordKey:
    text = text.strip()
    if len(text) < MIN_CHARS:
        raise RecordKeyError(f"{where} is too short ({len(text)} characters): a record key has at"
                             f" least {MIN_CHARS}; make one with {MAKE_ONE}")
    return RecordKey(text.encode(), where)


def configured() -> RecordKey | None:
    """The key the environment or the secrets give, or None."""
    env = os.environ.get(ENV)
    if env is not None and env.strip():
        return _given(env, ENV)
    if _secret is not None:
        return _given(_secret, f"the secrets' {SECRET_NAME}")
    return None


def key_dir() -> Path:
    """The folder of the key files made on first use."""
    if os.environ.get(KEY_DIR_ENV):
        return Path(os.environ[KEY_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "carelens" / "keys"


def key_file(key_id: str) -> Path:
    return key_dir() / f"{key_id}.key"


def _read_file(path: Path) -> RecordKey | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise RecordKeyError(f"{path}: the record's key file cannot be read: {exc.strerror}") \
            from None
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise RecordKeyError(f"{path}: the record's key file holds no key")
    return RecordKey(lines[0].encode(), str(path))


def find(key_id: str) -> RecordKey | None:
    """The key whose fingerprint is `key_id`: the configured one, or its key file."""
    given = configured()
    if given is not None and given.id == key_id:
        return given
    known = _cache.get(key_id)
    if known is not None:
        return known
    found = _read_file(key_file(key_id))
    if found is not None and found.id == key_id:
        _cache[key_id] = found
        return found
    return None


def missing(key_id: str, database: str) -> str:
    """The one line said when a database's key is not here."""
    try:
        given = configured()
    except RecordKeyError as exc:
        return str(exc)
    held = (f" ({given.where} holds key {given.id}, another record's)"
            if given is not None else "")
    return (f"{database}: this record's key ({key_id}) is not here{held}: give it in {ENV} or"
            f" the secrets' {SECRET_NAME}, or put its key file {key_id}.key in {key_dir()};"
            " without it the record can be read, but neither written nor fully verified")


def for_new_record(database: str) -> RecordKey:
    """The key a record is sealed with when it is first sealed: the configured one,
    else a key made now and kept in the key folder (said in one line on stderr).
    `database` ':memory:' or '' (a database in memory) gets a key of its own that
    dies with it."""
    given = configured()
    if given is not None:
        return given
    if database in ("", ":memory:"):
        key = RecordKey(secrets.token_hex(32).encode(), "memory")
        _cache[key.id] = key
        return key
    with _lock:
        text = secrets.token_hex(32)
        key = RecordKey(text.encode(), "")
        folder = key_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / f"{key.id}.key"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"# carelens record key of {database}; keep it like a password\n"
                         f"{text}\n")
        except OSError as exc:
            raise RecordKeyError(f"{folder}: cannot keep the record's new key there"
                                 f" ({exc.strerror}); give one in {ENV} instead") from None
        key = RecordKey(key.secret, str(path))
        _cache[key.id] = key
    print(f"carelens: made the record key of {database}, kept in {path} (outside the database):"
          " keep it like a password; without it the record can be neither written nor"
          " verified", file=sys.stderr)
    return key
