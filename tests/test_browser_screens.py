"""The reviewer's screens at laptop size, and keys that never go astray: the
real server, Debian's Chromium, the keyboard (issue 19, points 1, 2, 4, 5, 7, 8).

Each test fails on the screens as they were before: the reply below the
fold once the reveal showed, a "3" typed into the round list, keys dropped
during a redraw, a reveal banner naming an item no longer on screen, a
mis-key corrected a second later recorded after the reveal, no key for
confidence or Skip, a toast over the answer buttons.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest

from review.workspace import open_store
from tests.browser import (
    add_reviewers,
    chromium,
    key_notice,
    ready_for_keys,
    release_focus,
    running_app,
    wait_for_app,
    wait_for_progress,
)

pytestmark = pytest.mark.browser
LAPTOP = {"width": 1280, "height": 720}
Q = "carebench.escalation_needed"


def answers_of(db, name) -> list[tuple]:
    with open_store(db) as s:
        rows = s.query(
            "SELECT i.uid, a.status, a.value, a.phase, a.confidence, a.rationale FROM annotations a"
            " JOIN items i ON i.id = a.item_id JOIN raters r ON r.id = a.rater_id"
            " WHERE r.name = ? ORDER BY a.id", (name,))
        return [tuple(r) for r in rows]


def prefixes(db) -> list[str]:
    with open_store(db) as s:
        return [r[0] for r in s.query("SELECT uid FROM items WHERE kind = 'prefix' ORDER BY id")]


def open_review(browser, url: str, who: str, query: str = ""):
    """The Review screen at laptop size, as `who`, ready for keys."""
    page = browser.new_page(viewport=LAPTOP)
    page.goto(f"{url}/?reviewer={who.replace(' ', '+')}{query}")
    ready_for_keys(page)
    return page


def address_item(page) -> str | None:
    return parse_qs(urlparse(page.url).query).get("item", [None])[0]


SHOWN_ID = """() => {
    const text = document.querySelector('[data-testid="stMain"]').innerText.replace(/\\u2060/g, '');
    const id = text.match(/^id (\\S+?)(?: ·|$)/m)
        || text.match(/(demo_case_\\d+_r\\d+(?:::[\\w.@-]+)*) · item/);
    return id && id[1];
}"""

BOXES = """sels => sels.map(sel => {
    // The last element matching each selector ("css::text(words)": the last one
    // whose text holds the words): its box, and how much of it shows in the
    // window, clipped by every scrolling box around it.
    const [css, words] = sel.split('::text(');
    const all = [...document.querySelectorAll(css)]
        .filter(e => !words || e.innerText.includes(words.slice(0, -1)));
    const el = all[all.length - 1];
    if (!el) return null;
    const r = el.getBoundingClientRect();
    let top = Math.max(r.top, 0), bottom = Math.min(r.bottom, window.innerHeight);
    for (let p = el.parentElement; p; p = p.parentElement) {
        if (/(auto|scroll|hidden)/.test(getComputedStyle(p).overflowY)) {
            const b = p.getBoundingClientRect();
            top = Math.max(top, b.top); bottom = Math.min(bottom, b.bottom);
        }
    }
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height,
            seen: Math.max(0, bottom - top)};
})"""


def in_view(page, judged: str, together: list[str]) -> list[str]:
    """What is not in the window: the judged text (all of it, or 200 px of a long
    one) and each of `together` (whole)."""
    boxes = page.evaluate(BOXES, [judged, *together])
    size = page.viewport_size
    out = []
    j = boxes[0]
    if j is None or j["seen"] < min(j["height"], 200) - 1:
        out.append(f"the judged text ({judged}): {j}")
    for sel, b in zip(together, boxes[1:], strict=True):
        if b is None or b["top"] < 0 or b["bottom"] > size["height"] or b["right"] > size["width"]:
            out.append(f"{sel}: {b}")
    return out


JUDGED_REVIEW = "[data-testid=stMain] [data-testid=stChatMessage]"


def answer_buttons(page) -> list[str]:
    """Selectors of the four answer buttons, as they are keyed on screen."""
    keys = page.evaluate("""() => [...document.querySelectorAll('[class*="st-key-label-"]')]
        .map(e => [...e.classList].find(c => c.startsWith('st-key-label-')))""")
    assert len(keys) == 4, keys
    return [f".{k} button" for k in keys]


def check_laptop_layout(page, judged: str = JUDGED_REVIEW) -> None:
    missing = in_view(page, judged, answer_buttons(page))
    assert not missing, f"not in the 1280x720 window: {missing}"


def test_review_at_1280x720_shows_the_judged_text_and_the_four_answers_before_and_after_keys(
        demo_copy, tmp_path):
    """Conversations and model replies (the demo's, and 200 long replies): the
    latest patient message or the reply, and the four answers, are in the
    window together, before and after answers given by key (the reveal of the
    last answer never pushes the item down); the address names the item shown."""
    from bench.gen_carebench import generate
    from review.datasets.sources import import_file

    with open_store(demo_copy) as s:
        for path in generate(tmp_path / "long", n_prefixes=6, n_models=5, seed=3):
            import_file(s, path)
        long_reply = s.scalar("SELECT uid FROM items WHERE kind = 'response' AND uid LIKE 'bench%'"
                              " ORDER BY length(json_extract(payload, '$.response')) DESC LIMIT 1")
    add_reviewers(demo_copy, "Dr. Laptop")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        for path, total in (("/?reviewer=Dr.+Laptop&kind=prefix", 91),
                            ("/?reviewer=Dr.+Laptop&kind=response", 370),
                            (f"/?reviewer=Dr.+Laptop&kind=response&item={long_reply}", 370)):
            page.goto(url + path)
            ready_for_keys(page)
            check_laptop_layout(page)
            done = len([a for a in answers_of(demo_copy, "Dr. Laptop")
                        if ("::" in a[0]) == ("response" in path)])
            for key in "231":
                release_focus(page)
                page.keyboard.press(key)
                done += 1
                wait_for_progress(page, f"{done} of {total}")
                check_laptop_layout(page)
                assert address_item(page) == page.evaluate(SHOWN_ID)
        page.screenshot(path=str(demo_copy.parent / "review-1280x720.png"))


def test_after_choosing_a_study_round_a_digit_answers_and_types_nothing(demo_copy):
    """The round list gives the focus back: "3" answers the round's item, it is
    not typed into the list (it was, as 3333333)."""
    from review.team.reviewers import ensure_reviewer
    from review.team.rounds import RoundSpec, create_round

    with open_store(demo_copy) as s:
        admin = ensure_reviewer(s, "Adm", role="admin")
        ensure_reviewer(s, "Dr. Select")
        create_round(s, RoundSpec("Pilot", Q, reviewers_per_item=1), admin)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(url + "/?reviewer=Dr.+Select")
        wait_for_app(page)
        rounds = page.get_by_test_id("stMain").get_by_role("combobox").first
        rounds.click()
        page.get_by_role("option", name=re.compile("Pilot")).click()
        wait_for_app(page)
        page.keyboard.press("3")
        wait_for_progress(page, "1 of")
        assert [a[2] for a in answers_of(demo_copy, "Dr. Select")] == [
            "1A_ESCALATION_NONURGENT_CARE"]
        assert "3" not in rounds.input_value()


def test_three_presses_of_back_during_redraws_move_three_items(demo_copy):
    """← ← ← 150 ms apart: each press moves one item back, the ones pressed while
    the screen was redrawn included (two of three moved before)."""
    add_reviewers(demo_copy, "Dr. Arrows")
    uids = prefixes(demo_copy)
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/?reviewer=Dr.+Arrows&item={uids[6]}")
        ready_for_keys(page)
        for _ in range(3):
            page.keyboard.press("ArrowLeft")
            page.wait_for_timeout(150)
        page.wait_for_timeout(2500)
        wait_for_app(page)
        page.wait_for_timeout(1000)
        wait_for_app(page)
        assert page.evaluate(SHOWN_ID) == uids[3]
        assert address_item(page) == uids[3]


def test_an_answer_key_pressed_during_the_redraw_is_refused_and_said_never_applied_elsewhere(
        demo_copy):
    """2 then 3 at once: 2 answers the item shown, 3 (pressed while the next was
    being drawn) answers nothing, and the screen says so."""
    add_reviewers(demo_copy, "Dr. Quick Two")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_review(browser, url, "Dr. Quick Two")
        page.keyboard.press("2")
        page.keyboard.press("3")
        page.wait_for_timeout(2500)
        wait_for_app(page)
        rows = answers_of(demo_copy, "Dr. Quick Two")
        assert [r[0] for r in rows] == ["demo_case_0001_r01"] and rows[0][2].startswith("0B")
        said = page.evaluate("""() => {
            const n = document.getElementById('carelens-key-notice');
            const main = document.querySelector('[data-testid="stMain"]').innerText;
            return (n ? n.textContent : '') + ' ' + main;
        }""")
        assert "too soon after the last answer" in said.lower()


@pytest.mark.xfail(strict=False, reason=(
    "issue 29, open: on a busy machine (about 1 reload in 6 with two CPU hogs beside it) the "
    "item is drawn before assets/keys.js has installed, and a key pressed then goes nowhere, "
    "unsaid (the keys' log empty). The CSS that hides the page until the keys are live comes "
    "in an st.html element whose code Streamlit may load after the chat message's."))
def test_a_key_pressed_as_soon_as_the_item_appears_after_a_reload_is_refused_then_taken(
        demo_copy):
    """The item has been on screen for less than anyone reads it: a key pressed
    the moment it appears after a reload is not taken, and the screen says so
    beside the answers; pressed again, it answers that item (never lost
    silently, never applied to another)."""
    add_reviewers(demo_copy, "Dr. Early")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(url + "/?reviewer=Dr.+Early")
        wait_for_app(page)
        for n in range(1, 3):
            page.reload(wait_until="commit")
            page.wait_for_function(  # the patient's message is in view
                "() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stChatMessage]')]"
                ".some(m => m.checkVisibility({visibilityProperty: true}))", polling=5)
            shown = page.evaluate(SHOWN_ID)
            page.keyboard.press("2")
            said = key_notice(page)  # by the browser, or by the server if the key came first
            assert "too soon" in said.lower()
            assert len(answers_of(demo_copy, "Dr. Early")) == n - 1
            wait_for_app(page)
            page.keyboard.press("2")
            wait_for_progress(page, f"{n} of 85")
            assert answers_of(demo_copy, "Dr. Early")[-1][0] == shown


def test_the_last_answer_panel_names_only_the_answer_just_given(demo_copy):
    """It describes the answer just given, beside the next item, and goes once
    another item is on screen: after Back, after switching to model replies,
    after another screen. No toast covers an answer button."""
    add_reviewers(demo_copy, "Dr. Banner")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_review(browser, url, "Dr. Banner")
        page.keyboard.press("1")
        wait_for_progress(page, "1 of 85")
        main = page.get_by_test_id("stMain")
        assert "Your answer to Conversation 1, after the patient's 1st message" in main.inner_text()
        release_focus(page)
        page.keyboard.press("ArrowLeft")  # back to it
        page.wait_for_function(f"() => ({SHOWN_ID})() === 'demo_case_0001_r01'")
        wait_for_app(page)
        assert "Your answer to" not in main.inner_text()
        release_focus(page)
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"() => ({SHOWN_ID})() === 'demo_case_0001_r02'")
        wait_for_app(page)
        assert "Your answer to" not in main.inner_text()
        # A skip: said beside the answers, not in a toast over them.
        release_focus(page)
        page.keyboard.press("2")
        wait_for_progress(page, "2 of 85")
        page.get_by_placeholder(re.compile("Why skip")).fill("not my field")
        page.get_by_placeholder(re.compile("Why skip")).press("Enter")
        wait_for_progress(page, "3 of 85")
        covered = page.evaluate("""() => {
            const toasts = [...document.querySelectorAll('[data-testid="stToast"]')]
                .map(t => t.getBoundingClientRect());
            return [...document.querySelectorAll('[data-testid=stMain] button')].filter(b => {
                const r = b.getBoundingClientRect();
                return toasts.some(t => t.left < r.right && r.left < t.right
                                        && t.top < r.bottom && r.top < t.bottom);
            }).map(b => b.innerText);
        }""")
        assert covered == []
        page.get_by_test_id("stMain").get_by_text("Model replies", exact=True).click()
        wait_for_app(page)
        assert "Your answer to" not in main.inner_text()
        page.get_by_test_id("stSidebarNav").get_by_text("Codebook").click()
        wait_for_app(page)
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Review", exact=True).click()
        wait_for_app(page)
        assert "Your answer to" not in main.inner_text()


def test_a_mis_key_corrected_within_the_undo_window_stays_blind(demo_copy, monkeypatch):
    """2 by mistake, then Z (Undo) within the window: the answer is withdrawn
    before any reveal (kept in the record, marked so) and the reveal never
    comes, however long the reviewer then takes; 3 is a blind answer. Once its
    window has passed, its labels show with the next answer (beside the item
    after next: no run of the screen of their own), and a change then is after
    the reveal. (Before: Z only reopened the item, the mis-key stayed in force
    and the reveal appeared once the window passed.)"""
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "4")
    add_reviewers(demo_copy, "Dr. Undo")
    last = "demo_case_0001_r03"  # a case's last round: its gold shows once due
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_review(browser, url, "Dr. Undo", f"&item={last}")
        page.keyboard.press("2")
        wait_for_progress(page, "1 of 85")
        main = page.get_by_test_id("stMain")
        assert "The reference label" not in main.inner_text()  # not yet: the window is open
        release_focus(page)
        page.keyboard.press("z")
        page.wait_for_function(f"() => ({SHOWN_ID})() === '{last}'")
        wait_for_app(page)
        assert [a[1:4] for a in answers_of(demo_copy, "Dr. Undo")] == [
            ("answered", "0B_NO_ESCALATION_SELF_CARE_MONITOR", "blind"),
            ("skipped", None, "blind")]
        assert "withdrawn before its labels were shown" in main.inner_text()
        # Past the window: the withdrawn answer revealed nothing.
        page.wait_for_timeout(5_500)
        release_focus(page)
        page.keyboard.press("Shift+2")  # a run of the screen
        wait_for_app(page)
        assert "The reference label" not in main.inner_text()
        release_focus(page)
        page.keyboard.press("3")
        wait_for_progress(page, "1 of 85")
        shown_next = page.evaluate(SHOWN_ID)
        assert [a[1:4] for a in answers_of(demo_copy, "Dr. Undo")][2:] == [
            ("answered", "1A_ESCALATION_NONURGENT_CARE", "blind")]
        assert "The reference label" not in main.inner_text()  # its window is open
        # The next answer, once that window has passed: the labels of the answer
        # before it show beside the item after.
        page.wait_for_timeout(4_500)
        release_focus(page)
        page.keyboard.press("1")
        wait_for_progress(page, "2 of 85")
        assert "The labels of your answer to Conversation 1, after the patient's 3rd message" \
            in main.inner_text().replace("\u2060", "")
        assert "The reference label" in main.inner_text()
        assert answers_of(demo_copy, "Dr. Undo")[-1][0] == shown_next
        # A change after the reveal: Back to it, and another answer.
        for _ in range(2):
            release_focus(page)
            page.keyboard.press("ArrowLeft")
            wait_for_app(page)
        assert page.evaluate(SHOWN_ID) == last
        release_focus(page)
        page.keyboard.press("4")
        wait_for_app(page)
        page.wait_for_timeout(500)
        assert answers_of(demo_copy, "Dr. Undo")[-1][:4] == (
            last, "answered", "1B_ESCALATION_URGENT_CARE", "after_reveal")


def test_confidence_and_skip_have_keys_shown_on_screen(demo_copy):
    """Shift+4 sets the confidence of the answer given next; S then a reason and
    Enter skips; both keys are written on the screen."""
    add_reviewers(demo_copy, "Dr. Keys Too")
    with running_app(demo_copy) as url, chromium() as browser:
        page = open_review(browser, url, "Dr. Keys Too")
        text = page.get_by_test_id("stMain").inner_text()
        assert "⇧1–5" in text
        assert page.get_by_placeholder(re.compile(r"Why skip.*\(S")).count() == 1
        page.keyboard.press("Shift+4")
        page.wait_for_function("""() => [...document.querySelectorAll(
            '.st-key-rv_confidence [data-testid="stBaseButton-primary"]')]
            .some(b => b.innerText.trim().startsWith('4'))""")
        wait_for_app(page)
        release_focus(page)
        page.keyboard.press("1")
        wait_for_progress(page, "1 of 85")
        release_focus(page)
        page.keyboard.press("s")
        page.keyboard.type("foreign language 2", delay=30)
        page.keyboard.press("Enter")
        wait_for_progress(page, "2 of 85")
        rows = answers_of(demo_copy, "Dr. Keys Too")
        assert [(r[1], r[4], r[5]) for r in rows] == [
            ("answered", 4, None), ("skipped", None, "foreign language 2")]


RUN = "kb:demo/r1/kb-demo-001__atlas-clinician"


def graded_uid(db) -> str:
    """The demo's first model completion (its uid carries simple-evals' completion id)."""
    with open_store(db) as s:
        return s.scalar("SELECT uid FROM items WHERE kind = 'graded_conversation'"
                        " AND parent_id IS NOT NULL ORDER BY id LIMIT 1")


def test_trajectories_at_1280x720_show_the_current_step_and_its_marks(demo_copy):
    add_reviewers(demo_copy, "Dr. Steps")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/trajectories?reviewer=Dr.+Steps&item={RUN}&step=3")
        ready_for_keys(page)
        for _ in range(3):
            missing = in_view(page, ".st-key-trj_step", [".st-key-trj_mark"])
            assert not missing, f"not in the 1280x720 window: {missing}"
            release_focus(page)
            before = page.locator(".st-key-trj_step").inner_text()
            page.keyboard.press("ArrowRight")
            page.wait_for_function("t => document.querySelector('.st-key-trj_step')"
                                   " && document.querySelector('.st-key-trj_step').innerText !== t",
                                   arg=before)
            wait_for_app(page)
        page.screenshot(path=str(demo_copy.parent / "trajectories-1280x720.png"))


def test_graded_conversations_at_1280x720_show_the_current_criterion_and_the_completion(demo_copy):
    add_reviewers(demo_copy, "Dr. Criteria")
    current = "[class*='st-key-rv_row_']::text(current —)"
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport=LAPTOP)
        page.goto(f"{url}/graded?reviewer=Dr.+Criteria&item={graded_uid(demo_copy)}")
        ready_for_keys(page)
        assert "No graded conversation" not in page.get_by_test_id("stMain").inner_text()
        for key in "yny":
            missing = in_view(page, ".st-key-hb_completion", [current])
            assert not missing, f"not in the 1280x720 window: {missing}"
            release_focus(page)
            page.keyboard.press(key)
            page.wait_for_timeout(300)
            wait_for_app(page)
        missing = in_view(page, ".st-key-hb_completion", [current])
        assert not missing, f"not in the 1280x720 window: {missing}"
        page.screenshot(path=str(demo_copy.parent / "graded-1280x720.png"))
