"""The database and its backups hold clinicians' answers and rationales: each file
carelens creates for them is readable and writable by its owner only (mode 0600),
whatever the umask of the process that creates it."""

from __future__ import annotations

import os
import stat

import pytest

from store import Store
from tests.helpers import run_cli


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    """A umask that lets every file be read and written by everyone."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_a_new_database_and_its_log_are_the_owners_only(tmp_path, open_umask):
    path = tmp_path / "study.db"
    s = Store(path)
    s.audit("test", "note", "raters", None, None, {"why": "a write makes the log"})
    assert mode(path) == 0o600
    for beside in ("study.db-wal", "study.db-shm"):
        if (tmp_path / beside).exists():
            assert mode(tmp_path / beside) == 0o600, beside
    s.close()


def test_an_existing_database_keeps_its_mode(tmp_path, open_umask):
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    os.chmod(path, 0o640)
    Store(path).close()
    assert mode(path) == 0o640


def test_a_backup_is_the_owners_only(tmp_path, capsys, open_umask):
    db, out = tmp_path / "study.db", tmp_path / "copy.db"
    Store(db).close()
    os.chmod(db, 0o644)  # even when the database itself was left readable
    code, _, err = run_cli(capsys, "--db", str(db), "backup", "--out", str(out))
    assert code == 0, err
    assert mode(out) == 0o600
