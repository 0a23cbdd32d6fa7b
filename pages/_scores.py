"""HealthBench scores as simple-evals computes them, for every rater that graded: one
section the Graded conversations and Agreement screens both show.

Layout only: the numbers come from ``labels.healthbench_score`` (cached on the
database's data version); names and tags are shown as data, never as Markdown.
"""

from __future__ import annotations

import json

import streamlit as st

from labels.compare import data_version
from labels.healthbench_score import (
    METHOD,
    describe,
    healthbench_scores,
    scores_dict,
    scores_provenance,
)
from pages._shared import labels_gate, viewer
from review.reviewing.names import plural
from review.team.access import Viewer, open_for
from review.text import safe_markdown


@st.cache_data(max_entries=16, show_spinner=False)
def _scores(path: str, version: tuple, reader: Viewer | None, dataset: str | None,
            split: str | None, phase: str | None):
    """Cached on the data version and on what the reader may read
    (``review.team.access``: one reader's figures never another's)."""
    with open_for(path, reader) as s:
        report = healthbench_scores(s, dataset=dataset, split=split, phase=phase)
        return report, scores_provenance(report)


def _number(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def healthbench_scores_section(db, *, dataset: str | None = None, split: str | None = None,
                               phase: str | None = None, key: str = "hb_scores",
                               ask: str | None = None) -> None:
    """The section: each rater's overall score on each run (a grader of two models' runs
    has a row for each, `labels.healthbench_score`) with its interval, std and n, what was
    left out, per-tag scores, and the JSON with its provenance. ``ask``: on a review
    screen (its name), the scores show every rater's verdicts, so they appear only when
    the reviewer asks, behind the labels gate (``pages._shared.labels_gate``)."""
    if ask is not None:
        if not st.toggle("Show every rater's HealthBench scores", key=f"{key}_ask",
                         help="The grader's, each physician's and each clinician's score on "
                              "all graded conversations: they show the judges' verdicts, so "
                              "a reviewer with conversations still to grade blind is asked "
                              "first."):
            return
        if not labels_gate(ask, stop=False):
            return
    report, provenance = _scores(db.path, data_version(db), viewer(), dataset, split, phase)
    st.subheader("HealthBench scores, as simple-evals computes them", anchor=False)
    if report.explanation:
        st.info(safe_markdown(report.explanation), icon=":material/info:")
        return
    st.caption(f"Verdicts used: {safe_markdown(describe(report))}. "
               + safe_markdown(METHOD.format(n_boot=report.n_boot, seed=report.seed)) + ".")
    st.dataframe([{
        "Rater": r.rater, "Run": r.run, "Kind": r.kind, "Score": _number(r.overall.value),
        "95% CI": "—" if r.overall.ci_low is None
        else f"{r.overall.ci_low:.3f} to {r.overall.ci_high:.3f}",
        "Std (bootstrap)": _number(r.overall.std), "Examples": r.overall.n,
        "Raw mean": _number(r.overall.raw_mean),
        "Left out (not graded on every criterion)": len(r.incomplete),
        "Interval warning": "; ".join(r.overall.warnings),
    } for r in report.raters], hide_index=True, width="stretch",
        column_config={"Interval warning": st.column_config.TextColumn(width="large")})
    for note in report.notes:
        st.caption(f"Note: {safe_markdown(note)}")
    tags = sorted({t for r in report.raters for t in r.by_tag})
    if tags:
        with st.expander(f"By tag ({plural(len(tags), 'tag')})"):
            st.dataframe([{"Tag": tag, **{f"{r.rater} · {r.run}": (
                f"{_number(s.value)} (n = {s.n})" if (s := r.by_tag.get(tag)) else "")
                for r in report.raters}} for tag in tags],
                         hide_index=True, width="stretch")
    left_out = [(f"{r.rater} · {r.run}", i) for r in report.raters for i in r.incomplete]
    if left_out:
        with st.expander(f"Examples left out of a rater's score ({len(left_out)})"):
            st.dataframe([{"Rater": who, "Prompt": i.prompt_id,
                           "Completion": i.completion_id or "ideal",
                           "Criteria graded": f"{i.graded} of {i.criteria}"}
                          for who, i in left_out[:500]], hide_index=True, width="stretch")
    st.download_button("JSON", json.dumps(scores_dict(report, provenance), indent=2,
                                          ensure_ascii=False, allow_nan=False),
                       file_name="healthbench-scores.json", mime="application/json",
                       icon=":material/download:", on_click="ignore", key=f"{key}_json")
