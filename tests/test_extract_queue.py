"""The CliniCARE verdict extractor is planned for CliniCARE runs only: a database
that also holds a KlinikeBench episode and a plain Harbor trial (each with a
last message an extractor could read) asks about the CliniCARE trials alone,
the same rule a reviewer's screen follows (`codebook.families`)."""

from __future__ import annotations

import json

from codebook.families import asks_outcome
from review.datasets.sources.clinicare import trial_uid
from review.workspace import open_store
from tests.helpers import run_cli
from tests.review_fixtures import HARBOR_UID, KB_UID, import_all


def test_extract_dry_run_plans_only_the_clinicare_runs(tmp_path, capsys):
    db = tmp_path / "runs.db"
    with open_store(db) as store:
        import_all(store, tmp_path / "files")
        kinds = dict(store.query("SELECT d.kind, COUNT(*) FROM items i JOIN datasets d"
                                 " ON d.id = i.dataset_id WHERE i.kind = 'trajectory'"
                                 " GROUP BY d.kind"))
    assert kinds == {"klinikebench": 1, "clinicare": 2, "harbor": 1}  # all three are there
    code, out, err = run_cli(capsys, "--db", str(db), "extract", "--model",
                             "openai:gpt-4.1-mini", "--dry-run")
    assert code == 0, err
    planned = [json.loads(line)["item"] for line in out.splitlines()]
    assert sorted(planned) == sorted([trial_uid("sc07-a1b2c3__x1"), trial_uid("sc09-ffee01__x2")])
    assert KB_UID not in planned and HARBOR_UID not in planned
    assert "2 reports to read" in err


def test_a_clinicare_run_imported_under_another_dataset_name_is_still_planned(tmp_path, capsys):
    db = tmp_path / "runs.db"
    from review.datasets.sources import import_file
    from review.datasets.sources.base import ImportOptions
    from tests.review_fixtures import build_files

    files = build_files(tmp_path / "files")
    with open_store(db) as store:
        import_file(store, files["clinicare"], "clinicare", ImportOptions(dataset="ward-7-runs"))
        import_file(store, files["klinikebench"], "klinikebench",
                    ImportOptions(dataset="ward-7-kb"))
    code, out, err = run_cli(capsys, "--db", str(db), "extract", "--model",
                             "openai:gpt-4.1-mini", "--dry-run")
    assert code == 0, err
    planned = {json.loads(line)["item"] for line in out.splitlines()}
    assert planned == {trial_uid("sc07-a1b2c3__x1"), trial_uid("sc09-ffee01__x2")}


def test_the_rule_is_the_reviewers_rule():
    assert asks_outcome("clinicare.verdict", trial_uid("x__1"), "generic")
    assert asks_outcome("clinicare.verdict", "cc:t1", "clinicare")
    assert not asks_outcome("clinicare.verdict", KB_UID, "klinikebench")
    assert not asks_outcome("clinicare.verdict", HARBOR_UID, "harbor")
    assert not asks_outcome("clinicare.verdict", "CLINICARE:x", "generic")
