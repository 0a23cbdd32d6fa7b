"""Anchoring: do clinicians move toward the machine label once it is revealed?

A *revision* is a unit where a clinician gave a blind answer and later, after
the machine and reference labels were revealed, an after-reveal answer. The
blind answer is the newest blind one given before the first after-reveal
answer; the after-reveal answer is the newest after-reveal one. Each revision
is classed against the label of the chosen machine rater *that the clinician was
shown* before that answer, as the reveal recorded it (``reveals``,
``review.reviewing.reveals``): a machine run after the clinicians answered, or a
label changed since, does not move the result. A revision with no record of what
was shown (given before reveals were recorded, or imported) is measured against
the machine's label now, and the report says how many were:

- ``unchanged``: the clinician kept the blind answer;
- ``adopted``: moved onto the machine label;
- ``toward``: moved closer to it without reaching it (ordinal labels only);
- ``away``: moved off the machine label, or further from it;
- ``other``: changed, neither toward nor away (a nominal label, or the same
  distance on the other side).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codebook import CANNOT_ASSESS
from labels.compare.answers import Filters, run_clause
from labels.compare.questions import QuestionSet, question_set
from labels.provenance import Digest
from store import Store

DIRECTIONS = ("unchanged", "adopted", "toward", "away", "other")
DIRECTION_WORDS = {
    "unchanged": "kept the blind answer",
    "adopted": "adopted the machine label",
    "toward": "moved toward the machine label",
    "away": "moved away from the machine label",
    "other": "changed, neither toward nor away",
}


@dataclass(frozen=True)
class Revision:
    item_uid: str
    item_kind: str
    question_key: str
    rater: str
    blind: str
    """The blind answer (a code, or "cannot_assess")."""
    after: str
    machine: str
    """The machine's label it is classed against."""
    direction: str
    as_shown: bool = True
    """The label is the one the clinician was shown (False: no record of the reveal;
    the machine's label now)."""


@dataclass(frozen=True)
class Share:
    count: int
    n: int
    value: float | None
    undefined_reason: str | None = None


def share(count: int, n: int, of: str) -> Share:
    """count / n, or None with the reason when n is 0."""
    if n == 0:
        return Share(count, 0, None, f"no {of}")
    return Share(count, n, count / n)


@dataclass
class AnchoringRow:
    rater: str
    """A clinician's name, or "All clinicians"."""
    blind_answers: int
    """Units this clinician answered blind."""
    revisited: Share
    """Blind answers answered again after the reveal, of all blind answers."""
    revisions: int
    counts: dict[str, int]
    """direction -> revisions."""
    changed: Share
    """Revisions where the answer changed, of all revisions."""
    toward: Share
    """Changes that adopted or moved toward the machine label, of all changes."""
    away: Share
    """Changes that moved away from it, of all changes."""
    agree_before: Share
    """Blind answers equal to the machine label, of all revisions."""
    agree_after: Share
    """After-reveal answers equal to the machine label, of all revisions."""


@dataclass
class AnchoringReport:
    question_set: QuestionSet
    machine: str | None
    machines: list[str]
    """Machine raters whose label could have been revealed on these units, the most
    shown first."""
    filters: Filters
    rows: list[AnchoringRow]
    revisions: list[Revision]
    notes: list[str] = field(default_factory=list)
    explanation: str | None = None
    shown: dict[str, int] = field(default_factory=dict)
    """machine -> revisions on which its label was recorded as shown."""
    data: Digest | None = field(default=None, repr=False, compare=False)


def direction(blind: str, after: str, machine: str, categories: list[str], ordinal: bool) -> str:
    """How a revision moved relative to the machine label (see the module docstring)."""
    if after == blind:
        return "unchanged"
    if after == machine:
        return "adopted"
    if blind == machine:
        return "away"
    rank = {c: i for i, c in enumerate(categories)}
    if not ordinal or any(x not in rank for x in (blind, after, machine)):
        return "other"
    before, now = abs(rank[blind] - rank[machine]), abs(rank[after] - rank[machine])
    return "toward" if now < before else "away" if now > before else "other"


def _row(rater: str, revisions: list[Revision], blind_answers: int) -> AnchoringRow:
    counts = {d: sum(r.direction == d for r in revisions) for d in DIRECTIONS}
    n = len(revisions)
    changed = n - counts["unchanged"]
    return AnchoringRow(
        rater=rater,
        blind_answers=blind_answers,
        revisited=share(n, blind_answers, "blind answer"),
        revisions=n,
        counts=counts,
        changed=share(changed, n, "revision after the reveal"),
        toward=share(counts["adopted"] + counts["toward"], changed, "changed answer"),
        away=share(counts["away"], changed, "changed answer"),
        agree_before=share(sum(r.blind == r.machine for r in revisions), n, "revision"),
        agree_after=share(sum(r.after == r.machine for r in revisions), n, "revision"),
    )


def _filter_sql(store: Store, filters: Filters) -> tuple[str, list]:
    clauses, params = [], []
    for column, value in (("i.split", filters.split), ("i.round_id", filters.round_id),
                          ("d.name", filters.dataset)):
        if value not in (None, ""):
            clauses.append(f"{column} = ?")
            params.append(value)
    clause, clause_params = run_clause(store, filters)
    if clause:
        clauses.append(clause)
        params.extend(clause_params)
    return "".join(" AND " + c for c in clauses), params


def anchoring(
    store: Store,
    questions: QuestionSet | str,
    filters: Filters | None = None,
    machine: str | None = None,
) -> AnchoringReport:
    """Blind answers against after-reveal answers, classed against the label of
    ``machine`` each clinician was shown (default: the machine whose label was shown on
    the most revisions; without any record of a reveal, the one with a label on the most
    revised units), per clinician and overall. The category filter is not applied here
    (revisions are few)."""
    qs = question_set(store, questions) if isinstance(questions, str) else questions
    filters = filters or Filters()
    extra, params = _filter_sql(store, filters)
    rows = store.query(
        f"""SELECT a.id, a.item_id, a.question_id, a.target, a.phase, a.status, a.value,
                   a.created_at, r.name AS rater, i.uid, i.kind, q.key
            FROM annotations a JOIN raters r ON r.id = a.rater_id
            JOIN questions q ON q.id = a.question_id JOIN items i ON i.id = a.item_id
            JOIN datasets d ON d.id = i.dataset_id
            WHERE {qs.where} AND r.kind = 'human' AND a.phase IN ('blind', 'after_reveal')
              AND a.status IN ('answered', 'cannot_assess') {extra}
            ORDER BY a.id""",
        (*qs.params, *params),
    )
    history: dict[tuple, list] = {}
    for row in rows:
        history.setdefault((row["item_id"], row["question_id"], row["target"], row["rater"]),
                           []).append(row)
    pairs, blind_units = [], {}
    for key, answers in history.items():
        if any(a["phase"] == "blind" for a in answers):
            blind_units[key[3]] = blind_units.get(key[3], 0) + 1
        first_after = next((i for i, a in enumerate(answers) if a["phase"] == "after_reveal"), None)
        if first_after is None:
            continue
        blind = [a for a in answers[:first_after] if a["phase"] == "blind"]
        if not blind:
            continue
        after = [a for a in answers if a["phase"] == "after_reveal"][-1]
        pairs.append((key, blind[-1], after))
    report = AnchoringReport(qs, machine, [], filters, [], [])
    if not pairs:
        report.explanation = (
            "No clinician has revised a blind answer after the reveal on this question set, "
            "so there is no anchoring to measure yet."
        )
        return report
    revised = {key[:3] for key, _, _ in pairs}
    shown = _shown_labels(store, qs, {key for key, _, _ in pairs})
    machine_rows = store.query(
        f"""SELECT c.item_id, c.question_id, c.target, r.name, c.value FROM current_annotations c
            JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id
            WHERE r.kind = 'machine' AND c.status = 'answered' AND {qs.where}""",
        qs.params,
    )
    now: dict[str, dict[tuple, str]] = {}
    for r in machine_rows:
        unit = (r["item_id"], r["question_id"], r["target"])
        if unit in revised:
            now.setdefault(r["name"], {})[unit] = r["value"]
    # What each revision's clinician was shown before answering again: machine -> label.
    seen: dict[tuple, dict[str, str]] = {}
    for key, _, after in pairs:
        before = [v for v in shown.get(key, []) if v["shown_at"] <= after["created_at"]]
        if before:
            seen[key] = {v["machine"]: v["value"] for v in before}  # in order: latest wins
    report.shown = {}
    for labels in seen.values():
        for m in labels:
            report.shown[m] = report.shown.get(m, 0) + 1
    report.machines = sorted(set(now) | set(report.shown),
                             key=lambda m: (-report.shown.get(m, 0), -len(now.get(m, {})), m))
    if machine is None and report.machines:
        machine = report.machines[0]
    report.machine = machine
    if machine is None or machine not in report.machines:
        report.explanation = (
            f"{len(pairs)} answers were revised after the reveal, but no machine label "
            f"{'from ' + machine + ' ' if machine else ''}is on those items to measure against."
        )
        return report
    categories, ordinal = list(qs.categories), qs.level == "ordinal"
    missing = not_shown = unrecorded = 0
    digest = Digest()
    for key, blind, after in pairs:
        if key in seen:
            label, as_shown = seen[key].get(machine), True
            if label is None:
                not_shown += 1
                continue
        else:
            label, as_shown = now.get(machine, {}).get(key[:3]), False
            if label is None:
                missing += 1
                continue
            unrecorded += 1
        b = blind["value"] if blind["status"] == "answered" else CANNOT_ASSESS
        a = after["value"] if after["status"] == "answered" else CANNOT_ASSESS
        report.revisions.append(Revision(
            blind["uid"], blind["kind"], blind["key"], key[3], b, a, label,
            direction(b, a, label, categories, ordinal), as_shown,
        ))
        digest.add(blind["key"], blind["uid"], key[2], key[3], b, a, machine, label, as_shown)
    report.data = digest
    if not_shown:
        report.notes.append(f"{not_shown} revision{'' if not_shown == 1 else 's'} left out: "
                            f"the clinician was shown other machines' labels, not {machine}'s")
    if unrecorded:
        report.notes.append(
            f"{unrecorded} revision{'' if unrecorded == 1 else 's'} with no record of what was "
            f"shown (given before reveals were recorded, or imported): measured against "
            f"{machine}'s label now, which may not be the label the clinician saw")
    if missing:
        report.notes.append(f"{missing} revisions are on items without a label from {machine}")
    by_rater: dict[str, list[Revision]] = {}
    for revision in report.revisions:
        by_rater.setdefault(revision.rater, []).append(revision)
    report.rows = [_row(name, by_rater.get(name, []), blind_units[name])
                   for name in sorted(blind_units)]
    report.rows.append(_row("All clinicians", report.revisions, sum(blind_units.values())))
    return report


def _shown_labels(store: Store, qs: QuestionSet, keys: set[tuple]) -> dict[tuple, list]:
    """(item, question, target, clinician) -> the machine labels of that unit recorded as
    shown to that clinician, oldest first: {machine, value, shown_at}."""
    if not keys:
        return {}
    rows = store.query(
        f"""SELECT a.item_id, a.question_id, a.target, c.name AS clinician, m.name AS machine,
                   a.value, v.shown_at
            FROM reveals v JOIN annotations a ON a.id = v.annotation_id
            JOIN raters m ON m.id = a.rater_id JOIN raters c ON c.id = v.rater_id
            JOIN questions q ON q.id = a.question_id
            WHERE m.kind = 'machine' AND a.status = 'answered' AND {qs.where}
            ORDER BY v.shown_at, v.id""", qs.params)
    out: dict[tuple, list] = {}
    for r in rows:
        key = (r["item_id"], r["question_id"], r["target"], r["clinician"])
        if key in keys:
            out.setdefault(key, []).append(r)
    return out
