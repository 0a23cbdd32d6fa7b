"""What a reviewer was shown: each machine or reference label, the first time it reached
their screen (the ``reveals`` table). The blinding decision
(``review.reviewing.blinding.reveal_reference_labels``) records every label it shows;
``labels.compare.anchoring`` reads the record to measure a changed answer against the
label that was seen.
"""

from __future__ import annotations

from collections.abc import Iterable

from store import Store, utcnow


def record_reveal(store: Store, reviewer_id: int, item_id: int, labels: Iterable) -> int:
    """Record that these labels (each with its ``annotation_id``) were shown to the
    reviewer on this item; a label already recorded for them is not recorded again.
    Returns how many were new. One transaction, and none when nothing is new (the
    screen asks on every rerun); inside a caller's transaction, part of it."""
    ids = sorted({label.annotation_id for label in labels
                  if getattr(label, "annotation_id", None) is not None})
    if not ids:
        return 0
    marks = ", ".join("?" for _ in ids)
    known = {row["annotation_id"] for row in store.query(
        f"SELECT annotation_id FROM reveals WHERE rater_id = ? AND annotation_id IN ({marks})",
        (reviewer_id, *ids))}
    new = [i for i in ids if i not in known]
    if not new:
        return 0
    # Only a reveal not yet recorded (another tab may have just recorded it): the
    # table refuses an insert that takes an existing row (store.migrations m018).
    rows = [(reviewer_id, item_id, i, utcnow(), reviewer_id, i) for i in new]
    sql = ("INSERT INTO reveals (rater_id, item_id, annotation_id, shown_at) SELECT ?, ?, ?, ?"
           " WHERE NOT EXISTS (SELECT 1 FROM reveals WHERE rater_id = ? AND annotation_id = ?)")
    if getattr(store, "_in_tx", False):
        store.conn.executemany(sql, rows)
    else:
        with store.transaction() as conn:
            conn.executemany(sql, rows)
    return len(new)
