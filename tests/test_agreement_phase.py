"""Blind answers by default (issue 17, point 1): `carelens agreement` between a clinician
and a machine, with no phase given, is the blind-only computation and says so."""

from __future__ import annotations

import json

from tests.helpers import run_cli

ARGS = ["agreement", "--question", "carebench.response_action", "--b", "demo:mapper@v1",
        "--n-boot", "100"]


def clinician_who_revised(demo_copy) -> str:
    from review.workspace import open_store

    with open_store(demo_copy) as s:
        return s.scalar("SELECT r.name FROM annotations a JOIN raters r ON r.id = a.rater_id"
                        " WHERE a.phase = 'after_reveal' GROUP BY r.name"
                        " ORDER BY COUNT(*) DESC LIMIT 1")


def test_a_clinician_against_a_machine_is_blind_unless_asked(demo_copy, capsys):
    who = clinician_who_revised(demo_copy)
    db = ["--db", str(demo_copy)]
    runs = {phase: json.loads(run_cli(capsys, *db, *ARGS, "--a", who, "--json", *extra)[1])
            for phase, extra in (("default", []), ("blind", ["--phase", "blind"]),
                                 ("current", ["--phase", "current"]))}
    assert runs["default"]["coefficients"] == runs["blind"]["coefficients"]
    assert runs["default"]["coefficients"] != runs["current"]["coefficients"]
    assert runs["default"]["provenance"]["phase"] == "blind"
    assert runs["current"]["provenance"]["phase"] == "current"
    code, text, _ = run_cli(capsys, *db, *ARGS, "--a", who)
    assert code == 0 and "clinicians' blind answers (given before any machine label" in text
    assert "set aside" in text  # the answers changed after the reveal are counted
    code, text, _ = run_cli(capsys, *db, *ARGS, "--a", who, "--phase", "current")
    assert "clinicians' current answers (each clinician's latest" in text
