"""Agreement screen: how far raters agree, with intervals, down to the disagreeing items.

Layout and widgets only: every number comes from one call into
``labels.compare`` (cached on the database's data version), every figure
from ``labels.compare.figures``. Data text is shown as plain text or escaped
Markdown, never as HTML.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote, urlencode

import streamlit as st

from codebook import CANNOT_ASSESS, CAREBENCH
from codebook.vocabulary import first_up
from labels import compare as cmp
from labels.compare.figures import (
    anchoring_figure,
    forest_figure,
    meta_forest_figure,
    pairwise_figure,
    ranking_figure,
    versions_figure,
)
from labels.compare.questions import codebook_for
from labels.compare.raters import MAJORITY, display_name
from labels.compare.stats import coefficient_name, forest_keys, headline_key
from labels.compare.text import interval, number, share_text, split_notes, with_ci
from labels.phases import DEFAULT_PHASE, PHASES, SHORT_WORDS, describe_phase
from labels.report import report_csv, report_html, report_json, report_provenance
from labels.triage import METRIC_NAMES
from pages._ppi import agreement_panel, leaderboard_caption, leaderboard_cells
from pages._scores import healthbench_scores_section
from pages._shared import current_reviewer, labels_gate, store, viewer
from review.browse import BrowseQuery, browse_link
from review.browse.facets import rater_words_of
from review.browse.item_labels import disagreement_link
from review.reviewing.names import item_in_address, item_name, plural, turn
from review.team.access import Viewer, open_for
from review.text import safe_markdown
from review.workspace import default_db_path

BY_WORDS = {"round": "Patient's turn", "category": "Category", "model": "Model",
            "split": "Split", "dataset": "Dataset", "criterion": "Criterion",
            "axis": "Rubric axis"}
WIDE_NOTE = {"Note": st.column_config.TextColumn(width="large")}
TABS = ["Compare", "Clinicians", "Machine raters", "Triage & leaderboard", "Anchoring",
        "HealthBench meta-eval", "HealthBench scores", "Few clinicians (PPI)"]
METRIC_KEYS = ["macro_f1", "accuracy", "over_triage", "under_triage", "missed_care",
               "unnecessary_care", "urgent_false_negative", "false_urgent_escalation"]

db = store()
PATH = default_db_path()
VERSION = cmp.data_version(db)


# -- cached calls: each opens its own connection (one per unit of work) ----------

@st.cache_resource(max_entries=64, show_spinner=False)
def _call(name: str, path: str, version: tuple, reader: Viewer | None, *args, **kwargs):
    """One library call by name, cached on the database's data version and on what
    its reader may read (`review.team.access`: one reader's figures never another's).
    Kept as the objects themselves, shared and only read: a copy of a report of
    20,000 items per run (what st.cache_data makes) took longer than the screen."""
    with open_for(path, reader) as s, cmp.collector_paused():
        return getattr(cmp, name)(s, *args, **kwargs)


def call(name: str, *args, **kwargs):
    return _call(name, PATH, VERSION, viewer(), *args, **kwargs)


# Each stored rater name (and group) the screen may meet, in words with the name
# beside: "the mapper, prompt v1 (demo:mapper@v1)". Filled once the store is open.
_NAMES: dict[str, str] = {}


def words(value: object) -> str:
    """A report's text with every rater by role, the name it is stored under beside it
    (a researcher's view: the names are what `carelens agreement` takes)."""
    text = str(value)
    if not _NAMES:
        return text
    pattern = "|".join(re.escape(n) for n in sorted(_NAMES, key=len, reverse=True))
    out = re.sub(rf"(?<![\w:@/.-])(?:{pattern})(?![\w:@/.-])",
                 lambda m: _NAMES[m.group(0)], text)
    return first_up(out) if out[:1] != text[:1] else out  # a line that starts with one


def md(value: object) -> str:
    """Data text as inert Markdown, its raters in words (`words`)."""
    return safe_markdown(words(value))


def reviewer_name() -> str | None:
    who = current_reviewer()
    return who.name if who else None


def review_links(units) -> None:
    """Items as links to their read-only disagreement view (a new tab, so this list stays
    open): the item and every rater's label on the unit, never an answer button. Beside
    each, what of the item the unit is: the rubric criterion (several criteria of one item
    would otherwise be identical lines) or the step."""
    who = reviewer_name()
    seen: dict[tuple[str, str], int] = {}
    for unit in units:
        seen[(unit.item_uid, unit.question_text)] = seen.get(
            (unit.item_uid, unit.question_text), 0) + 1
    lines = []
    for unit in units:
        # The item by what it is (its id beside, small: this is a researcher's list).
        found = item_in_address(store(), unit.item_uid)
        name = item_name(store(), found) if found is not None else None
        text = (f"{md(name.title)}" if name else md(unit.item_uid))  # escaped whole
        ids = f" :small[:gray[id {md(unit.item_uid)}]]" if name else ""
        step = unit.target if unit.target.startswith("step:") else None
        href = disagreement_link(unit.item_uid, unit.question_key, unit.target, reviewer=who)
        line = f"- [{text}]({href}){ids}"
        what = []
        if step:
            what.append(f"step {md(step.removeprefix('step:'))}")
        if qs.kind == "criterion":
            criterion = unit.question_text or unit.question_key
            if seen[(unit.item_uid, unit.question_text)] > 1:  # the same words twice: the key
                criterion = f"{criterion} ({unit.question_key})"
            what.append(f"criterion: {md(criterion)}")
        lines.append(line + "".join(f" · {w}" for w in what))
    st.markdown("\n".join(lines))


def browse_href(query: BrowseQuery) -> str:
    """The Browse link of a view, carrying the reviewer as every item link does, so the
    new tab opens as the same person (behind the same labels gate)."""
    href, who = browse_link(query), reviewer_name()
    if not who:
        return href
    return href + ("&" if "?" in href else "?") + urlencode({"reviewer": who}, quote_via=quote)


NO_CLOSED_FORM = "no closed-form interval"  # said once under the table, not on every alpha row


def coefficient_rows(coefficients, ceiling=None, like=None) -> list[dict]:
    _, notes = split_notes(coefficients)
    rows = []
    for c, note in zip(coefficients, notes, strict=True):
        note = "; ".join(p for p in note.split("; ") if not p.startswith(NO_CLOSED_FORM))
        row = {"Coefficient": c.name, "Value": number(c.value),
               "95% CI (bootstrap)": interval(c.ci_low, c.ci_high),
               "95% CI (analytic)": interval(*c.analytic_ci) if c.analytic_ci else "—",
               "n": c.n}
        if ceiling is not None:
            h = ceiling(c.key)
            row["Clinicians among themselves"] = number(h.value) if h else ""
        if like is not None:  # one rater against a majority, as the comparison is
            h = like(c.key)
            row["A clinician vs the others' majority"] = number(h.value) if h else ""
        row["Note"] = note
        rows.append(row)
    return rows


# -- what to compare -------------------------------------------------------------

st.title("Agreement", anchor=False)
labels_gate("agreement")
_NAMES.update({name: f"{said} ({name})" for name, said in rater_words_of(store()).items()
               if said != name})
_NAMES.update({"Adjudicated": "Settled answers", "group:adjudicated": "settled answers"})
sets = call("question_sets")
if not sets:
    st.info("No answers yet. Load the demo or import labels on the Data screen, then come back "
            "to see how far clinicians, the mapper and the judges agree.", icon=":material/info:")
    st.stop()
set_keys = [qs.key for qs in sets]
titles = {qs.key: qs.title for qs in sets}
default = call("default_comparison") or (set_keys[0], None, None)

top = st.columns([3, 2, 2], vertical_alignment="bottom")
qkey = top[0].selectbox(
    "Question set", set_keys, format_func=titles.get, key="agr_question",
    index=set_keys.index(default[0]) if default[0] in set_keys else 0,
)
qs = next(q for q in sets if q.key == qkey)

with st.sidebar:
    st.markdown("**Agreement filters**")
    facets = call("facet_choices", qkey)
    dataset = st.selectbox("Dataset", facets.datasets, index=None, placeholder="All datasets",
                           key="agr_dataset")
    split = st.selectbox("Split", facets.splits, index=None, placeholder="All splits",
                         key="agr_split")
    model = (st.selectbox("Model", facets.models, index=None, placeholder="All models",
                          key="agr_model") if facets.models else None)
    round_id = (st.selectbox("Patient's turn", facets.rounds, index=None,
                             placeholder="All turns", format_func=turn,
                             key="agr_round") if facets.rounds else None)
    category = (st.selectbox("Category", facets.categories, index=None,
                             placeholder="All categories", key="agr_category")
                if facets.categories else None)
    phase = st.selectbox("Clinicians' answers", PHASES, format_func=SHORT_WORDS.get,
                         index=PHASES.index(DEFAULT_PHASE), key="agr_phase",
                         help="Blind (the default): each clinician's answer given before any "
                              "machine or reference label was shown; imported answers count as "
                              "blind unless their file gave another phase. Current: the latest "
                              "answer, including answers changed after the reveal. Machine and "
                              "reference labels are never filtered.")
    with_cannot = st.toggle("Count 'cannot assess' as an answer", key="agr_cannot",
                            help="Off: 'cannot assess' is a missing rating.")
# Read through the same code as `carelens agreement` / `triage-metrics` options.
filters = cmp.filters_from({"dataset": dataset, "split": split, "model": model,
                            "round": round_id, "category": category, "phase": phase,
                            "include_cannot_assess": with_cannot})
compared = cmp.compared_question_set(qs, filters)  # nominal once 'cannot assess' counts

choices = call("choices_for", qkey, filters)
specs = [c.spec for c in choices]
labels = {c.spec: f"{words(c.label)} · {c.n}" for c in choices}
if len(specs) < 2:
    st.info("Fewer than two raters answered this question set under these filters: nothing to "
            "compare. Widen the filters or choose another question set.")
    st.stop()


def pick(column, label: str, options: list, wanted, key: str):
    return column.selectbox(label, options, index=options.index(wanted) if wanted in options
                            else 0, key=key,
                            format_func=lambda s: labels.get(s) or "Nobody: A's members among "
                                                                   "themselves")


first_a, first_b = cmp.default_raters(choices) or (specs[0], None)
a = pick(top[1], "Rater A", specs, first_a, f"agr_a:{qkey}")
b_options = [None] + [s for s in specs if s != a]
b = pick(top[2], "Rater B", b_options, first_b if first_b != a else None, f"agr_b:{qkey}")
st.caption(f"{compared.level.capitalize()} labels"
           + (" ('cannot assess' counted as one more, unordered answer)"
              if compared.level != qs.level else "")
           + ": the statistics that fit are "
           + {"ordinal": "weighted kappa, ordinal alpha and Gwet's AC2",
              "binary": "Gwet's AC1 and PABAK (met / not met is skewed; kappa collapses there)",
              "nominal": "Cohen's or Fleiss' kappa, alpha and Gwet's AC1"}[compared.level]
           + f". Filters: {md(filters.describe(phase=False))}. Counts after each rater's name: units "
             "answered.")
st.caption(f"**Answers used:** {describe_phase(filters.phase)}."
           + ("" if filters.phase != DEFAULT_PHASE else
              " Choose *Current answers* in the sidebar to compare the latest instead."))

tabs = st.tabs(TABS, key="agr_tab", on_change="rerun")


def is_open(i: int) -> bool:
    # .open is None when the tabs do not track state (e.g. in tests): show them all.
    return tabs[i].open is not False


# -- Compare ---------------------------------------------------------------------

def compare_tab() -> None:
    by_options = [x for x in ("round", "category", "model", "split", "criterion", "axis")
                  if x != "criterion" or qs.kind == "criterion"]
    row = st.columns([2, 2, 3], vertical_alignment="bottom")
    first = ("criterion" if qs.kind == "criterion" else "round"
             if set(qs.item_kinds) & {"prefix", "response"} else "model")
    by = row[0].selectbox("Break down by", by_options, format_func=BY_WORDS.get,
                          index=by_options.index(first), key=f"agr_by:{qkey}")
    keys = forest_keys(compared.level)
    forest_key = row[1].selectbox("Statistic per group", keys, format_func=coefficient_name,
                                  key=f"agr_forest:{qkey}:{compared.level}")
    try:
        report = call("agreement_report", qkey, a, b, filters, by=(by,), forest_key=forest_key)
    except ValueError as exc:
        st.info(md(exc), icon=":material/info:")
        return
    with row[2]:
        downloads(report, by, forest_key)
    st.subheader(md(report.title), anchor=False)
    headline_cards(report)
    common, _ = split_notes(report.coefficients)
    st.dataframe(coefficient_rows(report.coefficients,
                                  report.ceiling_for if report.ceiling else None,
                                  report.like_for if report.like_with_like else None),
                 hide_index=True, width="stretch", column_config=WIDE_NOTE)
    st.caption("Where the analytic interval shows —, the statistic has no closed-form interval "
               "(Krippendorff's alpha, macro-F1); the bootstrap interval resamples units.")
    for note in list(common) + report.notes:
        st.caption(f"Note: {md(note)}")
    if report.confusion is not None:
        confusion_section(report)
    else:
        st.caption("The confusion matrix compares two raters; choose a rater or the "
                   "clinicians' majority for B to see the disagreeing items.")
    bd = report.breakdowns[0]
    st.subheader(f"By {BY_WORDS[by].lower()}: {bd.name}", anchor=False)
    # A table first: the plot loads a charting library the rest of the screen does without.
    if st.toggle("Show as a plot", key=f"agr_forest_plot:{qkey}:{by}",
                 help="A forest plot of the same figures, with their intervals as bars"):
        st.caption("Blue: the comparison. Orange: the clinicians among themselves on the group's "
                   "units that two or more of them rated, tied votes included (the human ceiling). "
                   "Bars: 95% bootstrap intervals."
                   if any(r.ceiling for r in bd.rows) else "Bars: 95% bootstrap intervals.")
        st.plotly_chart(forest_figure(bd, report.title), key=f"forest:{qkey}:{by}",
                        config={"displaylogo": False})
        return
    st.dataframe([{
        BY_WORDS[by]: r.label, "n": r.n_units, "Value": number(r.comparison.value),
        "95% CI": interval(r.comparison.ci_low, r.comparison.ci_high),
        "Clinicians": number(r.ceiling.value) if r.ceiling else "",
        "Note": "" if r.comparison.value is not None else
        f"undefined: {r.comparison.undefined_reason}",
    } for r in bd.rows], hide_index=True, width="stretch")
    if any(r.ceiling for r in bd.rows):
        st.caption("Clinicians: the clinicians among themselves on the group's units that two or "
                   "more of them rated, tied votes included (the human ceiling).")


def ci_words(c, percent: bool = False) -> str:
    """The 95% interval to quote: the bootstrap's, or the analytic one where every
    resample gave the same value (all raters agreed) and a closed form exists.
    `percent`: as percentages, beside a value shown as one."""
    low, high, how = c.ci_low, c.ci_high, ""
    if c.analytic_ci and c.ci_low is not None and c.ci_low == c.ci_high:
        (low, high), how = c.analytic_ci, " (analytic)"
    if percent and low is not None and high is not None:
        return f"95% CI {low:.0%} to {high:.0%}{how}"
    return f"95% CI {interval(low, high)}{how}"


def headline_cards(report) -> None:
    """The headline coefficient, percent agreement, the clinicians' ceiling and n, at the
    level the report was computed at (nominal once 'cannot assess' counts); under them,
    why a low kappa or alpha sits beside high agreement, where that is the case."""
    level = report.question_set.level
    head = report.coefficient(headline_key(level, len(report.raters)))
    pct = report.coefficient("percent_agreement")
    ceiling = report.ceiling_for(head.key) if head else None
    if ceiling is None and report.ceiling:
        # The same statistic on both sides: the first multi-rater coefficient both have.
        shared = next((k for k in forest_keys(level) if k != "percent_agreement"  # a card of its own
                       and report.coefficient(k) is not None and report.ceiling_for(k) is not None),
                      None)
        if shared is not None:
            head, ceiling = report.coefficient(shared), report.ceiling_for(shared)
    cards = []  # (label, value, caption, help)
    if head is not None:
        cards.append((head.name, number(head.value), f"{ci_words(head)} · n = {head.n}",
                      head.undefined_reason))
    if pct is not None:
        cards.append(("Percent agreement", "—" if pct.value is None else f"{pct.value:.0%}",
                      ci_words(pct, percent=True), pct.undefined_reason))
    if ceiling is not None:
        cards.append(("Clinicians among themselves", number(ceiling.value),
                      f"{ceiling.name} · {ci_words(ceiling)}",
                      f"The human ceiling: the clinicians' agreement with each other on the "
                      f"{report.ceiling_units} units this comparison is about that two or more of "
                      "them rated (units where they tied included), by the same statistic as the "
                      "comparison beside it. A rater compared with the clinicians' majority can "
                      "score above it: a majority is steadier than any one clinician."))
    cards.append(("Units compared", str(report.n_units),
                  f"{len(report.disagreements)} disagree" if report.is_pair
                  else plural(len(report.raters), "rater"), None))
    for col, (label, value, caption, help_text) in zip(st.columns(len(cards)), cards,
                                                       strict=True):
        col.metric(md(label), value, border=True, help=help_text and md(help_text))
        col.caption(md(caption))
    if paradox := cmp.prevalence_note(report, head):
        st.caption(md(paradox))


def browse_cell(a_said: str, b_said: str, units, report) -> tuple[BrowseQuery | None, list[str]]:
    """A confusion cell of named raters A and B as a Browse view: the pair's answers, the
    item kinds, and the screen's filters Browse has (dataset, split, model, round). Also
    what Browse cannot narrow to, as Markdown (data escaped); (None, [why]) when it cannot
    show the cell at all (Browse pairs raters on whole-item label-set answers, not on
    criteria or steps)."""
    if qs.kind != "labelset" or any(u.target for u in units):
        return None, ["Browse pairs raters on their label for a whole item, not on rubric "
                      "criteria or single steps, so this cell cannot be opened there."]
    gaps = []
    if report.set_aside:  # some latest answers are not of the phase compared
        gaps.append(f"it reads each rater's current answer, not the "
                    f"{describe_phase(filters.phase)}")
    if filters.category:
        gaps.append(f"it has no category filter (this screen shows {md(filters.category)} only)")
    if CANNOT_ASSESS in (a_said, b_said):
        gaps.append("it does not count 'cannot assess' as an answer")
    query = BrowseQuery(
        rater_a=a, rater_b=b, a_said=a_said, b_said=b_said,
        kinds=tuple(sorted({u.item_kind for u in units})),
        datasets=(filters.dataset,) if filters.dataset else (),
        splits=(filters.split,) if filters.split else (),
        models=(filters.model,) if filters.model else (),
        rounds=(filters.round_id,) if filters.round_id is not None else (),
    )
    return query, gaps


def _pick_cell(state: str, cell: tuple[int, int]) -> None:
    st.session_state[state] = cell


def confusion_grid(cm, state: str) -> None:
    """The confusion matrix as a grid of buttons, one per cell, A's answers down and
    B's across: a click (or Tab and Enter) lists the cell's items. Streamlit's own
    buttons: the screen loads no charting library before its numbers are readable."""
    k = len(cm.categories)
    chosen = st.session_state.get(state)
    widths = [3] + [2] * k
    head = st.columns(widths, vertical_alignment="bottom")
    head[0].caption("A ↓ · B →")
    for j, label in enumerate(cm.labels):
        head[j + 1].caption(md(label))
    for i in range(k):
        row = st.columns(widths, vertical_alignment="center")
        row[0].caption(md(cm.labels[i]))
        for j in range(k):
            n = cm.counts[i][j]
            colour = "green" if i == j else "orange"
            row[j + 1].button(
                f":{colour}[**{n}**]" if n else "·", key=f"agr_cellbtn:{state}:{i}:{j}",
                type="primary" if chosen == (i, j) else "secondary", disabled=n == 0,
                on_click=_pick_cell, args=(state, (i, j)), width="stretch",
                help=f"A: {md(cm.labels[i])} · B: {md(cm.labels[j])} · {n} units")


def confusion_section(report) -> None:
    cm = report.confusion
    if cm.n == 0:
        st.info(f"{md(report.a_label)} and {md(report.b_label)} answered no unit in common "
                "under these filters: there is nothing to compare, agreeing or not.",
                icon=":material/info:")
        return
    k = len(cm.categories)
    cells = [(i, j) for i in range(k) for j in range(k)]
    cell_label = {(i, j): f"{cm.labels[i]} → {cm.labels[j]} ({cm.counts[i][j]})"
                  for i, j in cells}
    state = f"agr_cell:{qkey}:{a}:{b}:{hash(filters)}"
    disagreeing = cm.disagreements()
    if state not in st.session_state:
        st.session_state[state] = disagreeing[0] if disagreeing else None
    left, right = st.columns([5, 4], gap="large")
    with left:
        st.subheader("Confusion matrix", anchor=False)
        st.caption(f"Rows: {md(report.a_label)}. Columns: {md(report.b_label)}. "
                   "Click a cell, or pick it on the right, to list its items.")
        confusion_grid(cm, state)
    with right:
        chosen = st.selectbox("Cell: A's answer → B's answer", cells, key=state,
                              format_func=cell_label.get, placeholder="Choose a cell")
        if chosen is None:
            st.caption("The two raters agree on every unit." if not disagreeing
                       else "Choose a cell to list its items.")
            return
        i, j = chosen
        units = cm.units[i][j]
        word = "agree" if i == j else "disagree"
        st.markdown(f"**{plural(len(units), 'item')}** where the raters {word}: "
                    f"{md(report.a_label)} said *{md(cm.labels[i])}*, "
                    f"{md(report.b_label)} said *{md(cm.labels[j])}*.")
        st.caption("Each opens in a new tab: the item and every rater's label on it, read-only.")
        if a and b and not a.startswith("group:") and not b.startswith("group:"):
            # Named raters: the same cell as a Browse view, to search, tag and export.
            query, gaps = browse_cell(cm.categories[i], cm.categories[j], units, report)
            if query is None:
                st.caption(gaps[0])
            elif not gaps:
                st.markdown(f"[Open this cell in Browse]({browse_href(query)})")
            else:
                st.markdown(f"[Open in Browse: not exactly this cell]({browse_href(query)})")
                st.caption("Browse lists the items where the two raters' answers fall in this "
                           f"cell under the other filters, but {'; '.join(gaps)}: its "
                           "list is not these items.")
        with st.container(height=380 if len(units) > 9 else "content", border=True):
            review_links(units[:200])
            if len(units) > 200:
                st.caption(f"… and {len(units) - 200} more: download the JSON report for all.")
    if report.class_scores:
        with st.expander(f"Per-label precision, recall and F1 ({md(report.a_label)} as "
                         "reference)"):
            st.dataframe([{
                "Label": qs.label(s.category), f"{report.a_label}": s.support,
                f"{report.b_label}": s.predicted, "Precision": number(s.precision),
                "Recall": number(s.recall), "F1": number(s.f1),
            } for s in report.class_scores], hide_index=True, width="stretch")


def downloads(report, by: str, forest: str) -> None:
    base = f"agreement-{qkey}".replace(":", "-").replace("*", "all")
    args = (qkey, a, b, filters, by, forest)
    cols = st.columns(4)
    cols[0].download_button("JSON", lambda: report_json(*_bundle(*args)),
                            file_name=f"{base}.json", mime="application/json",
                            icon=":material/download:", on_click="ignore", width="stretch")
    # Made when asked for (as the JSON and HTML are): not on every run of the screen.
    cols[1].download_button("CSV", lambda: report_csv(report), file_name=f"{base}.csv",
                            mime="text/csv", icon=":material/download:", on_click="ignore",
                            width="stretch")
    cols[2].download_button("HTML", lambda: report_html(*_bundle(*args)),
                            file_name=f"{base}.html", mime="text/html",
                            icon=":material/download:", on_click="ignore", width="stretch",
                            help="One file with every section and its plots; opens offline.")
    cols[3].download_button("Provenance", lambda: json.dumps(
                                {"provenance": report_provenance(report)}, indent=2,
                                ensure_ascii=False),
                            file_name=f"{base}.csv.provenance.json", mime="application/json",
                            icon=":material/download:", on_click="ignore", width="stretch",
                            help="What the CSV was computed from (its sidecar): the JSON and "
                                 "HTML carry it inside.")


def _bundle(question, rater_a, rater_b, flt, by, forest):
    # Runs on the download thread: its own connection, through the cache.
    return _call("agreement_bundle", PATH, VERSION, viewer(), question, rater_a, rater_b, flt, by=(by,),
                 forest_key=forest)


# -- Clinicians with each other ----------------------------------------------------

def clinicians_tab() -> None:
    matrix = call("pairwise_matrix", qkey, None, filters)
    if len(matrix.raters) < 2:
        st.info("Fewer than two clinicians answered this question set under these filters.")
        return
    st.subheader(f"Each pair of clinicians: {matrix.name}", anchor=False)
    st.plotly_chart(pairwise_figure(matrix), key=f"pairwise:{qkey}",
                    config={"displaylogo": False})
    try:
        group = call("agreement_report", qkey, cmp.CLINICIANS, None, filters)
    except ValueError as exc:
        st.info(md(exc))
        return
    st.subheader(f"All {len(group.raters)} clinicians together", anchor=False)
    st.caption("Multi-rater coefficients; missing ratings allowed (each unit counts with the "
               "clinicians who answered it).")
    st.dataframe(coefficient_rows(group.coefficients), hide_index=True, width="stretch",
                 column_config=WIDE_NOTE)
    st.caption("Where the analytic interval shows —, the statistic has no closed-form interval; "
               "the bootstrap interval resamples units.")
    for note in split_notes(group.coefficients)[0] + group.notes:
        st.caption(f"Note: {md(note)}")


# -- Machine raters -------------------------------------------------------------------

def machines_tab() -> None:
    m = call("mapper_vs_clinicians", qkey, filters)
    if m.explanation:
        st.info(md(m.explanation), icon=":material/info:")
        return
    st.subheader("Each machine rater against each clinician and the clinicians' majority",
                 anchor=False)
    st.caption("Prompt versions side by side. Dots: "
               f"{m.rows[0].headline.name}; bars: 95% bootstrap intervals.")
    st.plotly_chart(versions_figure(m), key=f"versions:{qkey}", config={"displaylogo": False})
    for d in m.differences:
        text = (f"**{md(d.candidate)}** vs **{md(d.baseline)}**, against "
                f"{md(d.reference_label.lower())}: {d.name} {number(d.candidate_value)} vs "
                f"{number(d.baseline_value)}; difference "
                f"{'—' if d.difference is None else f'{d.difference:+.2f}'} "
                f"(95% CI {interval(d.ci_low, d.ci_high)}, {d.n} units): {md(d.verdict)}.")
        (st.success if d.verdict.startswith("closer") else st.info)(text)
    st.dataframe([{
        "Machine": r.machine, "Against": r.reference_label, r.headline.name:
        number(r.headline.value), "95% CI": interval(r.headline.ci_low, r.headline.ci_high),
        "n": r.headline.n, "Percent agreement": number(r.percent.value),
        "Note": "" if r.headline.value is not None else
        f"undefined: {r.headline.undefined_reason}",
    } for r in m.rows], hide_index=True, width="stretch")
    for note in m.notes:
        st.caption(f"Note: {md(note)}")
    if qs.kind == "criterion":
        st.subheader("Criterion by criterion", anchor=False)
        judge = st.columns([2, 3])[0].selectbox("Judge", m.machines, key=f"agr_judge:{qkey}")
        bd = call("judge_vs_clinicians_per_criterion", judge, qkey, filters)
        st.plotly_chart(forest_figure(bd, f"{judge} vs clinicians' majority"),
                        key=f"judge:{qkey}:{judge}", config={"displaylogo": False})


# -- Triage and the leaderboard ---------------------------------------------------------

def study_triage(book) -> None:
    """A study's own ordered scale with a risk order: each machine reader against the
    clinicians' majority (or rater B), per model (`labels.compare.study_triage`)."""
    # The machine on screen (rater B, else A) read against the other rater on screen (the
    # clinicians' majority unless another is chosen); with no machine there, every machine.
    kinds = {c.spec: c.kind for c in choices}
    machine = next((r for r in (b, a) if r and kinds.get(r) == "machine"), None)
    other = next((r for r in (a, b) if r and r != machine and kinds.get(r) != "machine"), None)
    reference = other or MAJORITY
    try:
        t = call("question_triage", qkey, [machine] if machine else None, reference, filters)
    except ValueError as exc:
        st.info(md(exc), icon=":material/info:")
        return
    st.subheader("Does a reader miss what calls for action?", anchor=False)
    st.caption(f"{'The machine reader' if machine else 'Each machine reader'} of this "
               "question scored against "
               f"{md(display_name(reference))} on the same items, per model: from "
               f"**{md(book.label(t.risk['action_from']).short)}** up an answer calls for "
               f"action, **{md(book.label(t.risk['urgent']).short)}** is urgent (the codebook's "
               "risk order). After each value, its 95% interval and its count.")
    for reader in t.readers:
        st.markdown(f"**{md(display_name(reader.reader))}**")
        rows = []
        for key in METRIC_KEYS:
            first = next(iter(reader.by_model.values()))[key]
            row_ = {"Metric": first.name}
            for model, metrics in reader.by_model.items():
                x = metrics[key]
                row_[model] = ("—" if x.value is None else f"{x.value:.2f} "
                               f"({number(x.ci_low)}–{number(x.ci_high)})"
                               + (f" · {x.count}/{x.n}" if x.count is not None else f" · n {x.n}"))
            rows.append(row_)
        st.dataframe(rows, hide_index=True, width="stretch")
    for note in t.notes:
        st.caption(f"Note: {md(note)}")


def triage_tab() -> None:
    if qs.codebook != CAREBENCH:
        book = codebook_for(db, qs.codebook) if qs.kind == "labelset" else None
        if book is not None and book.risk is not None:
            study_triage(book)
            return
        st.info("Triage metrics apply to an ordered scale that marks what calls for action: "
                "the CARE-Bench escalation labels, or a study's own codebook with a risk order "
                "([risk] in its file). Choose such a question set.")
        return
    common = st.toggle("Common set only", key="agr_triage_common",
                       help="Score only the responses every reading labelled and every "
                            "reference covers, so that a change of ranking comes from the "
                            "labels alone. Off: each model is scored on everything its reading "
                            "covers, with coverage beside.")
    t = call("triage_comparison", filters, common=common)
    if t.explanation:
        st.info(md(t.explanation), icon=":material/info:")
        return
    base = t.labellings[0]
    st.subheader("Would the mapper have changed the leaderboard?", anchor=False)
    st.caption(f"Baseline: responses {md(base.name)}. Models ranked by macro-F1 "
               + (f"({base.n_responses} responses, the same ones under every labelling)."
                  if t.common else f"({base.n_responses} responses scored: each labelling "
                  "scores what its reading covers; see each model's coverage)."))
    for c in t.correlations:
        if not c.same_reference:
            continue
        moves = ", ".join(f"{md(s.model)} {_ordinal(s.before)} → {_ordinal(s.after)}"
                          for s in c.shifts if s.before != s.after)
        corr = c.correlation
        detail = (f"Spearman rho {number(corr.spearman_rho)}, Kendall tau-b "
                  f"{number(corr.kendall_tau)}" if corr.undefined_reason is None
                  else md(corr.undefined_reason))
        if c.same_order:
            st.success(f"Responses {md(c.other)}: **the same leaderboard** ({detail}).",
                       icon=":material/check_circle:")
        else:
            noise = (" Every swapped pair's 95% intervals overlap under both labellings: these "
                     "responses do not settle their order either way."
                     if c.swaps_within_noise else "")
            st.warning(f"Responses {md(c.other)}: **a different leaderboard** — {moves} "
                       f"({detail}).{noise}", icon=":material/swap_vert:")
    st.dataframe(_rank_table(t), hide_index=True, width="stretch")
    leaderboard_caption(t.ppi)
    st.caption("Rank (1 = best) and macro-F1 of each model under each labelling (who read the "
               "responses · which reference label they were scored against), with its 95% "
               "bootstrap interval: models whose intervals overlap widely are not told apart by "
               "these responses, whatever their ranks.")
    # The table first, as on Compare: the plot loads a charting library (4.7 MB) that took
    # longer to load than the rest of the tab.
    if st.toggle("Show the ranks as a plot", key="agr_triage_plot",
                 help="Each model's macro-F1 under each labelling, with its 95% interval"):
        st.plotly_chart(ranking_figure(t), key="ranking", config={"displaylogo": False})
    if t.mapper_triage:
        st.subheader("Each mapper version against the clinicians' reading", anchor=False)
        st.dataframe([{
            "Mapper": mapper,
            **{m[k].name: share_text(m[k].value, m[k].count, m[k].n)
               + ("" if m[k].ci_low is None else f" · {m[k].ci_low:.0%}–{m[k].ci_high:.0%}")
               for k in METRIC_KEYS if k != "macro_f1"},
            "Macro-F1": with_ci(m["macro_f1"].value, m["macro_f1"].ci_low, m["macro_f1"].ci_high),
        } for mapper, m in t.mapper_triage.items()], hide_index=True, width="stretch")
        st.caption("The clinicians' majority reading of each response taken as the truth. "
                   "Over-triage: the mapper read a response as more escalating than the "
                   "clinicians did; under-triage: less. After each value, its 95% interval: "
                   "the bootstrap over cases where a case has several responses, else "
                   "Wilson's for a share.")
    for x in t.labellings:
        with st.expander(f"Triage metrics, responses {md(x.name)}"):
            rank = {r.model: r.rank for r in x.ranking}
            st.dataframe([{
                "Model": model, "Rank": "—" if rank.get(model) is None else f"{rank[model]:g}",
                **{ms[k].name: with_ci(ms[k].value, ms[k].ci_low, ms[k].ci_high) for k in METRIC_KEYS},
                "Coverage": share_text(ms["coverage"].value)
                + (f" · {x.coverage[model].words()}" if model in x.coverage else ""),
                "From": x.sources.get(model, ""),
            } for model, ms in x.metrics.items()], hide_index=True, width="stretch")
            for model, wrong in x.missing_as_wrong.items():
                st.caption(f"{md(model)}, its missing predictions counted against it (the "
                           "CARE-Bench scorer's rule is not published): " + ", ".join(
                               f"{v.name} {number(v.value)}" for v in wrong.values()))
            if x.paired and x.paired.pairs:
                st.markdown("**Paired comparisons** (on the prefixes both models were "
                            "scored on; the same cases resampled for both)")
                st.dataframe([{
                    "Model A": d.a, "Model B": d.b,
                    f"{METRIC_NAMES.get(d.key, d.key)} A − B": "—" if d.difference is None
                    else f"{d.difference:+.2f}",
                    "95% CI": interval(d.ci_low, d.ci_high), "Verdict": d.verdict,
                    "Both scored on": f"{d.n_units} prefixes, {d.n_cases} cases",
                    "Accuracy, McNemar p": "—" if d.mcnemar_p is None else f"{d.mcnemar_p:.3f}",
                } for d in x.paired.pairs], hide_index=True, width="stretch")
                st.caption("Each model's chance of holding its rank over the resamples: "
                           + ", ".join(f"{md(m)} {share_text(v)}"
                                       for m, v in x.paired.rank_probability.items()))
    for note in t.notes:
        st.caption(f"Note: {md(note)}")


def _ordinal(rank: float | None) -> str:
    if rank is None:
        return "unranked"
    if rank != int(rank):
        return f"tied {rank:g}"
    n = int(rank)
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _rank_table(t) -> list[dict]:
    rows = []
    ppi = leaderboard_cells(t.ppi)
    for model in t.models:
        row = {"Model": model}
        for x in t.labellings:
            r = next((r for r in x.ranking if r.model == model), None)
            row[x.short] = ("—" if r is None or r.rank is None
                            else f"{_ordinal(r.rank)} · {with_ci(r.value, r.ci_low, r.ci_high)}")
        row.update(ppi.get(model, {}))
        rows.append(row)
    return rows


# -- Anchoring ---------------------------------------------------------------------------

def anchoring_tab() -> None:
    first = call("anchoring", qkey, filters)
    if first.explanation and not first.machines:
        st.info(md(first.explanation), icon=":material/info:")
        return
    machine = st.columns([2, 3])[0].selectbox("Revealed label of", first.machines,
                                              key=f"agr_anch:{qkey}")
    r = call("anchoring", qkey, filters, machine)
    if r.explanation:
        st.info(md(r.explanation), icon=":material/info:")
        return
    st.caption("A revision: a clinician answered blind, then answered again after the machine "
               "and reference labels were shown. Each change is classed against the chosen "
               "machine rater's label as that clinician was shown it (recorded with each "
               "reveal), so a model run later does not change the result. "
               + (f"Shown on {r.shown.get(machine, 0)} of the revisions."
                  if r.shown else "No reveal was recorded on these items: the machine's "
                  "label now stands in (see the note below)."))
    overall = r.rows[-1]
    cols = st.columns(3)
    cols[0].metric("Blind answers revised after the reveal",
                   share_text(overall.revisited.value), border=True)
    cols[0].caption(f"{overall.revisited.count} of {overall.revisited.n}")
    cols[1].metric("Of the changes, toward the machine label", share_text(overall.toward.value),
                   border=True)
    cols[1].caption(f"{overall.toward.count} of {overall.toward.n} changed answers")
    cols[2].metric("Agreeing with the machine: before → after",
                   f"{share_text(overall.agree_before.value)} → "
                   f"{share_text(overall.agree_after.value)}", border=True)
    cols[2].caption("among the revised answers")
    st.plotly_chart(anchoring_figure(r), key=f"anchoring:{qkey}:{machine}",
                    config={"displaylogo": False})
    st.dataframe([{
        "Clinician": row.rater, "Blind answers": row.blind_answers,
        "Revised after the reveal": share_text(row.revisited.value, row.revisited.count,
                                               row.revisited.n),
        "Changed": share_text(row.changed.value, row.changed.count, row.changed.n),
        "Toward the machine": share_text(row.toward.value, row.toward.count, row.toward.n),
        "Away from it": share_text(row.away.value, row.away.count, row.away.n),
        "Agreed before → after": f"{share_text(row.agree_before.value)} → "
                                 f"{share_text(row.agree_after.value)}",
    } for row in r.rows], hide_index=True, width="stretch")
    with st.expander(f"The {len(r.revisions)} revised answers"):
        st.dataframe([{
            "Item": v.item_uid, "Clinician": v.rater, "Blind": qs.label(v.blind),
            "After reveal": qs.label(v.after), "Machine": qs.label(v.machine),
            "Moved": v.direction,
        } for v in r.revisions], hide_index=True, width="stretch")
    for note in r.notes:
        st.caption(f"Note: {md(note)}")


# -- HealthBench meta-evaluation ---------------------------------------------------------

def meta_tab() -> None:
    # HealthBench's meta-evaluation is about graded conversations' criteria: an agent
    # run's gates and must-ask topics are not (the default picks the conversations).
    question = qkey if qs.kind == "criterion" and qs.item_kinds == ("graded_conversation",) else None
    m = call("meta_eval", None, question, filters)
    if m.explanation:
        st.info(md(m.explanation), icon=":material/info:")
        st.caption("The metric: the grader compared pairwise with each physician's met / not "
                   "met label, macro-F1 over the two classes, beside the physicians' own "
                   "leave-one-out agreement (the human ceiling), overall and per category.")
        return
    grader = st.columns([2, 3])[0].selectbox("Grader", m.graders, key="agr_grader")
    if grader != m.grader:
        m = call("meta_eval", grader, m.question_set.key, filters)
    g, p = m.overall.grader, m.overall.physicians
    cols = st.columns(3)
    cols[0].metric(f"{md(grader)} vs physicians", number(g.macro_f1), border=True,
                   help=g.undefined_reason and md(g.undefined_reason))
    cols[0].caption(f"95% CI {interval(g.ci_low, g.ci_high)} · {g.n_pairs} label pairs")
    cols[1].metric("Physicians vs each other", number(p.macro_f1), border=True,
                   help=p.undefined_reason and md(p.undefined_reason))
    cols[1].caption(f"95% CI {interval(p.ci_low, p.ci_high)} · {p.n_pairs} label pairs")
    cols[2].metric("Criterion rows", m.n_rows, border=True)
    for note in dict.fromkeys(x for x in (g.note, p.note) if x):
        st.caption(f"Note: {md(note)}")
    st.caption("HealthBench's metric: the grader compared pairwise with each physician's "
               "label, macro-F1 over met / not met; beside it the human ceiling, each physician "
               "against the others (leave-one-out; every pair counted both ways, hence twice the "
               "label pairs). A grader can score above it: it is then closer to each physician "
               "than the physicians are to one another, often by following their majority.")
    by = st.segmented_control("Per", list(m.by), format_func=lambda x: BY_WORDS.get(x, x),
                              default=next(iter(m.by)), key="agr_meta_by")
    if by:
        st.plotly_chart(meta_forest_figure(m, by), key=f"meta:{by}",
                        config={"displaylogo": False})
    with st.expander(f"Each of the {len(m.physicians)} physicians against the others"):
        st.dataframe([{
            "Physician": pid, "Macro-F1": number(sc.macro_f1),
            "95% CI": interval(sc.ci_low, sc.ci_high), "Label pairs": sc.n_pairs,
            "Note": sc.undefined_reason or sc.note or "",
        } for pid, sc in m.physicians.items()], hide_index=True, width="stretch")


def scores_tab() -> None:
    healthbench_scores_section(db, dataset=dataset, split=split, phase=phase)


SECTIONS = [compare_tab, clinicians_tab, machines_tab, triage_tab, anchoring_tab, meta_tab,
            scores_tab, lambda: agreement_panel(db, qs, filters, choices, a, b)]
for index, section in enumerate(SECTIONS):
    if is_open(index):
        with tabs[index]:
            section()
