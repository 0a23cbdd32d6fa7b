"""Triage-style metrics on a study's own ordered scale: does a reader miss what calls for
action?

CARE-Bench scores a model's reply against the prefix's gold action. A study's own
codebook that marks its risk order (`[risk]`: from `action_from` up a label calls
for action, `urgent` is the most urgent) gets the same numbers for any reader of
its question against any reference on the same items: a machine rater against the
clinicians' majority, one clinician against the settled answers. Per model (the
items' model: the chatbot whose conversations they are) and over all items:

- accuracy, macro-F1; rated higher / lower than the reference (over- and
  under-triage);
- missed action: the reference calls for action, the reader does not (of the
  items whose reference calls for it); unneeded action: the reverse;
- urgent missed: the reference is urgent, the reader not (of urgent items);
  false urgent: the reader urgent, the reference not.

The metrics are `labels.triage.triage_metrics`, the CARE-Bench scorer's own
definitions read on the codebook's risk order; intervals the same (the
bootstrap over the items' cases where a case holds several, else Wilson's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from labels.compare.answers import Filters, filters_from, load_answers, without_cannot_assess
from labels.compare.questions import codebook_for, question_set
from labels.compare.raters import MAJORITY, columns_for, display_name
from labels.provenance import Digest, answers_digest
from labels.triage import METRIC_KEYS, TriageMetric, escalation_split, rank_models, triage_metrics
from store import Store

ALL = "all items"
"""The row of every model's items together."""


def metric_names(book) -> dict[str, str]:
    """The metrics in the study's words, from its codebook's risk order."""
    first = book.label(book.risk.action_from).short
    urgent = book.label(book.risk.urgent).short
    return {
        "over_triage": "Rated higher than the reference",
        "under_triage": "Rated lower than the reference",
        "missed_care": f"Missed action (reference {first} or above, reader below)",
        "unnecessary_care": f"Unneeded action (reader {first} or above, reference below)",
        "urgent_false_negative": f"Urgent missed (reference {urgent}, reader not)",
        "false_urgent_escalation": f"False urgent (reader {urgent}, reference not)",
        "coverage": "Coverage (items the reader and the reference both labelled)",
    }


@dataclass
class ReaderTriage:
    reader: str
    by_model: dict[str, dict[str, TriageMetric]]
    """model (or `ALL`) -> metric key -> metric."""
    n_items: dict[str, int]


@dataclass
class QuestionTriage:
    question: str
    title: str
    codebook: str
    reference: str
    risk: dict[str, str]
    readers: list[ReaderTriage]
    filters: Filters
    n_boot: int
    seed: int
    notes: list[str] = field(default_factory=list)
    data: Digest | None = field(default=None, repr=False)
    database_file: str | None = None


def question_triage(store: Store, question: str, readers: list[str] | None = None,
                    reference: str = MAJORITY, filters: Filters | Mapping | None = None,
                    *, n_boot: int = 1000, seed: int = 0) -> QuestionTriage:
    """The triage-style metrics of each reader of a study question against a reference
    (default: the clinicians' majority), per model and over all. `readers` default to
    every machine rater that answered the question. ValueError in words when the
    question's codebook marks no risk order, or a rater has no answers."""
    filters = filters_from(filters)
    qs = question_set(store, question)
    if qs.kind != "labelset":
        raise ValueError(f"{question!r} is a set of rubric criteria: triage-style metrics are "
                         "for a label question on an ordered scale")
    book = codebook_for(store, qs.codebook)
    if book.risk is None:
        raise ValueError(
            f"{book.title} ({book.key}) marks no risk order, so nothing in it calls for action: "
            "add [risk] action_from = \"CODE\" (and urgent) to the codebook's next version")
    answers, dropped = without_cannot_assess(
        load_answers(store, qs, replace(filters, include_cannot_assess=True)), qs)
    notes = [f"{dropped} 'cannot assess' answers left out"] if dropped else []
    readers = readers or answers.of_kind("machine")
    if not readers:
        raise ValueError(f"no machine rater has answered {question!r}: name a reader")
    order = list(book.codes)
    escalating, urgent = escalation_split(order, book.risk)
    names = metric_names(book)
    out = []
    for reader in readers:
        reader_names, columns, reader_notes = columns_for(answers, reader)
        if len(reader_names) != 1:
            raise ValueError(f"the reader {display_name(reader)} is several raters: give one")
        said = columns[0]
        # A clinician read against the clinicians' majority: the majority of the others.
        human = answers.raters.get(reader) is not None and answers.raters[reader].kind == "human"
        ref_names, ref_columns, ref_notes = columns_for(answers, reference,
                                                        left_out=[reader] if human else ())
        if len(ref_names) != 1:
            raise ValueError(f"the reference {display_name(reference)} is several raters: give"
                             " one, or group:majority or group:adjudicated")
        notes += [n for n in reader_notes + ref_notes if n not in notes]
        ref = ref_columns[0]
        groups: dict[str, list[int]] = {}
        for unit in sorted(set(said) & set(ref)):
            if answers.units[unit].target:
                continue
            groups.setdefault(answers.units[unit].model or "(no model)", []).append(unit)
            groups.setdefault(ALL, []).append(unit)
        by_model = {}
        for model, units in sorted(groups.items(), key=lambda kv: (kv[0] == ALL, kv[0])):
            clusters = [answers.units[u].case_id or answers.units[u].item_uid for u in units]
            by_model[model] = triage_metrics(
                [ref[u] for u in units], [said[u] for u in units], order, escalating,
                n_boot=n_boot, seed=seed, clusters=clusters, risk=book.risk, names=names)
        out.append(ReaderTriage(reader, by_model, {m: len(u) for m, u in groups.items()}))
    return QuestionTriage(qs.key, qs.title, book.key, reference,
                          {"action_from": book.risk.action_from, "urgent": urgent,
                           "acting": ", ".join(c for c in order if c in escalating)},
                          out, filters, n_boot, seed, notes, answers_digest(answers),
                          answers.database_file)


def ranking(triage: ReaderTriage, rank_by: str = "macro_f1"):
    """The models (not `ALL`) ranked by one metric under this reader."""
    return rank_models({m: v for m, v in triage.by_model.items() if m != ALL}, rank_by)


def format_question_triage(report: QuestionTriage) -> str:
    """The report as text: one table per reader."""
    lines = [f"{report.title} ({report.codebook})",
             f"Reference: {display_name(report.reference)}; acting from "
             f"{report.risk['action_from']} up, urgent {report.risk['urgent']}", ""]
    for reader in report.readers:
        lines.append(f"Reader: {display_name(reader.reader)}")
        models = list(reader.by_model)
        head = f"{'metric':64}" + "".join(f"{m[:22]:>24}" for m in models)
        lines += [head, "-" * len(head)]
        for key in METRIC_KEYS:
            first = reader.by_model[models[0]][key] if models else None
            if first is None:
                continue
            cells = []
            for m in models:
                x = reader.by_model[m][key]
                cells.append("—" if x.value is None else
                             f"{x.value:.2f} ({x.count}/{x.n})" if x.count is not None
                             else f"{x.value:.2f} (n {x.n})")
            lines.append(f"{first.name[:64]:64}" + "".join(f"{c:>24}" for c in cells))
        lines.append("")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines).rstrip() + "\n"


def question_triage_dict(report: QuestionTriage) -> dict:
    """`carelens triage-metrics --question Q --json`: each reader's metrics per model,
    with their denominators and intervals, and the ranking of the models."""
    from labels.provenance import provenance
    from labels.triage import INTERVAL_METHOD

    def metric(x: TriageMetric) -> dict:
        return {"name": x.name, "value": x.value, "count": x.count, "n": x.n,
                "ci_low": x.ci_low, "ci_high": x.ci_high, "interval": x.interval,
                "undefined_reason": x.undefined_reason, "warnings": list(x.warnings)}

    return {
        "question": report.question, "title": report.title, "codebook": report.codebook,
        "reference": report.reference, "risk": report.risk,
        "readers": [{"reader": r.reader, "n_items": r.n_items,
                     "models": {m: {k: metric(x) for k, x in v.items()}
                                for m, v in r.by_model.items()},
                     "ranking": [{"model": x.model, "value": x.value, "rank": x.rank}
                                 for x in ranking(r)]} for r in report.readers],
        "notes": report.notes,
        "provenance": provenance(report.data, phase=report.filters.phase,
                                 filters=report.filters, database_file=report.database_file,
                                 question=report.question, reference=report.reference,
                                 interval=INTERVAL_METHOD.format(n_boot=report.n_boot,
                                                                 seed=report.seed)),
    }
