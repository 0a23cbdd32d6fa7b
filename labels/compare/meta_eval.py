"""HealthBench meta-evaluation from the store: a rubric grader against physicians.

Each rubric criterion answered on a graded conversation is one meta-evaluation
row: the grader's verdict (a machine rater's met / not met) and every
physician's label (each human rater's answer; the HealthBench importer makes
one human rater per anonymized physician id). The metric and the human ceiling
are those of ``labels.healthbench_meta``: the grader compared pairwise with
each physician label, macro-F1 over met / not met, beside the physicians'
leave-one-out agreement — overall, per category, per rubric axis and per
criterion. The ceiling (and each physician's score against the others) is computed
on the rows the grader gave a verdict on, so it stands beside the grader on the same
rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from labels.compare.answers import Answers, Filters, load_answers
from labels.compare.questions import QuestionSet, question_set, question_sets
from labels.compare.raters import clinicians
from labels.healthbench_meta import (
    GroupComparison,
    MetaRow,
    MetaScore,
    by_group,
    graded_rows,
    grader_and_ceiling,
    physician_scores,
)
from labels.phases import CURRENT, describe_phase
from store import Store

MET = "met"


@dataclass
class MetaEvalReport:
    grader: str | None
    graders: list[str]
    """Machine raters with verdicts on these criteria."""
    question_set: QuestionSet | None
    filters: Filters
    n_rows: int
    """Criterion answers with at least one physician label."""
    overall: GroupComparison | None = None
    physicians: dict[str, MetaScore] = field(default_factory=dict)
    """Each physician against the others, on the rows the grader gave a verdict on."""
    by: dict[str, dict[str | None, GroupComparison]] = field(default_factory=dict)
    """"category" | "axis" | "criterion" -> group -> grader and ceiling."""
    explanation: str | None = None
    """Why there is nothing to show, when there is nothing."""


def meta_rows(answers: Answers, grader: str) -> list[MetaRow]:
    """One MetaRow per criterion unit that has a physician label."""
    physicians = clinicians(answers)
    verdicts = answers.values.get(grader, {})
    rows = []
    for index, unit in enumerate(answers.units):
        labels = tuple(
            (name, answers.values[name][index] == MET)
            for name in physicians
            if index in answers.values[name]
        )
        if not labels:
            continue
        verdict = verdicts.get(index)
        tags = unit.tags + tuple(f"axis:{a}" for a in unit.axes if f"axis:{a}" not in unit.tags)
        rows.append(MetaRow(
            None if verdict is None else verdict == MET, labels, unit.category,
            unit.question_text, unit.item_uid, None, tags,
        ))
    return rows


def _empty(grader, graders, qs, filters, why) -> MetaEvalReport:
    return MetaEvalReport(grader, graders, qs, filters, 0, explanation=why)


def meta_eval(
    store: Store,
    grader: str | None = None,
    questions: QuestionSet | str | None = None,
    filters: Filters | None = None,
    *,
    by: tuple[str, ...] = ("category", "axis", "criterion"),
    n_boot: int = 1000,
    seed: int = 0,
) -> MetaEvalReport:
    """The grader (default: the machine rater with the most verdicts) against the
    physicians on rubric criteria (default: the first answered criteria set), overall,
    per physician and per group, with an explanation when there is no such data yet."""
    filters = filters or Filters()
    if questions is None:
        sets = [qs for qs in question_sets(store) if qs.kind == "criterion"]
        if not sets:
            return _empty(grader, [], None, filters, (
                "No rubric criteria have answers yet. Import HealthBench meta-evaluation rows "
                "(physicians' met / not met labels) and a grader's verdicts to see how far the "
                "grader agrees with physicians, next to the physicians' own agreement."))
        # HealthBench's criteria are asked of graded conversations: prefer those.
        questions = next((qs for qs in sets if qs.item_kinds == ("graded_conversation",)),
                         sets[0])
    qs = question_set(store, questions) if isinstance(questions, str) else questions
    answers = load_answers(store, qs, replace(filters, include_cannot_assess=False))
    graders = sorted(answers.of_kind("machine"), key=lambda g: (-len(answers.values[g]), g))
    if not clinicians(answers) and filters.phase != CURRENT:
        unfiltered = load_answers(store, qs, replace(filters, include_cannot_assess=False,
                                                     phase=CURRENT))
        if labelled_by := clinicians(unfiltered):
            n = len(labelled_by)
            return _empty(grader, graders, qs, filters, (
                f"The phase filter ({describe_phase(filters.phase)}) "
                f"leaves no physician label on these criteria, though {n} physician"
                f"{' has' if n == 1 else 's have'} labelled them in another phase (HealthBench "
                "meta-evaluation labels are imported, and count as blind). Show the blind "
                "(the default) or current answers to compare the grader with them."))
    if not clinicians(answers):
        return _empty(grader, graders, qs, filters, (
            "No physician (human rater) has labelled these criteria yet, so there is no human "
            "label to compare a grader with. HealthBench meta-evaluation rows bring one human "
            "rater per physician."))
    if not graders:
        return _empty(grader, graders, qs, filters, (
            "Physicians have labelled these criteria, but no grader (machine rater) has "
            "given verdicts on them yet. Run the judge, or import grader results."))
    grader = grader or graders[0]
    rows = meta_rows(answers, grader)
    report = MetaEvalReport(grader, graders, qs, filters, len(rows))
    report.overall = grader_and_ceiling(rows, n_boot=n_boot, seed=seed)
    # Each physician against the others: the ceiling's breakdown, on the ceiling's rows.
    report.physicians = physician_scores(graded_rows(rows), n_boot=n_boot, seed=seed)
    for key in by:
        report.by[key] = by_group(rows, key, n_boot=n_boot, seed=seed)
    return report
