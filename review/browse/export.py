"""Export a Browse selection: rows (CSV / JSONL) and a case-study sheet
(Markdown / HTML) ready for a paper's appendix.

Identifiers: an item whose meta says `identifying: true` (e.g. a CliniCARE
task id, which names a patient) has its ids withheld unless the user asks
for them (`include_identifying`); `withhold_all_ids` numbers every case
instead of naming it; `anonymise_reviewers` names clinicians Clinician A,
B, ... The HTML sheet escapes every string from the data and loads nothing; the
CSV quotes any cell a spreadsheet would run as a formula (`safe_cell`).
The Markdown sheet quotes the case's words in fenced blocks that nothing in
them can close: they read as written in the raw file, and no renderer finds
a link, an image, HTML or formatting in them.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from labels.provenance import provenance, rows_digest
from review.browse.facets import GATE_NAMES, KIND_NAMES, label_name, rater_name
from review.browse.facts import (
    failed_criteria_facts,
    flagged_facts,
    label_facts,
    step_mark_facts,
    tag_facts,
)
from review.browse.query import PARENT
from review.browse.search import item_parts
from review.reviewing.names import item_name
from review.text import inline_code
from store import Store
from store.spreadsheet import safe_cell

COLUMNS = ["item_id", "kind", "dataset", "split", "case_id", "round_id", "model", "failed",
           "labels", "failed_gates", "step_marks", "tags", "flagged", "notes", "text"]
CASE_STUDY_LIMIT = 100
"""Cases a sheet holds at most (the first of the selection)."""
BLOCK_CHARS = 1500
"""Characters of one text block shown in a case-study sheet."""


@dataclass(frozen=True)
class ExportOptions:
    include_identifying: bool = False
    """Show the ids of items marked identifying (withheld by default)."""
    withhold_all_ids: bool = False
    """Replace every item and case id by 'case-N'."""
    anonymise_reviewers: bool = False
    """Name human raters 'Clinician A', 'Clinician B', ... in order of appearance."""
    text_chars: int = 4000
    """Characters of item text kept in a row (0: no text)."""


@dataclass
class StepMark:
    target: str
    error: str
    severity: int | None
    by: str
    note: str | None


@dataclass
class Case:
    """One exported item, identifiers already withheld as the options say."""
    number: int
    item_id: str
    kind: str
    dataset: str
    split: str | None
    case_id: str | None
    round_id: int | None
    model: str | None
    failed: bool
    labels: dict[str, str] = field(default_factory=dict)
    failed_gates: list[str] = field(default_factory=list)
    step_marks: list[StepMark] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    """'tag' on the whole item, 'tag (step N)' on a step."""
    tagged_steps: list[str] = field(default_factory=list)
    """Targets ('step:N') that carry a tag."""
    flagged: bool = False
    notes: list[str] = field(default_factory=list)
    """'rater: rationale' of the answers in force, and tag notes."""
    clinician_notes: list[str] = field(default_factory=list)
    """The notes written by clinicians (what a case-study sheet quotes)."""
    text: str = ""
    blocks: list[tuple[str, str]] = field(default_factory=list)
    """(heading, text) for the case-study sheet."""
    title: str = ""
    """The item by what it is, for the sheet's heading ("Model B's reply to
    conversation 12, after the patient's 2nd message"); ids never in it."""


class _Names:
    """Human raters as 'Clinician A', 'Clinician B', ... (in name order) when asked."""

    def __init__(self, store: Store, anonymise: bool):
        self.store = store
        humans = [r[0] for r in store.query("SELECT name FROM raters WHERE kind = 'human' ORDER BY name")]
        self.humans = set(humans)
        self.given = {name: "Clinician " + (chr(65 + n) if n < 26 else str(n + 1))
                      for n, name in enumerate(humans)} if anonymise else {}

    def __call__(self, who: str) -> str:
        base = who[len(PARENT):] if who.startswith(PARENT) else who
        if base not in self.given:  # by role, the stored name beside (a researcher's sheet)
            return rater_name(who, self.store, researcher=True)
        return rater_name(who.replace(base, self.given[base]))


def _chunks(ids: Sequence[int], size: int = 500) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield list(ids[start:start + size])


def gather_cases(store: Store, item_ids: Sequence[int], options: ExportOptions = ExportOptions(),
                 with_blocks: bool = False) -> list[Case]:
    """The items, in the order given, with their labels, failures, marks, tags and notes."""
    names = _Names(store, options.anonymise_reviewers)
    cases: list[Case] = []
    for chunk in _chunks(item_ids):
        cases.extend(_gather(store, chunk, options, names, with_blocks, len(cases)))
    return cases


def _gather(store: Store, ids: list[int], options: ExportOptions, names: _Names,
            with_blocks: bool, offset: int) -> list[Case]:
    js = json.dumps(ids)
    within = "IN (SELECT value FROM json_each(?))"
    rows = {r["id"]: r for r in store.query(
        "SELECT i.*, d.name AS dataset, p.payload AS parent_payload, p.uid AS parent_uid,"
        " coalesce(json_extract(i.meta, '$.identifying'), json_extract(p.meta, '$.identifying'), 0)"
        " AS identifying, s.body FROM items i JOIN datasets d ON d.id = i.dataset_id"
        " LEFT JOIN items p ON p.id = i.parent_id"
        " LEFT JOIN search_docs s ON s.item_id = i.id AND s.source = 'item'"
        f" WHERE i.id {within}", (js,))}
    cases = {}
    secrets: dict[int, list[str]] = {}
    for n, item_id in enumerate(ids, start=offset + 1):
        r = rows[item_id]
        hide = options.withhold_all_ids or (r["identifying"] and not options.include_identifying)
        if hide:
            secrets[item_id] = _identifiers(r)
        text = _scrub(r["body"] or "", secrets.get(item_id))
        cases[item_id] = Case(
            n, (f"case-{n}" if options.withhold_all_ids else f"withheld-{n}") if hide else r["uid"],
            r["kind"], r["dataset"], r["split"], None if hide else r["case_id"], r["round_id"],
            r["model"], bool(r["failed"]),
            text=text[:options.text_chars] + (" …" if len(text) > options.text_chars else ""))
    for item_id, who, value, _ in sorted(store.query(*label_facts(js)), key=lambda r: r[1]):
        cases[item_id].labels[names(who)] = value
    for item_id, gate in sorted({tuple(r) for r in store.query(*failed_criteria_facts(js))}):
        cases[item_id].failed_gates.append(gate)
    for item_id, target, error, severity, who, rationale in store.query(*step_mark_facts(js)):
        cases[item_id].step_marks.append(StepMark(target, error, severity, names(who), rationale))
    for item_id, target, tag, who, note in store.query(*tag_facts(js)):
        cases[item_id].tags.append(tag + (f" ({target.replace(':', ' ')})" if target else ""))
        if target:
            cases[item_id].tagged_steps.append(target)
        if note:
            cases[item_id].notes.append(f"{names(who)} (tag {tag}): {note}")
            cases[item_id].clinician_notes.append(cases[item_id].notes[-1])
    for item_id, who, rationale in store.query(
            "SELECT c.item_id, r.name, c.rationale FROM current_annotations c"
            " JOIN raters r ON r.id = c.rater_id WHERE c.rationale IS NOT NULL AND c.rationale != ''"
            f" AND c.target = '' AND c.item_id {within} ORDER BY c.id", (js,)):
        cases[item_id].notes.append(f"{names(who)}: {rationale}")
        if who in names.humans:
            cases[item_id].clinician_notes.append(cases[item_id].notes[-1])
    for (item_id,) in store.query(*flagged_facts(js)):
        cases[item_id].flagged = True
    if with_blocks:
        for item_id, case in cases.items():
            r = rows[item_id]
            case.blocks = _blocks(case, json.loads(r["payload"]),
                                  json.loads(r["parent_payload"]) if r["parent_payload"] else {})
            name = item_name(store, item_id)
            case.title = name.title if name is not None else ""
    for item_id, hidden in secrets.items():
        case = cases[item_id]
        case.notes = [_scrub(n, hidden) for n in case.notes]
        case.clinician_notes = [_scrub(n, hidden) for n in case.clinician_notes]
        case.blocks = [(h, _scrub(t, hidden)) for h, t in case.blocks]
        for m in case.step_marks:
            m.note = _scrub(m.note, hidden) if m.note else m.note
    return [cases[i] for i in ids]


def _identifiers(row: Any) -> list[str]:
    """The strings a withheld item must not show: its uid, case id and the
    fields its meta names in `identifying_fields` (e.g. meta.task_id)."""
    meta = json.loads(row["meta"] or "{}")
    out = [row["uid"], row["case_id"], row["parent_uid"]]
    for name in meta.get("identifying_fields") or []:
        if name.startswith("meta."):
            out.append(meta.get(name[5:]))
        elif name in row.keys():
            out.append(row[name])
    return sorted({str(v) for v in out if v and len(str(v)) >= 4}, key=len, reverse=True)


def _scrub(text: str, secrets: list[str] | None) -> str:
    for secret in secrets or ():
        text = text.replace(secret, "[withheld]")
    return text


def _blocks(case: Case, payload: dict[str, Any], parent: dict[str, Any]) -> list[tuple[str, str]]:
    """What the sheet quotes of an item: the patient's words, the reply, the
    marked and tagged steps of a run."""
    if case.kind in ("prefix", "response"):
        turns = (payload if case.kind == "prefix" else parent).get("turns") or []
        out = [(f"Patient · turn {i}", str(t)) for i, t in enumerate(turns, start=1)]
        if case.kind == "response":
            out.append((f"The reply ({case.model or 'model unknown'})",
                        payload.get("response") or f"(no response: {payload.get('error') or 'failed'})"))
        return out
    if case.kind == "conversation":
        return [(str(m.get("role", "")).capitalize() or "Message", str(m.get("content") or ""))
                for m in payload.get("messages") or [] if isinstance(m, dict)]
    parts = item_parts(case.kind, payload)
    if case.kind != "trajectory":
        return [(KIND_NAMES.get(case.kind, case.kind), "\n\n".join(t for _, t in parts))]
    wanted = {m.target for m in case.step_marks} | set(case.tagged_steps)
    out = []
    first = next((t for target, t in parts if target), None)
    if first:
        out.append(("Task", first))
    for target in sorted(wanted, key=lambda s: int(s.split(":")[1])):
        text = "\n\n".join(t for tg, t in parts if tg == target)
        out.append((target.replace("step:", "Step "), text or "(no text)"))
    if isinstance(payload.get("final_answer"), dict):
        out.append(("Final answer", str(payload["final_answer"].get("text") or "")))
    if payload.get("error"):
        out.append(("Error", str(payload["error"])))
    return out


# -- rows -----------------------------------------------------------------------------

def case_rows(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """One flat record per case, the COLUMNS in order."""
    return [{
        "item_id": c.item_id, "kind": c.kind, "dataset": c.dataset, "split": c.split,
        "case_id": c.case_id, "round_id": c.round_id, "model": c.model, "failed": c.failed,
        "labels": c.labels, "failed_gates": c.failed_gates,
        "step_marks": [{"step": m.target, "error": m.error, "severity": m.severity, "by": m.by,
                        "note": m.note} for m in c.step_marks],
        "tags": c.tags, "flagged": c.flagged, "notes": c.notes, "text": c.text,
    } for c in cases]


def export_provenance(cases: Sequence[Case]) -> dict[str, Any]:
    """The provenance of an export of these cases (``labels.provenance``): a digest of
    the rows; each case's labels are every rater's answer in force (the current phase).
    A CSV's is written beside it (``labels.provenance.write_sidecar``); JSONL ends with
    it, the case-study sheets show it last."""
    digest = rows_digest(case_rows(cases), COLUMNS)
    return provenance(digest, phase="current", export="browse selection")


def to_jsonl(cases: Sequence[Case]) -> str:
    """One case a line; the last line is ``{"provenance": {...}}``."""
    rows = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in case_rows(cases))
    return rows + json.dumps({"provenance": export_provenance(cases)}, ensure_ascii=False) + "\n"


def to_csv(cases: Sequence[Case]) -> str:
    """CSV; list and mapping columns hold JSON. Text a spreadsheet would run as
    a formula (a patient's `=1+1 ...`) is quoted with a leading apostrophe."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    for row in case_rows(cases):
        writer.writerow({k: safe_cell(json.dumps(v, ensure_ascii=False)
                                      if isinstance(v, (list, dict)) else v)
                         for k, v in row.items()})
    return out.getvalue()


# -- case-study sheets ---------------------------------------------------------------

KIND_WORDS = {"prefix": "a conversation", "response": "a model's reply", "trajectory": "an agent run",
              "graded_conversation": "a graded conversation"}


def _heading(c: Case) -> str:
    """The case by what it is; its model and split beside (a researcher's sheet)."""
    bits = [c.model, c.split]
    what = c.title or KIND_WORDS.get(c.kind, c.kind)
    return f"Case {c.number}: {what}" + "".join(f" · {b}" for b in bits if b)


def _clip(text: str) -> str:
    return text if len(text) <= BLOCK_CHARS else text[:BLOCK_CHARS].rsplit(" ", 1)[0] + " …"


_BACKTICKS = re.compile(r"`+")


def _verbatim(text: str) -> list[str]:
    """Lines of a fenced block quoting `text` exactly: the fence is longer
    than any run of backticks in the text, so no line of it can close the
    block (CommonMark), and what is inside is shown, never read as Markdown
    or HTML."""
    body = text.replace("\r\n", "\n").replace("\r", "\n")
    fence = "`" * max(3, 1 + max(map(len, _BACKTICKS.findall(body)), default=0))
    return [fence + "text", *body.split("\n"), fence]


_SCHEME = re.compile(r"(?i)\b(https?|ftp|mailto|file|data|javascript):")
_ENTITY = re.compile(r"&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")
_EDGE = re.compile(r"^(\s*)([-+>#]|\d{1,9}[.)])(?=\s|$)")


def plain_line(text: Any, table: bool = False) -> str:
    r"""Text as CommonMark that renders as it is written, in one line of a sheet (a
    heading, a list item, a table cell with `table`): escaped only where Markdown
    would read something in it (emphasis, code, a link or an autolink, HTML, an
    entity, a list or heading marker at its start, a table's `|`), so that the raw
    file reads as written too (no `&#58;`, no `\-` mid-line). Whitespace runs are
    one space: a cell stays one line."""
    line = " ".join(str(text).split())
    out = []
    for i, ch in enumerate(line):
        before = line[i - 1] if i else " "
        after = line[i + 1] if i + 1 < len(line) else " "
        if ch == "\\" and after in string.punctuation:
            out.append("\\\\")
        elif ch in "*`[]" or (ch == "|" and table) or (ch == "~" and "~" in (before, after)):
            out.append("\\" + ch)
        elif ch == "_" and not (before.isalnum() and after.isalnum()):
            out.append("\\_")  # inside a word an underscore is never emphasis
        elif ch == "<" and (after.isalpha() or after in "/!?"):
            out.append("\\<")  # an HTML tag or an autolink would start here
        else:
            out.append(ch)
    line = "".join(out)
    line = _ENTITY.sub(r"\\&", line)
    # A bare address or e-mail is linked by GitHub's Markdown (and linkify): a backslash
    # before its ':', '.' or '@' leaves it as text.
    line = _SCHEME.sub(r"\1\\:", line)
    line = re.sub(r"(?i)\b(www)\.", r"\1\\.", line)
    line = re.sub(r"(?<=\w)@(?=\w)", r"\\@", line)
    line = _EDGE.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], line)
    if line.endswith("#"):  # a heading's closing sequence would be taken off
        line = line[:-1] + "\\#"
    return line


def _cell(text: Any) -> str:
    return plain_line(text, table=True)  # '|' included: a cell stays one cell


def _mark_line(m: StepMark) -> str:
    severity = f", severity {m.severity}" if m.severity else ""
    return f"{m.target.replace('step:', 'step ')}: {label_name(m.error, True)}{severity} ({m.by})" + (
        f": {m.note}" if m.note else "")


def case_study_markdown(cases: Sequence[Case], title: str = "Case studies") -> str:
    """A Markdown sheet: per case the words quoted, then a table of labels."""
    out = [f"# {_cell(title)}", ""]
    for c in cases[:CASE_STUDY_LIMIT]:
        out += [f"## {_cell(_heading(c))}", "", f"Item: {inline_code(c.item_id)}"
                + (f" · dataset {_cell(c.dataset)}" if c.dataset else ""), ""]
        for heading, text in c.blocks:
            out += [f"**{_cell(heading)}**", ""]
            out += _verbatim(_clip(text))
            out.append("")
        if c.labels:
            out += ["| Rater | Label |", "|---|---|"]
            out += [f"| {_cell(who)} | {_cell(label_name(v, True))} |" for who, v in c.labels.items()]
            out.append("")
        for name, values in (("Failed gates", [GATE_NAMES.get(g, g) for g in c.failed_gates]),
                             ("Marked steps", [_mark_line(m) for m in c.step_marks]),
                             ("Tags", c.tags), ("Clinicians' notes", c.clinician_notes)):
            if values:
                out += [f"**{name}**", ""] + [f"- {_cell(v)}" for v in values] + [""]
    if len(cases) > CASE_STUDY_LIMIT:
        out.append(f"*The first {CASE_STUDY_LIMIT} of {len(cases)} selected items.*")
    out += ["", "**Provenance**", ""]
    out += [f"- {key}: {_cell(value if isinstance(value, str) else json.dumps(value))}"
            for key, value in export_provenance(cases).items()]
    return "\n".join(out).rstrip() + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;line-height:1.45;"
        "color:#1f2328}h2{border-top:1px solid #d0d7de;padding-top:1rem}blockquote{margin:.3rem 0 1rem;"
        "padding:.4rem .8rem;border-left:3px solid #8c959f;background:#f6f8fa;white-space:pre-wrap}"
        "table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:.25rem .6rem;"
        "text-align:left}.meta{color:#57606a}")


def case_study_html(cases: Sequence[Case], title: str = "Case studies") -> str:
    """A self-contained HTML sheet; every string from the data is escaped."""
    e = html.escape
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(title)}</title><style>{_CSS}</style></head><body>", f"<h1>{e(title)}</h1>"]
    for c in cases[:CASE_STUDY_LIMIT]:
        out.append(f"<h2>{e(_heading(c))}</h2>")
        out.append(f'<p class="meta">Item: <code>{e(c.item_id)}</code> · dataset {e(c.dataset)}</p>')
        for heading, text in c.blocks:
            out.append(f"<p><strong>{e(heading)}</strong></p><blockquote>{e(_clip(text))}</blockquote>")
        if c.labels:
            out.append("<table><tr><th>Rater</th><th>Label</th></tr>" + "".join(
                f"<tr><td>{e(who)}</td><td>{e(label_name(v, True))}</td></tr>" for who, v in c.labels.items())
                + "</table>")
        for name, values in (("Failed gates", [GATE_NAMES.get(g, g) for g in c.failed_gates]),
                             ("Marked steps", [_mark_line(m) for m in c.step_marks]),
                             ("Tags", c.tags), ("Clinicians' notes", c.clinician_notes)):
            if values:
                out.append(f"<p><strong>{name}</strong></p><ul>"
                           + "".join(f"<li>{e(v)}</li>" for v in values) + "</ul>")
    if len(cases) > CASE_STUDY_LIMIT:
        out.append(f"<p><em>The first {CASE_STUDY_LIMIT} of {len(cases)} selected items.</em></p>")
    out.append("<h2>Provenance</h2><pre>" + e(json.dumps(export_provenance(cases), indent=2,
                                                          ensure_ascii=False)) + "</pre>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
