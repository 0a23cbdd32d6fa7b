"""A hostile endpoint echoes the API key back transformed: none of it is stored.

The adversarial run's server sent the key back base64-encoded, reversed,
upper-cased and as a 12-character prefix; each landed in llm_calls, the
rationale, the search index and the exports. Here the fake provider (real
SDK, loopback) puts every form in its reply and in an error, and nothing of
the key is found anywhere carelens keeps or writes."""

from __future__ import annotations

import base64

import pytest

from labels.llm import run_map
from labels.llm.spec import redact
from review.datasets.export import export_annotations
from review.workspace import open_store
from tests import conftest_llm as llm
from tests.conftest_llm import plan, q
from tests.fake_llm_server import Reply, Status

KEY = llm.KEYS["openai"]


def echoes(key: str) -> dict[str, str]:
    return {
        "base64": base64.b64encode(key.encode()).decode(),
        "base64 of the header": base64.b64encode(f"Bearer {key}".encode()).decode(),
        "url-safe base64": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
        "reversed": key[::-1],
        "upper-cased": key.upper(),
        "12-character prefix": key[:12],
        "a middle slice, lower-cased": key[4:20].lower(),
    }


def traces(key: str) -> list[str]:
    """What must not be found: each echo, and any 12 characters of the key."""
    found = [e for name, e in echoes(key).items() if name != "base64 of the header"]
    return found + [key[i:i + 12] for i in range(len(key) - 11)]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "llm.db"
    with open_store(path) as store:
        llm.write_carebench(store, 1)
    return str(path)


def everything(db) -> str:
    out = []
    for table in ("llm_calls", "llm_runs", "annotations", "raters", "audit_log", "search_docs"):
        out += [str(v) for row in q(db, f"SELECT * FROM {table}") for v in row]
    out += [str(r[0]) for r in q(db, "SELECT body FROM search_fts")]
    return "\n".join(out)


def test_a_key_echoed_back_transformed_is_stored_nowhere(db, fake, tmp_path):
    said = "; ".join(f"{name}: {text}" for name, text in echoes(KEY).items())
    fake.script(Reply(obj={"rationale": f"debug {said}", "label": llm.CODES[0]}))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert q(db, "SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                 " WHERE r.kind = 'machine' AND a.status = 'answered'")[0][0] == 1
    with open_store(db) as store:
        export_annotations(store, tmp_path / "out.csv")
        export_annotations(store, tmp_path / "out.jsonl")
    stored = everything(db) + (tmp_path / "out.csv").read_text() \
        + (tmp_path / "out.jsonl").read_text()
    assert "[redacted]" in stored
    for trace in traces(KEY):
        assert trace not in stored and trace.lower() not in stored.lower(), trace


def test_a_key_echoed_in_an_error_is_stored_nowhere(db, fake):
    said = " ".join(echoes(KEY).values())
    fake.script(Status(400, f"invalid key {said}"))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
            reply_attempts=1)
    stored = everything(db)
    assert "invalid key" in stored
    for trace in traces(KEY):
        assert trace.lower() not in stored.lower(), trace


def test_redaction_leaves_ordinary_text_and_answers_alone():
    text = ("Urgent care now: 1B_ESCALATION_URGENT_CARE. hospitalisation, "
            "electroencephalography, 0123456789 and sk-test are ordinary words here")
    assert redact(text, [KEY]) == text
