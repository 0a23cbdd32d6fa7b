"""Uploaded files on disk, not in the server's memory, and only from those who may import.

Streamlit keeps every file a browser uploads with `st.file_uploader` in memory
(`MemoryUploadedFileManager`) until the browser session ends, imported or
not: four 190 MB uploads never imported took the server from 266 MB to 994 MB.
`SpooledUploads` takes its place when `carelens serve` starts the server
(`install`, from app.py): each upload is written to a file of its own in a
private folder (mode 0700, removed when the server stops) as it arrives, and
the server keeps only its name and path, so memory holds an upload only while
it is being received. The size of one upload is bounded by Streamlit's
`server.maxUploadSize` (set by `carelens serve --max-upload-mb`, 200 MB by
default; larger files come in with `carelens import`).

An upload is accepted only from a browser session whose Data screen offered the
uploader, which it does only to those who may import (`allow_uploads`): a
request to the upload endpoint from any other session is refused (403) and
nothing is kept. Outside `carelens serve` (Streamlit's AppTest) Streamlit's own
manager stays, and `spooled_path` is None: the page then reads the file's bytes.

Streamlit's upload route and its manager are not public API: this relies on
the exact pin `streamlit==1.67.*` (see app.py), and tests/test_uploads.py
fails if the route or the manager's methods move.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path, PurePath

from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

_ALLOWED: set[str] = set()
"""Browser sessions whose Data screen offers the uploader (those who may import)."""
_lock = threading.Lock()
_installed: list[SpooledUploads] = []


class UploadRefused(Exception):
    """An upload from a session not offered the uploader (the route answers 403)."""


def _refuse() -> Exception:
    try:
        from starlette.exceptions import HTTPException
    except ImportError:  # pragma: no cover - Streamlit 1.67 serves with Starlette
        return UploadRefused("uploads are for those who may import")
    return HTTPException(status_code=403, detail="uploads are for those who may import")


class SpooledUploads(MemoryUploadedFileManager):
    """Streamlit's upload manager, with every file on disk (see the module)."""

    def __init__(self, upload_endpoint: str) -> None:
        super().__init__(upload_endpoint)
        self.folder = Path(tempfile.mkdtemp(prefix="carelens-uploads-"))
        os.chmod(self.folder, 0o700)
        self._paths: dict[tuple[str, str], Path] = {}
        self._sizes: dict[tuple[str, str], int] = {}
        atexit.register(shutil.rmtree, self.folder, True)

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        with _lock:
            allowed = session_id in _ALLOWED
        if not allowed:
            raise _refuse()
        # Under a folder of its own, with the name the browser sent (no folders in
        # it): an import reads the format from the name's ending.
        where = self.folder / f"{session_id}-{file.file_id}"
        where.mkdir(mode=0o700, exist_ok=True)
        path = where / (PurePath(file.name.replace("\\", "/")).name or "upload")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(file.data)
        key = (session_id, file.file_id)
        old = self._paths.get(key)
        if old is not None and old != path:
            old.unlink(missing_ok=True)
        self._paths[key], self._sizes[key] = path, len(file.data)
        super().add_file(session_id, file._replace(data=b""))

    def spooled(self, session_id: str, file_id: str) -> tuple[Path, int] | None:
        key = (session_id, file_id)
        path = self._paths.get(key)
        return (path, self._sizes[key]) if path is not None and path.exists() else None

    def remove_file(self, session_id: str, file_id: str) -> None:
        super().remove_file(session_id, file_id)
        self._forget([(session_id, file_id)])

    def remove_session_files(self, session_id: str) -> None:
        super().remove_session_files(session_id)
        self._forget([k for k in list(self._paths) if k[0] == session_id])
        with _lock:
            _ALLOWED.discard(session_id)

    def _forget(self, keys: Sequence[tuple[str, str]]) -> None:
        for key in keys:
            path = self._paths.pop(key, None)
            self._sizes.pop(key, None)
            if path is not None:
                shutil.rmtree(path.parent, ignore_errors=True)


def install() -> None:
    """Put `SpooledUploads` in Streamlit's server in place of its memory manager
    (app.py, before the server starts)."""
    from streamlit.web.server import server

    def made(endpoint: str) -> SpooledUploads:
        manager = SpooledUploads(endpoint)
        _installed.append(manager)
        return manager

    server.MemoryUploadedFileManager = made


def _session_id() -> str | None:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def allow_uploads(allowed: bool) -> None:
    """Whether this browser session may upload (the Data screen: those who may import)."""
    session_id = _session_id()
    if session_id is None:
        return
    with _lock:
        (_ALLOWED.add if allowed else _ALLOWED.discard)(session_id)


def spooled_path(upload) -> Path | None:
    """Where an uploaded file (`st.file_uploader`'s) is on disk, under the name it
    was uploaded with; None when the server keeps uploads in memory (not started
    by `carelens serve`)."""
    session_id = _session_id()
    for manager in _installed:
        found = manager.spooled(session_id, upload.file_id) if session_id else None
        if found is not None:
            return found[0]
    return None
