"""What the carelens commands do with a batch of files, a database that is not
theirs, and options that are not what they take: every file of an import is
tried and accounted for; the demo is not mixed into other items; an unknown
ranking metric, output extension or rater is one line and exit status 2, with
nothing written."""

from __future__ import annotations

import csv
import json

import pytest

from labels.triage import CAREBENCH_ORDER, METRIC_KEYS, rank_models, triage_metrics
from review.workspace import open_store
from tests.helpers import CODES, one_line, run_cli, table_counts, write_jsonl


def prefixes_file(folder, name: str, n: int = 3, bad_line: int | None = None):
    rows = [{"prefix_id": f"{name}_case_{i:03d}_r01", "gold_label": CODES[i % 4],
             "input_patient_turns": [f"Invented turn {i}"]} for i in range(n)]
    if bad_line:
        rows[bad_line - 1]["gold_label"] = "2C_MADE_UP_LABEL"
    return write_jsonl(folder / f"{name}.jsonl", rows)


def items_named(db, prefix: str) -> int:
    return open_store(db).scalar("SELECT COUNT(*) FROM items WHERE uid LIKE ?", (prefix + "%",))


# -- import: every file tried, one line each, then the tally ---------------------------------

def test_import_tries_every_file_and_says_what_became_of_each(tmp_path, capsys):
    db = tmp_path / "x.db"
    good, bad, third = (prefixes_file(tmp_path, "good"), prefixes_file(tmp_path, "bad", 5, bad_line=3),
                        prefixes_file(tmp_path, "third"))
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(good), str(bad), str(third))
    assert code == 2
    assert items_named(db, "good") == 3 and items_named(db, "third") == 3
    assert items_named(db, "bad") == 0  # the bad file is its own transaction
    assert one_line(err).startswith(f"carelens: {bad}:3: unknown label '2C_MADE_UP_LABEL'")
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == [str(good), str(third)]
    assert all("carebench-prefixes: 3 rows, 3 new items" in line for line in lines[:2])
    assert lines[2:] == ["2 imported, 1 refused"]


def test_import_counts_a_file_already_imported_and_exits_0_when_none_is_refused(tmp_path, capsys):
    db = tmp_path / "x.db"
    good, other = prefixes_file(tmp_path, "good"), prefixes_file(tmp_path, "other")
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(good))
    assert code == 0 and err == "" and out.splitlines()[-1] == "1 imported, 0 refused"
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(good), str(other))
    assert code == 0 and err == ""
    assert out.splitlines() == [
        f"{good}: already imported as carebench-prefixes; nothing changed",
        out.splitlines()[1],
        "1 imported, 1 already imported, 0 refused",
    ]
    assert out.splitlines()[1].startswith(f"{other}: carebench-prefixes: 3 rows, 3 new items")


def test_import_of_files_all_refused(tmp_path, capsys):
    db = tmp_path / "x.db"
    missing, bad = tmp_path / "missing.jsonl", prefixes_file(tmp_path, "bad", 2, bad_line=1)
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(missing), str(bad))
    assert code == 2 and out == "0 imported, 2 refused\n"
    assert err.splitlines() == [f"carelens: {missing}: no such file",
                                err.splitlines()[1]]
    assert err.splitlines()[1].startswith(f"carelens: {bad}:1: ")
    assert open_store(db).scalar("SELECT COUNT(*) FROM items") == 0


def test_import_stopped_part_way_says_what_was_kept_and_what_was_not_tried(tmp_path, capsys,
                                                                          monkeypatch):
    import review.datasets.sources

    db = tmp_path / "x.db"
    first, second, third, fourth = (prefixes_file(tmp_path, n) for n in ("first", "second", "third",
                                                                     "fourth"))
    real = review.datasets.sources.import_file

    def interrupted_at_the_third(store, path, *args, **kwargs):
        if str(path) == str(third):
            raise KeyboardInterrupt  # Ctrl-C while the third file is read
        return real(store, path, *args, **kwargs)

    monkeypatch.setattr(review.datasets.sources, "import_file", interrupted_at_the_third)
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(first), str(second),
                             str(third), str(fourth))
    assert code == 130 and "interrupted" in err
    assert out.splitlines()[-1] == (f"2 imported, 0 refused; stopped at {third} (nothing of it"
                                    " kept), 1 more not tried")
    assert items_named(db, "first") == items_named(db, "second") == 3
    assert items_named(db, "third") == items_named(db, "fourth") == 0


# -- demo: never mixed into items that are not demo items ----------------------------------

def test_demo_refuses_a_database_holding_other_items(tmp_path, capsys):
    db = tmp_path / "real.db"
    assert run_cli(capsys, "--db", str(db), "import", str(prefixes_file(tmp_path, "real")))[0] == 0
    before = table_counts(open_store(db))
    files = tmp_path / "demo-files"
    code, out, err = run_cli(capsys, "--db", str(db), "demo", "--files", str(files))
    assert code == 2 and out == ""
    assert one_line(err) == (
        f"carelens: {db}: holds items that are not demo items (3 in carebench); the demo would "
        "add invented patients, clinicians and gold labels among them. Load it into a new "
        "--db, or add --force\n")
    assert table_counts(open_store(db)) == before and not files.exists()
    # `make run` calls `demo --if-empty` on whatever database the user has: still exit 0
    code, out, err = run_cli(capsys, "--db", str(db), "demo", "--if-empty")
    assert code == 0 and err == "" and out == f"{db}: already holds items; demo not loaded\n"
    assert table_counts(open_store(db)) == before


def test_demo_tells_demo_items_from_others_by_their_dataset(demo_copy, tmp_path, capsys):
    """Demo items (dataset `demo`) do not stop the demo: loading it again changes
    nothing. One file of the user's (dataset `carebench`) does."""
    before = table_counts(open_store(demo_copy))
    code, out, err = run_cli(capsys, "--db", str(demo_copy), "demo", "--files", str(tmp_path / "d"))
    assert code == 0 and err == ""
    assert out.count("already imported") == len(out.splitlines()) > 5
    assert table_counts(open_store(demo_copy)) == before
    assert run_cli(capsys, "--db", str(demo_copy), "import", str(prefixes_file(tmp_path, "real")))[0] == 0
    code, _, err = run_cli(capsys, "--db", str(demo_copy), "demo", "--files", str(tmp_path / "d"))
    assert code == 2 and "(3 in carebench)" in one_line(err)


def test_demo_with_force_loads_beside_other_items(tmp_path, capsys):
    db = tmp_path / "real.db"
    assert run_cli(capsys, "--db", str(db), "import", str(prefixes_file(tmp_path, "real")))[0] == 0
    code, out, _ = run_cli(capsys, "--db", str(db), "demo", "--force", "--files", str(tmp_path / "d"))
    assert code == 0 and "carebench-prefixes: 85 rows" in out
    assert items_named(db, "demo_") > 85 and items_named(db, "real") == 3


# -- triage-metrics --rank-by: a fixed list ------------------------------------------------

def test_triage_metrics_refuses_an_unknown_metric_naming_the_allowed_ones(demo_copy, capsys):
    code, out, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--rank-by", "bogus")
    assert code == 2 and out == ""
    assert "argument --rank-by: invalid choice: 'bogus'" in err
    assert all(f"'{key}'" in err for key in METRIC_KEYS)
    code, out, _ = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--rank-by",
                       "missed_care", "--json")
    assert code == 0 and json.loads(out)["rank_by"] == "missed_care"


def test_the_metrics_a_ranking_may_be_by_are_the_metrics_there_are():
    metrics = triage_metrics(CODES, CODES, CAREBENCH_ORDER, n_boot=0)
    assert tuple(metrics) == METRIC_KEYS
    with pytest.raises(ValueError, match="cannot rank by 'bogus'"):
        rank_models({"m1": metrics}, "bogus")


# -- export: by the extension, and only a rater who has labels -----------------------------

def test_carebench_labels_are_written_as_jsonl_to_a_jsonl_file(demo_copy, tmp_path, capsys):
    as_csv, as_jsonl = tmp_path / "labels.csv", tmp_path / "labels.jsonl"
    for out in (as_csv, as_jsonl):
        code, _, _ = run_cli(capsys, "--db", str(demo_copy), "export", "--what", "carebench-labels",
                         "--out", str(out))
        assert code == 0
    with as_csv.open(newline="", encoding="utf-8") as fh:
        from_csv = list(csv.DictReader(fh))
    from_jsonl = [json.loads(line) for line in as_jsonl.read_text(encoding="utf-8").splitlines()]
    assert from_jsonl == from_csv and len(from_jsonl) > 50
    assert set(from_jsonl[0]) == {"prefix_id", "predicted_label"}


@pytest.mark.parametrize("what", ["annotations", "carebench-labels"])
@pytest.mark.parametrize("name", ["a.parquet", "a.txt", "a.json", "a"])
def test_an_export_to_another_extension_is_refused_and_nothing_written(demo_copy, tmp_path, capsys,
                                                                       what, name):
    out = tmp_path / name
    code, stdout, err = run_cli(capsys, "--db", str(demo_copy), "export", "--what", what,
                            "--out", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert one_line(err).startswith(f"carelens: {out}: cannot write ")
    assert err.endswith("give a file name ending in .csv or .jsonl\n")


def test_an_export_of_a_rater_without_labels_is_refused_naming_those_with(demo_copy, tmp_path,
                                                                          capsys):
    out = tmp_path / "labels.csv"
    code, stdout, err = run_cli(capsys, "--db", str(demo_copy), "export", "--what", "carebench-labels",
                            "--rater", "Dr. Mei Tanka", "--out", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert one_line(err) == (
        "carelens: 'Dr. Mei Tanka' has no label on carebench.escalation_needed or "
        "carebench.response_action; raters who have: Dr. Amara Okafor, Dr. Lukas Brenner, "
        "Dr. Mei Tanaka, carebench-gold, demo:mapper@v1, demo:mapper@v2\n")
    code, stdout, _ = run_cli(capsys, "--db", str(demo_copy), "export", "--what", "carebench-labels",
                          "--rater", "Dr. Mei Tanaka", "--out", str(out))
    n = int(stdout.split(": ")[1].split()[0])
    assert code == 0 and n > 50 and len(out.read_text().splitlines()) == n + 1


def test_an_export_of_an_empty_database_names_no_raters(tmp_path, capsys):
    db = tmp_path / "empty.db"
    open_store(db).close()
    code, _, err = run_cli(capsys, "--db", str(db), "export", "--what", "carebench-labels",
                       "--rater", "Dr A", "--out", str(tmp_path / "l.csv"))
    assert code == 2 and one_line(err) == (
        "carelens: 'Dr A' has no label on carebench.escalation_needed or "
        "carebench.response_action; no rater has one yet\n")


def test_rater_is_refused_for_an_annotations_export(demo_copy, tmp_path, capsys):
    out = tmp_path / "a.csv"
    code, _, err = run_cli(capsys, "--db", str(demo_copy), "export", "--what", "annotations",
                       "--rater", "Dr. Mei Tanaka", "--out", str(out))
    assert code == 2 and not out.exists() and "--rater and --model are for --what carebench-labels" in one_line(err)


# -- LLM runs: what was left unanswered, and what to do about it ----------------------------

def test_map_says_what_to_do_about_a_reply_cut_off(tmp_path, capsys, monkeypatch, fake):
    from tests import conftest_llm as llm
    from tests.fake_llm_server import Cut

    db = tmp_path / "llm.db"
    with open_store(db) as s:
        llm.write_carebench(s, 1)
    monkeypatch.setenv("OPENAI_API_KEY", llm.KEYS["openai"])
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base_url)
    fake.script(Cut("length"))
    code, out, err = run_cli(capsys, "--db", str(db), "map", "--model", "openai:gpt-4.1-mini",
                             "--limit", "1")
    assert code == 1 and "1 not answered" in out
    assert "carelens: the reply was cut off at the output limit (2048 tokens" in err
    assert "run with a larger output limit" in err


def test_collect_options_that_name_a_batch_need_its_run(tmp_path, capsys):
    db = tmp_path / "x.db"
    run_cli(capsys, "--db", str(db), "import", str(prefixes_file(tmp_path, "p")))
    for option in (["--batch-id", "msgbatch_1"], ["--forget"]):
        code, out, err = run_cli(capsys, "--db", str(db), "collect", *option)
        assert code == 2 and err.strip() == "carelens: --batch-id and --forget need --run"
    code, out, err = run_cli(capsys, "--db", str(db), "collect", "--run", "7", "--forget")
    assert code == 2 and "no LLM run 7" in err


def test_import_stopped_while_indexing_says_the_file_is_kept(tmp_path, capsys, monkeypatch):
    """Ctrl-C after the commit, while the text goes into the search index: the file
    is kept (a second import says 'already imported'), and the command says so."""
    import review.browse.search

    db = tmp_path / "x.db"
    first, second = prefixes_file(tmp_path, "first"), prefixes_file(tmp_path, "second")

    def interrupted(store, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(review.browse.search, "ensure_index", interrupted)
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(first), str(second))
    assert code == 130 and "nothing of it kept" not in out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"{first}: carebench-prefixes: 3 rows, 3 new items")
    assert "stopped while adding it to the search index, which catches up by itself" in lines[0]
    assert lines[1] == f"1 imported, 0 refused; stopped after {first} (kept), 1 more not tried"
    assert items_named(db, "first") == 3 and items_named(db, "second") == 0
    monkeypatch.undo()
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(first))
    assert code == 0 and "already imported" in out
