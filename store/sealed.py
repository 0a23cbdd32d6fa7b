"""What the record's key seals: the one list of sealed tables.

Every table here is covered by the record's keyed chain (`store.chain`), in one
of two ways:

- **chained** (append-only tables: answers, the audit log, tags applied, ...):
  each row, as it is inserted, takes the next position of the record (`seq`)
  and a hash (`chain`): HMAC-SHA256 under the record's key of the previous
  position's hash, its position, its table and its fields. A row removed,
  changed, reordered or slipped in shows, and nobody without the key can
  recompute the hashes after a change;
- **versioned** (tables whose rows change, audited: a rater's role, an item
  filled in, a round's design): each insert and each change appends a version
  (`row_versions`: the table, the row, a sha256 digest of its fields after the
  change and, for a change, of its fields before it), and the versions are
  themselves chained. A row changed, removed or added outside carelens no
  longer matches its last version, and a change made outside carelens before
  one made through it no longer matches the version before. The store seals
  the versions a transaction wrote just before it commits (`store.chain.
  seal_versions`: one statement for a whole import, not a trigger per row);
  a version left unsealed (written by a program without the key) shows.

Adding a table: one line in `SEALED` (its fields, in order, and the word for
one row), and a migration that calls `store.migrations.seal_tables(db, [name])`
after the table is made (a table made before m110 is sealed by m110 itself). A
field added to a sealed table is added to its line and sealed the same way
(`seal_tables` remakes the table's triggers and seals its rows again, audited).
`tests/test_tampering.py` checks that every column of every sealed table is
sealed, and every sealed table is on a new database.
"""

from __future__ import annotations

from dataclasses import dataclass

CHAINED = "chained"
VERSIONED = "versioned"


@dataclass(frozen=True)
class Sealed:
    kind: str
    """CHAINED (append-only, each row chained) or VERSIONED (each version chained)."""
    fields: tuple[str, ...]
    """The fields the hash or digest covers, in this order (`rowid` for a table
    without an `id`)."""
    word: str
    """One row, in words: 'answer', 'audit entry'."""
    refusal: str = ""
    """Chained tables: what the table's refusal of UPDATE says."""


def chained(word: str, refusal: str, *fields: str) -> Sealed:
    return Sealed(CHAINED, fields, word, refusal)


def versioned(word: str, *fields: str) -> Sealed:
    return Sealed(VERSIONED, fields, word)


SEALED: dict[str, Sealed] = {
    "annotations": chained(
        "answer", "annotations are append-only: add a new row that supersedes this one",
        "id", "item_id", "question_id", "rater_id", "target", "status", "value", "rationale",
        "confidence", "phase", "codebook_version", "seconds_on_task", "supersedes_id", "source",
        "import_id", "extra", "created_at", "round_id"),
    "audit_log": chained("audit entry", "the audit log is append-only",
                         "id", "at", "actor", "action", "entity", "entity_id", "old", "new"),
    "item_tags": chained(
        "tag row", "item tags are append-only: add a row that adds or removes the tag",
        "id", "item_id", "target", "tag_id", "rater_id", "added", "note", "created_at"),
    "flags": chained("flag row", "flags are append-only: add a row that raises or clears the flag",
                     "id", "item_id", "rater_id", "raised", "note", "created_at"),
    "reveals": chained("reveal", "reveals are append-only",
                       "id", "rater_id", "item_id", "annotation_id", "shown_at"),
    "labels_opened": chained(
        "choice to see the labels", "choices to see the labels are append-only",
        "id", "rater_id", "screen", "unanswered", "newest_item", "newest_import",
        "newest_question", "opened_at"),
    "round_reviews": chained("round review", "round reviews are append-only",
                             "rowid", "round_id", "item_id", "rater_id", "completed_at"),
    "codebook_versions": chained(
        "codebook version", "codebook versions are append-only: an edit is a new version",
        "id", "codebook", "version", "content", "note", "created_by", "created_at"),
    "round_frame": chained("round frame row", "a round's frame is recorded once",
                           "rowid", "round_id", "item_id", "inclusion_probability", "stratum",
                           "score"),
    "round_members": chained(
        "round member row", "round members are append-only: add a row that names or removes",
        "id", "round_id", "rater_id", "in_round", "named_by", "created_at"),
    "round_redraws": chained("round redraw", "round redraws are append-only",
                             "id", "round_id", "item_id", "places", "replacement_id", "reason",
                             "redrawn_by", "redrawn_at"),
    "tags": chained("tag", "tags are append-only: retire a tag with a row in tag_changes",
                    "id", "name", "description", "parent_id", "created_by", "created_at"),
    "tag_changes": chained("tag change", "tag changes are append-only: add a row",
                           "id", "tag_id", "retired", "changed_by", "note", "created_at"),
    "study_settings": chained("study setting", "study settings are append-only: add a row",
                              "id", "key", "value", "set_by", "set_at"),
    "runs": chained("run", "runs are sealed: a run is never changed (another run is a new row)",
                    "id", "dataset_id", "kind", "key", "model_requested", "model_actual",
                    "provider", "protocol", "prompt_version", "attempt", "source", "import_id",
                    "meta", "created_at"),
    "run_aliases": chained("run alias", "run aliases are append-only",
                           "id", "run_id", "alias", "import_id", "created_at"),
    "round_sequence": chained("active round draw", "a round's sequence is append-only",
                              "rowid", "round_id", "position", "item_id", "batch",
                              "draw_probability", "foreseen_variance", "error_chance",
                              "drawn_at"),
    "raters": versioned("rater", "id", "name", "kind", "role", "specialty", "seniority",
                        "provider", "model", "prompt_version", "meta", "created_at", "login",
                        "login_issuer", "login_subject", "login_email"),
    "items": versioned("item", "id", "uid", "dataset_id", "kind", "parent_id", "case_id",
                       "round_id", "split", "model", "failed", "payload", "meta", "import_id",
                       "created_at", "run_id"),
    "questions": versioned("question", "id", "key", "codebook", "kind", "text", "item_id",
                           "applies_to", "points", "meta"),
    "datasets": versioned("dataset", "id", "name", "kind", "created_at"),
    "imports": versioned("import", "id", "dataset_id", "path", "format", "sha256", "rater_id",
                         "n_rows", "n_items", "n_annotations", "actor", "imported_at",
                         "n_completed"),
    "review_rounds": versioned("round", "id", "name", "question_key", "item_filter",
                               "reviewers_per_item", "overlap_share", "stratify_by",
                               "match_specialty", "blinding", "reservation_minutes",
                               "adjudicate_distance", "created_by", "created_at", "design"),
    "round_items": versioned("round item", "rowid", "round_id", "item_id", "answers_needed",
                             "stratum", "position"),
    # The versions of the versioned tables: chained like any append-only table, by the
    # store as the transaction that wrote them commits.
    "row_versions": chained("row version", "row versions are append-only",
                            "id", "tbl", "row_id", "digest", "previous"),
}
"""Every sealed table: its kind, the fields sealed and the word for a row. Not
sealed, on purpose: drafts (work not yet given), reservations (a place held for
twenty minutes), saved views, the search index (made from sealed rows, rebuilt at
will), LLM calls and LLM runs (`llm_calls`, `llm_runs`: how machine labels were
obtained, updated while a run goes; the labels themselves are answers), server
sessions (`sessions`: state that ends, its events in the audit log), and the
record's head and key rows, which the chain itself checks."""


VERSIONS = "row_versions"
"""The table of versions: chained, but by `store.chain.seal_versions`, not a trigger."""


def chained_tables() -> list[str]:
    return [t for t, s in SEALED.items() if s.kind == CHAINED]


def versioned_tables() -> list[str]:
    return [t for t, s in SEALED.items() if s.kind == VERSIONED]


def body(table: str, row: str = "") -> str:
    """The SQL expression of a row's sealed fields as a JSON array (`row`: 'NEW.'
    inside a trigger, '' in a query)."""
    return "json_array(" + ", ".join(f"{row}{c}" for c in SEALED[table].fields) + ")"
