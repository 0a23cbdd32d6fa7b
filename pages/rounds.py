"""Rounds and people: create review rounds, watch them fill, grant roles."""

from __future__ import annotations

import streamlit as st

from codebook import BLINDING_MODES
from pages._ppi import round_design, round_status
from pages._shared import require_reviewer, server_mode, store
from review.reviewing.names import item_name, plural
from review.reviewing.queue import filter_choices
from review.team.access import NotAllowed
from review.team.designs import design_words, round_record
from review.team.reviewers import ROLES, grant_role, is_admin, list_reviewers
from review.team.rounds import (
    RoundError,
    RoundSpec,
    create_round,
    criteria_round_key,
    is_rubric_round,
    label_questions,
    list_rounds,
    name_round_members,
    redraw_missing_places,
    round_members,
    round_places,
)
from review.team.sessions import sign_out_person, signed_in
from review.text import safe_markdown

NAMED_ROWS = 500  # a round's items named in its table; beyond, by id

BLINDING_WORDS = {
    "blind": "Fully blind: labels never shown",
    "reveal_after_commit": "Reveal labels after each answer",
    "suggest": "Show machine labels up front (speed run)",
}

ROUND_WORDS = {criteria_round_key("trajectory"): "agent runs: all criteria",
               criteria_round_key("graded_conversation"): "graded conversations: all criteria"}

st.title("Rounds and people", anchor=False)
me = require_reviewer()
db = store()
if not is_admin(me):
    st.warning("Rounds and roles are managed by an admin.")
    st.stop()

rounds = list_rounds(db)
designs = design_words(db)


def save_members(round_id: int, key: str) -> None:
    try:
        changed = name_round_members(store(), me, round_id, st.session_state.get(key) or [])
    except RoundError as exc:
        st.session_state["rounds_warning"] = safe_markdown(str(exc))
    else:
        if changed:
            st.session_state["rounds_flash"] = "Saved who is in the round."


def redraw(round_id: int) -> None:
    """Redraw the stuck places, and say what became of them and of the round's size:
    a place with no item left to go to is taken off the round, which then asks for
    fewer reviews (never said as places merely "dropped")."""
    asked = sum(p.needed for p in round_places(store(), round_id))
    try:
        done = redraw_missing_places(store(), me, round_id)
    except RoundError as exc:
        st.session_state["rounds_warning"] = safe_markdown(str(exc))
        return
    now = sum(p.needed for p in round_places(store(), round_id))
    lost = sum(r.places for r in done if r.replacement_id is None)
    moved = sum(r.places for r in done) - lost
    to = len({r.replacement_id for r in done if r.replacement_id is not None})
    words = [f"{len(done)} stuck {'item' if len(done) == 1 else 'items'}: "
             + (f"{plural(moved, 'place')} moved to {plural(to, 'other item')} drawn from the "
                "round's candidates" if moved else "no place could move")]
    if lost:
        words.append(f"{plural(lost, 'place')} had no item left to go to and "
                     f"{'was' if lost == 1 else 'were'} taken off the round, which now asks "
                     f"for {plural(now, 'review')} instead of {asked:,}")
    else:
        words.append(f"the round still asks for {plural(now, 'review')}")
    st.session_state["rounds_flash"] = "; ".join(words) + "."


def round_details() -> None:
    """One round: its settings, who is in it, and each item's places (who reviewed it,
    who holds a place now, what is stuck)."""
    by_id = {r.id: r for r in rounds}
    rid = st.selectbox("Round", list(by_id), format_func=lambda i: by_id[i].name,
                       key="rounds_detail")
    r = by_id[rid]
    overlap = "every item" if r.overlap_share is None else f"{r.overlap_share:.0%} of items"
    st.caption(f"Asks: {safe_markdown(asks(r))} · {plural(r.reviewers_per_item, 'reviewer')} per item on "
               f"{overlap} · {BLINDING_SHORT.get(r.blinding, r.blinding)} · places held for "
               f"{r.reservation_minutes} min · created by {safe_markdown(r.created_by)}, "
               f"{r.created_at[:10]}"
               + (f" · drawn: {safe_markdown(designs[rid])}" if designs.get(rid) else ""))
    round_status(db, r.name, r.question_key, round_record(db, rid))
    people = [p.name for p in list_reviewers(db)]
    key = f"rounds_members:{rid}"
    if key not in st.session_state:
        st.session_state[key] = round_members(db, rid)
    cols = st.columns([5, 2], vertical_alignment="bottom")
    cols[0].multiselect("Who is in the round", people, key=key,
                        placeholder="Anyone may take places (no one named)",
                        help="Name the reviewers: only they are given its items and counted in "
                             "it. Naming no one opens it to every reviewer. Who leaves keeps the "
                             "reviews they completed.")
    cols[1].button("Save who is in it", on_click=save_members, args=(rid, key),
                   width="stretch", icon=":material/group:")
    places = round_places(db, rid)
    stuck = [p for p in places if p.stuck]
    open_ = [p for p in places if not p.complete]
    st.markdown(f"**{len(places) - len(open_)} of {plural(len(places), 'item')} complete** · "
                f"{sum(1 for p in open_ if p.held_by)} in progress"
                + (f" · :red[{len(stuck)} stuck]" if stuck else ""))
    if stuck:
        st.button(f"Redraw the places nobody can fill ({len(stuck)} stuck)",
                  key=f"rounds_redraw:{rid}", on_click=redraw, args=(rid,),
                  icon=":material/shuffle:",
                  help="Each stuck item's missing places go to an item drawn from the round's "
                       "candidates (its stratum first) that none of its reviewers has answered "
                       "outside it; recorded and audited.")
    only_open = st.toggle("Only items not complete", value=bool(open_), key=f"rounds_open:{rid}")
    shown = sorted(open_ if only_open else places, key=lambda p: (not p.stuck, p.complete))
    # Items by their names (as the review screens call them), the ids beside them for
    # researchers; a very long list by id alone (a name is a few reads of the database).
    named = len(shown) <= NAMED_ROWS
    if not named:
        st.caption(f"Items by id: {plural(len(shown), 'item')} listed, more than "
                   f"{NAMED_ROWS:,} to name.")

    def title(p) -> str:
        name = item_name(db, p.item_id) if named else None
        return name.title if name is not None else p.uid

    st.dataframe(
        [{"Item": title(p), "Id": p.uid, "State": p.words(),
          "Reviewed by": ", ".join(p.reviewed_by),
          "Holds a place now": ", ".join(f"{who} (to {until[11:16]} UTC)"
                                         for who, until in p.held_by)}
         for p in shown],
        hide_index=True, width="stretch",
        # Sized to fit a laptop's screen (1280 px) without scrolling sideways.
        column_config={"Item": st.column_config.TextColumn(width=300),
                       "Id": st.column_config.TextColumn(width=150),
                       "State": st.column_config.TextColumn(width=170),
                       "Reviewed by": st.column_config.TextColumn(width=140),
                       "Holds a place now": st.column_config.TextColumn(width=190)},
    )


st.subheader("Rounds", anchor=False)
if "rounds_flash" in st.session_state:  # said before the rerun that shows the new round
    st.success(st.session_state.pop("rounds_flash"), icon=":material/task_alt:")
if "rounds_warning" in st.session_state:
    st.warning(st.session_state.pop("rounds_warning"), icon=":material/group_add:")
BLINDING_SHORT = {"blind": "fully blind", "reveal_after_commit": "reveal after answer",
                  "suggest": "labels up front"}


def asks(r) -> str:
    return ROUND_WORDS.get(r.question_key) or r.question_text or r.question_key


if rounds:
    # Six narrow columns: the table fits a laptop's screen (1280 px); the rest of a
    # round's settings are in its details below.
    st.dataframe(
        [{"Round": r.name, "Asks": asks(r), "Items": r.items,
          "Reviews": f"{r.answers_given} of {r.answers_needed}",
          "Done": 100 * r.answers_given / r.answers_needed if r.answers_needed else 0.0,
          "Reviewers": f"{len(members)} named" if (members := round_members(db, r.id))
          else "anyone"}
         for r in rounds],
        hide_index=True, width="stretch",
        column_config={"Round": st.column_config.TextColumn(width="medium"),
                       "Asks": st.column_config.TextColumn(width="medium"),
                       "Items": st.column_config.NumberColumn(width="small"),
                       "Reviews": st.column_config.TextColumn(width="small"),
                       "Done": st.column_config.ProgressColumn(
                           format="%.0f%%", min_value=0, max_value=100, width="small"),
                       "Reviewers": st.column_config.TextColumn(
                           width="small", help="Who may take places: anyone, or those named")},
    )
    round_details()
else:
    st.caption("No rounds yet. Reviewers can still review freely; a round is how several "
               "clinicians get the same items for an agreement audit.")

with st.expander("Create a round", expanded=not rounds, icon=":material/add:"):
    questions = label_questions(db)  # a run's or conversation's are in its criteria
    present = filter_choices(db).kinds
    for kind, words in (("trajectory", "Agent runs: every criterion and verdict of each run"),
                        ("graded_conversation", "Graded conversations: every rubric criterion")):
        if kind in present:
            questions[criteria_round_key(kind)] = words
    question = st.selectbox("What each reviewer answers", list(questions),
                            format_func=lambda k: questions.get(k, k),
                            help="A label question, or a review of every criterion of each "
                                 "agent run or graded conversation (step marks are optional "
                                 "there; a committed verdict takes the reviewer's place)")
    strata = (["category", "model", "none"] if is_rubric_round(question or "")
              else ["gold", "category", "model", "machine_label", "case", "none"])
    design = round_design(db, question)
    strata = strata if design["design"] == "uniform" else ["none"]  # weighted: no strata
    with st.form("new_round"):
        name = st.text_input("Name", placeholder="e.g. Validation split, double review")
        choices = filter_choices(db)
        c = st.columns(3)
        dataset = c[0].selectbox("Dataset", choices.datasets, index=None, placeholder="All")
        split = c[1].selectbox("Split", choices.splits, index=None, placeholder="All")
        model = c[2].selectbox("Model (responses)", choices.models, index=None, placeholder="All")
        c = st.columns(3)
        k = c[0].number_input("Reviewers per item (k)", 1, 10, 2)
        overlap = c[1].number_input("Overlap share (%)", 0, 100, 100,
                                    help="Share of items that get k reviewers; the rest get one")
        limit = c[2].number_input("Items (0 = all that match)", 0, 100000, 0)
        c = st.columns(3)
        stratify = c[0].selectbox("Stratify by", strata,
                                  format_func={"gold": "gold label (label questions)",
                                               "category": "category or theme",
                                               "model": "responding model",
                                               "machine_label": "the machine's label",
                                               "case": "case", "none": "nothing"}.get)
        blinding = c[1].selectbox("Blinding", BLINDING_MODES, index=1, format_func=BLINDING_WORDS.get,
                                  help="Labels: the machines' (mapper, judges) and the reference "
                                       "(gold) ones. Other reviewers' answers are never shown.")
        minutes = c[2].number_input("Reservation expires after (min)", 1, 240, 20)
        match = st.checkbox("Prefer reviewers whose specialty matches the item's")
        distance = st.number_input("Send to adjudication from an ordinal distance of", 1, 3, 1)
        if st.form_submit_button("Create round", type="primary"):
            try:
                rid = create_round(db, RoundSpec(
                    name=name, question_key=question, reviewers_per_item=int(k),
                    overlap_share=None if overlap == 100 else overlap / 100, dataset=dataset,
                    split=split, model=model, stratify_by=stratify, match_specialty=match,
                    blinding=blinding, reservation_minutes=int(minutes),
                    adjudicate_distance=int(distance), limit=int(limit) or None, **design), me)
            except RoundError as exc:
                st.error(safe_markdown(str(exc)))
            else:
                screen = ("Trajectories" if question == criteria_round_key("trajectory") else
                          "Graded conversations" if is_rubric_round(question) else "Review")
                st.session_state["rounds_flash"] = (
                    f"Round created (id {rid}). Reviewers find it on the {screen} screen.")
                people = len(list_reviewers(db))
                if int(k) > people:  # people may still join (a server's sign-ins), so not refused
                    st.session_state["rounds_warning"] = (
                        f"It asks {plural(int(k), 'reviewer')} per item and there "
                        f"{'is' if people == 1 else 'are'} {plural(people, 'person', 'people')} here: "
                        "no item can be completed, nor adjudicated, until more join.")
                st.rerun()

st.subheader("People", anchor=False)
people = list_reviewers(db)
st.dataframe([{"name": p.name, "role": p.role, "specialty": p.specialty or "", "seniority": p.seniority or ""}
              for p in people], hide_index=True, width="stretch")
with st.form("grant"):
    c = st.columns([3, 2, 2], vertical_alignment="bottom")
    who = c[0].selectbox("Reviewer", [p.name for p in people])
    role = c[1].selectbox("Role", ROLES)
    if c[2].form_submit_button("Grant role", width="stretch"):
        try:
            grant_role(db, me, who, role, server=server_mode())
        except ValueError as exc:
            st.error(safe_markdown(str(exc)))
        else:
            st.rerun()

if server_mode():
    st.subheader("Signed in now", anchor=False)
    here = signed_in(db)
    st.caption("Sign a person out: every session of theirs ends now, in every tab and browser"
               " (a copied sign-in too). They sign in again to go on.")
    if here:
        st.dataframe([{"name": p.name, "sessions": p.sessions, "last request (UTC)":
                       p.last_seen_at[:19].replace("T", " ")} for p in here],
                     hide_index=True, width="stretch")
    with st.form("sign_out_person"):
        c = st.columns([5, 2], vertical_alignment="bottom")
        person = c[0].selectbox("Person", [p.name for p in here], index=None,
                                placeholder="Choose who to sign out")
        if c[1].form_submit_button("Sign them out", width="stretch", disabled=not here):
            try:
                ended = sign_out_person(db, me, person) if person else 0
            except (NotAllowed, LookupError) as exc:
                st.error(safe_markdown(str(exc)))
            else:
                st.session_state["rounds_flash"] = (
                    f"{person} is signed out ({plural(ended, 'session')} ended)." if person
                    else "Choose a person first.")
                st.rerun()
