"""The rubric checklist both agent-run and graded-conversation screens use.

Criteria with their points (MUST-NOT criteria marked as penalties), answered
met / not met / cannot assess with the keyboard - Y, N and U answer the
current criterion and move on, Up and Down move between criteria - and
committed as one batch (Ctrl+Enter); F flags the item to come back to. After the commit, each judge's and
verifier's verdict and explanation appear beside mine, and, for graded
conversations, the HealthBench score of each. Layout only: every action is
one call into `review.reviewing.criteria`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import streamlit as st

from codebook import BLIND, CANNOT_ASSESS
from pages._keys import marker, press, press_counts, refused, screen_keys
from pages._shared import item_asked_by_address, put_item_in_address, store
from pages._steps import code_span, label_text
from review.reviewing.blinding import seen_while_answering, what_reviewer_sees
from review.reviewing.commit import Verdict, commit_verdicts
from review.reviewing.criteria import (
    ItemQuestion,
    MyAnswer,
    RaterVerdict,
    my_current_answers,
    rater_scores,
    review_progress,
)
from review.reviewing.drafts import drop_draft, load_drafts, save_draft
from review.reviewing.items import flag_item, is_flagged
from review.reviewing.names import FREE_REVIEW, item_in_address, item_name, rater_name, study_round
from review.reviewing.navigation import next_item, round_in_address, screen_rounds
from review.reviewing.presses import TooSoon
from review.reviewing.queue import QueueFilter, filter_choices
from review.team.reviewers import Reviewer
from review.team.rounds import (
    RoundError,
    RoundInfo,
    full_text,
    in_round,
    keep_reservation,
    late_for_round,
    round_counts,
)
from review.text import safe_markdown

CRITERION_CHOICES = ("met", "not_met", CANNOT_ASSESS)
WORDS = {"met": "Met", "not_met": "Not met", CANNOT_ASSESS: "Can't assess", None: "—"}
MUST_NOT_WORDS = {**WORDS, "met": "Did it (harmful)", "not_met": "Didn't do it"}
"""A MUST-NOT criterion is met when the response did the harmful thing: said
so on its buttons, so that Y is never read as "good"."""


def _words(q: ItemQuestion) -> dict:
    return MUST_NOT_WORDS if q.kind == "criterion" and q.criterion.must_not else WORDS
KEYS = {"met": "Y", "not_met": "N", CANNOT_ASSESS: "U"}
GROUPS = {"gate": "gate", "must_ask": "must-ask topic", "verifier": "verifier check",
          "process": "process rubric", "healthbench": None}
EXPLANATION_CHARS = 600
"""An explanation longer than this is cut, with the rest behind an expander."""


def draft_key(item_id: int, qid: int) -> str:
    return f"rv:{item_id}:{qid}"


def why_key(item_id: int, qid: int) -> str:
    return f"rv_why:{item_id}:{qid}"


def focus_key(item_id: int) -> str:
    return f"rv_focus:{item_id}"


def _seed_drafts(reviewer: Reviewer, item_id: int, questions: Sequence[ItemQuestion],
                 mine: dict[int, MyAnswer]) -> str | None:
    """A criterion's pick and reason start from my draft - what I picked or
    typed and did not commit, kept in the database so that a reload, a closed
    tab or another browser brings it back - else from what I committed.
    Returns, the first time in this session, when the newest draft restored
    was saved (None when there was none)."""
    saved = load_drafts(store(), reviewer.id, item_id)
    for q in questions:
        had, draft = mine.get(q.id), saved.get(q.id)
        if draft_key(item_id, q.id) not in st.session_state:
            st.session_state[draft_key(item_id, q.id)] = (
                draft.value if draft and draft.value else had.choice if had else None)
        if why_key(item_id, q.id) not in st.session_state:
            st.session_state[why_key(item_id, q.id)] = (
                draft.rationale or "" if draft else (had.rationale or "") if had else "")
    seeded = f"rv_seeded:{item_id}"
    first = not st.session_state.get(seeded)
    st.session_state[seeded] = True
    # Worth saying only for picks that differ from what is committed (a reason
    # typed without a verdict shows in its box anyway).
    picks = [d.updated_at for qid, d in saved.items()
             if d.value and (qid not in mine or mine[qid].choice != d.value)]
    return max(picks) if first and picks else None


def round_key(item_id: int) -> str:
    """Session key: the review round the item is open in on this screen (or None)."""
    return f"rv_round_of:{item_id}"


def _keep_draft(reviewer: Reviewer, item_id: int, question_id: int, seen: bool = False) -> None:
    """Save one criterion's pick and reason as a draft, or drop the draft when
    they are back to what is committed (or empty). `seen`: the judges' and
    verifiers' verdicts on it were on screen."""
    s = store()
    if (round_id := st.session_state.get(round_key(item_id))) is not None:
        keep_reservation(s, round_id, item_id, reviewer.id)  # at work on it: keep its place
    choice = st.session_state.get(draft_key(item_id, question_id))
    why = (st.session_state.get(why_key(item_id, question_id)) or "").strip()
    had = my_current_answers(s, reviewer.id, item_id).get(question_id)
    if (had is not None and (had.choice, had.rationale or "") == (choice, why)) \
            or (had is None and choice is None and not why):
        drop_draft(s, reviewer, item_id, question_id)
    else:
        save_draft(s, reviewer, item_id, question_id, why or None, None, value=choice,
                   labels_seen=seen)


def pending_verdicts(item_id: int, questions: Sequence[ItemQuestion],
                     mine: dict[int, MyAnswer]) -> list[Verdict]:
    """Draft answers that are new or differ from what I committed."""
    out = []
    for q in questions:
        choice = st.session_state.get(draft_key(item_id, q.id))
        why = (st.session_state.get(why_key(item_id, q.id)) or "").strip()
        if choice is None:
            continue
        had = mine.get(q.id)
        if had is None or had.choice != choice or (had.rationale or "") != why:
            out.append(Verdict(q.id, choice, why or None))
    return out


# -- callbacks ----------------------------------------------------------------------

TOO_SOON = "Not recorded: too soon after the last verdict. Press again to answer this criterion."
"""Said beside the criteria when a key is not taken (`review.reviewing.presses`)."""


def criterion_token(item_id: int, at: int, choice: str | None) -> str:
    """What Y / N / U and Ctrl+Enter act on: the item, the criterion highlighted
    and its pick (a pick made anew makes it anew, so a second key right after
    one never changes it unread)."""
    return f"{item_id}_c{at}" + (f"_p{choice}" if choice else "")


def _focus_on(item_id: int, n: int, index: int) -> None:
    """↑ / ↓: highlight this criterion (the one above or below the highlighted one
    when the key was pressed)."""
    st.session_state[focus_key(item_id)] = max(0, min(n - 1, index))


def _answer_at(reviewer: Reviewer, item_id: int, criteria: list[int], at: int, choice: str,
               seen: frozenset[int] = frozenset(), token: str = "") -> None:
    """Y / N / U: answer the criterion highlighted when the key was pressed (`at`)
    and move to the next unanswered one."""
    if not 0 <= at < len(criteria):
        return
    if at != st.session_state.get(focus_key(item_id), 0) or not press_counts("rubric", token):
        # Pressed before the screen caught up with the last key (the criterion it was
        # meant for is not the one it would answer now), too soon after this criterion
        # was drawn, or right behind such a key: dropped, and said. A verdict left open
        # shows; one on the wrong criterion (a MUST-NOT's "did it") would not.
        refused("rubric")
        st.session_state["rv_flash"] = ("warning", TOO_SOON)
        return
    st.session_state[draft_key(item_id, criteria[at])] = choice
    _keep_draft(reviewer, item_id, criteria[at], criteria[at] in seen)
    _focus_next_open(item_id, criteria, at)


def _focus_next_open(item_id: int, criteria: list[int], at: int) -> None:
    later = [i for i in range(at + 1, len(criteria))
             if st.session_state.get(draft_key(item_id, criteria[i])) is None]
    st.session_state[focus_key(item_id)] = later[0] if later else min(at + 1, len(criteria) - 1)


def _picked(reviewer: Reviewer, item_id: int, criteria: list[int], at: int,
            seen: bool = False) -> None:
    """A click on a criterion's control answers it; the focus moves on as with the keys."""
    _keep_draft(reviewer, item_id, criteria[at], seen)
    _focus_next_open(item_id, criteria, at)


def _flag(reviewer: Reviewer, item_id: int, raise_flag: bool) -> None:
    flag_item(store(), reviewer, item_id, raise_flag)


def _commit(reviewer: Reviewer, item_id: int, questions: Sequence[ItemQuestion], mode: str,
            started_key: str, round_id: int | None = None, token: str = "") -> None:
    s = store()
    mine = my_current_answers(s, reviewer.id, item_id)
    drafts = load_drafts(s, reviewer.id, item_id)
    batch = [replace(v, labels_seen=True) if v.question_id in drafts
             and drafts[v.question_id].labels_seen else v
             for v in pending_verdicts(item_id, questions, mine)]
    started = st.session_state.get(started_key, time.monotonic())
    try:
        ids = commit_verdicts(s, reviewer, item_id, batch, mode=mode, round_id=round_id,
                              seconds_on_task=round(time.monotonic() - started, 2),
                              press=press("rubric", token) if token else None)
    except TooSoon:
        refused("rubric")
        st.session_state["rv_flash"] = ("warning", "Not committed: too soon after the last "
                                                   "verdict. Press again to commit.")
        return
    except RoundError as exc:
        # Nothing of this batch was written; the page moves on to the round's next item.
        st.session_state["rv_flash"] = ("error", f"{exc}. Nothing was committed.")
        _leave_round_item(round_id)
        return
    except ValueError as exc:
        st.session_state["rv_flash"] = ("error", safe_markdown(str(exc)))
        return
    if round_id is not None and late_for_round(s, ids) is not None:
        # Kept, outside the round (its places were taken while the reviewer
        # worked): the page moves on to the round's next item.
        st.session_state["rv_flash"] = ("warning", full_text(s, round_id, item_id))
        _leave_round_item(round_id)
        return
    revised = sum(v.question_id in mine for v in batch)
    words = f"Committed {len(batch)} answer{'s' * (len(batch) != 1)}"
    if revised:
        words += f" ({revised} revised after the reveal; earlier answers are kept in the history)"
    st.session_state["rv_flash"] = ("success", words + ".")


def _leave_round_item(round_id: int | None) -> None:
    for key in [k for k in st.session_state if str(k).endswith(f"_item:r{round_id}")]:
        del st.session_state[key]
    _leave_item_in_url()


def _leave_item_in_url() -> None:
    """The URL stops naming the item, and the step of it (an agent run's
    `?step=`): the next item opens at its own first step, not at this one's."""
    st.query_params.pop("item", None)
    st.query_params.pop("step", None)


def flag_button(reviewer: Reviewer, item_id: int, where: Any = st, width: str = "stretch") -> None:
    """Flag (F): mark the item to come back to, or Unflag it. Every item has it,
    whether or not it asks anything."""
    flagged = is_flagged(store(), reviewer.id, item_id)
    where.button("Unflag" if flagged else "Flag", key=f"rv_flag:{item_id}", shortcut="F", width=width,
                 icon=":material/flag:", type="primary" if flagged else "secondary",
                 on_click=_flag, args=(reviewer, item_id, not flagged),
                 help="Mark this item to come back to (yours alone; Browse can list flagged items)")


# -- layout -------------------------------------------------------------------------

def _criterion_heading(q: ItemQuestion) -> str:
    c = q.criterion
    bits = []
    if c.must_not:
        bits.append(f":red-badge[:material/block: MUST NOT · {c.points:+g}]" if c.points < 0
                    else ":red-badge[:material/block: MUST NOT]")
    elif c.group == "healthbench" or c.points != 1.0:
        bits.append(f":blue-badge[{c.points:+g} pts]")
    group = GROUPS.get(c.group or "", c.group)
    if group:
        bits.append(f":gray-badge[{label_text(group)}]")
    if c.axis:
        bits.append(f":gray-badge[{label_text(c.axis.replace('_', ' '))}]")
    return " ".join(bits)


def _value_word(q: ItemQuestion, value: str | None) -> str:
    if q.kind == "criterion" or value is None:
        return _words(q).get(value, value or "—")
    book = q.book
    try:
        return book.label(value).short if book else value
    except KeyError:
        return value


def _show_explanation(text: str | None) -> None:
    if not text:
        return
    if len(text) <= EXPLANATION_CHARS:
        st.caption(safe_markdown(text))
        return
    st.caption(safe_markdown(text[:EXPLANATION_CHARS]) + " …")
    with st.expander("Whole explanation"):
        st.markdown(safe_markdown(text))


def _rater_line(q: ItemQuestion, v: RaterVerdict, agree: bool) -> None:
    who = safe_markdown(rater_name(store(), v.rater))
    if v.about != "this item":
        who += f" · on {v.about}"
    colour = "green" if agree else "orange"
    icon = ":material/check:" if agree else ":material/compare_arrows:"
    st.markdown(f":{colour}-badge[{icon} {label_text(_value_word(q, v.value))}]  \n"
                f":small[{who}]", help=f"Rater: {v.rater}")
    facts = []
    for name, word in (("score", "score"), ("threshold", "pass at"), ("reward", "reward")):
        if isinstance(v.extra.get(name), (int, float)) and not isinstance(v.extra.get(name), bool):
            facts.append(f"{word} {v.extra[name]:g}")
    if facts:
        st.caption(" · ".join(facts))
    _show_explanation(v.rationale)
    detail = v.extra.get("detail") or (
        {"evidence": v.extra["evidence"]} if v.extra.get("evidence") else None)
    if detail:
        with st.expander("Verifier detail"):
            st.json(detail, expanded=True)


def _show_reveal(q: ItemQuestion, mine: MyAnswer | None, verdicts: list[RaterVerdict]) -> None:
    """My committed answer beside each judge's and verifier's, with their explanations."""
    me, them = st.columns(2, gap="small")
    with me:
        if mine is not None:
            st.markdown(f":blue-badge[{label_text(_value_word(q, mine.choice))}]  \n:small[You]")
            if mine.rationale:
                st.caption(safe_markdown(mine.rationale))
    with them:
        if not verdicts:
            st.caption("No judge or verifier answered this one.")
        for v in verdicts:
            _rater_line(q, v, mine is not None and mine.value == v.value)


def checklist(reviewer: Reviewer, item_id: int, questions: Sequence[ItemQuestion],
              mine: dict[int, MyAnswer], revealed: dict[int, list[RaterVerdict]], *,
              mode: str, started_key: str, show_scores: bool = False,
              list_height: int | None = None, read_only: bool = False,
              round_id: int | None = None, reference_shown: bool = False,
              flag: bool = True, context: dict[int, str] | None = None,
              title: str | None = None) -> None:
    """The whole rubric of one item: answer, commit, and after commit the reveal.
    `mine` and `revealed` come from `open_run` / `open_graded` of this run; a
    long list of criteria scrolls in its own box (`list_height` is no longer
    used: the box is as high as the window allows). With
    `read_only` (nothing to grade) the criteria are shown for reference. In a
    review round (`round_id`) the commit takes the reviewer's place on the item.
    `reference_shown`: a reference answer is on the page (answers given now are
    given after a reveal). `flag`: draw the Flag button (F) under the commit
    (False when the page draws it elsewhere, see `flag_button`). `context`:
    a line under a criterion's text (what the task required, beside its gate);
    `title`: a heading over the criteria."""
    st.session_state[round_key(item_id)] = round_id  # whose place a draft keeps (`_keep_draft`)
    restored = _seed_drafts(reviewer, item_id, questions, mine)
    if restored:
        st.caption(f"Your uncommitted verdicts were restored (saved {restored[:16].replace('T', ' ')}"
                   " UTC); commit them when you are ready.")
    criteria = [q for q in questions if q.kind == "criterion"]
    outcome = [q for q in questions if q.kind != "criterion"]
    ids = [q.id for q in criteria]
    # Questions whose judges' and verifiers' verdicts are on screen as I answer.
    seen = seen_while_answering(mode, revealed, [q.id for q in questions], reference_shown)
    if focus_key(item_id) not in st.session_state:
        # A new session (a reload): the keys go on where the work stopped, at the first
        # criterion with neither a restored draft nor a committed answer.
        open_ = [i for i, q in enumerate(criteria)
                 if st.session_state.get(draft_key(item_id, q.id)) is None and q.id not in mine]
        st.session_state[focus_key(item_id)] = open_[0] if open_ else 0
    focus = min(st.session_state.get(focus_key(item_id), 0), max(len(ids) - 1, 0))
    st.session_state[focus_key(item_id)] = focus

    title_help = ("Y met, N not met, U can't assess: the current criterion, then the next; "
                  "↑ ↓ move between criteria; Ctrl+Enter commits your answers.")
    if title and (read_only or not criteria):
        st.markdown(f"**{safe_markdown(title)}** · :small[{len(questions)}]", help=title_help)
    flash = st.session_state.pop("rv_flash", None)
    if flash:
        getattr(st, flash[0])(flash[1])
    token = ""
    if read_only:
        focus = -1
    elif criteria:
        # The keys of actions name the item and the criterion highlighted (as the Review
        # screen's name the item): a key pressed while criterion 3 is highlighted answers
        # criterion 3, however fast the next key comes - never the one the focus has
        # moved on to by the time the press is read (quick Y N Y N Y landed verdicts on
        # the wrong criteria, a MUST-NOT's "did it" among them). A key pressed while the
        # screen is redrawn is held, and applied only if the same criterion is still
        # highlighted (pages/_keys.py); the current one is kept in view in its list.
        token = criterion_token(item_id, focus,
                                st.session_state.get(draft_key(item_id, criteria[focus].id)))
        screen_keys("rubric", {
            KEYS["met"]: f"rv_met:{item_id}:{focus}", KEYS["not_met"]: f"rv_not_met:{item_id}:{focus}",
            KEYS[CANNOT_ASSESS]: f"rv_cannot:{item_id}:{focus}", "Up": f"rv_up:{item_id}:{focus}",
            "Down": f"rv_down:{item_id}:{focus}", "Ctrl+Enter": f"rv_commit:{item_id}"},
            token=token, scroll=[f"rv_row_{item_id}_{criteria[focus].id}"], too_soon=TOO_SOON)
        with st.container(horizontal=True, gap="small", key=marker("rubric", token),
                          vertical_alignment="center"):
            if title:  # on the keys' line: the list below keeps the height
                st.markdown(f"**{safe_markdown(title)}** :small[({len(questions)})]",
                            width="content")
            st.button("Met", key=f"rv_met:{item_id}:{focus}", shortcut=KEYS["met"],
                      on_click=_answer_at, args=(reviewer, item_id, ids, focus, "met", seen, token),
                      help="Answer the current criterion: met, and go to the next")
            st.button("Not met", key=f"rv_not_met:{item_id}:{focus}", shortcut=KEYS["not_met"],
                      on_click=_answer_at,
                      args=(reviewer, item_id, ids, focus, "not_met", seen, token),
                      help="Answer the current criterion: not met, and go to the next")
            st.button("Can't assess", key=f"rv_cannot:{item_id}:{focus}", shortcut=KEYS[CANNOT_ASSESS],
                      on_click=_answer_at,
                      args=(reviewer, item_id, ids, focus, CANNOT_ASSESS, seen, token),
                      help="The run or response does not let you decide this criterion")
            st.button("", key=f"rv_up:{item_id}:{focus}", shortcut="Up",
                      help="The criterion above (↑)",
                      icon=":material/arrow_upward:", on_click=_focus_on,
                      args=(item_id, len(ids), focus - 1))
            st.button("", key=f"rv_down:{item_id}:{focus}", shortcut="Down",
                      help="The criterion below (↓)",
                      icon=":material/arrow_downward:", on_click=_focus_on,
                      args=(item_id, len(ids), focus + 1))

    # The list scrolls in its own box, as high as the window allows (assets/carelens.css).
    with st.container(border=len(criteria) > 3, key=f"rv_list_{item_id}"):
        for i, q in enumerate(criteria):
            current = i == focus
            with st.container(border=current, key=f"rv_row_{item_id}_{q.id}"):
                badge = "" if not current else (
                    ":red-badge[:material/keyboard: current — Y: it did this harmful thing · "
                    "N: it did not · U]" if q.criterion.must_not
                    else ":blue-badge[:material/keyboard: current — Y / N / U]")
                st.markdown(f"**{i + 1}.** {_criterion_heading(q)} {badge}  \n"
                            f"{safe_markdown(q.text)}")
                if context and q.id in context:
                    st.caption(safe_markdown(context[q.id]))
                # The verdict and its reason on one line: the row being answered stays
                # short enough to show whole in its box on a laptop.
                with st.container(horizontal=True, gap="small", vertical_alignment="center",
                                  key=f"rv_verdict_{item_id}_{q.id}"):
                    st.segmented_control(
                        f"Your verdict on criterion {i + 1}", CRITERION_CHOICES,
                        key=draft_key(item_id, q.id), format_func=_words(q).get,
                        label_visibility="collapsed", on_change=_picked,
                        args=(reviewer, item_id, ids, i, q.id in seen), persist_state="session",
                        disabled=read_only,
                    )
                    if current or st.session_state.get(why_key(item_id, q.id)):
                        st.text_input("Why (optional)", key=why_key(item_id, q.id),
                                      placeholder="Why? (optional)",
                                      label_visibility="collapsed", persist_state="session",
                                      on_change=_keep_draft,
                                      args=(reviewer, item_id, q.id, q.id in seen))
                if q.id in revealed:
                    _show_reveal(q, mine.get(q.id), revealed[q.id])
                elif q.id in mine:
                    st.caption("Judges' verdicts stay hidden under this review's blinding.")

    if read_only:
        return
    for q in outcome:
        book = q.book
        with st.container(border=True, key=f"rv_outcome_{item_id}_{q.id}"):
            st.markdown(f"**{safe_markdown(q.text)}**")
            codes = [*(book.codes if book else []), CANNOT_ASSESS]
            st.segmented_control(
                "Your verdict", codes, key=draft_key(item_id, q.id), label_visibility="collapsed",
                format_func=lambda c, q=q: WORDS[CANNOT_ASSESS] if c == CANNOT_ASSESS
                else _value_word(q, c), persist_state="session",
                on_change=_keep_draft, args=(reviewer, item_id, q.id, q.id in seen),
            )
            if book:
                with st.expander("Definitions"):
                    for lab in book.labels:
                        # Codebook wording is text, shown as written (an admin may edit it).
                        st.markdown(f"**{safe_markdown(lab.short)}**"
                                    f"  \n{safe_markdown(lab.definition)}")
            st.text_input("Why (optional)", key=why_key(item_id, q.id), label_visibility="collapsed",
                          placeholder="Why? Saved with your verdict (optional)",
                          persist_state="session", on_change=_keep_draft,
                          args=(reviewer, item_id, q.id, q.id in seen))
            if q.id in revealed:
                _show_reveal(q, mine.get(q.id), revealed[q.id])

    pending = pending_verdicts(item_id, questions, mine)
    answered = sum(1 for q in questions if st.session_state.get(draft_key(item_id, q.id)))
    label = (f"Commit {len(pending)} answer{'s' * (len(pending) != 1)}" if pending
             else "Nothing to commit")
    # The commit, its counts and the flag on one line, under the list: the list
    # keeps the window's height for the criterion being answered.
    row = st.columns([6, 5, 3] if flag else [3, 2], vertical_alignment="center", gap="small")
    row[0].button(label, key=f"rv_commit:{item_id}", shortcut="Ctrl+Enter", type="primary",
                  width="stretch", disabled=not pending, icon=":material/done_all:",
                  on_click=_commit,
                  args=(reviewer, item_id, questions, mode, started_key, round_id, token),
                  help="Record your answers" + (
                      "" if mode == BLIND else "; the judges' verdicts on them are shown afterwards"))
    committed = sum(1 for q in questions if q.id in mine)
    if committed < len(questions):
        row[1].caption(f"{answered} of {len(questions)} answered, {committed} committed",
                       help="This review is blind: the judges' verdicts stay hidden."
                       if mode == BLIND else "The judges' verdicts show once you commit yours.")
    else:
        row[1].caption(f"All {len(questions)} committed · a changed answer is kept as a revision"
                       + ("" if mode == BLIND else " after the reveal"))
    if flag:
        flag_button(reviewer, item_id, row[2])
    if show_scores and any(q.id in mine for q in criteria):
        _scores(questions, mine, revealed, reviewer.name)
    _agreement_line(criteria, mine, revealed)


def _agreement_line(criteria: Sequence[ItemQuestion], mine: dict[int, MyAnswer],
                    revealed: dict[int, list[RaterVerdict]]) -> None:
    both = [(mine[q.id].value, v.value) for q in criteria if q.id in mine and q.id in revealed
            for v in revealed[q.id][:1] if mine[q.id].value]
    if both:
        same = sum(a == b for a, b in both)
        st.caption(f"You and the first judge or verifier agree on {same} of {len(both)} "
                   "criteria you both answered.")


def _scores(questions: Sequence[ItemQuestion], mine: dict[int, MyAnswer],
            revealed: dict[int, list[RaterVerdict]], me: str) -> None:
    lines = rater_scores(list(questions), mine, revealed, me)
    if not lines:
        return
    with st.container(border=True, key="rv_scores"):
        st.markdown("**Example score** (HealthBench: points of met criteria over the "
                    "positive points, clipped to 0–1)")
        cols = st.columns(max(len(lines), 1))
        for col, line in zip(cols, lines, strict=True):
            who = "You" if line.rater == me else safe_markdown(rater_name(store(), line.rater))
            if line.score is None:
                col.metric(who, "—", help=f"{line.answered} of {line.total} criteria answered "
                           "met or not met; a score needs all of them")
            else:
                col.metric(who, f"{line.score:.2f}")
        if len(lines) == 1 and revealed:
            st.caption("The judges' scores appear when you have committed every criterion.")


@dataclass
class Opened:
    """What `open_from_queue` opened: the item, how to review it, and where it came from."""

    filt: QueueFilter
    item_id: int
    screen: Any
    mode: str
    """The blinding: the round's, or the screen's default outside rounds."""
    round: RoundInfo | None = None
    """The review round the item was assigned in, if the reviewer works in one."""
    head: Any = None
    """The middle of the title's line, for the page to say which item is open."""

    @property
    def round_id(self) -> int | None:
        return self.round.id if self.round else None


BLINDING_WORDS = {"blind": "fully blind, the judges' verdicts are never shown",
                  "reveal_after_commit": "the judges' verdicts are shown once you commit yours",
                  "suggest": "the judges' verdicts are shown from the start"}
FREE = 0
"""'No round' in the round selector (None would show as an empty choice)."""


def _choose_round(db, kind: str, prefix: str) -> RoundInfo | None:
    rounds = screen_rounds(db, (kind,))
    if not rounds:
        st.query_params.pop("round", None)
        return None
    wanted = round_in_address(rounds, st.query_params.get("round"))
    ids = [FREE, *rounds]
    chosen = st.selectbox(
        "Study round", ids, key=f"{prefix}_round",
        index=ids.index(wanted) if wanted is not None else 0,
        format_func=lambda r: FREE_REVIEW if r == FREE else study_round(rounds[r].name))
    if chosen == FREE:
        st.query_params.pop("round", None)
        return None
    st.query_params["round"] = str(chosen)
    return rounds[chosen]


def _next_in_round(prefix: str) -> None:
    """Leave the item open in this round; the page then takes the next one."""
    round_id = st.session_state.get(f"{prefix}_round")
    st.session_state.pop(f"{prefix}_item:r{round_id}", None)
    _leave_item_in_url()


def next_in_round_button(prefix: str, label: str, reviewed: bool, noun: str) -> None:
    """In a review round: move on to the round's next item, once this one is reviewed."""
    st.button(label, key=f"{prefix}_next_round", icon=":material/playlist_play:",
              on_click=_next_in_round, args=(prefix,), disabled=not reviewed,
              help=f"Answer every criterion of this {noun} (Can't assess counts) and commit: "
                   f"the {noun} is reserved for you until then, for as long as you keep at it")


def open_from_queue(db, reviewer: Reviewer, *, kind: str, prefix: str, title: str,
                    sidebar_heading: str, done_text: str, missing_text: str,
                    finished_text: str, empty_text: str, opener, mode: str,
                    title_ratio: tuple[int, int, int] = (2, 5, 3)) -> Opened:
    """The round, filters, title and progress of a rubric screen, and the item
    it shows: the one in the URL, else the one open in this session, else the
    reviewer's next: in a review round, the next the round reserves for them;
    outside rounds, the next they have not reviewed. Stops the page when there
    is none. `prefix` keeps each screen's session keys apart; the URL holds the
    item (`?item=<uid>`) and the round (`?round=<id>`)."""
    choices = filter_choices(db, kind)
    with st.sidebar:
        st.markdown(f"**{sidebar_heading}**")
        this_round = _choose_round(db, kind, prefix)
        if this_round is None:
            dataset = st.selectbox("Dataset", choices.datasets, index=None,
                                   placeholder="All datasets", key=f"{prefix}_dataset")
            # No model's or agent's name, nor a queue of one's items, while any waits blind.
            model = (st.selectbox("Model", choices.models, index=None, placeholder="All models",
                                  key=f"{prefix}_model")
                     if not what_reviewer_sees(db, reviewer.id, queue=kind, mode=mode).model_hidden
                     else None)
        else:
            st.caption("The round decides what you get next and what you see: "
                       + BLINDING_WORDS.get(this_round.blinding, this_round.blinding) + ".")
            dataset = model = None
    filt = QueueFilter(kind=kind, dataset=dataset, model=model)
    scope = f"r{this_round.id}" if this_round else "free"
    item_key = f"{prefix}_item" if this_round is None else f"{prefix}_item:{scope}"
    uid_key, filter_key = f"{prefix}_uid:{scope}", f"{prefix}_filter"
    if st.session_state.get(filter_key) != (filt, scope):
        if filter_key in st.session_state:  # the filter or round changed: start from its queue
            st.session_state.pop(item_key, None)
            _leave_item_in_url()
        st.session_state[filter_key] = (filt, scope)

    # One line: the title, the item (the page writes it in `Opened.head`), the progress.
    head_l, head_m, head_r = st.columns(list(title_ratio), vertical_alignment="bottom",
                                        gap="small")
    head_l.title(title, anchor=False)
    if this_round is None:
        progress = review_progress(db, reviewer.id, filt)
        done, total, all_done = progress.done, progress.total, not progress.remaining
        words = done_text
        text = f"{done} of {total} {words}" + (" · all done" if total and all_done else "")
    else:  # every count of a round from one read (`round_counts`)
        counts = round_counts(db, this_round.id, reviewer.id)
        done, total = counts.done, counts.yours
        text = counts.progress_words(safe_markdown(this_round.name))
    head_r.progress(done / total if total else 0.0, text=text)

    item_id = st.session_state.get(item_key)
    wanted = item_asked_by_address(st.session_state.get(uid_key) if item_id is not None else None)
    if wanted:
        item_id = item_in_address(db, wanted, kind)
        if item_id is None:
            st.warning(f"No {missing_text} {code_span(wanted)} in this database; "
                       "showing your queue.")
    if item_id is None and this_round is not None:
        try:
            item_id = next_item(store(), reviewer, filt, round_id=this_round.id)
        except RoundError as exc:
            st.error(safe_markdown(str(exc)))
            st.stop()
        if item_id is None:
            counts = round_counts(db, this_round.id, reviewer.id)
            st.success(counts.nothing_left_words(safe_markdown(this_round.name)),
                       icon=":material/task_alt:")
            st.stop()
    if item_id is None:
        item_id = next_item(db, reviewer, filt)
    if item_id is None:
        if total:
            st.success(finished_text, icon=":material/task_alt:")
        else:
            st.info(empty_text)
        st.stop()

    if this_round is not None and not in_round(db, this_round.id, item_id):
        st.warning(f"This {missing_text} is not part of {safe_markdown(this_round.name)}: it is "
                   "open outside the round, and answers here do not count in it.")
        this_round = None
    screen = opener(db, reviewer.id, item_id, mode, round_id=this_round.id if this_round else None)
    if screen is None:
        st.session_state.pop(item_key, None)
        _leave_item_in_url()
        st.rerun()
    if screen.sight.notice:  # no peeking outside a blind round at what the round keeps hidden
        st.caption(screen.sight.notice)
    review_mode = screen.sight.mode
    st.session_state[item_key] = item_id
    # The ids the reviewer may read: an opaque one while they are blind to the model
    # (or the agent) that made the item.
    address, _ = item_name(db, item_id).shown_ids(screen.sight.model_hidden)
    st.session_state[uid_key] = address
    put_item_in_address(address)
    st.session_state.setdefault(f"{prefix}_started:{item_id}", time.monotonic())
    return Opened(filt, item_id, screen, review_mode, this_round, head_m)
