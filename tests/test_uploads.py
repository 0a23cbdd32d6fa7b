"""Uploads: only for those who may import, bounded in size, kept on disk.

The adversarial run saw the Data screen's uploader offered to reviewers, and
four 190 MB uploads never imported take the server from 266 MB to 994 MB
(Streamlit keeps every uploaded file in memory). Here: the uploader is offered
only to those who may import; the server's upload manager (`SpooledUploads`,
put in place by `carelens serve`) writes each file to a private folder and
keeps no bytes, refuses files from a session not offered the uploader, and
forgets them with the session; the size limit is set where the server starts.
bench/bench_upload_memory.py measures the server's memory."""

from __future__ import annotations

import inspect
import stat
import time

import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from streamlit.testing.v1 import AppTest

import cli
from pages import _uploads
from pages._uploads import SpooledUploads
from tests.conftest import ROOT
from tests.helpers import one_line, run_cli

IDP = "https://idp.example.org"


@pytest.fixture
def manager(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    m = SpooledUploads("/_stcore/upload_file")
    monkeypatch.setattr(_uploads, "_ALLOWED", {"admin-session"})
    yield m


def rec(file_id: str, data: bytes, name: str = "labels.csv") -> UploadedFileRec:
    return UploadedFileRec(file_id=file_id, name=name, type="text/csv", data=data)


def test_an_upload_is_written_to_a_private_file_and_no_bytes_are_kept(manager, tmp_path):
    manager.add_file("admin-session", rec("f1", b"item_id,rater,value\n" * 1000,
                                          name="../../etc/labels.csv"))
    held = manager.get_files("admin-session", ["f1"])
    assert [r.data for r in held] == [b""] and held[0].name == "../../etc/labels.csv"
    path, size = manager.spooled("admin-session", "f1")
    assert path.name == "labels.csv" and path.is_relative_to(manager.folder)  # no folders
    assert path.read_bytes() == b"item_id,rater,value\n" * 1000 and size == 20_000
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(manager.folder.stat().st_mode) == 0o700
    assert str(manager.folder).startswith(str(tmp_path))
    manager.remove_session_files("admin-session")
    assert manager.spooled("admin-session", "f1") is None and not path.exists()
    assert "admin-session" not in _uploads._ALLOWED  # a session gone uploads no more


def test_a_session_not_offered_the_uploader_is_refused(manager):
    with pytest.raises(HTTPException) as refused:
        manager.add_file("reviewer-session", rec("f2", b"x" * 100))
    assert refused.value.status_code == 403
    assert manager.get_files("reviewer-session", ["f2"]) == []
    assert list(manager.folder.iterdir()) == []


def test_a_file_removed_in_the_browser_is_removed_from_disk(manager):
    manager.add_file("admin-session", rec("f3", b"abc"))
    path, _ = manager.spooled("admin-session", "f3")
    manager.remove_file("admin-session", "f3")
    assert not path.exists() and manager.get_files("admin-session", ["f3"]) == []


def test_streamlit_still_makes_its_upload_manager_and_route_where_carelens_replaces_them():
    """The pin's guard: the server builds its manager from the name `install`
    replaces, and the upload route hands each file to `add_file` in one piece."""
    from streamlit.web.server import server
    from streamlit.web.server.starlette import starlette_routes

    assert "MemoryUploadedFileManager(UPLOAD_FILE_ENDPOINT)" in inspect.getsource(server)
    route = inspect.getsource(starlette_routes.create_upload_routes)
    assert "upload_mgr.add_file(" in route and "server.maxUploadSize" in route


def data_screen(path, monkeypatch, claims=None):
    monkeypatch.setenv("CARELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if claims is not None:
        monkeypatch.setenv("CARELENS_ADMINS", "admin@example.org")
        at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                              "cookie_secret": "x" * 32, "client_id": "c", "client_secret": "s",
                              "server_metadata_url": f"{IDP}/.well-known/openid-configuration"}
        at.user = {"is_logged_in": True, "iat": int(time.time()),
                   "nonce": f"n-{time.time_ns()}", **claims}
    at.run()
    at.switch_page("pages/data.py").run()
    assert not at.exception
    return at


def uploaders(at) -> int:
    return len(at.get("file_uploader"))


def test_the_uploader_is_offered_only_to_those_who_may_import(demo_copy, monkeypatch):
    reviewer = data_screen(demo_copy, monkeypatch, {
        "iss": IDP, "sub": "rev", "email": "rev@example.org", "email_verified": True,
        "name": "Rita Reviewer"})
    assert uploaders(reviewer) == 0
    assert all(b.disabled for b in reviewer.button if b.label in ("Import", "Fetch from the hub"))
    admin = data_screen(demo_copy, monkeypatch, {
        "iss": IDP, "sub": "adm", "email": "admin@example.org", "email_verified": True,
        "name": "Ada Admin"})
    assert uploaders(admin) == 1


def test_serve_sets_the_upload_limit(tmp_path, monkeypatch, capsys):
    started = {}
    monkeypatch.setattr(cli.os, "execve", lambda exe, cmd, env: started.update(cmd=cmd))
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "s.db"
    assert run_cli(capsys, "--db", str(db), "serve", "--port", "1")[0] == 0
    assert started["cmd"][started["cmd"].index("--server.maxUploadSize") + 1] == "200"
    assert run_cli(capsys, "--db", str(db), "serve", "--max-upload-mb", "50")[0] == 0
    assert started["cmd"][started["cmd"].index("--server.maxUploadSize") + 1] == "50"
    code, _, err = run_cli(capsys, "--db", str(db), "serve", "--max-upload-mb", "0")
    assert code == 2 and "--max-upload-mb" in one_line(err)
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    assert "maxUploadSize = 200" in config
