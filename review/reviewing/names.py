"""What things are called on screen: the words a clinician reads.

Every review screen names items, raters and rounds through these functions,
so one thing has one name everywhere:

- an item by what it is, never by its id: "Conversation 12, after the
  patient's 2nd message", "Model B's reply", "Case 3, agent run A",
  "Conversation 4, Model A's completion"; the ids stay on a details line
  (`ItemName.details`) and in the address, for researchers;
- a machine or reference rater by its role (`codebook.vocabulary.rater_words`):
  "The mapper, prompt v1", "The judge (judge-1)", "The reference label",
  "The verifier", "The settled answer";
- a study's review round as "Study round: Pilot", and a conversation's
  rounds as the patient's turns: "turn 2", "the patient's 2nd message".

Numbers are places, not ids: a conversation's number is its place among the
study's conversations (every dataset's, in the order they were imported: two
datasets never both have a "Conversation 1"), a graded conversation's among
the study's graded conversations, a case's among the study's agent-run cases,
a model's letter
its place among the dataset's models (in alphabetical order), so "Model B"
is the same model on every item of a dataset. Nothing here is Markdown: a
page escapes what it shows.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass

from codebook.vocabulary import first_up, rater_words
from review.text import plural as plural  # a count in words (one place: review.text)
from store import Store
from store.runs import run_label

FREE_REVIEW = "Free review (no study round)"
"""The round picker's choice of no study round."""


def study_round(name: str) -> str:
    """A study's review round, never confused with a conversation's turn."""
    return f"Study round: {name}"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st ..."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def turn(n: int) -> str:
    """A patient's turn in a conversation (CARE-Bench calls it a round)."""
    return f"turn {n}"


def letter(index: int) -> str:
    """A, B, ... Z, then 27, 28 ...: a model's pseudonym from its place (0-based)."""
    return string.ascii_uppercase[index] if 0 <= index < 26 else str(index + 1)


@dataclass(frozen=True)
class ItemName:
    """An item in words: what a clinician reads above it."""

    title: str
    """The item whole: "Conversation 12, after the patient's 2nd message";
    "Model B's reply to conversation 12, after the patient's 2nd message"."""
    subject: str
    """What is judged, as a heading: "The patient's 2nd message", "Model B's
    reply", "Agent run A", "Model A's completion"."""
    place: str
    """Where it belongs: "Conversation 12, after the patient's 2nd message",
    "Case 3", "Conversation 4"."""
    details: str
    """For researchers: the item's id, the model, the case and the dataset."""
    model_letter: str | None = None
    """The model's letter ("B"), for items one model made."""
    uid: str = ""
    """The item's id, as its dataset names it (it may name the model: `..::aster-7b`)."""
    opaque: str = ""
    """An id for the address and details that names no model (`opaque_uid`)."""
    blind_details: str = ""
    """`details` without the item's id and model: for a reviewer kept blind to
    which model made it (`shown_ids`)."""

    def shown_ids(self, model_hidden: bool) -> tuple[str, str]:
        """(the id for the address, the details line): the item's own, or, where
        the reviewer is kept blind to the model (`Sight.model_hidden`) and its id
        would name it, the opaque id and the details without id and model."""
        if model_hidden and self.model_letter is not None:
            return self.opaque, self.blind_details
        return self.uid, self.details


OPAQUE = "item-"
"""How an opaque id starts: `item-1234`, the item's number in this database."""


def opaque_uid(item_id: int) -> str:
    """An id for an item that says nothing of it (not its model): for the
    address and the details line of a reviewer blind to the model."""
    return f"{OPAQUE}{item_id}"


def item_in_address(store: Store, text: str, kind: str | None = None) -> int | None:
    """The item an address names: by its id (`uid`), or by an opaque id (`opaque_uid`)."""
    found = store.scalar("SELECT id FROM items WHERE uid = ?" + (" AND kind = ?" if kind else ""),
                         (text, kind) if kind else (text,))
    if found is None and text.startswith(OPAQUE) and text[len(OPAQUE):].isdigit():
        found = store.scalar("SELECT id FROM items WHERE id = ?" + (" AND kind = ?" if kind else ""),
                             (int(text[len(OPAQUE):]), kind) if kind else
                             (int(text[len(OPAQUE):]),))
    return found


_ITEM = ("SELECT i.id, i.uid, i.kind, i.dataset_id, d.name AS dataset, i.case_id, i.round_id,"
         " i.model, i.run_id, i.split, i.parent_id, i.meta FROM items i JOIN datasets d"
         " ON d.id = i.dataset_id WHERE i.id = ?")
CASE_KIND = {"prefix": "prefix", "response": "prefix", "trajectory": "trajectory",
             "graded_conversation": "graded_conversation"}
"""Whose order numbers an item's conversation: a reply belongs to its prefix's."""
NUMBERED_TOGETHER = {"prefix": ("prefix",), "trajectory": ("trajectory",),
                     "graded_conversation": ("graded_conversation",)}
"""The kinds numbered in one sequence, each under its own word: "Conversation N"
(CARE-Bench's), "Graded conversation N" (HealthBench's and other rubric-graded
ones, so that the first of them is number 1 on its own screen, not the 41st
after CARE-Bench's), "Case N" (agent runs)."""


def conversation_number(store: Store, dataset_id: int, kind: str, case_id: str | None) -> int | None:
    """A conversation's (case's, task's) place among the study's, over every
    dataset, in the order they came in (1-based); None without a case. A case
    is one dataset's: two datasets' "case 1" are two conversations."""
    if case_id is None:
        return None
    kind = CASE_KIND.get(kind, kind)
    return _numbers(store, NUMBERED_TOGETHER.get(kind, (kind,))).get((dataset_id, case_id))


_NUMBERS: dict[tuple, dict[tuple[int, str], int]] = {}
"""The numbering of a database's conversations, by (path, kinds, what the items
table holds): read once, in one query, until an import changes the items."""


def _numbers(store: Store, kinds: tuple[str, ...]) -> dict[tuple[int, str], int]:
    """{(dataset id, case id): its place}, for the cases of these kinds."""
    held = store.query_one("SELECT MAX(id) AS last, COUNT(*) AS n FROM items")
    key = (store.path, kinds, held["last"], held["n"])
    numbers = _NUMBERS.get(key)
    if numbers is None:
        marks = ", ".join("?" for _ in kinds)
        rows = store.query(
            f"SELECT dataset_id, case_id FROM items WHERE kind IN ({marks})"
            " AND case_id IS NOT NULL GROUP BY dataset_id, case_id ORDER BY MIN(id)", kinds)
        numbers = {(r["dataset_id"], r["case_id"]): n for n, r in enumerate(rows, start=1)}
        if store.path != ":memory:":  # an in-memory database has no name to keep it under
            for old in [k for k in _NUMBERS if k[:2] == key[:2]]:
                _NUMBERS.pop(old, None)
            _NUMBERS[key] = numbers
    return numbers


def model_letter(store: Store, dataset_id: int, kind: str, model: str | None,
                 run_id: int | None = None) -> str | None:
    """The run's letter among the runs of the dataset's items of this kind, in the
    order of their models (then of the runs of one model): two runs of one model
    (two protocols) are two letters, never one letter for two different replies."""
    if not model:
        return None
    run = -1 if run_id is None else int(run_id)
    before = store.scalar(
        "SELECT COUNT(*) FROM (SELECT DISTINCT model, coalesce(run_id, -1) AS run FROM items"
        " WHERE dataset_id = ? AND kind = ? AND model IS NOT NULL"
        " AND (model < ? OR (model = ? AND coalesce(run_id, -1) < ?)))",
        (dataset_id, kind, model, model, run))
    return letter(int(before or 0))


def item_name(store: Store, item_id: int) -> ItemName | None:
    """The item in words (see the module's docstring); None if there is no such item."""
    row = store.query_one(_ITEM, (item_id,))
    if row is None:
        return None
    meta = json.loads(row["meta"] or "{}")
    kind = row["kind"]
    # A case id that identifies a patient is not shown, even to researchers.
    case_id = None if meta.get("identifying") else row["case_id"]
    number = conversation_number(store, row["dataset_id"], kind, row["case_id"])
    mark = model_letter(store, row["dataset_id"], kind, row["model"], row["run_id"])
    facts = [f"id {row['uid']}"]
    if row["model"]:
        # the run's label: its model, and beside another run of it, what tells them apart
        facts.append(f"model {run_label(store.conn, row['run_id']) or row['model']}")
    if case_id and case_id not in row["uid"]:
        facts.append(f"case {case_id}")
    facts += [x for x in (row["split"], row["dataset"]) if x]
    details = " · ".join(facts)
    ids = {"uid": row["uid"], "opaque": opaque_uid(row["id"]),
           "blind_details": " · ".join([f"id {opaque_uid(row['id'])}"] + [
               x for x in (row["split"], row["dataset"]) if x])}
    if kind in ("prefix", "response"):
        conversation = f"Conversation {number}" if number else "A conversation"
        said = row["round_id"] or _turns(store, row)
        place = f"{conversation}, after the patient's {ordinal(said)} message" if said \
            else conversation
        if kind == "prefix":
            subject = f"The patient's {ordinal(said)} message" if said else "The patient's message"
            return ItemName(place, subject, place, details, **ids)
        subject = f"Model {mark}'s reply" if mark else "The reply"
        return ItemName(f"{subject} to {place[0].lower()}{place[1:]}", subject, place, details,
                        mark, **ids)
    if kind == "trajectory":
        place = f"Case {number}" if number else "A case"
        subject = f"Agent run {mark}" if mark else "The agent run"
        return ItemName(f"{place}, {subject[0].lower()}{subject[1:]}", subject, place, details,
                        mark, **ids)
    if kind == "graded_conversation":
        place = f"Graded conversation {number}" if number else "A graded conversation"
        if row["parent_id"] is None:
            subject = "Its ideal completion" if meta.get("ideal_completion") else "No completion"
        else:
            subject = f"Model {mark}'s completion" if mark else "The completion"
        return ItemName(f"{place}, {subject[0].lower()}{subject[1:]}", subject, place, details,
                        mark, **ids)
    if kind == "conversation":
        # A study's own chat: numbered among the study's chats, in the order they came.
        number = store.scalar("SELECT COUNT(*) FROM items WHERE kind = 'conversation'"
                              " AND id <= ?", (row["id"],))
        place = f"Chat {number}"
        subject = f"Model {mark}'s chat" if mark else "The chat"
        return ItemName(f"{place}" + (f", model {mark}" if mark else ""), subject, place,
                        details, mark, **ids)
    return ItemName(row["uid"], row["uid"], row["uid"], details, **ids)


def _turns(store: Store, row) -> int:
    """How many patient turns a prefix holds (for an item that gives no round number)."""
    item = row["parent_id"] if row["kind"] == "response" else row["id"]
    payload = store.scalar("SELECT payload FROM items WHERE id = ?", (item,))
    try:
        return len(json.loads(payload or "{}").get("turns") or [])
    except ValueError:
        return 0


def rater_name(store: Store, name: str) -> str:
    """A rater in words, as a line starts (`codebook.vocabulary.rater_words`):
    "The mapper, prompt v1", "The judge (judge-1)", "The reference label",
    "The verifier", "The settled answer", a person by their name."""
    row = store.query_one(
        "SELECT kind, role, model, prompt_version FROM raters WHERE name = ?", (name,))
    said = rater_words(name, None, None) if row is None else rater_words(
        name, row["kind"], row["role"], row["model"], row["prompt_version"])
    return said if said == name else first_up(said)  # a person's name as they write it
