"""Browse and search keep their word: a result opens the item it names (at
the step where the words were found), text from files and links shows as
text, '-word' leaves out the items that hold it, a tag's count is what
choosing it selects, a page past the last shows the last, and another
session refreshing the shared facet index cannot break a run under way."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

import review.browse.index as index_module
from review.browse import (
    BrowseQuery,
    ExportOptions,
    add_tag,
    browse,
    case_study_markdown,
    facet_index,
    facets,
    gather_cases,
    item_link,
    selected_item_ids,
)
from review.browse.search import MAX_TERMS, count_matching, matching_items, parse_query, search
from review.datasets.sources import import_file
from review.reviewing.commit import commit_answer
from review.team.reviewers import ensure_reviewer
from review.text import inline_code
from review.workspace import open_store
from store.records import ItemRecord
from store.writer import RecordWriter
from tests.browse_data import REVIEWER, add_trajectories
from tests.conftest import ROOT

BROWSE = "pages/browse.py"
HOSTILE = "\n\n![x](https://evil.example/p.png) [click](https://evil.example/c) "


def rendered_kinds(md: str) -> list[str]:
    """Every token a CommonMark reader finds in `md`, and GFM's with bare addresses linked."""
    out = []
    for reader in (MarkdownIt("commonmark"), MarkdownIt("gfm-like").enable("linkify")):
        for block in reader.parse(md):
            out.append(block.type)
            out += [c.type for c in block.children or []]
    return out


@pytest.fixture
def db_path(demo_copy):
    add_trajectories(demo_copy)
    return demo_copy


def open_page(db_path, monkeypatch, page: str, params: dict[str, str], reviewer: str | None = REVIEWER) -> AppTest:
    """`page` opened straight from a link, as a browser does (not after the default page);
    by `reviewer` (None: nobody chosen yet)."""
    monkeypatch.setenv("CARELENS_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if reviewer:
        at.query_params["reviewer"] = reviewer
    else:  # a visitor with no name who chose to see every rater's labels at the gate
        from pages._shared import VISITOR_SAW
        from review.reviewing.blinding import labels_mark
        with open_store(db_path) as s:
            at.session_state[VISITOR_SAW] = {"screen": "browse", "covered": list(labels_mark(s)),
                                             "recorded": []}
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(page)
    at.run()
    return at


def result_lines(at: AppTest) -> list[str]:
    """The first line of each result: [**the item's name**](link), badges."""
    return [m.value for m in at.markdown if m.value.startswith("[**")]


# -- 1. a result opens the item it names ------------------------------------------------

def test_item_link_goes_to_the_screen_of_the_items_kind():
    assert item_link("prefix", "c1_r01") == "./?kind=prefix&item=c1_r01"
    assert item_link("response", "c1_r01::m") == "./?kind=response&item=c1_r01%3A%3Am"
    assert item_link("trajectory", "kb:x/1") == "./trajectories?item=kb%3Ax%2F1"
    assert item_link("trajectory", "kb:x/1", "step:7") == "./trajectories?item=kb%3Ax%2F1&step=7"
    assert item_link("trajectory", "kb:x/1", 3) == "./trajectories?item=kb%3Ax%2F1&step=3"
    assert item_link("graded_conversation", "hb:1") == "./graded?item=hb%3A1"
    assert item_link("graded_conversation", "hb:1", "step:2") == "./graded?item=hb%3A1"
    # The reviewer is carried (a link opened in a new tab comes back as them).
    assert item_link("trajectory", "kb:x/1", reviewer="Dr. A") == \
        "./trajectories?item=kb%3Ax%2F1&reviewer=Dr.%20A"


@pytest.mark.parametrize("kind", ["trajectory", "graded_conversation"])
def test_a_result_link_opens_that_item(db_path, monkeypatch, kind):
    with open_store(db_path) as s:
        uid = s.scalar("SELECT uid FROM items WHERE kind = ? ORDER BY id DESC LIMIT 1", (kind,))
    link = urlparse(item_link(kind, uid))
    page = f"pages/{link.path.strip('./') or 'review'}.py"
    at = open_page(db_path, monkeypatch, page, {k: v[0] for k, v in parse_qs(link.query).items()})
    assert not at.exception
    assert not at.warning, [w.value for w in at.warning]
    # The address names that item: by its id, or (a model's completion, to a reviewer
    # blind to the model: issue 19 fix 6) by an opaque id that opens the same item.
    from review.reviewing.names import item_in_address
    address = at.query_params["item"]
    with open_store(db_path) as s:
        item = s.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
        assert item_in_address(s, address, kind) == item
    assert address == f"item-{item}"  # a run names its agent, a completion its model


def test_a_run_found_by_a_step_opens_at_that_step(db_path, monkeypatch):
    at = open_page(db_path, monkeypatch, BROWSE, {"q": '"troponin came back normal"'})
    assert not at.exception
    (line,) = result_lines(at)
    link = urlparse(line[line.index("](") + 2:line.index(")", line.index("](")) ])
    params = {k: v[0] for k, v in parse_qs(link.query).items()}
    assert link.path == "./trajectories" and params["step"] == "7", line
    assert params["reviewer"] == "Dr. Browse Test", line  # carried: a new tab comes back as them
    run = open_page(db_path, monkeypatch, "pages/trajectories.py", params)
    assert not run.exception
    from review.reviewing.names import item_in_address
    with open_store(db_path) as s:  # the same run, named opaquely while blind to the agent
        assert item_in_address(s, run.query_params["item"]) == item_in_address(s, params["item"])
    assert run.query_params["step"] == "7"


# -- 2. text from files and links shows as text ----------------------------------------

def test_inline_code_keeps_the_text_on_one_line_and_inside_the_span():
    for text in ("plain", "a`b", "``x``", "`edge", HOSTILE, "x\r\n\r\n# heading\n- item"):
        md = inline_code(text)
        (block,) = [b for b in MarkdownIt("commonmark").parse(md) if b.type == "inline"]
        assert [c.type for c in block.children] == ["code_inline"], (text, md)
        assert block.children[0].content == " ".join(text.split())
    assert inline_code("  ") == ""


def test_search_terms_past_the_limit_are_listed_on_one_line():
    q = parse_query(" ".join(f"w{i}" for i in range(MAX_TERMS)) + ' "a\n\nb   c" -"d\ne"')
    assert q.ignored == ('"a b c"', '-"d e"')
    assert parse_query("-pain").ignored == ("-pain",)  # as typed, not as the index reads it


def test_ignored_search_terms_show_as_text(db_path, monkeypatch):
    hostile = '"' + HOSTILE + '"'
    at = open_page(db_path, monkeypatch, BROWSE, {"q": " ".join(f"w{i}" for i in range(MAX_TERMS)) + " " + hostile})
    assert not at.exception
    (caption,) = [c.value for c in at.caption if c.value.startswith("Not searched for")]
    kinds = rendered_kinds(caption)
    assert "image" not in kinds and "link_open" not in kinds, (caption, kinds)
    assert "evil.example" in caption  # shown, as text


def import_hostile_uid(db_path) -> str:
    uid = "zz_evil_r01" + HOSTILE + "`tick`"
    path = db_path.parent / "evaluation_prefixes_public.jsonl"
    path.write_text(json.dumps({"prefix_id": uid, "case_id": "zz_evil", "round_id": 1,
                                "split": "validation", "input_patient_turns": ["zzuniqueword here"]}) + "\n")
    with open_store(db_path) as s:
        import_file(s, path)
        assert s.scalar("SELECT COUNT(*) FROM items WHERE uid = ?", (uid,)) == 1
    return uid


def test_an_item_id_from_a_file_shows_as_text_on_its_result_line(db_path, monkeypatch):
    uid = import_hostile_uid(db_path)  # (a new item: the test reviewer would be asked to review it blind first)
    at = open_page(db_path, monkeypatch, BROWSE, {"q": "zzuniqueword"}, reviewer=None)
    assert not at.exception
    (line,) = result_lines(at)
    kinds = rendered_kinds(line)
    assert "image" not in kinds and kinds.count("link_open") == 2, (line, kinds)  # its own link only
    assert item_link("prefix", uid) in line


def test_an_item_id_from_a_file_shows_as_text_in_the_case_study_sheet(db_path):
    uid = import_hostile_uid(db_path)
    with open_store(db_path) as s:
        ids = selected_item_ids(s, BrowseQuery(text="zzuniqueword"))
        md = case_study_markdown(gather_cases(s, ids, ExportOptions(include_identifying=True),
                                              with_blocks=True))
    kinds = rendered_kinds(md)
    assert "image" not in kinds and "link_open" not in kinds, md
    assert f"Item: {inline_code(uid)}" in md  # the id as written, backticks and all


# -- 3. another session's refresh cannot break a run -----------------------------------

def test_a_refresh_by_another_session_leaves_a_run_under_way_alone(demo_copy, tmp_path, monkeypatch):
    s = open_store(demo_copy)
    before = facet_index(s)
    assert facet_index(s) is before  # nothing changed: the same index
    size = before.size
    path = tmp_path / "evaluation_prefixes_public.jsonl"
    path.write_text(json.dumps({"prefix_id": "zz_new_r01", "case_id": "zz_new", "round_id": 1,
                                "split": "validation", "input_patient_turns": ["new words"]}) + "\n")
    real_select = index_module.FacetIndex.select
    fired = []

    def select_then_another_session_imports(self, store, q, skip=None):
        out = real_select(self, store, q, skip)
        if not fired:
            fired.append(1)
            with open_store(demo_copy) as other:
                import_file(other, path)
                facet_index(other)  # its Browse run brings the shared index up to date
        return out

    monkeypatch.setattr(index_module.FacetIndex, "select", select_then_another_session_imports)
    page = browse(s, BrowseQuery(kinds=("prefix",)))
    assert fired and page.items
    monkeypatch.setattr(index_module.FacetIndex, "select", real_select)
    after = facet_index(s)
    assert after is not before and after.size == size + 1
    assert before.size == size and len(before.attrs["kinds"].codes) == size  # left as it was
    assert browse(s, BrowseQuery(text="new words")).total == 1
    s.close()


# -- 4. '-word' leaves out the items that hold it --------------------------------------

@pytest.fixture
def negation(store):
    with store.transaction() as conn:
        w = RecordWriter(conn, source="test")
        w.item(ItemRecord(uid="p1", kind="prefix", dataset="t", payload={"turns": ["My chest feels tight."]}))
        w.item(ItemRecord(uid="p2", kind="prefix", dataset="t",
                          payload={"turns": ["Chest ache.", "Now the pain spreads."]}))
        w.flush()
        w.item(ItemRecord(uid="p1::m", kind="response", dataset="t", parent_uid="p1",
                          model="m", payload={"response": "Sharp pain needs a doctor today."}))
        w.item(ItemRecord(uid="p1::n", kind="response", dataset="t", parent_uid="p1",
                          model="n", payload={"response": "Rest and see how it goes."}))
        w.item(ItemRecord(uid="p2::m", kind="response", dataset="t", parent_uid="p2",
                          model="m", payload={"response": "Rest."}))
        w.flush()
    return store


def shown(store, text: str) -> set[str]:
    """The uids search lists, checked against every other way of counting them."""
    q = parse_query(text)
    uids = {h.uid for h in search(store, text, limit=50).hits}
    ids = [m[0] for m in matching_items(store, q)]
    assert len(ids) == len(uids) == count_matching(store, q) == browse(store, BrowseQuery(text=text)).total
    assert browse(store, BrowseQuery(text=text, kinds=("prefix", "response"))).total == len(uids)
    return uids


def test_an_excluded_word_in_an_items_own_text_leaves_it_out(negation):
    assert shown(negation, "chest") == {"p1", "p2", "p1::m", "p1::n", "p2::m"}
    # p1::m says "pain" (it matched through p1's words); p2 says it in another turn, and
    # p2::m matched only through p2
    assert shown(negation, "chest -pain") == {"p1", "p1::n"}
    assert shown(negation, "chest -pain -rest") == {"p1"}


def test_an_excluded_word_in_a_note_leaves_the_item_out(negation):
    me = ensure_reviewer(negation, "Dr. Neg")
    p1 = negation.scalar("SELECT id FROM items WHERE uid = 'p1'")
    qid, book = negation.query_one("SELECT id, codebook FROM questions WHERE kind = 'labelset'"
                                   " AND item_id IS NULL ORDER BY id LIMIT 1")
    from codebook import builtin_codebooks

    commit_answer(negation, me, p1, qid, builtin_codebooks()[book].codes[0],
                  rationale="Worried about cardiac pain here.")
    assert shown(negation, "chest -pain") == set()
    assert shown(negation, "chest -cardiac") == {"p2", "p2::m"}


# -- 5. a tag's count is what choosing it selects --------------------------------------

@pytest.fixture
def tagged(demo_copy):
    s = open_store(demo_copy)
    me = ensure_reviewer(s, "Dr. Tagger")
    item = s.scalar("SELECT id FROM items WHERE kind = 'response' ORDER BY id LIMIT 1")
    add_tag(s, me, item, "unsafe reassurance", note="says it is nothing")
    yield s
    s.close()


@pytest.mark.parametrize("chosen", [(), ("safety failure",), ("Safety Failure",), ("unsafe reassurance",),
                                    ("Unsafe Reassurance",)])
def test_each_tags_count_is_what_choosing_it_selects(tagged, chosen):
    values = facets(tagged, BrowseQuery(tags=chosen))["tags"].values
    for v in values:
        assert v.count == browse(tagged, BrowseQuery(tags=(v.value,))).total, (v.value, v.count)
    assert {v.value for v in values if v.selected} == set(chosen)
    assert {v.label for v in values} >= {"safety failure", "unsafe reassurance"}
    assert len({v.label for v in values}) == len(values)  # one entry per tag
    if chosen:
        assert all(v.count == 1 for v in values if v.selected)


def test_a_tag_chosen_in_another_case_is_selected_on_the_page(demo_copy, monkeypatch):
    with open_store(demo_copy) as s:
        me = ensure_reviewer(s, "Dr. Tagger")
        item = s.scalar("SELECT id FROM items WHERE kind = 'response' ORDER BY id LIMIT 1")
        add_tag(s, me, item, "unsafe reassurance", note="says it is nothing")
    at = open_page(demo_copy, monkeypatch, BROWSE, {"tag": "Safety Failure"}, reviewer=None)
    assert not at.exception
    assert at.multiselect(key="browse:tags").value == ["Safety Failure"]
    assert "safety failure (1)" in at.multiselect(key="browse:tags").options
    assert len(result_lines(at)) == 1


# -- 6. a page past the last shows the last ---------------------------------------------

def test_a_page_past_the_last_shows_the_last(demo_copy):
    with open_store(demo_copy) as s:
        last = browse(s, BrowseQuery(text="chest", page=1))
        assert last.pages > 1
        beyond = browse(s, BrowseQuery(text="chest", page=last.pages + 5))
        at_last = browse(s, BrowseQuery(text="chest", page=last.pages))
        assert (beyond.page, beyond.pages, beyond.total) == (last.pages, last.pages, last.total)
        assert [i.item_id for i in beyond.items] == [i.item_id for i in at_last.items] != []
        assert browse(s, BrowseQuery(page=10_000)).items


def test_a_link_to_a_page_past_the_last_opens_the_last(db_path, monkeypatch):
    at = open_page(db_path, monkeypatch, BROWSE, {"q": "chest", "page": "99"})
    assert not at.exception
    assert not [i.value for i in at.info if "Nothing matches" in i.value]
    with open_store(db_path) as s:
        pages = browse(s, BrowseQuery(text="chest")).pages
    assert at.query_params["page"] == str(pages)  # the address names the page shown
    assert any(f"page {pages} of {pages}" in m.value for m in at.markdown)
    assert result_lines(at)
