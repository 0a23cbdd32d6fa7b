"""A benchmark is a set of runs: each run a sealed record, each item in one run.

The files here are written field by field from the CARE-Bench README (FORMATS.md section
1: raw generations carry exactly `prefix_id, case_id, split, round_id, protocol,
prompt_version, patient_information_available_so_far, input_messages, model_requested,
model_actual, provider, raw_model_response, generation_failed, error_message`; the two
protocols are `prompted` and `unprompted`, each with its `prompt_version`; the mapper's
file adds the submitter's `model_alias` and the mapped label), not from carelens's code.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlite_utils import Database

from review.datasets.sources import ImportOptions, InputError, import_file
from review.workspace import open_store
from store import Store
from store.chain import register_functions
from store.migrations import m070_key, migrations
from store.records import ItemRecord, RunRecord
from store.runs import RunChoiceError, load_runs, one_run, run_key, select_runs
from store.verify import append_only_tables, verify_file
from store.writer import RecordWriter
from tests.helpers import table_counts, write_jsonl

PREFIXES = [
    {"prefix_id": f"inv_v1_case_{c:04d}_r{r:02d}", "case_id": f"inv_v1_case_{c:04d}",
     "round_id": r, "split": "validation",
     "gold_label": ["0A_NO_ESCALATION_INFO_NEEDED", "1B_ESCALATION_URGENT_CARE"][(c + r) % 2],
     "input_patient_turns": [f"Invented turn {k} of case {c}." for k in range(1, r + 1)],
     "source_dataset": "invented", "source_case_id": f"s{c}", "specialty_or_domain": "general",
     "case_age_group": "adult"}
    for c in (1, 2) for r in (1, 2)
]
PROMPTS = {"prompted": ("care_bench_prompted_v1", "You are a patient-facing health assistant."),
           "unprompted": ("care_bench_unprompted_v1", None)}


def generation(prefix: dict, protocol: str, requested: str, actual: str | None, text: str,
               provider: str = "openai", failed: bool = False) -> dict:
    """One raw-generation row, the 14 fields of the CARE-Bench README in their order."""
    version, system = PROMPTS[protocol]
    info = "\n".join(prefix["input_patient_turns"])
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": info}]
    return {"prefix_id": prefix["prefix_id"], "case_id": prefix["case_id"],
            "split": prefix["split"], "round_id": prefix["round_id"], "protocol": protocol,
            "prompt_version": version, "patient_information_available_so_far": info,
            "input_messages": messages, "model_requested": requested,
            "model_actual": None if failed else actual, "provider": provider,
            "raw_model_response": None if failed else text, "generation_failed": failed,
            "error_message": "RateLimitError: try again" if failed else None}


def mapped(gen: dict, alias: str, label: str, mapper: str = "gpt-4.1-2025-04-14") -> dict:
    """The mapper's row for a generation: its fields plus the alias, mapper and label."""
    return {**gen, "model_alias": alias, "mapper_model": mapper,
            "mapper_prompt_version": "care_bench_mapper_v1", "predicted_label": label,
            "mapper_raw_output": json.dumps({"label": label})}


def run_file(tmp_path, name: str, protocol: str, requested: str, actual: str | None,
             said: str = "reply") -> tuple:
    rows = [generation(p, protocol, requested, actual, f"{said} {protocol} {p['prefix_id']}")
            for p in PREFIXES]
    return write_jsonl(tmp_path / name, rows), rows


@pytest.fixture
def prefixes(tmp_path):
    return write_jsonl(tmp_path / "evaluation_prefixes_public.jsonl", PREFIXES)


def responses(store: Store) -> dict[str, dict]:
    """uid -> the response's run fields and text."""
    out = {}
    for r in store.query(
            "SELECT i.uid, i.run_id, r.model_requested, r.protocol, r.prompt_version, i.payload,"
            " p.uid AS prefix FROM items i JOIN runs r ON r.id = i.run_id"
            " JOIN items p ON p.id = i.parent_id WHERE i.kind = 'response' ORDER BY i.id"):
        out[r["uid"]] = {"run": r["run_id"], "model": r["model_requested"],
                         "protocol": r["protocol"], "prompt_version": r["prompt_version"],
                         "text": json.loads(r["payload"])["response"], "prefix": r["prefix"]}
    return out


# -- failure 1: the second protocol of a model is kept, as its own run ------------------------

def test_the_unprompted_run_of_a_model_is_kept_beside_its_prompted_run(store, prefixes, tmp_path):
    import_file(store, prefixes)
    prompted, p_rows = run_file(tmp_path, "gpt-4o_prompted.jsonl", "prompted", "gpt-4o",
                                "gpt-4o-2024-08-06")
    unprompted, u_rows = run_file(tmp_path, "gpt-4o_unprompted.jsonl", "unprompted", "gpt-4o",
                                  "gpt-4o-2024-08-06")
    first = import_file(store, prompted)
    second = import_file(store, unprompted)
    assert (first.items, second.items) == (4, 4), second.summary()
    assert "4 new items" in second.summary()
    got = responses(store)
    assert len(got) == 8
    runs = load_runs(store.conn, "response")
    assert [(r.model_requested, r.protocol, r.prompt_version, r.items) for r in runs] == [
        ("gpt-4o", "prompted", "care_bench_prompted_v1", 4),
        ("gpt-4o", "unprompted", "care_bench_unprompted_v1", 4)]
    # every row's text is on a response of the run the row names, none dropped or merged
    for row in p_rows + u_rows:
        (mine,) = [g for g in got.values() if g["prefix"] == row["prefix_id"]
                   and g["protocol"] == row["protocol"]]
        assert mine["text"] == row["raw_model_response"]
        assert mine["prompt_version"] == row["prompt_version"]
    # the two runs are named apart by their protocol wherever a model is shown
    assert [r.label for r in runs] == ["gpt-4o · prompted", "gpt-4o · unprompted"]
    before = table_counts(store)
    assert import_file(store, unprompted).already_imported
    assert table_counts(store) == before


def test_a_response_uid_follows_from_its_row_whatever_came_first(prefixes, tmp_path):
    prompted, _ = run_file(tmp_path, "prompted.jsonl", "prompted", "gpt-4o", "gpt-4o-x")
    unprompted, _ = run_file(tmp_path, "unprompted.jsonl", "unprompted", "gpt-4o", "gpt-4o-x")
    uids = []
    for order in ((prompted, unprompted), (unprompted, prompted)):
        with open_store(tmp_path / f"{order[0].stem}.db") as s:
            import_file(s, prefixes)
            for f in order:
                import_file(s, f)
            uids.append({u: (g["protocol"], g["prefix"]) for u, g in responses(s).items()})
    assert uids[0] == uids[1]
    assert "inv_v1_case_0001_r01::gpt-4o::unprompted@care_bench_unprompted_v1" in uids[0]


def test_another_file_of_the_same_run_adds_to_it(store, prefixes, tmp_path):
    import_file(store, prefixes)
    rows = [generation(p, "prompted", "gpt-4o", "gpt-4o-x", "reply") for p in PREFIXES]
    import_file(store, write_jsonl(tmp_path / "shard-1.jsonl", rows[:2]))
    import_file(store, write_jsonl(tmp_path / "shard-2.jsonl", rows[2:]))
    (run,) = load_runs(store.conn, "response")
    assert run.items == 4 and run.source.endswith("shard-1.jsonl")


def test_a_second_attempt_of_a_run_is_its_own_run(store, prefixes, tmp_path):
    import_file(store, prefixes)
    first, _ = run_file(tmp_path, "a1.jsonl", "prompted", "gpt-4o", "gpt-4o-x", "first")
    again, _ = run_file(tmp_path, "a2.jsonl", "prompted", "gpt-4o", "gpt-4o-x", "again")
    import_file(store, first)
    import_file(store, again, options=ImportOptions(attempt=2))
    runs = load_runs(store.conn, "response")
    assert [(r.attempt, r.items, r.label) for r in runs] == [
        (1, 4, "gpt-4o · attempt 1"), (2, 4, "gpt-4o · attempt 2")]


def test_an_item_of_one_run_is_never_taken_for_another_runs(store, prefixes, tmp_path):
    import_file(store, prefixes)
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.item(ItemRecord("inv_v1_case_0001_r01::m", "response", "carebench", {"response": "a"},
                          "inv_v1_case_0001_r01", model="m"))
        w.flush()
    before = table_counts(store)
    with pytest.raises(InputError, match=r"item 'inv_v1_case_0001_r01::m' is already there as"
                                         r" part of run 1 \(m"):
        with store.transaction() as conn:
            w = RecordWriter(conn, source="test")
            w.item(ItemRecord("inv_v1_case_0001_r01::m", "response", "carebench",
                              {"response": "b"}, "inv_v1_case_0001_r01", model="m",
                              run=RunRecord("carebench", "response",
                                            {"model_requested": "m", "protocol": "prompted"})))
            w.flush()
    assert table_counts(store) == before


# -- failure 2: a mapped label goes onto the run it names ------------------------------------

def test_mapped_labels_go_to_the_run_requested_not_to_the_run_served_by_that_name(
        store, prefixes, tmp_path):
    import_file(store, prefixes)
    file_a, rows_a = run_file(tmp_path, "run_a.jsonl", "prompted", "gpt-4o", "gpt-4o-2024-08-06",
                              "A says")
    file_b, rows_b = run_file(tmp_path, "run_b.jsonl", "prompted", "gpt-4o-2024-08-06",
                              "gpt-4o-2024-08-06", "B says")
    import_file(store, file_a)
    import_file(store, file_b)
    labels = ["0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
              "1A_ESCALATION_NONURGENT_CARE", "1B_ESCALATION_URGENT_CARE"]
    import_file(store, write_jsonl(tmp_path / "mapped_a.jsonl", [
        mapped(r, "team-a", labels[0]) for r in rows_a]))
    result = import_file(store, write_jsonl(tmp_path / "mapped_b.jsonl", [
        mapped(r, "team-b", labels[3]) for r in rows_b]))
    assert result.annotations == 4 and result.items == 0
    got = {(r["model_requested"], r["text"][:6], r["value"]) for r in store.query(
        "SELECT r.model_requested, json_extract(i.payload, '$.response') AS text, a.value"
        " FROM annotations a JOIN items i ON i.id = a.item_id JOIN runs r ON r.id = i.run_id"
        " JOIN raters x ON x.id = a.rater_id WHERE x.kind = 'machine'")}
    assert got == {("gpt-4o", "A says", labels[0]), ("gpt-4o-2024-08-06", "B says", labels[3])}
    # no label of A's was superseded by one meant for B
    assert store.scalar("SELECT COUNT(*) FROM annotations WHERE supersedes_id IS NOT NULL") == 0
    runs = {r.model_requested: r for r in load_runs(store.conn, "response")}
    assert runs["gpt-4o"].aliases == ("team-a",) and runs["gpt-4o-2024-08-06"].aliases == ("team-b",)


def test_a_name_that_fits_two_runs_is_refused_naming_them(store, prefixes, tmp_path):
    import_file(store, prefixes)
    file_a, rows_a = run_file(tmp_path, "run_a.jsonl", "prompted", "gpt-4o", "gpt-4o-2024-08-06")
    file_b, _ = run_file(tmp_path, "run_b.jsonl", "prompted", "gpt-4o-2024-08-06",
                         "gpt-4o-2024-08-06")
    import_file(store, file_a)
    import_file(store, file_b)
    row = mapped(rows_a[0], "", "0A_NO_ESCALATION_INFO_NEEDED")
    del row["model_requested"], row["model_alias"]  # only the model served names it
    path = write_jsonl(tmp_path / "mapped.jsonl", [row])
    before = table_counts(store)
    with pytest.raises(InputError) as caught:
        import_file(store, path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:1: model_actual 'gpt-4o-2024-08-06', protocol 'prompted',"
                              " prompt_version 'care_bench_prompted_v1', provider 'openai' names"
                              " 2 runs (run 1 (")
    assert "run 2 (" in message and "requested gpt-4o;" in message
    assert "requested gpt-4o-2024-08-06;" in message
    assert table_counts(store) == before


def test_a_mapped_row_of_the_other_protocol_goes_to_that_protocols_response(
        store, prefixes, tmp_path):
    import_file(store, prefixes)
    _, p_rows = run_file(tmp_path, "p.jsonl", "prompted", "gpt-4o", "gpt-4o-x")
    _, u_rows = run_file(tmp_path, "u.jsonl", "unprompted", "gpt-4o", "gpt-4o-x")
    import_file(store, tmp_path / "p.jsonl")
    import_file(store, tmp_path / "u.jsonl")
    import_file(store, write_jsonl(tmp_path / "mapped_u.jsonl", [
        mapped(r, "my-model", "1B_ESCALATION_URGENT_CARE") for r in u_rows]))
    labelled = {r[0] for r in store.query(
        "SELECT r.protocol FROM annotations a JOIN items i ON i.id = a.item_id"
        " JOIN runs r ON r.id = i.run_id JOIN raters x ON x.id = a.rater_id"
        " WHERE x.kind = 'machine'")}
    assert labelled == {"unprompted"}
    # the alias alone now fits both runs' names only once the prompted run is aliased too
    row = mapped(p_rows[0], "my-model", "0A_NO_ESCALATION_INFO_NEEDED")
    for k in ("model_requested", "model_actual", "protocol", "prompt_version"):
        del row[k]
    import_file(store, write_jsonl(tmp_path / "mapped_p.jsonl", [
        mapped(r, "my-model", "0A_NO_ESCALATION_INFO_NEEDED") for r in p_rows]))
    with pytest.raises(InputError, match="model_alias 'my-model', provider 'openai' names 2 runs"):
        import_file(store, write_jsonl(tmp_path / "alias_only.jsonl", [row]))


# -- the run record is sealed, and verify knows it --------------------------------------------

def test_runs_refuse_update_delete_and_replace_and_verify_names_them(tmp_path, prefixes):
    db = tmp_path / "sealed.db"
    with open_store(db) as s:
        import_file(s, prefixes)
        import_file(s, run_file(tmp_path, "p.jsonl", "prompted", "gpt-4o", "x")[0])
        s.conn.execute("INSERT INTO run_aliases (run_id, alias, created_at) VALUES (1, 'a', 'now')")
    assert {"runs", "run_aliases"} <= set(append_only_tables())
    conn = sqlite3.connect(db)
    for sql in ("UPDATE runs SET protocol = 'unprompted'", "DELETE FROM runs",
                "INSERT OR REPLACE INTO runs SELECT * FROM runs",
                "UPDATE run_aliases SET alias = 'b'", "DELETE FROM run_aliases",
                "INSERT OR REPLACE INTO run_aliases SELECT * FROM run_aliases",
                "UPDATE items SET run_id = NULL WHERE run_id IS NOT NULL"):
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute(sql)
    verdict = verify_file(db)
    assert verdict.whole, verdict.problems
    conn.execute("DROP TRIGGER runs_no_update")
    conn.commit()
    conn.close()
    problems = verify_file(db).problems
    assert problems == ["protection missing: runs no longer refuses UPDATE (trigger"
                        " runs_no_update was dropped)"]


# -- databases from before runs ---------------------------------------------------------------

def _old_database(path) -> None:
    """A database as carelens wrote it before runs existed (schema up to m060), holding
    what its importers wrote: responses of two models, a KlinikeBench episode, a Harbor
    trial, a simple-evals result and a meta-evaluation placeholder."""
    conn = sqlite3.connect(path, isolation_level=None)
    register_functions(conn)
    db = Database(conn)
    migrations.apply(db, stop_before="m070_runs")
    now = "2026-01-01T00:00:00+00:00"
    conn.execute("INSERT INTO datasets (name, kind, created_at) VALUES ('carebench', 'carebench', ?)",
                 (now,))
    conn.execute("INSERT INTO imports (path, format, sha256, n_rows, n_items, n_annotations, actor,"
                 " imported_at) VALUES ('old/raw_generations.jsonl', 'carebench-generations', 'x',"
                 " 0, 0, 0, 'cli', ?)", (now,))
    conn.execute("INSERT INTO imports (path, format, sha256, n_rows, n_items, n_annotations, actor,"
                 " imported_at) VALUES ('old/healthbench_m_20260101_allresults.json',"
                 " 'healthbench-results', 'y', 0, 0, 0, 'cli', ?)", (now,))

    def item(uid, kind, model=None, meta=None, parent=None, payload=None, import_id=1):
        conn.execute(
            "INSERT INTO items (uid, dataset_id, kind, parent_id, model, payload, meta, import_id,"
            " created_at) VALUES (?, 1, ?, (SELECT id FROM items WHERE uid = ?), ?, ?, ?, ?, ?)",
            (uid, kind, parent, model, json.dumps(payload or {}), json.dumps(meta or {}),
             import_id, now))

    gen = {"protocol": "prompted", "prompt_version": "care_bench_prompted_v1",
           "provider": "openai", "model_requested": "gpt-4o", "model_actual": "gpt-4o-x"}
    for p in PREFIXES:
        item(p["prefix_id"], "prefix")
        item(f"{p['prefix_id']}::gpt-4o", "response", "gpt-4o", gen, p["prefix_id"])
        item(f"{p['prefix_id']}::m2", "response", "m2", {}, p["prefix_id"])
    item("clb_task_1__x", "trajectory", "openai/gpt-5.4",
         {"subset": "leaderboard", "run": "leaderboard-gpt-5.4", "patient_model": "p"})
    item("harbor:t__1", "trajectory", "anthropic/c", {"source": "harbor", "job": "job-1"},
         payload={"agent": {"name": "terminus-2"}})
    item("hb:p1", "graded_conversation")
    item("hb:p1::c1", "graded_conversation", "m", {"source": "simple-evals results"}, "hb:p1",
         import_id=2)
    item("hb:p1::c2", "graded_conversation", None, {"stub": True}, "hb:p1")
    conn.close()


def test_an_old_database_gets_a_run_for_every_response_trajectory_and_completion(tmp_path):
    db = tmp_path / "old.db"
    _old_database(db)
    before = dict(sqlite3.connect(db).execute("SELECT id, uid FROM items").fetchall())
    with open_store(db) as s:
        after = dict(s.query("SELECT id, uid FROM items"))
        runs = {r.id: r for r in load_runs(s.conn)}
        of = dict(s.query("SELECT uid, run_id FROM items"))
    assert after == before  # no uid changes
    assert of["inv_v1_case_0001_r01"] is None and of["hb:p1"] is None and of["hb:p1::c2"] is None
    gpt = runs[of["inv_v1_case_0001_r01::gpt-4o"]]
    assert (gpt.model_requested, gpt.protocol, gpt.prompt_version, gpt.provider,
            gpt.model_actual, gpt.items) == ("gpt-4o", "prompted", "care_bench_prompted_v1",
                                             "openai", "gpt-4o-x", 4)
    assert runs[of["inv_v1_case_0002_r02::m2"]].items == 4
    assert runs[of["clb_task_1__x"]].identity == {
        "model_requested": "openai/gpt-5.4", "subset": "leaderboard", "run": "leaderboard-gpt-5.4"}
    assert runs[of["harbor:t__1"]].identity == {"model_requested": "anthropic/c", "job": "job-1",
                                                "agent": "terminus-2"}
    assert runs[of["hb:p1::c1"]].identity == {
        "model_requested": "m", "file": "healthbench_m_20260101_allresults.json"}
    assert verify_file(db).whole


def test_a_file_of_a_run_imported_before_runs_existed_joins_that_run(tmp_path):
    db = tmp_path / "old.db"
    _old_database(db)
    rows = [generation(p, "prompted", "gpt-4o", "gpt-4o-x", "again") for p in PREFIXES]
    rows.append(generation(PREFIXES[0], "prompted", "gpt-4o", "gpt-4o-x", "more"))
    rows[-1]["prefix_id"] = "inv_v1_case_0003_r01"
    with open_store(db) as s:
        result = import_file(s, write_jsonl(tmp_path / "more.jsonl", rows))
        (run,) = [r for r in load_runs(s.conn, "response") if r.model_requested == "gpt-4o"]
    # the old responses are the run's: only the new prefix's response is new (and its prefix,
    # named by the generation, as a placeholder)
    assert result.items == 2
    assert run.items == 5 and len(load_runs(Store(db).conn, "response")) == 2


def test_the_migrations_key_is_the_importers_key():
    for identity in ({"model_requested": "m"}, {"model_requested": None},
                     {"model_requested": "m", "protocol": "p", "attempt": 1},
                     {"model_requested": "m", "attempt": 2, "max_turns": 10, "run": "é"},
                     {"model_requested": "m", "file": "x.json", "provider": ""}):
        assert m070_key(identity) == run_key(identity)


# -- choosing runs on the command line --------------------------------------------------------

def test_a_model_with_two_runs_is_not_one_figure_unless_pooled(store, prefixes, tmp_path):
    import_file(store, prefixes)
    import_file(store, run_file(tmp_path, "p.jsonl", "prompted", "gpt-4o", "x")[0])
    import_file(store, run_file(tmp_path, "u.jsonl", "unprompted", "gpt-4o", "x")[0])
    runs = select_runs(store.conn, "response", model="gpt-4o")
    assert len(runs) == 2
    with pytest.raises(RunChoiceError, match=r"model 'gpt-4o' names 2 runs: run 1 \(gpt-4o ·"
                                             r" prompted: .*choose one with --run"):
        one_run(runs, "model 'gpt-4o'")
    assert one_run(runs, "model 'gpt-4o'", pool=True) == runs
    assert [r.id for r in select_runs(store.conn, "response", run="gpt-4o · unprompted")] == [2]
    assert [r.id for r in select_runs(store.conn, "response", run="1")] == [1]
    with pytest.raises(RunChoiceError, match="no run 'gpt-5'; runs: 1 \\(gpt-4o · prompted\\)"):
        select_runs(store.conn, "response", run="gpt-5")


def test_the_migration_names_the_run_an_importer_names_for_every_corpus_format(tmp_path):
    """What m070 would give an item of each format, from what the item stored, is the run
    its importer gave it: a file of that run imported into a migrated database joins it.
    (A Harbor trial that wrote no trajectory names no agent in what it stored: m070 keys
    it by job and model alone, and the test says so.)"""
    from pathlib import PurePosixPath

    from store.migrations import _m070_identity
    from tests.test_conformance import CORPUS, library_import, manifest

    if not (CORPUS / "MANIFEST.tsv").is_file():
        pytest.skip("the conformance corpus is not beside the project")
    checked = set()
    for line in manifest():
        db = tmp_path / f"{line.group}.db"
        library_import(db, line)
    for db in tmp_path.glob("*.db"):
        with open_store(db) as s:
            rows = s.query(
                "SELECT i.uid, i.kind, i.model, i.meta, json_extract(i.payload, '$.agent.name'),"
                " m.path, r.key FROM items i JOIN runs r ON r.id = i.run_id"
                " LEFT JOIN imports m ON m.id = i.import_id")
        for uid, kind, model, meta, agent, path, key in rows:
            source = PurePosixPath(path).name if path else None
            identity, _ = _m070_identity(kind, model, json.loads(meta), agent, source)
            if kind == "trajectory" and agent is None and "job" in json.loads(meta):
                assert json.loads(key)["job"] == identity["job"], uid
                continue
            assert m070_key(identity) == key, uid
            checked.add(kind)
    assert checked == {"response", "trajectory", "graded_conversation"}


# -- the screens' model filters are run filters -----------------------------------------------

def test_the_agreement_and_browse_screens_offer_each_run_of_a_model_by_its_protocol(
        demo_copy, monkeypatch):
    from tests.test_agreement_page import REVIEWER, open_page, pair_state

    runs = ["aster-7b · prompted", "aster-7b · unprompted"]
    at = open_page(demo_copy, monkeypatch, reviewer=REVIEWER,
                   **pair_state("carebench.response_action", "group:majority",
                                "demo:mapper@v2"))
    model = next(s for s in at.selectbox if s.label == "Model")
    assert set(runs) <= set(model.options) and "aster-7b" not in model.options
    model.set_value("aster-7b · prompted").run()
    assert not at.exception
    shown = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "model aster-7b · prompted" in shown.replace("\\", "")  # Markdown's escapes off
    with open_store(demo_copy) as s:
        from labels.compare import agreement_report

        one = agreement_report(s, "carebench.response_action", "group:majority",
                               "demo:mapper@v2", {"model": "aster-7b · prompted"})
        prompted = s.scalar("SELECT COUNT(*) FROM items i JOIN runs r ON r.id = i.run_id"
                            " WHERE r.protocol = 'prompted'")
    uids = {u.item_uid for row in one.confusion.units for cell in row for u in cell}
    assert uids and all(u.endswith("::aster-7b::prompted@demo-prompted-1") for u in uids)
    assert 0 < one.n_units <= prompted

    from review.browse import BrowseQuery, browse, facets

    with open_store(demo_copy) as s:
        offered = {v.value: v.count for v in facets(s, BrowseQuery(kinds=("response",)))
                   ["models"].values}
        total = browse(s, BrowseQuery(kinds=("response",), models=("aster-7b · prompted",))).total
    assert offered["aster-7b · prompted"] == offered["aster-7b · unprompted"] == prompted
    assert "aster-7b" not in offered
    assert total == prompted
