"""The carelens command: the same library behind the app, from a terminal."""

from __future__ import annotations

import json
import re

import pytest

from cli import main
from review.workspace import open_store
from tests import conftest_llm as llm


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_demo_import_export_round_trip(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    code, out, _ = run(capsys, "--db", db, "demo", "--files", str(tmp_path / "files"))
    assert code == 0 and "carebench-prefixes: 85 rows" in out
    code, out, _ = run(capsys, "--db", db, "demo", "--if-empty")
    assert "already holds items" in out
    code, out, err = run(capsys, "--db", db, "export", "--what", "carebench-labels",
                         "--out", str(tmp_path / "labels.csv"))
    assert code == 0 and "prefix labels" in out and "no majority" in err
    lines = (tmp_path / "labels.csv").read_text().splitlines()
    assert lines[0] == "prefix_id,predicted_label" and len(lines) > 50
    code, out, _ = run(capsys, "--db", db, "export", "--what", "annotations",
                       "--out", str(tmp_path / "all.jsonl"))
    rows = [json.loads(x) for x in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert {r["rater_kind"] for r in rows} == {"human", "machine", "reference"}
    assert all("codebook_version" in r and "phase" in r for r in rows)


def test_bad_input_exits_2_with_one_line_naming_file_and_line(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prefix_id": "a_r01", "input_patient_turns": ["x"], "gold_label": "0A"}\n{"prefix_id": \n')
    code, _, err = run(capsys, "--db", db, "import", str(bad))
    assert code == 2
    assert err.strip().startswith(f"carelens: {bad}:2: not valid JSON")
    assert open_store(db).scalar("SELECT COUNT(*) FROM items") == 0


def test_formats_lists_every_importer(capsys):
    code, out, _ = run(capsys, "formats")
    for name in ("carebench-prefixes", "labels-long", "klinikebench", "harbor", "healthbench-meta"):
        assert name in out


@pytest.fixture
def fake():
    yield from llm.fake_server()


def test_map_dry_run_prints_blinded_requests_and_calls_nothing(demo_copy, fake, capsys):
    code, out, err = run(capsys, "--db", str(demo_copy), "map", "--model", "openai:gpt-4.1-mini",
                         "--prompt-version", "mapper-v2", "--limit", "3", "--dry-run")
    assert code == 0
    requests = [json.loads(x) for x in out.splitlines()]
    assert len(requests) == 3 and "3 responses to map" in err
    body = json.dumps(requests[0]["request"])
    assert "demo_case" not in body and "carebench-gold" not in body
    assert fake.model_calls() == []


def test_map_runs_against_an_openai_compatible_server(demo_copy, fake, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-1234")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    code, out, _ = run(capsys, "--db", str(demo_copy), "map", "--model", "openai:gpt-4.1-mini",
                       "--limit", "4", "--concurrency", "2")
    # (two demo replies can be word for word the same: the second comes from the cache)
    answered = sum(int(x.split()[0]) for x in out.split(": ", 1)[1].split(", ")[:2])
    assert code == 0 and answered == 4
    sent = len(fake.model_calls())
    s = open_store(demo_copy)
    assert s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                    " WHERE r.name = 'openai:gpt-4.1-mini@mapper-v1'") == 4
    code, out, _ = run(capsys, "--db", str(demo_copy), "map", "--model", "openai:gpt-4.1-mini",
                       "--limit", "4", "--again")
    assert "4 from the cache" in out and len(fake.model_calls()) == sent
    audit = s.query_one("SELECT actor, new FROM audit_log WHERE action = 'llm_run' ORDER BY id")
    assert audit is not None and "openai:gpt-4.1-mini@mapper-v1" in audit["new"]
    raw = demo_copy.read_bytes() + demo_copy.with_name(demo_copy.name + "-wal").read_bytes()
    assert b"sk-test-not-a-real-key-1234" not in raw


def test_map_without_a_key_says_which_variable(demo_copy, capsys):
    code, _, err = run(capsys, "--db", str(demo_copy), "map", "--model", "anthropic:claude-haiku-4-5",
                       "--limit", "1")
    assert code == 2 and "ANTHROPIC_API_KEY" in err


def test_agreement_and_triage_from_the_terminal(demo_copy, tmp_path, capsys):
    code, out, _ = run(capsys, "--db", str(demo_copy), "agreement", "--question",
                       "carebench.response_action", "--a", "group:majority", "--b", "demo:mapper@v1",
                       "--json", "--html", str(tmp_path / "r.html"))
    assert code == 0
    report = json.loads(out)
    names = {c["name"] for c in report["coefficients"]}
    assert {"cohen_kappa", "krippendorff_alpha_ordinal"} <= names
    kappa = next(c for c in report["coefficients"] if c["name"] == "cohen_kappa")
    assert kappa["ci_low"] < kappa["value"] < kappa["ci_high"] and kappa["n"] > 100
    html = (tmp_path / "r.html").read_text()
    # Plots inline, no script loaded from anywhere, and a policy that forbids fetching.
    assert "<script" in html and not re.search(r"<script[^>]*\bsrc=", html)
    assert "default-src 'none'" in html
    code, out, _ = run(capsys, "--db", str(demo_copy), "triage-metrics")
    assert code == 0 and "aster-7b" in out
    code, _, err = run(capsys, "--db", str(demo_copy), "agreement", "--question", "x", "--a", "y")
    assert code == 2 and "unknown question set" in err


def test_search_prints_ranked_matches_and_survives_hostile_queries(demo_copy, capsys):
    code, out, _ = run(capsys, "--db", str(demo_copy), "search", "stiff neck OR stiff", "--json")
    hits = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and hits and set(hits[0]) == {"item_id", "kind", "snippet"}
    assert any("«" in h["snippet"] for h in hits)
    before = open_store(demo_copy).scalar("SELECT COUNT(*) FROM items")
    for hostile in ('"unbalanced', "AND OR NOT", "col:umn", "*", "NEAR(", "'; DROP TABLE items; --"):
        code, _, _ = run(capsys, "--db", str(demo_copy), "search", hostile)
        assert code == 0
    assert open_store(demo_copy).scalar("SELECT COUNT(*) FROM items") == before > 300


def test_the_help_of_every_command_prints(capsys):
    """`carelens --help` and each command's --help print (a '%' in a help text
    made the whole help fail with a traceback)."""
    import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in [None, *sub.choices]:
        with pytest.raises(SystemExit) as done:
            parser.parse_args(["--help"] if name is None else [name, "--help"])
        assert done.value.code == 0, name
        assert "usage:" in capsys.readouterr().out
