"""Few clinicians, valid numbers: the Agreement screen's PPI panel and the Rounds
screen's sampling design and label budget.

Layout and widgets only: the estimates come from ``labels.ppi.report``, the plan
from ``labels.ppi.budget``, the designs from ``review.team.designs``. Each is called
with one line from its screen (``pages/agreement.py``, ``pages/rounds.py``).
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from labels import compare as cmp
from labels.compare.leaderboard import PPIColumn
from labels.compare.questions import QuestionSet, carebench_questions, codebook_for
from labels.compare.raters import ADJUDICATED, MAJORITY, display_name
from labels.compare.text import with_ci
from labels.ppi.budget import label_plan
from labels.ppi.readings import (
    CRITERIA_METRICS,
    LABEL_METRICS,
    METRICS,
    PHASES,
    SHARE_KEYS,
    default_machine,
)
from labels.ppi.report import EDGE_NOTE, MACHINE_ONLY_NOTE, METHOD, past_the_edge, ppi_report
from labels.ppi.sampling import MODES
from review.team.active import plan_designs
from review.team.designs import WEIGHT_BY, WEIGHT_WORDS
from review.text import safe_markdown
from review.workspace import default_db_path, open_store

SAMPLING_WORDS = {
    "auto": "from designed rounds where there are any, else assumed a uniform sample",
    "assume-uniform": "a uniform random sample (assumed)",
    "design": "from designed rounds only",
}
DESIGN_CHOICES = {"uniform": "Uniform: every item the same chance (within strata)",
                  **{f"weighted:{w}": f"Weighted toward items where {WEIGHT_WORDS[w]}"
                     for w in WEIGHT_BY},
                  "active": "Active: the next items where a clinician's label tells most "
                            "(drawn a batch at a time, learning as answers come in)"}


def md(value: object) -> str:
    return safe_markdown(str(value))


def _estimate(e) -> str:
    return "—" if e.value is None else with_ci(e.value, e.ci_low, e.ci_high, digits=3)


@st.cache_data(max_entries=32, show_spinner=False)
def _ppi(path: str, version: tuple, metric, human, machine, filters, phase, sampling, question):
    with open_store(path) as s:
        return ppi_report(s, metric, human, machine, filters, phase=phase, sampling=sampling,
                          question=question)


@st.cache_data(max_entries=16, show_spinner=False)
def _plan(path: str, version: tuple, metric, human, target, question):
    with open_store(path) as s:
        machine = default_machine(s, metric, question)
        plan = label_plan(s, metric, human, machine, target, question=question,
                          designs_for=lambda key, ids: plan_designs(s, key, ids))
        return machine, plan


def label_metrics(db, codebook_key: str) -> list[str]:
    """The means PPI can estimate on a study's own label question: its mean score, and
    where its codebook marks a risk order, the shares calling for action and urgent."""
    book = codebook_for(db, codebook_key)
    return [m for m in LABEL_METRICS if m == "mean_score" or book.risk is not None]


def metrics_for(db, qs: QuestionSet) -> list[str]:
    """The means PPI can estimate on a question set: the triage shares on the CARE-Bench
    response question, the met and pass rates on rubric criteria, a study's own label
    question's mean score and risk shares (CARE-Bench's prefix question has no machine
    reading of its own)."""
    if qs.key == carebench_questions()[1]:
        return list(SHARE_KEYS)
    if qs.kind == "criterion":
        return list(CRITERIA_METRICS)
    if qs.key == carebench_questions()[0]:
        return []
    return label_metrics(db, qs.codebook)


def agreement_panel(db, qs: QuestionSet, filters, choices, rater_a: str | None,
                    rater_b: str | None) -> None:
    """The Agreement screen's PPI tab: each model's metric from the machine's labels on
    every item corrected by the clinicians', beside each alone."""
    metrics = metrics_for(db, qs)
    if not metrics:
        st.info("Prediction-powered estimates are for a metric that is a mean over items a "
                "machine has read: choose the CARE-Bench responses question, a criteria set, "
                "or a study's own question.", icon=":material/info:")
        return
    humans = [c.spec for c in choices
              if c.kind == "human" or c.spec in (MAJORITY, ADJUDICATED)]
    machines = [c.spec for c in choices if c.kind == "machine"]
    if not humans or not machines:
        st.info("PPI needs a machine rater that read the items and clinicians who read some of "
                "them; here " + ("no machine rater answered." if not machines else
                                 "no clinician answered."), icon=":material/info:")
        return
    row = st.columns([2, 2, 2, 3], vertical_alignment="bottom")
    metric = row[0].selectbox("Metric", metrics, format_func=METRICS.get,
                              key=f"ppi_metric:{qs.key}")
    human = row[1].selectbox("Clinicians", humans, key=f"ppi_human:{qs.key}",
                             index=humans.index(rater_a) if rater_a in humans else
                             humans.index(MAJORITY) if MAJORITY in humans else 0,
                             format_func=display_name)
    machine = row[2].selectbox("Machine", machines, key=f"ppi_machine:{qs.key}",
                               index=machines.index(rater_b) if rater_b in machines else 0)
    sampling = row[3].selectbox("The clinicians' labels are", MODES, key="ppi_sampling",
                                format_func=SAMPLING_WORDS.get)
    latest = st.toggle("Use each clinician's latest answer (some were given after seeing a "
                       "machine label)", key="ppi_latest")
    phase = "current" if latest else "blind"
    question = qs.key if qs.kind == "criterion" or metric in LABEL_METRICS else None
    try:
        report = _ppi(default_db_path(), cmp.data_version(db), metric, human, machine,
                      replace(filters, phase=None, include_cannot_assess=False), phase,
                      sampling, question)
    except ValueError as exc:
        st.info(md(exc), icon=":material/info:")
        return
    for warning in report.warnings:
        st.warning(md(warning), icon=":material/warning:")
    if not report.estimates:
        st.info("No item under these filters has the machine's reading.", icon=":material/info:")
    else:
        st.dataframe([{
            "Model": e.model,
            "PPI (95% CI)": _estimate(e.ppi),
            "Clinicians only": _estimate(e.classical),
            "Machine only": _estimate(e.machine_only),
            "Labelled": e.n_labeled,
            "Machine only items": e.n_unlabeled,
            "λ": "—" if e.ppi.lam is None else f"{e.ppi.lam:.2f}",
            "Sampling": e.sampling.label,
        } for e in report.estimates], hide_index=True, width="stretch")
    st.caption(f"{md(METRICS[metric])} per model. Clinicians' answers: {md(PHASES[phase])}. "
               f"{md(METHOD)} λ: how much the machine's labels count (0: not at all, 1: fully). "
               f"Machine only: {md(MACHINE_ONLY_NOTE)}.")
    for e in report.estimates:
        st.caption(f"{md(e.model)}: {md(e.population_words)}; {md(e.design_words)}; "
                   f"corrected: {md(e.prediction)}.")
    notes = [n for e in report.estimates for n in (e.ppi.note, *e.sampling.notes) if n]
    if any(past_the_edge(e.ppi, e.classical, e.machine_only) for e in report.estimates):
        notes.append(EDGE_NOTE)
    notes += [n for n in report.notes if n != MACHINE_ONLY_NOTE]
    for note in dict.fromkeys(notes):
        st.caption(f"Note: {md(note)}")


def leaderboard_cells(column: PPIColumn | None) -> dict[str, dict[str, str]]:
    """The leaderboard's PPI column, per model: {header: cell}."""
    if column is None or not column.cells:
        return {}
    header = f"PPI {METRICS.get(column.metric, column.metric).lower()}"
    return {model: {header: f"{_estimate(c)} · {c.n_labeled} labelled"
                    + (" · assumed uniform" if c.sampling == "assumed uniform" else "")}
            for model, c in column.cells.items()}


def leaderboard_caption(column: PPIColumn | None) -> None:
    """What the leaderboard's PPI column is, under the table."""
    if column is None:
        return
    if column.explanation:
        st.caption(f"PPI column: none ({md(column.explanation)})")
        return
    st.caption(f"PPI: each model's {md(METRICS.get(column.metric, column.metric).lower())} from "
               f"{md(column.machine)}'s reading of every response, corrected by the clinicians' "
               "majority (blind answers), with its 95% interval (the Agreement screen's Few "
               "clinicians tab, `carelens ppi`)."
               + (" The clinicians' labels were not drawn by a recorded design: assumed a "
                  "uniform random sample." if any(c.sampling == "assumed uniform"
                                                  for c in column.cells.values()) else ""))


@st.cache_data(max_entries=16, show_spinner=False)
def _round_status(path: str, version: tuple, round_name: str, metric: str, machine: str | None,
                  question: str | None):
    with open_store(path) as s:
        machine = machine or default_machine(s, metric, question)
        report = ppi_report(s, metric, MAJORITY, machine, round_name=round_name,
                            question=question)
        return machine, [(e.model, e.anytime.words() if e.anytime else "", e.anytime.enough
                          if e.anytime else False, _estimate(e.ppi)) for e in report.estimates]


def round_status(db, round_name: str, question_key: str, design: dict | None) -> None:
    """Inside a round's details: is it enough? The interval valid whenever the lead looks,
    per model, from the clinicians' majority (blind answers) against the machine."""
    if not design or design.get("kind") not in ("active", "uniform") or (
            design.get("kind") == "uniform" and design.get("stratify_by", "none") != "none"):
        return
    rubric = question_key.startswith("criteria@")
    if question_key != carebench_questions()[1] and not rubric:
        return
    metric = "met_rate" if rubric else "accuracy"
    try:
        machine, rows = _round_status(default_db_path(), cmp.data_version(db), round_name, metric,
                                      design.get("machine"), None)
    except ValueError as exc:
        st.caption(f"Is it enough? {md(exc)}")
        return
    if not rows:
        st.caption("Is it enough? No answer of this round yet.")
        return
    for model, words, enough, estimate in rows:
        text = f"**{md(model)}** · {md(METRICS[metric])} {estimate} · {md(words)}"
        if enough:
            st.success(text, icon=":material/flag:")
        else:
            st.caption(text)
    st.caption(f"From the clinicians' majority (blind answers) against {md(machine)}, in the "
               "order the round drew its items; valid however often you look (a confidence "
               "sequence). `carelens ppi --anytime --in-round` gives the same.")


def round_design(db, question_key: str | None) -> dict:
    """Inside *Create a round*: how the round draws its items, and the label budget that
    says how many it needs. Returns the round's design fields (``RoundSpec``)."""
    choice = st.radio("How the round draws its items", list(DESIGN_CHOICES),
                      format_func=DESIGN_CHOICES.get, key="round_design",
                      help="Every item's chance of being drawn is recorded with the round, so "
                           "estimates from its answers can weight each by 1/chance. A weighted "
                           "round needs a number of items, and no strata.")
    with st.expander("Label budget: how many items does the round need?",
                     icon=":material/calculate:"):
        _budget(db, question_key)
    if choice == "uniform":
        return {"design": "uniform"}
    if choice == "active":
        target = st.number_input(
            "Half-width you aim for (95%)", 0.005, 0.5, 0.05, step=0.005, format="%.3f",
            key="round_target", help="The round's screen says when the interval, valid "
                                     "whenever you look, is this narrow: you may stop then.")
        st.caption("An active round needs a number of items (its most) and no strata: its "
                   "first items are where the machine is unsure or the machines disagree, the "
                   "next where the clinicians' answers so far show it errs.")
        return {"design": "active", "target_halfwidth": float(target)}
    return {"design": "weighted", "weight_by": choice.split(":", 1)[1]}


def _budget(db, question_key: str | None) -> None:
    prefix_q, response_q = carebench_questions()
    rubric = bool(question_key) and question_key.startswith("criteria@")
    codebook = db.scalar("SELECT codebook FROM questions WHERE key = ? AND kind = 'labelset'",
                         (question_key,)) if question_key and not rubric else None
    study = codebook is not None and question_key not in (prefix_q, response_q)
    if question_key != response_q and not rubric and not study:
        st.caption("The budget plans rounds whose items a machine has read: the CARE-Bench "
                   "responses, the criteria of agent runs and graded conversations, or a "
                   "study's own question.")
        return
    metrics = (list(CRITERIA_METRICS) if rubric else label_metrics(db, codebook) if study
               else list(SHARE_KEYS))
    row = st.columns(3, vertical_alignment="bottom")
    metric = row[0].selectbox("Metric", metrics, format_func=METRICS.get, key="budget_metric")
    target = row[1].number_input("Target 95% half-width", 0.01, 0.5, 0.05, step=0.01,
                                 key="budget_target")
    human = row[2].selectbox("Clinicians", [MAJORITY, ADJUDICATED], key="budget_human",
                             format_func={MAJORITY: "Clinicians' majority",
                                          ADJUDICATED: "Adjudicated"}.get)
    if not st.button("Plan", key="budget_plan", icon=":material/calculate:"):
        st.caption("Simulated from the labels so far (a pilot): press Plan.")
        return
    try:
        with st.spinner("Simulating rounds from the labels so far…"):
            machine, plan = _plan(default_db_path(), cmp.data_version(db), metric, human,
                                  float(target), question_key if study else None)
    except ValueError as exc:
        st.info(md(exc), icon=":material/info:")
        return
    parts = [*plan.models, *([plan.kappa] if plan.kappa else [])]
    names = {need.design: need.name for part in parts for need in part.needs}
    rows = []
    for part in parts:
        row_ = {"": part.model, "Labelled so far": f"{part.n_labeled} of {part.n_items}"}
        for need in part.needs:
            row_[names[need.design]] = ("not reachable" if need.labels_needed is None
                                        else f"{need.labels_needed} ({need.more} more)"
                                        + ("" if need.typical is None else
                                           f"; typical {need.typical}"))
        if part.reason:
            row_["Note"] = part.reason
        rows.append(row_)
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(f"Labels each design needs for a 95% half-width of at most {target:g}: each "
               f"model's PPI interval of {md(METRICS[metric].lower())} ({md(machine)} corrected "
               "by the clinicians), and the judge-vs-clinician kappa. Each figure suffices for "
               "90% of pilots like the labels so far (the pilot resampled); 'typical' is the "
               "median one; 'stopping by the anytime interval': the lead stops as soon as the "
               f"interval valid at every look is narrow enough. Method: {md(plan.method)}.")
    for note in plan.notes:
        st.caption(f"Note: {md(note)}")
