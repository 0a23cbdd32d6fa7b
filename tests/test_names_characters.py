"""A name is shown as it is, or refused: always, not only when it collides.

The adversarial run got `adjudi\\u200bcated` (a zero-width space inside) in at
sign-in and through a labels file while no rater `adjudicated` existed yet,
and `\\u202eakanaT ieM .rD` (a right-to-left override) was shown in the sidebar
as "Dr. Mei Tanaka". An e-mail with spaces around it was trimmed and made
admin. Here each is refused, in one line naming the character, wherever a
rater is made: at sign-in (the person gets a name of their own, audited), in
the sidebar, in any import, and for an LLM run's machine rater."""

from __future__ import annotations

import json

import pytest

from review.datasets.sources import InputError, import_file
from review.team.identity import admins_from, identity_from_claims, reviewer_for_identity
from review.team.reviewers import ensure_reviewer
from store.names import name_problem
from store.records import RaterRecord
from store.writer import RecordWriter
from tests.helpers import table_counts, write_prefixes

IDP = "https://idp.example.org"
HIDDEN = [
    ("adjudi\u200bcated", "U+200B"),             # zero-width space
    ("\u202eakanaT ieM .rD", "U+202E"),          # right-to-left override
    ("Dr. Mei\u2066 Tanaka\u2069", "U+2066"),    # left-to-right isolate
    ("Dr. Mei Tanaka\u00ad", "U+00AD"),          # soft hyphen
    ("Dr. Me\u200di Tanaka", "U+200D"),          # zero-width joiner
    ("Dr. Mei\ufeffTanaka", "U+FEFF"),           # byte order mark
    ("Dr. Mei\u2800Tanaka", "U+2800"),           # blank braille pattern
    ("Dr. Mei\u3164Tanaka", "U+3164"),           # Hangul filler
    ("Dr. Mei\ufe0f Tanaka", "U+FE0F"),          # variation selector
    ("Dr.\u00a0Mei Tanaka", "U+00A0"),           # no-break space
    ("Dr. Mei\tTanaka", "U+0009"),               # tab
    ("Dr. Mei \U000e0041Tanaka", "U+E0041"),     # tag letter
]
MIXED = ["Dr. M\u0435i Tanaka",     # Cyrillic e among Latin letters
         "Dr. \u039cei Tanaka",     # Greek capital Mu
         "\u0410da Admin"]          # Cyrillic capital A
FINE = ["Dr. Mei Tanaka", "José Ortega", "O\u2019Brien", "Anne-Marie Dubois", "Иван Петров",
        "Σωκράτης Παππάς", "田中 はな", "山田 Hana", "김민수 Kim", "王小明", "Ａｄａ Ｌｏｖｅ",
        "openai:gpt-4.1-mini@mapper-v2", "Reviewer 1a2b3c4d", "Ada Admin (2)"]


@pytest.mark.parametrize(("name", "code"), HIDDEN)
def test_a_character_not_shown_as_itself_is_named_by_its_code_point(name, code):
    problem = name_problem(name)
    assert problem is not None and code in problem and "\n" not in problem


@pytest.mark.parametrize("name", MIXED)
def test_letters_of_two_scripts_drawn_alike_are_refused(name):
    problem = name_problem(name)
    assert problem is not None and "mixes" in problem


@pytest.mark.parametrize("name", FINE)
def test_names_in_one_script_or_a_cjk_mix_with_latin_are_fine(name):
    assert name_problem(name) is None


@pytest.mark.parametrize(("name", "_"), HIDDEN[:3])
def test_a_display_name_with_a_hidden_character_is_never_taken_at_sign_in(store, name, _):
    """No rater of a similar name exists: refused all the same."""
    me = reviewer_for_identity(store, identity_from_claims(
        {"iss": IDP, "sub": f"sub-{name!r}", "name": name}))
    assert me.name.startswith("Reviewer ") and name_problem(me.name) is None
    new = json.loads(store.scalar("SELECT new FROM audit_log WHERE action = 'sign_in_first'"))
    assert new["display_name"] == name and "U+" in new["name_refused"]


def test_a_display_name_of_mixed_scripts_is_never_taken_at_sign_in(store):
    me = reviewer_for_identity(store, identity_from_claims(
        {"iss": IDP, "sub": "mixed", "name": MIXED[0]}))
    assert me.name.startswith("Reviewer ")


@pytest.mark.parametrize("name", [HIDDEN[0][0], HIDDEN[1][0], MIXED[0]])
def test_the_sidebar_refuses_such_a_name_with_nobody_like_it(store, name):
    before = table_counts(store)
    with pytest.raises(ValueError, match="give another name") as raised:
        ensure_reviewer(store, name)
    assert "\n" not in str(raised.value) and table_counts(store) == before


@pytest.mark.parametrize("name", [HIDDEN[0][0], HIDDEN[1][0], MIXED[1]])
def test_a_labels_file_cannot_bring_in_such_a_rater(store, tmp_path, name):
    uid = write_prefixes(store, 1, with_gold=False)[0]
    before = table_counts(store)
    f = tmp_path / "labels.csv"
    f.write_text(f"item_id,rater,value\n{uid},{name},0A_NO_ESCALATION_INFO_NEEDED\n",
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"labels\.csv: rater .*no rater is made") as raised:
        import_file(store, f, "labels-long")
    assert "\n" not in str(raised.value) and table_counts(store) == before


def test_a_machine_raters_name_is_checked_where_every_rater_is_written(store):
    """The writer all imports and LLM runs make raters through refuses it too."""
    before = table_counts(store)
    with pytest.raises(InputError, match="U\\+200B"), store.transaction() as conn:
        RecordWriter(conn, source="llm").rater(
            RaterRecord("openai:gpt\u200b-4.1@mapper-v2", "machine"))
    assert table_counts(store) == before


def test_an_email_with_spaces_around_it_is_not_the_admins(store):
    admins = admins_from("admin@example.org")
    spaced = identity_from_claims({"iss": IDP, "sub": "spaced", "email": " admin@example.org ",
                                   "email_verified": True, "name": "Spacey"})
    assert spaced.email is None and spaced not in admins
    me = reviewer_for_identity(store, spaced, admins)
    assert me.role == "reviewer"
    hidden = identity_from_claims({"iss": IDP, "sub": "zw", "email": "admin@example.org\u200b",
                                   "email_verified": True})
    assert hidden.email is None and hidden not in admins
    exact = identity_from_claims({"iss": IDP, "sub": "real", "email": "admin@EXAMPLE.org",
                                  "email_verified": True})
    assert exact in admins  # only the domain's capitals do not matter


def test_a_tag_or_round_name_with_a_hidden_character_is_refused(store):
    from review.browse.tags import create_tag
    from review.team.rounds import RoundError, RoundSpec, create_round

    admin = ensure_reviewer(store, "Dr. Admin", role="admin")
    before = table_counts(store)
    with pytest.raises(ValueError, match="U\\+202E"):
        create_tag(store, "\u202edrawkcab", admin)
    with pytest.raises(RoundError, match="U\\+200B"):
        create_round(store, RoundSpec("Pilot\u200b", "carebench.escalation_needed"), admin)
    assert table_counts(store) == before
