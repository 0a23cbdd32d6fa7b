"""A hostile endpoint echoes the API key back transformed: none of it is stored or printed.

The first adversarial run's server sent the key back base64-encoded, reversed,
upper-cased and as a 12-character prefix; the second hex-encoded, spaced out,
split by zero-width characters and in 11-character pieces, and each landed in
`llm_calls` (response, raw_text, error), `annotations.extra`, `llm_runs.params`
and on stderr. Here the fake provider (real SDK, loopback) sends back the key
it received in every encoding it knows (`tests.fake_llm_server.ECHOES`), in a
reply, in an error and from the batch endpoints, and nothing of the key is
found anywhere carelens keeps, writes or prints."""

from __future__ import annotations

import base64
import re
import unicodedata

import pytest

from labels.llm import run_map
from labels.llm.spec import redact
from review.datasets.export import export_annotations
from review.workspace import open_store
from tests import conftest_llm as llm
from tests.conftest_llm import plan, q
from tests.fake_llm_server import ECHOES, Echo, Status, encode_echo
from tests.helpers import run_cli

KEY = llm.KEYS["openai"]
REAL_LOOKING = "sk-proj-Qe7Rk2VtXw9LmZp4Hs8Nd3Fb6Yc1Ju5Ga0Ti"


def _plain(text: str) -> str:
    """What a reader would read: compatibility forms as what they stand for,
    without characters drawn as nothing, in lower case."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf").lower()


def _letters(text: str) -> str:
    return "".join(c for c in _plain(text) if c.isalnum())


def traces(stored: str, key: str) -> list[str]:
    """Pieces of the key found in `stored`: 8 characters of it (or of it reversed,
    or of its hex), 12 of its base64, or 16 of its letters and digits (or of its
    hex) read across anything between them."""
    plain, letters = _plain(stored), _letters(stored)
    raw = key.encode()
    found = []
    # base64 at each of the three alignments the key can have in a longer text
    # (`Bearer ` before it): the characters that depend on the key alone.
    encoded = [base64.b64encode(b"\0" * lead + raw).decode()[4 if lead else 0:-4]
               for lead in range(3)]
    for form, n in ((key, 8), (key[::-1], 8), (raw.hex(), 8), *((e, 12) for e in encoded)):
        form = form.lower()
        found += [form[i:i + n] for i in range(len(form) - n + 1) if form[i:i + n] in plain]
    for form in (_letters(key), raw.hex()):
        found += [form[i:i + 16] for i in range(len(form) - 15) if form[i:i + 16] in letters]
    unescaped = _letters(re.sub(r"(?i)\\x|0x|&#x", "", stored))  # bytes written \x73 or 0x73
    hexed = raw.hex()
    found += [hexed[i:i + 16] for i in range(len(hexed) - 15) if hexed[i:i + 16] in unescaped]
    return found


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


@pytest.mark.parametrize("how", ECHOES)
def test_the_key_redacts_in_every_echo_form(how):
    for key in (KEY, REAL_LOOKING):
        echoed = f"debug: {encode_echo(key, how)} (end)"
        kept = redact(echoed, [key])
        assert "[redacted]" in kept and traces(kept, key) == [], (how, kept)
        assert kept.startswith("debug: ") and kept.endswith(" (end)")


def test_the_checker_sees_each_echo_unredacted():
    """The test's own detector is not blind: it finds every echo in the clear."""
    for how in ECHOES:
        assert traces(encode_echo(REAL_LOOKING, how), REAL_LOOKING), how


@pytest.mark.parametrize("how", ECHOES)
def test_a_key_echoed_in_a_reply_is_stored_nowhere(db, fake, tmp_path, how):
    fake.script(Echo(how))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url)
    assert q(db, "SELECT count(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                 " WHERE r.kind = 'machine' AND a.status = 'answered'")[0][0] == 1
    with open_store(db) as store:
        export_annotations(store, tmp_path / "out.csv")
        export_annotations(store, tmp_path / "out.jsonl")
    stored = everything(db) + (tmp_path / "out.csv").read_text() \
        + (tmp_path / "out.jsonl").read_text()
    assert "[redacted]" in stored
    assert traces(stored, KEY) == []


@pytest.mark.parametrize("how", ECHOES)
def test_a_key_echoed_in_an_error_is_stored_nowhere(db, fake, how):
    fake.script(Status(400, "invalid key", echo_auth=True, echo_as=how))
    run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
            reply_attempts=1)
    stored = everything(db)
    assert "invalid key" in stored and "[redacted]" in stored
    assert traces(stored, KEY) == []


@pytest.mark.parametrize("how", ["hex", "zero-width split", "11-character pieces", "spaced out"])
def test_a_key_echoed_by_the_batch_endpoints_is_stored_nowhere(db, fake, how):
    """A batch the server refuses, quoting the key: the run's error (its params)."""
    fake.batch_errors["submit"] = Status(400, "bad batch", echo_auth=True, echo_as=how)
    try:
        run_map(db, plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
                use_batch=True)
    except Exception as exc:  # noqa: BLE001 - the run may stop; its message is printed
        assert traces(str(exc), KEY) == []
    stored = everything(db)
    assert "bad batch" in stored
    assert traces(stored, KEY) == []


@pytest.mark.parametrize("how", ["hex", "zero-width split", "11-character pieces", "spaced out",
                                 "url-encoded"])
def test_nothing_of_the_key_is_printed_by_the_command(db, fake, capsys, monkeypatch, how):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    fake.script(*[Status(401, "invalid key", echo_auth=True, echo_as=how)] * 3)
    code, out, err = run_cli(capsys, "--db", db, "map", "--model", "openai:gpt-4.1-mini",
                             "--limit", "1")
    assert "invalid key" in out + err
    assert traces(out + err, KEY) == []
    fake.script(Echo(how))
    code, out, err = run_cli(capsys, "--db", db, "map", "--model", "openai:gpt-4.1-mini",
                             "--limit", "1")
    assert traces(out + err + everything(db), KEY) == []


def test_redaction_leaves_ordinary_text_and_answers_alone():
    text = ("Urgent care now: 1B_ESCALATION_URGENT_CARE. hospitalisation, "
            "electroencephalography, 0123 4567 and sk-test are ordinary words here; "
            "a sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert redact(text, [KEY]) == text
    assert redact(text, [REAL_LOOKING]) == text
    assert redact("Skip to the next step: sk proj qe and more", [REAL_LOOKING]) \
        == "Skip to the next step: sk proj qe and more"
