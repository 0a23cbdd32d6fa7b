"""Who signed in: a person is their provider's issuer and subject.

Each attack the adversarial run found (an unverified e-mail, an e-mail in other
capitals, a subject that looks like an e-mail, a display name the system uses,
coming first) fails here, and the legitimate person gets in. The same runs end
to end, through the real login, in tests/test_browser_login.py."""

from __future__ import annotations

import threading
import time

import pytest

from review.team.identity import (
    ADMINS_ENV,
    Identity,
    NoIdentity,
    admins_from,
    configured_admins,
    find_signed_in,
    identity_from_claims,
    reviewer_for_identity,
)
from review.team.reviewers import REFERENCE_RATERS, SETTLED_ANSWERS, ensure_reviewer, reserved_name
from review.workspace import open_store

IDP = "https://idp.example.org"
ADMIN = {"iss": IDP, "sub": "real-admin-sub", "email": "admin@example.org",
         "email_verified": True, "name": "Ada Admin"}
ADMINS = admins_from("admin@example.org")


def sign_in(store, admins=ADMINS, **claims):
    return reviewer_for_identity(store, identity_from_claims(claims), admins)


def test_the_admin_named_in_configuration_signs_in_as_admin(store):
    me = sign_in(store, **ADMIN)
    assert (me.name, me.role) == ("Ada Admin", "admin")
    assert sign_in(store, **ADMIN).id == me.id  # and again: the same person


def test_coming_first_makes_nobody_admin(store):
    first = sign_in(store, admins_from(None), iss=IDP, sub="early-bird", email="eb@example.org",
                    email_verified=True, name="Early Bird")
    assert first.role == "reviewer"


def test_an_unverified_email_is_no_identity(store):
    admin = sign_in(store, **ADMIN)
    mallory = sign_in(store, iss=IDP, sub="attacker-sub", email="ADMIN@example.org",
                      email_verified=False, name="Mallory")
    assert mallory.id != admin.id and mallory.role == "reviewer"
    also = sign_in(store, iss=IDP, sub="attacker-2", email="admin@example.org", name="M2")
    assert also.id != admin.id and also.role == "reviewer"  # no email_verified at all


def test_a_subject_that_looks_like_the_admins_email_is_just_a_subject(store):
    admin = sign_in(store, **ADMIN)
    mallory = sign_in(store, iss=IDP, sub="admin@example.org", name="Mallory")
    assert mallory.id != admin.id and mallory.role == "reviewer"


def test_accounts_are_never_merged_by_capitals(store):
    admin = sign_in(store, **ADMIN)
    upper = sign_in(store, iss=IDP, sub="Real-Admin-Sub", email="Admin@example.org",
                    email_verified=True, name="Ada Admin")
    assert upper.id != admin.id and upper.role == "reviewer"
    assert upper.name == "Ada Admin (2)"  # a name of their own: a display name is no identity
    # The domain of an e-mail is the same in any capitals; the mailbox is not.
    domain = sign_in(store, iss=IDP, sub="third", email="admin@EXAMPLE.ORG",
                     email_verified=True, name="Third")
    assert domain.role == "admin"


def test_the_same_subject_at_another_provider_is_another_person(store):
    admin = sign_in(store, **ADMIN)
    other = sign_in(store, admins_from(None), **{**ADMIN, "iss": "https://evil.example.net",
                                                 "email_verified": False})
    assert other.id != admin.id and other.role == "reviewer"


def test_an_admin_named_by_issuer_and_subject(store, monkeypatch):
    monkeypatch.setenv(ADMINS_ENV, f"{IDP}#boss-sub, someone@example.org")
    admins = configured_admins()
    boss = sign_in(store, admins, iss=IDP, sub="boss-sub", name="Boss")
    assert boss.role == "admin"
    assert sign_in(store, admins, iss=IDP, sub="boss-sub2", name="Not Boss").role == "reviewer"
    with pytest.raises(ValueError, match="neither"):
        admins_from("just-a-word")


def test_a_reviewer_named_admin_later_becomes_admin_at_their_next_sign_in(store):
    me = sign_in(store, admins_from(None), **ADMIN)
    assert me.role == "reviewer"
    again = sign_in(store, **ADMIN)
    assert (again.id, again.role) == (me.id, "admin")
    assert store.scalar("SELECT COUNT(*) FROM audit_log WHERE action ="
                        " 'admin_from_configuration'") == 1


@pytest.mark.parametrize("display", [SETTLED_ANSWERS, "Adjudicated", "group:clinicians",
                                     "group:adjudicated", "carebench-gold",
                                     "openai:gpt-4.1-mini@mapper-v2"])
def test_a_display_name_the_system_uses_is_never_taken(store, display):
    me = sign_in(store, iss=IDP, sub=f"sub-{display}", email="x@example.org", email_verified=True,
                 name=display)
    assert me.name.casefold() != display.casefold() and me.name.startswith("Reviewer ")
    assert store.scalar("SELECT kind FROM raters WHERE id = ?", (me.id,)) == "human"


def test_a_settled_answer_is_never_a_signed_in_persons_answer(demo_copy):
    """The attack: a user named `adjudicated` became the settled answers' rater."""
    from review.reviewing.commit import commit_answer

    s = open_store(demo_copy)
    me = sign_in(s, iss=IDP, sub="x", email="x@example.org", email_verified=True,
                 name=SETTLED_ANSWERS)
    item = s.scalar("SELECT id FROM items WHERE kind = 'prefix' LIMIT 1")
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(s, me, item, qid, "1B_ESCALATION_URGENT_CARE")
    assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                    " WHERE r.name = ? AND a.item_id = ? AND a.source = 'app'",
                    (SETTLED_ANSWERS, item)) == 0
    s.close()


def test_a_login_without_issuer_or_subject_signs_in_nobody():
    with pytest.raises(NoIdentity):
        identity_from_claims({"email": "admin@example.org", "email_verified": True})
    with pytest.raises(NoIdentity):
        identity_from_claims({"iss": IDP, "sub": "  "})


def test_only_a_verified_email_is_kept():
    assert identity_from_claims({**ADMIN, "email_verified": "false"}).email is None
    assert identity_from_claims({**ADMIN, "email_verified": True}).email == "admin@example.org"
    assert identity_from_claims({**ADMIN, "email_verified": "true"}).email == "admin@example.org"


def test_an_account_made_by_an_earlier_carelens_goes_to_its_verified_email_only(store):
    """Accounts keyed on the lower-cased e-mail or subject (m003's `login`) are linked
    at the first sign-in whose verified e-mail is exactly that login: not by a subject
    that looks like it, an unverified e-mail, or other capitals."""
    with store.transaction() as conn:
        conn.execute("INSERT INTO raters (name, kind, role, login, created_at) VALUES"
                     " ('Old Admin', 'human', 'admin', 'admin@example.org', 'then')")
    for claims in ({"sub": "admin@example.org"},
                   {"sub": "s2", "email": "admin@example.org", "email_verified": False},
                   {"sub": "s3", "email": "Admin@example.org", "email_verified": True}):
        assert sign_in(store, admins_from(None), iss=IDP, name="M", **claims).name != "Old Admin"
    me = sign_in(store, admins_from(None), iss=IDP, sub="s4", email="admin@example.org",
                 email_verified=True, name="Whoever")
    # Theirs, but not an admin: admins are those the configuration names (none here).
    assert (me.name, me.role) == ("Old Admin", "reviewer")
    assert sign_in(store, iss=IDP, sub="s4", email="admin@example.org",
                   email_verified=True).role == "admin"
    assert find_signed_in(store, Identity(IDP, "s4")).id == me.id


def test_first_sign_in_of_one_person_from_two_tabs_at_once_makes_one_reviewer(tmp_path):
    path = tmp_path / "x.db"
    holder = open_store(path)
    results, errors = [], []

    def tab():
        s = open_store(path)
        try:
            results.append(sign_in(s, **ADMIN))
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            s.close()

    # Another write is in progress: both tabs find no such person, then queue for the lock.
    with holder.transaction():
        threads = [threading.Thread(target=tab) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.id for r in results}) == 1 and results[0].role == "admin"
    assert holder.scalar("SELECT COUNT(*) FROM raters WHERE login_subject = ?",
                         (ADMIN["sub"],)) == 1
    holder.close()


def test_no_name_the_system_uses_can_be_added_in_the_sidebar(store):
    for name in (SETTLED_ANSWERS, " ADJUDICATED ", "group:majority", "demo:mapper@v2",
                 *REFERENCE_RATERS):
        assert reserved_name(store, name) is not None
        with pytest.raises(ValueError, match="choose another name"):
            ensure_reviewer(store, name)
    assert reserved_name(store, "Dr. Mei Tanaka") is None


def test_the_reserved_names_are_those_the_system_uses():
    from review.datasets.sources import carebench, clinicare, harbor, klinikebench
    from review.team.adjudication import ADJUDICATED

    assert SETTLED_ANSWERS == ADJUDICATED
    assert {carebench.GOLD_RATER, klinikebench.VERIFIER, clinicare.COHORT, clinicare.VERIFIER,
            harbor.VERIFIER} == set(REFERENCE_RATERS)
