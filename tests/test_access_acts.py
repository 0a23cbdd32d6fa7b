"""Every action checks its role in the function that does it, not in the page.

`collect_batch()` (the Data screen's "Collect batches") checked no role: only a
disabled button guarded it. This test finds, by reading the code, every
function a screen calls that writes to the database (it, or a function of the
project it calls, opens a write transaction), and requires each to check who
acts itself: to call the role matrix (`review.team.access`: `require`,
`allowed`, `may`, `role_may`, `permit`; or a permit's check, `store.permits`,
below `review`), directly or through the functions it calls before it writes.
The few writes with no role to check (the search index catching up, the
sign-in itself, local mode's sidebar) are listed below, each with why.

It also requires every screen that calls such a function to say who acts:
to pass the argument that names the person (`by`, `reviewer`, `admin`,
`permit`, `options`), so that no screen can act as the operator at the command
line by leaving it out."""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import types
from functools import cache
from pathlib import Path

import pytest

from review.team import access
from store import permits
from tests.conftest import ROOT

PROJECT = ("review", "labels", "store", "codebook")
CHECKS = {access.require, access.allowed, access.may, access.role_may, access.permit,
          permits.checked, permits.Permit.require}
WHO = ("by", "reviewer", "admin", "permit", "options", "me", "person")
"""Parameters that name who acts."""

NO_ROLE_TO_CHECK = {
    "review.browse.search.ensure_index":
        "the search index catching up with what was imported: derived data, no one's act",
    "review.team.reviewers.ensure_reviewer":
        "local mode's 'Add a reviewer' (a server offers none: its people come from the"
        " sign-in): the machine's users name themselves and their role, as local mode"
        " trusts them (README, Local mode and server mode)",
    "review.team.sessions.enter":
        "the sign-in itself: the session of a login (review.team.sessions)",
    "review.team.sessions.sign_out":
        "a person ending their own session, from the tab that acts in it",
    "review.reviewing.blinding.open_labels":
        "records that a person chose to see every rater's labels (their own act on"
        " themselves, which the record must keep whatever their role)",
    "review.reviewing.blinding.adopt_visitor_opening":
        "records labels seen before a name was chosen against the name chosen",
    "review.reviewing.blinding.what_reviewer_sees":
        "records a reveal shown (review.reviewing.reveals): the record of what was seen",
}


def _project(obj) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module.split(".")[0] in PROJECT


@cache
def _tree(fn) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _callees(fn) -> list:
    """The project functions (and methods of project classes) `fn` calls by name."""
    tree = _tree(fn)
    if tree is None:
        return []
    scope = dict(getattr(fn, "__globals__", {}))
    for node in ast.walk(tree):  # imports inside the function
        if isinstance(node, ast.ImportFrom) and node.module \
                and node.module.split(".")[0] in PROJECT:
            module = importlib.import_module(node.module)
            scope.update({a.asname or a.name: getattr(module, a.name, None) for a in node.names})
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        target = None
        if isinstance(f, ast.Name):
            target = scope.get(f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            base = scope.get(f.value.id)
            if isinstance(base, types.ModuleType) or inspect.isclass(base):
                target = getattr(base, f.attr, None)
        if inspect.isfunction(target) and (_project(target) or target in CHECKS):
            found.append(target)
    return found


def _opens_a_transaction(fn) -> bool:
    tree = _tree(fn)
    return tree is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        and n.func.attr == "transaction" for n in ast.walk(tree))


def writes(fn, seen: frozenset = frozenset()) -> bool:
    """Whether `fn`, or a project function it calls, opens a write transaction."""
    if fn in seen:
        return False
    if _opens_a_transaction(fn):
        return True
    return any(writes(c, seen | {fn}) for c in _callees(fn) if c not in CHECKS)


def checks(fn, depth: int = 4, seen: frozenset = frozenset()) -> bool:
    """Whether `fn`, or what it calls (up to `depth` calls down), asks the matrix."""
    if fn in CHECKS:
        return True
    if depth < 0 or fn in seen:
        return False
    return any(checks(c, depth - 1, seen | {fn}) for c in _callees(fn))


def _page_calls() -> dict[str, tuple[object, list[tuple[str, ast.Call]]]]:
    """{dotted name: (function, [(page file, call)])} of every project function a
    screen (pages/, app.py) calls."""
    out: dict[str, tuple[object, list]] = {}
    files = sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module \
                    and node.module.split(".")[0] in PROJECT:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    obj = getattr(module, alias.name, None)
                    if obj is None:  # a submodule
                        obj = importlib.import_module(f"{node.module}.{alias.name}")
                    names[alias.asname or alias.name] = obj
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            target = None
            if isinstance(f, ast.Name):
                target = names.get(f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and isinstance(names.get(f.value.id), types.ModuleType):
                target = getattr(names[f.value.id], f.attr, None)
            if inspect.isfunction(target) and _project(target):
                key = f"{target.__module__}.{target.__qualname__}"
                out.setdefault(key, (target, []))[1].append(
                    (str(path.relative_to(ROOT)), node))
    return out


ACTS = {name: fn_calls for name, fn_calls in _page_calls().items()
        if writes(fn_calls[0]) and name not in NO_ROLE_TO_CHECK}


def test_the_scan_finds_the_acting_functions_a_screen_calls():
    """It is not blind: it finds the actions the issue names."""
    for name in ("review.datasets.sources.base.import_file", "review.datasets.demo.load_demo",
                 "labels.llm.runner.run_plan", "labels.llm.runner.collect_batch",
                 "review.team.adjudication.settle", "review.team.rounds.create_round",
                 "review.team.reviewers.grant_role", "review.team.codebook_versions.edit_label",
                 "review.browse.tags.create_tag", "review.team.sessions.sign_out_person",
                 "review.reviewing.commit.commit_answer"):
        assert name in ACTS, name


@pytest.mark.parametrize("name", sorted(ACTS))
def test_an_acting_function_checks_who_acts_itself(name):
    fn, _ = ACTS[name]
    assert checks(fn), f"{name} writes but asks the role matrix nothing (review.team.access)"


@pytest.mark.parametrize("name", sorted(ACTS))
def test_a_screen_says_who_acts(name):
    fn, calls = ACTS[name]
    params = inspect.signature(fn).parameters
    who = [p for p in params if p in WHO]
    if not who:
        return  # the person is in what it is given (a store acting in a session, ...)
    positions = {p: i for i, p in enumerate(params)}
    for page, call in calls:
        given = {k.arg for k in call.keywords} | {
            p for p, i in positions.items() if i < len(call.args)}
        assert given & set(who), f"{page}:{call.lineno}: {name} without {' or '.join(who)}"


def test_the_writes_with_no_role_to_check_are_still_called_and_write():
    """The list above stays true: each is called by a screen and writes."""
    calls = _page_calls()
    for name in NO_ROLE_TO_CHECK:
        assert name in calls and writes(calls[name][0]), name


def test_the_checker_flags_a_writer_that_asks_nothing(tmp_path):
    def quiet_writer(store):
        with store.transaction():
            pass

    def checked_writer(store, reviewer):
        access.require(reviewer, "import", server=True)
        with store.transaction():
            pass

    assert writes(quiet_writer) and not checks(quiet_writer)
    assert writes(checked_writer) and checks(checked_writer)
    assert Path(__file__).is_file()


# -- the checks themselves -----------------------------------------------------------


def test_an_llm_run_or_collection_needs_the_matrixs_permit(tmp_path, fake):
    from labels.llm import RunAborted, collect_batch, run_map
    from review.team.reviewers import Reviewer
    from review.workspace import open_store
    from store.permits import NotPermitted, Permit
    from tests import conftest_llm as llm
    from tests.helpers import table_counts

    db = tmp_path / "llm.db"
    with open_store(db) as s:
        llm.write_carebench(s, 1)
        before = table_counts(s)
    reviewer, admin = Reviewer(7, "Rita", "reviewer"), Reviewer(8, "Ada", "admin")
    with pytest.raises(access.NotAllowed, match="only an admin may run LLM raters"):
        access.permit(reviewer, "run_llm", server=True)
    for wrong in (access.permit(admin, "import", server=True),  # another action's
                  Permit("run_llm", "Ada")):                   # not issued by the matrix
        with pytest.raises(NotPermitted):
            run_map(str(db), llm.plan(db, limit=1), keys=llm.KEYS,
                    base_url=fake.openai_base_url, permit=wrong)
        with pytest.raises(NotPermitted):
            collect_batch(str(db), 1, keys=llm.KEYS, permit=wrong)
    with open_store(db) as s:
        assert table_counts(s) == before  # nothing written
    run_map(str(db), llm.plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
            permit=access.permit(admin, "run_llm", server=True))
    with pytest.raises((LookupError, RunAborted)):  # allowed: it looks for the batch
        collect_batch(str(db), 1, keys=llm.KEYS, permit=access.permit(admin, "run_llm",
                                                                         server=True))


def test_a_run_started_in_a_session_that_ended_writes_nothing(tmp_path, fake):
    import time
    from datetime import timedelta

    from labels.llm import run_map
    from review.team.identity import identity_from_claims
    from review.team.sessions import enter, sign_out
    from review.workspace import open_store
    from store.sessions import SessionEnded
    from tests import conftest_llm as llm
    from tests.helpers import table_counts

    db = tmp_path / "llm.db"
    claims = {"iss": "https://idp", "sub": "ada", "iat": int(time.time()), "nonce": "n"}
    with open_store(db) as s:
        llm.write_carebench(s, 1)
        entry = enter(s, identity_from_claims(claims), claims, None, timedelta(hours=1))
        s.conn.execute("UPDATE raters SET role = 'admin' WHERE id = ?", (entry.reviewer.id,))
        admin = entry.reviewer.__class__(entry.reviewer.id, entry.reviewer.name, "admin")
        sign_out(s, entry.session_id)
        before = table_counts(s)
    with pytest.raises(SessionEnded):
        run_map(str(db), llm.plan(db, limit=1), keys=llm.KEYS, base_url=fake.openai_base_url,
                permit=access.permit(admin, "run_llm", server=True, session=entry.session_id))
    with open_store(db) as s:
        assert table_counts(s) == before


def test_everyones_work_still_needs_someone_with_a_role(store):
    from review.reviewing.commit import commit_answer
    from review.reviewing.drafts import save_draft
    from review.reviewing.items import flag_item
    from review.team.rounds import keep_reservation
    from tests.helpers import table_counts, write_prefixes

    write_prefixes(store, 3)
    item = store.scalar("SELECT id FROM items ORDER BY id LIMIT 1")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    gold = store.scalar("SELECT id FROM raters WHERE name = 'carebench-gold'")
    before = table_counts(store)
    for act in (lambda: commit_answer(store, None, item, qid, "1B_ESCALATION_URGENT_CARE"),
                lambda: save_draft(store, None, item, qid, "a note", None),
                lambda: flag_item(store, None, item),
                lambda: keep_reservation(store, 1, item, gold)):  # a reference rater: no person
        with pytest.raises(access.NotAllowed, match="only someone with a role"):
            act()
    assert table_counts(store) == before
