"""Small builders for tests: invented items, written through the real writer."""

from __future__ import annotations

import json
from pathlib import Path

from store import Store
from store.records import AnnotationRecord, ItemRecord, RaterRecord
from store.writer import RecordWriter

CODES = ["0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
         "1A_ESCALATION_NONURGENT_CARE", "1B_ESCALATION_URGENT_CARE"]
"""The CARE-Bench escalation codes in their order, written out: the tests check
the shipped codebook against this list, not against itself."""


def write_prefixes(store: Store, n: int, dataset: str = "test", with_gold: bool = True) -> list[str]:
    """n prefix items (cases of 3 rounds), with gold labels by the reference rater."""
    uids = []
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.rater(RaterRecord("carebench-gold", "reference"))
        for i in range(n):
            case, rnd = i // 3, i % 3 + 1
            uid = f"t_case_{case:05d}_r{rnd:02d}"
            uids.append(uid)
            w.item(ItemRecord(uid=uid, kind="prefix", dataset=dataset, case_id=f"t_case_{case:05d}",
                              round_id=rnd, split="validation",
                              payload={"turns": [f"Invented turn {k} of case {case}." for k in range(rnd)]}))
            if with_gold:
                w.annotation(AnnotationRecord(uid, "carebench.escalation_needed", "carebench-gold",
                                              CODES[i % 4]))
        w.flush()
    return uids


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def table_counts(store: Store) -> dict[str, int]:
    """Row counts of every table: 'the database is exactly as it was'."""
    names = [r[0] for r in store.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    return {n: store.scalar(f'SELECT COUNT(*) FROM "{n}"') for n in names}


def work_at_once(db_path: Path, reviewers: list, step) -> list[BaseException]:
    """Each reviewer on a thread with their own store on `db_path`, calling
    `step(store, reviewer)` until it returns None; returns whatever any of
    them raised (a test asserts it is empty)."""
    import threading

    from review.workspace import open_store

    errors: list[BaseException] = []

    def work(reviewer) -> None:
        local = open_store(db_path)
        try:
            while step(local, reviewer) is not None:
                pass
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            local.close()

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def adjudication_db(tmp_path: Path):
    """A database file with the review fixtures imported, Dr. A and Dr. B as
    reviewers and Dr. Judge as adjudicator: (path, open store, a, b, the
    KlinikeBench run's item id). The caller closes the store."""
    from review.reviewing.criteria import find_item
    from review.team.reviewers import ensure_reviewer
    from review.workspace import open_store
    from tests.review_fixtures import KB_UID, import_all

    path = tmp_path / "screen.db"
    s = open_store(path)
    import_all(s, tmp_path / "files")
    a, b = ensure_reviewer(s, "Dr. A"), ensure_reviewer(s, "Dr. B")
    ensure_reviewer(s, "Dr. Judge", role="adjudicator")
    return path, s, a, b, find_item(s, KB_UID)


def adjudicate_screen(path: Path, monkeypatch, what: str):
    """The Adjudicate screen on `path`, for Dr. Judge, in mode `what`, after its first run."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    monkeypatch.setenv("CARELENS_DB", str(path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Judge"
    at.query_params["what"] = what
    at.run()
    at.switch_page("pages/adjudicate.py").run()
    assert not at.exception, at.exception
    return at


ADJUDICATE_PARTS = {"pick": "value", "sev": "severity", "why": "reason"}


def adjudicate_choose(at, part: str, value) -> None:
    """On the Adjudicate screen, choose `value` for `part` of the first unit that has a
    button for it ('pick' the settled answer, 'sev' a severity, 'why' the reason), as
    its button does, without running the screen again: a press followed by Settle is
    then one run, on the screen as it was drawn."""
    key = next(b.key for b in at.button if (b.key or "").endswith(f":{part}:{value}"))
    at.session_state[f"{key.rsplit(f':{part}:', 1)[0]}:{ADJUDICATE_PARTS[part]}"] = value


def shown(markdown: str) -> str:
    """What a reader sees of Markdown made by `review.text.safe_markdown` (and
    of the screens' own Markdown around it): escapes dropped, the references
    and word joiners it writes decoded, hard breaks as line breaks."""
    import re
    import string

    from review.text import WORD_JOINER

    text = markdown.replace("  \n", "\n").replace("&#58;", ":").replace("&#160;", " ")
    return re.sub(r"\\([" + re.escape(string.punctuation) + "])", r"\1", text).replace(WORD_JOINER, "")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`carelens ARGV...` in-process: (exit status, stdout, stderr). A traceback,
    which a user would see instead of a message, fails the test."""
    import pytest

    import cli

    try:
        code = cli.main(list(argv))
    except BaseException as exc:  # noqa: BLE001 - what the user would see as a traceback
        pytest.fail(f"traceback instead of a message: {type(exc).__name__}: {exc}")
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(err: str) -> str:
    """A command line error as the user sees it: one line, `carelens: ...`."""
    assert err.startswith("carelens: ") and err.count("\n") == 1, err
    return err


def open_app(page: str, reviewer: str | None, **params: str):
    """The app (AppTest, the real script) on `page` as a new browser session
    would open it from a link: as `reviewer`, with these query parameters."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if reviewer:
        at.query_params["reviewer"] = reviewer
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def rows(path: Path, sql: str, params=()) -> list[tuple]:
    """The rows of a query, on a connection of its own (the app holds another)."""
    from review.workspace import open_store

    s = open_store(path)
    out = [tuple(r) for r in s.query(sql, params)]
    s.close()
    return out



def action_button(at, action: str, last: str | None = None):
    """The button for `action` (label, cannot_assess, flag, skip, prev, next on
    the Review screen; rv_met, rv_commit, trj_errbtn, trj_next, hb_next, ... on
    the others) on the item shown, with `last` the label code, error type or
    severity it gives. Their keys name the item (and the step) they act on,
    `label:ID:CODE`, `trj_errbtn:ID:STEP:CODE`, so that a press always acts on
    what it was shown with."""
    for button in at.button:
        parts = (button.key or "").split(":")
        if parts[0] == action and len(parts) > 1 and parts[1].isdigit() \
                and (last is None or (len(parts) > 2 and parts[-1] == last)):
            return button
    raise LookupError(f"no {action} button{f' for {last}' if last else ''} on the screen")


review_button = action_button
