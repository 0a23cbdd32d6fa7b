"""Who did what: the audit log and each reviewer's progress and pace."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime

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
    if viewer is not None and viewer.role not in ("adjudicator", "admin"):
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
