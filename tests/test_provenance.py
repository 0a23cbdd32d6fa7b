"""Provenance on every report (issue 17, point 7): every --json output, CSV and JSONL export
and HTML report carries what it was computed from; LLM calls record their sampling."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from labels.llm.mapper import MAPPER
from labels.llm.providers import SEED, request_body_for, sampling
from labels.llm.spec import parse_model_spec
from labels.provenance import sidecar_path
from tests.helpers import run_cli

KEYS = {"carelens_version", "database", "database_file", "phase", "filters", "generated_at"}
AGREEMENT = ["agreement", "--question", "carebench.response_action", "--a", "group:majority",
             "--b", "demo:mapper@v1"]


def provenance_of(out: str) -> dict:
    return json.loads(out)["provenance"]


@pytest.mark.parametrize("command", [
    AGREEMENT + ["--json"],
    ["triage-metrics", "--json", "--n-boot", "50"],
    ["healthbench-score", "--json", "--n-boot", "50"],
])
def test_every_json_output_carries_the_provenance_object(demo_copy, capsys, command):
    code, out, err = run_cli(capsys, "--db", str(demo_copy), *command)
    assert code == 0, err
    prov = provenance_of(out)
    assert KEYS <= set(prov) and prov["database"].startswith("sha256:")
    assert prov["phase"] == "blind" and prov["database_file"] == demo_copy.name
    assert prov["rows"] > 0


def test_search_json_ends_with_its_provenance(demo_copy, capsys):
    code, out, _ = run_cli(capsys, "--db", str(demo_copy), "search", "stiff", "--json")
    *hits, last = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and hits and all(set(h) == {"item_id", "kind", "snippet"} for h in hits)
    assert KEYS <= set(last["provenance"]) and last["provenance"]["query"] == "stiff"


def test_the_digest_is_of_the_data_not_the_file(demo_copy, tmp_path, capsys):
    other = tmp_path / "copy.db"
    shutil.copy(demo_copy, other)
    first = provenance_of(run_cli(capsys, "--db", str(demo_copy), *AGREEMENT, "--json")[1])
    same = provenance_of(run_cli(capsys, "--db", str(other), *AGREEMENT, "--json")[1])
    assert first["database"] == same["database"] and same["database_file"] == "copy.db"
    current = provenance_of(run_cli(capsys, "--db", str(demo_copy), *AGREEMENT, "--json",
                                    "--phase", "current")[1])
    assert current["database"] != first["database"] and current["phase"] == "current"
    assert "latest" in current["phase_words"]


def test_csv_exports_have_a_sidecar_and_pandas_still_reads_them(demo_copy, tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    code, _, err = run_cli(capsys, "--db", str(demo_copy), "export", "--what",
                           "carebench-labels", "--out", str(labels))
    assert code == 0, err
    assert list(pd.read_csv(labels).columns) == ["prefix_id", "predicted_label"]
    prov = json.loads(sidecar_path(labels).read_text())["provenance"]
    assert prov["phase"] == "blind" and prov["export"] == "carebench-labels"
    assert prov["rows"] == len(pd.read_csv(labels))
    records = tmp_path / "all.jsonl"
    code, _, err = run_cli(capsys, "--db", str(demo_copy), "export", "--what", "annotations",
                           "--out", str(records))
    assert code == 0, err
    assert pd.read_json(records, lines=True).shape[0] == json.loads(
        sidecar_path(records).read_text())["provenance"]["rows"]
    table = tmp_path / "coefficients.csv"
    code, _, err = run_cli(capsys, "--db", str(demo_copy), *AGREEMENT, "--csv", str(table),
                           "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    assert "coefficient" in pd.read_csv(table).columns
    assert json.loads(sidecar_path(table).read_text())["provenance"]["phase"] == "blind"
    html = (tmp_path / "r.html").read_text()
    assert "<h2>Provenance</h2>" in html and "carelens_version" in html


def test_browse_exports_carry_their_provenance(demo):
    from review.browse import (
        BrowseQuery,
        case_study_html,
        gather_cases,
        selected_item_ids,
        to_jsonl,
    )

    cases = gather_cases(demo, selected_item_ids(demo, BrowseQuery(), limit=3), with_blocks=True)
    *rows, last = [json.loads(line) for line in to_jsonl(cases).splitlines()]
    assert len(rows) == 3 and KEYS <= set(last["provenance"])
    assert "<h2>Provenance</h2>" in case_study_html(cases)


def test_llm_calls_send_and_record_temperature_and_seed():
    for spec, temperature, seed in (("openai:gpt-4.1", 0, SEED), ("compatible:local-model", 0, SEED),
                                    ("openai:gpt-5-mini", None, SEED),
                                    ("anthropic:claude-haiku-4-5", None, None)):
        model = parse_model_spec(spec)
        body = request_body_for(model, "system", "user", MAPPER)
        assert body.get("temperature") == temperature and body.get("seed") == seed, spec
        said = sampling(model.provider, model.model)
        assert (said["temperature"], said["seed"]) == (temperature, seed)
        assert (said["note"] is None) == (temperature is not None), spec


def test_the_triage_stamp_alone_reproduces_the_figures(demo_copy, capsys):
    """--rank-by and --common change the figures, so the stamp names them."""
    code, out, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--json",
                             "--n-boot", "0", "--rank-by", "accuracy", "--common")
    assert code == 0, err
    prov = provenance_of(out)
    assert prov["rank_by"] == "accuracy" and prov["common"] is True
    default = provenance_of(run_cli(capsys, "--db", str(demo_copy), "triage-metrics",
                                    "--json", "--n-boot", "0")[1])
    assert default["rank_by"] == "macro_f1" and default["common"] is False
