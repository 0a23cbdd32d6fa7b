"""Admins derive from the configuration, not from a flag kept in the database: a
person taken off CARELENS_ADMINS (or the secrets' admins) is an admin no more from
their next request, however they became one, and the change is audited."""

from __future__ import annotations

import json

import pytest

from review.team.identity import (
    admins_from,
    configured_admins,
    identity_from_claims,
    reviewer_for_identity,
)
from review.team.reviewers import ensure_reviewer, grant_role

IDP = "https://idp.example.org"
ADA = {"iss": IDP, "sub": "ada-sub", "email": "ada@example.org", "email_verified": True,
       "name": "Ada Admin"}
BO = {"iss": IDP, "sub": "bo-sub", "name": "Bo Boss"}


def sign_in(store, admins, claims):
    return reviewer_for_identity(store, identity_from_claims(claims), admins)


def test_an_admin_taken_off_the_list_is_an_admin_no_more(store):
    both = admins_from(f"ada@example.org {IDP}#bo-sub")
    ada = sign_in(store, both, ADA)
    assert ada.role == "admin" and sign_in(store, both, BO).role == "admin"
    only_bo = admins_from(f"{IDP}#bo-sub")
    again = sign_in(store, only_bo, ADA)
    assert (again.id, again.role) == (ada.id, "reviewer")
    entry = store.query_one("SELECT actor, entity_id, old, new FROM audit_log"
                            " WHERE action = 'admin_lapsed'")
    assert (entry["actor"], entry["entity_id"]) == ("Ada Admin", ada.id)
    assert json.loads(entry["old"]) == {"role": "admin"}
    assert json.loads(entry["new"])["role"] == "reviewer"
    assert sign_in(store, only_bo, BO).role == "admin"
    # Put back on the list: admin again at the next request, audited again.
    assert sign_in(store, both, ADA).role == "admin"
    assert store.scalar("SELECT COUNT(*) FROM audit_log WHERE action ="
                        " 'admin_from_configuration'") == 1


def test_the_environment_variable_is_read_at_each_request(store, monkeypatch):
    monkeypatch.setenv("CARELENS_ADMINS", "ada@example.org")
    assert sign_in(store, configured_admins(), ADA).role == "admin"
    monkeypatch.setenv("CARELENS_ADMINS", f"{IDP}#bo-sub")
    assert sign_in(store, configured_admins(), ADA).role == "reviewer"


def test_an_admin_made_in_the_database_lapses_too(store):
    ada = sign_in(store, admins_from("ada@example.org"), ADA)
    bo = sign_in(store, admins_from("ada@example.org"), BO)
    grant_role(store, ada, bo.name, "admin")  # local-mode grant, or one written by hand
    assert sign_in(store, admins_from("ada@example.org"), BO).role == "reviewer"


def test_on_a_server_no_grant_makes_or_unmakes_an_admin(store):
    ada = sign_in(store, admins_from("ada@example.org"), ADA)
    bo = sign_in(store, admins_from("ada@example.org"), BO)
    with pytest.raises(ValueError, match="named in the configuration"):
        grant_role(store, ada, bo.name, "admin", server=True)
    assert grant_role(store, ada, bo.name, "adjudicator", server=True).role == "adjudicator"


def test_local_mode_grants_stay(store):
    first = ensure_reviewer(store, "First", role="admin")
    second = grant_role(store, first, ensure_reviewer(store, "Second").name, "admin")
    assert second.role == "admin"
