"""Raters and rater groups, and the units x raters table a statistic is computed on.

A comparison names each side with a *rater spec*:

- a rater's name: a clinician (``Dr. Mei Tanaka``), a machine rater
  (``demo:mapper@v2``, ``openai:gpt-4.1@judge-v1``) or a reference
  (``carebench-gold``);
- ``group:clinicians``: every clinician, one column each (multi-rater
  statistics are computed over them);
- ``group:majority``: one column, the clinicians' most frequent answer on each
  unit (no majority on a tie);
- ``group:adjudicated``: one column, the settled answer where adjudication gave
  one, else the clinicians' majority (the report says how many units fell
  back).

Leave-one-out: when a clinician is compared with the majority (or the
adjudicated answers' majority fallback), that majority is taken over the *other*
clinicians only, so nobody is compared with a vote that contains their own
(:func:`table_for` decides this, and the table's notes say so).

Who counts as what (the one place this is decided): clinicians are the human
raters (reviewers, adjudicators reviewing items of their own, HealthBench
physicians); settled answers are the answers of the reference rater
``adjudicated`` that adjudication writes (``review.team.adjudication``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from labels.compare.answers import Answers, Filters, Unit, load_answers
from labels.compare.questions import QuestionSet
from store import Store

CLINICIANS = "group:clinicians"
MAJORITY = "group:majority"
ADJUDICATED = "group:adjudicated"
GROUPS = {
    CLINICIANS: "All clinicians",
    MAJORITY: "Clinicians' majority",
    ADJUDICATED: "Adjudicated",
}
ALIASES = {"group:humans": CLINICIANS, "group:all": CLINICIANS, "group:consensus": MAJORITY}
DERIVED = (MAJORITY, ADJUDICATED)
"""Groups that give one derived answer per unit from the clinicians' answers."""
ADJUDICATED_RATER = "adjudicated"
"""The reference rater whose answers are the settled ones (review.team.adjudication.ADJUDICATED;
labels/ may not import review/, so the name is repeated here and a test holds them equal)."""


@dataclass(frozen=True)
class RaterChoice:
    """One entry of the rater pickers."""

    spec: str
    label: str
    kind: str
    """group | human | machine | reference"""
    n: int
    """Units this rater (or group) answered under the filters."""


@dataclass
class RatingsTable:
    """Units x raters: the input of every agreement statistic."""

    question_set: QuestionSet
    columns: list[str]
    """Display name of each column (a rater, or a group's derived label)."""
    units: list[Unit]
    values: list[list[str | None]]
    """values[u][c]: column c's answer on unit u, None when it gave none."""
    notes: list[str] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        return list(self.question_set.categories)

    @property
    def level(self) -> str:
        return self.question_set.level

    def column(self, index: int) -> list[str | None]:
        return [row[index] for row in self.values]

    def subset(self, keep: list[int]) -> RatingsTable:
        """The same table on the units at these positions."""
        return RatingsTable(self.question_set, self.columns, [self.units[i] for i in keep],
                            [self.values[i] for i in keep], list(self.notes))


def normalise_spec(spec: str) -> str:
    spec = spec.strip()
    return ALIASES.get(spec.lower(), spec.lower() if spec.lower() in GROUPS else spec)


def clinicians(answers: Answers) -> list[str]:
    """Clinicians (human raters) who answered anything in this set, by name."""
    return sorted(n for n, r in answers.raters.items() if r.kind == "human" and answers.values.get(n))


def references(answers: Answers) -> list[str]:
    """Reference raters (dataset gold, verifiers) other than the settled answers."""
    return [n for n in answers.of_kind("reference") if n != ADJUDICATED_RATER]


def majority_labels(
    answers: Answers, members: list[str] | None = None
) -> tuple[dict[int, str], set[int]]:
    """Each unit's most frequent clinician answer; units with a tie get none.
    Returns (unit index -> answer, the tied units)."""
    if members is None:
        if "majority" not in answers.derived:
            answers.derived["majority"] = majority_labels(answers, clinicians(answers))
        return answers.derived["majority"]
    votes: dict[int, list[str]] = {}
    for name in members:
        for unit, value in answers.values.get(name, {}).items():
            votes.setdefault(unit, []).append(value)
    out, ties = {}, set()
    for unit, said in votes.items():
        if len(said) == 1 or (len(said) == 2 and said[0] == said[1]):
            out[unit] = said[0]  # one answer, or two the same: no count needed
            continue
        top = Counter(said).most_common(2)
        if len(top) > 1 and top[0][1] == top[1][1]:
            ties.add(unit)
        else:
            out[unit] = top[0][0]
    return out, ties


def adjudicated_labels(
    answers: Answers, members: list[str] | None = None
) -> tuple[dict[int, str], dict[int, str], set[int]]:
    """Settled answers (the ``adjudicated`` rater's) on each unit. Returns (settled,
    majority fallback for the units without one, tied units left without either).
    ``members``: the clinicians the fallback majority is taken over (default: all)."""
    settled = dict(answers.values.get(ADJUDICATED_RATER, {}))
    majority, ties = majority_labels(answers, members)
    fallback = {u: v for u, v in majority.items() if u not in settled}
    return settled, fallback, ties - settled.keys()


def single_votes(answers: Answers, units, members: list[str] | None = None) -> int:
    """How many of these units have one clinician's answer only (among ``members``,
    default all clinicians): a "majority" that is one person's reading."""
    votes = Counter()
    for name in clinicians(answers) if members is None else members:
        votes.update(answers.values.get(name, {}).keys())
    return sum(1 for u in units if votes[u] == 1)


def _one_voice(n: int, of: int) -> str:
    return (f"{n} of {of} units {'rests' if n == 1 else 'rest'} on one clinician's answer "
            "(no second clinician answered them)")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _tied(ties: set[int]) -> str:
    verb = "has" if len(ties) == 1 else "have"
    return f"{_plural(len(ties), 'unit')} with a tied clinician vote {verb} no majority label"


def left_out_clinicians(answers: Answers, specs: list[str]) -> list[str]:
    """The clinicians named on a side of a comparison whose other side is the clinicians'
    majority or the adjudicated answers: that group is built without them (leave-one-out).
    Empty when no such group is compared."""
    specs = [normalise_spec(s) for s in specs]
    if not any(s in DERIVED for s in specs):
        return []
    members = set(clinicians(answers))
    return [s for s in specs if s in members]


def voters(answers: Answers, left_out: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The clinicians a majority is taken over: every clinician but those left out."""
    return [m for m in clinicians(answers) if m not in left_out]


def _without(names: list[str]) -> str:
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + f" and {names[-1]}"


def group_label(spec: str, left_out: list[str] | tuple[str, ...] = ()) -> str:
    """How a side is named in a table and a report title (a leave-one-out group says whom
    it leaves out)."""
    spec = normalise_spec(spec)
    if spec in DERIVED and left_out:
        return f"{GROUPS[spec]} without {_without(list(left_out))}"
    return display_name(spec)


def _leave_one_out_note(spec: str, left_out, members: list[str]) -> str:
    what = "majority" if spec == MAJORITY else "adjudicated answers' majority fallback"
    others = _without(members) if members else "nobody"
    return (f"leave-one-out: the clinicians' {what} is taken over the other clinicians "
            f"({others}), not {_without(list(left_out))}, so no clinician is compared with "
            "a vote that includes their own")


def columns_for(
    answers: Answers, spec: str, left_out: list[str] | tuple[str, ...] = ()
) -> tuple[list[str], list[dict[int, str]], list[str]]:
    """A spec's columns: (names, unit -> answer for each, notes). ``left_out``: clinicians
    a derived group (majority, adjudicated) is built without (see :func:`table_for`)."""
    spec = normalise_spec(spec)
    if spec == CLINICIANS:
        members = clinicians(answers)
        if not members:
            raise ValueError("no clinician has answered this question set under these filters")
        return members, [answers.values[m] for m in members], []
    if spec in DERIVED and left_out:
        members = voters(answers, left_out)
        if not members and (spec == MAJORITY or not answers.values.get(ADJUDICATED_RATER)):
            raise ValueError(
                f"{_without(list(left_out))} is the only clinician who answered here: there is "
                "no other clinician to take a majority over"
            )
        loo = [_leave_one_out_note(spec, left_out, members)]
    else:
        members, loo = None, []
    if spec == MAJORITY:
        labels, ties = majority_labels(answers, members)
        notes = loo + ([_tied(ties)] if ties else [])
        if one := single_votes(answers, labels, members):
            notes.append(_one_voice(one, len(labels)))
        return [group_label(spec, left_out)], [labels], notes
    if spec == ADJUDICATED:
        settled, fallback, ties = adjudicated_labels(answers, members)
        notes = list(loo)
        if not settled:
            notes.append("no adjudicated answer to this question yet: the clinicians' majority "
                         "stands in")
        elif fallback:
            notes.append(f"{_plural(len(fallback), 'unit')} not adjudicated: the clinicians' "
                         "majority stands in")
        if ties:
            notes.append(_tied(ties))
        if one := single_votes(answers, fallback, members):
            notes.append(_one_voice(one, len(fallback) + len(settled)))
        return [group_label(spec, left_out)], [{**fallback, **settled}], notes
    if spec.startswith("group:"):
        known = ", ".join(GROUPS)
        raise ValueError(f"unknown rater group {spec!r}; groups: {known}")
    if spec not in answers.raters:
        named = ", ".join(sorted(answers.raters)) or "nobody"
        raise ValueError(
            f"rater {spec!r} gave no answer in this question set under these filters; "
            f"raters here: {named}"
        )
    return [spec], [answers.values.get(spec, {})], []


def table_for(answers: Answers, specs: list[str]) -> RatingsTable:
    """The units x raters table of these specs: units any of them answered, in unit order.
    Answers outside the codebook are left out (and counted in the notes). A clinician's
    majority (or adjudicated fallback) on another side leaves that clinician out."""
    names, columns, notes = [], [], []
    left_out = left_out_clinicians(answers, specs)
    for spec in specs:
        n, c, extra = columns_for(answers, spec, left_out)
        for name, column in zip(n, c, strict=True):
            if name in names:  # the same rater on both sides, or inside a group
                continue
            names.append(name)
            columns.append(column)
        notes += extra
    allowed = set(answers.question_set.categories)
    outside = 0
    rows, units = [], []
    for index in sorted(set().union(*[c.keys() for c in columns]) if columns else set()):
        row = []
        for column in columns:
            value = column.get(index)
            if value is not None and value not in allowed:
                outside += 1
                value = None
            row.append(value)
        if row.count(None) < len(row):
            rows.append(row)
            units.append(answers.units[index])
    if outside:
        notes.append(f"{_plural(outside, 'answer')} outside the codebook's labels left out")
    return RatingsTable(answers.question_set, names, units, rows, notes)


def ratings_for(
    store: Store,
    questions: QuestionSet | str,
    raters: list[str],
    filters: Filters | None = None,
) -> RatingsTable:
    """Units x raters table for a question set (or its name), rater specs and filters.

    Each unit is identified by ``table.units[i]`` (item uid, question key, target)."""
    return table_for(load_answers(store, questions, filters), list(raters))


def display_name(spec: str) -> str:
    spec = normalise_spec(spec)
    return GROUPS.get(spec, spec)


def rater_choices(answers: Answers) -> list[RaterChoice]:
    """Everyone who can be compared on this question set: the groups first, then
    references, machine raters and clinicians, each with the units they answered."""
    members = clinicians(answers)
    out = []
    if members:
        covered = len(set().union(*[answers.values[m].keys() for m in members]))
        majority, _ = majority_labels(answers)
        settled, fallback, _ = adjudicated_labels(answers)
        out += [
            RaterChoice(CLINICIANS, f"All clinicians ({len(members)})", "group", covered),
            RaterChoice(MAJORITY, GROUPS[MAJORITY], "group", len(majority)),
            RaterChoice(
                ADJUDICATED,
                "Adjudicated" if settled else "Adjudicated (none yet: clinicians' majority)",
                "group",
                len(settled) + len(fallback),
            ),
        ]
    order = {"reference": 0, "machine": 1, "human": 2}
    for name, info in sorted(answers.raters.items(), key=lambda x: (order.get(x[1].kind, 3), x[0])):
        n = len(answers.values.get(name, {}))
        if n:
            label = f"{name} (settled answers only)" if name == ADJUDICATED_RATER else name
            out.append(RaterChoice(name, label, info.kind, n))
    return out
