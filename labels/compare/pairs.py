"""Rater A against rater B (or a group), down to the disagreeing items.

:func:`compare` is the one comparison every view and the command line use: it
builds the units x raters table from the store, computes the statistics that
fit the question set's level (``agreement_table``), the confusion matrix with
the units behind each cell, per-class F1, the clinicians' own agreement on the
units the comparison is about (the human ceiling), and optional per-group
breakdowns for a forest plot.

The ceiling's units (``_ceiling_table``): the units every named rater of the
comparison answered (all units when both sides are groups) that two or more
clinicians rated. A unit where the clinicians tied counts: leaving it out because
the majority has no label there would keep only the units they agree on, and
with two clinicians make the ceiling perfect by construction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from labels.agreement import ClassScore, Coefficient, agreement_table, class_scores_of
from labels.agreement import confusion_matrix as _confusion_matrix
from labels.compare.answers import Answers, Filters, Unit, load_answers
from labels.compare.collector import with_collector_paused
from labels.compare.questions import QuestionSet
from labels.compare.raters import (
    CLINICIANS,
    DERIVED,
    MAJORITY,
    RatingsTable,
    clinicians,
    display_name,
    group_label,
    left_out_clinicians,
    normalise_spec,
    table_for,
    voters,
)
from labels.compare.stats import coefficient, coefficient_name, forest_keys, headline_key
from labels.phases import describe_phase
from labels.provenance import Digest
from store import Store, utcnow

BREAKDOWNS = ("category", "round", "split", "model", "dataset", "criterion", "axis")
"""What a comparison can be broken down by (the forest plot's rows)."""
BOOTSTRAP_BY = ("auto", "case", "unit")
"""What a comparison's bootstrap resamples: ``case`` (a case's rounds, a prefix's
responses, a prompt's completions together), ``unit`` (each unit alone), or ``auto``:
cases where the data have them (some case holds two or more units), else units."""


def unit_clusters(units: list[Unit], bootstrap_by: str = "auto") -> list | None:
    """Each unit's cluster for the bootstrap (its case; a unit without one is its own),
    or None to resample units one by one (see ``BOOTSTRAP_BY``)."""
    if bootstrap_by not in BOOTSTRAP_BY:
        raise ValueError(f"bootstrap by {bootstrap_by!r}? choose one of {', '.join(BOOTSTRAP_BY)}")
    if bootstrap_by == "unit":
        return None
    ids = [u.case_id or f"{u.item_uid}\x00{u.question_key}\x00{u.target}" for u in units]
    if bootstrap_by == "auto" and len(set(ids)) == len(ids):
        return None
    return ids


@dataclass(frozen=True)
class UnitRef:
    """Where to find a unit: the item (by uid and kind) and the question."""

    item_uid: str
    item_kind: str
    question_key: str
    target: str = ""
    question_text: str = ""

    @classmethod
    def of(cls, unit: Unit) -> UnitRef:
        return cls(unit.item_uid, unit.item_kind, unit.question_key, unit.target,
                   unit.question_text)


@dataclass(frozen=True)
class Disagreement:
    unit: UnitRef
    a: str
    """Rater A's answer code."""
    b: str


@dataclass
class Confusion:
    """Rater A (rows) against rater B (columns), codebook order, with the units per cell."""

    categories: list[str]
    labels: list[str]
    """Short names of the categories."""
    counts: list[list[int]]
    units: list[list[list[UnitRef]]]
    n: int

    def disagreements(self) -> list[tuple[int, int]]:
        """Off-diagonal cells with units, largest first."""
        k = len(self.categories)
        cells = [(i, j) for i in range(k) for j in range(k) if i != j and self.counts[i][j]]
        return sorted(cells, key=lambda c: -self.counts[c[0]][c[1]])


@dataclass
class BreakdownRow:
    group: str
    """The group's value (a category, a round, a criterion key)."""
    label: str
    """How to show it."""
    n_units: int
    comparison: Coefficient
    """A against B on this group's units."""
    ceiling: Coefficient | None
    """Clinicians among themselves on the group's ceiling units (None when not applicable)."""
    ceiling_units: int = 0
    """The group's units the ceiling is computed on (tied clinician votes included)."""


@dataclass
class Breakdown:
    by: str
    key: str
    """The coefficient shown, a multi-rater key so the ceiling is comparable."""
    name: str
    rows: list[BreakdownRow]


@dataclass
class ComparisonReport:
    """Everything the Agreement screen, the exports and the command line show for A vs B."""

    question_set: QuestionSet
    a: str
    """Rater spec of side A (a name or a group)."""
    b: str | None
    a_label: str
    b_label: str | None
    raters: list[str]
    """The columns compared: two for a pair, a group's members otherwise."""
    filters: Filters
    n_units: int
    """Units compared: answered by both sides (a pair) or by two or more raters (a group)."""
    coefficients: list[Coefficient]
    ceiling: list[Coefficient] = field(default_factory=list)
    """The clinicians' agreement among themselves on the units the comparison is about,
    where it applies (see ``ceiling_units``)."""
    ceiling_raters: list[str] = field(default_factory=list)
    ceiling_units: int = 0
    """Units the ceiling is computed on: those the comparison is about that two or more
    clinicians rated, tied votes included (a note says which)."""
    confusion: Confusion | None = None
    class_scores: list[ClassScore] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    breakdowns: list[Breakdown] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    answer_counts: dict[str, int] = field(default_factory=dict)
    """How often each category was given on the compared units, every column counted
    (codebook order): how unbalanced the answers are."""
    n_boot: int = 1000
    seed: int = 0
    created_at: str = ""
    resampled: str = "units"
    """What the bootstrap resampled: "units" or "cases"."""
    clusters: int | None = None
    """How many cases, when it resampled cases."""
    set_aside: dict[str, int] = field(default_factory=dict)
    """Clinicians of the comparison -> their answers left out because the latest is of
    another phase than the one compared (``Answers.set_aside``)."""
    data: Digest | None = field(default=None, repr=False, compare=False)
    """The answers the report was computed from (for its provenance)."""
    database_file: str | None = None
    like_with_like: list[Coefficient] = field(default_factory=list)
    """Beside a rater compared with the clinicians' majority: each clinician compared
    with the majority of the *other* clinicians the same way (one rater against a
    majority), on the units the comparison is about where two or more others answered
    and agree on a majority (a majority of one clinician is not a majority)."""
    like_with_like_pairs: int = 0
    """(clinician, unit) pairs ``like_with_like`` pools."""

    def like_for(self, key: str) -> Coefficient | None:
        return next((c for c in self.like_with_like if c.key == key), None)

    @property
    def level(self) -> str:
        return self.question_set.level

    @property
    def is_pair(self) -> bool:
        return len(self.raters) == 2

    @property
    def title(self) -> str:
        if self.b_label:
            return f"{self.a_label} vs {self.b_label}"
        return f"{self.a_label}, among themselves"

    def coefficient(self, key: str) -> Coefficient | None:
        return next((c for c in self.coefficients if c.key == key), None)

    def ceiling_for(self, key: str) -> Coefficient | None:
        return next((c for c in self.ceiling if c.key == key), None)


def _compared_rows(table: RatingsTable) -> list[int]:
    """Units that enter a statistic: both answered (a pair), two or more answered (a group)."""
    need = len(table.columns) if len(table.columns) == 2 else 2
    return [i for i, row in enumerate(table.values) if sum(v is not None for v in row) >= need]


def _confusion(table: RatingsTable, matrix) -> tuple[Confusion, list[Disagreement]]:
    qs = table.question_set
    refs = [UnitRef.of(u) for u in table.units]
    units = [[[refs[p] for p in cell] for cell in row] for row in matrix.units]
    disagreements = [
        Disagreement(refs[p], table.values[p][0], table.values[p][1]) for p in matrix.disagreements()
    ]
    confusion = Confusion(list(qs.categories), list(qs.labels), matrix.counts, units, matrix.n)
    return confusion, disagreements


def _group_fn(by: str) -> Callable[[Unit], list[tuple[str, str]]]:
    """Unit -> [(group value, label)]; a criterion with several axes counts in each."""
    if by == "criterion":
        # Group by the criterion's text: HealthBench reuses consensus criteria across rows.
        return lambda u: [(u.question_text, u.question_text)]
    if by == "axis":
        return lambda u: [(a, a) for a in u.axes] or [("", "(no axis)")]
    attribute = {"round": "round_id"}.get(by, by)
    if attribute not in Unit.__dataclass_fields__:
        raise ValueError(f"cannot break down by {by!r}; choose one of {', '.join(BREAKDOWNS)}")

    def groups(u: Unit) -> list[tuple[str, str]]:
        value = getattr(u, attribute)
        if value in (None, ""):
            return [("", f"(no {by})")]
        # A conversation's round is the patient's turn ("round" names a study's review round).
        return [(str(value), f"turn {value}" if by == "round" else str(value))]

    return groups


def breakdown(
    table: RatingsTable,
    ceiling_table: RatingsTable | None,
    by: str,
    key: str | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    bootstrap_by: str = "auto",
) -> Breakdown:
    """The comparison on each group of units (e.g. per category or per criterion), with
    the clinicians' ceiling on the group's ceiling units beside it (``ceiling_table``'s
    units in the group: tied votes count there, though the comparison has no majority
    on them). ``key`` must be a multi-rater coefficient (see ``stats.forest_keys``)."""
    key = key or forest_keys(table.level)[0]
    group_of = _group_fn(by)
    members: dict[str, list[int]] = {}
    labels: dict[str, str] = {}
    for i in _compared_rows(table):
        for value, label in group_of(table.units[i]):
            members.setdefault(value, []).append(i)
            labels[value] = label
    ceiling_members: dict[str, list[int]] = {}
    if ceiling_table is not None:  # every ceiling unit of the group, tied votes included
        for i, unit in enumerate(ceiling_table.units):
            for value, _ in group_of(unit):
                ceiling_members.setdefault(value, []).append(i)
    rows = []
    for value in sorted(members, key=lambda v: (v == "", _sort_key(v))):
        part = table.subset(members[value])
        comparison = coefficient(key, part.values, part.categories, n_boot=n_boot, seed=seed,
                                 clusters=unit_clusters(part.units, bootstrap_by))
        ceiling, n_ceiling = None, 0
        if ceiling_table is not None:
            sub = ceiling_table.subset(ceiling_members.get(value, []))
            ceiling = coefficient(key, sub.values, sub.categories, n_boot=n_boot, seed=seed,
                                  clusters=unit_clusters(sub.units, bootstrap_by))
            n_ceiling = len(sub.units)
        rows.append(BreakdownRow(value, labels[value], len(part.units), comparison, ceiling,
                                 n_ceiling))
    return Breakdown(by, key, coefficient_name(key), rows)


def _sort_key(value: str):
    return (0, float(value), value) if value.replace(".", "", 1).isdigit() else (1, 0.0, value)


def _unit_key(u: Unit) -> tuple:
    return (u.item_uid, u.question_key, u.target)


def _ceiling_table(
    answers: Answers, table: RatingsTable, specs: list[str]
) -> tuple[RatingsTable | None, str | None]:
    """The clinicians' own table on the units the comparison is about, and a note saying
    which units those are; (None, None) when no ceiling applies.

    It applies when two or more clinicians answered, neither side is the clinicians
    group itself, and the comparison is not already the clinicians' own agreement (each
    side one clinician, or a majority of one, and no clinician beside them). Its units:
    those every named rater of the comparison answered (any unit when both sides are
    groups) that two or more clinicians rated. Units where the clinicians tied count:
    the majority has no label there, but the clinicians' disagreement is the ceiling's
    point."""
    members = clinicians(answers)
    sides = [normalise_spec(s) for s in specs]
    if CLINICIANS in sides or len(members) < 2:
        return None, None
    left_out = left_out_clinicians(answers, specs)
    voices = [set(voters(answers, left_out)) if s in DERIVED else {s} for s in sides]
    if all(len(v) == 1 and v <= set(members) for v in voices) and set(members) <= set().union(
            *voices):
        return None, None
    named = [s for s in sides if s not in DERIVED]
    about = None
    if named:
        columns = [table.columns.index(s) for s in dict.fromkeys(named)]
        about = {_unit_key(u) for u, row in zip(table.units, table.values, strict=True)
                 if all(row[c] is not None for c in columns)}
    full = table_for(answers, [CLINICIANS])
    keep = [i for i, (u, row) in enumerate(zip(full.units, full.values, strict=True))
            if (about is None or _unit_key(u) in about) and sum(v is not None for v in row) >= 2]
    what = ("both raters answered" if len(set(named)) >= 2 else
            f"{named[0]} answered" if named else "any clinician answered")
    n = len(keep)
    note = (f"the clinicians' ceiling ({', '.join(full.columns)} among themselves) is computed "
            f"on the {n} unit{'' if n == 1 else 's'} {what} that two or more clinicians rated")
    if any(s in DERIVED for s in sides):
        note += (", tied votes included (the comparison itself has no majority label on a "
                 "tied unit)")
    return full.subset(keep), note


def set_aside_of(answers: Answers, specs: list[str], columns: list[str]) -> dict[str, int]:
    """The set-aside answers of the clinicians a comparison is about: the named ones, and
    every clinician when a side is a group."""
    names = set(columns)
    if any(normalise_spec(s).startswith("group:") for s in specs):
        names |= set(answers.set_aside)
    return {n: c for n, c in sorted(answers.set_aside.items()) if n in names}


def set_aside_note(set_aside: dict[str, int], phase: str) -> str | None:
    """The words for answers a phase choice left out, or None."""
    total = sum(set_aside.values())
    if not total:
        return None
    who = ", ".join(f"{n} {c}" for n, c in set_aside.items())
    return (f"{total} clinician answer{'' if total == 1 else 's'} whose latest version is not "
            f"among the {describe_phase(phase)} set aside ({who}): each clinician's answer of "
            "that phase is compared where there is one; choose current answers (--phase "
            "current) to compare the latest instead")


def _like_with_like(answers: Answers, table: RatingsTable, specs: list[str]):
    """Each clinician against the majority of the other clinicians, where a comparison
    sets a rater (not a clinician) against the clinicians' majority: (rows of
    [clinician, others' majority], the unit of each row, a note), or None when it does not
    apply. Units: those the rater answered, where two or more other clinicians answered
    and their majority is not tied. Rows of one unit are correlated, so they are resampled
    together (by unit, or by case)."""
    sides = [normalise_spec(s) for s in specs]
    members = clinicians(answers)
    if len(sides) != 2 or MAJORITY not in sides or len(members) < 3:
        return None
    other = next(s for s in sides if s != MAJORITY)
    if other in DERIVED or other == CLINICIANS or other in members:
        return None  # a clinician against the majority is already leave-one-out
    answered = set(answers.values.get(other, {}))
    rows, units = [], []
    for index in sorted(answered):
        votes = {m: answers.values[m][index] for m in members if index in answers.values[m]}
        for me, mine in votes.items():
            others = [v for m, v in votes.items() if m != me]
            if len(others) < 2:
                continue  # a majority of one clinician is not a majority
            if len(others) == 2:  # two others: a majority when they agree, else a tie
                if others[0] != others[1]:
                    continue
                said = others[0]
            else:
                top = Counter(others).most_common(2)
                if len(top) > 1 and top[0][1] == top[1][1]:
                    continue
                said = top[0][0]
            rows.append([mine, said])
            units.append(answers.units[index])
    n_units = len({(u.item_uid, u.question_key, u.target) for u in units})
    note = (f"like with like: beside {display_name(other)} against the clinicians' majority, "
            f"each clinician against the majority of the other clinicians, pooled over "
            f"{len(rows)} (clinician, unit) pairs on {n_units} units {display_name(other)} "
            "answered where two or more other clinicians answered and agree on a majority "
            "(a majority of one clinician is not a majority)")
    return rows, units, note


@with_collector_paused
def compare_answers(
    answers: Answers,
    a: str,
    b: str | None = None,
    *,
    by: tuple[str, ...] | list[str] = (),
    forest_key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    bootstrap_by: str = "auto",
) -> ComparisonReport:
    """:func:`compare` on answers already loaded (several views share one read)."""
    specs = [a] + ([b] if b else [])
    table = table_for(answers, specs)
    if len(table.columns) < 2:
        raise ValueError(
            f"{display_name(a)} alone: choose rater B, or a group such as all clinicians for A"
        )
    qs = table.question_set
    pair = len(table.columns) == 2
    compared = _compared_rows(table)
    clusters = unit_clusters(table.units, bootstrap_by)
    scale = dict(values=qs.values, weights=qs.weights)  # a codebook's interval numbers, weights
    coefficients = agreement_table(table.values, qs.categories, qs.level, n_boot=n_boot, seed=seed,
                                   clusters=clusters, **scale)
    left_out = left_out_clinicians(answers, specs)
    report = ComparisonReport(
        question_set=qs, a=a, b=b, a_label=group_label(a, left_out),
        b_label=group_label(b, left_out) if b else None,
        raters=list(table.columns), filters=answers.filters, n_units=len(compared),
        coefficients=coefficients, notes=list(table.notes), n_boot=n_boot, seed=seed,
        created_at=utcnow(),
    )
    report.data, report.database_file = answers.digest(), answers.database_file
    if clusters is not None:
        report.resampled = "cases"
        report.clusters = len({clusters[i] for i in compared})
    report.set_aside = set_aside_of(answers, specs, table.columns)
    if said := set_aside_note(report.set_aside, answers.filters.phase):
        report.notes.append(said)
    given = [v for i in compared for v in table.values[i] if v is not None]
    report.answer_counts = {c: given.count(c) for c in qs.categories}
    if pair:
        both = table.subset(compared)
        macro = coefficient("macro_f1", both.values, qs.categories, n_boot=n_boot, seed=seed,
                            clusters=unit_clusters(both.units, bootstrap_by))
        left_out = len(table.units) - len(compared)
        if left_out:  # the same words agreement_table uses, so the note is said once
            said = f"{left_out} unit{'' if left_out == 1 else 's'} answered by only one of the " \
                   "two raters left out"
            macro = replace(macro, note="; ".join(x for x in (said, macro.note) if x))
        report.coefficients.append(macro)
        matrix = _confusion_matrix(table.column(0), table.column(1), table.categories)
        report.confusion, report.disagreements = _confusion(table, matrix)
        report.class_scores = class_scores_of(matrix)  # the same cross-table, made once
    elif b:
        report.notes.append(
            f"{len(table.columns)} raters in all: multi-rater coefficients over every member; "
            "compare with the clinicians' majority for a pairwise view"
        )
    ceiling_table, ceiling_note = _ceiling_table(answers, table, specs)
    if ceiling_table is not None:
        report.ceiling_raters = list(ceiling_table.columns)
        report.ceiling_units = len(ceiling_table.units)
        report.notes.append(ceiling_note)
        report.ceiling = agreement_table(
            ceiling_table.values, qs.categories, qs.level, n_boot=n_boot, seed=seed,
            clusters=unit_clusters(ceiling_table.units, bootstrap_by), **scale,
        )
    like = _like_with_like(answers, table, specs)
    if like is not None:
        rows, units, note = like
        report.like_with_like_pairs = len(rows)
        report.notes.append(note)
        if rows:
            report.like_with_like = agreement_table(
                rows, qs.categories, qs.level, n_boot=n_boot, seed=seed, **scale,
                clusters=unit_clusters(units, bootstrap_by) or [
                    f"{u.item_uid}\x00{u.question_key}\x00{u.target}" for u in units])
    report.breakdowns = [
        breakdown(table, ceiling_table, name, forest_key, n_boot=n_boot, seed=seed,
                  bootstrap_by=bootstrap_by) for name in by
    ]
    return report


@with_collector_paused
def compare(
    store: Store,
    a: str,
    b: str | None,
    questions: QuestionSet | str,
    filters: Filters | None = None,
    *,
    by: tuple[str, ...] | list[str] = (),
    forest_key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    bootstrap_by: str = "auto",
) -> ComparisonReport:
    """Rater (or group) A against rater (or group) B on a question set under filters.

    With two columns (two raters, or a rater and the clinicians' majority) this is a
    pairwise comparison with a confusion matrix; with a group on either side, the
    multi-rater coefficients are computed over every member. ``by`` adds per-group
    breakdowns (see ``BREAKDOWNS``) of ``forest_key`` (default: the level's first
    ``stats.forest_keys``)."""
    answers = load_answers(store, questions, filters)
    return compare_answers(answers, a, b, by=by, forest_key=forest_key, n_boot=n_boot, seed=seed,
                           bootstrap_by=bootstrap_by)


# -- clinicians with each other ------------------------------------------------


@dataclass
class PairwiseMatrix:
    """One coefficient for every pair of raters, on the units each pair shares."""

    raters: list[str]
    key: str
    name: str
    cells: list[list[Coefficient | None]]
    """cells[i][j] for i != j (symmetric); None on the diagonal."""


def pairwise_answers(answers: Answers, raters: list[str] | None = None, key: str | None = None,
                     *, n_boot: int = 1000, seed: int = 0) -> PairwiseMatrix:
    raters = list(raters) if raters else clinicians(answers)
    key = key or headline_key(answers.question_set.level, 2)
    k = len(raters)
    cells: list[list[Coefficient | None]] = [[None] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            table = table_for(answers, [raters[i], raters[j]])
            if len(table.columns) < 2:  # the same rater twice
                continue
            c = coefficient(key, table.values, table.categories, n_boot=n_boot, seed=seed)
            cells[i][j] = cells[j][i] = c
    return PairwiseMatrix(raters, key, coefficient_name(key), cells)


def pairwise_matrix(
    store: Store,
    questions: QuestionSet | str,
    raters: list[str] | None = None,
    filters: Filters | None = None,
    *,
    key: str | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> PairwiseMatrix:
    """Every pair of raters (default: the clinicians) on the units each pair shares,
    with the level's pairwise headline coefficient (weighted kappa for ordinal labels)."""
    answers = load_answers(store, questions, filters)
    return pairwise_answers(answers, raters, key, n_boot=n_boot, seed=seed)


def group_agreement(
    store: Store,
    questions: QuestionSet | str,
    filters: Filters | None = None,
    group: str = CLINICIANS,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> ComparisonReport:
    """A group's agreement among its members (Fleiss' kappa, Krippendorff's alpha,
    Gwet's AC1/AC2), missing ratings allowed."""
    return compare(store, group, None, questions, filters, n_boot=n_boot, seed=seed)
