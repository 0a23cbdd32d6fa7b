"""What a researcher scripting carelens from the shell relies on: every export goes
back in to the same answers (sorted in a spreadsheet, as JSONL, with its raters'
profiles), a prefixes table written by pandas keeps its turns, `triage-metrics
--dataset` reports, and output into a closed pipe ends quietly."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from review.team.reviewers import can_adjudicate, find_reviewer
from tests.helpers import run_cli, table_counts

ROOT = Path(__file__).resolve().parents[1]
ITEM_FILES = ("demo_evaluation_prefixes.jsonl", "demo_raw_generations.jsonl",
              "demo_raw_generations_prompted.jsonl",
              "demo_klinikebench_runs.jsonl", "demo_healthbench_rubrics.jsonl",
              "demo_healthbench_completions.jsonl")
"""The demo's items without anyone's labels but the datasets' own."""
RESPONSES = ("--question", "carebench.response_action", "--a", "demo:mapper@v2",
             "--b", "group:majority")
PREFIX = "demo_case_0001_r01"
LABEL = "0A_NO_ESCALATION_INFO_NEEDED"


@pytest.fixture
def demo_files(demo_db) -> Path:
    return demo_db.parent / "files"


@pytest.fixture
def fresh(capsys, demo_files, tmp_path) -> Path:
    """A new database holding the demo's items, and none of its clinicians or mappers."""
    db = tmp_path / "fresh.db"
    code, _, err = run_cli(capsys, "--db", str(db), "import", *(str(demo_files / f) for f in ITEM_FILES))
    assert code == 0, err
    return db


def export(capsys, db: Path, out: Path, what: str = "annotations") -> Path:
    code, _, err = run_cli(capsys, "--db", str(db), "export", "--what", what, "--out", str(out))
    assert code == 0, err
    return out


def import_(capsys, db: Path, *args: str) -> tuple[int, str]:
    code, _, err = run_cli(capsys, "--db", str(db), "import", *args)
    return code, err


def coefficients(capsys, db: Path, *args: str) -> dict:
    code, out, err = run_cli(capsys, "--db", str(db), "agreement", "--json", *args)
    assert code == 0, err
    return {c["name"]: (c["value"], c["n"]) for c in json.loads(out)["coefficients"]}


def in_force(db: Path, raters: set[str] | None = None) -> set[tuple]:
    """Every rater's answer in force: (rater, item, question, target, status, value)."""
    from review.workspace import open_store

    store = open_store(db)
    try:
        rows = store.query(
            "SELECT r.name, i.uid, q.key, c.target, c.status, c.value FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id JOIN items i ON i.id = c.item_id"
            " JOIN questions q ON q.id = c.question_id")
        return {tuple(r) for r in rows if raters is None or r[0] in raters}
    finally:
        store.close()


def read_csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def write_csv_rows(path: Path, rows: list[dict], fields: list[str] | None = None) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=fields or list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def exported_raters(path: Path) -> set[str]:
    return {r["rater"] for r in read_csv_rows(path)}


# -- 1. triage-metrics --dataset ------------------------------------------------------------

def test_triage_metrics_by_dataset_is_the_report_of_that_dataset(capsys, demo_copy):
    code, every, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--json")
    assert code == 0, err
    code, demo_only, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics",
                                   "--dataset", "demo", "--json")
    assert code == 0, err
    assert json.loads(demo_only)["labellings"] == json.loads(every)["labellings"]
    assert json.loads(demo_only)["labellings"]


def test_triage_metrics_of_an_unknown_dataset_says_so(capsys, demo_copy):
    code, out, err = run_cli(capsys, "--db", str(demo_copy), "triage-metrics", "--dataset", "nope")
    assert code == 0, err
    assert "'nope'" in out and "demo" in out and len(out.strip().splitlines()) == 1


def test_triage_comparison_takes_filters_as_a_mapping(demo):
    from labels.compare import Filters, triage_comparison

    by_mapping = triage_comparison(demo, {"dataset": "demo", "split": ""})
    assert by_mapping.filters == Filters(dataset="demo")
    assert by_mapping.labellings == triage_comparison(demo, Filters(dataset="demo")).labellings
    with pytest.raises(ValueError, match="unknown filter"):
        triage_comparison(demo, {"datset": "demo"})


# -- 2. an annotation export sorted in a spreadsheet ----------------------------------------

def test_annotation_export_sorted_in_a_spreadsheet_goes_back_in_the_same(capsys, demo_copy,
                                                                          fresh, tmp_path):
    out = export(capsys, demo_copy, tmp_path / "ann.csv")
    rows = read_csv_rows(out)
    rows.sort(key=lambda r: (r["item_id"], r["rater"], r["phase"]))  # blind before after_reveal
    sorted_csv = write_csv_rows(tmp_path / "sorted.csv", rows)
    code, err = import_(capsys, fresh, str(sorted_csv))
    assert code == 0, err
    raters = exported_raters(out)
    assert in_force(fresh, raters) == in_force(demo_copy, raters)
    assert coefficients(capsys, fresh, *RESPONSES) == coefficients(capsys, demo_copy, *RESPONSES)


def test_annotation_export_in_any_row_order_goes_back_in_the_same(capsys, demo_copy, fresh, tmp_path):
    out = export(capsys, demo_copy, tmp_path / "ann.csv")
    backwards = write_csv_rows(tmp_path / "backwards.csv", read_csv_rows(out)[::-1])
    code, err = import_(capsys, fresh, str(backwards))
    assert code == 0, err
    raters = exported_raters(out)
    assert in_force(fresh, raters) == in_force(demo_copy, raters)


def _one_unit_twice(tmp_path: Path, ids: tuple[str, str], **extra: str) -> Path:
    """Two answers of one rater to one prefix, the later first: with annotation ids."""
    rows = [{"annotation_id": ids[1], "item_id": PREFIX, "rater": "Dr. New", "value": "1B",
             "supersedes": ids[0], **extra},
            {"annotation_id": ids[0], "item_id": PREFIX, "rater": "Dr. New", "value": "0A",
             "supersedes": "", **extra}]
    return write_csv_rows(tmp_path / "two.csv", rows)


def test_annotation_ids_order_the_answers_not_the_rows(capsys, fresh, tmp_path):
    code, err = import_(capsys, fresh, str(_one_unit_twice(tmp_path, ("7", "12"))))
    assert code == 0, err
    assert {v for r, i, *_, v in in_force(fresh, {"Dr. New"})} == {"1B_ESCALATION_URGENT_CARE"}


def test_a_spreadsheet_without_annotation_ids_takes_row_order_as_time(capsys, fresh, tmp_path):
    rows = [{"item_id": PREFIX, "rater": "Dr. New", "value": "1B"},
            {"item_id": PREFIX, "rater": "Dr. New", "value": "0A"}]
    code, err = import_(capsys, fresh, str(write_csv_rows(tmp_path / "plain.csv", rows)))
    assert code == 0, err
    assert {v for *_, v in in_force(fresh, {"Dr. New"})} == {LABEL}


@pytest.mark.parametrize("ids, extra, words", [
    (("7", "x"), {}, ":2: field 'annotation_id' must be a whole number"),
    (("7", "7.5"), {}, ":2: field 'annotation_id' must be a whole number"),
    (("7", ""), {}, ":2: field 'annotation_id' must be a whole number from 1"),
    (("7", "7"), {}, ":3: field 'annotation_id' 7 again: line 2 has it"),
    (("12", "7"), {}, ":2: field 'supersedes' 12 is not an earlier annotation"),
    (("7", "12"), {"current": "True"}, ":3: field 'current' says annotation 7 is the answer in force"),
    (("7", "12"), {"current": "False"}, ":2: field 'current' says annotation 12 was superseded"),
])
def test_inconsistent_annotation_ids_are_refused(capsys, fresh, tmp_path, ids, extra, words):
    before = table_counts_of(fresh)
    path = _one_unit_twice(tmp_path, ids, **extra)
    code, err = import_(capsys, fresh, str(path))
    assert code == 2
    assert f"{path}{words}" in err
    assert table_counts_of(fresh) == before


def test_an_export_with_rows_left_out_is_refused(capsys, demo_copy, fresh, tmp_path):
    """Leaving out each unit's answer in force (filtering on phase in a spreadsheet)
    would make a superseded answer current again: refused, saying which row."""
    rows = read_csv_rows(export(capsys, demo_copy, tmp_path / "ann.csv"))
    kept = [r for r in rows if r["phase"] != "after_reveal"]
    assert len(kept) < len(rows)
    code, err = import_(capsys, fresh, str(write_csv_rows(tmp_path / "blind.csv", kept)))
    assert code == 2
    assert "field 'current'" in err and "rows were left out" in err


def test_supersedes_naming_another_raters_answer_is_refused(capsys, fresh, tmp_path):
    rows = [{"annotation_id": "3", "item_id": PREFIX, "rater": "Dr. A", "value": "0A",
             "supersedes": ""},
            {"annotation_id": "5", "item_id": PREFIX, "rater": "Dr. B", "value": "0A",
             "supersedes": "3"}]
    path = write_csv_rows(tmp_path / "s.csv", rows)
    code, err = import_(capsys, fresh, str(path))
    assert code == 2 and f"{path}:3: field 'supersedes' names annotation 3 (line 2)" in err


def table_counts_of(db: Path) -> dict:
    from review.workspace import open_store

    store = open_store(db)
    try:
        return table_counts(store)
    finally:
        store.close()


# -- 3. JSONL exports go back in ------------------------------------------------------------

def test_carebench_labels_jsonl_export_goes_back_in(capsys, demo_copy, tmp_path):
    out = export(capsys, demo_copy, tmp_path / "labels.jsonl", "carebench-labels")
    code, err = import_(capsys, demo_copy, "--rater", "majority-export", str(out))
    assert code == 0, err
    n = len(out.read_text().splitlines())
    got = coefficients(capsys, demo_copy, "--question", "carebench.escalation_needed",
                       "--a", "majority-export", "--b", "group:majority")
    assert got["percent_agreement"] == (1.0, n)


def test_annotations_jsonl_export_goes_back_in_like_the_csv(capsys, demo_copy, demo_files,
                                                            fresh, tmp_path):
    jsonl = export(capsys, demo_copy, tmp_path / "ann.jsonl")
    rows = [json.loads(x) for x in jsonl.read_text(encoding="utf-8").splitlines()]
    # the same fields as the CSV export, some typed (numbers, true/false)
    assert set(rows[0]) == set(read_csv_rows(export(capsys, demo_copy, tmp_path / "ann.csv"))[0])
    code, err = import_(capsys, fresh, str(jsonl))
    assert code == 0, err
    raters = {r["rater"] for r in rows}
    assert in_force(fresh, raters) == in_force(demo_copy, raters)
    # and from a CSV, the same
    again = tmp_path / "again.db"
    code, err = import_(capsys, again, *(str(demo_files / f) for f in ITEM_FILES),
                        str(tmp_path / "ann.csv"))
    assert code == 0, err
    assert in_force(again) == in_force(fresh)


def test_a_jsonl_value_that_looks_like_a_formula_is_kept_as_written(capsys, fresh, tmp_path):
    """The JSONL export does not quote formulas for a spreadsheet, so nothing is unquoted."""
    row = {"item_id": PREFIX, "rater": "Dr. New", "value": "0A", "rationale": "'-2 on the scale"}
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    code, err = import_(capsys, fresh, str(path))
    assert code == 0, err
    from review.workspace import open_store

    store = open_store(fresh)
    try:
        assert store.scalar("SELECT a.rationale FROM annotations a JOIN raters r"
                            " ON r.id = a.rater_id WHERE r.name = 'Dr. New'") == "'-2 on the scale"
    finally:
        store.close()


# -- 4. a prefixes table written by pandas ----------------------------------------------------

TURNS = ["My head hurts since this morning.", "Now my neck is stiff, and I can't bend it."]


def _prefix_row(turns) -> dict:
    return {"prefix_id": "inv_case_0001_r02", "case_id": "inv_case_0001", "round_id": 2,
            "split": "validation", "gold_label": "1B_ESCALATION_URGENT_CARE",
            "input_patient_turns": turns}


def _turns_of(db: Path, uid: str = "inv_case_0001_r02") -> list[str]:
    from review.workspace import open_store

    store = open_store(db)
    try:
        return json.loads(store.scalar("SELECT payload FROM items WHERE uid = ?", (uid,)))["turns"]
    finally:
        store.close()


@pytest.mark.parametrize("as_written", ["numpy", "list"])
def test_prefixes_csv_written_by_pandas_keeps_its_turns(capsys, tmp_path, as_written):
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    turns = np.array(TURNS, dtype=object) if as_written == "numpy" else list(TURNS)
    path = tmp_path / "prefixes.csv"
    pd.DataFrame([_prefix_row(turns)]).to_csv(path, index=False)
    db = tmp_path / "p.db"
    code, err = import_(capsys, db, str(path))
    assert code == 0, err
    assert _turns_of(db) == TURNS


@pytest.mark.parametrize("cell", [
    "['one turn' 'another', 'a third']",          # numpy's and Python's forms mixed
    "['cut off",                                  # never closed
    "['t0' 't1' ... 't1999']",                    # numpy's summary of a long array
    "['a', __import__('os').system('touch PWNED')]",  # code, never run
    "[f'{1 + 1}']",
    "['a'] and more words",
])
def test_a_turn_list_that_cannot_be_read_is_refused(capsys, tmp_path, monkeypatch, cell):
    monkeypatch.chdir(tmp_path)
    path = write_csv_rows(tmp_path / "prefixes.csv", [_prefix_row(cell)])
    code, err = import_(capsys, tmp_path / "p.db", str(path))
    assert code == 2
    assert f"{path}:2: field 'input_patient_turns' looks like a list" in err
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("cell, turns", [
    ("[laughs] fine, really [pause]", ["[laughs] fine, really [pause]"]),
    ("just one turn", ["just one turn"]),
    ('["a", "b"]', ["a", "b"]),
    ("['it\\'s \"quoted\"'\n 'two\\nlines']", ["it's \"quoted\"", "two\nlines"]),
])
def test_turns_that_are_text_or_a_readable_list(capsys, tmp_path, cell, turns):
    path = write_csv_rows(tmp_path / "prefixes.csv", [_prefix_row(cell)])
    db = tmp_path / "p.db"
    code, err = import_(capsys, db, str(path))
    assert code == 0, err
    assert _turns_of(db) == turns


# -- 5. output into a closed pipe ------------------------------------------------------------

def test_output_into_a_closed_pipe_ends_quietly_with_sigpipe_status(demo_copy):
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), "--db", str(demo_copy), "agreement",
         "--question", "carebench.escalation_needed", "--a", "Dr. Amara Okafor",
         "--b", "Dr. Lukas Brenner"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # `| head -0`: the reader has gone before anything is written
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-600:]
    assert proc.returncode == 141


def test_sigpipe_exit_status_in_process(capsys, demo_copy, monkeypatch):
    import cli

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setitem(cli.COMMANDS, "search", broken)
    assert cli.main(["--db", str(demo_copy), "search", "head"]) == cli.SIGPIPE_STATUS == 141


# -- 6. raters' profiles ---------------------------------------------------------------------

def _people(path: Path) -> set[tuple]:
    return {(r["rater"], r["rater_role"], r["specialty"]) for r in map(json.loads, path.open())
            if r["rater_kind"] == "human"}


def test_annotation_export_round_trip_keeps_rater_role_and_specialty(capsys, demo_copy, fresh,
                                                                      tmp_path):
    before = export(capsys, demo_copy, tmp_path / "ann.jsonl")
    code, err = import_(capsys, fresh, str(export(capsys, demo_copy, tmp_path / "ann.csv")))
    assert code == 0, err
    after = export(capsys, fresh, tmp_path / "again.jsonl")
    assert _people(after) == _people(before)
    assert ("Dr. Mei Tanaka", "reviewer", "paediatrics") in _people(after)


def test_a_new_rater_keeps_the_files_profile_but_never_a_privileged_role(capsys, demo_copy,
                                                                          tmp_path):
    from review.workspace import open_store

    rows = [{"item_id": PREFIX, "rater": name, "value": "0A", "rater_role": role,
             "specialty": specialty, "seniority": "registrar"}
            for name, role, specialty in (("Dr. Plain", "reviewer", "cardiology"),
                                          ("Dr. Boss", "admin", "surgery"),
                                          ("Dr. Settler", "adjudicator", "geriatrics"),
                                          # existing people: left exactly as they are
                                          ("Dr. Mei Tanaka", "admin", "cardiology"),
                                          ("Jordan Lee", "reviewer", "surgery"))]
    code, err = import_(capsys, demo_copy, str(write_csv_rows(tmp_path / "people.csv", rows)))
    assert code == 0, err
    store = open_store(demo_copy)
    try:
        plain = find_reviewer(store, "Dr. Plain")
        assert (plain.role, plain.specialty, plain.seniority) == ("reviewer", "cardiology", "registrar")
        for name, role in (("Dr. Boss", "admin"), ("Dr. Settler", "adjudicator")):
            person = find_reviewer(store, name)
            assert person.role == "reviewer" and not can_adjudicate(person)
            assert person.specialty is not None
            meta = json.loads(store.scalar("SELECT meta FROM raters WHERE name = ?", (name,)))
            assert meta == {"role_not_granted": role}
        mei, lee = find_reviewer(store, "Dr. Mei Tanaka"), find_reviewer(store, "Jordan Lee")
        assert (mei.role, mei.specialty, mei.seniority) == ("reviewer", "paediatrics", "registrar")
        assert (lee.role, lee.specialty) == ("admin", "clinical informatics")
    finally:
        store.close()


def test_a_rater_described_two_ways_is_refused(capsys, fresh, tmp_path):
    rows = [{"item_id": PREFIX, "rater": "Dr. Two", "value": "0A", "rater_role": "reviewer",
             "specialty": "cardiology"},
            {"item_id": "demo_case_0001_r02", "rater": "Dr. Two", "value": "0A",
             "rater_role": "reviewer", "specialty": "surgery"}]
    path = write_csv_rows(tmp_path / "two.csv", rows)
    code, err = import_(capsys, fresh, str(path))
    assert code == 2
    assert f"{path}:3: field 'specialty' of rater 'Dr. Two' is 'surgery'; line 2 gives 'cardiology'" in err


def test_machine_and_data_raters_keep_their_roles(capsys, fresh, tmp_path):
    from review.workspace import open_store

    rows = [{"item_id": PREFIX, "rater": "other:mapper@v9", "rater_kind": "machine",
             "rater_role": "mapper", "value": "0A"},
            {"item_id": PREFIX, "rater": "physician:x", "rater_kind": "human",
             "rater_role": "physician", "value": "0A"}]
    code, err = import_(capsys, fresh, str(write_csv_rows(tmp_path / "m.csv", rows)))
    assert code == 0, err
    store = open_store(fresh)
    try:
        roles = dict(store.query("SELECT name, role FROM raters WHERE name IN (?, ?)",
                                 ("other:mapper@v9", "physician:x")))
        assert roles == {"other:mapper@v9": "mapper", "physician:x": "physician"}
        assert find_reviewer(store, "physician:x") is None  # data, not someone who logs in
    finally:
        store.close()


def test_an_item_the_export_withheld_is_refused_as_unknown_not_as_out_of_order(capsys, fresh,
                                                                               tmp_path):
    """A withheld item's rows carry a new item id each (`withheld-<annotation id>`), so
    their `current` and `supersedes` no longer match: the message is about the item."""
    rows = [{"annotation_id": "5", "item_id": "withheld-5", "rater": "Dr. A", "value": "0A",
             "supersedes": "", "current": "False"},
            {"annotation_id": "9", "item_id": "withheld-9", "rater": "Dr. A", "value": "1B",
             "supersedes": "5", "current": "True"}]
    code, err = import_(capsys, fresh, str(write_csv_rows(tmp_path / "w.csv", rows)))
    assert code == 2 and "unknown item 'withheld-5'" in err


def test_a_plain_spreadsheets_specialty_column_is_the_cases_not_the_raters(tmp_path):
    """A spreadsheet of labels with the case's specialty on each row goes in as it
    did: only the annotation export's profile columns describe its raters."""
    from review.datasets.sources.base import ImportOptions
    from review.datasets.sources.labels_long import read_labels_long
    from store.records import AnnotationRecord, RaterRecord

    path = tmp_path / "labels.csv"
    path.write_text("item_id,rater,value,specialty\n"
                    "demo_case_0001_r01,Dr. X,1B_ESCALATION_URGENT_CARE,cardiology\n"
                    "demo_case_0002_r01,Dr. X,0A_NO_ESCALATION_INFO_NEEDED,neurology\n",
                    encoding="utf-8")
    records = list(read_labels_long(path, ImportOptions()))
    assert [r.item_uid for r in records if isinstance(r, AnnotationRecord)] == [
        "demo_case_0001_r01", "demo_case_0002_r01"]
    assert [r.specialty for r in records if isinstance(r, RaterRecord)] == [None]


def test_an_export_in_id_order_streams_through_its_checks(tmp_path):
    """The export as written (oldest first) is checked as it streams past, keeping
    each id's line and unit rather than every row: a third of what sorting held."""
    import csv as csv_module
    import tracemalloc

    from review.datasets.sources.base import ImportOptions
    from review.datasets.sources.labels_long import read_labels_long

    path = tmp_path / "export.csv"
    n = 30_000
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv_module.writer(fh)
        w.writerow(["annotation_id", "item_id", "rater", "value", "question", "rationale", "current"])
        for i in range(n):
            w.writerow([i + 1, f"demo_case_{i:05d}_r01", f"Dr. R{i % 20}", "1B_ESCALATION_URGENT_CARE",
                        "carebench.escalation_needed", "a rationale of some length " * 3, "true"])
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_labels_long(path, ImportOptions()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == n + 20  # every answer, and each of the 20 raters once
    assert peak < 15_000_000, f"peak {peak / 1e6:.0f} MB for {n:,} rows in id order"
