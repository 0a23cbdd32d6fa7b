"""Every role check goes through the matrix (review.team.access.MATRIX): change a
rule there and every function below the pages follows it, and no module outside
access.py compares a role by hand."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from review.team import access
from review.team.access import ADJUDICATORS, ADMINS, MATRIX, may
from review.team.activity import audit_entries
from review.team.adjudication import AdjudicationError, _require_adjudicator
from review.team.reviewers import Reviewer, can_adjudicate, ensure_reviewer, grant_role, is_admin
from review.team.rounds import RoundError, RoundSpec, create_round
from review.team.study import set_setting
from tests.conftest import ROOT

ROLE_NAMES = {"reviewer", "adjudicator", "admin"}


def person(role: str) -> Reviewer:
    return Reviewer(7, f"Dr. {role}", role)


@pytest.fixture
def rule(monkeypatch):
    """Set who may do an action, in both modes, for one test."""
    def set_rule(action: str, roles: frozenset[str]) -> None:
        monkeypatch.setitem(MATRIX, action, dataclasses.replace(
            MATRIX[action], server=roles, local=roles))
    return set_rule


def test_adjudicating_follows_the_matrix(rule):
    assert can_adjudicate(person("adjudicator"))
    rule("adjudicate", ADMINS)
    assert not can_adjudicate(person("adjudicator"))
    with pytest.raises(AdjudicationError, match="only an adjudicator"):
        _require_adjudicator(person("adjudicator"), "settle")


def test_administering_follows_the_matrix(store, rule):
    admin = ensure_reviewer(store, "Dr. Admin", role="admin")
    ensure_reviewer(store, "Dr. Other")
    rule("grant_roles", frozenset())
    with pytest.raises(ValueError, match="only an admin can grant roles"):
        grant_role(store, admin, "Dr. Other", "adjudicator")
    rule("manage_rounds", frozenset())
    assert not is_admin(admin)
    with pytest.raises(RoundError, match="only an admin"):
        create_round(store, RoundSpec("r", "carebench.escalation_needed"), admin)
    rule("study_settings", frozenset())
    with pytest.raises(PermissionError):
        set_setting(store, admin, "reviewers_add_tags", True)


def test_reading_the_whole_audit_log_follows_the_matrix(store, rule):
    a = ensure_reviewer(store, "Dr. A", role="adjudicator")
    ensure_reviewer(store, "Dr. B")
    assert {e.actor for e in audit_entries(store, viewer=a)} >= {"Dr. A", "Dr. B"}
    rule("audit_log", ADMINS)
    assert {e.actor for e in audit_entries(store, viewer=a)} == {"Dr. A"}


def test_may_refuses_an_action_that_depends_on_the_mode():
    with pytest.raises(ValueError, match="depends on the mode"):
        may(person("admin"), "import")
    assert may(person("admin"), "adjudicate") and not may(None, "adjudicate")
    assert MATRIX["adjudicate"].server == ADJUDICATORS


def _role_comparisons(path: Path) -> list[str]:
    """`x.role == 'admin'`, `role in ('adjudicator', 'admin')`, ... in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        names = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None)
                 for n in [node.left, *node.comparators]}
        constants = {c.value for n in [node.left, *node.comparators] for c in ast.walk(n)
                     if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        if "role" in names and constants & ROLE_NAMES:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_role_is_compared_by_hand_outside_the_matrix():
    """Permission checks ask access.py; what stays is where a role is given (the
    grant itself, the sign-in that makes an admin from the configuration)."""
    giving_roles = {"review/team/reviewers.py", "review/team/identity.py"}
    files = [p for d in ("review", "labels", "pages") for p in (ROOT / d).rglob("*.py")]
    files += [ROOT / "cli.py", ROOT / "app.py"]
    found = [f for p in files if str(p.relative_to(ROOT)) not in giving_roles
             and p != Path(access.__file__) for f in _role_comparisons(p)]
    assert found == []
