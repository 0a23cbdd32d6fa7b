"""The conformance corpus: every published format, read as its publisher writes it.

`../shared/data/conformance/MANIFEST.tsv` lists the imports, one group per
database, in order. Each group is imported into a fresh database twice: once
the way a user (and the stop hook) does it, `carelens --db G.db import
[--format F] [extra] PATH`, and once through the library (`import_file`); both
must give the same database. The tests then check that what each README
paragraph says a file carries is where it belongs: raters, verdicts, values,
item counts. The corpus is read in place, never copied.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from review.datasets.sources import ImportOptions, import_file
from review.workspace import open_store
from tests.conftest import SHARED_DATA

CORPUS = SHARED_DATA / "conformance"
PROMPTED = "prompted@care_bench_prompted_v1"
"""The protocol and prompt version the corpus's raw generations name: a response's uid
carries its run's (`prefix_id::model::protocol@prompt_version`, README)."""
pytestmark = pytest.mark.skipif(not (CORPUS / "MANIFEST.tsv").is_file(),
                                reason="the conformance corpus is not beside the project")


@dataclass(frozen=True)
class Line:
    group: str
    format: str
    path: Path
    extra: tuple[str, ...]


def manifest() -> list[Line]:
    lines = []
    for raw in (CORPUS / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        group, fmt, path, *extra = raw.split("\t")
        lines.append(Line(group, fmt, CORPUS / path, tuple(shlex.split(extra[0] if extra else ""))))
    return lines


def cli_import(db: Path, line: Line) -> tuple[int, str, str]:
    """`carelens --db DB import [--format F] [extra] PATH`, in-process, as the stop hook runs it."""
    import cli

    args = ["--db", str(db), "import"]
    if line.format != "auto":
        args += ["--format", line.format]
    args += [*line.extra, str(line.path)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    return code, out.getvalue(), err.getvalue()


def library_import(db: Path, line: Line):
    options = ImportOptions()
    if "--rater" in line.extra:
        options.rater = line.extra[line.extra.index("--rater") + 1]
    with open_store(db) as store:
        return import_file(store, line.path, line.format, options)  # "auto": detected


def snapshot(db: Path) -> dict[str, object]:
    """What a group's database holds, by public keys (row ids and times left out)."""
    with open_store(db) as s:
        return {
            "items": sorted(tuple(r) for r in s.query(
                "SELECT uid, kind, model, failed, payload, meta FROM items")),
            "answers": sorted(tuple(r) for r in s.query(
                "SELECT i.uid, q.key, r.name, a.value, a.rationale, a.extra FROM annotations a"
                " JOIN items i ON i.id = a.item_id JOIN questions q ON q.id = a.question_id"
                " JOIN raters r ON r.id = a.rater_id")),
            "raters": sorted(tuple(r) for r in s.query(
                "SELECT name, kind, role, provider, model, prompt_version FROM raters")),
        }


@pytest.fixture(scope="module")
def groups(tmp_path_factory) -> dict[str, Path]:
    """Each group's database, imported through the command line; every line must import."""
    root = tmp_path_factory.mktemp("conformance")
    dbs: dict[str, Path] = {}
    outputs: dict[str, list[str]] = {}
    for line in manifest():
        db = dbs.setdefault(line.group, root / f"{line.group}.db")
        code, out, err = cli_import(db, line)
        assert code == 0 and not err, f"{line.group} {line.path.name}: {err or out}"
        outputs.setdefault(line.group, []).append(out)
    dbs["_outputs"] = outputs  # type: ignore[assignment]
    return dbs


def store_of(groups, group):
    return open_store(groups[group])


def answers(store, where: str = "1", params: tuple = ()) -> dict[tuple[str, str, str], dict]:
    rows = store.query(
        "SELECT i.uid, q.key, r.name, r.kind, a.value, a.rationale, a.extra FROM current_annotations a"
        " JOIN items i ON i.id = a.item_id JOIN questions q ON q.id = a.question_id"
        f" JOIN raters r ON r.id = a.rater_id WHERE {where}", params)
    return {(r["uid"], r["key"], r["name"]): {**dict(r), "extra": json.loads(r["extra"] or "{}")}
            for r in rows}


def items(store, kind: str | None = None) -> dict[str, dict]:
    rows = store.query("SELECT * FROM items" + (" WHERE kind = ?" if kind else ""),
                       (kind,) if kind else ())
    return {r["uid"]: {**dict(r), "payload": json.loads(r["payload"]), "meta": json.loads(r["meta"])}
            for r in rows}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


# -- every line, both ways --------------------------------------------------------------

def test_every_line_imports_the_same_through_the_library_and_the_command_line(groups, tmp_path):
    for group in {line.group for line in manifest()}:
        db = tmp_path / f"{group}.db"
        for line in (x for x in manifest() if x.group == group):
            result = library_import(db, line)
            assert not result.already_imported and result.rows > 0, (group, line.path.name)
        assert snapshot(db) == snapshot(groups[group]), group


def test_a_second_import_of_each_line_changes_nothing(groups, tmp_path):
    for line in manifest():
        db = groups[line.group]
        before = snapshot(db)
        code, out, err = cli_import(db, line)
        assert code == 0 and "already imported" in out, (line.path.name, out, err)
        assert snapshot(db) == before


# -- CARE-Bench ---------------------------------------------------------------------

CB = CORPUS / "carebench"
MAPPER = "gpt-4.1-2025-04-14@care_bench_mapper_v1"


def test_carebench_prefixes_carry_their_turns_gold_and_metadata(groups):
    rows = jsonl(CB / "evaluation_prefixes_public.jsonl")
    for group in ("carebench", "carebench-parquet", "carebench-csv"):
        with store_of(groups, group) as s:
            prefixes = items(s, "prefix")
            gold = answers(s, "r.name = 'carebench-gold'")
        assert len(prefixes) == 8, group
        for row in rows:
            got = prefixes[row["prefix_id"]]
            # the Parquet's Arrow lists and the CSV's numpy text both give the turns as a list
            assert got["payload"]["turns"] == row["input_patient_turns"], (group, row["prefix_id"])
            assert (got["case_id"], got["round_id"], got["split"]) == (
                row["case_id"], row["round_id"], row["split"])
            assert got["meta"]["source_dataset"] == row["source_dataset"]
            assert got["meta"]["case_age_group"] == row["case_age_group"]
            key = (row["prefix_id"], "carebench.escalation_needed", "carebench-gold")
            assert gold[key]["value"] == row["gold_label"] and gold[key]["kind"] == "reference"
        assert not any(k.startswith("Unnamed") or k == "" for p in prefixes.values() for k in p["meta"])


def test_raw_generations_keep_the_failure_and_the_empty_reply(groups):
    rows = {r["prefix_id"]: r for r in jsonl(CB / "raw_generations.jsonl")}
    with store_of(groups, "carebench") as s:
        responses = items(s, "response")
    assert len(responses) == 8
    failed = responses[f"meb_v1_case_0101_r03::gpt-4.1-mini::{PROMPTED}"]
    assert failed["failed"] == 1 and failed["payload"]["error"].startswith("RateLimitError")
    empty = responses[f"meb_v1_case_0307_r02::gpt-4.1-mini::{PROMPTED}"]
    assert empty["failed"] == 0 and empty["payload"]["response"] == ""  # an empty reply, kept
    for uid, got in responses.items():
        row = rows[uid.split("::")[0]]
        assert got["model"] == row["model_requested"] and got["parent_id"] is not None
        if not row["generation_failed"]:
            assert got["payload"]["response"] == row["raw_model_response"]
        assert got["meta"].get("model_actual") == row["model_actual"]


def test_mapped_labels_go_onto_the_imported_responses_by_the_named_mapper(groups):
    rows = jsonl(CB / "mapped_responses.jsonl")
    out = groups["_outputs"]["carebench"][2]
    assert "carebench-mapped" in out and " 0 new items" in out
    with store_of(groups, "carebench") as s:
        assert s.scalar("SELECT COUNT(*) FROM items") == 16  # 8 prefixes and 8 responses, no more
        mapper = s.query_one("SELECT kind, role, model, prompt_version FROM raters WHERE name = ?",
                             (MAPPER,))
        got = answers(s, "r.name = ?", (MAPPER,))
    assert tuple(mapper) == ("machine", "mapper", "gpt-4.1-2025-04-14", "care_bench_mapper_v1")
    assert len(got) == len(rows) == 7
    for row in rows:
        # the alias is the submitter's name for model_requested: the label is on that response
        label = got[(f"{row['prefix_id']}::{row['model_requested']}::{PROMPTED}",
                     "carebench.response_action", MAPPER)]
        assert label["value"] == row["predicted_label"]
        assert label["extra"]["raw_output"] == row["mapper_raw_output"]
        assert label["extra"]["model_alias"] == row["model_alias"] == "my-model"
    # the empty reply was mapped too: its label sits on the empty response
    assert (f"meb_v1_case_0307_r02::gpt-4.1-mini::{PROMPTED}", "carebench.response_action",
            MAPPER) in got


def test_the_direct_label_submission_is_the_named_models_labels(groups, tmp_path):
    with open(CB / "predictions.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with store_of(groups, "carebench") as s:
        got = answers(s, "r.name = 'my-direct-model'")
        kind = s.scalar("SELECT kind FROM raters WHERE name = 'my-direct-model'")
    assert kind == "machine" and len(got) == len(rows) == 8
    for row in rows:
        assert got[(row["prefix_id"], "carebench.escalation_needed", "my-direct-model")][
            "value"] == row["predicted_label"]


def test_the_labels_go_back_out_as_scorer_submissions(groups, tmp_path, capsys):
    import cli

    for rater, expected in (("my-direct-model", None), (MAPPER, "mapped")):
        out = tmp_path / f"{rater.split('@')[0]}.csv"
        assert cli.main(["--db", str(groups["carebench"]), "export", "--what", "carebench-labels",
                         "--rater", rater, "--out", str(out)]) == 0
        with out.open(newline="", encoding="utf-8") as fh:
            written = list(csv.reader(fh))
        assert written[0] == ["prefix_id", "predicted_label"]
        if expected is None:
            with open(CB / "predictions.csv", newline="", encoding="utf-8") as fh:
                assert written == list(csv.reader(fh))
        else:
            assert written[1:] == [[r["prefix_id"], r["predicted_label"]]
                                   for r in jsonl(CB / "mapped_responses.jsonl")]
    capsys.readouterr()


# -- KlinikeBench ------------------------------------------------------------------

KB = CORPUS / "klinikebench"
JUDGE = "klinikebench-judge:gpt-5.4-mini"
VERIFIER = "klinikebench-verifier"


def kb_uid(row: dict) -> str:
    return f"kb:{row['subset']}/{row['run']}/{row['trial_name']}"


def test_klinikebench_scores_give_a_verdict_per_gate_and_failed_rows_none(groups):
    rows = jsonl(KB / "leaderboard.jsonl")
    with store_of(groups, "klinikebench") as s:
        runs = items(s, "trajectory")
        got = answers(s)
        judge = s.query_one("SELECT kind, model FROM raters WHERE name = ?", (JUDGE,))
    assert len(runs) == 6 and tuple(judge) == ("machine", "gpt-5.4-mini")
    gates = ("diagnosis", "required_tools", "parameterised_actions", "must_ask")
    for row in rows:
        uid = kb_uid(row)
        run = runs[uid]
        mine = {k: v for k, v in got.items() if k[0] == uid}
        if row["exception"]:
            assert run["failed"] == 1 and run["payload"]["error"] == row["exception"]
            assert mine == {}  # a failed item has no verdicts
            continue
        assert run["failed"] == 0 and run["model"] == row["clinician_model"]
        assert run["meta"]["scores"] == {k: row[k] for k in (
            "reward", "outcome_pass", "diagnosis", "required_tools", "parameterised_actions",
            "must_ask")}
        detail = json.loads(row["gates"])
        outcome = mine[(uid, f"{uid}:outcome", VERIFIER)]
        assert outcome["value"] == ("met" if row["outcome_pass"] == 1.0 else "not_met")
        assert outcome["extra"]["reward"] == row["reward"]
        for gate in gates:
            rater = JUDGE if gate == "must_ask" else VERIFIER
            key = (uid, f"{uid}:gate:{gate}", rater)
            if row[gate] is None:  # not measured (here: the judge failed)
                assert key not in mine
                continue
            assert mine[key]["value"] == ("met" if detail[gate]["passed"] else "not_met")
            assert mine[key]["extra"]["score"] == row[gate]
        topics = [(k, v) for k, v in mine.items() if ":ask:" in k[1]]
        if row["must_ask"] is None:
            assert topics == []
            continue
        said = {json.loads(json.dumps(t["topic"])): t["asked"] for t in detail["must_ask"]["topics"]}
        assert len(topics) == len(said)
        for (_, key, rater), answer in topics:
            assert rater == JUDGE
            text = json.loads(s_question_meta(groups, key))["topic"]
            assert answer["value"] == ("met" if said[text] else "not_met")


def s_question_meta(groups, key: str) -> str:
    with store_of(groups, "klinikebench") as s:
        return s.scalar("SELECT meta FROM questions WHERE key = ?", (key,))


def test_klinikebench_gate_detail_is_kept_for_the_reviewer(groups):
    from review.reviewing.trajectory import task_requirements

    row = jsonl(KB / "leaderboard.jsonl")[1]  # diagnosis missed, a tool missing, a bad parameter
    uid = kb_uid(row)
    with store_of(groups, "klinikebench") as s:
        run = items(s, "trajectory")[uid]
        got = answers(s, "i.uid = ?", (uid,))
    # what the task requires, shown before anyone answers
    assert ("Reference diagnosis", ["NSAID-induced gastritis"]) in task_requirements(run["meta"])
    assert ("Required tools", ["get_vitals", "order_ecg"]) in task_requirements(run["meta"])
    # what the verifier found, shown with its verdict once revealed
    tools = got[(uid, f"{uid}:gate:required_tools", VERIFIER)]["extra"]["detail"]
    assert tools["missing_tools"] == ["order_ecg"]
    params = got[(uid, f"{uid}:gate:parameterised_actions", VERIFIER)]["extra"]["detail"]
    assert params["violations"][0]["reason"] == "wrong patient id P-9999"
    assert got[(uid, f"{uid}:gate:diagnosis", VERIFIER)]["extra"]["detail"]["recorded"] is None
    assert run["meta"]["gates"] == json.loads(row["gates"])
    assert len(run["payload"]["steps"]) == len(json.loads(row["agent_steps"])["steps"])
    assert run["payload"]["session_id"] == json.loads(row["agent_steps"])["session_id"]
    assert len(run["payload"]["transcript"]) == len(json.loads(row["transcript"]))


def test_klinikebench_parquet_gives_what_the_jsonl_gives(groups):
    assert snapshot(groups["klinikebench"])["answers"] == snapshot(groups["klinikebench-parquet"])[
        "answers"]
    with store_of(groups, "klinikebench-parquet") as s:
        assert s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'trajectory'") == 6


# -- Harbor -----------------------------------------------------------------------

JOB = CORPUS / "harbor" / "jobs" / "2026-03-14__09-30-00"


def test_every_trial_of_the_harbor_job_is_a_run(groups):
    with store_of(groups, "harbor") as s:
        runs = items(s, "trajectory")
        got = answers(s)
    names = sorted(p.name for p in JOB.iterdir() if p.is_dir())
    assert sorted(runs) == [f"harbor:{n}" for n in names] and len(runs) == 7
    env = runs["harbor:count-lines__EnV0001"]  # an environment failure: no trajectory
    assert env["failed"] == 1 and "steps" not in env["payload"] and env["payload"]["error"]
    timeout = runs["harbor:fix-unit-test__TmO0001"]  # an agent timeout, with what it did
    assert timeout["failed"] == 1 and timeout["payload"]["steps"]
    assert timeout["meta"]["exception"]["exception_type"] == "AgentTimeoutError"
    v10 = ("harbor:count-lines__XyZ9876", "harbor:count-lines__XyZ9876:reward", "harbor-verifier")
    assert got[v10]["value"] == "not_met" and got[v10]["extra"]["score"] == 0.0  # reward.txt "0"
    assert runs["harbor:count-lines__XyZ9876"]["payload"]["schema_version"] == "ATIF-v1.0"


def test_linked_trajectory_files_are_read_and_a_missing_one_is_shown_missing(groups):
    from review.reviewing.trajectory import load_trajectory, subagent_view

    with store_of(groups, "harbor") as s:
        runs = items(s, "trajectory")
        terminus = load_trajectory(s, "harbor:fix-unit-test__AbC1234")
        voicemail = load_trajectory(s, "harbor:voicemail-triage__AuD0001")
    summary = json.loads((JOB / "fix-unit-test__AbC1234" / "agent" /
                          "trajectory.summarization-1-summary.json").read_text(encoding="utf-8"))
    ref = terminus.steps[2].subagents[0]
    assert ref.path == "trajectory.summarization-1-summary.json" and ref.embedded_index is not None
    payload = runs["harbor:fix-unit-test__AbC1234"]["payload"]
    opened = subagent_view(payload, ref.embedded_index)
    assert [s.message for s in opened.steps] == [m["message"] for m in summary["steps"]]
    # the Terminus analysis is there beside the reasoning_content
    assert terminus.steps[1].reasoning == "Start by listing files."
    assert terminus.steps[1].analysis == "Look at the repo."
    transcriber = voicemail.steps[1].subagents[0]
    assert transcriber.path == "subagents/transcriber.json" and transcriber.missing
    assert runs["harbor:voicemail-triage__AuD0001"]["payload"]["missing_trajectories"] == [
        "subagents/transcriber.json"]


def test_the_multi_step_trial_is_one_run_with_a_verdict_per_step(groups):
    with store_of(groups, "harbor") as s:
        run = items(s, "trajectory")["harbor:two-step-intake__MsT0001"]
        got = answers(s, "i.uid = 'harbor:two-step-intake__MsT0001'")
    uid = "harbor:two-step-intake__MsT0001"
    assert [seg["step_name"] for seg in run["payload"]["segments"]] == ["history", "plan"]
    assert [s["step_id"] for s in run["payload"]["steps"]] == [1, 2, 3, 4]
    assert got[(uid, f"{uid}:step:history:reward", "harbor-verifier")]["value"] == "met"
    assert got[(uid, f"{uid}:step:plan:reward", "harbor-verifier")]["value"] == "not_met"
    assert (uid, f"{uid}:reward", "harbor-verifier") not in got  # the trial-level result is null


def test_harbor_keeps_ids_extras_embedded_subagents_and_every_reward_key(groups):
    with store_of(groups, "harbor") as s:
        xray = items(s, "trajectory")["harbor:xray-dose__MmM0001"]
        got = answers(s, "i.uid = 'harbor:xray-dose__MmM0001'")
    doc = json.loads((JOB / "xray-dose__MmM0001" / "agent" / "trajectory.json").read_text())
    payload = xray["payload"]
    assert (payload["session_id"], payload["trajectory_id"], payload["extra"]) == (
        doc["session_id"], doc["trajectory_id"], doc["extra"])
    assert len(payload["subagent_trajectories"]) == 2
    uid = "harbor:xray-dose__MmM0001"
    assert {k[1].removeprefix(uid + ":"): v["value"] for k, v in got.items()} == {
        "reward": "not_met", "reward:dose_correct": "met", "reward:xray_correct": "not_met"}


# -- CliniCARE ------------------------------------------------------------------------

CC_JOB = CORPUS / "clinicare" / "jobs" / "claude-opus5__full750__2026-03-14"


def test_clinicare_trials_are_identifying_and_carry_the_agents_verdict(groups):
    from review.datasets.sources.clinicare import trial_uid

    with store_of(groups, "clinicare") as s:
        runs = items(s, "trajectory")
        tasks = items(s, "task")
        got = answers(s)
    assert len(tasks) == 5 and len(runs) == 6
    assert all(i["meta"]["identifying"] for i in [*runs.values(), *tasks.values()])
    assert all(not uid.startswith("harbor:") for uid in runs)
    for trial in (p for p in CC_JOB.iterdir() if p.is_dir()):
        assert trial_uid(trial.name) in runs
    bleed = trial_uid("scenario-07-anticoag-bleed-3fa9c__Aa11111")
    assert got[(bleed, "clinicare.verdict", "agent:anthropic/claude-opus-5")]["value"] == "YES"
    assert got[(bleed, f"{bleed}:outcome", "clinicare-verifier")]["value"] == "met"
    failed = runs[trial_uid("scenario-07-anticoag-bleed-3fa9c__Ff66666")]
    assert failed["failed"] == 1


def test_a_clinicare_trial_imported_alone_keeps_its_protection(tmp_path, capsys):
    import cli

    for name in ("scenario-07-anticoag-bleed-3fa9c__Ff66666",  # failed: no reward keys
                 "scenario-12-sepsis-abx-timing-0d__Cc33333"):
        db = tmp_path / f"{name}.db"
        assert cli.main(["--db", str(db), "import", str(CC_JOB / name)]) == 0
        with open_store(db) as s:
            rows = s.query("SELECT uid, kind, json_extract(meta, '$.identifying') AS ident"
                           " FROM items")
        assert rows and all(r["ident"] for r in rows), name
        # the run's uid (which prefixes its question keys) does not spell out the task id
        assert all(name.split("__")[0] not in r["uid"] for r in rows if r["kind"] == "trajectory")
        out = tmp_path / "export.csv"
        assert cli.main(["--db", str(db), "export", "--what", "annotations", "--out",
                         str(out)]) == 0
        assert "scenario-" not in out.read_text(encoding="utf-8")
    capsys.readouterr()


# -- HealthBench -------------------------------------------------------------------------

HB = CORPUS / "healthbench"
RESULTS = HB / "healthbench_gpt-4.1_20260314_allresults.json"
GRADER = "openai:gpt-4.1-2025-04-14@simple-evals-healthbench"


def test_the_graders_verdicts_are_answers_criterion_by_criterion(groups):
    from review.datasets.sources.healthbench import completion_uid, criterion_key

    examples = json.loads(RESULTS.read_text(encoding="utf-8"))["metadata"]["example_level_metadata"]
    assert "healthbench-results" in groups["_outputs"]["healthbench"][1]
    with store_of(groups, "healthbench") as s:
        got = answers(s, "r.name = ?", (GRADER,))
        kind = s.scalar("SELECT kind FROM raters WHERE name = ?", (GRADER,))
        stubs = s.scalar("SELECT COUNT(*) FROM questions q WHERE q.key IN (SELECT DISTINCT q2.key"
                         " FROM annotations a JOIN questions q2 ON q2.id = a.question_id"
                         " JOIN raters r ON r.id = a.rater_id WHERE r.name = ?)"
                         " AND json_extract(q.meta, '$.stub')", (GRADER,))
    assert kind == "machine" and stubs == 0  # on the real rows' criteria, with their points
    n = 0
    for ex in examples:
        uid = completion_uid(ex["prompt_id"], ex["completion_id"])
        seen: dict[str, int] = {}
        for item in ex["rubric_items"]:
            key = criterion_key(ex["prompt_id"], item["criterion"])
            seen[key] = seen.get(key, 0) + 1
            key = key if seen[key] == 1 else f"{key}-{seen[key]}"
            answer = got[(uid, key, GRADER)]
            assert answer["value"] == ("met" if item["criteria_met"] else "not_met")
            assert answer["rationale"] == item["explanation"]
            n += 1
    assert len(got) == n == 31


def test_each_completion_keeps_its_model_and_text(groups):
    with store_of(groups, "healthbench") as s:
        completions = {u: i for u, i in items(s, "graded_conversation").items() if "::" in u}
        prompts = [u for u in items(s, "graded_conversation") if "::" not in u]
    assert len(prompts) == 30
    by_id = {r["completion_id"]: r for r in jsonl(HB / "completions_msglist.jsonl")}
    for uid, got in completions.items():
        cid = uid.split("::")[1]
        if cid in by_id:
            # the results file, imported first, named it after its file: gpt-4.1
            assert got["model"] == "gpt-4.1"
            assert got["payload"]["completion"] == by_id[cid]["completion"][0]["content"]
        else:  # a meta-evaluation row's completion no file names the model of
            assert got["model"] is None


def test_a_completions_model_is_kept_whatever_order_the_files_come_in(tmp_path):
    sample = SHARED_DATA / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
    orders = {
        "results first": [RESULTS, HB / "completions_msglist.jsonl", HB / "meta_eval.jsonl"],
        "completions first": [HB / "completions_msglist.jsonl", RESULTS, HB / "meta_eval.jsonl"],
        "meta first": [HB / "meta_eval.jsonl", HB / "completions_msglist.jsonl", RESULTS],
        "meta, then results": [HB / "meta_eval.jsonl", RESULTS],
    }
    for name, files in orders.items():
        with open_store(tmp_path / f"{name}.db") as s:
            import_file(s, sample, "healthbench")
            for path in files:
                import_file(s, path, "healthbench-meta" if path.name == "meta_eval.jsonl" else None)
            models = dict(s.query("SELECT uid, model FROM items WHERE uid LIKE 'hb:%::%'"
                                  " AND uid NOT LIKE '%::229602db%'"))
            grades = s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r"
                              " ON r.id = a.rater_id WHERE r.name = ?", (GRADER,))
        assert len(models) == 3 and all(models.values()), (name, models)
        assert grades == 31, name


def test_the_meta_evaluation_keeps_working(groups):
    rows = jsonl(HB / "meta_eval.jsonl")
    with store_of(groups, "healthbench") as s:
        physicians = s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id ="
                              " a.rater_id WHERE r.name LIKE 'healthbench-physician:%'")
    assert physicians == sum(len(r["binary_labels"]) for r in rows)


# -- further files of these formats, as publishers may write them ---------------------------

def kb_published_row(**over) -> dict:
    """The corpus's first scored row, changed by `over`."""
    row = jsonl(KB / "leaderboard.jsonl")[1]
    row.update(over)
    return row


def test_klinikebench_pass_flags_as_booleans_or_0_1_and_fields_already_parsed(tmp_path):
    base = kb_published_row()
    steps = json.loads(base["agent_steps"])
    rows = [
        kb_published_row(trial_name="t-bool", outcome_pass=False, diagnosis=False, reward=0),
        kb_published_row(trial_name="t-int", outcome_pass=0, required_tools=1, diagnosis=0),
        # JSON fields already parsed (a writer that kept them as objects), steps as a bare list
        kb_published_row(trial_name="t-parsed", agent_steps=steps["steps"],
                         gates=json.loads(base["gates"]), meta=json.loads(base["meta"]),
                         transcript=json.loads(base["transcript"])),
    ]
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with open_store(tmp_path / "kb.db") as s:
        result = import_file(s, path)
        got = answers(s)
        runs = items(s, "trajectory")
    assert result.format == "klinikebench" and result.items == 3
    uid = "kb:leaderboard/leaderboard-claude-sonnet-5/"
    assert got[(uid + "t-bool", uid + "t-bool:outcome", VERIFIER)]["value"] == "not_met"
    assert runs[uid + "t-int"]["meta"]["scores"]["required_tools"] == 1.0
    # the gate's pass flag decides, not the 1 of the score column: the verifier says it failed
    assert got[(uid + "t-int", uid + "t-int:gate:required_tools", VERIFIER)]["value"] == "not_met"
    parsed = runs[uid + "t-parsed"]
    assert len(parsed["payload"]["steps"]) == len(steps["steps"])
    assert len([k for k in got if k[0] == uid + "t-parsed"]) == len(
        [k for k in got if k[0] == uid + "t-bool"])


def test_klinikebench_parquet_with_timestamps_and_nested_columns(tmp_path):
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    row = kb_published_row()
    row["started_at"] = dt.datetime(2026, 3, 14, 9, 30, tzinfo=dt.UTC)
    row["finished_at"] = dt.datetime(2026, 3, 14, 9, 37, 3, tzinfo=dt.UTC)
    row["transcript"] = json.loads(row["transcript"])  # an Arrow list of structs
    table = pa.Table.from_pylist([row])
    assert pa.types.is_timestamp(table.schema.field("started_at").type)
    pq.write_table(table, tmp_path / "leaderboard-00000-of-00001.parquet")
    with open_store(tmp_path / "kb.db") as s:
        result = import_file(s, tmp_path / "leaderboard-00000-of-00001.parquet")
        run = next(iter(items(s, "trajectory").values()))
    assert result.format == "klinikebench" and result.annotations > 5
    assert run["meta"]["started_at"] == "2026-03-14T09:30:00+00:00"
    assert [t["role"] for t in run["payload"]["transcript"]] == [t["role"] for t in row["transcript"]]


@pytest.mark.parametrize(("field", "value", "says"), [
    ("reward", 1.7, "field 'reward' must be a score in 0..1, got 1.7"),
    ("must_ask", -0.5, "field 'must_ask' must be a score in 0..1, got -0.5"),
    ("outcome_pass", "yes", "field 'outcome_pass' must be a score in 0..1, got 'yes'"),
])
def test_klinikebench_a_score_outside_0_1_is_refused_naming_the_field(tmp_path, field, value, says):
    path = tmp_path / "leaderboard.jsonl"
    rows = [kb_published_row(), kb_published_row(trial_name="bad", **{field: value})]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with open_store(tmp_path / "kb.db") as s:
        with pytest.raises(Exception) as caught:
            import_file(s, path)
        assert s.scalar("SELECT COUNT(*) FROM items") == 0
    assert str(caught.value) == f"{path}:2: {says}"


def carebench_db(tmp_path: Path) -> Path:
    db = tmp_path / "cb.db"
    with open_store(db) as s:
        import_file(s, CB / "evaluation_prefixes_public.jsonl")
        import_file(s, CB / "raw_generations.jsonl")
    return db


def test_mapped_label_spelling_and_a_response_found_by_model_actual(tmp_path):
    db = carebench_db(tmp_path)
    rows = jsonl(CB / "mapped_responses.jsonl")[:2]
    for r in rows:
        r["mapped_label"] = r.pop("predicted_label")
        r.pop("model_requested")  # only model_actual and the alias name the model
    path = tmp_path / "mapped_responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with open_store(db) as s:
        n = s.scalar("SELECT COUNT(*) FROM items")
        result = import_file(s, path)
        assert result.format == "carebench-mapped" and result.annotations == 2
        assert s.scalar("SELECT COUNT(*) FROM items") == n
    # the alias names the run (the first file taught it), but the run's response to that
    # prefix was served by another model than the row says: refused, naming both
    rows[0]["model_actual"] = "other-model"
    rows[0]["prefix_id"] = "meb_v1_case_0222_r01"
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    with open_store(db) as s, pytest.raises(Exception) as caught:
        import_file(s, path)
    assert str(caught.value).startswith(f"{path}:1: model_actual 'other-model', but the response of"
                                        " run 1 (gpt-4.1-mini: ")
    assert "was served by 'gpt-4.1-mini-2025-04-14'" in str(caught.value)


def test_a_pandas_submission_with_its_index_is_detected_and_a_repeat_refused(tmp_path):
    db = carebench_db(tmp_path)
    with open(CB / "predictions.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    path = tmp_path / "predictions.csv"
    path.write_text(",prefix_id,predicted_label\n" + "".join(
        f"{i},{r['prefix_id']},{r['predicted_label']}\n" for i, r in enumerate(rows)), encoding="utf-8")
    with open_store(db) as s:
        result = import_file(s, path, options=ImportOptions(rater="pandas-model"))
        assert (result.format, result.annotations) == ("label-csv", 8)
    path.write_text("prefix_id,predicted_label\n" + "".join(
        f"{r['prefix_id']},{r['predicted_label']}\n" for r in [*rows, rows[2]]), encoding="utf-8")
    with open_store(db) as s, pytest.raises(Exception) as caught:
        import_file(s, path, options=ImportOptions(rater="twice-model"))
    assert str(caught.value) == (f"{path}:10: prefix 'meb_v1_case_0101_r01' again; line 4 gave its"
                                 " label (a submission gives each prefix one label)")


def test_simple_evals_results_written_on_one_line_under_another_name(tmp_path):
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with open_store(tmp_path / "hb.db") as s:
        result = import_file(s, path)
        models = {m for (m,) in s.query("SELECT model FROM items WHERE uid LIKE '%::%'")}
    assert result.format == "healthbench-results" and result.annotations == 31
    assert models == {None}  # a name simple-evals did not write says no model
    doc["metadata"]["example_level_metadata"][1]["rubric_items"][0]["criteria_met"] = "maybe"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with open_store(tmp_path / "hb2.db") as s, pytest.raises(Exception) as caught:
        import_file(s, path)
    assert str(caught.value) == (f"{path}: metadata.example_level_metadata[1].rubric_items[0]"
                                 ".criteria_met: expected true or false, got 'maybe'")


def test_a_completion_given_as_several_messages_keeps_them(tmp_path):
    row = jsonl(HB / "completions_msglist.jsonl")[2]
    row["completion"] = [{"role": "assistant", "content": "First part."},
                         {"role": "tool", "content": "lookup: none"},
                         {"role": "assistant", "content": "Second part."}]
    path = tmp_path / "completions.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with open_store(tmp_path / "hb.db") as s:
        import_file(s, SHARED_DATA / "healthbench" / "healthbench_oss_eval_sample30.jsonl")
        assert import_file(s, path).format == "healthbench-completions"
        payload = json.loads(s.scalar("SELECT payload FROM items WHERE uid LIKE '%::%'"))
    assert payload["completion"] == "First part.\n\nSecond part."
    assert payload["completion_messages"] == row["completion"]


def test_the_review_screen_shows_the_empty_reply_as_empty(groups, tmp_path, monkeypatch):
    import shutil

    from streamlit.testing.v1 import AppTest

    from review.team.reviewers import ensure_reviewer
    from tests.conftest import ROOT

    db = tmp_path / "review.db"
    shutil.copy(groups["carebench"], db)
    with open_store(db) as s:
        ensure_reviewer(s, "Dr. Conformance", "emergency medicine", "resident")
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["reviewer"] = "Dr. Conformance"
    at.query_params["kind"] = "response"
    at.query_params["item"] = f"meb_v1_case_0307_r02::gpt-4.1-mini::{PROMPTED}"
    at.run()
    assert not at.exception
    assert any("(empty reply" in c.value for c in at.caption), [c.value for c in at.caption]


def test_the_direct_label_submission_is_ranked_like_any_other_model(groups, tmp_path):
    from labels.compare.leaderboard import triage_comparison

    with store_of(groups, "carebench") as s:
        report = triage_comparison(s)
    ranked = {r.model for r in report.labellings[0].ranking}
    assert ranked == {"gpt-4.1-mini", "my-direct-model"}
    # each reading is scored on everything it covers (issue 17): all 8 prefixes the
    # submission labels, not only those of the responses that did not fail
    assert report.labellings[0].metrics["my-direct-model"]["accuracy"].n == 8
    # a submission alone, with no responses read, is ranked too
    with open_store(tmp_path / "direct.db") as s:
        import_file(s, CB / "evaluation_prefixes_public.jsonl")
        import_file(s, CB / "predictions.csv", options=ImportOptions(rater="my-direct-model"))
        alone = triage_comparison(s)
    assert [r.model for r in alone.labellings[0].ranking] == ["my-direct-model"]
    assert alone.labellings[0].metrics["my-direct-model"]["accuracy"].n == 8


def test_format_auto_written_out_is_detection(tmp_path):
    """MANIFEST.tsv says `auto` where the format is detected: `--format auto` given as
    written imports as no --format does."""
    import cli

    autos = {line.group for line in manifest() if line.format == "auto"}
    assert autos
    for group in sorted(autos):
        for how in ("left out", "written"):
            db = tmp_path / f"{group}-{how.replace(' ', '-')}.db"
            for line in (x for x in manifest() if x.group == group):
                if how == "written" or line.format != "auto":
                    args = ["--format", line.format]
                else:
                    args = []
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = cli.main(["--db", str(db), "import", *args, *line.extra,
                                     str(line.path)])
                assert code == 0, (line, err.getvalue())
        assert snapshot(tmp_path / f"{group}-left-out.db") == snapshot(tmp_path / f"{group}-written.db")


# -- issue 25: a benchmark is a set of runs, kept apart from import to every number ----------

def unprompted(rows: list[dict]) -> list[dict]:
    """The corpus's prompted run of a model as CARE-Bench's other protocol writes it: the
    same fields, `protocol` unprompted with its own `prompt_version`, and the model given
    the patient's words alone (FORMATS.md section 1: model_inputs_unprompted_public)."""
    out = []
    for row in rows:
        row = dict(row, protocol="unprompted", prompt_version="care_bench_unprompted_v1")
        row["input_messages"] = [m for m in row["input_messages"] if m["role"] != "system"]
        if row["raw_model_response"]:
            row["raw_model_response"] = "Unprompted: " + row["raw_model_response"]
        out.append(row)
    return out


def test_failure_1_the_unprompted_run_after_the_prompted_run_is_kept(groups, tmp_path):
    db = tmp_path / "cb.db"
    shutil_copy(groups["carebench"], db)
    rows = unprompted(jsonl(CB / "raw_generations.jsonl"))
    path = tmp_path / "raw_generations_unprompted.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out, err = cli_import(db, Line("x", "auto", path, ()))
    assert code == 0 and not err
    assert f"{len(rows)} rows, {len(rows)} new items" in out
    with open_store(db) as s:
        runs = s.query("SELECT r.protocol, r.prompt_version, COUNT(i.id) FROM runs r"
                       " JOIN items i ON i.run_id = r.id WHERE r.kind = 'response'"
                       " GROUP BY r.id ORDER BY r.id")
        texts = {(r[0], r[1]): r[2] for r in s.query(
            "SELECT p.uid, r.protocol, json_extract(i.payload, '$.response') FROM items i"
            " JOIN items p ON p.id = i.parent_id JOIN runs r ON r.id = i.run_id")}
    assert [tuple(r) for r in runs] == [("prompted", "care_bench_prompted_v1", 8),
                                        ("unprompted", "care_bench_unprompted_v1", 8)]
    for row in rows:
        if row["raw_model_response"] is not None:
            assert texts[(row["prefix_id"], "unprompted")] == row["raw_model_response"]


def shutil_copy(src, dst) -> None:
    import shutil

    shutil.copy(src, dst)


def test_failure_2_labels_of_a_run_requesting_the_served_name_go_to_that_run(tmp_path, capsys):
    """Run A requested gpt-4.1-mini and was served gpt-4.1-mini-2025-04-14; run B requested
    gpt-4.1-mini-2025-04-14. B's mapped labels go to B, and A's stay A's."""
    from tests.helpers import run_cli

    db = tmp_path / "cb.db"
    rows = jsonl(CB / "raw_generations.jsonl")
    b_rows = [dict(r, model_requested="gpt-4.1-mini-2025-04-14",
                   raw_model_response=r["raw_model_response"] and "B: " + r["raw_model_response"])
              for r in rows]
    b_path = tmp_path / "raw_generations_b.jsonl"
    b_path.write_text("".join(json.dumps(r) + "\n" for r in b_rows), encoding="utf-8")
    mapped = jsonl(CB / "mapped_responses.jsonl")
    b_mapped = [dict(r, model_requested="gpt-4.1-mini-2025-04-14", model_alias="team-b",
                     predicted_label="1B_ESCALATION_URGENT_CARE") for r in mapped]
    b_mapped_path = tmp_path / "mapped_responses_b.jsonl"
    b_mapped_path.write_text("".join(json.dumps(r) + "\n" for r in b_mapped), encoding="utf-8")
    for path in (CB / "evaluation_prefixes_public.jsonl", CB / "raw_generations.jsonl", b_path,
                 CB / "mapped_responses.jsonl", b_mapped_path):
        code, out, err = run_cli(capsys, "--db", str(db), "import", str(path))
        assert code == 0, err
    with open_store(db) as s:
        got = {(r[0], r[1]): r[2] for r in s.query(
            "SELECT r.model_requested, p.uid, a.value FROM current_annotations a"
            " JOIN items i ON i.id = a.item_id JOIN items p ON p.id = i.parent_id"
            " JOIN runs r ON r.id = i.run_id JOIN raters x ON x.id = a.rater_id"
            " WHERE x.name = ?", (MAPPER,))}
        superseded = s.scalar("SELECT COUNT(*) FROM annotations WHERE supersedes_id IS NOT NULL")
    for row in mapped:
        assert got[("gpt-4.1-mini", row["prefix_id"])] == row["predicted_label"]
        assert got[("gpt-4.1-mini-2025-04-14", row["prefix_id"])] == "1B_ESCALATION_URGENT_CARE"
    assert superseded == 0
    # a row naming only the served model fits both runs: refused in one line naming them
    only_served = {k: v for k, v in mapped[0].items() if k not in ("model_requested", "model_alias")}
    path = tmp_path / "mapped_served.jsonl"
    path.write_text(json.dumps(only_served) + "\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "--db", str(db), "import", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1  # one line (the tally on stdout)
    assert "model_actual 'gpt-4.1-mini-2025-04-14'" in err and "names 2 runs" in err
    assert "run 1 (gpt-4.1-mini" in err and "run 2 (gpt-4.1-mini-2025-04-14" in err


def test_failure_3_the_results_file_is_scored_per_run_with_run_and_model(groups, capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(capsys, "--db", str(groups["healthbench"]), "healthbench-score",
                             "--json")
    assert code == 0, err
    (grader,) = [e for e in json.loads(out)["raters"] if e["rater"] == GRADER]
    assert (grader["model"], grader["run"]) == ("gpt-4.1", "gpt-4.1")
    examples = json.loads(RESULTS.read_text())["metadata"]["example_level_metadata"]
    assert sorted(e["score"] for e in grader["examples"]) == pytest.approx(
        sorted(e["score"] for e in examples))


def test_failure_5_the_results_examples_one_per_line_keep_their_verdicts(tmp_path, capsys):
    from tests.helpers import run_cli

    examples = json.loads(RESULTS.read_text())["metadata"]["example_level_metadata"]
    path = tmp_path / "healthbench_gpt-4.1_20260314_examples.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in examples), encoding="utf-8")
    db = tmp_path / "hb.db"
    code, out, err = run_cli(capsys, "--db", str(db), "import", str(path))
    assert code == 0, err
    assert "healthbench-examples" in out and "31 new annotations" in out
    with open_store(db) as s:
        got = answers(s, "r.name = ?", (GRADER,))
    assert len(got) == 31


@pytest.mark.parametrize("order", ["rows, results, meta", "meta, rows, results"])
def test_failure_6_meta_evaluation_categories_whatever_the_import_order(tmp_path, order, capsys):
    from tests.helpers import run_cli

    sample = SHARED_DATA / "healthbench" / "healthbench_oss_eval_sample30.jsonl"
    files = {"rows": [sample], "results": [RESULTS], "meta": [HB / "meta_eval.jsonl"]}
    db = tmp_path / "hb.db"
    for name in order.split(", "):
        for path in files[name]:
            fmt = ["--format", "healthbench-meta"] if name == "meta" else []
            assert run_cli(capsys, "--db", str(db), "import", *fmt, str(path))[0] == 0
    code, out, err = run_cli(capsys, "--db", str(db), "agreement", "--question",
                             "criteria:rubric@graded_conversation", "--a", "group:clinicians",
                             "--by", "category", "--json")
    assert code == 0, err
    report = json.loads(out)
    categories = {row["group"] for b in report["breakdowns"] if b["by"] == "category"
                  for row in b["rows"]}
    assert categories == {r["category"] for r in jsonl(HB / "meta_eval.jsonl")}
