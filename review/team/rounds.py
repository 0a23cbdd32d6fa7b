"""Review rounds: which reviewer answers which item, with the overlap
agreement needs, enforced by the database under concurrent reviewers.

An admin creates a round from a filter; items are drawn stratified by gold
label or category and each needs `k` answers (or `k` for an overlap share and
1 for the rest). A reviewer takes the next item with `reserve_next_item`:
inside one BEGIN IMMEDIATE transaction it finds an item whose answers plus
others' live reservations are below its need, and reserves a slot. A
reservation expires when the reviewer walks away, and the slot returns to
the pool. `claim_answer_slot` runs inside the answer's own transaction and
refuses an answer that would exceed the item's need, so no item ever gets
more than `k` answers in a round.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from codebook import BLINDING_MODES, RUBRIC_KINDS, STEP_ERROR_QUESTION
from review.team.access import NotAllowed, may, require_role, role_may
from review.team.active import first_batch, keep_drawing, record_batch
from review.team.designs import (
    MORE_STRATA,
    DesignError,
    Draw,
    record_draw,
    sampling_design,
    stratum_keys,
)
from review.team.reviewers import PEOPLE, Reviewer
from review.text import plural
from store import Store, from_json, to_json, utcnow
from store.names import name_problem

STRATA = ("none", "gold", "category", *MORE_STRATA)
CRITERIA_PREFIX = "criteria@"
"""A round's question key `criteria@<item kind>`: a review of every criterion of
each item (an agent run's gates and must-ask topics, a graded conversation's
rubric). Any committed verdict on the item fills the reviewer's slot."""


def criteria_round_key(kind: str) -> str:
    return f"{CRITERIA_PREFIX}{kind}"


def is_rubric_round(question_key: str) -> bool:
    return question_key.startswith(CRITERIA_PREFIX)


class RoundError(ValueError):
    """A round action that is not allowed; the message says why."""


@dataclass
class RoundSpec:
    name: str
    question_key: str
    reviewers_per_item: int = 2
    overlap_share: float | None = None
    """Share of items that get `reviewers_per_item` answers; the rest get one."""
    dataset: str | None = None
    split: str | None = None
    model: str | None = None
    stratify_by: str = "none"
    match_specialty: bool = False
    blinding: str = "reveal_after_commit"
    reservation_minutes: int = 20
    adjudicate_distance: int = 1
    limit: int | None = None
    """Draw at most this many items (stratified), or all that match."""
    seed: int = 0
    # The round as a sampling design (review.team.designs):
    design: str = "uniform"
    """uniform (within strata, in proportion) | weighted (toward likely machine errors)"""
    weight_by: str | None = None
    """A weighted round: machine_disagreement | machine_confidence."""
    machine: str | None = None
    """The machine rater whose label strata or confidence use (default: the busiest)."""
    target_halfwidth: float | None = None
    """An active round: the 95% half-width the lead aims for (the anytime interval says
    when it is reached)."""


@dataclass
class RoundInfo:
    id: int
    name: str
    question_key: str
    kind: str
    reviewers_per_item: int
    overlap_share: float | None
    blinding: str
    reservation_minutes: int
    adjudicate_distance: int
    items: int
    answers_needed: int
    answers_given: int
    created_by: str
    created_at: str
    question_text: str | None = None
    """The round's label question in words (None for a criteria round, or a question gone)."""


def label_questions(store: Store) -> dict[str, str]:
    """{key: text} of the label questions asked of every item of a kind (not of
    agent runs or graded conversations, whose questions come with their
    criteria): what a label round, or adjudication outside rounds, is over."""
    return {r["key"]: r["text"] for r in store.query(
        "SELECT key, text FROM questions WHERE item_id IS NULL AND applies_to IS NOT NULL"
        f" AND applies_to NOT IN ({', '.join('?' * len(RUBRIC_KINDS))}) ORDER BY id",
        RUBRIC_KINDS)}


NEEDED = ("(ri.answers_needed - COALESCE((SELECT SUM(d.places) FROM round_redraws d"
          " WHERE d.round_id = ri.round_id AND d.item_id = ri.item_id), 0))")
"""SQL over `round_items ri`: the reviews the round needs of the item now, its
`answers_needed` less the places a lead redrew from it (`redraw_missing_places`).
Every count of a round's places reads this."""


def _later(minutes: float, now: datetime | None = None) -> str:
    return ((now or datetime.now(UTC)) + timedelta(minutes=minutes)).isoformat(timespec="microseconds")


def create_round(store: Store, spec: RoundSpec, admin: Reviewer) -> int:
    """Create a round and draw its items. Only an admin may."""
    if not may(admin, "manage_rounds"):
        raise RoundError("only an admin can create a review round")
    if not spec.name.strip():
        raise RoundError("a round needs a name")
    if (problem := name_problem(spec.name.strip())) is not None:
        raise RoundError(f"round {spec.name.strip()!r}: {problem}")
    twin = next((r.name for r in list_rounds(store)
                 if r.name.casefold() == spec.name.strip().casefold()), None)
    if twin is not None:
        raise RoundError(f"a round named {twin!r} exists already (the names differ only in"
                         " capitals): choose another name")
    if spec.reviewers_per_item < 1:
        raise RoundError("each item needs at least one reviewer")
    if spec.overlap_share is not None and not 0 <= spec.overlap_share <= 1:
        raise RoundError("the overlap share is a fraction between 0 and 1")
    if spec.stratify_by not in STRATA:
        raise RoundError(f"stratify by one of {', '.join(STRATA)}")
    if spec.blinding not in BLINDING_MODES:
        raise RoundError(f"blinding is one of {', '.join(BLINDING_MODES)}")
    if is_rubric_round(spec.question_key):
        item_kind = spec.question_key[len(CRITERIA_PREFIX):]
        if item_kind not in RUBRIC_KINDS:
            raise RoundError(f"a criteria round is over one of {', '.join(RUBRIC_KINDS)}")
        if spec.stratify_by == "gold":
            raise RoundError("agent runs and graded conversations have no gold label: "
                             "stratify by category, or not at all")
    else:
        question = store.query_one(
            "SELECT id, applies_to, codebook FROM questions WHERE key = ?", (spec.question_key,))
        if question is None or not question["applies_to"]:
            raise RoundError(f"no question {spec.question_key!r} asked of a kind of item")
        if spec.question_key == STEP_ERROR_QUESTION:
            raise RoundError("step errors are marked step by step, so no mark fills a reviewer's "
                             f"place: make the round on the runs' criteria ({criteria_round_key('trajectory')})")
        item_kind = question["applies_to"]
        if item_kind in RUBRIC_KINDS:
            raise RoundError(
                "this question is asked with the criteria of each agent run or conversation "
                f"(and only of some of them): make the round on {criteria_round_key(item_kind)}")
    clauses, params = ["i.kind = ?"], [item_kind]
    if item_kind == "graded_conversation":  # only what has a completion can be graded
        clauses.append("json_extract(i.payload, '$.completion') IS NOT NULL")
    for column, value in (("split", spec.split), ("model", spec.model)):
        if value:
            clauses.append(f"i.{column} = ?")
            params.append(value)
    if spec.dataset:
        clauses.append("i.dataset_id = (SELECT id FROM datasets WHERE name = ?)")
        params.append(spec.dataset)
    rows = store.query(
        f"""SELECT i.id, COALESCE(json_extract(i.meta, '$.specialty_or_domain'),
                   json_extract(i.meta, '$.theme'),
                   (SELECT json_extract(p.meta, '$.theme') FROM items p WHERE p.id = i.parent_id))
                   AS category,
                   (SELECT c.value FROM current_annotations c JOIN raters r ON r.id = c.rater_id
                    WHERE c.item_id = COALESCE(i.parent_id, i.id) AND r.kind = 'reference'
                      AND c.target = '' AND c.status = 'answered'
                    ORDER BY r.role = 'gold' DESC, c.id LIMIT 1) AS gold
            FROM items i WHERE {' AND '.join(clauses)} AND i.failed = 0 ORDER BY i.id""",
        params,
    )
    if not rows:
        raise RoundError("no items match this filter")
    rng = random.Random(spec.seed)
    try:
        keys = stratum_keys(store, spec.stratify_by, spec.question_key, rows, spec.machine)
    except DesignError as exc:
        raise RoundError(str(exc)) from None
    strata: dict[str, list[int]] = {}
    for r in rows:
        strata.setdefault(keys[r["id"]], []).append(r["id"])
    for ids in strata.values():
        rng.shuffle(ids)
    if spec.limit:
        # Proportional allocation that adds up to exactly the limit (or every item).
        sizes = _apportion(min(spec.limit, len(rows)), {k: len(v) for k, v in strata.items()})
        for key, ids in strata.items():
            strata[key] = ids[: sizes[key]]
    # Interleave strata so that a half-done round is balanced across them.
    order: list[tuple[int, str]] = []
    queues = {k: list(v) for k, v in sorted(strata.items())}
    while any(queues.values()):
        for key, ids in queues.items():
            if ids:
                order.append((ids.pop(0), key))
    if spec.limit:
        order = order[: spec.limit]
    batch = None
    try:  # the round as a sampling design: every candidate's inclusion probability
        if spec.design == "active":
            batch, record, chances = first_batch(store, spec, [r["id"] for r in rows])
            draw = Draw([(item, "all") for item in batch.items],
                        {item: p for item, (p, _) in chances.items()},
                        {item: "all" for item in chances}, record,
                        {item: q for item, (_, q) in chances.items()})
        else:
            draw = sampling_design(store, spec, keys, order)
    except DesignError as exc:
        raise RoundError(str(exc)) from None
    order = draw.order
    k = spec.reviewers_per_item
    overlap: set[int] = set()
    if spec.overlap_share is not None:
        # The share of the whole round, split across strata (rounding each stratum alone
        # lost it: half of four one-item strata was none).
        chosen = {key: [i for i, s in order if s == key] for key in strata}
        wanted = _apportion(round(len(order) * spec.overlap_share),
                            {k: len(v) for k, v in chosen.items()})
        for key, ids in chosen.items():
            overlap.update(ids[: wanted[key]])
    with store.transaction() as conn:
        try:
            cur = conn.execute(
                "INSERT INTO review_rounds (name, question_key, item_filter, reviewers_per_item,"
                " overlap_share, stratify_by, match_specialty, blinding, reservation_minutes,"
                " adjudicate_distance, created_by, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (spec.name.strip(), spec.question_key,
                 to_json({"kind": item_kind, "dataset": spec.dataset,
                          "split": spec.split, "model": spec.model}),
                 k, spec.overlap_share, spec.stratify_by, int(spec.match_specialty),
                 spec.blinding, spec.reservation_minutes, spec.adjudicate_distance,
                 admin.name, utcnow()),
            )
        except sqlite3.IntegrityError:
            raise RoundError(f"a round named {spec.name.strip()!r} exists already") from None
        round_id = cur.lastrowid
        conn.executemany(
            "INSERT INTO round_items (round_id, item_id, answers_needed, stratum, position)"
            " VALUES (?,?,?,?,?)",
            [(round_id, item_id,
              k if spec.overlap_share is None or item_id in overlap else 1, stratum, pos)
             for pos, (item_id, stratum) in enumerate(order)],
        )
        record_draw(conn, round_id, draw)
        if batch is not None:
            record_batch(conn, round_id, batch, 0, 0)
        store.audit(admin.name, "create_round", "review_rounds", round_id, None,
                    {**asdict(spec), "items": len(order)})
    return round_id


def _apportion(total: int, sizes: dict[str, int]) -> dict[str, int]:
    """`total` split across groups in proportion to their sizes (largest
    remainder), never more than a group holds; sums to `total` (or to all
    there is). Each group gets one first while the total allows, so that no
    stratum is left out of a small round."""
    total = min(total, sum(sizes.values()))
    out = {k: 0 for k in sizes}
    if total <= 0:
        return out
    keys = sorted(sizes)
    if total >= len([k for k in keys if sizes[k]]):
        for k in keys:
            out[k] = 1 if sizes[k] else 0
    left = total - sum(out.values())
    whole = sum(sizes.values())
    shares = {k: left * sizes[k] / whole for k in keys}
    for k in keys:
        out[k] += min(int(shares[k]), sizes[k] - out[k])
    rest = total - sum(out.values())
    for k in sorted(keys, key=lambda k: (-(shares[k] - int(shares[k])), k)):
        if rest <= 0:
            break
        room = sizes[k] - out[k]
        if room > 0:
            out[k] += 1
            rest -= 1
    while rest > 0:  # rounding left room only in some groups
        for k in keys:
            if rest and out[k] < sizes[k]:
                out[k] += 1
                rest -= 1
    return out


def list_rounds(store: Store) -> list[RoundInfo]:
    rows = store.query(f"""
        SELECT r.*, json_extract(r.item_filter, '$.kind') AS kind,
               (SELECT COUNT(*) FROM round_items ri WHERE ri.round_id = r.id) AS items,
               (SELECT COALESCE(SUM({NEEDED}), 0) FROM round_items ri WHERE ri.round_id = r.id) AS needed,
               (SELECT COUNT(*) FROM round_reviews rr WHERE rr.round_id = r.id) AS given,
               (SELECT q.text FROM questions q WHERE q.key = r.question_key) AS question_text
        FROM review_rounds r ORDER BY r.id DESC""")
    return [RoundInfo(r["id"], r["name"], r["question_key"], r["kind"], r["reviewers_per_item"],
                      r["overlap_share"], r["blinding"], r["reservation_minutes"],
                      r["adjudicate_distance"], r["items"], r["needed"], r["given"],
                      r["created_by"], r["created_at"], r["question_text"]) for r in rows]


def get_round(store: Store, round_id: int) -> RoundInfo | None:
    return next((r for r in list_rounds(store) if r.id == round_id), None)


def _places(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int,
            now: str) -> tuple[int, bool, bool, int]:
    """(reviews the item needs in the round, whether this reviewer's review is
    complete, whether they hold a live reservation, places taken by others:
    complete reviews and live reservations). RoundError if the item is not in
    the round."""
    row = conn.execute(
        f"SELECT {NEEDED} FROM round_items ri WHERE ri.round_id = ? AND ri.item_id = ?",
        (round_id, item_id),
    ).fetchone()
    if row is None:
        raise RoundError("this item is not part of the round")
    done_by = {r[0] for r in conn.execute(
        "SELECT rater_id FROM round_reviews WHERE round_id = ? AND item_id = ?",
        (round_id, item_id))}
    held_by = [r[0] for r in conn.execute(
        "SELECT rater_id FROM reservations WHERE round_id = ? AND item_id = ?"
        " AND released_at IS NULL AND expires_at > ?", (round_id, item_id, now))]
    others = len(done_by - {rater_id}) + sum(1 for r in held_by if r != rater_id and r not in done_by)
    return row[0], rater_id in done_by, rater_id in held_by, others


def _late_on(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int) -> bool:
    """Whether this reviewer's answers on the item were kept outside the round
    because its places were taken while they worked (`late_for_round`): from
    then on, all their answers on it stay outside the round, so that no review
    of the round is ever made partly of answers the reviewer was told are not
    the round's."""
    return conn.execute(
        "SELECT 1 FROM annotations WHERE item_id = ? AND rater_id = ? AND round_id IS NULL"
        " AND json_extract(extra, '$.late_for_round') = ? LIMIT 1",
        (item_id, rater_id, round_id)).fetchone() is not None


_SEEN_BEFORE = {False: " AND a.status != 'skipped'", True: ""}
"""Which earlier answers keep an item from a reviewer in a round, by whether
the round is over runs or conversations (see `_answered_outside_sql`)."""


def _answered_outside_sql(question_key: str, item: str, rater: str, round_: str,
                          before: str | None = None) -> str:
    """SQL, true when the reviewer (`rater`) has answered the item as a whole
    outside the round (in no round, or in another): an answer committed
    reveals the item's labels, and a round's answers are blind ones, so the
    round neither gives them the item (`reserve_next_item`) nor counts their
    review of it (`claim_answer_slot`). In a label round a skip does not count
    (it reveals nothing); in a round over agent runs or graded conversations
    any answer does. `item`, `rater`, `round_`: SQL expressions for them;
    `before`: only answers older than this annotation id. The unary `+` keeps
    the lookup on the item's answers (a few), not the reviewer's (thousands)."""
    return (f"EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = {item} AND +a.rater_id = {rater}"
            f" AND a.target = '' AND a.round_id IS NOT {round_}"
            + (f" AND a.id < {before}" if before else "")
            + _SEEN_BEFORE[is_rubric_round(question_key)] + ")")


def _answered_outside_on(conn: sqlite3.Connection, round_id: int, item_id: int,
                         rater_id: int) -> bool:
    """Whether this reviewer has answered the item outside the round (see
    `_answered_outside_sql`): say in Free review in another tab, while the
    round held the item for them."""
    key = conn.execute("SELECT question_key FROM review_rounds WHERE id = ?",
                       (round_id,)).fetchone()[0]
    return conn.execute("SELECT " + _answered_outside_sql(key, "?", "?", "?"),
                        (item_id, rater_id, round_id)).fetchone()[0] == 1


def _release(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int,
             now: str) -> int:
    """Give the reviewer's open reservation of the item back; how many were open."""
    return conn.execute(
        "UPDATE reservations SET released_at = ? WHERE round_id = ? AND item_id = ?"
        " AND rater_id = ? AND released_at IS NULL", (now, round_id, item_id, rater_id)).rowcount


def has_place(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int) -> bool:
    """Whether this reviewer may still (or already does) review the item in the round."""
    needed, done, held, others = _places(conn, round_id, item_id, rater_id, utcnow())
    if done:
        return True
    return (held or others < needed) and not _late_on(conn, round_id, item_id, rater_id) \
        and not _answered_outside_on(conn, round_id, item_id, rater_id)


WITHDRAWAL = "withdrawn_before_reveal"
"""What `claim_answer_slot` is told of an answer withdrawn within its undo window
(review.reviewing.commit.withdraw_before_reveal): not a skip; the reviewer answers
the item again, blind, and keeps their place (and their complete review)."""


def claim_answer_slot(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int,
                      statuses: Iterable[str]) -> bool:
    """Inside the transaction of a batch of answers about one item, before
    they are written: whether the batch counts in the round. `statuses`: those
    of its answers about the whole item (none: a batch of step marks). Every
    answer, a step mark too, keeps the reviewer's place: their reservation is
    renewed (or taken again, if it lapsed and the place is free) until the
    review is complete (`complete_review`). A batch of skips gives the place
    back.

    False: the item already has the reviewers the round asks for and this one
    is neither among them nor holding a live reservation (it lapsed while they
    worked, and someone else took the place), or their answers on it were kept
    outside the round before (`_late_on`), or they have answered the item
    outside the round meanwhile (`_answered_outside_on`: in another tab, say,
    which showed them its labels; a round counts only blind reviews): their
    reservation is then given back. The answers are a clinician's judgement
    all the same: the caller keeps them, the whole batch, outside the round,
    so the round still counts exactly k reviews and nothing typed is thrown
    away. Refuses (RoundError) an item that is not in the round, and a skip
    after the reviewer's review is complete."""
    statuses = set(statuses)
    now = utcnow()
    needed, done, held, others = _places(conn, round_id, item_id, rater_id, now)
    given = {"answered", "cannot_assess", WITHDRAWAL}
    if not done and not _is_member(conn, round_id, rater_id):
        _release(conn, round_id, item_id, rater_id, now)
        return False  # taken out of a round that names its reviewers: kept outside it
    if done:
        if statuses - given:  # an answer withdrawn before its reveal is answered again
            # Reviews are never withdrawn: the place would stay taken by an answer
            # that no longer counts, and the item short of the reviews it needs.
            raise RoundError("you have reviewed this item in the round: change your answer, or "
                             "answer 'cannot assess', instead of skipping it")
        return True
    if _late_on(conn, round_id, item_id, rater_id):
        return False
    if _answered_outside_on(conn, round_id, item_id, rater_id):
        # Before the skip rule: in a round over runs or conversations a skip after a
        # complete review outside would otherwise complete one inside.
        _release(conn, round_id, item_id, rater_id, now)
        return False
    if statuses and not statuses & given:
        _release(conn, round_id, item_id, rater_id, now)
        return True
    if not held and others >= needed:
        return False
    minutes = conn.execute("SELECT reservation_minutes FROM review_rounds WHERE id = ?",
                           (round_id,)).fetchone()[0]
    if held:
        conn.execute(
            "UPDATE reservations SET expires_at = ? WHERE round_id = ? AND item_id = ?"
            " AND rater_id = ? AND released_at IS NULL AND expires_at > ?",
            (_later(minutes), round_id, item_id, rater_id, now))
    else:
        conn.execute(
            "INSERT INTO reservations (round_id, item_id, rater_id, reserved_at, expires_at)"
            " VALUES (?,?,?,?,?)", (round_id, item_id, rater_id, now, _later(minutes)))
    return True


def _role(conn, rater_id: int) -> str | None:
    row = conn.execute(f"SELECT role FROM raters WHERE id = ? AND {PEOPLE}", (rater_id,)).fetchone()
    return (row[0] or "reviewer") if row is not None else "not a person"


def keep_reservation(store: Store, round_id: int, item_id: int, rater_id: int) -> bool:
    """Renew the reviewer's live reservation of the item for the round's
    reservation time from now: they are working on it (a draft saved, a
    verdict picked), so a long review (an agent run's forty criteria) is not
    kept outside the round for outlasting one reservation. False when they
    hold none (it lapsed, or the item is not reserved for them)."""
    with store.transaction() as conn:
        if not role_may(_role(conn, rater_id), "review"):
            raise NotAllowed("only someone with a role here may answer items")
        row = conn.execute("SELECT reservation_minutes FROM review_rounds WHERE id = ?",
                           (round_id,)).fetchone()
        if row is None:
            return False
        return conn.execute(
            "UPDATE reservations SET expires_at = ? WHERE round_id = ? AND item_id = ?"
            " AND rater_id = ? AND released_at IS NULL AND expires_at > ?",
            (_later(row[0]), round_id, item_id, rater_id, utcnow())).rowcount > 0


def late_for_round(store: Store, annotation_ids: list[int]) -> int | None:
    """The round these answers were given in but kept outside of (its places
    were taken while the reviewer worked; see `claim_answer_slot`), or None."""
    for (extra,) in store.query(
            "SELECT extra FROM annotations WHERE id IN (SELECT value FROM json_each(?))"
            " AND round_id IS NULL", (to_json(list(annotation_ids)),)):
        late = from_json(extra).get("late_for_round")
        if late is not None:
            return int(late)
    return None


def full_text(store: Store, round_id: int, item_id: int) -> str:
    """What a reviewer is told when their answer was kept outside the round:
    why, for the reviewer whose answer on the item was kept outside last."""
    key = store.scalar("SELECT question_key FROM review_rounds WHERE id = ?", (round_id,))
    late = store.query_one(
        "SELECT rater_id, MIN(id) FROM annotations WHERE item_id = ?1 AND round_id IS NULL"
        " AND json_extract(extra, '$.late_for_round') = ?2 AND rater_id = (SELECT rater_id"
        " FROM annotations WHERE item_id = ?1 AND round_id IS NULL"
        " AND json_extract(extra, '$.late_for_round') = ?2 ORDER BY id DESC LIMIT 1)",
        (item_id, round_id))
    if key is not None and late is not None and late[0] is not None and store.scalar(
            "SELECT " + _answered_outside_sql(key, "?1", "?2", "?3", before="?4"),
            (item_id, late[0], round_id, late[1])):
        return ("Your answer is kept, outside the round: you had already answered this item "
                "outside the round (an answer there shows you its labels), and a round counts "
                "only blind reviews. It counts as an extra review, not one of the round's.")
    if late is not None and late[0] is not None and not _is_member(store.conn, round_id, late[0]):
        return ("Your answer is kept, outside the round: the round's admin has named its "
                "reviewers, and you are not among them now. It counts as an extra review, not "
                "one of the round's.")
    needed = store.scalar(f"SELECT {NEEDED} FROM round_items ri WHERE ri.round_id = ?"
                          " AND ri.item_id = ?",
                          (round_id, item_id)) or 0
    return (f"Your answer is kept, outside the round: while you worked, your reservation lapsed and "
            f"this item got the {plural(needed, 'reviewer')} the round asks for. "
            "It counts as an extra review, not one of the round's.")


def complete_review(conn: sqlite3.Connection, round_id: int, item_id: int, rater_id: int) -> bool:
    """Inside the transaction that completed a reviewer's review of the item:
    their place becomes a review of the round, and their reservation closes.
    Returns False if it was complete already. Refuses (RoundError) when the
    place is not theirs: others completed or hold all the item's places."""
    now = utcnow()
    needed, done, held, others = _places(conn, round_id, item_id, rater_id, now)
    if done:
        return False
    if not held and others >= needed:
        raise RoundError(
            f"this item already has the {plural(needed, 'reviewer')} the round "
            "asks for; take the next item")
    # Never an insert that meets the review (the table refuses one: it is append-only).
    cur = conn.execute(
        "INSERT INTO round_reviews (round_id, item_id, rater_id, completed_at) SELECT ?,?,?,?"
        " WHERE NOT EXISTS (SELECT 1 FROM round_reviews WHERE round_id = ? AND item_id = ?"
        " AND rater_id = ?)", (round_id, item_id, rater_id, now, round_id, item_id, rater_id))
    conn.execute(
        "UPDATE reservations SET released_at = ? WHERE round_id = ? AND item_id = ? AND rater_id = ?"
        " AND released_at IS NULL", (now, round_id, item_id, rater_id))
    return cur.rowcount > 0


_frontier: dict[tuple[str, int], int] = {}
"""Per database and round: a position below which every item already has all
its reviews. Reviews are never withdrawn, so such items stay full, and the
search for the next item may start here instead of scanning the whole round
each time (which made a round of n items cost n^2)."""


def _full_below(conn: sqlite3.Connection, key: tuple[str, int], round_id: int) -> int:
    start = _frontier.get(key, 0)
    row = conn.execute(
        f"""SELECT ri.position FROM round_items ri WHERE ri.round_id = ? AND ri.position >= ?
              AND (SELECT COUNT(*) FROM round_reviews rr
                   WHERE rr.round_id = ri.round_id AND rr.item_id = ri.item_id) < {NEEDED}
            ORDER BY ri.position LIMIT 1""", (round_id, start)).fetchone()
    position = row[0] if row else start
    _frontier[key] = position
    return position


_MINE = """NOT EXISTS (SELECT 1 FROM round_reviews rr WHERE rr.round_id = ri.round_id
                      AND rr.item_id = ri.item_id AND rr.rater_id = ?3)
                  AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.round_id = ri.round_id
                      AND a.item_id = ri.item_id AND a.rater_id = ?3 AND a.target = '')
                  AND NOT EXISTS (SELECT 1 FROM annotations a WHERE a.item_id = ri.item_id
                      AND a.rater_id = ?3 AND a.round_id IS NULL
                      AND json_extract(a.extra, '$.late_for_round') = ?1)
                  AND NOT {outside}
                  AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.round_id = ri.round_id
                      AND r.item_id = ri.item_id AND r.rater_id = ?3 AND r.released_at IS NULL
                      AND r.expires_at > ?2)
                  AND NOT EXISTS (SELECT 1 FROM items l JOIN annotations a ON a.item_id = l.id
                      WHERE l.case_id = i.case_id AND l.dataset_id = i.dataset_id
                      AND l.kind = i.kind AND l.round_id > i.round_id AND a.rater_id = ?3
                      AND a.target = '' AND a.status != 'skipped')"""
_FREE = """(SELECT COUNT(*) FROM round_reviews rr
                        WHERE rr.round_id = ri.round_id AND rr.item_id = ri.item_id)
                    + (SELECT COUNT(*) FROM reservations r WHERE r.round_id = ri.round_id
                        AND r.item_id = ri.item_id AND r.released_at IS NULL AND r.expires_at > ?2)
                    < """ + NEEDED


def _eligible_sql(outside: str, free: bool = True) -> str:
    """SQL over `round_items ri JOIN items i`: true for an item the round may give
    the reviewer (?1 the round, ?2 now, ?3 the reviewer; `outside` from
    `_answered_outside_sql` with an {item} slot): not reviewed, answered or held by
    them in the round, not kept outside it for them, not answered outside it, no
    later round of its case answered; with `free`, a place is free now (others'
    reviews and live reservations below its need). The one rule `reserve_next_item`
    gives items by and `round_counts` counts them by."""
    return _MINE.format(outside=outside.format(item="ri.item_id")) + (
        "\n                  AND " + _FREE if free else "")


def _is_member(conn: sqlite3.Connection, round_id: int, rater_id: int) -> bool:
    """Whether the reviewer may take places in the round: it names nobody (open to
    every reviewer), or names them (`round_members`)."""
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(rater_id = ?), 0) FROM current_round_members"
        " WHERE round_id = ?", (rater_id, round_id)).fetchone()
    return row[0] == 0 or row[1] > 0


def reserve_next_item(store: Store, round_id: int, reviewer: Reviewer,
                      now: datetime | None = None) -> int | None:
    """The item this reviewer should answer next in the round, with a place
    reserved for them; None when the round has nothing left for them. An item
    the reviewer already answered (outside the round or in it) is not given
    again: a round's answers are blind ones, and an answer committed reveals
    the labels. Nor is one kept for them: a reservation of an item they have
    answered outside the round meanwhile (another tab) is given back, and the
    next item reserved instead. In a label round a skip does not count (it reveals nothing);
    in a round over agent runs or graded conversations any answer does."""
    require_role(reviewer, "review")
    info = store.query_one(
        "SELECT reservation_minutes, match_specialty, question_key FROM review_rounds WHERE id = ?",
        (round_id,))
    if info is None:
        raise RoundError(f"no review round {round_id}")
    stamp = (now or datetime.now(UTC)).isoformat(timespec="microseconds")
    outside = _answered_outside_sql(info["question_key"], "{item}", "?3", "?1")
    with store.transaction() as conn:
        if not _is_member(conn, round_id, reviewer.id):
            return None  # the round names its reviewers, and not this one
        held = conn.execute(
            f"""SELECT r.id, r.item_id, {outside.format(item="r.item_id")} FROM reservations r
                WHERE r.round_id = ?1 AND r.rater_id = ?3 AND r.released_at IS NULL AND r.expires_at > ?2
                  AND NOT EXISTS (SELECT 1 FROM round_reviews rr WHERE rr.round_id = r.round_id
                      AND rr.item_id = r.item_id AND rr.rater_id = r.rater_id)
                ORDER BY r.id""",
            (round_id, stamp, reviewer.id),
        ).fetchall()
        # A held item the reviewer has answered outside the round meanwhile (another
        # tab) is given back: the round would no longer hand it to them.
        for reservation_id, item_id, _ in (h for h in held if h[2]):
            _release(conn, round_id, item_id, reviewer.id, stamp)
            store.audit(reviewer.name, "release", "reservations", reservation_id, None,
                        {"round_id": round_id, "item_id": item_id,
                         "reason": "answered outside the round"})
        kept = next((h[1] for h in held if not h[2]), None)
        if kept is not None:
            return kept
        keep_drawing(store, conn, round_id, NEEDED)  # an active round's next batch, if due
        frontier = _full_below(conn, (store.path, round_id), round_id)
        specialty_first = (
            "CASE WHEN json_extract(i.meta, '$.specialty_or_domain') = ?4 THEN 0 ELSE 1 END,"
            if info["match_specialty"] and reviewer.specialty else "")
        eligible = _eligible_sql(outside)
        args = (round_id, stamp, reviewer.id, reviewer.specialty if specialty_first else None,
                frontier)
        row = conn.execute(
            f"""SELECT ri.item_id, i.case_id, i.round_id FROM round_items ri
                JOIN items i ON i.id = ri.item_id
                WHERE ri.round_id = ?1 AND ri.position >= ?5 AND {eligible}
                ORDER BY {specialty_first} ri.position LIMIT 1""", args).fetchone()
        if row is None:
            return None
        if row[1] is not None and row[2] is not None:
            # A case's rounds in their order: round 2 (and its gold, once answered)
            # tells about round 1, which would then not be answered blind.
            earlier = conn.execute(
                f"""SELECT ri.item_id, i.case_id, i.round_id FROM round_items ri
                    JOIN items i ON i.id = ri.item_id
                    JOIN items x ON x.id = ?6 AND x.dataset_id = i.dataset_id AND x.kind = i.kind
                    WHERE ri.round_id = ?1 AND i.case_id = x.case_id AND i.round_id < x.round_id
                      AND {eligible}
                    ORDER BY i.round_id LIMIT 1""", (*args, row[0])).fetchone()
            row = earlier or row
        cur = conn.execute(
            "INSERT INTO reservations (round_id, item_id, rater_id, reserved_at, expires_at)"
            " VALUES (?,?,?,?,?)",
            (round_id, row[0], reviewer.id, stamp, _later(info["reservation_minutes"], now)),
        )
        store.audit(reviewer.name, "reserve", "reservations", cur.lastrowid, None,
                    {"round_id": round_id, "item_id": row[0]})
        return row[0]


def answered_outside(store: Store, round_id: int, rater_id: int) -> int:
    """Items of a round that this reviewer had answered outside it, which the
    round does not give them (see `reserve_next_item`)."""
    key = store.scalar("SELECT question_key FROM review_rounds WHERE id = ?", (round_id,))
    return store.scalar(
        "SELECT COUNT(*) FROM round_items ri WHERE ri.round_id = ?1 AND NOT EXISTS (SELECT 1"
        " FROM round_reviews rr WHERE rr.round_id = ?1 AND rr.item_id = ri.item_id"
        " AND rr.rater_id = ?2) AND " + _answered_outside_sql(key or "", "ri.item_id", "?2", "?1"),
        (round_id, rater_id))


def my_round_items(store: Store, round_id: int, rater_id: int,
                   now: datetime | None = None) -> list[int]:
    """The round's items this reviewer has worked on (answered in the round,
    or holding a place now), in the order they were given: what Back and Next
    move through inside a round."""
    stamp = (now or datetime.now(UTC)).isoformat(timespec="microseconds")
    return [r[0] for r in store.query(
        "SELECT r.item_id FROM reservations r WHERE r.round_id = ?1 AND r.rater_id = ?2"
        " AND ((r.released_at IS NULL AND r.expires_at > ?3) OR EXISTS (SELECT 1 FROM annotations a"
        " WHERE a.round_id = ?1 AND a.item_id = r.item_id AND a.rater_id = ?2))"
        " GROUP BY r.item_id ORDER BY MIN(r.id)", (round_id, rater_id, stamp))]


def in_round(store: Store, round_id: int, item_id: int) -> bool:
    return store.scalar("SELECT 1 FROM round_items WHERE round_id = ? AND item_id = ?",
                        (round_id, item_id)) is not None


def release_reservation(store: Store, round_id: int, item_id: int, reviewer: Reviewer) -> None:
    """Give a reserved item back to the pool (e.g. after a skip)."""
    with store.transaction() as conn:
        cur = conn.execute(
            "UPDATE reservations SET released_at = ? WHERE round_id = ? AND item_id = ?"
            " AND rater_id = ? AND released_at IS NULL",
            (utcnow(), round_id, item_id, reviewer.id),
        )
        if cur.rowcount:
            store.audit(reviewer.name, "release", "reservations", None, None,
                        {"round_id": round_id, "item_id": item_id})


def round_progress(store: Store, round_id: int, reviewer_id: int) -> tuple[int, int]:
    """(items this reviewer has reviewed in the round, items in the round)."""
    done = store.scalar(
        "SELECT COUNT(*) FROM round_reviews WHERE round_id = ? AND rater_id = ?",
        (round_id, reviewer_id))
    total = store.scalar("SELECT COUNT(*) FROM round_items WHERE round_id = ?", (round_id,))
    return done, total


def round_filter(store: Store, round_id: int) -> dict:
    raw = store.scalar("SELECT item_filter FROM review_rounds WHERE id = ?", (round_id,))
    return json.loads(raw) if raw else {}


# -- the round's counts, its people and its places ----------------------------------
# One read each, so that every line a screen shows about a round agrees with the others
# (the reviewer's progress, their place in it, "nothing left"; the study lead's table).

@dataclass(frozen=True)
class RoundCounts:
    """One reviewer's counts in a round, and the round's, read together."""

    items: int
    """Items in the round."""
    reviews_needed: int
    """Reviews the round asks for: each item's places (k, or 1 outside the overlap)."""
    reviews_done: int
    """Reviews complete, by anyone."""
    done: int
    """Items this reviewer has reviewed in the round."""
    held: int
    """Items this reviewer holds a place on now, not yet reviewed."""
    open_now: int
    """Items the round could give this reviewer now (a place free)."""
    held_by_others: int
    """Items the round could give this reviewer but for colleagues' live
    reservations: they come back if a reservation lapses."""
    answered_outside: int
    """Items of the round this reviewer answered outside it: never given to them."""
    member: bool
    """False when the round names its reviewers and not this one."""

    @property
    def yours(self) -> int:
        """The items this reviewer can review in the round, as things stand: those
        reviewed, held, and open to them now. Every "of N" shown to them is this."""
        return self.done + self.held + self.open_now

    @property
    def left(self) -> int:
        """Items still to review for this reviewer: the one held and those open."""
        return self.held + self.open_now

    @property
    def finished(self) -> bool:
        """Nothing left for this reviewer now."""
        return self.left == 0

    def progress_words(self, name: str, verb: str = "reviewed") -> str:
        """The progress line: 'N of M reviewed by you in <name>' (M: `yours`) and the
        round's own count. `name`: the round's name, as the page shows it (escaped)."""
        return (f"{self.done} of {self.yours} {verb} by you in {name}"
                + (" · all done" if self.finished and self.yours else "")
                + f" · the round: {self.reviews_done} of {self.reviews_needed} reviews")

    def nothing_left_words(self, name: str) -> str:
        """Why the round has nothing (more) for this reviewer, in the same counts."""
        if not self.member:
            return (f"Nothing for you in {name}: its admin has named its reviewers, and you are "
                    "not among them.")
        out = (f"Nothing left for you in {name}: you reviewed {self.done} of its {self.items} "
               "items")
        rest = self.items - self.done - self.answered_outside - self.held_by_others
        if rest == 1:
            out += "; the other one has the reviewers it needs"
        elif rest > 1:
            out += f"; the other {rest} have the reviewers they need"
        out += "."
        if self.answered_outside:
            out += (f" {self.answered_outside} you had answered outside the round "
                    f"{'are' if self.answered_outside > 1 else 'is'} not given to you again: a "
                    "round counts only blind answers.")
        if self.held_by_others:
            out += (f" {self.held_by_others} more {'are' if self.held_by_others > 1 else 'is'} "
                    "held by colleagues now, and may come to you if a reservation lapses.")
        return out


def round_counts(store: Store, round_id: int, reviewer_id: int,
                 now: datetime | None = None) -> RoundCounts:
    """The reviewer's counts in the round and the round's, by the rule that gives
    items (`_eligible_sql`): what "3 of 5", "item 2 of 5" and "nothing left" rest on."""
    stamp = (now or datetime.now(UTC)).isoformat(timespec="microseconds")
    key = store.scalar("SELECT question_key FROM review_rounds WHERE id = ?", (round_id,))
    if key is None:
        raise RoundError(f"no review round {round_id}")
    outside = _answered_outside_sql(key, "{item}", "?3", "?1")
    args = (round_id, stamp, reviewer_id)
    whole = store.query_one(
        f"SELECT COUNT(*) AS items, COALESCE(SUM({NEEDED}), 0) AS needed,"
        " (SELECT COUNT(*) FROM round_reviews WHERE round_id = ?1) AS given,"
        " (SELECT COUNT(*) FROM round_reviews WHERE round_id = ?1 AND rater_id = ?3) AS done,"
        " (SELECT COUNT(DISTINCT r.item_id) FROM reservations r WHERE r.round_id = ?1"
        "   AND r.rater_id = ?3 AND r.released_at IS NULL AND r.expires_at > ?2"
        "   AND NOT EXISTS (SELECT 1 FROM round_reviews rr WHERE rr.round_id = ?1"
        "     AND rr.item_id = r.item_id AND rr.rater_id = ?3)) AS held"
        " FROM round_items ri WHERE ri.round_id = ?1", args)
    member = _is_member(store.conn, round_id, reviewer_id)
    open_now = waiting = 0
    if member:
        row = store.query_one(
            f"SELECT COALESCE(SUM({_FREE}), 0) AS free, COUNT(*) AS mine FROM round_items ri"
            f" JOIN items i ON i.id = ri.item_id WHERE ri.round_id = ?1 AND ri.position >= ?4"
            f" AND {_eligible_sql(outside, free=False)}"
            " AND (SELECT COUNT(*) FROM round_reviews rr WHERE rr.round_id = ri.round_id"
            f"      AND rr.item_id = ri.item_id) < {NEEDED}",
            # Below the frontier every item has all its reviews (`_full_below`).
            (*args, _frontier.get((store.path, round_id), 0)))
        open_now, waiting = row["free"], row["mine"] - row["free"]
    return RoundCounts(
        items=whole["items"], reviews_needed=whole["needed"], reviews_done=whole["given"],
        done=whole["done"], held=whole["held"], open_now=open_now, held_by_others=waiting,
        answered_outside=answered_outside(store, round_id, reviewer_id), member=member)


def round_members(store: Store, round_id: int) -> list[str]:
    """The reviewers named in the round, by name; [] when it names nobody (then
    every reviewer may take places in it)."""
    return [r[0] for r in store.query(
        "SELECT r.name FROM current_round_members m JOIN raters r ON r.id = m.rater_id"
        " WHERE m.round_id = ? ORDER BY r.name", (round_id,))]


def name_round_members(store: Store, admin: Reviewer, round_id: int, names: Iterable[str]) -> int:
    """Name who is in the round (only an admin may): those named take places in it,
    nobody else; naming nobody opens it to every reviewer again. Who leaves keeps
    the reviews they completed. Append-only, audited; returns how many changed."""
    if not may(admin, "manage_rounds"):
        raise RoundError("only an admin can name a round's reviewers")
    wanted = set(names)
    with store.transaction() as conn:
        if conn.execute("SELECT 1 FROM review_rounds WHERE id = ?", (round_id,)).fetchone() is None:
            raise RoundError(f"no review round {round_id}")
        people = {r[0]: r[1] for r in conn.execute(
            f"SELECT name, id FROM raters WHERE {PEOPLE}")}
        unknown = sorted(wanted - set(people))
        if unknown:
            raise RoundError(f"no reviewer named {unknown[0]!r}")
        now_in = {r[0] for r in conn.execute(
            "SELECT rater_id FROM current_round_members WHERE round_id = ?", (round_id,))}
        want_ids = {people[n] for n in wanted}
        changes = [(rid, 1) for rid in sorted(want_ids - now_in)] + [
            (rid, 0) for rid in sorted(now_in - want_ids)]
        stamp = utcnow()
        conn.executemany(
            "INSERT INTO round_members (round_id, rater_id, in_round, named_by, created_at)"
            " VALUES (?,?,?,?,?)", [(round_id, rid, flag, admin.name, stamp) for rid, flag in changes])
        if changes:
            names_of = {v: k for k, v in people.items()}
            store.audit(admin.name, "name_round_members", "review_rounds", round_id,
                        {"members": sorted(names_of[r] for r in now_in)},
                        {"members": sorted(wanted)})
    return len(changes)


@dataclass(frozen=True)
class ItemPlaces:
    """Who holds which place on one item of a round, for the study lead."""

    item_id: int
    uid: str
    needed: int
    reviewed_by: tuple[str, ...]
    """Who completed a review of it in the round, in order."""
    held_by: tuple[tuple[str, str], ...]
    """(reviewer, until when) of the live reservations on it."""
    could_take: int
    """Reviewers who could still be given it (by `_eligible_sql`)."""

    @property
    def complete(self) -> bool:
        return len(self.reviewed_by) >= self.needed

    @property
    def stuck(self) -> bool:
        """Not complete, and fewer reviewers can still take it than it has places free:
        it will not complete unless someone joins (or a lapsed answer is redone)."""
        free = self.needed - len(self.reviewed_by) - len(self.held_by)
        return not self.complete and free > self.could_take

    def words(self) -> str:
        """Its state, in words."""
        if self.complete:
            return "complete"
        free = self.needed - len(self.reviewed_by) - len(self.held_by)
        parts = []
        if self.held_by:
            parts.append("in progress")
        if self.stuck:
            parts.append(f"stuck: {plural(free, 'place')} free, "
                         + ("nobody left to take " + ("them" if free != 1 else "it")
                            if not self.could_take else
                            f"{plural(self.could_take, 'reviewer')} left"))
        elif free > 0:
            parts.append(f"waiting for {plural(free, 'reviewer')}")
        return "; ".join(parts)


def round_places(store: Store, round_id: int, now: datetime | None = None) -> list[ItemPlaces]:
    """Every item of the round with who reviewed it, who holds a place on it now
    and how many reviewers could still take it: the lead's view of what is stuck."""
    stamp = (now or datetime.now(UTC)).isoformat(timespec="microseconds")
    key = store.scalar("SELECT question_key FROM review_rounds WHERE id = ?", (round_id,))
    if key is None:
        raise RoundError(f"no review round {round_id}")
    reviewed: dict[int, list[str]] = {}
    for r in store.query("SELECT rr.item_id, x.name FROM round_reviews rr JOIN raters x"
                         " ON x.id = rr.rater_id WHERE rr.round_id = ? ORDER BY rr.completed_at",
                         (round_id,)):
        reviewed.setdefault(r[0], []).append(r[1])
    held: dict[int, list[tuple[str, str]]] = {}
    for r in store.query("SELECT r.item_id, x.name, r.expires_at FROM reservations r JOIN raters x"
                         " ON x.id = r.rater_id WHERE r.round_id = ? AND r.released_at IS NULL"
                         " AND r.expires_at > ? AND NOT EXISTS (SELECT 1 FROM round_reviews rr"
                         " WHERE rr.round_id = r.round_id AND rr.item_id = r.item_id"
                         " AND rr.rater_id = r.rater_id) ORDER BY r.id", (round_id, stamp)):
        held.setdefault(r[0], []).append((r[1], r[2]))
    named = {r[0] for r in store.query(
        "SELECT rater_id FROM current_round_members WHERE round_id = ?", (round_id,))}
    people = [r[0] for r in store.query(f"SELECT id FROM raters WHERE {PEOPLE}")
              if not named or r[0] in named]
    outside = _answered_outside_sql(key, "{item}", "?3", "?1")
    could: dict[int, int] = {}
    for rater_id in people:
        for (item_id,) in store.query(
                "SELECT ri.item_id FROM round_items ri JOIN items i ON i.id = ri.item_id"
                f" WHERE ri.round_id = ?1 AND {_eligible_sql(outside, free=False)}",
                (round_id, stamp, rater_id)):
            could[item_id] = could.get(item_id, 0) + 1
    return [ItemPlaces(r["item_id"], r["uid"], r["answers_needed"],
                       tuple(reviewed.get(r["item_id"], ())), tuple(held.get(r["item_id"], ())),
                       could.get(r["item_id"], 0))
            for r in store.query(
                f"SELECT ri.item_id, i.uid, {NEEDED} AS answers_needed FROM round_items ri"
                " JOIN items i ON i.id = ri.item_id WHERE ri.round_id = ? ORDER BY ri.position",
                (round_id,))]


# -- a lead's redraw of the places nobody can fill --------------------------------------

@dataclass(frozen=True)
class Redraw:
    """Places of a round moved off an item nobody left can review (`ItemPlaces.stuck`)."""

    item_id: int
    """The stuck item the places leave: it needs that many fewer reviews in the round."""
    places: int
    replacement_id: int | None
    """The item drawn instead from the round's candidates (its stratum first), given
    those places at the end of the round; None when no candidate was left: the
    places are then dropped, and the round can close without them."""


REDRAW_REASON = ("no reviewer who may take a place in the round can still review it (each "
                 "had answered it outside the round, or holds or completed a place)")


def redraw_missing_places(store: Store, admin: Reviewer, round_id: int,
                          seed: int = 0) -> list[Redraw]:
    """Redraw the places of the round that nobody can fill (only an admin may).

    An item drawn into a round can be stuck: every reviewer who may take places
    in it had answered it outside the round (in Free review, say), and a round
    counts only blind reviews, so it is never given to them and never counted.
    Its missing places (those beyond its reviews, live reservations and the
    reviewers who could still take it) leave it and go to an item drawn at
    random (`seed`) from the round's candidates (`round_frame`), in its stratum
    if one is left, that is not in the round and that no such reviewer has
    answered outside it. Each redraw is recorded (`round_redraws`, append-only)
    and audited; the draw's inclusion probabilities stay those of the first draw. An
    active round's stuck places are dropped instead: its next batch is drawn in their
    stead, in the sequence its estimates rest on (``review.team.active``)."""
    if not may(admin, "manage_rounds"):
        raise RoundError("only an admin can redraw a round's places")
    key = store.scalar("SELECT question_key FROM review_rounds WHERE id = ?", (round_id,))
    if key is None:
        raise RoundError(f"no review round {round_id}")
    rng = random.Random(seed)
    out: list[Redraw] = []
    with store.transaction() as conn:
        stuck = [p for p in round_places(store, round_id) if p.stuck]
        if not stuck:
            return []
        named = [r[0] for r in conn.execute(
            "SELECT rater_id FROM current_round_members WHERE round_id = ?", (round_id,))]
        people = named or [r[0] for r in conn.execute(f"SELECT id FROM raters WHERE {PEOPLE}")]
        seen = _SEEN_BEFORE[is_rubric_round(key)]
        candidates = conn.execute(
            "SELECT f.item_id, f.stratum FROM round_frame f JOIN items i ON i.id = f.item_id"
            " WHERE f.round_id = ?1 AND i.failed = 0 AND NOT EXISTS (SELECT 1 FROM round_items ri"
            " WHERE ri.round_id = ?1 AND ri.item_id = f.item_id) AND NOT EXISTS (SELECT 1"
            " FROM annotations a WHERE a.item_id = f.item_id AND a.target = ''"
            f" AND a.round_id IS NOT ?1{seen}"
            " AND a.rater_id IN (SELECT value FROM json_each(?2))) ORDER BY f.item_id",
            (round_id, to_json(people))).fetchall()
        pool = [(r[0], r[1]) for r in candidates]
        design = from_json(conn.execute("SELECT design FROM review_rounds WHERE id = ?",
                                        (round_id,)).fetchone()[0] or "null")
        if design and design.get("kind") == "active":
            pool = []  # an active round's next batch takes the places, in its own order
        position = conn.execute("SELECT COALESCE(MAX(position), -1) FROM round_items"
                                " WHERE round_id = ?", (round_id,)).fetchone()[0]
        stamp = utcnow()
        for p in stuck:
            places = p.needed - len(p.reviewed_by) - len(p.held_by) - p.could_take
            stratum = conn.execute("SELECT stratum FROM round_items WHERE round_id = ?"
                                   " AND item_id = ?", (round_id, p.item_id)).fetchone()[0]
            same = [c for c in pool if c[1] == stratum] or pool
            chosen = rng.choice(same) if same else None
            if chosen is not None:
                pool.remove(chosen)
                position += 1
                conn.execute(
                    "INSERT INTO round_items (round_id, item_id, answers_needed, stratum, position)"
                    " VALUES (?,?,?,?,?)", (round_id, chosen[0], places, chosen[1], position))
            cur = conn.execute(
                "INSERT INTO round_redraws (round_id, item_id, places, replacement_id, reason,"
                " redrawn_by, redrawn_at) VALUES (?,?,?,?,?,?,?)",
                (round_id, p.item_id, places, chosen[0] if chosen else None, REDRAW_REASON,
                 admin.name, stamp))
            store.audit(admin.name, "redraw_places", "round_redraws", cur.lastrowid, None,
                        {"round_id": round_id, "item_id": p.item_id, "places": places,
                         "replacement_id": chosen[0] if chosen else None, "seed": seed})
            out.append(Redraw(p.item_id, places, chosen[0] if chosen else None))
    _frontier.pop((store.path, round_id), None)
    return out
