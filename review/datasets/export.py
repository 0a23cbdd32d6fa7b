"""Exports: every annotation with its provenance, and CARE-Bench direct labels.

Exports are written only when a user asks; identifying fields (item meta
marked `identifying`, e.g. CliniCARE task ids) are withheld unless asked.
CSV cells that a spreadsheet would run as a formula are quoted
(`store.spreadsheet.safe_cell`); the labels-long importer takes the quote
off again. The file's extension says how it is written: `.csv` or `.jsonl`
(one JSON object a line); any other is refused before anything is written.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from codebook import CAREBENCH, codebook
from labels.phases import phase_condition
from review.team.adjudication import ADJUDICATED
from store import Store
from store.runs import RunChoiceError, load_runs, one_run, run_label_map, select_runs
from store.spreadsheet import safe_cell

FILE_KINDS = {".csv": "csv", ".jsonl": "jsonl"}
"""The extensions an export may have, and how each is written."""
CAREBENCH_QUESTION = "carebench.escalation_needed"
"""The question whose answers are a prefix's CARE-Bench label."""
RESPONSE_QUESTION = "carebench.response_action"
"""The question whose answers read one model's response as a label (the mapper's)."""


class ExportError(ValueError):
    """An export that cannot be written as asked; the message says why, in one line."""


def export_kind(out: Path) -> str:
    """'csv' or 'jsonl', by the file's extension; ExportError for any other."""
    kind = FILE_KINDS.get(out.suffix.lower())
    if kind is None:
        given = f"'{out.suffix}' files" if out.suffix else "a file without an extension"
        raise ExportError(f"{out}: cannot write {given}: give a file name ending in "
                          f"{' or '.join(FILE_KINDS)}")
    return kind


ANNOTATION_COLUMNS = [
    "annotation_id", "item_id", "item_kind", "dataset", "split", "case_id", "round_id", "model",
    "question", "rater", "rater_kind", "rater_role", "specialty", "target", "status", "value",
    "rationale", "confidence", "phase", "codebook_version", "seconds_on_task", "supersedes",
    "current", "source", "import_path", "created_at", "severity",
    "adjudication_reason", "run_id", "run",
]
"""`severity`: a step error mark's severity (1 negligible .. 5 critical), part
of the answer. `adjudication_reason`: on a settled answer (rater `adjudicated`),
why it was settled, or 'reopened' where it was withdrawn. Both are kept in the
annotation's extra fields. `run_id` and `run`: the run the item belongs to (`store.runs`),
its number in this database and its label; empty for prefixes, prompts and tasks."""


def annotation_rows(store: Store) -> Iterator[dict]:
    """All annotations, oldest first, with who, when, under which codebook,
    and whether each is still the current answer."""
    sql = """
    SELECT a.id AS annotation_id, i.uid AS item_id, i.kind AS item_kind, d.name AS dataset,
           i.split, i.case_id, i.round_id, i.model, q.key AS question, r.name AS rater,
           r.kind AS rater_kind, r.role AS rater_role, r.specialty, a.target, a.status, a.value,
           a.rationale, a.confidence, a.phase, a.codebook_version, a.seconds_on_task,
           a.supersedes_id AS supersedes,
           a.id = (SELECT MAX(b.id) FROM annotations b WHERE b.item_id = a.item_id
                   AND b.question_id = a.question_id AND b.rater_id = a.rater_id
                   AND b.target = a.target) AS current,
           a.source, im.path AS import_path, a.created_at,
           json_extract(a.extra, '$.severity') AS severity,
           CASE WHEN r.name = ? THEN json_extract(a.extra, '$.reason') END AS adjudication_reason,
           i.run_id,
           coalesce(json_extract(i.meta, '$.identifying'), json_extract(p.meta, '$.identifying'))
               AS identifying
    FROM annotations a
    JOIN items i ON i.id = a.item_id JOIN datasets d ON d.id = i.dataset_id
    LEFT JOIN items p ON p.id = i.parent_id
    JOIN questions q ON q.id = a.question_id JOIN raters r ON r.id = a.rater_id
    LEFT JOIN imports im ON im.id = a.import_id
    ORDER BY a.id
    """
    labels = run_label_map(store.conn)
    for row in store.conn.execute(sql, (ADJUDICATED,)):
        out = dict(row)
        out["current"] = bool(out["current"])
        out["run"] = labels.get(out["run_id"])
        yield out


def export_annotations(store: Store, out: Path, with_identifiers: bool = False) -> int:
    """Write all annotations as CSV or JSONL (by the file's suffix, `export_kind`).

    On an item marked identifying, unless `with_identifiers`, the item id,
    case id and the path of the file it was imported from (a CliniCARE trial
    folder is named after its task) are withheld.

    Every row is written, skipped ones included (status 'skipped': a reviewer
    passed, or a settled answer was withdrawn), so that the last row of each
    rater's unit is their answer in force. A CSV export goes back in through
    the labels-long importer as it is: the importer takes `status`, `phase`,
    `rater_kind`, `target` and `severity`, records a skipped row as a skip,
    and ignores the other columns. Withheld items cannot be matched again, so
    export with identifiers to move such labels between databases."""
    n = 0
    jsonl = export_kind(out) == "jsonl"
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = None if jsonl else csv.DictWriter(fh, fieldnames=ANNOTATION_COLUMNS)
        if writer:
            writer.writeheader()
        for row in annotation_rows(store):
            identifying = row.pop("identifying")
            if identifying and not with_identifiers:
                row["item_id"] = f"withheld-{row['annotation_id']}"
                row["case_id"] = None
                row["import_path"] = None
            if jsonl:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                writer.writerow({k: safe_cell(v) for k, v in row.items()})
            n += 1
    return n


def carebench_labels(store: Store, rater: str | None = None,
                     phase: str | None = None, model: str | None = None,
                     run: str | int | None = None,
                     ) -> tuple[list[tuple[str, str]], list[str]]:
    """Human labels of each prefix as (prefix_id, label): each clinician's answer of the
    phase compared (``labels.phases``; by default the blind one, given before any
    machine label was seen; ``current``: the latest).

    With `rater`, that rater's labels: of the prefixes (a reviewer's, or a
    direct-label submission's), or, for a rater who labelled responses (a
    mapper), a scorer submission of one run: its responses' labels by prefix
    (`model` or `run` chooses the run when the rater labelled several; a model with
    several runs, two protocols say, is refused naming them: a submission is one run's). Without, the
    settled answer where one is in force (rater `adjudicated`; a withdrawn
    settlement is not), else the single human label where one reviewer
    answered, else the majority; ties are left out and reported in the second
    return value. A `rater` with no label on either question is an ExportError
    naming those who have labels (a mistyped name is not an empty export)."""
    book = codebook(CAREBENCH)
    if rater:
        cond, params = "r.name = ?", [rater]
    else:
        cond, params = "(r.kind = 'human' OR r.name = ?)", [ADJUDICATED]
    allowed, allowed_params = phase_condition(phase, "a", "r")
    newest, newest_params = phase_condition(phase, "b", "rb")
    rows = store.query(
        f"""SELECT i.uid, a.value, r.name FROM annotations a
            JOIN items i ON i.id = a.item_id JOIN raters r ON r.id = a.rater_id
            JOIN questions q ON q.id = a.question_id
            WHERE q.key = ? AND a.target = '' AND {cond} AND {allowed}
              AND a.id = (SELECT MAX(b.id) FROM annotations b JOIN raters rb ON rb.id = b.rater_id
                          WHERE b.item_id = a.item_id AND b.question_id = a.question_id
                            AND b.rater_id = a.rater_id AND b.target = a.target AND {newest})
              AND a.status = 'answered'
            ORDER BY i.id""",
        [CAREBENCH_QUESTION, *params, *allowed_params, *newest_params],
    )
    if rater and not rows:
        return _response_labels(store, rater, model, book, run), []
    by_item: dict[str, Counter] = {}
    settled: dict[str, str] = {}
    for uid, value, name in rows:
        votes = by_item.setdefault(uid, Counter())
        if not rater and name == ADJUDICATED:
            settled[uid] = value
        else:
            votes[value] += 1
    labels, ties = [], []
    for uid, counts in by_item.items():
        if uid in settled:
            labels.append((uid, book.normalise(settled[uid])))
            continue
        top = counts.most_common()
        if len(top) > 1 and top[0][1] == top[1][1]:
            ties.append(f"{uid}: tie between {', '.join(sorted(v for v, c in top if c == top[0][1]))}")
            continue
        labels.append((uid, book.normalise(top[0][0])))
    return labels, ties


def _response_labels(store: Store, rater: str, model: str | None, book,
                     run: str | int | None = None) -> list[tuple[str, str]]:
    """A rater's labels of one run's responses, by prefix (a scorer submission)."""
    rows = store.query(
        """SELECT p.uid AS prefix, i.run_id, c.value FROM current_annotations c
           JOIN items i ON i.id = c.item_id JOIN items p ON p.id = i.parent_id
           JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id
           WHERE q.key = ? AND r.name = ? AND c.status = 'answered' AND c.target = ''
           ORDER BY p.id, i.id""", (RESPONSE_QUESTION, rater))
    if not rows:
        raise ExportError(_no_labels(rater, raters_with_carebench_labels(store)))
    labelled = {r.id: r for r in load_runs(store.conn, "response")
                if r.id in {run_id for _, run_id, _ in rows}}
    shown = ", ".join(r.label for r in labelled.values())
    if model in (None, "") and run in (None, ""):
        chosen = list(labelled.values())
        if len(chosen) > 1:
            raise ExportError(f"{rater!r} labelled the responses of {len(chosen)} runs ({shown}):"
                              " a submission is one run's; choose it with --model or --run")
    else:
        try:
            named = select_runs(store.conn, "response", model=model, run=run)
        except RunChoiceError as exc:
            raise ExportError(str(exc)) from None
        chosen = [r for r in named if r.id in labelled]
        if not chosen:
            what = f"run {run}" if run not in (None, "") else f"model {model!r}"
            raise ExportError(f"{rater!r} labelled no response of {what}; runs it labelled:"
                              f" {shown}")
        try:
            one_run(chosen, f"model {model!r}")
        except RunChoiceError as exc:
            raise ExportError(str(exc).replace("choose one with --run (its number or label), or"
                                               " pool them with --pool",
                                               "a submission is one run's: choose it with --run"))\
                from None
    (mine,) = chosen
    return [(prefix, book.normalise(value)) for prefix, run_id, value in rows
            if run_id == mine.id]


def raters_with_carebench_labels(store: Store) -> list[str]:
    """Raters with at least one CARE-Bench label in force (of a prefix, or of a
    response), by name."""
    return [name for (name,) in store.query(
        """SELECT DISTINCT r.name FROM current_annotations c
           JOIN raters r ON r.id = c.rater_id JOIN questions q ON q.id = c.question_id
           WHERE q.key IN (?, ?) AND c.status = 'answered' AND c.target = ''
           ORDER BY r.name""", (CAREBENCH_QUESTION, RESPONSE_QUESTION))]


def _no_labels(rater: str, raters: list[str], shown: int = 12) -> str:
    asked = f"{CAREBENCH_QUESTION} or {RESPONSE_QUESTION}"
    if not raters:
        return f"{rater!r} has no label on {asked}; no rater has one yet"
    names = ", ".join(raters[:shown]) + (f" and {len(raters) - shown} more" if len(raters) > shown else "")
    return f"{rater!r} has no label on {asked}; raters who have: {names}"


def export_carebench_labels(store: Store, out: Path, rater: str | None = None,
                            phase: str | None = None,
                            model: str | None = None,
                            run: str | int | None = None) -> tuple[int, list[str]]:
    """Write `carebench_labels` as `prefix_id,predicted_label` CSV (the scorer's
    submission), or as JSONL objects with those two fields (by the file's
    suffix, `export_kind`). Nothing is written when the extension, the rater or
    the model is refused."""
    kind = export_kind(out)
    labels, ties = carebench_labels(store, rater, phase, model, run)
    with out.open("w", encoding="utf-8", newline="") as fh:
        if kind == "jsonl":
            for prefix_id, label in labels:
                fh.write(json.dumps({"prefix_id": prefix_id, "predicted_label": label},
                                    ensure_ascii=False) + "\n")
        else:
            w = csv.writer(fh)
            w.writerow(["prefix_id", "predicted_label"])
            w.writerows(labels)
    return len(labels), ties
