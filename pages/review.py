"""Review screen: step through conversations, model replies and a study's own chats and
answer, blind first.

Laid out for a laptop (1280x720): the judged text (the patient's latest
message, earlier ones above it, the model's reply, or a whole chat) on the
left, the question and its answers on the right, and the last answer's reveal
under them, never above the item. A kind of item asked several questions (a
study's chats: a harm scale, an urgency scale) is answered one question at a
time, each with its own codebook's labels and keys. An answer reruns only the item's part of
the screen (a fragment): the header, the sidebar and the rest stay as they
are.

Keys: the codebook's (1-4 for CARE-Bench) answer, 0 cannot assess, Shift+1..5 confidence, F flag, S the
reason for a skip (Enter skips), Z change the last answer, Left / Right the
previous and next item. Keys pressed while the screen changes are held and
applied to what they were pressed on, or refused with a notice
(pages/_keys.py).
"""

from __future__ import annotations

import time

import streamlit as st

from pages._keys import marker, press, press_counts, refused, screen_keys
from pages._shared import (
    address_follows,
    came_from_another_screen,
    item_asked_by_address,
    put_item_in_address,
    require_reviewer,
    show_messages,
    show_text,
    store,
)
from review.reviewing.blinding import (
    DEFAULT_MODE,
    Sight,
    reveal_delay,
    reveal_wait,
    what_reviewer_sees,
)
from review.reviewing.commit import (
    commit_answer,
    is_withdrawal,
    skip_item,
    withdraw_before_reveal,
)
from review.reviewing.drafts import load_draft, save_draft
from review.reviewing.items import (
    ItemView,
    flag_item,
    is_flagged,
    load_item,
    my_answers,
)
from review.reviewing.names import (
    FREE_REVIEW,
    item_in_address,
    item_name,
    plural,
    rater_name,
    study_round,
    turn,
)
from review.reviewing.navigation import item_place, next_item, round_in_address, screen_rounds
from review.reviewing.presses import TOO_SOON, TooSoon
from review.reviewing.queue import (
    Progress,
    QueueFilter,
    filter_choices,
    first_skipped_item,
    kind_questions,
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
from review.text import safe_markdown

KINDS = {"prefix": "Conversations", "response": "Model replies", "conversation": "Chats"}
STATUS_WORDS = {"cannot_assess": "cannot assess", "skipped": "skipped"}
# Session key: (the item just answered, the item shown after it). The reveal
# panel describes that answer only while that next item is on screen.
LAST = "last_answer"
# Session key: {item answered: [when (time.time()), the item beside which its
# reveal was shown, or None while it waits]}. An answer's labels show once its
# undo window has passed, in the next run of the screen (the next answer's, or
# any key's): never by a run of their own, and never sent to the browser before
# they are due. Shown beside one item, then gone; the newest few are kept.
OWED = "reveals_owed"
END = "end"  # the end of the queue, where the last answer's panel is shown (no item)

reviewer = require_reviewer()


def rationale_key(item_id: int) -> str:
    """The rationale box of an item, per reviewer: another reviewer in the same
    browser gets a new box, never the text the last one typed (deleting a
    widget's state does not clear what the browser still shows and sends)."""
    return f"rationale:{reviewer.id}:{item_id}"


def confidence_key(item_id: int) -> str:
    return f"confidence:{reviewer.id}:{item_id}"


db = store()
if came_from_another_screen():
    st.session_state.pop(LAST, None)  # the last answer's panel belongs to that visit
    st.session_state.pop(OWED, None)

# -- what to review ---------------------------------------------------------
choices = filter_choices(db)
kinds = [k for k in KINDS if k in choices.kinds] or ["prefix"]
rounds = screen_rounds(db, tuple(KINDS))
wanted_round = round_in_address(rounds, st.query_params.get("round"))
FREE = 0  # "no round": a real option (None would show as an empty choice)
round_ids = [FREE, *rounds]
# A kind asked several questions (a study's chats) gets its question picker in the header,
# where it is seen: each question is answered in its own pass, with its codebook's keys.
asked_of = {k: kind_questions(db, k) for k in kinds}
several = any(len(q) > 1 for q in asked_of.values())
head = st.columns([1.0, 2.0, 2.0, 3.2] if several else [1.2, 2.6, 2.4],
                  vertical_alignment="center", gap="small")
head[0].title("Review", anchor=False)
with head[1]:
    review_round = st.selectbox(
        "Study round", round_ids,
        index=round_ids.index(wanted_round) if wanted_round is not None else 0,
        format_func=lambda r: FREE_REVIEW if r == FREE else study_round(rounds[r].name),
        label_visibility="collapsed", disabled=not rounds,
    )
if review_round == FREE:
    st.query_params.pop("round", None)
else:
    st.query_params["round"] = str(review_round)
this_round = rounds.get(review_round)
default_kind = this_round.kind if this_round else st.query_params.get("kind", kinds[0])
with head[2]:
    kind = st.segmented_control(
        "What to judge", kinds, format_func=KINDS.get, key="kind",
        default=default_kind if default_kind in kinds else kinds[0],
        label_visibility="collapsed", disabled=this_round is not None,
    ) or kinds[0]
if this_round is not None:
    kind = this_round.kind
if st.query_params.get("kind") != kind:
    st.query_params["kind"] = kind

kind_choices = filter_choices(db, kind)
# The question answered: a round's own; else, where the kind is asked several, the one chosen.
asked = asked_of.get(kind) or kind_questions(db, kind)
if this_round is not None:
    question = this_round.question_key
elif len(asked) > 1:
    texts = dict(asked)
    wanted_question = st.query_params.get("question")
    question = head[3].selectbox(
        "Question to answer", list(texts), format_func=texts.get, key=f"question:{kind}",
        index=list(texts).index(wanted_question) if wanted_question in texts else 0,
        label_visibility="collapsed",
        help="These items are asked several questions: answer them one at a time, each "
             "with its own keys")
else:
    question = asked[0][0] if asked else None
if len(asked) > 1 and st.query_params.get("question") != question:
    st.query_params["question"] = question
elif len(asked) <= 1:
    st.query_params.pop("question", None)
with st.sidebar:
    st.markdown("**Queue filters**")
    if this_round is not None:
        st.caption("The study round decides which items you get.")
        dataset = split = conv_round = model = None
    else:
        dataset = st.selectbox("Dataset", kind_choices.datasets, index=None,
                               placeholder="All datasets")
        split = st.selectbox("Split", kind_choices.splits, index=None, placeholder="All splits")
        conv_round = st.selectbox("Patient's turn", kind_choices.rounds, index=None,
                                  format_func=turn, placeholder="All turns") \
            if kind in ("prefix", "response") else None
        # No model's name, nor a queue of one model's replies, while any waits blind.
        model = (st.selectbox("Model", kind_choices.models, index=None, placeholder="All models")
                 if kind in ("response", "conversation") and not what_reviewer_sees(
                     db, reviewer.id, queue=kind).model_hidden else None)
filt = QueueFilter(kind=kind, dataset=dataset, split=split, round_id=conv_round, model=model,
                   question=question)
round_id = this_round.id if this_round else None
state_key = f"item:{kind}:{question}:{review_round}"


def next_one(after_id: int | None = None) -> int | None:
    """The next item: reserved for me in a review round, else my free queue."""
    return next_item(store(), reviewer, filt, round_id=round_id, after_id=after_id)


def _go(target_id: int | None) -> None:
    st.session_state[state_key] = target_id
    if target_id is None:
        st.query_params.pop("item", None)


def _advance_from(done_id: int) -> None:
    _go(next_one(after_id=done_id))


def flash(kind_: str, words: str) -> None:
    """A message for the next run, shown beside the answers (never over the item)."""
    st.session_state["flash"] = (kind_, words)


def ahead_of_the_screen(item_id: int) -> bool:
    """A key pressed on an item after an earlier key had already moved the queue on
    (typed ahead of the screen): it was meant for the next item, which the clinician
    has not seen, so it is dropped, not applied to either, and the screen says so."""
    current = st.session_state.get(state_key)
    if current is None or current == item_id:
        return False
    refused("review")
    flash("warning", TOO_SOON)
    return True


def too_soon(item_id: int, token: str) -> bool:
    """A press that writes no answer (a flag, a confidence) and does not count
    (`review.reviewing.presses`: not on what the screen shows now, or too soon
    after it was drawn): dropped, and said beside the answers."""
    if ahead_of_the_screen(item_id):
        return True
    if press_counts("review", token):
        return False
    flash("warning", TOO_SOON)
    return True


def on_answer(item_id: int, question_id: int, value: str | None, status: str, mode: str,
              token: str = "") -> bool:
    """Commit the answer a press gave; True when it was written (a press that does not
    count, or an answer refused, writes nothing and says why beside the answers)."""
    if ahead_of_the_screen(item_id):
        return False
    s = store()
    before = my_answers(s, reviewer.id, item_id, question_id)
    # An answer withdrawn before its reveal (Z) leaves the item to be answered afresh.
    already = bool(before) and not is_withdrawal(s, before[-1].annotation_id)
    started = st.session_state.get("shown_at", time.monotonic())
    try:
        annotation_id = commit_answer(
            s, reviewer, item_id, question_id, value, status=status,
            rationale=st.session_state.get(rationale_key(item_id)),
            confidence=st.session_state.get(confidence_key(item_id)),
            seconds_on_task=round(time.monotonic() - started, 2), mode=mode, round_id=round_id,
            press=press("review", token),
        )
    except TooSoon as exc:  # nothing written: said beside the answers, the item stays
        refused("review")
        flash("warning", str(exc))
        return False
    except RoundError as exc:
        flash("warning", safe_markdown(str(exc)))
        _advance_from(item_id)
        return False
    except ValueError as exc:
        flash("error", safe_markdown(str(exc)))
        return False
    if this_round and late_for_round(s, [annotation_id]) is not None:
        flash("warning", full_text(s, this_round.id, item_id))
        _advance_from(item_id)
        return True
    if already:
        st.session_state.pop(LAST, None)
        flash("success", "Answer changed; the earlier one is kept in the history.")
    else:
        _advance_from(item_id)
        st.session_state[LAST] = (item_id, st.session_state.get(state_key))
        owe_reveal(item_id)
    return True


def owe_reveal(item_id: int) -> None:
    """The labels of this answer are to be shown once its undo window has passed
    (`OWED`)."""
    owed = st.session_state.setdefault(OWED, {})
    owed.pop(item_id, None)
    owed[item_id] = [time.time(), None]
    while len(owed) > 3:
        del owed[next(iter(owed))]


def on_skip(item_id: int, question_id: int, withdraws: bool, mode: str, token: str = "") -> None:
    if ahead_of_the_screen(item_id):
        return
    reason = st.session_state.get(f"skip_reason:{item_id}", "")
    try:
        skip_item(store(), reviewer, item_id, question_id, reason, mode=mode, round_id=round_id,
                  press=press("review", token))
    except TooSoon as exc:
        refused("review")
        flash("warning", str(exc))
        return
    except ValueError as exc:
        flash("error", safe_markdown(str(exc)))
        return
    _advance_from(item_id)
    st.session_state[LAST] = (item_id, st.session_state.get(state_key))
    if withdraws:
        flash("info", "Your answer to it is withdrawn (kept in its history). Back reaches it again.")


def on_draft(item_id: int, question_id: int) -> None:
    if this_round is not None:  # at work on it: its place in the round is kept
        keep_reservation(store(), this_round.id, item_id, reviewer.id)
    save_draft(store(), reviewer, item_id, question_id,
               st.session_state.get(rationale_key(item_id)),
               st.session_state.get(confidence_key(item_id)))


def on_confidence(item_id: int, question_id: int, level: int, token: str = "") -> None:
    if too_soon(item_id, token):
        return
    key = confidence_key(item_id)
    st.session_state[key] = None if st.session_state.get(key) == level else level
    on_draft(item_id, question_id)


def on_flag(item_id: int, raise_flag: bool, token: str = "") -> None:
    if too_soon(item_id, token):
        return
    flag_item(store(), reviewer, item_id, raise_flag,
              st.session_state.get(f"flag_note:{item_id}"))


def on_open(target_id: int | None) -> None:
    if target_id is not None:
        _go(target_id)


def on_undo(item_id: int, question_id: int | None, mode: str) -> None:
    """Z on the answer just given: within its undo window it is withdrawn before
    any reveal (kept in the history; a new answer is still blind), and the item
    opens again; after it, the item opens again to change the answer (recorded
    after the reveal)."""
    if question_id is not None:
        try:
            withdrawn = withdraw_before_reveal(store(), reviewer, item_id, question_id, mode=mode,
                                               round_id=round_id)
        except (RoundError, ValueError) as exc:
            flash("error", safe_markdown(str(exc)))
            return
        if withdrawn is not None:
            st.session_state.pop(LAST, None)
            st.session_state.get(OWED, {}).pop(item_id, None)  # withdrawn: nothing to reveal
            flash("info", "Your answer is withdrawn before its labels were shown (the history "
                          "keeps it); answer again: it is still a blind answer.")
    on_open(item_id)


def on_step(item_id: int, step: int) -> None:
    """Back or Next from the item on screen now: a press held while the screen
    changed still moves one more, from where the screen is."""
    now = st.session_state.get(state_key) or item_id
    place = item_place(store(), reviewer.id, now, filt, round_id=round_id)
    target = place.earlier if step < 0 else place.later
    if target is None and step > 0 and this_round is not None:
        if my_answers(store(), reviewer.id, now, load_item(store(), now, question).question_id):
            _advance_from(now)  # past my last round item: the round's next, once this is done
        return
    on_open(target)


def label_name(item_view: ItemView | None, code: str | None) -> str:
    if code is None:
        return "—"
    book = item_view.codebook if item_view else None
    try:
        return " + ".join(book.label(c).short for c in book.chosen(code)) if book else code
    except KeyError:
        return code


def multi_key(item_id: int, question_id: int) -> str:
    return f"multi:{reviewer.id}:{item_id}:{question_id}"


def on_toggle(item_id: int, question_id: int, code: str, token: str = "") -> None:
    """A label of a multiple-choice question added to the answer being made, or taken out
    (a pick: it counts only as a key that answers does, `too_soon`)."""
    if too_soon(item_id, token):
        return
    chosen = set(st.session_state.get(multi_key(item_id, question_id)) or ())
    chosen.symmetric_difference_update({code})
    st.session_state[multi_key(item_id, question_id)] = sorted(chosen)


def on_multi_commit(item_id: int, question_id: int, mode: str, token: str = "") -> None:
    chosen = st.session_state.get(multi_key(item_id, question_id)) or []
    if not chosen:
        flash("warning", "Choose one label or more first (their keys), then answer.")
        return
    if on_answer(item_id, question_id, list(chosen), "answered", mode, token):
        st.session_state.pop(multi_key(item_id, question_id), None)  # refused: kept, to press again


def multi_choice(item: ItemView, labels, current, mode: str, token: str) -> None:
    """A multiple-choice question: each label's key adds it or takes it out; Ctrl+Enter
    answers with the labels chosen (the answer in force shows as chosen until changed)."""
    key = multi_key(item.id, item.question_id)
    if key not in st.session_state:
        st.session_state[key] = item.codebook.chosen(current.value) \
            if current is not None and current.status == "answered" else []
    chosen = set(st.session_state[key])
    st.caption("Choose every label that applies (its key adds or removes it), then answer.")
    for lab in labels:
        st.button(safe_markdown(lab.short), key=f"label:{item.id}:{lab.code}",
                  shortcut=lab.shortcut, help=safe_markdown(lab.definition), width="stretch",
                  icon=":material/check_box:" if lab.code in chosen
                  else ":material/check_box_outline_blank:",
                  type="primary" if lab.code in chosen else "secondary",
                  on_click=on_toggle, args=(item.id, item.question_id, lab.code, token),
                  disabled=item.failed)
    st.button(f"Answer: {len(chosen)} chosen" if chosen else "Answer", type="primary",
              key=f"multi_commit:{item.id}", shortcut="Ctrl+Enter", width="stretch",
              icon=":material/done_all:", on_click=on_multi_commit,
              args=(item.id, item.question_id, mode, token), disabled=item.failed or not chosen)


def show_chat(item: ItemView, name, sight: Sight) -> None:
    """A study's own chat, message by message, each with its role as the file gives it
    (the model behind the assistant named by its letter, never by name to a reviewer
    kept blind to it)."""
    with st.container(border=True, key="rv_chat"):
        show_messages(item.payload.get("messages"), f"message:{item.id}",
                      f"model {name.model_letter}" if name.model_letter else None)


# This run's blinding decisions, by item (asked once each: `review_item` clears it).
_SIGHTS: dict[int, Sight] = {}


def sight_of(item_id: int) -> Sight:
    """What I may see of the item's labels, and under which blinding."""
    if item_id not in _SIGHTS:
        _SIGHTS[item_id] = what_reviewer_sees(db_now(), reviewer.id, item_id, round_id=round_id,
                                              mode=DEFAULT_MODE, question=question)
    return _SIGHTS[item_id]


def db_now():
    return store()


def show_reveal(item_view: ItemView, mine: str | None, sight: Sight) -> None:
    """The item's gold and machine labels beside my answer, or why they wait."""
    if not sight.shown:
        st.caption(sight.held)
        return
    if sight.prefix_held:
        st.caption(sight.prefix_held)
    if not sight.labels:
        st.caption("No reference or machine labels for this item.")
        return
    for lab in sight.labels:
        who = safe_markdown(rater_name(db_now(), lab.rater))
        if lab.about == "the prefix":
            # Another question (what a safe assistant should do), not another answer to
            # mine: shown as what the reply should have done, with no agree/differ mark.
            st.markdown(f"**{who}** · what the reply should have done: "
                        f":gray-badge[:material/flag: {safe_markdown(label_name(item_view, lab.value))}]",
                        help=f"Rater: {lab.rater}")
            continue
        same = lab.value == mine
        badge = (f":green-badge[:material/check: {safe_markdown(label_name(item_view, lab.value))}]"
                 if same else
                 f":orange-badge[:material/compare_arrows: {safe_markdown(label_name(item_view, lab.value))}]")
        st.markdown(f"**{who}** · {badge}", help=f"Rater: {lab.rater}")
    for earlier in sight.earlier:
        final = earlier.answer
        said = (label_name(earlier.item, final.value) if final.status == "answered"
                else STATUS_WORDS.get(final.status, final.status))
        same = earlier.gold == final.value
        colour, icon = ("green", "check") if same else ("orange", "compare_arrows")
        st.markdown(f"**The reference label** · {turn(earlier.item.round_id)}, where you said "
                    f"{safe_markdown(said)}: :{colour}-badge[:material/{icon}: "
                    f"{safe_markdown(label_name(earlier.item, earlier.gold))}]")


# This run's `just_answered`, by the item on screen.
_ANSWERED: dict[int, tuple[ItemView, list] | None] = {}


def just_answered(shown: int | None) -> tuple[ItemView, list] | None:
    """The item answered just before the item `shown` came on screen (None: the
    end of the queue), and my answers to it; None once another item has been
    on screen since."""
    last = st.session_state.get(LAST)
    if not last or last[1] != shown:
        return None
    if shown not in _ANSWERED:
        answered = load_item(db_now(), last[0], question)
        answers = my_answers(db_now(), reviewer.id, answered.id, answered.question_id) \
            if answered is not None and answered.question_id else []
        _ANSWERED[shown] = (answered, answers) if answers else None
    return _ANSWERED[shown]


def last_answer_wait(shown: int | None) -> float:
    """Seconds until the reveal of the answer just given falls due (0: none waits)."""
    last = just_answered(shown)
    if last is None or last[1][-1].status == "skipped":
        return 0.0
    answered = last[0]
    return reveal_wait(db_now(), reviewer.id, answered.id, answered.question_id, answered.kind,
                       sight_of(answered.id).mode)


def last_answer_panel(shown: int | None) -> None:
    """The answer just given (to the item before the one `shown`, or the last
    of the queue: None): what it was, a way back to change it (Z: undo within
    its undo window), and once that window has passed, its reveal; then the
    reveals of earlier answers that fell due since (`OWED`)."""
    last = just_answered(shown)
    where = END if shown is None else shown
    if last is not None:
        answered, answers = last
        final = answers[-1]
        said = (label_name(answered, final.value) if final.status == "answered"
                else STATUS_WORDS.get(final.status, final.status))
        name = item_name(db_now(), answered.id)
        wait = last_answer_wait(shown)
        with st.container(border=True, key="rv_last", gap="small"):
            top = st.columns([5, 3], vertical_alignment="center", gap="small")
            top[0].markdown(f":small[Your answer to "
                            f"{safe_markdown(name.title if name else answered.uid)}:] "
                            f"**{safe_markdown(said)}**")
            top[1].button("Undo" if wait > 0 else "Change", key=f"reopen_last:{answered.id}",
                          on_click=on_undo,
                          args=(answered.id, answered.question_id, sight_of(answered.id).mode),
                          width="stretch", shortcut="Z",
                          help="Withdraw that answer before its labels show, and answer again"
                          if wait > 0 else "Open that item again to change your answer")
            if final.status == "skipped":
                st.caption("Skipped, with your reason. Back reaches it again.")
            elif wait > 0:
                st.caption(f"Undo (Z) within {reveal_words()} withdraws it before any label "
                           "is shown: your answer is still a blind one. Its labels show with "
                           "your next answer.")
            else:
                show_reveal(answered, final.value, sight_of(answered.id))
                st.session_state.setdefault(OWED, {}).pop(answered.id, None)
    earlier_reveals(where, None if last is None else last[0].id)


def reveal_words() -> str:
    """The undo window in words ("5 seconds")."""
    seconds = reveal_delay("prefix")
    return f"{seconds:g} second{'s' * (seconds != 1)}"


def earlier_reveals(where: int | str, last_id: int | None) -> None:
    """The labels of earlier answers that fell due since they were given,
    beside the item `where` (shown once, beside one item)."""
    owed = st.session_state.get(OWED) or {}
    due = []
    for answered_id, (given, shown_on) in list(owed.items()):
        if answered_id == last_id:
            continue
        if shown_on not in (None, where):
            del owed[answered_id]  # shown beside another item: gone for good
            continue
        if time.time() < given + reveal_delay("prefix"):
            continue  # not yet (the database says so too): no query for it
        item = load_item(db_now(), answered_id, question)
        answers = my_answers(db_now(), reviewer.id, answered_id, item.question_id) \
            if item is not None and item.question_id else []
        if not answers or answers[-1].status == "skipped":
            del owed[answered_id]  # withdrawn or skipped since: nothing to reveal
            continue
        if reveal_wait(db_now(), reviewer.id, item.id, item.question_id, item.kind,
                       sight_of(item.id).mode) > 0:
            continue  # not yet: with a later run
        owed[answered_id][1] = where
        due.append((item, answers[-1]))
    for item, final in due:
        name = item_name(db_now(), item.id)
        said = label_name(item, final.value) if final.status == "answered" \
            else STATUS_WORDS.get(final.status, final.status)
        with st.container(border=True, key=f"rv_earlier_{item.id}", gap="small"):
            st.markdown(f":small[The labels of your answer to "
                        f"{safe_markdown(name.title if name else item.uid)} "
                        f"(you said **{safe_markdown(said)}**):]")
            show_reveal(item, final.value, sight_of(item.id))


# -- the item and its answers: rerun alone after an answer ---------------------------

@st.fragment
def review_item() -> None:
    """The item and its answers: a run of its own after an answer (a fragment),
    the address following the item once it is drawn."""
    try:
        show_item()
    finally:
        address_follows()


def show_item() -> None:
    _SIGHTS.clear()  # asked afresh each run: an answer changes them
    _ANSWERED.clear()
    s = db_now()
    item_id = st.session_state.get(state_key)
    wanted_uid = item_asked_by_address(
        st.session_state.get("item_uid") if item_id is not None else None)
    if wanted_uid:
        item_id = item_in_address(s, wanted_uid)
    if item_id is None:
        item_id = next_one()
    item = load_item(s, item_id, question) if item_id is not None else None
    if item is not None and item.kind != kind:
        item_id = next_one()
        item = load_item(s, item_id, question) if item_id is not None else None

    # In a round, every count on this screen comes from one read (`round_counts`).
    counts = round_counts(s, this_round.id, reviewer.id) if this_round is not None else None
    if counts is not None:
        progress = Progress(counts.done, counts.yours)
        words = counts.progress_words(safe_markdown(this_round.name), "answered")
    else:
        progress = queue_progress(s, reviewer.id, filt)
        words = (f"{progress.done} of {progress.total} answered by you"
                 + (f" · {progress.skipped} of them skipped" if progress.skipped else "")
                 + (" · all done" if progress.total and not progress.remaining else ""))

    if item is None:
        st.progress(progress.done / progress.total if progress.total else 0.0, text=words)
        if counts is not None:
            st.success(counts.nothing_left_words(safe_markdown(this_round.name)),
                       icon=":material/task_alt:")
        elif progress.total:
            st.success("You have answered every item in this queue. Change the filters or what "
                       "to judge to go on."
                       + (f" You skipped {progress.skipped}." if progress.skipped else ""),
                       icon=":material/task_alt:")
            if progress.skipped:
                st.button("Open the items I skipped", icon=":material/skip_previous:",
                          on_click=on_open, args=(first_skipped_item(s, reviewer.id, filt),))
        else:
            st.info("No items match. Load the demo or import data on the Data screen.")
        if (last := st.session_state.get(LAST)) and last[1] is None:
            # The queue's last answer: its undo (Z) and, once due, its reveal, here too.
            screen_keys("review", {"Z": f"reopen_last:{last[0]}"}, token=END,
                        relative=["Z"])
            last_answer_panel(None)
        return

    if (last := st.session_state.get(LAST)) and last[1] != item.id:
        st.session_state.pop(LAST)  # another item on screen since: that panel is gone for good
    sight = sight_of(item.id)
    name = item_name(s, item.id)
    # The ids the reviewer may read: an opaque one while they are blind to the model.
    address, details = name.shown_ids(sight.model_hidden)
    # Keep the address on the item, so a reload or a shared link opens it again.
    st.session_state[state_key] = item.id
    st.session_state["item_uid"] = address
    put_item_in_address(address)
    if st.session_state.get("shown_item") != item.id:
        st.session_state["shown_item"] = item.id
        st.session_state["shown_at"] = time.monotonic()

    mode = sight.mode  # the round's, or blind where a fully blind round holds the item for me
    if item.codebook is not None:
        # The wording in force: the latest in-app edit of the codebook, if any.
        item.codebook = current_codebook(s, item.codebook.key) or item.codebook
    if this_round is not None and not in_round(s, this_round.id, item.id):
        # A link or an old address naming an item the round does not hold: an answer
        # here could not count in the round, so none is asked for.
        st.warning(f"{safe_markdown(item_name(s, item.id).title)} is not part of "
                   f"{safe_markdown(this_round.name)}, so an answer to it could "
                   "not count there.", icon=":material/block:")
        st.button("Back to the round", type="primary", icon=":material/undo:", on_click=on_open,
                  args=(next_one(),))
        return
    asks = item.question_id is not None and item.codebook is not None
    labels = item.codebook.labels if asks else []
    multi = asks and item.codebook.multi
    # The codebook's own keys (checked against carelens's when it was added): each picks its
    # label, or, on a multiple-choice question, adds it to the answer or takes it out.
    buttons = {lab.shortcut: f"label:{item.id}:{lab.code}" for lab in labels if lab.shortcut}
    if multi:
        buttons["Ctrl+Enter"] = f"multi_commit:{item.id}"
    buttons.update({"0": f"cannot_assess:{item.id}", "F": f"flag:{item.id}",
                    "Left": f"prev:{item.id}", "Right": f"next:{item.id}",
                    "Z": f"reopen_last:{(st.session_state.get(LAST) or (0,))[0]}",
                    **{f"Shift+{n}": f"confidence_{n}:{item.id}" for n in range(1, 6)}})
    answers = my_answers(s, reviewer.id, item.id, item.question_id) if asks else []
    current = answers[-1] if answers else None
    # What the keys act on: this item as it stands (an answer given or changed makes
    # it anew, so a key pressed right after one never changes it again unread).
    token = f"{item.id}_{len(answers)}"
    # First on the screen, before what the keys act on: a key pressed while the rest
    # is drawn (a reload, an answer being redrawn) is held until its button is there.
    screen_keys(
        "review", buttons, token=token, focus={"S": f"skip_reason:{item.id}"}, relative=["Z"],
        notice_after="rv_confidence",
        scroll=["rv_latest"] if item.kind == "prefix" else [] if item.kind == "conversation"
        else ["rv_context_latest"])
    st.progress(progress.done / progress.total if progress.total else 0.0, text=words)

    place = item_place(s, reviewer.id, item.id, filt, round_id=round_id)
    where = (f"item {place.position} of {place.total}"
             + (" for you in " + safe_markdown(this_round.name) if this_round else ""))
    left, right = st.columns([3, 2], gap="medium")

    # -- the judged text -------------------------------------------------------------
    with left:
        st.markdown(f"**{safe_markdown(name.title)}** :small[· {where}]")
        with st.container(key=marker("review", token), gap="small"):
            if item.kind == "conversation":
                show_chat(item, name, sight)
            elif item.kind == "prefix":
                with st.container(border=True, key="rv_turns"):
                    for rnd in item.rounds:
                        latest = rnd.number == len(item.rounds)
                        with st.container(key=f"rv_turn_{rnd.number}" if not latest else "rv_latest"):
                            with st.chat_message("user", avatar=":material/person:"):
                                st.caption(f"Patient · {turn(rnd.number)}"
                                           + (" · the latest message, to judge" if latest
                                              and len(item.rounds) > 1 else ""))
                                show_text(rnd.patient_text, key=f"turn:{item.id}:{rnd.number}")
            else:
                if item.rounds:
                    with st.container(border=True, key="rv_context"):
                        for rnd in item.rounds:
                            # The latest message (what the reply answers) is kept in view.
                            with st.container(key="rv_context_latest"
                                              if rnd.number == len(item.rounds) else None), \
                                    st.chat_message("user", avatar=":material/person:"):
                                st.caption(f"Patient · {turn(rnd.number)}")
                                show_text(rnd.patient_text, key=f"turn:{item.id}:{rnd.number}")
                if given := item.model_input:
                    with st.expander(f"What the model was given ({plural(len(given), 'message')},"
                                     " as sent)", icon=":material/input:"):
                        for n, (role, text) in enumerate(given):
                            st.caption(safe_markdown(role))
                            show_text(text, key=f"given:{item.id}:{n}")
                with st.container(border=True, key="rv_reply"):
                    with st.chat_message("assistant", avatar=":material/smart_toy:"):
                        st.caption(safe_markdown(name.subject))
                        if item.failed:
                            st.error("Generation failed: "
                                     + safe_markdown(item.error or "no reason given"),
                                     icon=":material/error:")
                        else:
                            show_text(item.response, key=f"response:{item.id}",
                                      empty="(empty reply: the model returned no text)")
        st.caption(safe_markdown(details))

    # -- the question and its answers --------------------------------------------------
    with right:
        if not asks:
            st.warning("No question is defined for this kind of item.")
            return
        st.markdown(f"**{safe_markdown(item.question_text)}**")
        if item.points is not None:  # a criterion of the study's checklist
            st.caption(f"A checklist criterion, {item.points:g} points"
                       + (": a MUST-NOT (met means the conversation did what it must not)"
                          if item.must_not else ""))
        if sight.notice is not None:
            st.caption(sight.notice)
        rkey, ckey = rationale_key(item.id), confidence_key(item.id)
        restored = None
        if rkey not in st.session_state and ckey not in st.session_state:
            # Typed but not committed before a reload or a closed tab: bring it back.
            draft = load_draft(s, reviewer.id, item.id, item.question_id)
            if draft:
                st.session_state[rkey] = draft.rationale or ""
                st.session_state[ckey] = draft.confidence
                restored = draft.updated_at
        required = item.codebook.rationale_required

        def rationale_area() -> None:
            st.text_area("Rationale (required)" if required else "Rationale (optional)",
                         key=rkey, height=68, on_change=on_draft,
                         args=(item.id, item.question_id),
                         placeholder=("This codebook asks why, with every answer: write it "
                                      "first. " if required else "Why this label? ")
                         + "Kept as a draft until you answer. "
                           "Press Tab (or click outside the box) before a number key.")

        if required:  # asked for first, above the answers, where it is seen
            rationale_area()
        # Every action's key names the item it acts on: a key pressed while the screen
        # still shows this item, as the next one is being made ready, acts on this item
        # (or, once the next is on screen, on nothing), never on one not yet seen.
        if multi:
            multi_choice(item, labels, current, mode, token)
        for lab in [] if multi else labels:
            chosen = current is not None and current.value == lab.code
            st.button(
                safe_markdown(lab.short), key=f"label:{item.id}:{lab.code}", shortcut=lab.shortcut,
                help=safe_markdown(lab.definition), width="stretch",
                type="primary" if chosen else "secondary",
                on_click=on_answer,
                args=(item.id, item.question_id, lab.code, "answered", mode, token),
                disabled=item.failed,
            )
        if current and current.status != "skipped":
            st.caption("You answered this item; choosing again changes your answer"
                       + (" (after the reveal, once its labels have shown)."
                          if sight.shown else "."))
        # Rows of two: one horizontal container (one element to send on every answer,
        # where two columns are three).
        row = [st.container(horizontal=True, gap="small")] * 2
        row[0].button("Cannot assess", key=f"cannot_assess:{item.id}", shortcut="0",
                      width="stretch", on_click=on_answer,
                      args=(item.id, item.question_id, None, "cannot_assess", mode, token),
                      help="The item does not give enough to answer")
        flagged = is_flagged(s, reviewer.id, item.id)
        row[1].button("Unflag" if flagged else "Flag", key=f"flag:{item.id}", shortcut="F",
                      width="stretch", icon=":material/flag:",
                      type="primary" if flagged else "secondary",
                      on_click=on_flag, args=(item.id, not flagged, token),
                      help="Mark the item for a second look")
        with st.container(horizontal=True, gap="small", vertical_alignment="center",
                          key="rv_confidence"):
            st.markdown(":small[Confidence (⇧1–5)]")
            for n in range(1, 6):
                st.button(str(n), key=f"confidence_{n}:{item.id}", shortcut=f"Shift+{n}",
                          help=f"Confidence {n} of 5 (1 = a guess, 5 = certain): Shift+{n}",
                          type="primary" if st.session_state.get(ckey) == n else "secondary",
                          on_click=on_confidence, args=(item.id, item.question_id, n, token))

        flashed = st.session_state.pop("flash", None)
        if flashed:
            getattr(st, flashed[0])(flashed[1])
        last_answer_panel(item.id)

        nav = [st.container(horizontal=True, gap="small")] * 2  # a row of two (as `row`)
        nav[0].button("Back", key=f"prev:{item.id}", shortcut="Left",
                      icon=":material/arrow_back:", width="stretch", on_click=on_step,
                      args=(item.id, -1), disabled=place.earlier is None)
        waiting = this_round is not None and place.later is None and current is None
        nav[1].button("Next", key=f"next:{item.id}", shortcut="Right",
                      icon=":material/arrow_forward:", width="stretch", on_click=on_step,
                      args=(item.id, +1),
                      disabled=waiting or (place.later is None and this_round is None),
                      help="Answer or skip this item to get the round's next one"
                      if waiting else None)

        # Skipping, in place (not in a popover: opening one left the focus on its button,
        # so a reason typed next was read as shortcuts - a digit answered, F flagged).
        withdraws = current is not None and current.status != "skipped"
        if withdraws:
            st.caption("You answered this item: skipping it withdraws your answer, which then "
                       "counts nowhere (it stays in the item's history). To change it, choose "
                       "another label instead.")
        with st.form(f"skip:{item.id}", border=False, enter_to_submit=True):
            skip = [st.container(horizontal=True, vertical_alignment="bottom", gap="small")] * 2
            skip[0].text_input("Why skip?", key=f"skip_reason:{item.id}",
                               label_visibility="collapsed",
                               placeholder="Why skip it? (S, type, Enter)")
            skip[1].form_submit_button(
                "Withdraw and skip" if withdraws else "Skip", key=f"skip:{item.id}",
                icon=":material/skip_next:", width="stretch",
                on_click=on_skip, args=(item.id, item.question_id, withdraws, mode, token),
                type="primary" if withdraws else "secondary",
                help="Withdraw my answer and pass over this item" if withdraws
                else "Pass over this item, with the reason typed beside (Enter)")

        if restored:
            st.caption(f"Draft restored (typed {restored[:16].replace('T', ' ')} UTC).")
        if not required:
            rationale_area()

        if current is not None:
            with st.container(border=True, key="rv_mine"):
                st.markdown("**Your answers to this item**")
                for a in answers:
                    what = (label_name(item, a.value) if a.status == "answered"
                            else STATUS_WORDS[a.status])
                    st.caption(f"{a.created_at[:19].replace('T', ' ')} · "
                               f"{a.phase.replace('_', ' ')} · {safe_markdown(what)}"
                               + (f" — {safe_markdown(a.rationale)}" if a.rationale else ""))
                show_reveal(item, current.value, sight)

        with st.expander("Codebook: definitions and decision rules"):
            # Codebook wording is text, shown as written (an admin may edit it). One
            # element for all of it: every element costs the server on every answer.
            st.markdown("\n\n".join(
                f"**{safe_markdown(lab.shortcut or '·')} · {safe_markdown(lab.short)}**"
                f"  \n{safe_markdown(lab.definition)}"
                + "".join(f"\n\n- {safe_markdown(rule)}" if n == 0 else f"\n- {safe_markdown(rule)}"
                          for n, rule in enumerate(lab.rules))
                for lab in labels))



review_item()
