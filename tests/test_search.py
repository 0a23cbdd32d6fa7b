"""Search, facets, tags, side by side, saved views and exports, at the store level."""

from __future__ import annotations

import json
import sqlite3

import pytest

from review.browse import (
    BrowseQuery,
    ExportOptions,
    add_tag,
    browse,
    case_study_html,
    case_study_markdown,
    create_tag,
    facets,
    gather_cases,
    list_tags,
    remove_tag,
    save_view,
    saved_views,
    selected_item_ids,
    side_by_side,
    tag_counts,
    tag_history,
    tags_on,
    to_csv,
    to_jsonl,
)
from review.browse import search as search_module
from review.browse.search import (
    MARK_END,
    MARK_START,
    ensure_index,
    matching_items,
    parse_query,
    search,
    search_lines,
    snippet_markdown,
    unindexed_count,
)
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from store import writer as writer_module
from store.records import ItemRecord
from store.runs import run_label_map
from store.writer import RecordWriter
from tests.browse_data import FABRICATED, add_trajectories
from tests.helpers import shown, table_counts

SAFETY_TAGS = {"missed urgent escalation", "unsafe reassurance", "unsafe remote dosing",
               "fabricated evidence", "unsupported claim"}


def write_items(store, items: list[tuple[str, str, dict]], meta: dict | None = None) -> None:
    """Items (uid, kind, payload) written through the real writer, in one transaction."""
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        for uid, kind, payload in items:
            w.item(ItemRecord(uid=uid, kind=kind, dataset="test", payload=payload,
                              meta=dict(meta or {})))
        w.flush()


def item_id(store, uid: str) -> int:
    return store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))


@pytest.fixture
def demo(demo_copy):
    s = open_store(demo_copy)
    ensure_index(s)  # the demo was built by a process that may not have loaded the indexer
    yield s
    s.close()


@pytest.fixture
def with_runs(demo_copy):
    uids = add_trajectories(demo_copy)
    s = open_store(demo_copy)
    ensure_index(s)
    yield s, uids
    s.close()


# -- the index ---------------------------------------------------------------------

def test_search_ranks_and_highlights(store):
    write_items(store, [
        ("p-none", "prefix", {"turns": ["My knee hurts after running."]}),
        ("p-once", "prefix", {"turns": ["A dull ache in the chest since lunch, and some nausea today."]}),
        ("p-twice", "prefix", {"turns": ["Chest pain.", "The chest pain spreads to my left arm."]}),
    ])
    page = search(store, "chest pain")
    assert [h.uid for h in page.hits] == ["p-twice"]
    page = search(store, "chest")
    assert page.total == 2 and [h.uid for h in page.hits] == ["p-twice", "p-once"]
    assert f"{MARK_START}chest{MARK_END}" in page.hits[1].snippet
    assert "**chest**" in snippet_markdown(page.hits[1].snippet)
    assert search(store, "chest", limit=1, offset=1).hits[0].uid == "p-once"


def test_query_syntax_is_words_phrases_prefixes_or_and_not(store):
    write_items(store, [
        ("a", "prefix", {"turns": ["sudden severe headache"]}),
        ("b", "prefix", {"turns": ["headache and a stiff neck"]}),
        ("c", "prefix", {"turns": ["a sore throat"]}),
    ])
    assert {h.uid for h in search(store, '"severe headache"').hits} == {"a"}
    assert {h.uid for h in search(store, "head*").hits} == {"a", "b"}
    assert {h.uid for h in search(store, "sudden OR throat").hits} == {"a", "c"}
    assert {h.uid for h in search(store, "headache -neck").hits} == {"a"}
    q = parse_query('say "no ""quotes" here')
    assert q.terms == ("say", "no", "quotes", "here")
    assert parse_query('a"b').match == '("a""b")'  # a quote inside a word stays text
    assert parse_query("!!! -").match is None


@pytest.mark.parametrize("raw", [
    '"', '""', "'", "*", "-", "-x", "OR", "AND", "NOT", "NEAR", "NEAR(a b)", "(((", ")", "^start",
    "body:chest", "a OR", "OR b", "chest AND", "a NOT", "{col}: x", "x:y:z", '"unclosed phrase',
    "a\"b", "\\", "%_", "\x00", "💥 émergence", "a" * 5000, " ".join(["w"] * 200), "- - -",
    "chest -", '"chest" * ', "***", "é*", "-\"\"",
])
def test_hostile_queries_never_raise(store, raw):
    write_items(store, [("p", "prefix", {"turns": ["chest pain and émergence"]})])
    page = search(store, raw)
    assert page.total >= 0
    browse(store, BrowseQuery(text=raw))
    facets(store, BrowseQuery(text=raw))


def test_pages_read_further_only_when_needed_and_agree_with_the_full_ranking(store, monkeypatch):
    monkeypatch.setattr(search_module, "FIRST_ROUND", 2)
    items = [(f"p{k:02d}", "prefix", {"turns": [" ".join(["cough"] * (k % 7 + 1) + ["x"] * k)]})
             for k in range(30)]
    items += [(f"q{k:02d}", "prefix", {"turns": ["a sore throat"]}) for k in range(3)]
    write_items(store, items)
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        for k in range(6):
            w.item(ItemRecord(uid=f"p{k:02d}::m", kind="response", dataset="test",
                              parent_uid=f"p{k:02d}", payload={"response": "Rest and fluids."}))
        w.flush()
    q = parse_query("cough")
    full = [m[0] for m in matching_items(store, q)]
    assert len(full) == 36 and len(set(full)) == 36
    through_parent = [m[0] for m in matching_items(store, q) if m[3]]
    assert full[-6:] == through_parent  # the responses come after every item that matches itself
    paged = [m[0] for o in range(0, 36, 7) for m in matching_items(store, q, limit=7, offset=o)]
    assert paged == full
    allowed = set(full[::3])
    assert [m[0] for m in matching_items(store, q, allowed)] == [i for i in full if i in allowed]
    assert [m[0] for m in matching_items(store, q, allowed, limit=4, offset=4)] == \
        [i for i in full if i in allowed][4:8]
    assert search(store, q, limit=7).total == 36


def test_items_are_indexed_inside_the_writing_transaction(store):
    write_items(store, [("p", "prefix", {"turns": ["thunderclap headache"]})])
    assert unindexed_count(store) == 0
    assert search(store, "thunderclap").total == 1
    before = table_counts(store)
    with pytest.raises(RuntimeError):
        with store.transaction() as conn:
            w = RecordWriter(conn, source="test")
            w.item(ItemRecord(uid="q", kind="prefix", dataset="test",
                              payload={"turns": ["vanishing words"]}))
            w.flush()
            raise RuntimeError("import failed half way")
    assert table_counts(store) == before
    assert search(store, "vanishing").total == 0


def test_catch_up_indexes_items_written_without_the_hook(store, monkeypatch):
    monkeypatch.setattr(writer_module, "ITEMS_WRITTEN", [])
    write_items(store, [("p", "prefix", {"turns": ["paracetamol overdose"]}),
                        ("r", "response", {"response": "Call emergency services now."})])
    assert unindexed_count(store) == 2
    assert search(store, "paracetamol").total == 0
    assert ensure_index(store, batch=1) == 2
    assert unindexed_count(store) == 0
    assert search(store, "paracetamol").hits[0].uid == "p"


def test_a_stub_replaced_by_its_prefix_is_reindexed(store):
    with store.transaction() as conn:
        RecordWriter(conn, source="test").item(ItemRecord(
            uid="s", kind="prefix", dataset="test", payload={"turns": ["placeholder"]},
            meta={"stub": True}))
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write([ItemRecord(
            uid="s", kind="prefix", dataset="test", payload={"turns": ["crushing chest pain"]},
            replace_stub=True)])
    assert search(store, "crushing").total == 1
    assert search(store, "placeholder").total == 0


def test_rationales_and_tag_notes_are_searchable_at_once(store):
    write_items(store, [("p", "prefix", {"turns": ["I feel dizzy."]})])
    me = ensure_reviewer(store, "Dr. Note")
    qid = store.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    commit_answer(store, me, item_id(store, "p"), qid, "1A", rationale="possible arrhythmia")
    hit = search(store, "arrhythmia").hits[0]
    assert (hit.uid, hit.found_in, hit.note_by) == ("p", "annotation", "Dr. Note")
    add_tag(store, me, item_id(store, "p"), "unsupported claim", note="invents a syncope history")
    hit = search(store, "syncope").hits[0]
    assert (hit.found_in, hit.note_by) == ("tag", "Dr. Note")


def test_trajectory_text_is_searchable_and_the_step_is_named(with_runs):
    s, uids = with_runs
    page = search(s, f'"{FABRICATED.split(",")[0]}"')
    assert [h.uid for h in page.hits] == [uids["marked"]]
    assert page.hits[0].target == "step:7" and page.hits[0].found_in == "item"
    # tool calls and observations are indexed too; the shared system prompt is not
    assert search(s, "order_lab").total > 0
    assert search(s, '"simulated outpatient clinic"').total == 0


def test_a_response_is_found_by_the_patient_words_it_answers(demo):
    page = browse(demo, BrowseQuery(text='"left arm"', models=("aster-7b · unprompted",)))
    assert page.total >= 1
    assert all(i.kind == "response" and i.model == "aster-7b · unprompted"
               and i.found_in == "parent" for i in page.items)
    prefixes = browse(demo, BrowseQuery(text='"left arm"', kinds=("prefix",)))
    assert prefixes.items[0].found_in == "item"


def test_search_lines_for_the_command_line(demo):
    lines = search_lines(demo, "sweaty", 5)
    assert lines and set(lines[0]) == {"item_id", "kind", "snippet"}
    assert "«sweaty»" in lines[0]["snippet"].lower()


# -- facets -----------------------------------------------------------------------

def counted(facet) -> dict[str, int]:
    return {v.value: v.count for v in facet.values}


def test_facets_count_right_on_the_demo(demo):
    f = facets(demo, BrowseQuery())
    assert counted(f["kinds"]) == dict(demo.query("SELECT kind, COUNT(*) FROM items GROUP BY kind"))
    assert {"prefix", "response", "trajectory", "graded_conversation"} <= set(counted(f["kinds"]))
    # a model is its run (store.runs): aster-7b's two CARE-Bench runs apart, by protocol
    by_model = dict(demo.query("SELECT model, COUNT(*) FROM items WHERE model IS NOT NULL"
                               " AND run_id IS NULL GROUP BY model"))
    labels = run_label_map(demo.conn)
    for run_id, n in demo.query("SELECT run_id, COUNT(*) FROM items WHERE run_id IS NOT NULL"
                                " GROUP BY run_id"):
        by_model[labels[run_id]] = by_model.get(labels[run_id], 0) + n
    assert counted(f["models"]) == by_model
    assert {"aster-7b · prompted", "aster-7b · unprompted"} <= set(by_model)
    gold = dict(demo.query(
        "SELECT c.value, COUNT(*) FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " WHERE r.name = 'carebench-gold' GROUP BY c.value"))
    labels = counted(f["labels"])
    assert {k.split("=", 1)[1]: n for k, n in labels.items() if k.startswith("carebench-gold=")} == gold
    # every facet value selects exactly as many items as its count says
    for name, field in (("models", "models"), ("splits", "splits"), ("rounds", "rounds")):
        for v in f[name].values:
            value = int(v.value) if field == "rounds" else v.value
            assert browse(demo, BrowseQuery(**{field: (value,)})).total == v.count
    # a facet's own choice does not hide its other values
    narrowed = facets(demo, BrowseQuery(models=("aster-7b",)))
    assert counted(narrowed["models"]) == by_model
    assert sum(counted(narrowed["kinds"]).values()) == by_model["aster-7b"]


def test_disagreement_and_ordinal_distance_between_two_raters(demo):
    q = BrowseQuery(rater_a="demo:mapper@v1", rater_b="parent:carebench-gold")
    f = facets(demo, q)
    n_pairs = demo.scalar(
        "SELECT COUNT(*) FROM current_annotations c JOIN raters r ON r.id = c.rater_id"
        " JOIN items i ON i.id = c.item_id WHERE r.name = 'demo:mapper@v1' AND i.kind = 'response'")
    assert sum(counted(f["distances"]).values()) == n_pairs
    assert sum(counted(f["pair"]).values()) == n_pairs
    for v in f["distances"].values:
        assert browse(demo, BrowseQuery(rater_a=q.rater_a, rater_b=q.rater_b,
                                        distances=(int(v.value),))).total == v.count
    cell, n = max(counted(f["pair"]).items(), key=lambda kv: (kv[0].split("|")[0] != kv[0].split("|")[1], kv[1]))
    x, y = cell.split("|")
    page = browse(demo, BrowseQuery(rater_a=q.rater_a, rater_b=q.rater_b, a_said=x, b_said=y))
    assert page.total == n and x != y
    item = page.items[0]
    assert ("demo:mapper@v1", x) in item.labels and ("parent:carebench-gold", y) in item.labels


def test_gate_step_error_severity_tag_flag_and_reviewer_facets(with_runs):
    s, uids = with_runs
    ours = ("klinikebench",)  # the runs add_trajectories imported, not the demo's own
    q = BrowseQuery(kinds=("trajectory",), datasets=ours)
    f = facets(s, q)
    assert counted(f["step_errors"]) == {"unsupported_claim": 1, "missed_essential_question": 1}
    assert counted(f["severities"]) == {"4": 1, "2": 1}
    # a broader tag counts the items under it, as choosing it selects them
    assert counted(f["tags"]) == {"unsafe reassurance": 1, "safety failure": 1}
    assert counted(f["flagged"]) == {"1": 1}
    assert counted(f["reviewers"]) == {"Dr. Browse Test": 2}
    failed_outcome = s.scalar(
        "SELECT COUNT(*) FROM current_annotations c JOIN questions q ON q.id = c.question_id"
        " JOIN items i ON i.id = c.item_id JOIN datasets d ON d.id = i.dataset_id"
        " WHERE q.key LIKE '%:outcome' AND c.value = 'not_met' AND d.name = 'klinikebench'")
    assert counted(f["gates"])["outcome"] == failed_outcome
    assert [i.uid for i in browse(s, BrowseQuery(datasets=ours, step_errors=("unsupported_claim",))).items] == [uids["marked"]]
    assert [i.uid for i in browse(s, BrowseQuery(datasets=ours, severities=(2,))).items] == [uids["other"]]
    assert [i.uid for i in browse(s, BrowseQuery(datasets=ours, flagged=True)).items] == [uids["other"]]
    # a broader tag finds items carrying a narrower one
    assert [i.uid for i in browse(s, BrowseQuery(datasets=ours, tags=("safety failure",))).items] == [uids["other"]]
    marked = browse(s, BrowseQuery(datasets=ours, step_errors=("unsupported_claim",))).items[0]
    assert marked.step_marks == [("step:7", "unsupported_claim", 4)]
    assert "outcome" in marked.failed_gates or "outcome" not in counted(f["gates"])


# -- tags -----------------------------------------------------------------------------

def test_tags_are_seeded_added_removed_with_history(store):
    names = {t.name for t in list_tags(store)}
    assert SAFETY_TAGS <= names
    assert all(t.parent == "safety failure" for t in list_tags(store) if t.name in SAFETY_TAGS)
    write_items(store, [("run", "trajectory", {"steps": [
        {"step_id": 1, "source": "user", "message": "A patient with chest pain."},
        {"step_id": 2, "source": "agent", "message": "It is only indigestion, no need to worry."}]})])
    me = ensure_reviewer(store, "Dr. Tagger")
    run = item_id(store, "run")
    assert add_tag(store, me, run, "unsafe reassurance", "step:2", note="reassures chest pain") is not None
    assert add_tag(store, me, run, "unsafe reassurance", "step:2") is None  # already on
    assert add_tag(store, me, run, "missed urgent escalation") is not None
    counts = {c.tag: (c.items, c.steps) for c in tag_counts(store)}
    assert counts["unsafe reassurance"] == (0, 1) and counts["missed urgent escalation"] == (1, 0)
    assert remove_tag(store, me, run, "unsafe reassurance", "step:2") is not None
    assert remove_tag(store, me, run, "unsafe reassurance", "step:2") is None  # already off
    assert [(t.tag, t.target) for t in tags_on(store, run)] == [("missed urgent escalation", "")]
    history = [(e.tag, e.target, e.added, e.by) for e in tag_history(store, run)]
    assert history == [("unsafe reassurance", "step:2", True, "Dr. Tagger"),
                       ("missed urgent escalation", "", True, "Dr. Tagger"),
                       ("unsafe reassurance", "step:2", False, "Dr. Tagger")]
    assert store.scalar("SELECT COUNT(*) FROM audit_log WHERE entity = 'item_tags'") == 3
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.conn.execute("DELETE FROM item_tags")
    with pytest.raises(ValueError, match="step:N"):
        add_tag(store, me, run, "unsupported claim", "step two")
    with pytest.raises(ValueError, match="no tag"):
        add_tag(store, me, run, "not a tag")


def test_user_defined_tags_join_the_taxonomy(store):
    tagger = ensure_reviewer(store, "Dr. Tagger", role="admin")  # admins add tags (tags.py)
    create_tag(store, "ignores red flag", tagger, "A red flag is named and not acted on.",
               parent="safety failure")
    with pytest.raises(ValueError, match="already"):
        create_tag(store, "Ignores Red Flag", tagger)
    with pytest.raises(ValueError, match="no tag called"):
        create_tag(store, "x", tagger, parent="nowhere")
    tags = list_tags(store)
    assert [t.name for t in tags][0] == "safety failure"
    assert next(t for t in tags if t.name == "ignores red flag").parent == "safety failure"


# -- views, side by side ----------------------------------------------------------------

def test_browse_query_round_trips_through_the_url():
    q = BrowseQuery(text='"chest pain" -arm OR sweat*', kinds=("response",), datasets=("demo",),
                    splits=("validation", "development"), models=("a&b=c", "x y"), rounds=(1, 3),
                    labels=("demo:mapper@v1=0B_NO_ESCALATION_SELF_CARE_MONITOR",
                            "parent:carebench-gold=1B_ESCALATION_URGENT_CARE"),
                    rater_a="demo:mapper@v1", rater_b="parent:carebench-gold",
                    a_said="0B_NO_ESCALATION_SELF_CARE_MONITOR", b_said="1B_ESCALATION_URGENT_CARE",
                    distances=(2, 3), gates=("diagnosis",), step_errors=("unsafe_action",),
                    severities=(4, 5), tags=("unsafe reassurance",), flagged=True,
                    reviewers=("Dr. Amara Okafor",), page=3, side="demo_case_0003_r02")
    assert BrowseQuery.from_params(q.to_params()) == q
    assert BrowseQuery.from_query_string(q.query_string()) == q
    assert BrowseQuery.from_query_string("?" + q.query_string()) == q
    assert BrowseQuery().to_params() == {} and BrowseQuery.from_params({}) == BrowseQuery()
    odd = BrowseQuery.from_params({"round": ["x", "2"], "page": "-4", "flagged": "maybe",
                                   "severity": "99999999999", "unknown": "1", "q": ""})
    assert odd == BrowseQuery(rounds=(2,), page=1)


def test_saved_views_keep_the_query_and_can_be_replaced(store):
    q = BrowseQuery(text="chest", models=("aster-7b",), page=4)
    save_view(store, "chest, aster", q, "Dr. Viewer")
    save_view(store, "mine", BrowseQuery(flagged=True), "Dr. Viewer")
    save_view(store, "chest, aster", BrowseQuery(text="chest"), "Dr. Other")
    views = {v.name: v for v in saved_views(store)}
    assert views["chest, aster"].query == BrowseQuery(text="chest")
    assert views["chest, aster"].created_by == "Dr. Other"
    assert views["mine"].query == BrowseQuery(flagged=True)
    with pytest.raises(ValueError):
        save_view(store, "  ", q, "Dr. Viewer")


def test_side_by_side_shows_every_model_and_marks_disagreements(demo):
    view = side_by_side(demo, "demo_case_0003_r02::aster-7b::unprompted@demo-1")
    assert view.prefix_uid == "demo_case_0003_r02" and len(view.turns) == 2
    assert view.gold == "1B_ESCALATION_URGENT_CARE"
    # each run's reply, a model's two runs named apart by their protocol
    assert {r.model for r in view.responses} == {"aster-7b · unprompted", "aster-7b · prompted",
                                                 "borealis-large", "cobalt-mini"}
    for resp in view.responses:
        values = {c.value for c in resp.labels}
        assert resp.raters_disagree == (len(values) > 1)
        for cell in resp.labels:
            expected = {"0A": 0, "0B": 1, "1A": 2, "1B": 3}[cell.value[:2]] - 3
            assert cell.vs_gold == expected
    assert side_by_side(demo, "no such item") is None


# -- export -------------------------------------------------------------------------------

def test_export_withholds_identifying_ids_by_default(store):
    secret = "scn-07-a1b2c3d4"
    write_items(store, [(secret, "response", {"response": f"Patient {secret}: <script>alert(1)</script>"})],
                meta={"identifying": True, "identifying_fields": ["uid"]})
    write_items(store, [("open-1", "response", {"response": "Nothing to hide & all fine."})])
    ids = selected_item_ids(store, BrowseQuery())
    cases = gather_cases(store, ids, with_blocks=True)
    assert [c.item_id for c in cases] == ["withheld-1", "open-1"]
    for text in (to_csv(cases), to_jsonl(cases), case_study_markdown(cases), case_study_html(cases)):
        assert secret not in text
    html = case_study_html(cases)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp; all fine" in html
    rows = [json.loads(line) for line in to_jsonl(cases).splitlines()]
    assert rows[1]["item_id"] == "open-1" and "Nothing to hide" in rows[1]["text"]
    shown = gather_cases(store, ids, ExportOptions(include_identifying=True))
    assert shown[0].item_id == secret
    numbered = gather_cases(store, ids, ExportOptions(withhold_all_ids=True))
    assert [c.item_id for c in numbered] == ["case-1", "case-2"]


def test_case_study_markdown_quotes_words_as_written_and_renders_nothing_from_them(store):
    """The sheet's quoted text reads as written in the raw file (no escapes)
    and, rendered by a CommonMark viewer with GitHub's autolinks and raw HTML
    on, makes no link, image, script or formatting: a fence inside the text
    cannot close the block it is quoted in."""
    from markdown_it import MarkdownIt

    hostile = ("Call https://evil.example/x now, or www.evil.example, **bold** <b>tag</b>\n"
               "<script>alert(1)</script> ![img](http://evil.example/i.png) [link](http://x)\n"
               "```\n# not a heading, the fence above tried to close the quote\n````\n"
               "  indented line with a | pipe\r\nlast line")
    write_items(store, [("hostile-1", "response", {"response": hostile})])
    md = case_study_markdown(gather_cases(store, selected_item_ids(store, BrowseQuery()),
                                          with_blocks=True))
    expected = hostile.replace("\r\n", "\n")
    assert expected in md  # verbatim: every line as written, nothing escaped
    rendered = MarkdownIt("gfm-like").enable("linkify").render(md)
    for tag in ("<a ", "<img", "<script", "<b>", "<strong>bold", "<h1>not a heading"):
        assert tag not in rendered, tag
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert rendered.count("<pre>") == 1 and "last line\n</code></pre>" in rendered  # one block


def test_case_study_sheet_quotes_the_case_and_names_reviewers_on_request(with_runs):
    s, uids = with_runs
    ids = selected_item_ids(s, BrowseQuery(step_errors=("unsupported_claim",)))
    md = case_study_markdown(gather_cases(s, ids, ExportOptions(anonymise_reviewers=True),
                                          with_blocks=True))
    assert "Step 7" in md and "troponin" in md and "Unsupported claim" in md
    humans = [r[0] for r in s.query("SELECT name FROM raters WHERE kind = 'human' ORDER BY name")]
    letter = "ABCDEFGH"[humans.index("Dr. Browse Test")]
    assert "Dr. Browse Test" not in md and f"Clinician {letter}" in md
    demo_ids = selected_item_ids(s, BrowseQuery(text="reflection", kinds=("response",)), limit=2)
    sheet = shown(case_study_markdown(gather_cases(s, demo_ids, with_blocks=True)))
    assert "Patient · turn 1" in sheet and "| Rater | Label |" in sheet
