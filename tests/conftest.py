"""Shared fixtures. Every test runs with its own paths and no way out:
the database path points into a temp dir, API keys are removed, and the
providers' base URLs point at a closed local port so nothing can call out.

Every test has the record's key as a team's server has it: in the environment
(`CARELENS_RECORD_KEY`), made for this run of the tests (never one written in the
repository), the same for the whole run so that the demo database built once is
opened by every test that copies it. Key files made on first use (a test that
removes the variable) go to the test's own folder (`CARELENS_KEY_DIR`), never
the account's."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CHROMIUM = "/usr/bin/chromium"
UNREACHABLE = "http://127.0.0.1:9/"


RECORD_KEY = secrets.token_hex(32)
"""The record's key of this run of the tests (`store.key`)."""


@pytest.fixture(scope="session", autouse=True)
def record_key(tmp_path_factory):
    """The key in the environment from the start of the run, before any fixture
    of the session makes a database (the demo's)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CARELENS_RECORD_KEY", RECORD_KEY)
        mp.setenv("CARELENS_KEY_DIR", str(tmp_path_factory.mktemp("keys")))
        yield RECORD_KEY


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(tmp_path / "carelens.db"))
    monkeypatch.setenv("CARELENS_RECORD_KEY", RECORD_KEY)
    monkeypatch.setenv("CARELENS_KEY_DIR", str(tmp_path / "keys"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CARELENS_COMPATIBLE_API_KEY",
                "CARELENS_COMPATIBLE_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", UNREACHABLE)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", UNREACHABLE)
    monkeypatch.setenv("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    # The Hugging Face hub: a closed port, an empty cache of the test's own, no key.
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE.rstrip("/"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for key in ("HF_TOKEN", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    # No undo window before a reveal (review.reviewing.blinding.reveal_delay) unless
    # a test of that window sets one: the other tests see the reveal at once.
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "0")
    # The codebooks a process has read from a database (codebook.loader._SEEN, for the
    # words of a label where no database is at hand): each test's its own.
    monkeypatch.setattr("codebook.loader._SEEN", {})
    yield


@pytest.fixture
def fake():
    """The loopback fake of the providers' APIs (tests.fake_llm_server)."""
    from tests.conftest_llm import fake_server

    yield from fake_server()


@pytest.fixture
def store(tmp_path):
    from review.workspace import open_store

    s = open_store(tmp_path / "test.db")
    yield s
    s.close()


@pytest.fixture
def prefixes(store):
    """The store with three invented prefixes (one CARE-Bench case, rounds 1-3)
    and their gold labels (tests.helpers.write_prefixes)."""
    from tests.helpers import write_prefixes

    write_prefixes(store, 3)
    return store


@pytest.fixture
def db(store, tmp_path):
    """The store with tests.review_fixtures imported (a KlinikeBench run, a
    HealthBench conversation, ...): what the rubric and adjudication tests read.
    `db` is always an open store; a database file's path is `db_path`."""
    from tests.review_fixtures import import_all

    import_all(store, tmp_path / "files")
    return store


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> Path:
    """A demo database built once per session; copy it before writing."""
    from review.datasets.demo import load_demo
    from review.workspace import open_store

    base = tmp_path_factory.mktemp("demo")
    path = base / "demo.db"
    s = open_store(path)
    load_demo(s, base / "files")
    s.checkpoint()  # the copies below take the database file alone
    s.close()
    return path


@pytest.fixture
def demo_copy(demo_db, tmp_path) -> Path:
    """A private, writable copy of the demo database."""
    path = tmp_path / "demo.db"
    copy_database(demo_db, path)
    return path


def copy_database(source: Path, target: Path) -> None:
    """A database file copied as a user copies one: with its witness beside it
    (`store.witness`)."""
    from store.witness import witness_path

    shutil.copy(source, target)
    shutil.copy(witness_path(source), witness_path(target))


@pytest.fixture
def demo(demo_copy):
    """The demo database's private copy, open (modules may override it)."""
    from review.workspace import open_store

    s = open_store(demo_copy)
    yield s
    s.close()


def chromium_or_skip() -> str:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CARELENS_REQUIRE_BROWSER"):
            pytest.fail(f"{CHROMIUM} is missing; CI installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (Debian: apt-get install chromium)")
    return CHROMIUM
