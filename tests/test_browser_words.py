"""Plain words on every clinician's screen (issue 29, point 6): a scan of the
visible text of each screen, as a reviewer, an adjudicator and the study lead
see it, in Debian's Chromium, for what a clinician does not say: the
codebook's codes (0A ... 1B), raw ids as names (`demo_case_0001_r01`, a
64-character hex id, `kb:demo/r1/...`), raters by their stored names
(`demo:mapper@v1`, `carebench-gold`, `healthbench-grader`, `adjudicated`),
"round" for a conversation's turn. A details line for researchers (a caption
that starts "id ...") may name the ids; nothing else may.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app

pytestmark = pytest.mark.browser

FORBIDDEN = {
    "a label's code": re.compile(r"\b[01][AB]\b|\b[01][AB]_[A-Z_]+\b|\b(?:NO_)?ESCALATION_[A-Z_]+"),
    "an item's raw id": re.compile(r"demo_case_\d{4}_r\d\d|\b[0-9a-f]{64}\b|\b(?:kb|hb|harbor):"
                                   r"[\w/.-]+|\bitem-\d+\b|kb-demo-\d{3}__"),
    "a rater's stored name": re.compile(r"demo:mapper@|carebench-gold|healthbench-grader|"
                                        r"klinikebench-(?:judge|verifier)|healthbench-physician:|"
                                        r"\badjudicated\b|group:[a-z]+"),
    "a code word of the store": re.compile(r"\b(?:no_error|missed_essential_question|wrong_tool|"
                                           r"unsafe_action|not_met|cannot_assess|after_reveal|"
                                           r"reviewer_error|machine_error|ambiguous_item|"
                                           r"codebook_gap)\b"),
    "round for a conversation's turn": re.compile(r"\b[Rr]ound \d+\b|\bconversation round\b",
                                                  re.IGNORECASE),
    "a Markdown escape": re.compile(r"&#\d+;|\\[-*_`#:.()\[\]]"),
    "a tool's speaker tag": re.compile(r"\bPATIENT:"),
}

VISIBLE = """() => {
    // The words on screen: the page and its sidebar, less the details lines meant
    // for researchers (a caption that starts "id ..." or "stored as ...") and the
    // database's path.
    const hidden = [];
    for (const c of document.querySelectorAll('[data-testid=stCaptionContainer]')) {
        if (/^\\s*(id|stored as|Database:)\\s/.test(c.innerText)) {
            hidden.push([c, c.style.display]);
            c.style.display = 'none';
        }
    }
    const text = [...document.querySelectorAll('[data-testid=stMain], [data-testid=stSidebar]')]
        .map(r => r.innerText).join('\\n');
    for (const [c, d] of hidden) c.style.display = d;
    return text.replace(/\\u2060/g, '');
}"""
RESEARCHERS = {"Agreement"}
"""Researchers' views: a rater's stored name may stand in brackets beside its words."""


def found(text: str, researcher: bool = False) -> dict[str, list[str]]:
    """Each forbidden kind of word on screen, with the lines it is on. An id said as
    such ("id demo_case_0001_r01", beside a title) is a detail, not a name."""
    out: dict[str, list[str]] = {}
    for what, pattern in FORBIDDEN.items():
        lines = []
        for line in text.splitlines():
            seen = re.sub(r"\bid \S+", "", line)
            if researcher and what == "a rater's stored name":
                seen = re.sub(r"\([^()]*\)", "", seen)
            if pattern.search(seen):
                lines.append(line.strip())
        if lines:
            out[what] = lines[:5]
    return out


def visible(page) -> str:
    """The screen's text, once drawn; an expander of the item's own screen opened."""
    page.evaluate("() => new Promise(r => setTimeout(r, 0))")
    page.evaluate("""() => document.querySelectorAll('[data-testid=stMain] details')
        .forEach(d => d.open = true)""")  # what the expanders hold is on screen too, when opened
    page.wait_for_timeout(300)
    return page.evaluate(VISIBLE)


def screens(db) -> list[tuple[str, str, str]]:
    """(what, who, address) of every clinician's screen, on items the demo has."""
    with open_store(db) as s:
        run = s.scalar("SELECT uid FROM items WHERE kind = 'trajectory' ORDER BY id LIMIT 1")
        graded = s.scalar("SELECT uid FROM items WHERE kind = 'graded_conversation'"
                          " AND parent_id IS NOT NULL ORDER BY id LIMIT 1")
        reply = s.scalar("SELECT uid FROM items WHERE kind = 'response' ORDER BY id LIMIT 1")
    lead, judge, mei = "Jordan Lee", "Dr. Sam Rivera", "Dr. Mei Tanaka"
    return [
        ("Review, a conversation", mei, "/?kind=prefix"),
        ("Review, a model's reply", mei, "/?kind=response"),
        ("Trajectories", mei, f"/trajectories?item={quote(run)}&step=4"),
        ("Graded conversations", mei, f"/graded?item={quote(graded)}"),
        ("Adjudicate, labels", judge, "/adjudicate?what=labels"),
        ("Adjudicate, rubric verdicts", lead, "/adjudicate?what=rubric"),
        ("Adjudicate, step marks", lead, "/adjudicate?what=steps"),
        ("Agreement", lead, "/agreement"),
        ("Disagreement, a conversation", lead, "/disagreement?item=demo_case_0001_r01"),
        ("Disagreement, a reply", lead, f"/disagreement?item={quote(reply)}"),
        ("Browse", lead, "/browse"),
        ("Rounds and people", lead, "/rounds"),
        ("Progress and audit", lead, "/activity"),
        ("Codebook", mei, "/codebook"),
    ]


def a_study_under_way(db) -> None:
    """A review round, with its items' places; a settled item and one taken back."""
    from review.team.adjudication import adjudication_queue, settle, take_back
    from review.team.reviewers import ensure_reviewer
    from review.team.rounds import RoundSpec, create_round

    q = "carebench.escalation_needed"
    with open_store(db) as s:
        lead = ensure_reviewer(s, "Jordan Lee")
        create_round(s, RoundSpec("Pilot", q, reviewers_per_item=2, limit=6), lead)
        judge = ensure_reviewer(s, "Dr. Sam Rivera")
        first, second = adjudication_queue(s, None, judge, question_key=q)[:2]
        settle(s, None, first.item_id, judge, "1B", "reviewer_error", "red flag",
               question_key=q, expected=first.settled_id, answers_shown=first.answer_ids)
        take_back(s, judge, settle(s, None, second.item_id, judge, "0A", "ambiguous_item",
                                   question_key=q, expected=second.settled_id,
                                   answers_shown=second.answer_ids))


def test_no_code_raw_id_or_stored_name_reads_on_a_clinicians_screen(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "60")
    a_study_under_way(demo_copy)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(120_000)
        wrong = {}
        for what, who, address in screens(demo_copy):
            sep = "&" if "?" in address else "?"
            page.goto(f"{url}{address}{sep}reviewer={quote(who)}")
            wait_for_app(page, 120_000)
            if page.get_by_role("button", name=re.compile("Show the labels anyway")).count():
                page.get_by_role("button", name=re.compile("Show the labels anyway")).click()
                wait_for_app(page, 120_000)
            text = visible(page)
            assert len(text) > 200, (what, text)  # the screen was drawn
            if what == "Graded conversations":  # the first of them, numbered among its kind
                assert "Graded conversation 1, model A's completion" in text, text
            if bad := found(text, what in RESEARCHERS):
                wrong[what] = bad
        assert not wrong, "\n".join(f"{what}: {bad}" for what, bad in wrong.items())
