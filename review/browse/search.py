"""Full-text search over what reviewers read and write.

What is searchable: patient turns, model responses, graded conversations,
trajectory steps (the agent's messages and reasoning, what it said to the
patient, tool calls with their arguments, observations, the final answer),
and every rater's rationale and tag note. The index is SQLite FTS5
(`search_fts` over `search_docs`, see store/migrations.py m004_search):

- an item's own text is written by `index_items`: the record writer calls it
  inside the transaction that writes the items (`store.writer.on_items_written`),
  except for an import, which commits its items first and then catches the
  index up with `ensure_index`, batch by batch, so a large file never holds the
  write lock while its text is tokenised. `ensure_index` also catches up any
  item written without the hook (an older database, a process that never
  imported this module), and Browse and `search` call it before they search;
- rationales and tag notes are indexed by triggers, whatever code path adds them.

How a kind of item becomes text is one small function registered with
`@extractor("kind")`; a kind without one falls back to every string in its
payload. A user's query is never passed to FTS5 as syntax: `parse_query`
turns it into quoted terms and phrases, so a stray quote, bracket or operator
cannot raise.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import review.browse.index_workers as index_workers
from review.reviewing.trajectory import message_text, subagent_owners
from review.text import safe_markdown
from store import Store, from_json
from store.writer import on_items_written

MARK_START, MARK_END = "\x02", "\x03"
"""Snippet markers around a matched word (control characters never kept in the index)."""
SNIPPET_TOKENS = 24
"""Words of context a snippet shows."""
MAX_TERMS = 32
MAX_QUERY_CHARS = 500

Part = tuple[str, str]
"""(target, text): target is '' for the item as a whole or 'step:<id>' for one step."""
Extractor = Callable[[Mapping[str, Any]], Iterable[Part]]

EXTRACTORS: dict[str, Extractor] = {}


def extractor(kind: str) -> Callable[[Extractor], Extractor]:
    """Register the function that turns an item payload of `kind` into searchable text."""
    def register(fn: Extractor) -> Extractor:
        EXTRACTORS[kind] = fn
        return fn
    return register


# -- what each kind of item says ---------------------------------------------

@extractor("prefix")
def prefix_text(payload: Mapping[str, Any]) -> Iterator[Part]:
    """The patient's turns so far."""
    for turn in payload.get("turns") or []:
        yield "", message_text(turn)


@extractor("response")
def response_text(payload: Mapping[str, Any]) -> Iterator[Part]:
    """The model's reply, or the error that replaced it, and what the model was
    given beyond the patient's turns (its system prompt: the turns are the
    prefix's text, searched there and found through it)."""
    yield "", payload.get("response") or ""
    yield "", payload.get("error") or ""
    for message in payload.get("input_messages") or []:
        if isinstance(message, Mapping) and message.get("role") != "user":
            yield "", message_text(message.get("content"))


@extractor("graded_conversation")
def conversation_text(payload: Mapping[str, Any]) -> Iterator[Part]:
    """The conversation, the completion under review and any ideal completion."""
    for turn in payload.get("turns") or []:
        yield "", message_text(turn.get("content") if isinstance(turn, Mapping) else turn)
    for key in ("completion", "ideal_completion"):
        if isinstance(payload.get(key), str):
            yield "", payload[key]


@extractor("conversation")
def chat_text(payload: Mapping[str, Any]) -> Iterator[Part]:
    """A study's own conversation: every message, whoever wrote it."""
    for message in payload.get("messages") or []:
        if isinstance(message, Mapping):
            yield "", message_text(message.get("content"))


@extractor("trajectory")
def trajectory_text(payload: Mapping[str, Any]) -> Iterator[Part]:
    """Everything a reviewer can read of a run: each step's message, reasoning,
    tool calls and observations (the system prompt is left out: every run shares
    it), the clinician-patient transcript (KlinikeBench keeps it beside the agent's
    steps: the patient's words are there only), the subagent runs (embedded, linked
    files and summarisations, each step's text placed on the run's step that
    delegated to it), an agent's log files, the final answer and the error. A
    text given twice is indexed once (`item_parts`)."""
    steps = payload.get("steps") or []
    for index, step in enumerate(steps):
        if not isinstance(step, dict) or step.get("source") == "system":
            continue
        target = f"step:{step.get('step_id') or index + 1}"
        yield from ((target, text) for text in _step_texts(step))
    transcript = payload.get("transcript") or []
    for index, turn in enumerate(transcript):
        if isinstance(turn, Mapping):
            yield ("" if steps else f"step:{index + 1}"), message_text(turn.get("content"))
    owners = subagent_owners(payload)
    for index, sub in enumerate(payload.get("subagent_trajectories") or []):
        owner = owners.get(index)
        yield from _subagent_texts(sub, f"step:{owner}" if owner is not None else "", 0)
    shown = len(steps) or len(transcript)
    for k, log in enumerate(payload.get("logs") or []):
        if isinstance(log, Mapping):
            yield f"step:{shown + k + 1}", log.get("text") or ""
    answer = payload.get("final_answer")
    if isinstance(answer, Mapping):
        yield "", str(answer.get("text") or "")
    yield "", payload.get("error") or ""


SUBAGENT_DEPTH = 20
"""Subagent runs inside subagent runs followed at most."""


def _subagent_texts(sub: Any, target: str, depth: int) -> Iterator[Part]:
    """A subagent run's text (its own subagents' too), all on `target`."""
    if not isinstance(sub, Mapping) or depth > SUBAGENT_DEPTH:
        return
    for step in sub.get("steps") or []:
        if isinstance(step, dict) and step.get("source") != "system":
            yield from ((target, text) for text in _step_texts(step))
    for inner in sub.get("subagent_trajectories") or []:
        yield from _subagent_texts(inner, target, depth + 1)


def _step_texts(step: Mapping[str, Any]) -> Iterator[str]:
    message = step.get("message")
    reply = _json_object(message)
    if reply is not None:  # a Terminus-style reply {analysis, plan, commands}
        yield from _strings(reply)
    else:
        yield message_text(message)
    if isinstance(step.get("reasoning_content"), str):
        yield step["reasoning_content"]
    for call in step.get("tool_calls") or []:
        if isinstance(call, dict):
            yield str(call.get("function_name") or "")
            yield from _strings(call.get("arguments"))
    for result in (step.get("observation") or {}).get("results") or []:
        if isinstance(result, dict):
            yield message_text(result.get("content"))


def _json_object(text: Any) -> Any:
    if isinstance(text, str) and text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value (keys left out), in document order."""
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return out


def item_parts(kind: str, payload: Mapping[str, Any]) -> list[Part]:
    """The searchable text of one item, part by part, without repeats."""
    fn = EXTRACTORS.get(kind, lambda p: (("", s) for s in _strings(p)))
    seen: set[str] = set()
    parts = []
    for target, text in fn(payload):
        if not isinstance(text, str):  # a source that put a number or an object where text goes
            text = " ".join(_strings(text)) if isinstance(text, (dict, list)) else str(text or "")
        text = text.strip()
        if text and text not in seen:
            seen.add(text)
            parts.append((target, text))
    return parts


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
"""Control characters: never indexed (the snippet markers are two of them)."""


# -- keeping the index current ----------------------------------------------

@on_items_written
def _items_written(conn: sqlite3.Connection, item_ids: Sequence[int], later: bool) -> None:
    """The record writer's hook: index now, or drop stale text for `ensure_index`."""
    if later:
        unindex_items(conn, item_ids)
    else:
        index_items(conn, item_ids)


def unindex_items(conn: sqlite3.Connection, item_ids: Sequence[int]) -> bool:
    """Take these items' own text out of the index (so `ensure_index` writes it
    afresh); True if there was any. Runs inside the caller's transaction."""
    ids = json.dumps(list(item_ids))
    old = "SELECT id, body FROM search_docs WHERE source = 'item' AND item_id IN (SELECT value FROM json_each(?))"
    if not conn.execute(f"SELECT EXISTS ({old})", (ids,)).fetchone()[0]:
        return False
    conn.execute(f"INSERT INTO search_fts (search_fts, rowid, body) SELECT 'delete', id, body FROM ({old})",
                 (ids,))
    conn.execute("DELETE FROM search_docs WHERE source = 'item'"
                 " AND item_id IN (SELECT value FROM json_each(?))", (ids,))
    return True


def index_items(conn: sqlite3.Connection, item_ids: Sequence[int]) -> int:
    """(Re)index the text of these items; runs inside the caller's transaction."""
    if not item_ids:
        return 0
    unindex_items(conn, item_ids)
    ids = json.dumps(list(item_ids))
    rows = conn.execute("SELECT id, kind, payload FROM items WHERE id IN"
                        " (SELECT value FROM json_each(?))", (ids,))
    return write_docs(conn, [(item_id, *item_text(kind, payload))
                             for item_id, kind, payload in rows])


def item_text(kind: str, payload: str | bytes) -> tuple[str, str | None]:
    """An item's searchable text as the index holds it (body, where each step
    starts), from its payload as stored."""
    return _joined(item_parts(kind, from_json(payload)))


def write_docs(conn: sqlite3.Connection, docs: Sequence[tuple[int, str, str | None]]) -> int:
    """Add items' text (item id, body, parts) to the index, in the caller's
    transaction (the items have no text in it yet); returns how many."""
    if not docs:
        return 0
    before = conn.execute("SELECT coalesce(MAX(id), 0) FROM search_docs").fetchone()[0]
    conn.executemany("INSERT INTO search_docs (item_id, source, target, body, parts)"
                     " VALUES (?, 'item', '', ?, ?)", docs)
    conn.execute("INSERT INTO search_fts (rowid, body) SELECT id, body FROM search_docs WHERE id > ?",
                 (before,))
    return len(docs)


def _joined(parts: list[Part]) -> tuple[str, str | None]:
    """The parts as one text, and where each step's text starts in it (JSON, or None)."""
    body, starts, offset, last = [], [], 0, None
    for target, text in parts:
        if target != last:
            starts.append([offset, target])
        last = target
        body.append(text)
        offset += len(text) + 1
    text = _CONTROL.sub(" ", "\n".join(body))  # one character for one: offsets hold
    return text, json.dumps(starts) if any(t for _, t in starts) else None


def unindexed_count(store: Store) -> int:
    """Items whose text is not in the search index yet."""
    n_items = store.scalar("SELECT COUNT(*) FROM items")
    n_docs = store.scalar("SELECT COUNT(*) FROM search_docs WHERE source = 'item'")
    return max(n_items - n_docs, 0)


def ensure_index(store: Store, batch: int = 500,
                 progress: Callable[[int, int], None] | None = None) -> int:
    """Index every item written without the hook; returns how many. One
    transaction per batch, so a long catch-up never holds the write lock
    long; each batch starts where the last one ended (row ids only grow).
    `progress(done, due)` is told after each batch."""
    done = after = 0
    due = unindexed_count(store)
    ids = _unindexed_ids(store) if due >= index_workers.PARALLEL_FROM else []
    if ids and store.path != ":memory:" and index_workers.workers() \
            and _payload_size(store, ids[:SAMPLE]) >= index_workers.PARALLEL_PAYLOAD:
        # Many large items (agent runs): their text is extracted by worker processes.
        # Many small ones (replies) are quicker here than the workers' start.
        done = index_workers.index_in_parallel(store, ids, batch, progress, due,
                                               index_items=index_items, write_docs=write_docs)
        if not unindexed_count(store):
            return done
        after = 0  # anything left (written meanwhile) is caught up below
    while due and unindexed_count(store):
        with store.transaction() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT i.id FROM items i WHERE i.id > ? AND NOT EXISTS (SELECT 1 FROM search_docs d"
                " WHERE d.source = 'item' AND d.item_id = i.id) ORDER BY i.id LIMIT ?", (after, batch))]
            if not ids:
                break
            done += index_items(conn, ids)
            after = ids[-1]
        if progress is not None:
            progress(done, max(due, done))
    return done


SAMPLE = 200
"""Items whose payloads are measured to judge the rest (`_payload_size`)."""


def _payload_size(store: Store, ids: list[int]) -> float:
    """The mean payload, in characters, of these items."""
    return store.scalar("SELECT coalesce(avg(length(payload)), 0) FROM items WHERE id IN"
                        " (SELECT value FROM json_each(?))", (json.dumps(ids),))


def _unindexed_ids(store: Store) -> list[int]:
    return [r[0] for r in store.conn.execute(
        "SELECT i.id FROM items i WHERE NOT EXISTS (SELECT 1 FROM search_docs d"
        " WHERE d.source = 'item' AND d.item_id = i.id) ORDER BY i.id")]


# -- the user's query, made safe ----------------------------------------------

@dataclass(frozen=True)
class TextQuery:
    """A search box entry read as words and "quoted phrases". A word ending in *
    matches as a prefix, OR between two terms matches either, and -word
    leaves out items with that word. Everything else is literal text."""
    raw: str
    match: str | None
    """The FTS5 MATCH expression of the words searched for (one document of an
    item - its text, a note on it - must match), or None when the entry holds
    nothing to search for."""
    terms: tuple[str, ...] = ()
    """The words and phrases searched for (for highlighting and locating)."""
    ignored: tuple[str, ...] = ()
    """What was left out, as typed (whitespace runs as one space), e.g. a lone
    '-word' with nothing to search for beside it."""
    exclude: str | None = None
    """The FTS5 MATCH expression of the -words: an item any of whose documents
    matches it is left out, whichever document matched the words (see
    `excluded_item_ids`)."""


_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORDY = re.compile(r"[^\W_]")


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def parse_query(raw: str | None) -> TextQuery:
    """The user's entry as an FTS5 expression in which every term is quoted."""
    raw = (raw or "")[:MAX_QUERY_CHARS]
    groups: list[list[str]] = [[]]  # OR-groups of AND-ed terms
    negated: list[str] = []
    negated_as_typed: list[str] = []
    terms: list[str] = []
    ignored: list[str] = []
    pending_or = False
    for m in _TOKEN.finditer(raw):
        neg, phrase, word = m.group(1), m.group(2), m.group(3)
        typed = " ".join(m.group(0).split())
        if word == "OR" and phrase is None:
            pending_or = bool(groups[-1])
            continue
        prefix = False
        if word is not None:
            neg = "-" if word.startswith("-") and len(word) > 1 else ""
            word = word[1:] if neg else word
            prefix = word.endswith("*")
            text = word.rstrip("*")
        else:
            text = phrase
        text = " ".join(text.split())
        if not _WORDY.search(text):
            if typed not in ("", "OR"):
                ignored.append(typed)
            continue
        if len(terms) + len(negated) >= MAX_TERMS:
            ignored.append(typed)
            continue
        expr = _quote(text) + (" *" if prefix else "")
        if neg:
            negated.append(expr)
            negated_as_typed.append(typed)
            continue
        terms.append(text)
        if pending_or:
            groups.append([expr])
            pending_or = False
        else:
            groups[-1].append(expr)
    groups = [g for g in groups if g]
    if not groups:
        return TextQuery(raw, None, (), tuple(ignored + negated_as_typed))
    match = " OR ".join("(" + " AND ".join(g) + ")" for g in groups)
    return TextQuery(raw, match, tuple(terms), tuple(ignored), " OR ".join(negated) or None)


_MATCHED_ITEMS = ("SELECT d.item_id FROM search_docs d WHERE d.id IN"
                  " (SELECT rowid FROM search_fts WHERE search_fts MATCH ?)")


def matched_item_ids(store: Store, match: str) -> list[int]:
    """Items whose own text or notes match an FTS5 expression (see parse_query), unranked."""
    return [r[0] for r in store.query(_MATCHED_ITEMS, (match,))]


def excluded_item_ids(store: Store, query: TextQuery) -> set[int]:
    """Items the query's -words leave out: any of their documents (their text,
    a note on them) holds one. An item matched through its parent is left out
    when it is itself excluded, or when its parent is."""
    return set(matched_item_ids(store, query.exclude)) if query.exclude else set()


# -- searching -----------------------------------------------------------------

@dataclass
class SearchHit:
    item_id: int
    uid: str
    kind: str
    score: float
    """bm25 rank: lower is a better match."""
    snippet: str
    """Matched text with MARK_START / MARK_END around each matched word."""
    found_in: str = "item"
    """Where the best match is: item (its own text) | annotation (a rationale) | tag (a tag
    note) | parent (the text it answers: a response's prefix, a completion's prompt)."""
    note_by: str | None = None
    """Who wrote the matching rationale or tag note."""
    target: str = ""
    """'step:N' when the match lies in one step of a trajectory (or a note on it)."""


@dataclass
class SearchPage:
    total: int
    hits: list[SearchHit] = field(default_factory=list)


_TOP_DOCS = ("SELECT d.item_id, r.score, r.doc_id FROM (SELECT rowid AS doc_id, rank AS score"
             " FROM search_fts WHERE search_fts MATCH ? ORDER BY rank{limit}) r"
             " JOIN search_docs d ON d.id = r.doc_id ORDER BY r.score, r.doc_id")
_TOP_ALLOWED_DOCS = ("SELECT d.item_id, f.rank AS score, f.rowid FROM search_fts f"
                     " JOIN search_docs d ON d.id = f.rowid WHERE search_fts MATCH ?"
                     " AND d.item_id IN (SELECT value FROM json_each(?))"
                     " ORDER BY score, f.rowid{limit}")
"""Only the allowed items' documents are scored (FTS5 computes rank per row read)."""
FIRST_ROUND = 200
"""Documents read back in the first round; each further round reads eight times as many."""

Match = tuple[int, float, int, bool]
"""(item id, score, id of the best matching search doc, matched through its parent)."""


def matching_items(store: Store, query: TextQuery, allowed: set[int] | None = None,
                   limit: int | None = None, offset: int = 0) -> list[Match]:
    """Items whose text or notes match, best first (bm25; lower score is better),
    then items matched through their parent (a response through the patient's
    words), in their parent's order. `allowed` keeps only those items.

    Items the -words exclude (`excluded_item_ids`) are left out, as are items
    matched through an excluded parent. Every matching document (of the allowed
    items) is scored, but only the best few hundred are read back at first;
    more when the page lies further on."""
    if query.match is None:
        return []
    excluded = excluded_item_ids(store, query)
    need = None if limit is None else offset + limit
    params: tuple = (query.match,) if allowed is None else (query.match, json.dumps(sorted(allowed)))
    sql = _TOP_DOCS if allowed is None else _TOP_ALLOWED_DOCS
    batch = None if need is None else max(FIRST_ROUND, 8 * need)
    while True:
        rows = store.query(sql.format(limit=f" LIMIT {batch}" if batch else ""), params)
        own: dict[int, Match] = {}
        for item_id, score, doc_id in rows:
            if item_id not in own and item_id not in excluded and (allowed is None or item_id in allowed):
                own[item_id] = (item_id, score, doc_id, False)
        exhausted = batch is None or len(rows) < batch
        if exhausted or len(own) >= need:
            break
        batch *= 8
    ranked = list(own.values())
    if need is None or (len(ranked) < need and exhausted):
        everything = rows if allowed is None else store.query(_TOP_DOCS.format(limit=""), (query.match,))
        ranked += _through_parent(store, everything, set(own), allowed, excluded)
    return ranked[offset:need]


def _through_parent(store: Store, rows: list, own: set[int], allowed: set[int] | None,
                    excluded: set[int]) -> list[Match]:
    """Items not matched themselves whose parent matched, in the parent's order
    (neither the item nor its parent excluded by the -words)."""
    best: dict[int, tuple[float, int]] = {}
    for item_id, score, doc_id in rows:
        if item_id not in excluded:
            best.setdefault(item_id, (score, doc_id))
    children = store.query("SELECT id, parent_id FROM items WHERE parent_id IN"
                           " (SELECT value FROM json_each(?)) ORDER BY id", (json.dumps(list(best)),))
    out = [(c, *best[p], True) for c, p in children
           if c not in own and c not in excluded and (allowed is None or c in allowed)]
    return sorted(out, key=lambda m: (m[1], m[0]))


def count_matching(store: Store, query: TextQuery) -> int:
    """How many items `matching_items` lists without filters (counted without ranking)."""
    if query.match is None:
        return 0
    if query.exclude is None:
        return store.scalar(
            f"WITH m AS MATERIALIZED ({_MATCHED_ITEMS}) SELECT COUNT(*) FROM items i"
            " WHERE i.id IN m OR i.parent_id IN m", (query.match,))
    return store.scalar(
        f"WITH x AS MATERIALIZED ({_MATCHED_ITEMS}),"
        f" m AS MATERIALIZED ({_MATCHED_ITEMS} AND d.item_id NOT IN x)"
        " SELECT COUNT(*) FROM items i WHERE (i.id IN m OR i.parent_id IN m) AND i.id NOT IN x",
        (query.exclude, query.match))


def search(store: Store, query: TextQuery | str, *, allowed: set[int] | None = None,
           limit: int = 20, offset: int = 0, with_total: bool = True) -> SearchPage:
    """One page of the items whose text or notes (or whose parent's) match, best
    first, with how many match in all (0 when `with_total` is False). `allowed`
    keeps only those items (review.browse passes its selection)."""
    if isinstance(query, str):
        query = parse_query(query)
    if query.match is None:
        return SearchPage(0)
    try:
        found = matching_items(store, query, allowed, limit, offset)
        short = len(found) < limit and (found or not offset)  # the last page: no need to count
        if not with_total:
            total = 0
        elif short:
            total = offset + len(found)
        elif allowed is None:
            total = count_matching(store, query)
        else:
            total = len(matching_items(store, query, allowed))
    except sqlite3.OperationalError:  # pragma: no cover - parse_query quotes every term
        return SearchPage(0)
    return SearchPage(total, search_hits(store, query, found))


def search_hits(store: Store, query: TextQuery,
                found: list[tuple[int, float, int, bool]]) -> list[SearchHit]:
    """Snippets and where the match lies, for rows of `matching_items`."""
    if not found:
        return []
    doc_ids = json.dumps([doc for _, _, doc, _ in found])
    snippets = {r[0]: r[1] for r in store.query(
        f"SELECT rowid, snippet(search_fts, 0, '{MARK_START}', '{MARK_END}', ' … ', {SNIPPET_TOKENS})"
        " FROM search_fts WHERE search_fts MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
        (query.match, doc_ids))}
    docs = {r["id"]: r for r in store.query(
        "SELECT d.id, d.source, d.target, d.parts, CASE WHEN d.parts IS NOT NULL THEN d.body END AS body,"
        " i.uid, i.kind, COALESCE(ra.name, rt.name) AS who"
        " FROM search_docs d JOIN items i ON i.id = d.item_id"
        " LEFT JOIN annotations a ON d.source = 'annotation' AND a.id = d.source_id"
        " LEFT JOIN item_tags t ON d.source = 'tag' AND t.id = d.source_id"
        " LEFT JOIN raters ra ON ra.id = a.rater_id LEFT JOIN raters rt ON rt.id = t.rater_id"
        " WHERE d.id IN (SELECT value FROM json_each(?))", (doc_ids,))}
    uids = {r[0]: (r[1], r[2]) for r in store.query(
        "SELECT id, uid, kind FROM items WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps([f[0] for f in found if f[3]]),))}
    hits = []
    for item_id, score, doc_id, via_parent in found:
        doc, snippet = docs[doc_id], snippets.get(doc_id, "")
        if via_parent:  # the match is in the parent's text (the patient's words)
            uid, kind = uids[item_id]
            hits.append(SearchHit(item_id, uid, kind, score, snippet, "parent"))
            continue
        target = doc["target"] or (step_of(doc["body"], doc["parts"], snippet) if doc["parts"] else "")
        hits.append(SearchHit(item_id, doc["uid"], doc["kind"], score, snippet, doc["source"],
                              doc["who"], target))
    return hits


def step_of(body: str, parts: str, snippet: str) -> str:
    """The step ('step:N') the snippet's first matched word is in, or '' when it lies
    outside the steps. (The words around it may begin in the text before: a subagent
    run's text follows the run's last step, and belongs to the step that delegated.)"""
    pieces = snippet.split(" … ")
    piece = next((p for p in pieces if MARK_START in p), max(pieces, key=len))
    lead = len(piece) - len(piece.lstrip())
    clean = piece.replace(MARK_START, "").replace(MARK_END, "").strip()
    at = body.find(clean) if clean else -1
    if at < 0:
        return ""
    if MARK_START in piece:
        at += len(piece[lead:piece.index(MARK_START)].replace(MARK_END, ""))
    step = ""
    for offset, target in json.loads(parts):
        if offset > at:
            break
        step = target
    return step


def item_excerpt(store: Store, item_ids: Sequence[int], chars: int = 280) -> dict[int, str]:
    """The opening of each item's text, for listing items when nothing is searched for."""
    rows = store.query(
        "SELECT item_id, substr(body, 1, ?) FROM search_docs WHERE source = 'item'"
        " AND item_id IN (SELECT value FROM json_each(?))", (chars + 1, json.dumps(list(item_ids))))
    out = {}
    for item_id, text in rows:
        text = " ".join(text.split())
        out[item_id] = text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " …"
    return out


# -- showing snippets ------------------------------------------------------------



def snippet_markdown(snippet: str) -> str:
    """A snippet as safe Markdown on one line: the text escaped (nothing in it
    can format, link or load anything) and the matched words in bold."""
    snippet = re.sub(f"{MARK_END}(\\s+){MARK_START}", r"\1", snippet)  # adjacent matches: one bold run
    out = []
    for i, piece in enumerate(re.split(f"[{MARK_START}{MARK_END}]", snippet)):
        piece = safe_markdown(re.sub(r"\s+", " ", piece))
        out.append(f"**{piece.strip()}**" if i % 2 and piece.strip() else piece)
    return "".join(out).strip()


def plain_markdown(text: str | None) -> str:
    """Untrusted text shown exactly as written inside Markdown (an id, a name):
    nothing in it formats, links or loads."""
    return safe_markdown(" ".join((text or "").split()))


def snippet_plain(snippet: str, marks: tuple[str, str] = ("«", "»")) -> str:
    """A snippet as plain text on one line, matched words between `marks`."""
    text = snippet.replace(MARK_START, marks[0]).replace(MARK_END, marks[1])
    return " ".join(text.split())


def search_lines(store: Store, query: str, limit: int = 20) -> list[dict[str, str]]:
    """For `carelens search`: the best matches as {item_id, kind, snippet}."""
    ensure_index(store)
    return [{"item_id": h.uid, "kind": h.kind, "snippet": snippet_plain(h.snippet)}
            for h in search(store, query, limit=limit, with_total=False).hits]


if __name__ == "__main__":  # a worker of `index_workers`: the text of the items it is given
    sys.exit(index_workers.serve(sys.argv[1], item_text))
