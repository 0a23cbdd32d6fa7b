"""HealthBench importers: rubric rows (the real sample read in place), completions,
grader results and meta-evaluation rows. Rows written here are invented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from review.datasets.sources import InputError, detect_format, import_file
from review.datasets.sources.base import ImportOptions
from review.datasets.sources.healthbench import criterion_key
from review.reviewing.trajectory import criteria_score, load_graded_conversation
from tests.helpers import table_counts, write_jsonl

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "healthbench" / \
    "healthbench_oss_eval_sample30.jsonl"


def real_sample() -> Path:
    if not REAL.is_file():
        pytest.skip(f"real HealthBench sample not found at {REAL} (see ../shared/data/PROVENANCE.md)")
    return REAL


PROMPT = {
    "prompt_id": "p-inv-1",
    "prompt": [{"role": "user", "content": "My invented uncle has a rash after a new soap. What now?"},
               {"role": "assistant", "content": "How long has the rash been there?"},
               {"role": "user", "content": "Two days, it itches."}],
    "rubrics": [
        {"criterion": "Advises stopping the new soap.", "points": 5,
         "tags": ["level:example", "axis:accuracy"]},
        {"criterion": "Asks about swelling of the face or trouble breathing.", "points": 3,
         "tags": ["level:example", "axis:completeness", "cluster:emergency"]},
        {"criterion": "Recommends an antibiotic.", "points": -4,
         "tags": ["level:example", "axis:accuracy"]},
    ],
    "example_tags": ["theme:context_seeking", "physician_agreed_category:enough-context"],
    "ideal_completions_data": None,
    "canary": "invented canary",
}


def keys(prompt=PROMPT):
    return [criterion_key(prompt["prompt_id"], c["criterion"]) for c in prompt["rubrics"]]


# -- the real sample -----------------------------------------------------------

def test_real_sample_imports_thirty_items_and_all_352_criteria(store):
    path = real_sample()
    assert detect_format(path).name == "healthbench"
    before = table_counts(store)
    result = import_file(store, path)
    assert result.rows == 30 and result.items == 30
    assert store.scalar("SELECT COUNT(*) FROM items WHERE kind = 'graded_conversation'") == 30
    criteria = store.query("SELECT points, meta, item_id FROM questions WHERE kind = 'criterion'")
    assert len(criteria) == 352
    assert sum(1 for c in criteria if c["points"] < 0) == 102
    assert all(json.loads(c["meta"])["must_not"] == (c["points"] < 0) for c in criteria)
    assert all(json.loads(c["meta"])["axis"] for c in criteria)
    assert len({c["item_id"] for c in criteria}) == 30
    with_ideal = store.scalar(
        "SELECT COUNT(*) FROM items WHERE json_extract(payload, '$.completion_source') = 'ideal_completion'")
    assert with_ideal == 24
    multi_turn = store.scalar(
        "SELECT COUNT(*) FROM items WHERE json_array_length(payload, '$.turns') > 1")
    assert multi_turn == 9
    after = table_counts(store)
    assert after["items"] == before["items"] + 30
    assert import_file(store, path).already_imported and table_counts(store) == after


def test_the_same_rows_in_another_file_add_nothing(store, tmp_path):
    import_file(store, real_sample())
    counts = {t: store.scalar(f"SELECT COUNT(*) FROM {t}") for t in ("items", "questions")}
    lines = real_sample().read_text(encoding="utf-8").splitlines()
    copy = tmp_path / "reordered.jsonl"
    copy.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    result = import_file(store, copy)
    assert (result.rows, result.items, result.annotations) == (30, 0, 0)
    assert {t: store.scalar(f"SELECT COUNT(*) FROM {t}") for t in counts} == counts


def test_real_sample_displays_every_criterion(store):
    import_file(store, real_sample())
    total = 0
    for (uid,) in store.query("SELECT uid FROM items"):
        view = load_graded_conversation(store, uid)
        assert view.turns and view.criteria
        assert view.max_points == sum(c.points for c in view.criteria if c.points > 0)
        assert [c.index for c in view.criteria] == list(range(len(view.criteria)))
        total += len(view.criteria)
    assert total == 352


# -- completions, grades, score --------------------------------------------------

def completions_and_grades(tmp_path, store):
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [PROMPT]))
    comp = write_jsonl(tmp_path / "completions.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "c1", "model": "vendor/model-a",
         "completion": "Stop the new soap and use a plain moisturiser. Any swelling of the lips?"},
    ])
    assert detect_format(comp).name == "healthbench-completions"
    import_file(store, comp)
    k = keys()
    grades = write_jsonl(tmp_path / "grades.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "c1", "criterion": PROMPT["rubrics"][0]["criterion"],
         "criteria_met": True, "explanation": "It says to stop the soap."},
        {"prompt_id": "p-inv-1", "completion_id": "c1",
         "criterion": "  Asks about swelling of the face\nor trouble breathing. ",
         "criteria_met": False, "explanation": "Lips only."},
        {"prompt_id": "p-inv-1", "completion_id": "c1", "criterion": PROMPT["rubrics"][2]["criterion"],
         "criteria_met": "false", "explanation": "No antibiotic."},
    ])
    assert detect_format(grades).name == "healthbench-grades"
    return k, grades


def test_grades_are_judge_answers_and_the_score_follows_healthbench(store, tmp_path):
    k, grades = completions_and_grades(tmp_path, store)
    result = import_file(store, grades, options=ImportOptions(rater="openai:grader-x@v1"))
    assert result.annotations == 3
    rows = store.query(
        "SELECT q.key, a.value, a.rationale, r.kind, r.role, r.model FROM annotations a"
        " JOIN questions q ON q.id = a.question_id JOIN raters r ON r.id = a.rater_id"
        " JOIN items i ON i.id = a.item_id WHERE i.uid = 'hb:p-inv-1::c1' ORDER BY q.key")
    by_key = {r["key"]: r for r in rows}
    assert by_key[k[0]]["value"] == "met" and by_key[k[1]]["value"] == "not_met"
    assert by_key[k[2]]["value"] == "not_met" and by_key[k[0]]["rationale"] == "It says to stop the soap."
    assert {(r["kind"], r["role"], r["model"]) for r in rows} == {("machine", "judge", "grader-x")}
    view = load_graded_conversation(store, "hb:p-inv-1::c1")
    assert [t.speaker for t in view.turns] == ["user", "assistant", "user"]  # from the prompt item
    assert view.completion.startswith("Stop the new soap") and view.model == "vendor/model-a"
    assert [c.points for c in view.criteria] == [5, 3, -4] and view.max_points == 8
    assert view.criteria[2].must_not and view.criteria[1].axis == "completeness"
    judge = {r["key"]: r["value"] for r in rows}
    assert criteria_score(view.criteria, judge) == pytest.approx(5 / 8)


def test_grades_for_an_unknown_completion_change_nothing(store, tmp_path):
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [PROMPT]))
    grades = write_jsonl(tmp_path / "g.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "zz", "criterion": "Advises stopping the new soap.",
         "criteria_met": True, "explanation": ""}])
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"{grades}:1: unknown item 'hb:p-inv-1::zz': import the items first"):
        import_file(store, grades)
    assert table_counts(store) == before


def test_meta_rows_make_one_human_rater_per_physician_and_the_prompt_is_completed_later(store, tmp_path):
    meta = write_jsonl(tmp_path / "meta.jsonl", [
        {"prompt": PROMPT["prompt"], "completion": "Keep using it.", "prompt_id": "p-inv-1",
         "completion_id": "m1", "rubric": "Advises stopping the new soap.",
         "binary_labels": [False, False, True], "anonymized_physician_ids": ["ph-a", "ph-b", "ph-c"],
         "category": "cluster:emergency_referrals", "grader_label": False},
        {"prompt": PROMPT["prompt"], "completion": "Keep using it.", "prompt_id": "p-inv-1",
         "completion_id": "m1", "rubric": "Recommends an antibiotic.",
         "binary_labels": [False], "anonymized_physician_ids": ["ph-a"],
         "category": "cluster:emergency_referrals"},
    ])
    assert detect_format(meta).name == "healthbench-meta"
    result = import_file(store, meta, options=ImportOptions(rater="healthbench-grader-y"))
    assert result.annotations == 5
    raters = {r["name"]: r["kind"] for r in store.query("SELECT name, kind FROM raters")}
    assert raters["healthbench-physician:ph-a"] == "human" and raters["healthbench-grader-y"] == "machine"
    stub = json.loads(store.scalar("SELECT meta FROM items WHERE uid = 'hb:p-inv-1'"))
    assert stub["stub"] is True
    physician_values = [r[0] for r in store.query(
        "SELECT a.value FROM annotations a JOIN raters r ON r.id = a.rater_id"
        " WHERE r.kind = 'human' ORDER BY a.id")]
    assert physician_values == ["not_met", "not_met", "met", "not_met"]
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [PROMPT]))
    full = json.loads(store.scalar("SELECT meta FROM items WHERE uid = 'hb:p-inv-1'"))
    assert "stub" not in full and full["theme"] == "context_seeking"
    view = load_graded_conversation(store, "hb:p-inv-1::m1")
    assert len(view.criteria) == 3 and view.completion == "Keep using it."


BAD_ROWS = [
    ("points not a number", "healthbench",
     lambda r: r["rubrics"][1].update(points="three"),
     ":1: rubrics[1].points: expected a number, got 'three'"),
    ("criterion missing", "healthbench", lambda r: r["rubrics"][0].pop("criterion"),
     ":1: rubrics[0].criterion: missing required field"),
    ("prompt_id missing", "healthbench", lambda r: r.pop("prompt_id"),
     ":1: missing required field 'prompt_id'"),
    ("prompt of the wrong type", "healthbench", lambda r: r.update(prompt="hello"),
     ":1: field 'prompt' must be a non-empty list of {role, content}"),
    ("rubrics missing", "healthbench", lambda r: r.pop("rubrics"),
     ":1: missing required field 'rubrics'"),
]


@pytest.mark.parametrize("name,fmt,mutate,message", BAD_ROWS, ids=[b[0] for b in BAD_ROWS])
def test_malformed_rubric_rows_name_file_line_and_field_and_change_nothing(
        store, tmp_path, name, fmt, mutate, message):
    row = json.loads(json.dumps(PROMPT))
    mutate(row)
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    before = table_counts(store)
    with pytest.raises(InputError) as err:
        import_file(store, path, fmt)
    assert f"{path}{message}" in str(err.value)
    assert table_counts(store) == before


def test_truncated_rubric_file_and_bad_grades_and_meta(store, tmp_path):
    good = dict(PROMPT, prompt_id="p-inv-2")
    path = write_jsonl(tmp_path / "t.jsonl", [good, PROMPT])
    text = path.read_text()
    path.write_text(text[:-30])
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"{path}:2: not valid JSON"):
        import_file(store, path)
    assert table_counts(store) == before

    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [PROMPT]))
    grades = write_jsonl(tmp_path / "g.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": None, "criterion": "Advises stopping the new soap.",
         "criteria_met": "maybe"}])
    before = table_counts(store)
    with pytest.raises(InputError, match=rf"{grades}:1: field 'criteria_met' must be true or false"):
        import_file(store, grades)
    meta = write_jsonl(tmp_path / "m.jsonl", [
        {"prompt": PROMPT["prompt"], "completion": "x", "prompt_id": "p-inv-1", "completion_id": "m",
         "rubric": "Advises stopping the new soap.", "binary_labels": [True, False],
         "anonymized_physician_ids": ["ph-a"], "category": "c"}])
    with pytest.raises(InputError, match=rf"{meta}:1: 2 binary_labels but 1 anonymized_physician_ids"):
        import_file(store, meta)
    assert table_counts(store) == before


def test_ideal_completion_grades_go_to_the_prompt_item(store, tmp_path):
    row = dict(PROMPT, ideal_completions_data={
        "ideal_completion": "Stop the soap; call emergency services if the face swells.",
        "ideal_completions_group": "Group 1", "ideal_completions_ref_completions": ["ref a"]})
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [row]))
    grades = write_jsonl(tmp_path / "g.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "ideal", "criterion": c["criterion"],
         "criteria_met": c["points"] > 0, "explanation": ""} for c in PROMPT["rubrics"]])
    import_file(store, grades)
    view = load_graded_conversation(store, "hb:p-inv-1")
    assert view.completion_source == "ideal_completion"
    import_file(store, write_jsonl(tmp_path / "c.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "c9", "model": "m", "completion": "Use soap."}]))
    model_view = load_graded_conversation(store, "hb:p-inv-1::c9")
    assert model_view.completion == "Use soap." and model_view.ideal_completion.startswith("Stop the soap")
    values = {r[0]: r[1] for r in store.query(
        "SELECT q.key, a.value FROM annotations a JOIN questions q ON q.id = a.question_id")}
    assert criteria_score(view.criteria, values) == 1.0


def test_a_prompt_completed_by_a_later_import_counts_as_new_for_the_labels_gate(store, tmp_path):
    """A HealthBench prompt stub (no completion: nothing to grade) completed in place by a
    later import keeps its row id; a reviewer who chose to see the labels before is asked
    about it, as about an item added since."""
    from review.reviewing.blinding import blind_work_left, labels_mark, labels_opened, open_labels
    from review.team.reviewers import ensure_reviewer

    meta = write_jsonl(tmp_path / "meta.jsonl", [
        {"prompt": PROMPT["prompt"], "completion": "Keep using it.", "prompt_id": "p-inv-1",
         "completion_id": "m1", "rubric": "Advises stopping the new soap.",
         "binary_labels": [False, True], "anonymized_physician_ids": ["ph-a", "ph-b"]}])
    import_file(store, meta)
    me = ensure_reviewer(store, "Dr. Blind")
    before = blind_work_left(store, me.id)
    open_labels(store, me, "browse", before)
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 0
    newest_before = labels_mark(store)[0]
    rows = dict(PROMPT, ideal_completions_data={"ideal_completion": "Stop the soap; see a GP."})
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [rows]))
    assert blind_work_left(store, me.id) == before + 1
    assert labels_mark(store)[0] == newest_before  # no new row: the stub was completed in place
    # Asked about: the prompt now gradable, and the physicians' completion of it, which the
    # revised rubric asks new criteria of (it was covered with its old criteria only).
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 2


def test_a_criterion_added_to_a_reviewed_item_counts_as_new_for_the_labels_gate(store, tmp_path):
    """A revised rubric adds a criterion to an item the reviewer had finished: it waits
    for their blind answer again, and a reviewer who chose to see the labels before is
    asked about it (the item's own row is unchanged)."""
    import copy

    from review.reviewing.blinding import blind_work_left, labels_opened, open_labels
    from review.reviewing.commit import Verdict, commit_verdicts
    from review.reviewing.criteria import item_questions
    from review.team.reviewers import ensure_reviewer

    def review_all(uid):
        item = store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
        commit_verdicts(store, me, item, [Verdict(q.id, "met") for q in item_questions(store, item)])

    p1 = dict(PROMPT, ideal_completions_data={"ideal_completion": "Stop the soap."})
    p2 = dict(copy.deepcopy(p1), prompt_id="p-inv-2")
    import_file(store, write_jsonl(tmp_path / "rows.jsonl", [p1, p2]))
    me = ensure_reviewer(store, "Dr. Blind")
    review_all("hb:p-inv-1")
    open_labels(store, me, "browse", blind_work_left(store, me.id))
    review_all("hb:p-inv-2")
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 0
    revised = copy.deepcopy(p1)
    revised["rubrics"].append({"criterion": "Asks whether the rash has spread.", "points": 2,
                               "tags": ["level:example", "axis:completeness"]})
    import_file(store, write_jsonl(tmp_path / "rows2.jsonl", [revised]))
    assert blind_work_left(store, me.id) == 1
    assert blind_work_left(store, me.id, after=labels_opened(store, me.id)) == 1
