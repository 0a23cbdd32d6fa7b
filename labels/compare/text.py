"""Reports as plain text for the terminal (``carelens agreement``, ``triage-metrics``),
and the words every face uses for a number and its interval."""

from __future__ import annotations

from labels.agreement import Coefficient
from labels.compare.leaderboard import TriageReport, ppi_column_lines
from labels.compare.pairs import ComparisonReport
from labels.triage import INTERVAL_METHOD


def number(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def interval(low: float | None, high: float | None, digits: int = 2) -> str:
    """A 95% interval in words, or "no interval"."""
    if low is None or high is None:
        return "no interval"
    return f"{low:.{digits}f} to {high:.{digits}f}"


def explain(c: Coefficient) -> str:
    """What a reader should know about a coefficient: why it is undefined, else its note."""
    if c.value is None:
        return f"undefined: {c.undefined_reason or 'no reason given'}"
    return c.note or ""


def ci_text(c: Coefficient, digits: int = 2) -> str:
    """The interval to quote for a coefficient (``Coefficient.shown_interval``: Wilson's
    where it exists) and, unless it is the bootstrap over units, which one it is."""
    low, high, how = c.shown_interval()
    words = interval(low, high, digits)
    return words if how == "bootstrap" or low is None else f"{words} ({how})"


def split_notes(coefficients: list[Coefficient]) -> tuple[list[str], list[str]]:
    """Notes every coefficient carries (said once, above a table), and what is left for
    each row: the reason where undefined, else its own remaining notes and the warnings
    that say when its interval means little."""
    parts = [[p for p in (c.note or "").split("; ") if p] + list(c.warnings)
             for c in coefficients]
    common = [p for p in parts[0] if all(p in other for other in parts)] if parts else []
    rows = []
    for c, own in zip(coefficients, parts, strict=True):
        rest = "; ".join(p for p in own if p not in common)
        rows.append(f"undefined: {c.undefined_reason}" if c.value is None else rest)
    return common, rows


PARADOX_AGREEMENT = 0.8
"""Percent agreement at or above which a low kappa or alpha needs explaining."""
PARADOX_COEFFICIENT = 0.5
"""A chance-corrected coefficient below this is "low" beside such agreement."""
PARADOX_SHARE = 0.8
"""The share of answers one category must take for the labels to be "very unbalanced"."""
STEADY_KEYS = {"ordinal": "gwet_ac2_quadratic", "nominal": "gwet_ac1"}
"""The chance-corrected coefficient of each level that holds up when one answer
dominates (binary criteria lead with AC1 and PABAK already)."""


def prevalence_note(report: ComparisonReport, head: Coefficient | None) -> str | None:
    """Why the headline kappa or alpha is low while the raters mostly agree, when the
    answers are very unbalanced (the prevalence, or kappa, paradox); None otherwise, and
    for binary criteria, whose statistics already lead with AC1 and PABAK."""
    pct = report.coefficient("percent_agreement")
    total = sum(report.answer_counts.values())
    if (report.level == "binary" or head is None or pct is None or not total
            or head.value is None or pct.value is None or not head.key.startswith(
                ("cohen_kappa", "fleiss_kappa", "krippendorff_alpha"))):
        return None
    top, count = max(report.answer_counts.items(), key=lambda kv: kv[1])
    share = count / total
    if (pct.value < PARADOX_AGREEMENT or head.value >= PARADOX_COEFFICIENT
            or share < PARADOX_SHARE):
        return None
    steady = report.coefficient(STEADY_KEYS.get(report.level, ""))
    text = (f"{share:.0%} of the answers are \"{report.question_set.label(top)}\": with one "
            f"answer this common, {head.name} expects most agreement to happen by chance, so "
            f"it stays low at {pct.value:.0%} agreement (the prevalence, or kappa, paradox).")
    if steady is not None and steady.value is not None:
        text += (f" {steady.name} reads {number(steady.value)}: it corrects for chance in a "
                 "way a dominant answer sways far less.")
    return text


def with_ci(value: float | None, low: float | None, high: float | None, digits: int = 2,
            percent: bool = False) -> str:
    """A value and its 95% interval, compactly: "0.62 (0.51-0.72)" or "62% (51-72%)"."""
    if value is None:
        return "—"
    if percent:
        shown = f"{value:.0%}"
        return shown if low is None or high is None else f"{shown} ({low * 100:.0f}–{high:.0%})"
    shown = f"{value:.{digits}f}"
    return shown if low is None or high is None else f"{shown} ({low:.{digits}f}–{high:.{digits}f})"


def share_text(value: float | None, count: int | None = None, n: int | None = None) -> str:
    if value is None:
        return "—"
    return f"{value:.0%}" + (f" ({count}/{n})" if count is not None and n is not None else "")


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out


def format_report_text(report: ComparisonReport) -> str:
    """The comparison as text: what was compared, the coefficients with n, 95% intervals
    and reasons, the clinicians' ceiling, the confusion matrix and the breakdowns."""
    qs = report.question_set
    lines = [
        f"{report.title}",
        f"{qs.title} ({qs.level} · {qs.key})",
        f"Filters: {report.filters.describe()}",
        f"Units compared: {report.n_units}"
        + ("" if report.is_pair else f" · raters: {', '.join(report.raters)}"),
        "",
    ]
    common, row_notes = split_notes(report.coefficients)
    rows = []
    for c, note in zip(report.coefficients, row_notes, strict=True):
        ceiling = report.ceiling_for(c.key)
        like = report.like_for(c.key)
        rows.append([
            c.name, number(c.value), ci_text(c), str(c.n),
            number(ceiling.value) if ceiling else "",
            *([number(like.value) if like else ""] if report.like_with_like else []), note,
        ])
    header = ["Coefficient", "Value", "95% CI", "n",
              "Clinicians among themselves" if report.ceiling else "",
              *(["A clinician vs the others' majority"] if report.like_with_like else []),
              "Note"]
    lines += _table(rows, header)
    lines += [f"All coefficients: {n}" for n in common]
    if report.confusion is not None:
        cm = report.confusion
        lines += ["", f"Confusion matrix: rows {report.a_label}, columns {report.b_label}"]
        lines += _table(
            [[cm.labels[i], *map(str, cm.counts[i])] for i in range(len(cm.labels))],
            ["", *cm.labels],
        )
        n_dis = len(report.disagreements)
        lines.append(f"{n_dis} disagreeing units" + (
            ": " + ", ".join(d.unit.item_uid for d in report.disagreements[:8])
            + (" ..." if n_dis > 8 else "") if n_dis else ""))
    for bd in report.breakdowns:
        lines += ["", f"By {bd.by}: {bd.name}"]
        lines += _table(
            [[r.label, str(r.n_units), number(r.comparison.value),
              interval(r.comparison.ci_low, r.comparison.ci_high),
              number(r.ceiling.value) if r.ceiling else "",
              "" if r.comparison.value is not None else explain(r.comparison)]
             for r in bd.rows],
            [bd.by, "n", "Value", "95% CI", "Clinicians", "Note"],
        )
    if report.notes:
        lines += ["", *[f"Note: {n}" for n in report.notes]]
    over = (f"cases ({report.clusters} cases: a case's units are drawn together)"
            if report.resampled == "cases" else "units")
    lines.append(f"\n95% CI: Wilson's score interval for a share where it exists, else the "
                 f"percentile bootstrap: {report.n_boot} resamples over {over}, seed "
                 f"{report.seed}.")
    return "\n".join(lines)


def paired_lines(x) -> list[str]:
    """A labelling's paired model comparisons as text lines (empty when there are none)."""
    p = x.paired
    if p is None or not p.pairs:
        return []
    lines = [f"Paired comparisons by {p.key} ({p.n_boot} bootstrap resamples of {p.cases} "
             f"cases, seed {p.seed}; each model's chance of holding its rank: "
             + ", ".join(f"{m} {share_text(v)}" for m, v in p.rank_probability.items()) + ")"]
    for d in p.pairs:
        diff = "—" if d.difference is None else f"{d.difference:+.2f}"
        line = (f"  {d.a} minus {d.b}: {diff} (95% CI {interval(d.ci_low, d.ci_high)}; on the "
                f"{d.n_units} prefixes in {d.n_cases} cases both were scored on): {d.verdict}")
        if d.mcnemar_p is not None:
            line += (f"; accuracy, McNemar's exact p = {d.mcnemar_p:.3f} ({d.discordant[0]} "
                     f"vs {d.discordant[1]} discordant prefixes)")
        lines.append(line)
    lines += [f"  Note: {n}" for n in p.notes]
    return lines


def format_triage_text(report: TriageReport) -> str:
    """Triage metrics per model under each labelling, with coverage and, where missing
    predictions change them, the metrics both ways; the rankings, their agreement and the
    paired comparisons."""
    if report.explanation:
        return report.explanation
    keys = ["macro_f1", "accuracy", "over_triage", "under_triage", "missed_care",
            "unnecessary_care", "urgent_false_negative", "false_urgent_escalation"]
    lines = [f"Filters: {report.filters.describe()}",
             "Each model is scored on everything its reading covers"
             if not report.common else
             "Common set: every labelling scores the same responses"]
    for x in report.labellings:
        lines += ["", f"Responses {x.name} ({x.n_responses} scored)"]
        rank = {r.model: r.rank for r in x.ranking}
        rows = [[m, "—" if rank.get(m) is None else f"{rank[m]:g}",
                 *[with_ci(f1.value, f1.ci_low, f1.ci_high) if k == "macro_f1" else number(f1.value)
                   for k in keys for f1 in [x.metrics[m][k]]],
                 x.coverage[m].words() if m in x.coverage else ""] for m in x.metrics]
        lines += _table(rows, ["model", "rank", "macro_f1 (95% CI)", *keys[1:], "coverage"])
        for m, wrong in x.missing_as_wrong.items():
            lines.append(f"  {m}, missing predictions counted against it: " + ", ".join(
                f"{k} {number(v.value)}" for k, v in wrong.items()))
        lines += [f"  {m}, macro-F1 interval: {w}" for m in x.metrics
                  for w in x.metrics[m]["macro_f1"].warnings]
        lines += paired_lines(x)
    if report.correlations:
        lines += ["", f"Rank agreement with the baseline ranking ({report.rank_by})"]
        lines += _table(
            [[c.other, number(c.correlation.spearman_rho), number(c.correlation.kendall_tau),
              "yes" if c.same_order else "no",
              c.correlation.undefined_reason or ("swapped pairs' 95% intervals overlap"
                                                 if c.swaps_within_noise else "")]
             for c in report.correlations],
            ["labelling", "Spearman rho", "Kendall tau-b", "same order", "note"],
        )
    for mapper, m in report.mapper_triage.items():
        over, under = m["over_triage"], m["under_triage"]

        def share(t) -> str:
            ci = "" if t.ci_low is None else f", 95% CI {t.ci_low:.0%}–{t.ci_high:.0%}"
            return share_text(t.value, t.count, t.n) + ci

        lines.append(f"\n{mapper} against the clinicians' reading: over-triage {share(over)}; "
                     f"under-triage {share(under)}")
        lines += [f"  warning: {w}" for w in dict.fromkeys((*over.warnings, *under.warnings))]
    lines += ppi_column_lines(report.ppi)
    lines += [f"Note: {n}" for n in report.notes]
    lines.append("\n" + INTERVAL_METHOD.format(n_boot=report.n_boot, seed=report.seed) + ".")
    return "\n".join(lines).strip()
