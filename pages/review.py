"""Review screen: step through prefixes and responses and answer, blind first."""

from __future__ import annotations

import time

import streamlit as st

from pages._shared import (
    item_asked_by_address,
    put_item_in_address,
    require_reviewer,
    show_text,
    store,
)
from pages._steps import code_span
from review.reviewing.blinding import DEFAULT_MODE, Sight, what_reviewer_sees
from review.reviewing.commit import commit_answer, skip_item
from review.reviewing.drafts import load_draft, save_draft
from review.reviewing.items import (
    ItemView,
    find_item_id,
    flag_item,
    is_flagged,
    load_item,
    my_answers,
)
from review.reviewing.navigation import item_place, next_item, round_in_address, screen_rounds
from review.reviewing.queue import (
    Progress,
    QueueFilter,
    filter_choices,
    first_skipped_item,
    queue_progress,
)
from review.team.codebook_versions import current_codebook
from review.team.rounds import (
    RoundError,
    full_text,
    in_round,
    keep_reservation,
    late_for_round,
    round_counts,
)
from review.text import inline_code, safe_markdown

KINDS = {"prefix": "Prefixes", "response": "Responses"}
STATUS_WORDS = {"cannot_assess": "cannot assess", "skipped": "skipped"}

reviewer = require_reviewer()


def rationale_key(item_id: int) -> str:
    """The rationale box of an item, per reviewer: another reviewer in the same
    browser gets a new box, never the text the last one typed (deleting a
    widget's state does not clear what the browser still shows and sends)."""
    return f"rationale:{reviewer.id}:{item_id}"


def confidence_key(item_id: int) -> str:
    return f"confidence:{reviewer.id}:{item_id}"

db = store()

# -- what to review ---------------------------------------------------------
choices = filter_choices(db)
kinds = [k for k in KINDS if k in choices.kinds] or ["prefix"]
rounds = screen_rounds(db, tuple(KINDS))
wanted_round = round_in_address(rounds, st.query_params.get("round"))
FREE = 0  # "no round": a real option (None would show as an empty choice)
round_ids = [FREE, *rounds]
head_l, head_m, head_r = st.columns([2, 3, 3], vertical_alignment="bottom")
with head_l:
    st.title("Review", anchor=False)
with head_m:
    review_round = st.selectbox(
        "Review round", round_ids,
        index=round_ids.index(wanted_round) if wanted_round is not None else 0,
        format_func=lambda r: "Free review (no round)" if r == FREE else f"Round: {rounds[r].name}",
        label_visibility="collapsed", disabled=not rounds,
    )
if review_round == FREE:
    st.query_params.pop("round", None)
else:
    st.query_params["round"] = str(review_round)
this_round = rounds.get(review_round)
default_kind = this_round.kind if this_round else st.query_params.get("kind", kinds[0])
with head_r:
    kind = st.segmented_control(
        "Items", kinds, format_func=KINDS.get, key="kind",
        default=default_kind if default_kind in kinds else kinds[0],
        label_visibility="collapsed", disabled=this_round is not None,
    ) or kinds[0]
if this_round is not None:
    kind = this_round.kind
if st.query_params.get("kind") != kind:
    st.query_params["kind"] = kind

kind_choices = filter_choices(db, kind)
with st.sidebar:
    st.markdown("**Queue filters**")
    if this_round is not None:
        st.caption("The round decides which items you get.")
        dataset = split = conv_round = model = None
    else:
        dataset = st.selectbox("Dataset", kind_choices.datasets, index=None, placeholder="All datasets")
        split = st.selectbox("Split", kind_choices.splits, index=None, placeholder="All splits")
        conv_round = st.selectbox("Conversation round", kind_choices.rounds, index=None,
                                  placeholder="All rounds")
        model = (st.selectbox("Model", kind_choices.models, index=None, placeholder="All models")
                 if kind == "response" else None)
filt = QueueFilter(kind=kind, dataset=dataset, split=split, round_id=conv_round, model=model)


def next_one(after_id: int | None = None) -> int | None:
    """The next item: reserved for me in a review round, else my free queue."""
    return next_item(store(), reviewer, filt, round_id=this_round.id if this_round else None,
                     after_id=after_id)


# -- which item -------------------------------------------------------------
state_key = f"item:{kind}:{review_round}"
item_id = st.session_state.get(state_key)
wanted_uid = item_asked_by_address(st.session_state.get("item_uid") if item_id is not None else None)
if wanted_uid:
    item_id = find_item_id(db, wanted_uid)
if item_id is None:
    item_id = next_one()
item = load_item(db, item_id) if item_id is not None else None
if item is not None and item.kind != kind:
    item = None
    item_id = next_one()
    item = load_item(db, item_id) if item_id is not None else None

# In a round, every count on this screen comes from one read (`round_counts`).
counts = round_counts(db, this_round.id, reviewer.id) if this_round is not None else None
if counts is not None:
    progress = Progress(counts.done, counts.yours)
    st.progress(counts.done / counts.yours if counts.yours else 0.0,
                text=counts.progress_words(safe_markdown(this_round.name), "answered"))
else:
    progress = queue_progress(db, reviewer.id, filt)
    st.progress(progress.done / progress.total if progress.total else 0.0,
                text=f"{progress.done} of {progress.total} answered by you"
                + (f" · {progress.skipped} of them skipped" if progress.skipped else "")
                + (" · all done" if progress.total and not progress.remaining else ""))


def _go(target_id: int | None) -> None:
    st.session_state[state_key] = target_id
    if target_id is None:
        st.query_params.pop("item", None)


def _advance_from(done_id: int) -> None:
    _go(next_one(after_id=done_id))


def db_for_callback():
    # Callbacks run before the script body of the next run: use this run's store.
    return store()


def ahead_of_the_screen(item_id: int) -> bool:
    """A key pressed on an item after an earlier key had already moved the queue on
    (typed ahead of the screen): it was meant for the next item, which the clinician
    has not seen, so it is dropped, not applied to either, and the screen says so."""
    current = st.session_state.get(state_key)
    if current is None or current == item_id:
        return False
    st.session_state["flash"] = ("info", "A key pressed before the next item was on screen was "
                                 "not applied; answer the item you see now.")
    return True


def on_answer(item_id: int, question_id: int, value: str | None, status: str, uid: str) -> None:
    if ahead_of_the_screen(item_id):
        return
    s = db_for_callback()
    already = bool(my_answers(s, reviewer.id, item_id, question_id))
    started = st.session_state.get("shown_at", time.monotonic())
    try:
        annotation_id = commit_answer(
            s, reviewer, item_id, question_id, value, status=status,
            rationale=st.session_state.get(rationale_key(item_id)),
            confidence=st.session_state.get(confidence_key(item_id)),
            seconds_on_task=round(time.monotonic() - started, 2), mode=mode,
            round_id=this_round.id if this_round else None,
        )
    except RoundError as exc:
        st.session_state["flash"] = ("warning", safe_markdown(str(exc)))
        _advance_from(item_id)
        return
    except ValueError as exc:
        st.session_state["flash"] = ("error", safe_markdown(str(exc)))
        return
    st.session_state["last_committed"] = item_id
    if this_round and late_for_round(s, [annotation_id]) is not None:
        st.session_state["flash"] = ("warning", full_text(s, this_round.id, item_id))
        _advance_from(item_id)
        return
    if already:
        st.session_state["flash"] = ("success", f"Answer to {code_span(uid)} revised;"
                                     " the earlier one is kept in the history.")
    else:
        _advance_from(item_id)


def on_skip(item_id: int, question_id: int, uid: str, withdraws: bool) -> None:
    if ahead_of_the_screen(item_id):
        return
    reason = st.session_state.get(f"skip_reason:{item_id}", "")
    try:
        skip_item(db_for_callback(), reviewer, item_id, question_id, reason, mode=mode,
                  round_id=this_round.id if this_round else None)
    except ValueError as exc:
        st.session_state["flash"] = ("error", safe_markdown(str(exc)))
        return
    st.toast(f"Skipped {code_span(uid)}" + ("; your answer to it is withdrawn (kept in its history)"
                                            if withdraws else "") + ". Back reaches it again.",
             icon=":material/skip_next:")
    _advance_from(item_id)


def on_draft(item_id: int, question_id: int) -> None:
    if this_round is not None:  # at work on it: its place in the round is kept
        keep_reservation(db_for_callback(), this_round.id, item_id, reviewer.id)
    save_draft(db_for_callback(), reviewer, item_id, question_id,
               st.session_state.get(rationale_key(item_id)),
               st.session_state.get(confidence_key(item_id)))


def on_flag(item_id: int, raise_flag: bool) -> None:
    if ahead_of_the_screen(item_id):
        return
    flag_item(db_for_callback(), reviewer, item_id, raise_flag,
              st.session_state.get(f"flag_note:{item_id}"))


def on_open(target_id: int | None) -> None:
    if target_id is not None:
        _go(target_id)


flash = st.session_state.pop("flash", None)
if flash:
    getattr(st, flash[0])(flash[1])


def label_name(item_view: ItemView | None, code: str | None) -> str:
    if code is None:
        return "—"
    book = item_view.codebook if item_view else None
    try:
        return f"{book.label(code).short} ({code[:2]})" if book else code
    except KeyError:
        return code


def sight_of(item_id: int) -> Sight:
    """What I may see of the item's labels, and under which blinding."""
    return what_reviewer_sees(db, reviewer.id, item_id,
                              round_id=this_round.id if this_round else None, mode=DEFAULT_MODE)


def show_reveal(item_view: ItemView, mine: str | None) -> None:
    sight = sight_of(item_view.id)
    if not sight.shown:
        st.caption(sight.held)
        return
    if sight.prefix_held:
        st.caption(sight.prefix_held)
    if not sight.labels:
        st.caption("No reference or machine labels for this item.")
        return
    for lab in sight.labels:
        who = "Gold" if lab.rater_kind == "reference" else safe_markdown(lab.rater)
        line = st.columns([3, 4], vertical_alignment="center")
        if lab.about == "the prefix":
            # Another question (what a safe assistant should do), not another answer to
            # mine: shown as what the response should have done, with no agree/differ mark.
            line[0].markdown(f"**{who}** · what the response should have done")
            line[1].badge(label_name(item_view, lab.value), color="gray", icon=":material/flag:")
            continue
        same = lab.value == mine
        line[0].markdown(f"**{who}** · {lab.about}")
        line[1].badge(label_name(item_view, lab.value),
                      color="green" if same else "orange",
                      icon=":material/check:" if same else ":material/compare_arrows:")
    show_earlier_rounds(sight)


def show_earlier_rounds(sight: Sight) -> None:
    """The case's earlier rounds, your answer and the gold of each: held back
    until now, its last round answered."""
    for earlier in sight.earlier:
        final = earlier.answer
        said = (label_name(earlier.item, final.value) if final.status == "answered"
                else STATUS_WORDS.get(final.status, final.status))
        line = st.columns([3, 4], vertical_alignment="center")
        line[0].markdown(f"**Gold** · round {earlier.item.round_id}, where you said {said}")
        same = earlier.gold == final.value
        line[1].badge(label_name(earlier.item, earlier.gold), color="green" if same else "orange",
                      icon=":material/check:" if same else ":material/compare_arrows:")


# -- the last answer, revealed ---------------------------------------------
last_id = st.session_state.get("last_committed")
if last_id is not None and item is not None and last_id != item.id:
    last = load_item(db, last_id)
    if last is not None and last.question_id:
        answers = my_answers(db, reviewer.id, last.id, last.question_id)
        if answers:
            with st.container(border=True):
                top = st.columns([5, 2], vertical_alignment="center")
                final = answers[-1]
                top[0].markdown(
                    f"Your answer to {code_span(last.uid)}: "
                    f"{label_name(last, final.value) if final.status == 'answered' else STATUS_WORDS.get(final.status, final.status)}"
                )
                top[1].button("Open it again", key="reopen_last", on_click=on_open,
                              args=(last.id,), icon=":material/undo:", width="stretch")
                show_reveal(last, final.value)

if item is None and counts is not None:
    st.success(counts.nothing_left_words(safe_markdown(this_round.name)), icon=":material/task_alt:")
    st.stop()
if item is None:
    if progress.total:
        st.success("You have answered every item in this queue. Change the filters or the item type to go on."
                   + (f" You skipped {progress.skipped}." if progress.skipped else ""),
                   icon=":material/task_alt:")
        if progress.skipped:
            st.button("Open the items I skipped", icon=":material/skip_previous:", on_click=on_open,
                      args=(first_skipped_item(db, reviewer.id, filt),))
    else:
        st.info("No items match. Load the demo or import data on the Data screen.")
    st.stop()

# Keep the URL on the item, so a reload or a shared link opens it again.
st.session_state[state_key] = item.id
st.session_state["item_uid"] = item.uid
put_item_in_address(item.uid)
if st.session_state.get("shown_item") != item.id:
    st.session_state["shown_item"] = item.id
    st.session_state["shown_at"] = time.monotonic()

# The blinding my answers here are given under: the round's, or blind where a fully
# blind round holds the item for me (no peeking outside it at what it keeps hidden).
mode = sight_of(item.id).mode
if (notice := sight_of(item.id).notice) is not None:
    st.caption(notice)
if item.codebook is not None:
    # The wording in force: the latest in-app edit of the codebook, if any.
    item.codebook = current_codebook(db, item.codebook.key) or item.codebook
if this_round is not None and not in_round(db, this_round.id, item.id):
    # A link or an old address naming an item the round does not hold: an answer
    # here could not count in the round, so none is asked for.
    st.warning(f"{code_span(item.uid)} is not part of {safe_markdown(this_round.name)}, so an "
               "answer to it could not count there.", icon=":material/block:")
    st.button("Back to the round", type="primary", icon=":material/undo:", on_click=on_open,
              args=(next_one(),))
    st.stop()
# Inside a round, Back and Next move through the round's items given to me.
place = item_place(db, reviewer.id, item.id, filt, round_id=this_round.id if this_round else None)
position, total, earlier, later = place.position, place.total, place.earlier, place.later
left, right = st.columns([3, 2], gap="large")

# -- the item ----------------------------------------------------------------
with left:
    facts = [code_span(item.uid), f"item {position} of {total}" + (
        f" for you in {safe_markdown(this_round.name)}" if this_round else "")]
    if item.round_id:
        facts.append(f"round {item.round_id}")
    facts += [safe_markdown(x) for x in (item.split, item.dataset) if x]
    if item.kind == "response" and item.model:
        facts.append(f"model **{safe_markdown(item.model)}**")
    st.markdown(" · ".join(facts))
    length = sum(len(r.patient_text) for r in item.rounds) + len(item.response or "")
    with st.container(height=560 if length > 1800 else "content", border=True):
        for rnd in item.rounds:
            with st.chat_message("user", avatar=":material/person:"):
                st.caption(f"Patient · round {rnd.number}")
                show_text(rnd.patient_text, key=f"turn:{item.id}:{rnd.number}")
        if item.kind == "response":
            with st.chat_message("assistant", avatar=":material/smart_toy:"):
                st.caption(f"Response · {safe_markdown(item.model)}")
                if item.failed:
                    st.error("Generation failed: " + safe_markdown(item.error or "no reason given"),
                             icon=":material/error:")
                else:
                    show_text(item.response, key=f"response:{item.id}",
                              empty="(empty reply: the model returned no text)")

# -- the answer ----------------------------------------------------------------
with right:
    if item.question_id is None or item.codebook is None:
        st.warning("No question is defined for this kind of item.")
        st.stop()
    answers = my_answers(db, reviewer.id, item.id, item.question_id)
    current = answers[-1] if answers else None
    st.markdown(f"**{safe_markdown(item.question_text)}**")
    if current and current.status != "skipped":
        st.caption("You answered this item; choosing again records a revision after the reveal.")
    # Every action's key names the item it acts on. A key pressed while the
    # screen still shows this item, as the next one is being made ready, then
    # acts on this item (or, once the next is on screen, on nothing): with one
    # key for every item, Streamlit ran the callback registered last, which
    # answered the next item, one the clinician had not seen.
    for lab in item.codebook.labels:
        chosen = current is not None and current.value == lab.code
        st.button(
            f"{safe_markdown(lab.short)}  ·  {safe_markdown(lab.code[:2])}",
            key=f"label:{item.id}:{lab.code}", shortcut=lab.shortcut,
            help=safe_markdown(lab.definition), width="stretch", type="primary" if chosen else "secondary",
            on_click=on_answer, args=(item.id, item.question_id, lab.code, "answered", item.uid),
            disabled=item.failed,
        )
    rkey, ckey = rationale_key(item.id), confidence_key(item.id)
    if rkey not in st.session_state and ckey not in st.session_state:
        # Typed but not committed before a reload or a closed tab: bring it back.
        draft = load_draft(db, reviewer.id, item.id, item.question_id)
        if draft:
            st.session_state[rkey] = draft.rationale or ""
            st.session_state[ckey] = draft.confidence
            st.caption(f"Draft restored (typed {draft.updated_at[:16].replace('T', ' ')} UTC).")
    st.text_area("Rationale (optional)", key=rkey, height=80, on_change=on_draft,
                 args=(item.id, item.question_id),
                 placeholder="Why this label? Kept as a draft until you answer. "
                             "Press Tab (or click outside the box) before a number key.")
    st.segmented_control("Confidence", [1, 2, 3, 4, 5], key=ckey, on_change=on_draft,
                         args=(item.id, item.question_id), help="1 = a guess, 5 = certain")
    row = st.columns(2)
    row[0].button("Cannot assess", key=f"cannot_assess:{item.id}", shortcut="0", width="stretch",
                  on_click=on_answer, args=(item.id, item.question_id, None, "cannot_assess", item.uid),
                  help="The item does not give enough to answer")
    flagged = is_flagged(db, reviewer.id, item.id)
    row[1].button("Unflag" if flagged else "Flag", key=f"flag:{item.id}", shortcut="F", width="stretch",
                  icon=":material/flag:", type="primary" if flagged else "secondary",
                  on_click=on_flag, args=(item.id, not flagged),
                  help="Mark the item for a second look")
    nav = st.columns(2)
    nav[0].button("Back", key=f"prev:{item.id}", shortcut="Left", icon=":material/arrow_back:",
                  width="stretch", on_click=on_open, args=(earlier,), disabled=earlier is None)
    if this_round is not None and later is None:
        # Past my last round item: the round's next item for me, once this one is done
        # (until then the round keeps giving me this one).
        waiting = current is None
        nav[1].button("Next", key=f"next:{item.id}", shortcut="Right", icon=":material/arrow_forward:",
                      width="stretch", on_click=_advance_from, args=(item.id,), disabled=waiting,
                      help="Answer or skip this item to get the round's next one" if waiting else None)
    else:
        nav[1].button("Next", key=f"next:{item.id}", shortcut="Right", icon=":material/arrow_forward:",
                      width="stretch", on_click=on_open, args=(later,), disabled=later is None)
    # Skipping, in place (not in a popover: opening one left the focus on its button, so
    # a reason typed next was read as shortcuts - a digit answered, F flagged).
    withdraws = current is not None and current.status != "skipped"
    if withdraws:
        st.caption("You answered this item: skipping it withdraws your answer, which then "
                   "counts nowhere (it stays in the item's history). To change it, choose "
                   "another label instead.")
    skip = st.columns([3, 2], vertical_alignment="bottom")
    skip[0].text_input("Why skip?", key=f"skip_reason:{item.id}", label_visibility="collapsed",
                       placeholder="Why skip it?")
    skip[1].button("Withdraw and skip" if withdraws else "Skip", key=f"skip:{item.id}",
                   icon=":material/skip_next:", width="stretch",
                   on_click=on_skip, args=(item.id, item.question_id, item.uid, withdraws),
                   type="primary" if withdraws else "secondary",
                   help="Withdraw my answer and pass over this item" if withdraws
                   else "Pass over this item, with the reason typed beside")

    if current is not None:
        with st.container(border=True):
            st.markdown("**Your answers**")
            for a in answers:
                what = label_name(item, a.value) if a.status == "answered" else STATUS_WORDS[a.status]
                st.caption(f"{a.created_at[:19].replace('T', ' ')} · {a.phase.replace('_', ' ')} · {what}"
                           + (f" — {safe_markdown(a.rationale)}" if a.rationale else ""))
            show_reveal(item, current.value)

    with st.expander("Codebook: definitions and decision rules"):
        for lab in item.codebook.labels:
            # Codebook wording is text, shown as written (an admin may edit it).
            st.markdown(f"**{safe_markdown(lab.shortcut)} · {safe_markdown(lab.short)}** — "
                        f"{inline_code(lab.code)}  \n{safe_markdown(lab.definition)}")
            for rule in lab.rules:
                st.markdown(f"- {safe_markdown(rule)}")
