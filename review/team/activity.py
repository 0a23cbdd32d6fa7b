"""Who did what: the audit log and each reviewer's progress and pace."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime

from review.team.access import may
from review.team.reviewers import PEOPLE, Reviewer
from store import Store


@dataclass
class AuditEntry:
    id: int
    at: str
    actor: str
    action: str
    entity: str
    entity_id: int | None
    old: object
    new: object


def audit_actions(store: Store) -> list[str]:
    return [r[0] for r in store.query("SELECT DISTINCT action FROM audit_log ORDER BY 1")]


def audit_actors(store: Store) -> list[str]:
    return [r[0] for r in store.query("SELECT DISTINCT actor FROM audit_log ORDER BY 1")]


def audit_entries(store: Store, actor: str | None = None, action: str | None = None,
                  since: str | None = None, until: str | None = None,
                  limit: int = 500, viewer: Reviewer | None = None) -> list[AuditEntry]:
    """Newest first, filtered by actor, action and an ISO date range. For a
    `viewer` who is a plain reviewer, only their own entries: the log holds
    every answer's value and rationale, which a reviewer must not read before
    giving their own (adjudicators and admins see the whole log)."""
    clauses, params = [], []
    if viewer is not None and not may(viewer, "audit_log"):
        clauses.append("actor = ?")
        params.append(viewer.name)
    for column, value in (("actor", actor), ("action", action)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if since:
        clauses.append("at >= ?")
        params.append(since)
    if until:
        clauses.append("at < ?")
        params.append(until)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = store.query(f"SELECT * FROM audit_log {where} ORDER BY id DESC LIMIT ?", (*params, limit))
    return [AuditEntry(r["id"], r["at"], r["actor"], r["action"], r["entity"], r["entity_id"],
                       json.loads(r["old"]) if r["old"] else None,
                       json.loads(r["new"]) if r["new"] else None) for r in rows]


@dataclass
class ReviewerProgress:
    name: str
    role: str
    specialty: str | None
    answers: int
    """Answers given in the app (not imported), revisions included."""
    imported: int
    """Answers that came in with an import (a spreadsheet, a study's files)."""
    items: int
    """Distinct items answered."""
    revisions: int
    skips: int
    cannot_assess: int
    flags: int
    median_seconds: float | None
    """Median time on item."""
    per_hour: float | None
    """Answers per hour of active work (gaps over 10 minutes not counted)."""
    last_active: str | None


def reviewer_progress(store: Store) -> list[ReviewerProgress]:
    out = []
    for r in store.query(f"SELECT id, name, role, specialty FROM raters WHERE {PEOPLE} ORDER BY name"):
        rows = store.query(
            "SELECT status, supersedes_id, seconds_on_task, created_at, item_id FROM annotations"
            " WHERE rater_id = ? AND source != 'import' ORDER BY id", (r["id"],))
        times = [x["seconds_on_task"] for x in rows if x["seconds_on_task"] is not None]
        stamps = [datetime.fromisoformat(x["created_at"]) for x in rows]
        active = sum(min((b - a).total_seconds(), 600) for a, b in zip(stamps, stamps[1:], strict=False))
        flags = store.scalar("SELECT COUNT(*) FROM flags WHERE rater_id = ? AND raised = 1", (r["id"],))
        imported = store.scalar("SELECT COUNT(*) FROM annotations WHERE rater_id = ? AND source = 'import'",
                                (r["id"],))
        out.append(ReviewerProgress(
            name=r["name"], role=r["role"] or "reviewer", specialty=r["specialty"],
            answers=len(rows), imported=imported, items=len({x["item_id"] for x in rows}),
            revisions=sum(1 for x in rows if x["supersedes_id"]),
            skips=sum(1 for x in rows if x["status"] == "skipped"),
            cannot_assess=sum(1 for x in rows if x["status"] == "cannot_assess"),
            flags=flags,
            median_seconds=round(statistics.median(times), 1) if times else None,
            per_hour=round(len(rows) / (active / 3600), 1) if active > 0 else None,
            last_active=rows[-1]["created_at"] if rows else None,
        ))
    return out


# -- the audit log in words --------------------------------------------------------------

@dataclass(frozen=True)
class AuditLine:
    """One audit entry as a study lead reads it: who did what to which item, and
    the value before and after. The raw entry stays beside it."""

    entry: AuditEntry
    what: str
    """What was done, in words ('answered', 'took a place in round Pilot')."""
    item: str
    """The item's id as the screens show it, or ''."""
    change: str
    """'Ask first → See a clinician', a note, or ''."""


def _answer_words(value: object, status: object = "answered") -> str:
    from review.browse.facets import label_name  # the one naming of label codes

    if status == "skipped":
        return "skipped"
    if status == "cannot_assess" or value is None:
        return "cannot assess"
    return {"met": "Met", "not_met": "Not met"}.get(str(value)) or label_name(str(value))


def _names(store: Store, table: str, column: str, ids: set) -> dict:
    ids = {i for i in ids if isinstance(i, int)}
    if not ids:
        return {}
    return {r[0]: r[1] for r in store.query(
        f"SELECT id, {column} FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(ids)),))}


def audit_lines(store: Store, entries: list[AuditEntry]) -> list[AuditLine]:
    """The entries in words: item and round ids named, label codes in the codebook's
    words, a changed answer as old → new."""
    def field(e: AuditEntry, key: str, side: str = "new"):
        value = e.new if side == "new" else e.old
        return value.get(key) if isinstance(value, dict) else None

    items = _names(store, "items", "uid", {field(e, "item_id") for e in entries})
    rounds = _names(store, "review_rounds", "name", {field(e, "round_id") for e in entries}
                    | {e.entity_id for e in entries if e.entity == "review_rounds"})
    raters = _names(store, "raters", "name",
                    {e.entity_id for e in entries if e.entity == "raters"})
    out = []
    for e in entries:
        new = e.new if isinstance(e.new, dict) else {}
        old = e.old if isinstance(e.old, dict) else {}
        item = items.get(new.get("item_id"), "")
        round_name = rounds.get(new.get("round_id")) or rounds.get(e.entity_id, "")
        in_round = f" in round {round_name}" if new.get("round_id") and round_name else ""
        target = str(new.get("target") or "").replace("step:", "step ")
        on = f" ({target})" if target else ""
        said = _answer_words(new.get("value"), new.get("status")) if new else ""
        what, change = e.action.replace("_", " "), ""
        why = f" · “{new['rationale']}”" if new.get("rationale") else ""
        if e.action == "answer":
            what = f"answered{on}{in_round}"
            change = said + why
        elif e.action == "revise":
            what = f"changed an answer{on}{in_round}"
            change = f"{_answer_words(old.get('value'), old.get('status'))} → {said}{why}"
        elif e.action == "skip":
            what = f"skipped{in_round}"
            change = str(new.get("rationale") or "")
        elif e.action in ("adjudicate", "settle_unanimous", "reopen_settlement"):
            what = {"adjudicate": "settled", "settle_unanimous": "settled (the clinicians agreed)",
                    "reopen_settlement": "reopened a settlement"}[e.action] + on
            before = _answer_words(old.get("value"), old.get("status")) if old else ""
            change = (f"{before} → " if before else "") + said
            if new.get("reason") and e.action == "adjudicate":
                change += f" · reason: {new['reason'].replace('_', ' ')}"
        elif e.action in ("reserve", "release", "complete_review"):
            what = {"reserve": "took a place", "release": "gave back a place",
                    "complete_review": "completed a review"}[e.action] + in_round
            change = str(new.get("reason") or "")
        elif e.action in ("flag", "unflag"):
            what = "flagged the item" if e.action == "flag" else "cleared a flag"
            change = str(new.get("note") or "")
        elif e.action in ("tag", "untag"):
            what = f"{'tagged' if e.action == 'tag' else 'took off the tag'} “{new.get('tag')}”{on}"
            change = str(new.get("note") or "")
        elif e.action == "tag_create":
            what = f"added the tag “{new.get('name')}” to the list"
            change = str(new.get("description") or "")
        elif e.action == "create_round":
            what = f"created round {new.get('name')}"
            change = (f"{new.get('items')} items, {new.get('reviewers_per_item')} reviewers each,"
                      f" {str(new.get('blinding', '')).replace('_', ' ')}")
        elif e.action == "name_round_members":
            what = f"named the reviewers of round {round_name}"
            change = (f"{', '.join(old.get('members') or []) or 'anyone'} → "
                      f"{', '.join(new.get('members') or []) or 'anyone'}")
        elif e.action == "grant_role":
            what = f"changed the role of {raters.get(e.entity_id, 'a reviewer')}"
            change = f"{old.get('role')} → {new.get('role')}"
        elif e.action in ("add_reviewer", "sign_in_first"):
            what = f"added reviewer {new.get('name')}"
            change = str(new.get("role") or "")
        elif e.action == "labels_opened":
            what = f"chose to see every rater's labels on {new.get('screen')}"
            left = new.get("unanswered")
            change = f"{left} items still waiting for a blind answer" if left else ""
        elif e.action == "import":
            what = f"imported {new.get('format')}"
            change = f"{new.get('rows')} rows, {new.get('items')} items, " \
                     f"{new.get('annotations')} answers"
        elif e.action in ("codebook_load", "codebook_edit"):
            what = f"{'loaded' if e.action == 'codebook_load' else 'edited'} codebook " \
                   f"{new.get('codebook')}"
            change = f"version {new.get('version')}" if new.get("version") else ""
        out.append(AuditLine(e, what, item, change))
    return out
