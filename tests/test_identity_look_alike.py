"""Names are what the screens show: a new person's name that a screen would show
like another rater's (capitals, spaces, Unicode compatibility forms, look-alike
Cyrillic or Greek letters, zero-width characters) is refused with one line, in
the sidebar, at sign-in and in a file. Identity stays the issuer and subject."""

from __future__ import annotations

import json

import pytest

from review.datasets.sources import InputError, import_file
from review.team.identity import identity_from_claims, reviewer_for_identity
from review.team.reviewers import ensure_reviewer, look_alike
from tests.helpers import table_counts

IDP = "https://idp.example.org"
REAL = "Dr. Mei Tanaka"
LOOK_ALIKES = [
    "dr. mei tanaka",                  # capitals
    "Dr.  Mei  Tanaka ",               # spaces
    "Dr.MeiTanaka",                    # spaces left out
    "Dr. M\u0435i Tanaka",             # Cyrillic e
    "Dr. Mei T\u0430n\u0430k\u0430",   # Cyrillic a
    "Dr. Mei\u200b Tanaka",            # zero-width space
    "Dr. Me\u200di Tanaka",            # zero-width joiner
    "\uff24r. Mei Tanaka",             # full-width D (NFKC)
    "Dr. \u039cei Tanaka",             # Greek capital Mu
    "Dr. Mei Tanaka\u00ad",            # soft hyphen
]


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_look_alike_finds_the_name_a_screen_shows_alike(name):
    assert look_alike(name, ["Dr. Amara Okafor", REAL]) == REAL


@pytest.mark.parametrize("name", ["Dr. Mei Tanaka", "Dr. Mai Tanaka", "Dr. Mei Tanaka-Ross",
                                  "José Ortega"])
def test_distinct_names_are_not_look_alikes(name):
    assert look_alike(name, [REAL, "Jose Ortega"]) is None


def test_shapes_that_read_alike_in_their_own_capitals():
    assert look_alike("Dr. Iris Bell", ["Dr. lris Bell"]) == "Dr. lris Bell"
    assert look_alike("Dr. Kim", ["Dr. Kirn"]) == "Dr. Kirn"


@pytest.mark.parametrize("name", [n for n in LOOK_ALIKES if " ".join(n.split()) != REAL])
def test_the_sidebar_refuses_a_look_alike_name(store, name):
    """(A name that differs only in the spaces around its words is that name.)"""
    ensure_reviewer(store, REAL)
    before = table_counts(store)
    with pytest.raises(ValueError, match="would be shown like it") as raised:
        ensure_reviewer(store, name)
    assert "\n" not in str(raised.value)
    assert table_counts(store) == before


@pytest.mark.parametrize("name", LOOK_ALIKES[3:])
def test_a_look_alike_display_name_at_sign_in_is_refused(store, name):
    ensure_reviewer(store, REAL)
    me = reviewer_for_identity(store, identity_from_claims(
        {"iss": IDP, "sub": "someone-else", "name": name}))
    assert me.name.startswith("Reviewer ") and look_alike(me.name, [REAL]) is None
    new = json.loads(store.scalar("SELECT new FROM audit_log WHERE action = 'sign_in_first'"))
    assert "refused" in new["name_refused"] and REAL in new["name_refused"]


def test_the_same_name_at_sign_in_gets_a_number(store):
    ensure_reviewer(store, REAL)
    me = reviewer_for_identity(store, identity_from_claims(
        {"iss": IDP, "sub": "namesake", "name": REAL}))
    assert me.name == f"{REAL} (2)"


@pytest.mark.parametrize("name", LOOK_ALIKES[3:6])
def test_a_file_cannot_bring_in_a_look_alike_person(store, tmp_path, name):
    from tests.helpers import write_prefixes

    uid = write_prefixes(store, 1, with_gold=False)[0]
    ensure_reviewer(store, REAL)
    before = table_counts(store)
    f = tmp_path / "people.csv"
    f.write_text(f"item_id,rater,value\n{uid},{name},0A_NO_ESCALATION_INFO_NEEDED\n",
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"people\.csv: rater .*would show it like the rater"):
        import_file(store, f, "labels-long")
    assert table_counts(store) == before
