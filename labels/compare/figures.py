"""Plotly figures of the comparison reports, shared by the Agreement screen and the
HTML export (no Streamlit here).

Every piece of data text (a rater's name, a category, a criterion) goes through
:func:`text` first: Plotly reads a subset of HTML in labels, so data is escaped
before it reaches a figure. Colours are the Okabe-Ito palette (safe for colour
vision deficiency): blue for the comparison, orange for the clinicians' ceiling.
"""

from __future__ import annotations

import html
import math
import textwrap

import plotly.graph_objects as go

from labels.compare.anchoring import DIRECTION_WORDS, DIRECTIONS, AnchoringReport
from labels.compare.leaderboard import TriageReport
from labels.compare.machines import MachineReport
from labels.compare.meta_eval import MetaEvalReport
from labels.compare.pairs import Breakdown, Confusion, PairwiseMatrix

BLUE, ORANGE, GREEN, GREY, RED, SKY = "#0072B2", "#E69F00", "#009E73", "#999999", "#D55E00", "#56B4E9"
SERIES = [BLUE, RED, GREEN, "#CC79A7", SKY, "#F0E442"]
DIRECTION_COLOURS = {"unchanged": GREY, "adopted": RED, "toward": ORANGE, "away": BLUE,
                     "other": "#CC79A7"}
LAYOUT = dict(template="plotly_white", margin=dict(l=10, r=10, t=40, b=10),
              font=dict(size=13))


def text(value: object, limit: int = 80) -> str:
    """Data text made safe for a Plotly label, cut to ``limit`` characters."""
    s = "" if value is None else str(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s, quote=False)  # Plotly shows &quot; literally; quotes are inert


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


# -- confusion matrix ----------------------------------------------------------


def confusion_figure(confusion: Confusion, a_label: str, b_label: str,
                     selected: tuple[int, int] | None = None) -> go.Figure:
    """A heatmap of A (rows) against B (columns). Clicks land on an invisible square
    marker over each cell (Plotly heatmaps send no selection events); the marker of
    cell (i, j) is point ``i * k + j`` of trace 1. ``selected`` outlines a cell."""
    k = len(confusion.categories)
    labels = [text(x) for x in confusion.labels]
    counts = confusion.counts
    fig = go.Figure()
    fig.add_trace(go.Heatmap(
        z=counts, x=labels, y=labels, colorscale="Blues", showscale=False, hoverinfo="skip",
        xgap=2, ygap=2,
    ))
    top = max((max(row) for row in counts), default=0) or 1
    xs, ys, texts, hover, colours = [], [], [], [], []
    for i in range(k):
        for j in range(k):
            xs.append(labels[j])
            ys.append(labels[i])
            texts.append(str(counts[i][j]))
            hover.append(f"{text(a_label)}: {labels[i]}<br>{text(b_label)}: {labels[j]}"
                         f"<br>{counts[i][j]} units" + ("" if i == j else "<br>click to list them"))
            colours.append("white" if counts[i][j] > top * 0.55 else "#1f2937")
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="markers+text", text=texts, textfont=dict(color=colours, size=15),
        marker=dict(symbol="square", size=60, color="rgba(0,0,0,0)"),
        hovertext=hover, hoverinfo="text", showlegend=False,
        unselected=dict(textfont=dict(color="#1f2937")),
    ))
    if selected is not None:
        i, j = selected
        fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                      line=dict(color=RED, width=4))
    fig.update_layout(
        **LAYOUT, height=130 + 80 * k, dragmode=False, clickmode="event+select",
        xaxis=dict(title=text(b_label), side="top", type="category"),
        yaxis=dict(title=text(a_label), autorange="reversed", type="category"),
    )
    return fig


def cell_of_point(point_index: int, k: int) -> tuple[int, int]:
    return divmod(int(point_index), k)


# -- forest plots --------------------------------------------------------------


def _range(rows, floor: float) -> tuple[float, float]:
    """From a little below the lowest interval (never below ``floor``) to 1."""
    lows = [p[3] if p[3] is not None else p[2] for _, points in rows for p in points
            if p[2] is not None]
    if not lows:
        return (floor, 1.0)
    low = math.floor((min(lows) - 0.05) * 10) / 10
    return (max(floor, min(low, 0.9)), 1.02)


def _forest(rows: list[tuple[str, list[tuple[str, str, float | None, float | None, float | None, int]]]],
            x_title: str, floor: float = -1.0) -> go.Figure:
    """rows: (group label, [(series, colour, value, low, high, n)]) from top to bottom.
    The x axis runs from just below the lowest interval (not below ``floor``) to 1."""
    x_range = _range(rows, floor)
    fig = go.Figure()
    series: dict[str, dict] = {}
    labels = []
    for label, points in rows:
        undefined = [p for p in points if p[2] is None]
        shown = label + (" · no value for " + ", ".join(str(p[0]) for p in undefined)
                         + " (too few shared units, or one answer throughout)"
                         if undefined else "")
        labels.append(shown)
        for name, colour, value, low, high, n in points:
            s = series.setdefault(name, dict(colour=colour, y=[], x=[], lo=[], hi=[], hover=[]))
            if value is None:
                continue
            s["y"].append(shown)
            s["x"].append(value)
            s["lo"].append(value - low if low is not None else 0)
            s["hi"].append(high - value if high is not None else 0)
            interval = f"{_num(low)} to {_num(high)}" if low is not None else "no interval"
            s["hover"].append(f"{name}<br>{label}<br>{value:.2f} (95% CI {interval}), n = {n}")
    for offset, (name, s) in enumerate(series.items()):
        fig.add_trace(go.Scatter(
            x=s["x"], y=s["y"], mode="markers", name=name, orientation="h",
            marker=dict(color=s["colour"], size=10, symbol="circle" if offset == 0 else "diamond"),
            error_x=dict(type="data", symmetric=False, array=s["hi"], arrayminus=s["lo"],
                         color=s["colour"], thickness=2),
            hovertext=s["hover"], hoverinfo="text",
        ))
    fig.update_layout(
        **LAYOUT, height=120 + 34 * max(len(labels), 2), scattermode="group",
        xaxis=dict(title=x_title, range=list(x_range) if x_range else None, zeroline=True),
        yaxis=dict(categoryorder="array", categoryarray=labels[::-1], type="category"),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
    )
    return fig


def forest_figure(bd: Breakdown, pair_label: str,
                  ceiling_label: str = "Clinicians among themselves") -> go.Figure:
    """Per-group agreement of the pair (blue) with the clinicians' ceiling (orange)."""
    rows = []
    for row in bd.rows:
        c, h = row.comparison, row.ceiling
        points = [(text(pair_label), BLUE, c.value, c.ci_low, c.ci_high, c.n)]
        if h is not None:
            points.append((ceiling_label, ORANGE, h.value, h.ci_low, h.ci_high, h.n))
        rows.append((f"{text(row.label, 60)} (n={row.n_units})", points))
    return _forest(rows, text(bd.name), 0.0 if bd.key == "percent_agreement" else -1.0)


def meta_forest_figure(report: MetaEvalReport, by: str, limit: int = 40) -> go.Figure:
    """HealthBench meta-evaluation per group: the grader (blue) beside the physicians'
    leave-one-out ceiling (orange), pairwise macro-F1."""
    rows = []
    for group, comp in list(report.by.get(by, {}).items())[:limit]:
        g, p = comp.grader, comp.physicians
        rows.append((f"{text(group if group is not None else f'(no {by})', 60)} (n={g.n_rows})", [
            (text(report.grader), BLUE, g.macro_f1, g.ci_low, g.ci_high, g.n_pairs),
            ("Physicians (ceiling)", ORANGE, p.macro_f1, p.ci_low, p.ci_high, p.n_pairs),
        ]))
    return _forest(rows, "Pairwise macro-F1 (met / not met)", 0.0)


def versions_figure(report: MachineReport) -> go.Figure:
    """Each machine version's agreement with each clinician and group, side by side."""
    rows = []
    for reference in report.references:
        points = []
        for colour, machine in zip(SERIES, report.machines, strict=False):
            r = report.row(machine, reference)
            if r is not None:
                c = r.headline
                points.append((text(machine), colour, c.value, c.ci_low, c.ci_high, c.n))
        label = next((r.reference_label for r in report.rows if r.reference == reference), reference)
        rows.append((text(label), points))
    name = report.rows[0].headline.name if report.rows else "agreement"
    return _forest(rows, text(name))


# -- the rest ------------------------------------------------------------------


def pairwise_figure(matrix: PairwiseMatrix) -> go.Figure:
    """Each pair of raters' coefficient and its n; a cell whose interval means little
    (too few shared units, no width: ``labels.intervals.interval_warnings``) is marked
    with * and the note under the figure says why."""
    names = [text(r, 40) for r in matrix.raters]
    z, labels = [], []
    for row in matrix.cells:
        z.append([c.value if c is not None and c.value is not None else None for c in row])
        cells = []
        for c in row:
            if c is None:
                cells.append("")
            elif c.value is None:
                cells.append(f"—<br>n={c.n}")
            else:
                mark = "*" if c.warnings else ""
                cells.append(f"{c.value:.2f}{mark}<br>n={c.n}{mark}")
        labels.append(cells)
    fig = go.Figure(go.Heatmap(
        z=z, x=names, y=names, text=labels, texttemplate="%{text}", colorscale="Blues",
        zmin=min([0.0] + [v for row in z for v in row if v is not None]), zmax=1,
        hoverinfo="skip", xgap=2, ygap=2,
        colorbar=dict(title=text(matrix.name, 30)),
    ))
    layout = dict(LAYOUT, height=140 + 70 * len(names))
    if note := pairwise_small_note(matrix):
        lines = textwrap.wrap(text(note, 400), 110)
        layout["margin"] = dict(LAYOUT["margin"], b=20 + 18 * len(lines))
        fig.add_annotation(text="<br>".join(lines), xref="paper", yref="paper", x=0, y=-0.02,
                           xanchor="left", yanchor="top", showarrow=False, align="left",
                           font=dict(size=12))
        layout["height"] += 18 * len(lines)
    fig.update_layout(**layout, yaxis=dict(autorange="reversed"))
    return fig


def pairwise_small_note(matrix: PairwiseMatrix) -> str | None:
    """The words under the pairwise heatmap when a cell's interval means little (None when
    none does): how many pairs, and the first such cell's warnings."""
    flagged = [(a, b, c) for i, (a, row) in enumerate(zip(matrix.raters, matrix.cells,
                                                          strict=True))
               for b, c in zip(matrix.raters[i + 1:], row[i + 1:], strict=True)
               if c is not None and c.value is not None and c.warnings]
    if not flagged:
        return None
    a, b, c = flagged[0]
    pairs = "1 pair" if len(flagged) == 1 else f"{len(flagged)} pairs"
    return (f"* {pairs} rest on too little to mean much on their own, e.g. {a} and {b}: "
            + "; ".join(c.warnings))


def ranking_figure(report: TriageReport, key: str = "macro_f1") -> go.Figure:
    """Each model's score under each labelling (one row each), with its 95%
    interval: when the dots change order from row to row, the leaderboard
    changed; when the intervals overlap, the order was not settled anyway."""
    fig = go.Figure()
    rows = [text(x.short, 60) for x in report.labellings]
    for colour, model in zip(SERIES * 4, report.models, strict=False):
        xs, ys, hover, plus, minus = [], [], [], [], []
        for row, x in zip(rows, report.labellings, strict=True):
            metric = x.metrics.get(model, {}).get(key)
            rank = next((r.rank for r in x.ranking if r.model == model), None)
            if metric is None or metric.value is None:
                continue
            xs.append(metric.value)
            ys.append(row)
            has_ci = metric.ci_low is not None and metric.ci_high is not None
            plus.append(metric.ci_high - metric.value if has_ci else 0)
            minus.append(metric.value - metric.ci_low if has_ci else 0)
            hover.append(f"{text(model)}<br>{text(x.name)}<br>{metric.name} {metric.value:.2f}"
                         + (f" (95% CI {metric.ci_low:.2f}–{metric.ci_high:.2f})" if has_ci else "")
                         + (f", rank {rank:g}" if rank is not None else ""))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=text(model),
                                 error_x=dict(type="data", array=plus, arrayminus=minus,
                                              color=colour, thickness=1.5, width=0),
                                 marker=dict(color=colour, size=13, line=dict(width=1,
                                                                              color="white")),
                                 hovertext=hover, hoverinfo="text"))
    name = next((x.metrics[m][key].name for x in report.labellings for m in x.metrics), key)
    fig.update_layout(**LAYOUT, height=130 + 42 * max(len(rows), 2),
                      xaxis=dict(title=f"{name} (right is better)" if key == "macro_f1"
                                 else name),
                      yaxis=dict(type="category", categoryorder="array",
                                 categoryarray=rows[::-1]),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig


def anchoring_figure(report: AnchoringReport) -> go.Figure:
    """After the reveal, per clinician: how the revised answers moved."""
    fig = go.Figure()
    rows = report.rows[:-1] if len(report.rows) > 2 else report.rows  # the total doubles the scale
    raters = [text(r.rater, 40) for r in rows]
    for d in DIRECTIONS:
        fig.add_trace(go.Bar(
            y=raters, x=[r.counts[d] for r in rows], name=DIRECTION_WORDS[d],
            orientation="h", marker_color=DIRECTION_COLOURS[d],
        ))
    fig.update_layout(**LAYOUT, barmode="stack", height=160 + 40 * len(raters),
                      xaxis=dict(title="answers revised after the reveal"),
                      yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0,
                                  traceorder="normal"))
    return fig
