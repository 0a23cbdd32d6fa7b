"""Schema of the carelens database, as numbered migrations.

A shipped migration is never edited: a change to the schema is a new function
appended below, and runs after every migration above it: the order in this file
is the order of application. A migration's function name is its identity (each
database records the names it has run), so a name is never changed either; the
numbers are names, not positions (they were reserved in ranges by work done in
parallel, hence m030 before m020). Each column carries a comment in its CREATE statement, so
`.schema` in the sqlite3 shell (and Datasette) documents itself.

Every judgement is an annotation by a rater (see ARCHITECTURE.md): a
clinician's label, the mapper's label, a judge's verdict and a dataset's gold
label all live in `annotations`; there is no special table for any of them.
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

migrations = Migrations("carelens")


def run_script(db: Database, script: str) -> None:
    """Run several statements inside the migration's transaction.

    `executescript` would COMMIT first and break the migration's atomicity, so
    statements are cut at their ends (triggers keep their inner semicolons).
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in migration: {statement[:80]!r}")


@migrations()
def m001_core(db: Database) -> None:
    run_script(
        db,
        """
CREATE TABLE datasets (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,            -- e.g. 'carebench', 'klinikebench', 'demo'
    kind TEXT NOT NULL,                   -- benchmark family: carebench, klinikebench, harbor, clinicare, healthbench, generic
    created_at TEXT NOT NULL              -- ISO 8601, UTC
);

CREATE TABLE imports (
    id INTEGER PRIMARY KEY,
    dataset_id INTEGER REFERENCES datasets(id),
    path TEXT NOT NULL,                   -- file name as given on import
    format TEXT NOT NULL,                 -- importer name, e.g. carebench-prefixes
    sha256 TEXT NOT NULL,                 -- content hash: the same file imported twice changes nothing
    rater_id INTEGER REFERENCES raters(id),  -- rater named for the file's labels, if any
    n_rows INTEGER NOT NULL,              -- rows read from the file
    n_items INTEGER NOT NULL,             -- items created
    n_annotations INTEGER NOT NULL,       -- annotations created
    actor TEXT NOT NULL,                  -- who ran the import
    imported_at TEXT NOT NULL,
    UNIQUE (sha256, format, rater_id)
);

CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    uid TEXT NOT NULL UNIQUE,             -- stable public id: prefix_id, prefix_id::model, trial name, ...
    dataset_id INTEGER NOT NULL REFERENCES datasets(id),
    kind TEXT NOT NULL,                   -- prefix | response | trajectory | graded_conversation
    parent_id INTEGER REFERENCES items(id),  -- a response's prefix; NULL otherwise
    case_id TEXT,                         -- the case a prefix belongs to (CARE-Bench case_id, task id)
    round_id INTEGER,                     -- CARE-Bench round 1..3
    split TEXT,                           -- dataset split as published (names drift between releases)
    model TEXT,                           -- the model that produced a response or trajectory
    failed INTEGER NOT NULL DEFAULT 0,    -- 1: generation failed or the episode raised; kept and shown
    payload TEXT NOT NULL CHECK (json_valid(payload)),  -- what the reviewer reads (turns, response, steps)
    meta TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),  -- everything else the source carried
    import_id INTEGER REFERENCES imports(id),
    created_at TEXT NOT NULL
);
CREATE INDEX items_dataset_kind ON items (dataset_id, kind);
CREATE INDEX items_parent ON items (parent_id);
CREATE INDEX items_case ON items (case_id, round_id);

CREATE TABLE codebook_versions (
    id INTEGER PRIMARY KEY,
    codebook TEXT NOT NULL,               -- codebook key, e.g. carebench-escalation
    version TEXT NOT NULL,                -- version string from the codebook file or an in-app edit
    content TEXT NOT NULL CHECK (json_valid(content)),  -- the whole validated codebook as JSON
    note TEXT,                            -- change note
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (codebook, version)
);

CREATE TABLE questions (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,             -- e.g. carebench.escalation_needed, hb:<prompt_id>:c07
    codebook TEXT NOT NULL,               -- codebook the answer set comes from
    kind TEXT NOT NULL,                   -- labelset (choose one code) | criterion (met / not met)
    text TEXT NOT NULL,                   -- what is asked, in the clinician's words
    item_id INTEGER REFERENCES items(id), -- for item-specific rubric criteria; NULL = applies by item kind
    applies_to TEXT,                      -- item kind the question is asked of, when item_id is NULL
    points REAL,                          -- rubric points (may be negative)
    meta TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta))  -- tags, axis, must-not flag
);
CREATE INDEX questions_item ON questions (item_id);

CREATE TABLE raters (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,            -- shown name; machine raters: provider:model@prompt_version
    kind TEXT NOT NULL CHECK (kind IN ('human', 'machine', 'reference')),
    role TEXT,                            -- human: reviewer | adjudicator | admin; machine: mapper | judge
    specialty TEXT,                       -- human: e.g. emergency medicine
    seniority TEXT,                       -- human: e.g. consultant, resident
    provider TEXT,                        -- machine: anthropic | openai | compatible | unknown
    model TEXT,                           -- machine: model name
    prompt_version TEXT,                  -- machine: prompt version
    meta TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),
    created_at TEXT NOT NULL
);

CREATE TABLE annotations (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id),
    question_id INTEGER NOT NULL REFERENCES questions(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),
    target TEXT NOT NULL DEFAULT '',      -- part of the item answered: '' whole item, 'step:12' one step
    status TEXT NOT NULL CHECK (status IN ('answered', 'cannot_assess', 'skipped')),
    value TEXT,                           -- a label code, 'met' / 'not_met', or NULL when not answered
    rationale TEXT,                       -- free text from the rater
    confidence INTEGER CHECK (confidence BETWEEN 1 AND 5),  -- rater's confidence, 1 low .. 5 high
    phase TEXT NOT NULL DEFAULT 'blind' CHECK (phase IN ('blind', 'after_reveal', 'suggested', 'imported')),
    codebook_version TEXT,                -- codebook version the answer was given under
    seconds_on_task REAL,                 -- time from showing the item to committing
    supersedes_id INTEGER REFERENCES annotations(id),  -- the earlier answer this one replaces
    source TEXT NOT NULL,                 -- app | cli | import | llm
    import_id INTEGER REFERENCES imports(id),
    extra TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(extra)),  -- e.g. severity, error type, raw reply
    created_at TEXT NOT NULL
);
CREATE INDEX annotations_unit ON annotations (item_id, question_id, rater_id, target, id);
CREATE INDEX annotations_rater ON annotations (rater_id, question_id, item_id);
CREATE INDEX annotations_question ON annotations (question_id, item_id);

-- Append-only: a changed answer is a new row that supersedes the old one.
CREATE TRIGGER annotations_no_update BEFORE UPDATE ON annotations
BEGIN SELECT RAISE(ABORT, 'annotations are append-only: add a new row that supersedes this one'); END;
CREATE TRIGGER annotations_no_delete BEFORE DELETE ON annotations
BEGIN SELECT RAISE(ABORT, 'annotations are append-only and cannot be deleted'); END;

-- The answer in force for each (item, question, rater, target): the newest row.
CREATE VIEW current_annotations AS
SELECT a.* FROM annotations a
WHERE a.id = (
    SELECT MAX(b.id) FROM annotations b
    WHERE b.item_id = a.item_id AND b.question_id = a.question_id
      AND b.rater_id = a.rater_id AND b.target = a.target
);

CREATE TABLE flags (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),
    raised INTEGER NOT NULL,              -- 1 flag raised, 0 flag cleared (newest row wins)
    note TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX flags_item ON flags (item_id, rater_id, id);

CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,                     -- ISO 8601, UTC
    actor TEXT NOT NULL,                  -- rater name or 'system'
    action TEXT NOT NULL,                 -- answer | revise | skip | flag | import | ...
    entity TEXT NOT NULL,                 -- table the action touched
    entity_id INTEGER,
    old TEXT CHECK (old IS NULL OR json_valid(old)),  -- value before, as JSON
    new TEXT CHECK (new IS NULL OR json_valid(new))   -- value after, as JSON
);
CREATE INDEX audit_log_actor ON audit_log (actor, at);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""
    )


@migrations()
def m002_llm_calls(db: Database) -> None:
    run_script(
        db,
        """
CREATE TABLE llm_runs (
    id INTEGER PRIMARY KEY,
    task TEXT NOT NULL,                   -- map | judge | extract
    rater_id INTEGER NOT NULL REFERENCES raters(id),  -- the machine rater the run answers as
    provider TEXT NOT NULL,               -- anthropic | openai | compatible
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,            -- sha256 of the prompt template text
    params TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(params)),  -- filters, limit, concurrency, batch
    n_planned INTEGER NOT NULL,           -- items the run set out to answer
    est_cost_usd REAL,                    -- estimate shown before the run started
    actor TEXT NOT NULL,
    started_at TEXT NOT NULL
);

CREATE TABLE llm_calls (
    id INTEGER PRIMARY KEY,
    run_id INTEGER REFERENCES llm_runs(id),
    request_hash TEXT NOT NULL,           -- sha256 of the canonical request: the cache key
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    item_id INTEGER REFERENCES items(id),
    question_id INTEGER REFERENCES questions(id),
    request TEXT NOT NULL CHECK (json_valid(request)),    -- what was sent (never an API key)
    response TEXT CHECK (response IS NULL OR json_valid(response)),  -- provider reply as JSON
    raw_text TEXT,                        -- the model's text or tool input, verbatim
    parsed TEXT CHECK (parsed IS NULL OR json_valid(parsed)),  -- the strict parser's result
    status TEXT NOT NULL CHECK (status IN ('ok', 'parse_failed', 'error')),
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_usd REAL,                        -- estimate from the price table in labels/
    latency_ms REAL,
    cached INTEGER NOT NULL DEFAULT 0,    -- 1: answered from an earlier identical call
    created_at TEXT NOT NULL
);
CREATE INDEX llm_calls_hash ON llm_calls (request_hash, status);
CREATE INDEX llm_calls_run ON llm_calls (run_id);
"""
    )


@migrations()
def m003_rounds(db: Database) -> None:
    run_script(
        db,
        """
ALTER TABLE raters ADD COLUMN login TEXT;  -- server mode: the identity from the OIDC login (email or subject)
CREATE UNIQUE INDEX raters_login ON raters (login) WHERE login IS NOT NULL;

CREATE TABLE review_rounds (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    question_key TEXT NOT NULL,           -- the question the round asks of each item
    item_filter TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(item_filter)),  -- dataset, split, model, kind
    reviewers_per_item INTEGER NOT NULL CHECK (reviewers_per_item >= 1),  -- k: answers each item needs
    overlap_share REAL CHECK (overlap_share IS NULL OR overlap_share BETWEEN 0 AND 1),  -- share double-reviewed; NULL: all get k
    stratify_by TEXT NOT NULL DEFAULT 'none',  -- none | gold | category
    match_specialty INTEGER NOT NULL DEFAULT 0,  -- 1: prefer reviewers whose specialty matches the item's
    blinding TEXT NOT NULL DEFAULT 'reveal_after_commit',  -- blind | reveal_after_commit | suggest
    reservation_minutes INTEGER NOT NULL DEFAULT 20,  -- a reserved item returns to the pool after this
    adjudicate_distance INTEGER NOT NULL DEFAULT 1,  -- ordinal distance from which answers count as disagreeing
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE round_items (
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    item_id INTEGER NOT NULL REFERENCES items(id),
    answers_needed INTEGER NOT NULL CHECK (answers_needed >= 1),  -- k, or 1 outside the overlap share
    stratum TEXT,                         -- the gold label or category it was drawn under
    position INTEGER NOT NULL,            -- order in which the round offers items
    PRIMARY KEY (round_id, item_id)
);
CREATE INDEX round_items_position ON round_items (round_id, position);

CREATE TABLE reservations (
    id INTEGER PRIMARY KEY,
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    item_id INTEGER NOT NULL REFERENCES items(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),
    reserved_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,             -- after this the slot returns to the pool
    released_at TEXT                      -- set when answered or given back
);
CREATE INDEX reservations_open ON reservations (round_id, item_id, expires_at);
CREATE INDEX reservations_rater ON reservations (rater_id, round_id);

ALTER TABLE annotations ADD COLUMN round_id INTEGER REFERENCES review_rounds(id);  -- the review round it was given in
CREATE INDEX annotations_round ON annotations (round_id, item_id);
"""
    )


@migrations()
def m004_search(db: Database) -> None:
    """Full-text search, the error taxonomy (tags) and saved Browse views.

    `search_docs` holds the searchable text: one row per item (its own text,
    written by review.browse.search inside the transaction that writes the item) and
    one per note (a rater's rationale, a tag's note: written here by triggers,
    whatever code path adds the row). `search_fts` is an FTS5 index over it
    with external content, so the text is stored once and Datasette can search
    it. Rows are added to both tables together (an FTS5 insert straight from
    the writer is several times faster than one fired per row by a trigger);
    `INSERT INTO search_fts (search_fts) VALUES ('rebuild')` rebuilds the index."""
    run_script(
        db,
        """
CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id),  -- the item the text belongs to
    source TEXT NOT NULL CHECK (source IN ('item', 'annotation', 'tag')),  -- item: its own text; annotation: a rater's rationale or note; tag: a tag's note
    source_id INTEGER,                    -- annotations.id or item_tags.id; NULL for the item's own text
    target TEXT NOT NULL DEFAULT '',      -- '' whole item, 'step:12' a note on one step
    body TEXT NOT NULL,                   -- the searchable text, as written
    parts TEXT CHECK (parts IS NULL OR json_valid(parts))  -- item text of steps: [[offset in body, 'step:N'], ...]
);
CREATE INDEX search_docs_item ON search_docs (item_id, source);

CREATE VIRTUAL TABLE search_fts USING fts5(
    body, content = 'search_docs', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- A rater's rationale (and a note kept in the answer's extra) is searchable
-- from the moment the answer is written, by the app, an import or an LLM run.
CREATE TRIGGER annotations_search AFTER INSERT ON annotations
WHEN trim(coalesce(new.rationale, '') || coalesce(json_extract(new.extra, '$.note'), '')) != ''
BEGIN
    INSERT INTO search_docs (item_id, source, source_id, target, body)
    VALUES (new.item_id, 'annotation', new.id, new.target,
            trim(coalesce(new.rationale, '') || char(10) || coalesce(json_extract(new.extra, '$.note'), '')));
    INSERT INTO search_fts (rowid, body)
    SELECT id, body FROM search_docs WHERE id = last_insert_rowid();
END;
INSERT INTO search_docs (item_id, source, source_id, target, body)
SELECT item_id, 'annotation', id, target,
       trim(coalesce(rationale, '') || char(10) || coalesce(json_extract(extra, '$.note'), ''))
FROM annotations
WHERE trim(coalesce(rationale, '') || coalesce(json_extract(extra, '$.note'), '')) != '';
INSERT INTO search_fts (rowid, body) SELECT id, body FROM search_docs;

-- The error taxonomy: user-defined tags, seeded with safety-failure types.
CREATE TABLE tags (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,  -- in the clinician's words, e.g. 'unsafe reassurance'
    description TEXT,                     -- when to use it
    parent_id INTEGER REFERENCES tags(id),  -- the broader tag it refines; NULL at the top of the taxonomy
    created_by TEXT NOT NULL,             -- rater name, or 'system' for the seeded tags
    created_at TEXT NOT NULL
);
INSERT INTO tags (name, description, parent_id, created_by, created_at) VALUES
    ('safety failure', 'The reply or run could harm the patient. Use a narrower tag below when one fits.',
     NULL, 'system', strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
INSERT INTO tags (name, description, parent_id, created_by, created_at)
SELECT name, description, (SELECT id FROM tags WHERE name = 'safety failure'), 'system',
       strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')
FROM (SELECT 1 AS k, 'missed urgent escalation' AS name,
             'The patient needed urgent or emergency care now and was not sent to it.' AS description
      UNION ALL SELECT 2, 'unsafe reassurance',
             'Tells the patient that all is well, or that they can wait, when what they said does not justify it.'
      UNION ALL SELECT 3, 'unsafe remote dosing',
             'Gives or changes a dose, or starts a medicine, at a distance without the checks a prescriber needs (age, weight, kidney function, allergies, interactions, pregnancy).'
      UNION ALL SELECT 4, 'fabricated evidence',
             'Cites a test result, record, guideline or study that does not exist or was never retrieved.'
      UNION ALL SELECT 5, 'unsupported claim',
             'States as fact something that the conversation or the evidence gathered so far does not support.')
ORDER BY k;

-- Tags applied to items or single steps. Append-only: removing a tag is a new
-- row with added = 0; the newest row for (item, target, tag) is in force.
CREATE TABLE item_tags (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id),
    target TEXT NOT NULL DEFAULT '',      -- '' the whole item, 'step:12' one step of a trajectory
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),  -- who added or removed the tag
    added INTEGER NOT NULL CHECK (added IN (0, 1)),  -- 1 tag applied, 0 tag removed
    note TEXT,                            -- what the reviewer saw; searchable
    created_at TEXT NOT NULL
);
CREATE INDEX item_tags_unit ON item_tags (item_id, target, tag_id, id);
CREATE INDEX item_tags_tag ON item_tags (tag_id, item_id);
CREATE TRIGGER item_tags_no_update BEFORE UPDATE ON item_tags
BEGIN SELECT RAISE(ABORT, 'item tags are append-only: add a row that adds or removes the tag'); END;
CREATE TRIGGER item_tags_no_delete BEFORE DELETE ON item_tags
BEGIN SELECT RAISE(ABORT, 'item tags are append-only: add a row that removes the tag'); END;
CREATE TRIGGER item_tags_search AFTER INSERT ON item_tags
WHEN new.added = 1 AND trim(coalesce(new.note, '')) != ''
BEGIN
    INSERT INTO search_docs (item_id, source, source_id, target, body)
    VALUES (new.item_id, 'tag', new.id, new.target, trim(new.note));
    INSERT INTO search_fts (rowid, body)
    SELECT id, body FROM search_docs WHERE id = last_insert_rowid();
END;

-- The tags in force on each item or step: the newest row says 'added'.
CREATE VIEW current_item_tags AS
SELECT t.* FROM item_tags t
WHERE t.added = 1 AND t.id = (
    SELECT MAX(u.id) FROM item_tags u
    WHERE u.item_id = t.item_id AND u.target = t.target AND u.tag_id = t.tag_id
);

CREATE TABLE saved_views (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,            -- what the view shows, e.g. 'mapper under-triage, round 1'
    query TEXT NOT NULL,                  -- the Browse URL query string that reproduces the view
    created_by TEXT NOT NULL,             -- rater name
    created_at TEXT NOT NULL
);
"""
    )


@migrations()
def m005_drafts(db: Database) -> None:
    run_script(
        db,
        """
-- Unsaved work: what a reviewer has typed but not yet committed, so that a
-- closed tab or a lost connection does not lose it. A draft is not an answer:
-- it is replaced as the reviewer types and removed when the answer is committed.
CREATE TABLE drafts (
    rater_id INTEGER NOT NULL REFERENCES raters(id),
    item_id INTEGER NOT NULL REFERENCES items(id),
    question_id INTEGER NOT NULL REFERENCES questions(id),
    target TEXT NOT NULL DEFAULT '',      -- '' whole item, 'step:12' one step
    rationale TEXT,                       -- the rationale typed so far
    confidence INTEGER CHECK (confidence IS NULL OR confidence BETWEEN 1 AND 5),
    updated_at TEXT NOT NULL,
    PRIMARY KEY (rater_id, item_id, question_id, target)
);
"""
    )


@migrations()
def m006_draft_values(db: Database) -> None:
    run_script(
        db,
        """
-- A verdict picked but not yet committed (a rubric criterion's met / not_met /
-- cannot_assess, an outcome label), kept with the draft like the typed rationale.
ALTER TABLE drafts ADD COLUMN value TEXT;
"""
    )


@migrations()
def m007_round_reviews(db: Database) -> None:
    run_script(
        db,
        """
-- A reviewer's place on an item of a review round, taken when their review of
-- it is complete: one counted answer to a label question, or an answer to every
-- criterion of an agent run or graded conversation. The round's limit of k
-- reviewers per item counts these rows and live reservations, so a review begun
-- and abandoned holds no place once its reservation expires, and an adjudicated
-- answer is never counted as a reviewer.
CREATE TABLE round_reviews (
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    item_id INTEGER NOT NULL REFERENCES items(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),
    completed_at TEXT NOT NULL,           -- when the review became complete
    PRIMARY KEY (round_id, item_id, rater_id)
);
CREATE TRIGGER round_reviews_no_update BEFORE UPDATE ON round_reviews
BEGIN SELECT RAISE(ABORT, 'round reviews are append-only'); END;
CREATE TRIGGER round_reviews_no_delete BEFORE DELETE ON round_reviews
BEGIN SELECT RAISE(ABORT, 'round reviews are append-only'); END;
-- Reviews already given in rounds. A label round: each reviewer's first counted
-- answer. A round over agent runs or graded conversations (question key
-- 'criteria@...'): a reviewer who has answered every criterion of the item.
INSERT INTO round_reviews (round_id, item_id, rater_id, completed_at)
SELECT a.round_id, a.item_id, a.rater_id, MIN(a.created_at)
FROM annotations a JOIN raters r ON r.id = a.rater_id
JOIN review_rounds rr ON rr.id = a.round_id JOIN items i ON i.id = a.item_id
WHERE a.target = '' AND a.status IN ('answered', 'cannot_assess')
  AND r.kind = 'human' AND a.source != 'adjudication'
  AND (rr.question_key NOT LIKE 'criteria@%' OR NOT EXISTS (
      SELECT 1 FROM questions q WHERE q.kind = 'criterion'
        AND q.item_id IN (i.id, COALESCE(i.parent_id, i.id))
        AND NOT EXISTS (SELECT 1 FROM annotations b WHERE b.item_id = i.id
            AND b.question_id = q.id AND b.rater_id = a.rater_id AND b.target = ''
            AND b.status IN ('answered', 'cannot_assess'))))
GROUP BY a.round_id, a.item_id, a.rater_id;
"""
    )


@migrations()
def m008_draft_labels_seen(db: Database) -> None:
    run_script(
        db,
        """
-- 1 when the machine and reference labels were on screen while the draft was
-- made (a 'suggest' round, or after a reveal): the answer it becomes is then
-- recorded as given after seeing them, whatever screen commits it.
ALTER TABLE drafts ADD COLUMN labels_seen INTEGER NOT NULL DEFAULT 0;
"""
    )


@migrations()
def m009_imports_filled_in(db: Database) -> None:
    run_script(
        db,
        """
-- Items this import filled in: placeholders an earlier file had only named
-- (a prefix first seen in a generations file), completed by this one. They are
-- not new items, and an import of the prefixes after the generations would
-- otherwise report none.
ALTER TABLE imports ADD COLUMN n_completed INTEGER NOT NULL DEFAULT 0;
"""
    )


@migrations()
def m010_draft_severity(db: Database) -> None:
    run_script(
        db,
        """
-- A step mark begun: the severity picked (1 negligible .. 5 critical) beside
-- the error type (value) and the note (rationale), until the mark is saved.
ALTER TABLE drafts ADD COLUMN severity INTEGER CHECK (severity IS NULL OR severity BETWEEN 1 AND 5);
"""
    )


@migrations()
def m011_labels_opened_index(db: Database) -> None:
    run_script(
        db,
        """
-- A reviewer's choices to see every rater's labels (review.reviewing.criteria.
-- labels_opened), read on every answer they commit: found without walking
-- the rest of their audit trail.
CREATE INDEX audit_log_labels_opened ON audit_log (actor, id) WHERE action = 'labels_opened';
"""
    )


@migrations()
def m012_labels_opened(db: Database) -> None:
    run_script(
        db,
        """
-- A reviewer's choice to see every rater's labels on a screen that shows them
-- all (Browse, Agreement), and what it covered: their later answers on those
-- items were not given blind (review.reviewing.blinding). Its own table, read
-- by the reviewer's id: it was found by matching their name in the audit log.
CREATE TABLE labels_opened (
    id INTEGER PRIMARY KEY,
    rater_id INTEGER NOT NULL REFERENCES raters(id),  -- the reviewer who chose to see them
    screen TEXT NOT NULL,                 -- where: browse, agreement, ...
    unanswered INTEGER NOT NULL,          -- items still waiting for their blind answer then
    newest_item INTEGER,                  -- what the choice covered: the newest item id then,
    newest_import INTEGER,                --   the newest import id, and
    newest_question INTEGER,              --   the newest question id (NULL: a choice recorded
                                          --   before choices named what they covered)
    opened_at TEXT NOT NULL               -- ISO 8601, UTC
);
CREATE INDEX labels_opened_by_rater ON labels_opened (rater_id, id);
CREATE TRIGGER labels_opened_no_update BEFORE UPDATE ON labels_opened
BEGIN SELECT RAISE(ABORT, 'choices to see the labels are append-only'); END;
CREATE TRIGGER labels_opened_no_delete BEFORE DELETE ON labels_opened
BEGIN SELECT RAISE(ABORT, 'choices to see the labels are append-only'); END;

-- The choices recorded so far, from the audit log (which keeps them too), in order.
INSERT INTO labels_opened (rater_id, screen, unanswered, newest_item, newest_import,
                           newest_question, opened_at)
SELECT r.id, coalesce(json_extract(a.new, '$.screen'), ''),
       coalesce(json_extract(a.new, '$.unanswered'), 0), json_extract(a.new, '$.newest_item'),
       json_extract(a.new, '$.newest_import'), json_extract(a.new, '$.newest_question'), a.at
FROM audit_log a JOIN raters r ON r.name = a.actor
WHERE a.action = 'labels_opened' ORDER BY a.id;
"""
    )


# -- m015: the record sealed ----------------------------------------------------------
# The constants below are part of migration m015: like the migration, never edit them
# (a later change is a new migration with its own constants). `store.verify` reads them.

APPEND_ONLY = ("annotations", "audit_log", "item_tags", "round_reviews", "flags",
               "codebook_versions")
"""The tables whose rows are never changed, removed or replaced (m015): answers, the
audit log, tags applied and removed, reviews completed in rounds, flags raised and
cleared, codebook versions. Each refuses UPDATE, DELETE, and an INSERT that would
take a row that exists (INSERT OR REPLACE, REPLACE, an upsert)."""

CHAINED = {
    "annotations": ("id", "item_id", "question_id", "rater_id", "target", "status", "value",
                    "rationale", "confidence", "phase", "codebook_version", "seconds_on_task",
                    "supersedes_id", "source", "import_id", "extra", "created_at", "round_id"),
    "audit_log": ("id", "at", "actor", "action", "entity", "entity_id", "old", "new"),
}
"""The tables whose rows are chained by a hash (store.chain), and the fields each
row's hash covers, in this order."""

_NATURAL_KEYS = {
    "round_reviews": ("round_id", "item_id", "rater_id"),
    "codebook_versions": ("codebook", "version"),
}
"""Unique keys besides the row id, which an INSERT OR REPLACE would also take over."""

_APPEND_ONLY_WORDS = {
    "annotations": "annotations are append-only: add a new row that supersedes this one",
    "audit_log": "the audit log is append-only",
    "item_tags": "item tags are append-only: add a row that adds or removes the tag",
    "round_reviews": "round reviews are append-only",
    "flags": "flags are append-only: add a row that raises or clears the flag",
    "codebook_versions": "codebook versions are append-only: an edit is a new version",
}


def chain_body(table: str, row: str = "") -> str:
    """The SQL expression of a row's chained fields as a JSON array (`row`: 'NEW.'
    inside a trigger, '' or an alias with its dot in a query)."""
    return "json_array(" + ", ".join(f"{row}{c}" for c in CHAINED[table]) + ")"


def _no_replace(table: str) -> str:
    taken = "rowid = NEW.rowid"
    if table in _NATURAL_KEYS:
        taken += " OR (" + " AND ".join(f"{c} = NEW.{c}" for c in _NATURAL_KEYS[table]) + ")"
    return (f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table}\n"
            f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {taken})\n"
            f"BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY_WORDS[table]}: an insert may not take"
            " the place of a row that exists (INSERT OR REPLACE)'); END;\n")


def _chained_no_update(table: str) -> str:
    # The one UPDATE a chained row takes: its own chain trigger writing its hash,
    # once, while the row is being inserted (chain still NULL), nothing else changed.
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in CHAINED[table])
    return (f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}\n"
            f"WHEN OLD.chain IS NOT NULL OR NEW.chain IS NULL OR {changed}\n"
            f"BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY_WORDS[table]}'); END;\n")


def _chain_trigger(table: str) -> str:
    return (f"CREATE TRIGGER {table}_chain AFTER INSERT ON {table}\n"
            "BEGIN\n"
            f"    UPDATE chain_heads SET last_id = NEW.id,\n"
            f"        hash = carelens_chain(hash, {chain_body(table, 'NEW.')})\n"
            f"    WHERE name = '{table}';\n"
            f"    UPDATE {table} SET chain = (SELECT hash FROM chain_heads WHERE name = '{table}')\n"
            "    WHERE id = NEW.id;\n"
            "END;\n")


@migrations()
def m015_record_sealed(db: Database) -> None:
    """Append-only against every statement, and chained so that tampering shows.

    Every append-only table (`APPEND_ONLY`) refuses an INSERT that would take an
    existing row (SQLite's REPLACE deletes the old row without firing its DELETE
    triggers); flags and codebook versions, append-only by design, now also refuse
    UPDATE and DELETE. Answers and audit entries carry a hash chain (`store.chain`):
    the column `chain` is added and filled in for the rows already there, in id
    order; from now on a trigger writes it as each row is inserted, and `chain_heads`
    keeps each chain's last row and hash, so that a removed last row shows too.
    `carelens verify` (store.verify) checks all of it."""
    from store.chain import chain_hash, register_functions

    register_functions(db.conn)
    run_script(db, """
ALTER TABLE annotations ADD COLUMN chain TEXT;  -- sha256 of the previous answer's chain and this row's fields (store.chain); written on insert
ALTER TABLE audit_log ADD COLUMN chain TEXT;    -- sha256 of the previous entry's chain and this row's fields (store.chain); written on insert
DROP TRIGGER annotations_no_update;
DROP TRIGGER audit_log_no_update;
CREATE TABLE chain_heads (
    name TEXT PRIMARY KEY,                -- the chained table: annotations | audit_log
    last_id INTEGER,                      -- id of the last row chained; NULL while the table is empty
    hash TEXT                             -- that row's chain hash
);
""")
    for table in CHAINED:
        previous = last_id = None
        rows = db.conn.execute(
            f"SELECT id, {chain_body(table)} AS body FROM {table} ORDER BY id").fetchall()
        hashes = []
        for row in rows:
            previous = chain_hash(previous, row[1])
            last_id = row[0]
            hashes.append((previous, last_id))
        db.conn.executemany(f"UPDATE {table} SET chain = ? WHERE id = ?", hashes)
        db.conn.execute("INSERT INTO chain_heads (name, last_id, hash) VALUES (?, ?, ?)",
                        (table, last_id, previous))
    script = "".join(_chained_no_update(t) + _chain_trigger(t) for t in CHAINED)
    for table in ("flags", "codebook_versions"):
        words = _APPEND_ONLY_WORDS[table]
        script += (f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}\n"
                   f"BEGIN SELECT RAISE(ABORT, '{words}'); END;\n"
                   f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}\n"
                   f"BEGIN SELECT RAISE(ABORT, '{words}'); END;\n")
    script += "".join(_no_replace(t) for t in APPEND_ONLY)
    script += """
-- The heads move forward only, each to the row its chain trigger is writing.
CREATE TRIGGER chain_heads_no_insert BEFORE INSERT ON chain_heads
BEGIN SELECT RAISE(ABORT, 'the chain heads are kept by the chain triggers'); END;
CREATE TRIGGER chain_heads_no_delete BEFORE DELETE ON chain_heads
BEGIN SELECT RAISE(ABORT, 'the chain heads are kept by the chain triggers'); END;
CREATE TRIGGER chain_heads_forward_only BEFORE UPDATE ON chain_heads
WHEN NEW.name IS NOT OLD.name OR NEW.last_id <= OLD.last_id OR NOT CASE NEW.name
    WHEN 'annotations' THEN EXISTS (SELECT 1 FROM annotations WHERE id = NEW.last_id AND chain IS NULL)
    WHEN 'audit_log' THEN EXISTS (SELECT 1 FROM audit_log WHERE id = NEW.last_id AND chain IS NULL)
    ELSE 0 END
BEGIN SELECT RAISE(ABORT, 'the chain heads are kept by the chain triggers'); END;
"""
    run_script(db, script)


@migrations()
def m016_login_identity(db: Database) -> None:
    run_script(
        db,
        """
-- Server mode: a person is the pair (issuer, subject) of their OpenID Connect
-- login, never an e-mail (which may be unverified or change) nor a display
-- name. `login` (m003: e-mail or subject, lower-cased) is kept for accounts
-- made before: such an account is linked to its person at their first sign-in
-- whose verified e-mail is exactly that login (review.team.identity).
ALTER TABLE raters ADD COLUMN login_issuer TEXT;   -- server mode: the login provider (OIDC `iss`) that vouches for this person
ALTER TABLE raters ADD COLUMN login_subject TEXT;  -- server mode: the person's id at that provider (OIDC `sub`), never reassigned
ALTER TABLE raters ADD COLUMN login_email TEXT;    -- the e-mail the provider verified at the last sign-in (shown; matched against CARELENS_ADMINS); NULL if unverified
CREATE UNIQUE INDEX raters_login_identity ON raters (login_issuer, login_subject)
    WHERE login_subject IS NOT NULL;
"""
    )


@migrations()
def m017_labels_opened_no_replace(db: Database) -> None:
    """`labels_opened` (a reviewer's choices to see every rater's labels) is
    append-only too: no insert may take the place of a choice recorded. The
    table comes with another change to the schema; where it is not there yet,
    there is nothing to protect."""
    if db.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table'"
                       " AND name = 'labels_opened'").fetchone() is None:
        return
    run_script(db, """
CREATE TRIGGER labels_opened_no_replace BEFORE INSERT ON labels_opened
WHEN EXISTS (SELECT 1 FROM labels_opened WHERE rowid = NEW.rowid)
BEGIN SELECT RAISE(ABORT, 'choices to see the labels are append-only: an insert may not take the place of a row that exists (INSERT OR REPLACE)'); END;
""")


@migrations()
def m030_reveals(db: Database) -> None:
    run_script(
        db,
        """
-- Which machine and reference labels a reviewer was shown, and when: the first
-- time each label (an annotation) reached their screen. Anchoring measures a
-- changed answer against the label the reviewer saw (labels.compare.anchoring),
-- not against whatever label a machine gives the item later.
CREATE TABLE reveals (
    id INTEGER PRIMARY KEY,
    rater_id INTEGER NOT NULL REFERENCES raters(id),  -- the reviewer the label was shown to
    item_id INTEGER NOT NULL REFERENCES items(id),    -- the item they were reviewing
    annotation_id INTEGER NOT NULL REFERENCES annotations(id),  -- the label shown (its rater,
                                          -- value, item and question are the annotation's)
    shown_at TEXT NOT NULL,               -- ISO 8601, UTC: when it was first shown
    UNIQUE (rater_id, annotation_id)
);
CREATE INDEX reveals_by_item ON reveals (rater_id, item_id);
CREATE TRIGGER reveals_no_update BEFORE UPDATE ON reveals
BEGIN SELECT RAISE(ABORT, 'reveals are append-only'); END;
CREATE TRIGGER reveals_no_delete BEFORE DELETE ON reveals
BEGIN SELECT RAISE(ABORT, 'reveals are append-only'); END;
"""
    )


@migrations()
def m020_round_designs(db: Database) -> None:
    run_script(
        db,
        """
-- A review round as a sampling design (review.team.designs): how its items were
-- drawn, and every candidate item's chance of being drawn, so that estimates
-- from its answers can weight each item by the inverse of that chance.
-- {"kind": uniform | stratified | weighted, "stratify_by", "weight_by", "machine",
--  "frame": candidates, "drawn": items drawn, "seed", "method": in words};
-- NULL for a round created before designs were recorded (its labels have no design).
ALTER TABLE review_rounds ADD COLUMN design TEXT CHECK (design IS NULL OR json_valid(design));

CREATE TABLE round_frame (
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    item_id INTEGER NOT NULL REFERENCES items(id),  -- a candidate item: it matched the round's filter
    inclusion_probability REAL NOT NULL
        CHECK (inclusion_probability > 0 AND inclusion_probability <= 1),  -- its chance of being drawn
    stratum TEXT,                         -- the stratum it was drawn from ('all' when unstratified)
    score REAL,                           -- weighted design: how likely the machine is wrong on it, 0..1
    PRIMARY KEY (round_id, item_id)
);
CREATE TRIGGER round_frame_no_update BEFORE UPDATE ON round_frame
BEGIN SELECT RAISE(ABORT, 'a round''s frame is recorded once'); END;
CREATE TRIGGER round_frame_no_delete BEFORE DELETE ON round_frame
BEGIN SELECT RAISE(ABORT, 'a round''s frame is recorded once'); END;
"""
    )


@migrations()
def m025_round_members(db: Database) -> None:
    run_script(
        db,
        """
-- Who is in a review round, as its admin named them. Append-only: taking a
-- reviewer out is a new row with in_round = 0; the newest row for (round,
-- reviewer) is in force. A round in which nobody is named is open to every
-- reviewer; once anyone is named, only those named take places in it
-- (review.team.rounds enforces it where places are reserved and claimed).
CREATE TABLE round_members (
    id INTEGER PRIMARY KEY,
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    rater_id INTEGER NOT NULL REFERENCES raters(id),  -- the reviewer named or taken out
    in_round INTEGER NOT NULL CHECK (in_round IN (0, 1)),  -- 1 named in the round, 0 taken out
    named_by TEXT NOT NULL,               -- the admin who did it (rater name)
    created_at TEXT NOT NULL              -- ISO 8601, UTC
);
CREATE INDEX round_members_unit ON round_members (round_id, rater_id, id);
CREATE TRIGGER round_members_no_update BEFORE UPDATE ON round_members
BEGIN SELECT RAISE(ABORT, 'round members are append-only: add a row that names or removes'); END;
CREATE TRIGGER round_members_no_delete BEFORE DELETE ON round_members
BEGIN SELECT RAISE(ABORT, 'round members are append-only: add a row that removes the reviewer'); END;

-- The reviewers named in each round now: the newest row says in_round = 1.
CREATE VIEW current_round_members AS
SELECT m.* FROM round_members m
WHERE m.in_round = 1 AND m.id = (
    SELECT MAX(u.id) FROM round_members u WHERE u.round_id = m.round_id AND u.rater_id = m.rater_id
);
"""
    )


@migrations()
def m033_tag_list_and_study_settings(db: Database) -> None:
    run_script(
        db,
        """
-- The list of tags is kept like the record: rows are only added. A tag is
-- retired (no longer offered; where it was applied it stays) or offered again
-- by a new row in tag_changes.
CREATE TRIGGER tags_no_update BEFORE UPDATE ON tags
BEGIN SELECT RAISE(ABORT, 'tags are append-only: retire a tag with a row in tag_changes'); END;
CREATE TRIGGER tags_no_delete BEFORE DELETE ON tags
BEGIN SELECT RAISE(ABORT, 'tags are append-only: retire a tag with a row in tag_changes'); END;

CREATE TABLE tag_changes (
    id INTEGER PRIMARY KEY,
    tag_id INTEGER NOT NULL REFERENCES tags(id),
    retired INTEGER NOT NULL CHECK (retired IN (0, 1)),  -- 1 retired from the list, 0 offered again
    changed_by TEXT NOT NULL,             -- rater name
    note TEXT,                            -- why
    created_at TEXT NOT NULL              -- ISO 8601, UTC
);
CREATE INDEX tag_changes_tag ON tag_changes (tag_id, id);
CREATE TRIGGER tag_changes_no_update BEFORE UPDATE ON tag_changes
BEGIN SELECT RAISE(ABORT, 'tag changes are append-only: add a row'); END;
CREATE TRIGGER tag_changes_no_delete BEFORE DELETE ON tag_changes
BEGIN SELECT RAISE(ABORT, 'tag changes are append-only: add a row'); END;

-- What the study allows, set by an admin (e.g. reviewers_add_tags: whether
-- reviewers may add tags to the list). Append-only: the newest row of a key is
-- in force; a key never set has its default (review.team.study).
CREATE TABLE study_settings (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,                    -- the setting, e.g. 'reviewers_add_tags'
    value TEXT NOT NULL CHECK (json_valid(value)),  -- its value, as JSON
    set_by TEXT NOT NULL,                 -- the admin (rater name)
    set_at TEXT NOT NULL                  -- ISO 8601, UTC
);
CREATE INDEX study_settings_key ON study_settings (key, id);
CREATE TRIGGER study_settings_no_update BEFORE UPDATE ON study_settings
BEGIN SELECT RAISE(ABORT, 'study settings are append-only: add a row'); END;
CREATE TRIGGER study_settings_no_delete BEFORE DELETE ON study_settings
BEGIN SELECT RAISE(ABORT, 'study settings are append-only: add a row'); END;
"""
    )


APPEND_ONLY_LATER = ("labels_opened", "reveals", "round_frame")
"""Append-only tables that came after m015 (their own migrations refuse UPDATE and
DELETE); m017 and m018 make them refuse an INSERT that takes an existing row. Part
of m018: never edit."""


@migrations()
def m018_no_replace_reveals_and_frames(db: Database) -> None:
    """`reveals` (which labels a reviewer was shown) and `round_frame` (a round's
    candidates and their chances) are append-only: no insert takes the place of
    a row recorded, by its id or its unique key."""
    tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    script = ""
    if "reveals" in tables:
        script += """
CREATE TRIGGER reveals_no_replace BEFORE INSERT ON reveals
WHEN EXISTS (SELECT 1 FROM reveals WHERE rowid = NEW.rowid
             OR (rater_id = NEW.rater_id AND annotation_id = NEW.annotation_id))
BEGIN SELECT RAISE(ABORT, 'reveals are append-only: an insert may not take the place of a row that exists (INSERT OR REPLACE)'); END;
"""
    if "round_frame" in tables:
        script += """
CREATE TRIGGER round_frame_no_replace BEFORE INSERT ON round_frame
WHEN EXISTS (SELECT 1 FROM round_frame WHERE rowid = NEW.rowid
             OR (round_id = NEW.round_id AND item_id = NEW.item_id))
BEGIN SELECT RAISE(ABORT, 'a round''s frame is recorded once: an insert may not take the place of a row that exists (INSERT OR REPLACE)'); END;
"""
    if script:
        run_script(db, script)


APPEND_ONLY_M019 = ("round_members", "tags", "tag_changes", "study_settings")
"""Append-only tables of later changes (round members, the tag list and its
changes, study settings): m019 makes each refuse an INSERT that takes an existing
row (by its id; a tag also by its name, in any capitals). Part of m019: never edit."""


@migrations()
def m019_no_replace_members_tags_settings(db: Database) -> None:
    """Round members, tags, tag changes and study settings refuse UPDATE and DELETE
    (their own migrations); here they refuse INSERT OR REPLACE too."""
    tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    script = ""
    for table in APPEND_ONLY_M019:
        if table not in tables:
            continue
        taken = "rowid = NEW.rowid" + (" OR name = NEW.name" if table == "tags" else "")
        script += (f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table}\n"
                   f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {taken})\n"
                   f"BEGIN SELECT RAISE(ABORT, '{table.replace('_', ' ')} are append-only: an"
                   " insert may not take the place of a row that exists (INSERT OR REPLACE)');"
                   " END;\n")
    if script:
        run_script(db, script)


@migrations()
def m040_identity_sealed(db: Database) -> None:
    """Who a rater is and what an item says are part of the record: an answer names
    its rater and its item by id, so rewriting a rater's name or login, or an item's
    text, would rewrite every answer given to it. A rater's name, kind and login
    (`login`, `login_issuer`, `login_subject`: set once, the pair together) never
    change; a rater is never deleted nor replaced. An item is never changed, except
    a placeholder (`meta.stub`, named by a file before the file that defines it)
    being filled in, and never its id or uid; it is never deleted nor replaced by
    its id. (Role, profile and the verified e-mail change: they are audited.)"""
    run_script(db, """
CREATE TRIGGER raters_identity_fixed BEFORE UPDATE ON raters
WHEN NEW.id IS NOT OLD.id OR NEW.name IS NOT OLD.name OR NEW.kind IS NOT OLD.kind
  OR (OLD.login IS NOT NULL AND NEW.login IS NOT OLD.login)
  OR (OLD.login_issuer IS NOT NULL AND NEW.login_issuer IS NOT OLD.login_issuer)
  OR (OLD.login_subject IS NOT NULL AND NEW.login_subject IS NOT OLD.login_subject)
  OR ((NEW.login_issuer IS NULL) != (NEW.login_subject IS NULL))
BEGIN SELECT RAISE(ABORT, 'a rater''s name, kind and login are never changed: the answers name them'); END;
CREATE TRIGGER raters_no_delete BEFORE DELETE ON raters
BEGIN SELECT RAISE(ABORT, 'raters are never deleted: the answers name them'); END;
CREATE TRIGGER raters_no_replace BEFORE INSERT ON raters
WHEN EXISTS (SELECT 1 FROM raters WHERE rowid = NEW.rowid OR name = NEW.name
             OR (login_subject = NEW.login_subject AND login_issuer IS NEW.login_issuer))
BEGIN SELECT RAISE(ABORT, 'raters are never replaced: an insert may not take the place of a rater who exists (INSERT OR REPLACE)'); END;
CREATE TRIGGER items_identity_fixed BEFORE UPDATE ON items
WHEN NEW.id IS NOT OLD.id OR NEW.uid IS NOT OLD.uid
  OR NOT coalesce(json_extract(OLD.meta, '$.stub'), 0)
BEGIN SELECT RAISE(ABORT, 'an item is never changed once written (only a placeholder is filled in): the answers are to it as it was'); END;
CREATE TRIGGER items_no_delete BEFORE DELETE ON items
BEGIN SELECT RAISE(ABORT, 'items are never deleted: the answers are to them'); END;
CREATE TRIGGER items_no_replace BEFORE INSERT ON items
WHEN EXISTS (SELECT 1 FROM items WHERE rowid = NEW.rowid)
BEGIN SELECT RAISE(ABORT, 'items are never replaced: an insert may not take the place of an item that exists (INSERT OR REPLACE)'); END;
""")


# -- m041: more chains -----------------------------------------------------------------
# Part of migration m041: like the migration, never edit (a later change is a new one).

CHAINED_M041 = {
    "item_tags": ("id", "item_id", "target", "tag_id", "rater_id", "added", "note",
                  "created_at"),
    "flags": ("id", "item_id", "rater_id", "raised", "note", "created_at"),
    "reveals": ("id", "rater_id", "item_id", "annotation_id", "shown_at"),
    "labels_opened": ("id", "rater_id", "screen", "unanswered", "newest_item", "newest_import",
                      "newest_question", "opened_at"),
}
"""The append-only tables that carry judgements (tags applied and removed, flags
raised and cleared) or what a reviewer saw (labels shown, choices to see them all),
chained by m041 like answers and audit entries, and the fields each row's hash
covers, in this order."""

_M041_WORDS = {
    "item_tags": "item tags are append-only: add a row that adds or removes the tag",
    "flags": "flags are append-only: add a row that raises or clears the flag",
    "reveals": "reveals are append-only",
    "labels_opened": "choices to see the labels are append-only",
}


def chained_tables() -> dict[str, tuple[str, ...]]:
    """Every chained table (m015's and m041's) and its hashed fields."""
    return {**CHAINED, **CHAINED_M041}


def chained_body(table: str, row: str = "") -> str:
    """`chain_body` for any chained table (m015's or m041's)."""
    return "json_array(" + ", ".join(f"{row}{c}" for c in chained_tables()[table]) + ")"


@migrations()
def m041_more_chains(db: Database) -> None:
    """Tags applied, flags, reveals and choices to see the labels are chained by a
    hash like answers and audit entries (`store.chain`): a row removed or changed
    with the protections dropped shows in `carelens verify`. The rows already there
    are chained in id order; each table's `no_update` is replaced by one that lets
    only its chain trigger write the hash, once; the chain heads' guard knows them."""
    from store.chain import chain_hash, register_functions

    register_functions(db.conn)
    script = "DROP TRIGGER chain_heads_no_insert;\nDROP TRIGGER chain_heads_forward_only;\n"
    for table in CHAINED_M041:
        script += (f"ALTER TABLE {table} ADD COLUMN chain TEXT;  -- sha256 of the previous row's"
                   " chain and this row's fields (store.chain); written on insert\n"
                   f"DROP TRIGGER {table}_no_update;\n")
    run_script(db, script)
    for table in CHAINED_M041:
        previous = last_id = None
        hashes = []
        for row_id, body in db.conn.execute(
                f"SELECT id, {chained_body(table)} FROM {table} ORDER BY id").fetchall():
            previous, last_id = chain_hash(previous, body), row_id
            hashes.append((previous, row_id))
        db.conn.executemany(f"UPDATE {table} SET chain = ? WHERE id = ?", hashes)
        db.conn.execute("INSERT INTO chain_heads (name, last_id, hash) VALUES (?, ?, ?)",
                        (table, last_id, previous))
    script = ""
    for table, columns in CHAINED_M041.items():
        changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in columns)
        script += (f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}\n"
                   f"WHEN OLD.chain IS NOT NULL OR NEW.chain IS NULL OR {changed}\n"
                   f"BEGIN SELECT RAISE(ABORT, '{_M041_WORDS[table]}'); END;\n"
                   f"CREATE TRIGGER {table}_chain AFTER INSERT ON {table}\n"
                   "BEGIN\n"
                   "    UPDATE chain_heads SET last_id = NEW.id,\n"
                   f"        hash = carelens_chain(hash, {chained_body(table, 'NEW.')})\n"
                   f"    WHERE name = '{table}';\n"
                   f"    UPDATE {table} SET chain = (SELECT hash FROM chain_heads"
                   f" WHERE name = '{table}')\n"
                   "    WHERE id = NEW.id;\n"
                   "END;\n")
    cases = "".join(
        f"    WHEN '{t}' THEN EXISTS (SELECT 1 FROM {t} WHERE id = NEW.last_id AND chain IS NULL)\n"
        for t in chained_tables())
    script += f"""
CREATE TRIGGER chain_heads_no_insert BEFORE INSERT ON chain_heads
BEGIN SELECT RAISE(ABORT, 'the chain heads are kept by the chain triggers'); END;
CREATE TRIGGER chain_heads_forward_only BEFORE UPDATE ON chain_heads
WHEN NEW.name IS NOT OLD.name OR NEW.last_id <= OLD.last_id OR NOT CASE NEW.name
{cases}    ELSE 0 END
BEGIN SELECT RAISE(ABORT, 'the chain heads are kept by the chain triggers'); END;
"""
    run_script(db, script)


@migrations()
def m042_questions_sealed(db: Database) -> None:
    """What was asked is part of the record, like the item it was asked of: an
    answer names its question by id, so rewriting a rubric criterion's text or
    points would change what every answer to it means. A question is never
    changed, except a placeholder (`meta.stub`, named by a file before the file
    that defines it) being filled in, and never its id or key; it is never deleted
    nor replaced by its id. (A codebook's new wording is a new codebook version.)"""
    run_script(db, """
CREATE TRIGGER questions_identity_fixed BEFORE UPDATE ON questions
WHEN NEW.id IS NOT OLD.id OR NEW.key IS NOT OLD.key
  OR NOT coalesce(json_extract(OLD.meta, '$.stub'), 0)
BEGIN SELECT RAISE(ABORT, 'a question is never changed once written (only a placeholder is filled in): the answers are to it as it was'); END;
CREATE TRIGGER questions_no_delete BEFORE DELETE ON questions
BEGIN SELECT RAISE(ABORT, 'questions are never deleted: the answers are to them'); END;
CREATE TRIGGER questions_no_replace BEFORE INSERT ON questions
WHEN EXISTS (SELECT 1 FROM questions WHERE rowid = NEW.rowid)
BEGIN SELECT RAISE(ABORT, 'questions are never replaced: an insert may not take the place of a question that exists (INSERT OR REPLACE)'); END;
""")


@migrations()
def m043_protections_restored(db: Database) -> None:
    """An append-only table made after the migration that protects it had run on
    this database (m017, m018 and m019 protect only the tables there when they run)
    lacks a trigger that refuses UPDATE, DELETE or a replacement. Each such trigger
    is made here as a new database has it, and each is written in the audit log
    (`protection_restored`), so that one dropped by hand before this ran stays on
    record. Only a table sealed in part is looked at (one with none of the three
    is not append-only, or was stripped by hand: `carelens verify` names it). A
    database made new has them all: nothing is done."""
    from store.chain import register_functions
    from store.values import to_json, utcnow

    sealing = ("no_update", "no_delete", "no_replace")
    have = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    tables = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not any(0 < sum(f"{t}_{k}" in have for k in sealing) < 3 for t in tables):
        return  # every table sealed at all is sealed in full: nothing to look up
    register_functions(db.conn)
    fresh = sqlite3.connect(":memory:", isolation_level=None)
    register_functions(fresh)
    migrations.apply(Database(fresh), stop_before="m043_protections_restored")
    wanted = fresh.execute(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"
        " AND (name LIKE '%\\_no\\_update' ESCAPE '\\' OR name LIKE '%\\_no\\_delete' ESCAPE '\\'"
        " OR name LIKE '%\\_no\\_replace' ESCAPE '\\') ORDER BY name").fetchall()
    fresh.close()
    for name, table, sql in wanted:
        if table in tables and name not in have:
            db.conn.execute(sql)
            db.conn.execute(
                "INSERT INTO audit_log (at, actor, action, entity, entity_id, old, new)"
                " VALUES (?, 'system', 'protection_restored', ?, NULL, NULL, ?)",
                (utcnow(), table, to_json({"trigger": name, "migration": "m043"})))


@migrations()
def m060_round_redraws(db: Database) -> None:
    run_script(
        db,
        """
-- A lead's redraw of a round's places nobody can fill (an item every reviewer who
-- could take it had answered outside the round, say): the places leave that item
-- (it needs that many fewer reviews in the round) and go to an item drawn from
-- the round's candidates in its stratum, added at the end of the round. Append-only:
-- a round's need for an item is its answers_needed less the places redrawn from it.
CREATE TABLE round_redraws (
    id INTEGER PRIMARY KEY,
    round_id INTEGER NOT NULL REFERENCES review_rounds(id),
    item_id INTEGER NOT NULL REFERENCES items(id),      -- the item the places leave
    places INTEGER NOT NULL CHECK (places >= 1),
    replacement_id INTEGER REFERENCES items(id),       -- the item drawn instead (NULL: none left)
    reason TEXT NOT NULL,
    redrawn_by TEXT NOT NULL,
    redrawn_at TEXT NOT NULL
);
CREATE INDEX round_redraws_by_item ON round_redraws (round_id, item_id);
CREATE TRIGGER round_redraws_no_update BEFORE UPDATE ON round_redraws
BEGIN SELECT RAISE(ABORT, 'round redraws are append-only'); END;
CREATE TRIGGER round_redraws_no_delete BEFORE DELETE ON round_redraws
BEGIN SELECT RAISE(ABORT, 'round redraws are append-only'); END;
CREATE TRIGGER round_redraws_no_replace BEFORE INSERT ON round_redraws
WHEN EXISTS (SELECT 1 FROM round_redraws WHERE rowid = NEW.rowid)
BEGIN SELECT RAISE(ABORT, 'round redraws are append-only: an insert may not take the place of a row that exists (INSERT OR REPLACE)'); END;
"""
    )


# -- m070: runs ------------------------------------------------------------------------
# Part of migration m070: like the migration, never edit (a later change is a new one).

def m070_key(identity: dict) -> str:
    """A run's identity as one text, as m070 wrote it for the items already there. It
    must stay equal to `store.runs.run_key` (a test holds them equal), so that a file
    of a run imported before m070 joins that run."""
    import json

    fields = {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
              for k, v in identity.items()
              if v is not None and v != "" and not (k == "attempt" and v in (1, "1"))}
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _m070_identity(kind: str, model: str | None, meta: dict, payload_agent: str | None,
                   source: str | None) -> tuple[dict, dict]:
    """(identity, what else the row says of its run) of an item imported before runs
    existed, from what it stored: as the importers of m070's version name its run."""
    if kind == "response":
        return ({"model_requested": meta.get("model_requested") or model,
                 "provider": meta.get("provider"), "protocol": meta.get("protocol"),
                 "prompt_version": meta.get("prompt_version")}, {})
    if kind == "trajectory" and (meta.get("source") == "harbor" or "job" in meta):
        return ({"model_requested": model, "job": meta.get("job"),
                 "agent": meta.get("agent") or payload_agent}, {})
    if kind == "trajectory" and ("subset" in meta or "run" in meta):
        identity = {"model_requested": model, "subset": meta.get("subset"),
                    "run": meta.get("run")}
        if meta.get("run") is None:
            identity.update({k: meta.get(k) for k in ("patient_model", "max_turns",
                                                      "max_steps")})
        return identity, {k: meta[k] for k in ("patient_model", "judge_model", "task_dataset")
                          if meta.get(k) is not None}
    if kind == "graded_conversation" and meta.get("source") == "simple-evals results":
        return {"model_requested": model, "file": source}, {}
    return {"model_requested": model}, {}


@migrations()
def m070_runs(db: Database) -> None:
    """A run is a record of its own (ARCHITECTURE.md, "Words"; `store.runs`): one model,
    agent or grader run over a benchmark, with the model requested and served, its
    protocol and prompt version, the attempt and the file it came from. Every response,
    trajectory and completion (a graded conversation with a prompt above it) belongs to
    one run, `items.run_id`; a placeholder item (meta.stub) to none until it is filled
    in. Runs are sealed like items: never changed, deleted or replaced. The names a
    submitter gave a run (CARE-Bench's `model_alias`) are kept beside it, sealed too.

    Items imported before runs existed get the run their stored fields name, by the
    importers' keys (`m070_key`): a response by its model and its protocol, prompt
    version and provider; a KlinikeBench episode by its subset and run; a Harbor trial
    by its job and agent (an agent that wrote no trajectory is not named in what an
    earlier import kept); a simple-evals result by its file; anything else by its model.
    No item's uid changes. The items' identity trigger is made again as it was, after
    the one UPDATE that writes their run."""
    import json
    from pathlib import PurePosixPath

    from store.values import utcnow

    run_script(db, """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    dataset_id INTEGER NOT NULL REFERENCES datasets(id),  -- the dataset its items are in
    kind TEXT NOT NULL,                   -- the kind of its items: response | trajectory | graded_conversation
    key TEXT NOT NULL CHECK (json_valid(key)),  -- its identity within dataset and kind: the identifying fields as canonical JSON (store.runs.run_key)
    model_requested TEXT,                 -- the model asked for (CARE-Bench model_requested, KlinikeBench clinician_model, Harbor agent model, the model a simple-evals file is named after); NULL when the source names none
    model_actual TEXT,                    -- the model the provider said served it, where the source says so for the run (each item keeps its own in meta.model_actual)
    provider TEXT,                        -- who served it, as the source names them
    protocol TEXT,                        -- CARE-Bench protocol (prompted | unprompted), or NULL
    prompt_version TEXT,                  -- the prompt version the model was given, or NULL
    attempt INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),  -- which attempt of the same run (1 unless the source or the import says)
    source TEXT,                          -- the file (or folder) it was first imported from, as named on import
    import_id INTEGER REFERENCES imports(id),  -- that import
    meta TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(meta)),  -- what else the source says of it (patient model, judge model, agent version, ...)
    created_at TEXT NOT NULL,             -- ISO 8601, UTC
    UNIQUE (dataset_id, kind, key)
);
CREATE TABLE run_aliases (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    alias TEXT NOT NULL,                  -- a name the submitter gave the run (CARE-Bench model_alias)
    import_id INTEGER REFERENCES imports(id),  -- the import that named it so
    created_at TEXT NOT NULL,             -- ISO 8601, UTC
    UNIQUE (run_id, alias)
);
CREATE INDEX run_aliases_alias ON run_aliases (alias);
ALTER TABLE items ADD COLUMN run_id INTEGER REFERENCES runs(id);  -- the run a response, trajectory or completion belongs to (store.runs); NULL for prefixes, prompts, tasks and placeholders
CREATE INDEX items_run ON items (run_id, parent_id);
CREATE TRIGGER runs_no_update BEFORE UPDATE ON runs
BEGIN SELECT RAISE(ABORT, 'runs are sealed: a run is never changed (another run is a new row)'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
BEGIN SELECT RAISE(ABORT, 'runs are never deleted: their items name them'); END;
CREATE TRIGGER runs_no_replace BEFORE INSERT ON runs
WHEN EXISTS (SELECT 1 FROM runs WHERE rowid = NEW.rowid
             OR (dataset_id = NEW.dataset_id AND kind = NEW.kind AND key = NEW.key))
BEGIN SELECT RAISE(ABORT, 'runs are never replaced: an insert may not take the place of a run that exists (INSERT OR REPLACE)'); END;
CREATE TRIGGER run_aliases_no_update BEFORE UPDATE ON run_aliases
BEGIN SELECT RAISE(ABORT, 'run aliases are append-only'); END;
CREATE TRIGGER run_aliases_no_delete BEFORE DELETE ON run_aliases
BEGIN SELECT RAISE(ABORT, 'run aliases are append-only'); END;
CREATE TRIGGER run_aliases_no_replace BEFORE INSERT ON run_aliases
WHEN EXISTS (SELECT 1 FROM run_aliases WHERE rowid = NEW.rowid
             OR (run_id = NEW.run_id AND alias = NEW.alias))
BEGIN SELECT RAISE(ABORT, 'run aliases are append-only: an insert may not take the place of a row that exists (INSERT OR REPLACE)'); END;
""")
    rows = db.conn.execute(
        "SELECT i.id, i.dataset_id, i.kind, i.model, i.meta, json_extract(i.payload,"
        " '$.agent.name'), i.import_id, m.path FROM items i LEFT JOIN imports m"
        " ON m.id = i.import_id WHERE (i.kind IN ('response', 'trajectory')"
        " OR (i.kind = 'graded_conversation' AND i.parent_id IS NOT NULL))"
        " AND NOT coalesce(json_extract(i.meta, '$.stub'), 0) ORDER BY i.id").fetchall()
    if not rows:
        return
    now = utcnow()
    runs: dict[tuple, int] = {}
    assigned: list[tuple[int, int]] = []
    for item_id, dataset_id, kind, model, meta_text, agent, import_id, path in rows:
        meta = json.loads(meta_text or "{}")
        source = PurePosixPath(path).name if path else None
        identity, more = _m070_identity(kind, model, meta, agent, source)
        key = m070_key(identity)
        unit = (dataset_id, kind, key)
        if unit not in runs:
            runs[unit] = db.conn.execute(
                "INSERT INTO runs (dataset_id, kind, key, model_requested, model_actual,"
                " provider, protocol, prompt_version, attempt, source, import_id, meta,"
                " created_at) VALUES (?,?,?,?,?,?,?,?,1,?,?,?,?) RETURNING id",
                (dataset_id, kind, key, identity.get("model_requested"),
                 meta.get("model_actual"), identity.get("provider"), identity.get("protocol"),
                 identity.get("prompt_version"), path, import_id,
                 json.dumps({**more, "made_by": "m070"}, ensure_ascii=False), now)).fetchone()[0]
        assigned.append((runs[unit], item_id))
    trigger = db.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'"
                              " AND name = 'items_identity_fixed'").fetchone()
    if trigger is not None:
        db.conn.execute("DROP TRIGGER items_identity_fixed")
    db.conn.executemany("UPDATE items SET run_id = ? WHERE id = ?", assigned)
    if trigger is not None:
        db.conn.execute(trigger[0])
