"""Exporting an agreement report: JSON for scripts, CSV for spreadsheets, and one
self-contained HTML file with the plots, to send to a colleague.

The HTML file fetches nothing: plotly.js is inlined once, no CDN, no font or
image from elsewhere, and a Content-Security-Policy forbids any request, so it
opens the same offline. Every piece of data text (rater names, categories,
criteria, item ids, notes) is escaped with ``html.escape``; figures escape
theirs in ``labels.compare.figures``.

Besides the comparison itself, ``extras`` may carry the other views of the
Agreement screen (machine versions against clinicians, triage and the
leaderboard, anchoring, HealthBench meta-evaluation, the clinicians' pairwise
matrix); each is exported where present.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from labels.agreement import Coefficient
from labels.compare.anchoring import DIRECTION_WORDS, DIRECTIONS, AnchoringReport
from labels.compare.figures import (
    anchoring_figure,
    confusion_figure,
    forest_figure,
    meta_forest_figure,
    pairwise_figure,
    ranking_figure,
    versions_figure,
)
from labels.compare.leaderboard import TriageReport
from labels.compare.machines import MachineReport
from labels.compare.meta_eval import MetaEvalReport
from labels.compare.pairs import ComparisonReport, PairwiseMatrix
from labels.compare.questions import QuestionSet
from labels.compare.stats import public_name
from labels.compare.text import (
    explain,
    interval,
    number,
    paired_lines,
    share_text,
    split_notes,
    with_ci,
)
from labels.provenance import Digest, provenance
from store.spreadsheet import safe_cell

Extra = MachineReport | TriageReport | AnchoringReport | MetaEvalReport | PairwiseMatrix
SECTION_NAMES = {
    MachineReport: "machine_vs_clinicians",
    TriageReport: "triage",
    AnchoringReport: "anchoring",
    MetaEvalReport: "healthbench_meta_eval",
    PairwiseMatrix: "clinicians_pairwise",
}

# -- plain data ----------------------------------------------------------------


def coefficient_dict(c: Coefficient) -> dict[str, Any]:
    """One coefficient in the ``carelens agreement --json`` shape: value null and the
    reason in ``note`` where undefined."""
    return {
        "name": public_name(c.key),
        "title": c.name,
        "value": c.value,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "analytic_ci_low": c.analytic_ci[0] if c.analytic_ci else None,
        "analytic_ci_high": c.analytic_ci[1] if c.analytic_ci else None,
        "n": c.n,
        "note": c.undefined_reason if c.value is None else c.note,
        "interval": _shown(c),
        "resampled": c.resampled,
        "clusters": c.clusters,
        "resamples_dropped": c.resamples_dropped,
        "warnings": list(c.warnings),
    }


def _shown(c: Coefficient) -> dict[str, Any]:
    low, high, how = c.shown_interval()
    return {"low": low, "high": high, "method": how}


def _question_set(qs: QuestionSet | None) -> dict[str, Any] | None:
    if qs is None:
        return None
    return {"key": qs.key, "title": qs.title, "codebook": qs.codebook, "level": qs.level,
            "categories": list(qs.categories), "labels": list(qs.labels)}


def plain(obj: Any) -> Any:
    """Dataclasses, dicts and lists as JSON-ready data (coefficients in the public shape,
    question sets without their SQL; the data a report rests on is said once, in its
    provenance)."""
    if isinstance(obj, Coefficient):
        return coefficient_dict(obj)
    if isinstance(obj, QuestionSet):
        return _question_set(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not isinstance(getattr(obj, f.name), Digest)}
    if isinstance(obj, dict):
        return {("" if k is None else str(k)): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(x) for x in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError("a non-finite number reached the export; undefined values must be None")
    return obj


def report_provenance(report: ComparisonReport | TriageReport, extras: Sequence[Extra] = (),
                      **extra: Any) -> dict[str, Any]:
    """The provenance of a report and its extra sections: the digest of every answer they
    were computed from, the phase, the filters and the bootstrap's resamples and seed."""
    digest = Digest()
    for part in (report, *extras):
        if isinstance(getattr(part, "data", None), Digest):
            digest.update(part.data)
    return provenance(digest, database_file=report.database_file, phase=report.filters.phase,
                      filters=report.filters,
                      bootstrap={"resamples": report.n_boot, "seed": report.seed,
                                 "resampled": getattr(report, "resampled", "cases")}, **extra)


def report_dict(report: ComparisonReport, extras: Sequence[Extra] = ()) -> dict[str, Any]:
    """The report as one JSON object. Top level as ``carelens agreement --json``
    promises: ``n_items`` and ``coefficients`` [{name, value, ci_low, ci_high, n, note}]."""
    cm = report.confusion
    confusion = None
    if cm is not None:
        k = len(cm.categories)
        confusion = {
            "rows": report.a_label, "columns": report.b_label,
            "categories": cm.categories, "counts": cm.counts,
            "cells": [{"a": cm.categories[i], "b": cm.categories[j], "count": cm.counts[i][j],
                       "items": [u.item_uid for u in cm.units[i][j]]}
                      for i in range(k) for j in range(k) if cm.counts[i][j]],
        }
    out = {
        "title": report.title,
        "question_set": _question_set(report.question_set),
        "a": report.a, "b": report.b, "raters": report.raters,
        "filters": plain(report.filters),
        "n_items": report.n_units,
        "coefficients": [coefficient_dict(c) for c in report.coefficients],
        "clinicians_ceiling": {"raters": report.ceiling_raters,
                               "coefficients": [coefficient_dict(c) for c in report.ceiling]},
        "clinician_vs_others_majority": {
            "pairs": report.like_with_like_pairs,
            "coefficients": [coefficient_dict(c) for c in report.like_with_like]},
        "confusion": confusion,
        "class_scores": plain(report.class_scores),
        "disagreements": [{"item": d.unit.item_uid, "item_kind": d.unit.item_kind,
                           "question": d.unit.question_key, "target": d.unit.target,
                           "a": d.a, "b": d.b} for d in report.disagreements],
        "breakdowns": plain(report.breakdowns),
        "notes": report.notes,
        "bootstrap": {"resamples": report.n_boot, "seed": report.seed,
                      "resampled": report.resampled, "clusters": report.clusters},
        "created_at": report.created_at,
    }
    for extra in extras:
        out.setdefault("sections", {})[SECTION_NAMES[type(extra)]] = plain(extra)
    out["provenance"] = report_provenance(report, extras)
    return out


def report_json(report: ComparisonReport, extras: Sequence[Extra] = ()) -> str:
    """JSON text; ``allow_nan=False``, so an undefined value can only appear as null."""
    return json.dumps(report_dict(report, extras), indent=2, ensure_ascii=False, allow_nan=False)


def triage_json(report: TriageReport) -> str:
    """``carelens triage-metrics --json``: every labelling's metrics per model, the
    rankings, their rank correlations and each mapper's own triage against clinicians."""
    out = plain(report)
    out["provenance"] = triage_provenance(report)
    return json.dumps(out, indent=2, ensure_ascii=False, allow_nan=False)


def triage_provenance(report: TriageReport) -> dict[str, Any]:
    """The triage report's stamp: with the ranking's metric (``--rank-by``) and whether
    every labelling scored the same responses (``--common``), the stamp alone reproduces
    the figures."""
    return report_provenance(report, interval=triage_interval_method(report),
                             rank_by=report.rank_by, common=report.common)


def triage_interval_method(report: TriageReport) -> str:
    """How every triage interval of the report was computed, in words."""
    from labels.triage import INTERVAL_METHOD

    return INTERVAL_METHOD.format(n_boot=report.n_boot, seed=report.seed)


# -- CSV -----------------------------------------------------------------------

CSV_COLUMNS = ["section", "group", "n_units", "coefficient", "title", "value", "ci_low",
               "ci_high", "analytic_ci_low", "analytic_ci_high", "n", "note"]


def report_csv(report: ComparisonReport) -> str:
    """Every coefficient of the report, one row each: the comparison, the clinicians'
    ceiling, and each breakdown group (with its ceiling)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()

    def row(section: str, c: Coefficient, group: str = "", n_units: int | None = None):
        d = coefficient_dict(c)
        writer.writerow({k: safe_cell(v) for k, v in {
            "section": section, "group": group, "n_units": n_units, "coefficient": d["name"],
            **{k: d[k] for k in ("title", "value", "ci_low", "ci_high", "analytic_ci_low",
                                 "analytic_ci_high", "n", "note")},
        }.items()})

    for c in report.coefficients:
        row("comparison", c, n_units=report.n_units)
    for c in report.ceiling:
        row("clinicians_ceiling", c, n_units=report.ceiling_units)
    for c in report.like_with_like:
        row("clinician_vs_others_majority", c, n_units=report.like_with_like_pairs)
    for bd in report.breakdowns:
        for r in bd.rows:
            row(f"by_{bd.by}", r.comparison, r.label, r.n_units)
            if r.ceiling is not None:
                row(f"by_{bd.by}_clinicians_ceiling", r.ceiling, r.label, r.ceiling_units)
    return buf.getvalue()


# -- HTML ----------------------------------------------------------------------

CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
       "style-src 'unsafe-inline'; img-src data: blob:; font-src data:")
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #1f2937; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; font-size: 1.25rem; }
.meta { color: #4b5563; } table { border-collapse: collapse; margin: .6rem 0; width: 100%; }
th, td { border-bottom: 1px solid #e5e7eb; padding: .35rem .5rem; text-align: left;
         vertical-align: top; font-size: .92rem; }
th { background: #f3f4f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #6b7280; font-size: .88rem; } .undefined { color: #9a3412; }
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(header: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(
            f"<td class='num'>{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
            for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class _Figures:
    """Figures as HTML divs; plotly.js is inlined with the first one only."""

    def __init__(self) -> None:
        self.first = True

    def __call__(self, fig) -> str:
        out = fig.to_html(full_html=False, include_plotlyjs=self.first, include_mathjax=False,
                          config={"displaylogo": False, "responsive": True})
        self.first = False
        return out


def _coefficient_rows(report: ComparisonReport) -> list[list[Any]]:
    _, notes = split_notes(report.coefficients)
    rows = []
    for c, note in zip(report.coefficients, notes, strict=True):
        ceiling = report.ceiling_for(c.key)
        like = report.like_for(c.key)
        rows.append([c.name, number(c.value), interval(c.ci_low, c.ci_high),
                     interval(*c.analytic_ci) if c.analytic_ci else "—", c.n,
                     number(ceiling.value) if ceiling else "",
                     number(like.value) if like else "", note])
    return rows


def _comparison_html(report: ComparisonReport, fig: _Figures) -> str:
    qs = report.question_set
    parts = [
        f"<h1>{_e(report.title)}</h1>",
        f"<p class='meta'>{_e(qs.title)} · {_e(qs.level)} labels · filters: "
        f"{_e(report.filters.describe())} · {report.n_units} units compared · "
        f"{report.n_boot} bootstrap resamples over {report.resampled} (seed {report.seed}) · "
        f"made {_e(report.created_at[:19].replace('T', ' '))} UTC</p>",
        "<h2>Coefficients</h2>",
        _table(["Coefficient", "Value", "95% CI (bootstrap)", "95% CI (analytic)", "n",
                "Clinicians among themselves" if report.ceiling else "",
                "A clinician vs the others' majority" if report.like_with_like else "", "Note"],
               _coefficient_rows(report), {1, 4, 5, 6}),
    ]
    parts += [f"<p class='note'>All coefficients: {_e(n)}</p>"
              for n in split_notes(report.coefficients)[0]]
    if report.ceiling_raters:
        parts.append(f"<p class='note'>Clinicians' ceiling: {_e(', '.join(report.ceiling_raters))}"
                     f" on {report.ceiling_units} units: those the comparison is about that two or"
                     " more clinicians rated, tied votes included.</p>")
    if report.confusion is not None:
        parts += ["<h2>Confusion matrix</h2>",
                  fig(confusion_figure(report.confusion, report.a_label, report.b_label or ""))]
        if report.class_scores:
            parts.append(_table(
                ["Label", f"{report.a_label} (support)", f"{report.b_label}", "Precision",
                 "Recall", "F1"],
                [[qs.label(s.category), s.support, s.predicted, number(s.precision),
                  number(s.recall), number(s.f1)] for s in report.class_scores],
                {1, 2, 3, 4, 5}))
        if report.disagreements:
            parts += [f"<h3>Disagreeing items ({len(report.disagreements)})</h3>", _table(
                ["Item", "Question", report.a_label, report.b_label or ""],
                [[d.unit.item_uid, d.unit.question_key, qs.label(d.a), qs.label(d.b)]
                 for d in report.disagreements])]
    for bd in report.breakdowns:
        parts += [f"<h2>By {_e(bd.by)}: {_e(bd.name)}</h2>",
                  fig(forest_figure(bd, report.title)),
                  _table([bd.by, "n", "Value", "95% CI", "Clinicians", "Note"],
                         [[r.label, r.n_units, number(r.comparison.value),
                           interval(r.comparison.ci_low, r.comparison.ci_high),
                           number(r.ceiling.value) if r.ceiling else "",
                           explain(r.comparison)] for r in bd.rows], {1, 2, 4})]
    if report.notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes)
                     + "</ul>")
    return "\n".join(parts)


def _machines_html(m: MachineReport, fig: _Figures) -> str:
    parts = ["<h2>Machine raters against clinicians</h2>"]
    if m.explanation:
        return parts[0] + f"<p>{_e(m.explanation)}</p>"
    parts.append(fig(versions_figure(m)))
    parts.append(_table(
        ["Machine", "Against", "Coefficient", "Value", "95% CI", "n", "Percent agreement"],
        [[r.machine, r.reference_label, r.headline.name, number(r.headline.value),
          interval(r.headline.ci_low, r.headline.ci_high), r.headline.n,
          number(r.percent.value)] for r in m.rows], {3, 5, 6}))
    for d in m.differences:
        parts.append(
            f"<p><b>{_e(d.candidate)} vs {_e(d.baseline)}</b> against {_e(d.reference_label)}: "
            f"{_e(d.name)} {_e(number(d.candidate_value))} vs {_e(number(d.baseline_value))}, "
            f"difference {_e('—' if d.difference is None else f'{d.difference:+.2f}')} "
            f"(95% CI {_e(interval(d.ci_low, d.ci_high))}, n = {d.n}): {_e(d.verdict)}.</p>")
    return "\n".join(parts)


def _triage_html(t: TriageReport, fig: _Figures) -> str:
    parts = ["<h2>Triage metrics and the leaderboard</h2>"]
    if t.explanation:
        return parts[0] + f"<p>{_e(t.explanation)}</p>"
    parts.append(f"<p class='meta'>{_e(t.filters.describe())}. "
                 + ("Each model is scored on everything its reading covers (coverage beside)."
                    if not t.common else "Common set: every labelling scores the same "
                    "responses.") + "</p>")
    parts.append(fig(ranking_figure(t)))
    keys = ["macro_f1", "accuracy", "over_triage", "under_triage", "missed_care",
            "unnecessary_care", "urgent_false_negative", "false_urgent_escalation"]
    for x in t.labellings:
        rank = {r.model: r.rank for r in x.ranking}
        parts.append(f"<h3>Responses {_e(x.name)} ({x.n_responses} scored)</h3>")
        parts.append(_table(
            ["Model", "Rank", *[x.metrics[next(iter(x.metrics))][k].name for k in keys],
             "Coverage"]
            if x.metrics else ["Model"],
            [[m, "—" if rank.get(m) is None else f"{rank[m]:g}",
              *[with_ci(c.value, c.ci_low, c.ci_high) for k in keys for c in [x.metrics[m][k]]],
              x.coverage[m].words() if m in x.coverage else ""]
             for m in x.metrics],
            set(range(1, 10))))
        for m, wrong in x.missing_as_wrong.items():
            parts.append(f"<p class='note'>{_e(m)}, missing predictions counted against it: "
                         + _e(", ".join(f"{v.name} {number(v.value)}" for v in wrong.values()))
                         + "</p>")
        if lines := paired_lines(x):
            parts.append("<p>" + "<br>".join(_e(line) for line in lines) + "</p>")
        parts.append("<p class='note'>In brackets, each value's "
                     + _e(triage_interval_method(t)) + ".</p>")
    if t.correlations:
        parts.append(_table(
            ["Labelling", "Spearman rho", "Kendall tau-b", "Same order", "Note"],
            [[c.other, number(c.correlation.spearman_rho), number(c.correlation.kendall_tau),
              "yes" if c.same_order else "no",
              c.correlation.undefined_reason or ("swapped pairs' 95% intervals overlap"
                                                 if c.swaps_within_noise else "")]
             for c in t.correlations], {1, 2}))
    for mapper, m in t.mapper_triage.items():
        over, under = m["over_triage"], m["under_triage"]
        parts.append(f"<p>{_e(mapper)} against the clinicians' reading: over-triage "
                     f"{_e(with_ci(over.value, over.ci_low, over.ci_high, percent=True))}, "
                     f"under-triage {_e(with_ci(under.value, under.ci_low, under.ci_high, percent=True))}"
                     ".</p>")
    parts += [f"<p class='note'>{_e(n)}</p>" for n in t.notes]
    return "\n".join(parts)


def _anchoring_html(a: AnchoringReport, fig: _Figures) -> str:
    parts = ["<h2>Anchoring after the reveal</h2>"]
    if a.explanation:
        return parts[0] + f"<p>{_e(a.explanation)}</p>"
    parts += [f"<p class='meta'>Against the label of {_e(a.machine)}.</p>",
              fig(anchoring_figure(a))]
    parts.append(_table(
        ["Clinician", "Blind answers", "Revised after reveal", "Changed",
         *[DIRECTION_WORDS[d] for d in DIRECTIONS[1:]]],
        [[r.rater, r.blind_answers, share_text(r.revisited.value, r.revisited.count,
                                               r.revisited.n),
          share_text(r.changed.value, r.changed.count, r.changed.n),
          *[r.counts[d] for d in DIRECTIONS[1:]]] for r in a.rows], {1, 4, 5, 6, 7}))
    return "\n".join(parts)


def _meta_html(m: MetaEvalReport, fig: _Figures) -> str:
    parts = ["<h2>HealthBench meta-evaluation</h2>"]
    if m.explanation:
        return parts[0] + f"<p>{_e(m.explanation)}</p>"
    g, p = m.overall.grader, m.overall.physicians
    parts.append(_table(
        ["", "Pairwise macro-F1", "95% CI", "Label pairs", "Note"],
        [[m.grader, number(g.macro_f1), interval(g.ci_low, g.ci_high), g.n_pairs,
          g.undefined_reason or g.note or ""],
         ["Physicians (ceiling)", number(p.macro_f1), interval(p.ci_low, p.ci_high), p.n_pairs,
          p.undefined_reason or p.note or ""]], {1, 3}))
    for by in m.by:
        parts += [f"<h3>By {_e(by)}</h3>", fig(meta_forest_figure(m, by))]
    return "\n".join(parts)


def _pairwise_html(pm: PairwiseMatrix, fig: _Figures) -> str:
    return f"<h2>Clinicians pairwise: {_e(pm.name)}</h2>" + fig(pairwise_figure(pm))


def provenance_html(record: dict[str, Any]) -> str:
    """The provenance object as the last section of an HTML report, escaped."""
    text = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False)
    return ("<h2>Provenance</h2><p class='note'>What these figures were computed from: "
            f"{_e(record.get('phase_words'))}.</p><pre class='provenance'>{_e(text)}</pre>")


SECTION_HTML = {
    MachineReport: _machines_html, TriageReport: _triage_html, AnchoringReport: _anchoring_html,
    MetaEvalReport: _meta_html, PairwiseMatrix: _pairwise_html,
}


def report_html(report: ComparisonReport, extras: Sequence[Extra] = ()) -> str:
    """One self-contained HTML page: the comparison, its plots, and the extra sections."""
    fig = _Figures()
    body = [_comparison_html(report, fig)]
    body += [SECTION_HTML[type(x)](x, fig) for x in extras]
    body.append(provenance_html(report_provenance(report, extras)))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>carelens agreement: {_e(report.title)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(body)}"
        "<p class='note'>Made with carelens. This file needs no network connection.</p>"
        "</body></html>"
    )
