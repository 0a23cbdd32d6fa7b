"""What the study allows, as its admins set it: settings kept append-only
(`study_settings`; the newest row of a key is in force), each with a default.

    allows(store, "reviewers_add_tags")      # False until an admin says so
    set_setting(store, admin, "reviewers_add_tags", True)
"""

from __future__ import annotations

from dataclasses import dataclass

from review.team.access import may
from review.team.reviewers import Reviewer
from store import Store, from_json, to_json, utcnow


@dataclass(frozen=True)
class Setting:
    key: str
    words: str
    """What it allows, in the words a settings screen shows."""
    default: bool


SETTINGS: dict[str, Setting] = {s.key: s for s in (
    Setting("reviewers_add_tags", "Reviewers may add tags to the list (admins always may)",
            False),
)}


def allows(store: Store, key: str) -> bool:
    """The setting in force (its default until an admin sets it)."""
    setting = SETTINGS[key]
    raw = store.scalar("SELECT value FROM study_settings WHERE key = ? ORDER BY id DESC LIMIT 1",
                       (key,))
    return setting.default if raw is None else bool(from_json(raw))


def set_setting(store: Store, admin: Reviewer, key: str, value: bool) -> None:
    """An admin sets what the study allows (one transaction, audited)."""
    if key not in SETTINGS:
        raise ValueError(f"no study setting {key!r}")
    if not may(admin, "study_settings"):
        raise PermissionError("only an admin can change what the study allows")
    before = allows(store, key)
    with store.transaction() as conn:
        conn.execute("INSERT INTO study_settings (key, value, set_by, set_at) VALUES (?,?,?,?)",
                     (key, to_json(bool(value)), admin.name, utcnow()))
        store.audit(admin.name, "study_setting", "study_settings", None,
                    {"key": key, "value": before}, {"key": key, "value": bool(value)})
