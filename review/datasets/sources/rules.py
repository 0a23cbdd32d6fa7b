"""What an import may write: it adds answers; it puts no words in anyone's mouth.

Every import (`import_file`, any format) is checked row by row, inside its
transaction, so a refused row leaves the database exactly as it was:

- A rater the import brings in (one the database did not have when it began)
  comes with whatever the file says: its phases, and its history (a later row
  of the same rater, item and question is that rater's revision) - except a
  reference answer: a file that gives one thing two reference answers (a
  CARE-Bench prefix two gold labels, a CliniCARE task two expected verdicts) is
  refused, naming both lines (`OneReference`): which one is the reference
  cannot be told, and taking the last would change the other without a word.
- A rater who already exists gets new answers only. Replacing one of their
  answers in force (a value, a status or a rationale other than theirs) is
  refused unless the import is told `replace` (`carelens import --replace`;
  in server mode an admin's action); each answer so replaced is audited with
  its old and new value, under the import's actor.
- A person who already reviews here (who signs in, or has answered in
  carelens rather than by import) is never given an answer in a phase only
  carelens can know (blind, after the reveal, with suggestions): a file's
  answers in their name are `imported`.
- No file writes the settled answers (`adjudicated`) or a group's, nor brings
  them in: settled answers are made here, by adjudication (a study moves with
  its settled answers as a whole, by `carelens backup`). No file creates a
  person under a name the system uses (`review.team.reviewers.reserved_name`),
  and a file that names its own raters (`labels-long`) creates no rater under
  the name of a reference rater an importer makes (`carebench-gold`, ...). No
  file creates a person, nor (a labels file) any rater, whose name a screen would
  show like a rater's who exists (`review.team.reviewers.look_alike`).
"""

from __future__ import annotations

import sqlite3

from review.team.reviewers import (
    PEOPLE,
    REFERENCE_RATERS,
    ROLES,
    SETTLED_ANSWERS,
    LookAlikes,
    all_rater_names,
    reserved_name,
)
from store import Store
from store.records import AnnotationRecord, RaterRecord
from store.writer import InputError, WriteRules

NAMES_FROM_FILE = frozenset({"labels-long"})
"""Formats whose raters are named by the file, not by the importer (which names
its own reference raters: the CARE-Bench importer makes `carebench-gold`)."""


class OneReference:
    """The reference answer a file gives each of its items, once: the same key
    given again with the same value is a repeat, with another value a
    contradiction, refused in one line naming both lines, e.g.
    `full750.csv:7: task 'sc07-a1' again, with expected label 'YES'; line 3 gave it 'NO'`.
    Shared by every importer of a reference (gold) answer."""

    def __init__(self, what: str, value_name: str):
        self.what, self.value_name = what, value_name
        self.given: dict[str, tuple[int, object]] = {}

    def check(self, key: str, value: object, line: int, where: str) -> None:
        first = self.given.setdefault(key, (line, value))
        if first[1] != value:
            raise InputError(f"{where}: {self.what} {key!r} again, with {self.value_name}"
                             f" {value!r}; line {first[0]} gave it {first[1]!r}")


class ImportRules(WriteRules):
    """The rules above, for one import into `store` (its transaction on `conn`)."""

    def __init__(self, store: Store, conn: sqlite3.Connection, import_id: int, where: str,
                 actor: str, replace: bool = False, format_name: str = ""):
        self.store, self.conn, self.import_id = store, conn, import_id
        self.names_from_file = format_name in NAMES_FROM_FILE
        self.where, self.actor, self.replace = where, actor, replace
        self.first_new = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM raters").fetchone()[0]
        """Raters from this id on were created by this import."""
        self._raters: dict[int, tuple[str, bool, bool]] = {}
        """rater id -> (name, a person, reviews here), for raters that existed."""
        self.replaced = 0
        self._names: LookAlikes | None = None
        """Every rater's name, once a new rater's is checked against them."""

    def _at(self, line: int | None) -> str:
        return f"{self.where}:{line}: " if line is not None else f"{self.where}: "

    def new_rater(self, record: RaterRecord) -> None:
        name = " ".join(record.name.split())
        if name.casefold().startswith("group:"):
            raise InputError(f"{self._at(None)}rater {record.name!r}: a group is made by carelens"
                             " (agreement), never imported; leave those rows out")
        folded = name.casefold()
        if folded == SETTLED_ANSWERS:
            raise InputError(f"{self._at(None)}rater {record.name!r}: that is the name of the"
                             " settled answers, which are made here by adjudication and never"
                             " brought in by a file; leave those rows out (a whole study moves"
                             " with its settled answers by `carelens backup`)")
        if self.names_from_file:
            if folded in {n.casefold() for n in REFERENCE_RATERS}:
                raise InputError(f"{self._at(None)}rater {record.name!r}: that is the name of a"
                                 " reference rater its own importer makes; a file of labels"
                                 " cannot bring it in")
        person = record.kind == "human" and (record.role is None or record.role in ROLES)
        if person:
            reason = reserved_name(self.store, name)
            if reason is not None:
                raise InputError(f"{self._at(None)}rater {record.name!r}: {reason}; a file cannot"
                                 " bring in a person of that name")
        if person or self.names_from_file:
            if self._names is None:
                self._names = LookAlikes(all_rater_names(self.conn))
            twin = self._names.find(record.name)
            if twin is not None:
                raise InputError(f"{self._at(None)}rater {record.name!r}: a screen would show it"
                                 f" like the rater {twin!r} (capitals, spaces, invisible or"
                                 " look-alike characters); give that name exactly, or another")
        if self._names is not None:
            self._names.add(record.name)

    def _rater(self, rater_id: int) -> tuple[str, bool, bool]:
        known = self._raters.get(rater_id)
        if known is None:
            row = self.conn.execute(
                f"SELECT name, {PEOPLE} AS person, login_subject IS NOT NULL OR login IS NOT NULL"
                " OR EXISTS (SELECT 1 FROM annotations a WHERE a.rater_id = raters.id"
                " AND a.source != 'import') AS here FROM raters WHERE id = ?",
                (rater_id,)).fetchone()
            known = self._raters[rater_id] = (row["name"], bool(row["person"]),
                                              bool(row["person"]) and bool(row["here"]))
        return known

    def answer(self, record: AnnotationRecord, rater_id: int,
               in_force: sqlite3.Row | None) -> None:
        if rater_id >= self.first_new:
            return  # brought in by this file: its phases and history as the file gives them
        name, _, reviews_here = self._rater(rater_id)
        at = self._at(record.line)
        if name.casefold() == SETTLED_ANSWERS or name.casefold().startswith("group:"):
            raise InputError(f"{at}rater {name!r}: the settled answers are made by adjudication,"
                             " never imported")
        if reviews_here and record.phase != "imported":
            raise InputError(
                f"{at}{name!r} reviews here: a file cannot give their answer as {record.phase!r}"
                " (only answers given in carelens are blind or after the reveal); leave phase"
                " empty to import it as 'imported'")
        if in_force is None or in_force["import_id"] == self.import_id:
            return  # a new answer, or a revision of one this file gave
        if not self.replace:
            raise InputError(
                f"{at}would replace the answer in force of {name!r}"
                f" ({_shown(in_force['status'], in_force['value'])} ->"
                f" {_shown(record.status, record.value)}): an import adds answers; to replace answers of raters who"
                " exist, import with --replace (an admin's action), and each is audited")

    def written(self, record: AnnotationRecord, rater_id: int, annotation_id: int,
                in_force: sqlite3.Row | None) -> None:
        if rater_id >= self.first_new or in_force is None \
                or in_force["import_id"] == self.import_id:
            return
        self.replaced += 1
        self.store.audit(self.actor, "import_replace", "annotations", annotation_id,
                         {"annotation_id": in_force["id"], "status": in_force["status"],
                          "value": in_force["value"], "rationale": in_force["rationale"],
                          "phase": in_force["phase"]},
                         {"rater": self._rater(rater_id)[0], "item": record.item_uid,
                          "question": record.question_key, "target": record.target,
                          "status": record.status, "value": record.value,
                          "rationale": record.rationale, "phase": record.phase,
                          "import_id": self.import_id})


def _shown(status: str, value: str | None) -> str:
    """An answer in a few words: its value, or its status."""
    return repr(value) if status == "answered" else status.replace("_", " ")
