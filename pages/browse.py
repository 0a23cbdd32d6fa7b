"""Browse screen: search every item and note, narrow by facets, tag what you
find, read all models' responses side by side, save, share and export the view.

The view lives in the URL (see review.browse.query), so the address bar is
always a link to exactly what is on screen."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from labels.compare.figures import text as plotly_text
from pages._shared import (
    acting_session,
    current_reviewer,
    labels_gate,
    own_store,
    server_mode,
    show_text,
    store,
    viewer,
    viewer_store,
)
from pages._steps import code_span, label_text
from review.browse import (
    GATE_NAMES,
    PARAM_NAMES,
    PARENT,
    BrowseQuery,
    ExportOptions,
    Facet,
    ResultItem,
    add_tag,
    browse,
    browse_link,
    case_study_html,
    case_study_markdown,
    comparable_raters,
    create_tag,
    facets,
    gather_cases,
    item_link,
    label_name,
    list_tags,
    may_add_tags,
    ordinal_rank,
    rater_name,
    remove_tag,
    retire_tag,
    save_view,
    saved_views,
    selected_item_ids,
    side_by_side,
    tag_counts,
    to_csv,
    to_jsonl,
    view_item_ids,
)
from review.browse.search import ensure_index, plain_markdown, snippet_markdown, unindexed_count
from review.reviewing.names import item_in_address, item_name, turn
from review.team.access import open_for
from review.team.reviewers import is_admin
from review.team.study import SETTINGS, allows, set_setting
from review.text import safe_markdown
from review.workspace import default_db_path

W = "browse:"  # prefix of this page's widget keys
LIST_FACETS = ("kinds", "datasets", "splits", "models", "rounds", "labels", "gates", "step_errors",
               "severities", "tags", "reviewers")
PILL_FACETS = {"kinds", "splits", "rounds", "severities"}  # few values: pills, not a drop-down
APP_PARAMS = ("reviewer",)  # URL parameters of the whole app, kept when the view changes

def rater_words(who: str, start: bool = True) -> str:
    """A rater as a clinician reads it (`review.browse.facets.rater_name`)."""
    return rater_name(who, store(), start=start)


db = store()
reviewer = current_reviewer()
st.session_state.pop(W + "tag_done", None)  # a whole run shows the tags as they are now
adding_allowed = may_add_tags(store(), reviewer)  # tags.create_tag refuses all the same
# Carried in item links, so a link opened in a new tab comes back as this reviewer.
me_name = reviewer.name if reviewer is not None and not server_mode() else None
pending = unindexed_count(db)
if pending:
    with st.spinner(f"Adding {pending:,} items to the search index…"):
        ensure_index(db)


# -- the view <-> the URL <-> the widgets ----------------------------------------

def url_view() -> BrowseQuery:
    return BrowseQuery.from_params({k: st.query_params.get_all(k) for k in st.query_params})


def set_widgets(q: BrowseQuery) -> None:
    """Give every filter widget the view's value (before the widgets are drawn:
    at the top of a run or in a callback)."""
    ss = st.session_state
    ss[W + "q"] = q.text
    for name in LIST_FACETS:
        ss[W + name] = [str(v) for v in getattr(q, name)]
    ss[W + "flagged"] = q.flagged
    ss[W + "rater_a"] = q.rater_a
    ss[W + "rater_b"] = q.rater_b
    ss[W + "pair"] = f"{q.a_said or ''}|{q.b_said or ''}" if (q.a_said or q.b_said) else None
    ss[W + "distances"] = [str(d) for d in q.distances]


def show_view(q: BrowseQuery) -> None:
    """Make `q` the view (call from a callback): the widgets and the URL, keeping
    the app's own parameters (the reviewer) and dropping other pages' ones."""
    set_widgets(q)
    keep = {k: st.query_params.get_all(k) for k in APP_PARAMS if k in st.query_params}
    st.query_params.from_dict({**keep, **q.to_params()})


def widget_view(side: str | None) -> BrowseQuery:
    ss = st.session_state
    a_said, _, b_said = (ss.get(W + "pair") or "").partition("|")
    both = bool(ss.get(W + "rater_a") and ss.get(W + "rater_b"))
    values = {name: tuple(ss.get(W + name) or ()) for name in LIST_FACETS}
    for name in ("rounds", "severities"):
        values[name] = tuple(int(v) for v in values[name])
    return BrowseQuery(
        text=ss.get(W + "q") or "", **values, flagged=bool(ss.get(W + "flagged")),
        rater_a=ss.get(W + "rater_a"), rater_b=ss.get(W + "rater_b"),
        a_said=(a_said or None) if both else None, b_said=(b_said or None) if both else None,
        distances=tuple(int(d) for d in ss.get(W + "distances") or ()) if both else (),
        side=side)


def on_filter_change(side: str | None) -> None:
    show_view(widget_view(side))


def on_page_change(view: BrowseQuery, key: str) -> None:
    show_view(view.with_page(st.session_state.get(key) or 1))


def go_to(q: BrowseQuery) -> None:
    show_view(q)


query = url_view()
if replace(widget_view(query.side), page=query.page) != query:
    # The URL is the view: a link, a saved view, the back button - or a first
    # rerun carrying the browser's empty widgets - brings the widgets in line.
    set_widgets(query)
apply = {"on_change": on_filter_change, "args": (query.side,)}

# -- header and search -------------------------------------------------------------

st.title("Browse", anchor=False)
labels_gate("browse")
db = viewer_store()  # from here on: only the answers this reader may read (review.team.access)
st.caption("Find the cases behind the numbers: search patient turns, responses, agent steps "
           "and reviewers' notes, then narrow by label, disagreement, failed gate, step error or "
           "tag. Every rater's labels are shown here, so finish any blind review first.")
search_col, clear_col = st.columns([6, 1], vertical_alignment="bottom")
search_col.text_input(
    "Search", key=W + "q", **apply,
    placeholder='Words or "a phrase", e.g. "chest pain" sweating; end a word with * for any '
                "ending; -word leaves it out; OR between two words matches either",
)
clear_col.button("Clear all", key=W + "clear", on_click=go_to, args=(BrowseQuery(),),
                 width="stretch", icon=":material/filter_alt_off:")

page = browse(db, query)
if page.page != query.page:  # a page past the last (a link kept after the view shrank): the last
    query = query.with_page(page.page)
    if page.page > 1:
        st.query_params[PARAM_NAMES["page"]] = str(page.page)
    else:
        st.query_params.pop(PARAM_NAMES["page"], None)
counts = facets(db, query)


# -- facets ------------------------------------------------------------------------

def facet_widget(facet: Facet) -> None:
    if not facet.values:
        return
    by_value = {v.value: v for v in facet.values}

    def fmt(value: str) -> str:
        v = by_value.get(value)
        return f"{v.label} ({v.count:,})" if v else value

    options = list(by_value)
    if facet.field in PILL_FACETS and len(options) <= 6:
        # A pill's label is read as Markdown (a drop-down's is not): data in it is escaped.
        st.pills(facet.title, options, selection_mode="multi", format_func=lambda v: safe_markdown(fmt(v)),
                 key=W + facet.field, wrap=True, **apply)
    else:
        st.multiselect(facet.title, options, format_func=fmt, key=W + facet.field,
                       placeholder="Any", **apply)


def compare_raters() -> None:
    raters = comparable_raters(db)
    if len(raters) < 2:
        return
    for key in (W + "rater_a", W + "rater_b"):
        if st.session_state.get(key) not in raters:
            st.session_state[key] = None  # a rater named in a link but not in this database
    with st.expander("Compare two raters", icon=":material/compare_arrows:",
                     expanded=bool(query.rater_a or query.rater_b)):
        st.selectbox("Rater A", raters, key=W + "rater_a", format_func=rater_words, index=None,
                     placeholder="Choose a rater", **apply)
        st.selectbox("Rater B", raters, key=W + "rater_b", format_func=rater_words, index=None,
                     placeholder="Choose a rater", **apply)
        if "pair" in counts:
            pair = counts["pair"]
            labels = {v.value: f"{v.label} ({v.count:,})" for v in pair.values}
            st.selectbox("A said · B said", list(labels), key=W + "pair", index=None,
                         format_func=labels.get, placeholder="Any pair of answers", **apply)
            facet_widget(counts["distances"])
        elif query.rater_a or query.rater_b:
            st.caption("Choose both raters to see where they agree and where they differ.")


facet_col, main_col = st.columns([1, 3], gap="large")
with facet_col:
    st.markdown("**Narrow down**")
    for name in ("kinds", "datasets", "splits", "models", "rounds", "labels"):
        facet_widget(counts[name])
    compare_raters()
    for name in ("gates", "step_errors", "severities", "tags", "reviewers"):
        facet_widget(counts[name])
    flagged = counts["flagged"].values
    if flagged:
        st.toggle(f"Flagged for review ({flagged[0].count:,})", key=W + "flagged", **apply)


# -- side by side -------------------------------------------------------------------

def gold_note(diff: int | None) -> str:
    if not diff:
        return ""
    word = "under-triage" if diff < 0 else "over-triage"
    colour = "red" if diff < 0 else "orange"
    return f" :{colour}[{word} by {abs(diff)}]"


def show_side_by_side(uid: str) -> None:
    view = side_by_side(db, uid)
    with st.container(border=True):
        head, close = st.columns([6, 1], vertical_alignment="center")
        if view is None:
            head.warning(f"No item {code_span(uid)} to show side by side.")
        else:
            prefix = item_in_address(store(), view.prefix_uid, "prefix")
            named = item_name(store(), prefix) if prefix is not None else None
            head.markdown(f"**Side by side** · every model's reply to "
                          f"[{plain_markdown(named.title if named else view.prefix_uid)}]"
                          f"({item_link('prefix', view.prefix_uid, reviewer=me_name)})")
        close.button("Close", key=W + "close_side", on_click=go_to, args=(replace(query, side=None),),
                     icon=":material/close:", width="stretch")
        if view is None:
            return
        for number, said in enumerate(view.turns, start=1):
            st.caption(f"Patient · {turn(number)}")
            show_text(said, key=f"side_turn_{number}")
        gold = ", ".join(f"{plain_markdown(rater_words(c.rater))}: **{label_name(c.value)}**"
                         for c in view.prefix_labels)
        st.markdown(f"Labels on the conversation: {gold}" if gold
                    else "No labels on the conversation yet.")
        if view.models_disagree:
            st.markdown(":orange-badge[:material/call_split: the responses were labelled differently]")
        for start in range(0, len(view.responses), 3):
            for col, resp in zip(st.columns(3), view.responses[start:start + 3], strict=False):
                with col.container(border=True):
                    st.markdown(f"**{plain_markdown(resp.model or 'unknown model')}**"
                                + (" :red-badge[failed]" if resp.failed else "")
                                + (" :orange-badge[raters disagree]" if resp.raters_disagree else ""))
                    show_text(resp.text or resp.error, key=f"side_{resp.item_id}",
                              empty="(no response)")
                    for cell in resp.labels:
                        st.markdown(f"- {plain_markdown(rater_words(cell.rater))}: **{cell.shown}**"
                                    + gold_note(cell.vs_gold))


# -- one result ----------------------------------------------------------------------

def on_tag(item_id: int, adding: bool, tag: str | None = None, target: str | None = None) -> None:
    s = st.session_state
    new = " ".join((s.get(f"{W}tag_new:{item_id}") or "").split()) if adding else ""
    tag = tag or new or s.get(f"{W}tag_name:{item_id}")
    target = target if target is not None else s.get(f"{W}tag_where:{item_id}") or ""
    if reviewer is None:
        return
    if not tag:
        s[W + "flash"] = "Choose a tag, or name a new one, first."
        return
    try:
        with own_store() as own:  # a callback may run on another thread
            if new and new.casefold() not in {t.name.casefold() for t in list_tags(own)}:
                create_tag(own, new, reviewer)  # a new tag, added to the list as it is used
            (add_tag if adding else remove_tag)(own, reviewer, item_id, tag, target,
                                                 s.get(f"{W}tag_note:{item_id}") if adding else None)
    except (ValueError, PermissionError) as exc:
        s[W + "flash"] = str(exc)
    else:
        s.pop(f"{W}tag_new:{item_id}", None)
        s[W + "tag_done"] = True  # the dialog closes, and the page shows the tag


def tag_controls(item: ResultItem, tag_names: list[str]) -> None:
    """The Tag button: its form opens in a dialog, drawn only for the item asked for
    (twenty forms drawn ahead, hidden in popovers, slowed every first render)."""
    if st.button("Tag", key=f"{W}tag_open:{item.item_id}", icon=":material/sell:"):
        tag_dialog(item, tag_names)


@st.dialog("Tag", width="medium")
def tag_dialog(item: ResultItem, tag_names: list[str]) -> None:
    # A press in a dialog reruns the dialog alone: once a tag is added or taken off,
    # the whole page runs again (which closes the dialog) to show it.
    if st.session_state.pop(W + "tag_done", None):
        st.rerun()
    if flash := st.session_state.pop(W + "flash", None):
        st.error(safe_markdown(flash))
    named = item_name(store(), item.item_id)
    st.markdown(f"**{plain_markdown(named.title if named else item.uid)}**")
    st.caption(plain_markdown(f"id {item.uid}"))
    if reviewer is None:
        st.caption("Choose who is reviewing in the sidebar to tag.")
        return
    st.selectbox("Tag", tag_names, key=f"{W}tag_name:{item.item_id}", index=None,
                 placeholder="Choose a tag")
    if adding_allowed:
        st.text_input("Or a new tag", key=f"{W}tag_new:{item.item_id}",
                      placeholder="e.g. mapper error",
                      help="Added to the list of tags as you tag this item with it")
    if item.step_ids:
        where = ["", *[f"step:{n}" for n in item.step_ids]]
        if f"{W}tag_where:{item.item_id}" not in st.session_state:
            st.session_state[f"{W}tag_where:{item.item_id}"] = item.target if item.target in where else ""
        st.selectbox("On", where, key=f"{W}tag_where:{item.item_id}",
                     format_func=lambda t: t.replace("step:", "Step ") if t else "The whole run")
    st.text_input("Note (what you saw)", key=f"{W}tag_note:{item.item_id}")
    st.button("Add tag", key=f"{W}tag_add:{item.item_id}", type="primary",
              on_click=on_tag, args=(item.item_id, True))
    for tag, target in item.tags:
        st.button(f"Remove {safe_markdown(tag)}" + (f" ({target.replace('step:', 'step ')})" if target else ""),
                  key=f"{W}untag:{item.item_id}:{tag}:{target}", icon=":material/close:",
                  on_click=on_tag, args=(item.item_id, False, tag, target))


def labels_line(labels: list[tuple[str, str]]) -> str:
    """Who gave which label, grouped by label so a split stands out; then how the
    raters' most common label sits against the reference label of the prefix."""
    by_value: dict[str, list[str]] = {}
    for who, value in labels:
        by_value.setdefault(value, []).append(rater_words(who, start=False))
    parts = [f"**{label_name(v)}**: {plain_markdown(', '.join(names))}" for v, names in by_value.items()]
    own = [v for who, v in labels if not who.startswith(PARENT)]
    gold = next((v for who, v in labels if who.startswith(PARENT)), None)
    badges = " :orange-badge[raters differ]" if len(set(own)) > 1 else ""
    tally = sorted(((own.count(v), v) for v in set(own)), reverse=True)
    if gold and tally and (len(tally) == 1 or tally[0][0] > tally[1][0]):  # a clear majority
        a, b = ordinal_rank(tally[0][1]), ordinal_rank(gold)
        if a is not None and b is not None and a != b:
            word, colour = ("under-triage", "red") if a < b else ("over-triage", "orange")
            badges += f" :{colour}-badge[{word} by {abs(a - b)} against the conversation's label]"
    return ":small[" + " · ".join(parts) + "]" + badges


def show_item(item: ResultItem, tag_names: list[str]) -> None:
    with st.container(border=True):
        # The item by what it is ("Conversation 3, after the patient's 2nd message"), a
        # link to it; its id, model, dataset and split on a details line for researchers.
        name = item_name(store(), item.item_id)
        badges = (" :red-badge[failed]" if item.failed else "") + (
            " :orange-badge[:material/flag: flagged]" if item.flagged else "")
        link = item_link(item.kind, item.uid, item.target or None, reviewer=me_name)
        st.markdown(f"[**{plain_markdown(name.title if name else item.uid)}**]({link}){badges}")
        st.caption(plain_markdown(" · ".join(
            str(f) for f in (f"id {item.uid}", item.model, item.dataset, item.split) if f)))
        where = []
        if item.target:
            where.append(item.target.replace("step:", "in step "))
        if item.found_in not in ("item", "parent"):
            where.append(f"in a {'tag note' if item.found_in == 'tag' else 'note'} by "
                         f"{plain_markdown(item.note_by or 'a rater')}")
        if item.found_in == "parent":  # the words are the patient's: show them, then the reply
            st.caption(("Patient: " if item.kind == "response" else "Conversation: ")
                       + snippet_markdown(item.snippet))
            st.markdown(plain_markdown(item.own_text) or ":grey[(no response)]")
        else:
            if item.patient_said:
                said = " ".join(item.patient_said.split())
                st.caption("Patient, last turn: "
                           + plain_markdown(said[:220] + (" …" if len(said) > 220 else "")))
            st.markdown((f":grey[{' · '.join(where)}:] " if where else "")
                        + (snippet_markdown(item.snippet) or ":grey[(no text)]"))
        if item.labels:
            st.markdown(labels_line(item.labels))
        if item.step_marks:
            st.markdown(":small[" + " · ".join(
                f"**{target.replace('step:', 'Step ')}**: {label_name(error)}"
                + (f" (severity {severity})" if severity else "")
                for target, error, severity in item.step_marks) + "]")
        if item.failed_gates:
            st.markdown(":red-badge[failed: " + ", ".join(  # gate names come from the file
                label_text(GATE_NAMES.get(g, g.replace("_", " "))) for g in item.failed_gates) + "]")
        if item.tags:
            st.markdown(" ".join(
                f":violet-badge[{plain_markdown(tag)}"
                f"{' · ' + target.replace('step:', 'step ') if target else ''}]"
                for tag, target in item.tags))
        with st.container(horizontal=True):
            tag_controls(item, tag_names)
            if item.kind in ("prefix", "response"):
                st.button("Side by side", key=f"{W}side:{item.item_id}", on_click=go_to,
                          args=(replace(query, side=item.uid),), icon=":material/view_column:")


# -- tabs ------------------------------------------------------------------------------

def items_tab() -> None:
    flash = st.session_state.pop(W + "flash", None)
    if flash:
        st.error(safe_markdown(flash))
    if page.text.ignored:
        st.caption("Not searched for: " + ", ".join(code_span(t) for t in page.text.ignored))
    chosen = [f"{f.title}: " + ", ".join(v.label for v in f.values if v.selected)
              for f in counts.values() if any(v.selected for v in f.values)]
    if query.rater_a and query.rater_b:
        chosen.insert(0, f"A = {rater_words(query.rater_a)}, B = {rater_words(query.rater_b)}")
    if chosen:
        st.caption("In this view: " + plain_markdown(" · ".join(chosen)))
    noun = "item" if page.total == 1 else "items"
    st.markdown(f"**{page.total:,}** {noun}" + (f" · page {page.page} of {page.pages}"
                                                 if page.pages > 1 else "")
                + (" · best matches first" if page.text.match else ""))
    if not page.items:
        st.info("Nothing matches this view. Remove a filter or search for other words.",
                icon=":material/search_off:")
        return
    tag_names = [t.name for t in list_tags(db)]
    for item in page.items:
        show_item(item, tag_names)
    if page.pages > 1:
        key = f"{W}page:{query.with_page(1).query_string()}"  # a new widget for each selection
        st.pagination(page.pages, default=min(page.page, page.pages), key=key, max_visible_pages=9,
                      on_change=on_page_change, args=(query, key))


def tags_tab() -> None:
    import plotly.graph_objects as go  # here: only this tab draws a chart

    counts_now = tag_counts(db, view_item_ids(db, query))
    used = [c for c in counts_now if c.items or c.steps]
    if used:
        fig = go.Figure([
            go.Bar(y=[plotly_text(c.tag) for c in used], x=[c.items for c in used], name="on the whole item",
                   orientation="h", marker_color="#6f42c1"),
            go.Bar(y=[plotly_text(c.tag) for c in used], x=[c.steps for c in used], name="on a single step",
                   orientation="h", marker_color="#c297f5"),
        ])
        top = max(c.items + c.steps for c in used)
        fig.update_layout(barmode="stack", height=150 + 32 * len(used),
                          margin=dict(l=10, r=10, t=60, b=10), title="Tags in this view",
                          xaxis=dict(title="times applied", tickformat="d", rangemode="tozero",
                                     dtick=max(1, -(-top // 8))),
                          yaxis=dict(autorange="reversed"),
                          legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
        st.plotly_chart(fig, key=W + "tag_chart", config={"displaylogo": False})
    else:
        st.caption("No tags in this view yet. Tag an item or a step from its result.")
    admin = is_admin(reviewer)
    taxonomy = list_tags(db, retired=admin)
    by_name = {c.tag: c for c in counts_now}
    st.dataframe([{"tag": t.name, "under": t.parent or "", "items": by_name[t.name].items,
                   "steps": by_name[t.name].steps, "use it when": t.description or "",
                   "added by": t.created_by, **({"retired": t.retired} if admin else {})}
                  for t in taxonomy], hide_index=True, width="stretch")
    if reviewer is None:
        st.caption("Choose who is reviewing in the sidebar to add a tag to the list.")
        return
    if admin:
        tag_admin(taxonomy)
    if not adding_allowed:
        st.caption("Only an admin adds tags to the list here; an admin can let reviewers add "
                   "them too.")
        return
    with st.form(W + "new_tag", clear_on_submit=True, border=True):
        st.markdown("**Add a tag to the list**")
        name = st.text_input("Name", placeholder="e.g. mapper error")
        description = st.text_input("Use it when", placeholder="what a reviewer should see to apply it")
        parent = st.selectbox("Under", [t.name for t in taxonomy if not t.retired], index=None,
                              placeholder="(top level)")
        if st.form_submit_button("Add tag", type="primary"):
            try:
                create_tag(db, name, reviewer, description, parent)
            except (ValueError, PermissionError) as exc:
                st.error(safe_markdown(str(exc)))
            else:
                st.success(f"Added {safe_markdown(repr(name))}.")


def tag_admin(taxonomy) -> None:
    """An admin: whether reviewers may add tags, and retiring a tag (or offering it
    again); each a new row, nothing renamed or deleted."""
    def allow() -> None:
        with own_store() as own:
            set_setting(own, reviewer, "reviewers_add_tags", st.session_state[W + "allow_tags"])

    st.session_state[W + "allow_tags"] = allows(db, "reviewers_add_tags")
    st.toggle(SETTINGS["reviewers_add_tags"].words, key=W + "allow_tags", on_change=allow)

    def change(retired: bool) -> None:
        name = st.session_state.get(W + "retire_name")
        if not name:
            return
        with own_store() as own:
            retire_tag(own, reviewer, name, st.session_state.get(W + "retire_note"), retired)

    cols = st.columns([3, 3, 2, 2], vertical_alignment="bottom")
    cols[0].selectbox("Tag", [t.name for t in taxonomy], key=W + "retire_name", index=None,
                      format_func=lambda n: n + (" (retired)" if any(
                          t.retired for t in taxonomy if t.name == n) else ""),
                      placeholder="Choose a tag to retire")
    cols[1].text_input("Why", key=W + "retire_note", placeholder="e.g. merged into another")
    cols[2].button("Retire", on_click=change, args=(True,), width="stretch",
                   help="No longer offered; where it was applied it stays")
    cols[3].button("Offer again", on_click=change, args=(False,), width="stretch")


def share_tab() -> None:
    st.markdown("**Link to this view**")
    here = (st.context.url or "").rstrip("/")
    qs = query.query_string()
    st.code(f"{here}?{qs}" if here and qs else here or browse_link(query), language=None,
            wrap_lines=True)
    st.caption("Anyone opening this link on this carelens sees the same search, filters and page.")
    if reviewer is not None:
        with st.form(W + "save_view", clear_on_submit=True, border=False):
            name = st.text_input("Save this view as", placeholder="e.g. mapper under-triage, round 1")
            if st.form_submit_button("Save view", icon=":material/bookmark_add:"):
                try:
                    save_view(db, name, query, reviewer)
                except ValueError as exc:
                    st.error(safe_markdown(str(exc)))
                else:
                    st.success(f"Saved as {safe_markdown(repr(name))}.")
    else:
        st.caption("Choose who is reviewing in the sidebar to save views.")
    views = saved_views(db)
    if views:
        st.markdown("**Saved views**")
        for v in views:
            st.markdown(f"- [{plain_markdown(v.name)}]({browse_link(v.query)}) "
                        f":grey[· {plain_markdown(v.created_by)}, {v.created_at[:10]}]")


def export_tab() -> None:
    st.markdown(f"Export the **{page.total:,}** {'item' if page.total == 1 else 'items'} of this view.")
    hide_all = st.checkbox("Withhold every item id (number the cases instead)", key=W + "x_hide_all")
    anonymise = st.checkbox("Name reviewers Clinician A, B, …", key=W + "x_anon", value=True)
    identifying = st.checkbox("Include the ids of identifying items", key=W + "x_ident",
                              help="Items whose source marks their id as identifying (e.g. a "
                                   "CliniCARE task id names a patient) are withheld unless you tick this.")
    if identifying and not hide_all:
        st.warning("Identifying ids will be in the file: keep it on this machine.",
                   icon=":material/warning:")
    options = ExportOptions(include_identifying=identifying, withhold_all_ids=hide_all,
                            anonymise_reviewers=anonymise)
    path, view, session, reader = default_db_path(), query, acting_session(), viewer()

    def build(kind: str):
        # Runs on another thread when clicked: it opens its own connection, which reads
        # only what this reader may (review.team.access: not colleagues' notes and marks).
        def make() -> str:
            s = open_for(path, reader)
            try:
                s.session_id = session
                s.require_session()  # a tab left open after Sign out downloads nothing
                blocks = kind in ("md", "html")
                ids = selected_item_ids(s, view, limit=100 if blocks else None)
                cases = gather_cases(s, ids, options, with_blocks=blocks)
                title = f"carelens case studies: {view.text or 'browse selection'}"
                return {"csv": to_csv, "jsonl": to_jsonl}[kind](cases) if not blocks else (
                    case_study_markdown(cases, title) if kind == "md" else case_study_html(cases, title))
            finally:
                s.close()
        return make

    cols = st.columns(2) + st.columns(2)
    for col, (kind, label, mime, name) in zip(cols, (
            ("csv", "Items as CSV", "text/csv", "carelens_browse.csv"),
            ("jsonl", "Items as JSONL", "application/jsonl", "carelens_browse.jsonl"),
            ("md", "Case-study sheet (Markdown)", "text/markdown", "carelens_case_studies.md"),
            ("html", "Case-study sheet (HTML)", "text/html", "carelens_case_studies.html")), strict=True):
        col.download_button(label, build(kind), name, mime, key=W + "x_" + kind, width="stretch",
                            on_click="ignore", icon=":material/download:")
    st.caption("Case-study sheets hold the first 100 items of the view, with the patient's words, "
               "the response or the marked steps, every label, failed gates, tags and notes.")


with main_col:
    if query.side:
        show_side_by_side(query.side)
    # Only the tab on screen is computed and drawn (the Tags tab's chart loads a charting
    # library the Items tab does without); under AppTest, which tracks no tab, all are.
    tabs = st.tabs(["Items", "Tags", "Save and share", "Export"], key=W + "tab",
                   on_change="rerun")
    for tab, draw in zip(tabs, (items_tab, tags_tab, share_tab, export_tab), strict=True):
        if tab.open is not False:
            with tab:
                draw()
