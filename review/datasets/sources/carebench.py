"""CARE-Bench importers: prefixes, raw generations, mapped responses, direct labels.

Items: a *prefix* (`uid` = prefix_id) carries the patient turns so far; a
*response* (`uid` = prefix_id::model) carries one model's reply and links to
its prefix. The gold label is an annotation by the reference rater
`carebench-gold` on the prefix question; mapped labels are annotations by a
machine rater on the response question; a direct-label CSV is a model's own
label for the prefix (the model as a machine rater).

Read as the CARE-Bench release writes them:
- a raw generation whose `raw_model_response` is `""` and `generation_failed`
  false is a real, empty reply (a reasoning model that spent its output
  budget): kept and shown as an empty reply;
- a mapped-responses file (`mapped_responses.jsonl`: the raw-generation fields
  plus `model_alias`, `mapper_model`, `mapper_prompt_version`,
  `mapper_raw_output` and `predicted_label`, which some writers call
  `mapped_label`) adds no items: each label goes onto the response already
  imported for its `prefix_id` and model (`model_requested`, `model_actual` or
  the submitter's alias, in that order). A label whose response is not in the
  database is refused, naming it: import the raw generations first (a label
  on a placeholder reply would be a label on nothing a reviewer can check).
  The mapper is the machine rater `<mapper_model>@<mapper_prompt_version>`
  (`--rater` names it otherwise; carelens's own mapper raters are named
  `provider:model@prompt_version`: a file that names no provider gives none,
  unless it has a `mapper_provider` field); its raw output, the model alias
  and the mapper's fields are kept in each answer's extra;
- a direct-label submission `prefix_id,predicted_label` gives each prefix one
  label: a prefix given again is refused, naming both lines;
- a CSV that pandas wrote with its index (a first column named `""` or
  `Unnamed: 0`) is read without that column.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import tokenize
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from review.datasets.sources.base import Format, ImportOptions, rater_record_for, register
from review.datasets.sources.fields import Fields, as_bool, as_int, has_field, names, pick, require
from review.datasets.sources.readers import read_rows
from store.db import to_json
from store.records import AnnotationRecord, ItemRecord, RaterRecord, Record, RunRecord
from store.runs import RunNames, RunResolver
from store.writer import MAX_ID_CHARS, InputError

FAMILY = "carebench"
GOLD_RATER = "carebench-gold"
PREFIX_QUESTION = "carebench.escalation_needed"
RESPONSE_QUESTION = "carebench.response_action"
PREFIX_FIELDS = {"prefix_id", "case_id", "round_id", "split", "gold_label",
                 "input_patient_turns"}
PANDAS_INDEX = re.compile(r"\A(?:|Unnamed: \d+)\Z")
"""The header pandas' `to_csv` gives its index column (empty, or `Unnamed: 0`
once such a file has been read back and written again)."""


def without_index(fields: set[str]) -> set[str]:
    """A CSV's field names without a pandas index column."""
    return {f for f in fields if not PANDAS_INDEX.match(f)}


def _rows(path: Path, only: tuple[str, ...] | None = None) -> Iterator[tuple[int, dict]]:
    """`read_rows`, with a pandas index column left out."""
    rows = read_rows(path, only)
    first = next(rows, None)
    if first is None:
        return
    index = [k for k in first[1] if PANDAS_INDEX.match(k)]
    if not index:
        yield first
        yield from rows
        return
    for line, row in chain([first], rows):
        for k in index:
            row.pop(k, None)
        yield line, row


def response_uid(prefix_id: str, model: str, protocol: Any = None, prompt_version: Any = None,
                 attempt: Any = None) -> str:
    """A response's uid: `prefix_id::model`, then, where the generation names them, its
    run's protocol and prompt version (`::prompted@care_bench_prompted_v1`) and an
    attempt after the first (`::attempt-2`). Deterministic: the same row gives the same
    uid in every database, whatever was imported before it, so labels exported from one
    database go back into another onto the same response. (A response imported before
    runs existed keeps the uid it had: `prefix_id::model`.)"""
    uid = f"{prefix_id}::{model}"
    if protocol not in (None, "") or prompt_version not in (None, ""):
        uid += "::" + (str(protocol) if protocol not in (None, "") else "") + (
            f"@{prompt_version}" if prompt_version not in (None, "") else "")
    if attempt not in (None, "", 1, "1"):
        uid += f"::attempt-{attempt}"
    return uid


class _GenerationRuns:
    """The runs of a generations file, each made once from the first row of it: its
    identity (`store.runs`: the model requested, provider, protocol, prompt version and
    attempt), and the uid each of its responses takes: the one it has where the run
    was imported before (a response imported before runs existed keeps its old uid),
    else `response_uid`, and if another run's response holds that uid (runs that differ
    only in their provider), that uid with the run's digest."""

    def __init__(self, dataset: str, options: ImportOptions):
        self.dataset, self.query, self.attempt = dataset, options.query, options.attempt
        self._runs: dict[tuple, tuple[RunRecord, dict[str, str], set[str], str]] = {}

    def of(self, row: dict, model: str) -> tuple[RunRecord, dict[str, str], set[str], str]:
        requested = row.get("model_requested")
        requested = model if requested in (None, "") else requested
        parts = (requested, row.get("provider"), row.get("protocol"), row.get("prompt_version"),
                 row.get("model_alias"), model)
        known = self._runs.get(parts)
        if known is not None:
            return known
        identity = {"model_requested": requested, "provider": row.get("provider"),
                    "protocol": row.get("protocol"), "prompt_version": row.get("prompt_version"),
                    "attempt": self.attempt}
        alias = row.get("model_alias")
        run = RunRecord(self.dataset, "response", identity, model_actual=row.get("model_actual"),
                        aliases=(str(alias),) if alias not in (None, "") else ())
        existing: dict[str, str] = {}
        taken: set[str] = set()
        if self.query is not None:
            for prefix, uid in self.query(
                    "SELECT p.uid, i.uid FROM items i JOIN items p ON p.id = i.parent_id"
                    " WHERE i.run_id = (SELECT r.id FROM runs r JOIN datasets d ON d.id ="
                    " r.dataset_id WHERE d.name = ? AND r.kind = 'response' AND r.key = ?)",
                    (self.dataset, run.key)):
                existing[prefix] = uid
            taken = {uid for (uid,) in self.query(
                "SELECT uid FROM items WHERE kind = 'response' AND model = ?", (model,))}
            taken -= set(existing.values())
        suffix = "::run-" + hashlib.sha256(run.key.encode()).hexdigest()[:8]
        known = self._runs[parts] = (run, existing, taken, suffix)
        return known

    def uid(self, row: dict, prefix_id: str, model: str) -> tuple[str, RunRecord]:
        run, existing, taken, suffix = self.of(row, model)
        uid = existing.get(prefix_id)
        if uid is None:
            uid = response_uid(prefix_id, model, row.get("protocol"), row.get("prompt_version"),
                               self.attempt)
            if uid in taken:
                uid += suffix
        return uid, run


LISTED_TURNS = re.compile(r"""\A\[\s*(?:\]\s*\Z|[bBrRuUfF]{0,2}['"])""")
"""A text cell shaped like a list of strings: `[` then a quote (or just `[]`). A
turn that merely starts with a bracket ("[laughs] fine") is not shaped like one."""


def _turns(value: Any, where: str, field: str = "input_patient_turns") -> list[str]:
    """The patient turns: a list of strings; one string is one turn, unless it
    is shaped like a list of strings, as a CSV export of the table writes the list:
    JSON (`["a", "b"]`), Python's repr (`['a', 'b']`, pandas' `to_csv` of a list
    column) or numpy's (`['a'\n 'b']`, pandas or `datasets` `to_csv` of an array
    column). A text shaped like a list that is none of these is refused: its
    brackets and quotes are never kept as what the patient said."""
    if isinstance(value, str):
        if LISTED_TURNS.match(value.lstrip()):
            return _listed_turns(value.strip(), where, field)
        return [value]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InputError(f"{where}: field {field!r} must be a list of strings")
    return list(value)


def _listed_turns(text: str, where: str, field: str) -> list[str]:
    """A list of strings written as text (see `_turns`). Nothing is evaluated: JSON is
    parsed as JSON; otherwise the text is split into Python tokens, which must be
    string literals between `[` and `]`, all separated by commas (Python's repr) or
    all by spaces and line breaks alone (numpy's), and each literal is read on its
    own with `ast.literal_eval` (adjacent literals read together would be joined
    into one turn)."""
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if isinstance(listed, list) and all(isinstance(t, str) for t in listed):
        return listed
    refused = InputError(f"{where}: field {field!r} looks like a list of turns but cannot be read"
                         " (write it as a JSON list of strings, e.g. [\"turn 1\", \"turn 2\"])")
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
                  if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)]
    except (tokenize.TokenError, SyntaxError):
        raise refused from None
    if len(tokens) < 2 or tokens[0].string != "[" or tokens[-1].string != "]":
        raise refused
    inner = tokens[1:-1]
    strings = inner[0::2] if any(t.string == "," for t in inner) else inner
    commas = inner[1::2] if strings is not inner else []
    if (not all(t.type == tokenize.STRING for t in strings)
            or not all(t.type == tokenize.OP and t.string == "," for t in commas)
            or len(strings) + len(commas) != len(inner)):
        raise refused
    turns = []
    for token in strings:
        try:
            turn = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):
            raise refused from None
        if not isinstance(turn, str):
            raise refused
        turns.append(turn)
    return turns


def _case_and_round(prefix_id: str, row: dict, where: str) -> tuple[str | None, int | None]:
    case_id = pick(row, "case_id")
    round_id = as_int(pick(row, "round_id"), "round_id", where)
    if case_id is None and "_r" in prefix_id:
        case_id = prefix_id.rsplit("_r", 1)[0]
    return _case_text(case_id, where), round_id


def _case_text(case_id: Any, where: str) -> str | None:
    """A case id as text: given as text or a number (a CSV or Parquet column)."""
    if case_id is None or type(case_id) is str:
        return case_id
    if isinstance(case_id, (int, float)) and not isinstance(case_id, bool):
        return str(case_id)
    raise InputError(f"{where}: field 'case_id' must be text, got {type(case_id).__name__}")


def read_prefixes(path: Path, options: ImportOptions) -> Iterator[Record]:
    dataset = options.dataset or FAMILY
    yield RaterRecord(name=GOLD_RATER, kind="reference", role="gold",
                      meta={"about": "CARE-Bench gold label of each prefix"})
    name = str(path)
    golds: dict[str, tuple[int, Any]] = {}
    """The gold label each prefix was given, and on which line."""
    for line, row in _rows(path):
        where = f"{name}:{line}"
        prefix_id = require(row, "prefix_id", where)
        gold = pick(row, "gold_label")
        first = golds.setdefault(prefix_id, (line, gold))
        if first[1] != gold:  # one prefix, two gold labels: which one is the reference?
            raise InputError(f"{where}: prefix {prefix_id!r} again, with gold label {gold!r};"
                             f" line {first[0]} gave it {first[1]!r}")
        turns = _turns(require(row, "input_patient_turns", where, (list, str)), where)
        case_id, round_id = _case_and_round(prefix_id, row, where)
        meta = {k: v for k, v in row.items() if k not in PREFIX_FIELDS}
        yield ItemRecord(
            uid=prefix_id, kind="prefix", dataset=dataset, payload={"turns": turns},
            case_id=case_id, round_id=round_id, split=pick(row, "split"), meta=meta,
            replace_stub=True, line=line,
        )
        if gold is not None:
            yield AnnotationRecord(item_uid=prefix_id, question_key=PREFIX_QUESTION,
                                   rater=GOLD_RATER, value=str(gold), line=line)


def _line(where: str) -> int | None:
    """The line of a `file:line` place, for a record made from that row."""
    tail = where.rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


def _stub_prefix(prefix_id: str, row: dict, dataset: str, where: str) -> ItemRecord:
    """A prefix made from a generation row, used when the prefixes file has
    not been imported (yet); replaced when it is."""
    info = pick(row, "patient_information")
    turns = [] if info is None else _turns(info, where, "patient_information_available_so_far")
    case_id, round_id = _case_and_round(prefix_id, row, where)
    return ItemRecord(uid=prefix_id, kind="prefix", dataset=dataset, payload={"turns": turns},
                      case_id=case_id, round_id=round_id, split=pick(row, "split"),
                      meta={"stub": True}, line=_line(where))


GENERATION_KEEP = ("protocol", "prompt_version", "provider", "model_actual", "model_requested",
                   "model_alias")


def read_generations(path: Path, options: ImportOptions) -> Iterator[Record]:
    """One response item per row (a full study is tens of thousands of rows:
    this loop is kept lean; every check of the slower helpers still holds)."""
    dataset = options.dataset or FAMILY
    stubbed: set[str] = set()
    runs = _GenerationRuns(dataset, options)
    name = str(path)
    read = ("prefix_id", "model", "generation_failed", "raw_model_response", "case_id", "round_id",
            "split", "error_message")
    fields = Fields(*read)
    # Only these are stored: the rest of a row (its copy of the conversation) is not.
    kept = names(*read, "patient_information") + GENERATION_KEEP
    for line, row in read_rows(path, kept):
        prefix_id, model, failed, response, case_id, round_id, split, error = fields(row)
        if type(prefix_id) is not str or type(model) is not str \
                or len(prefix_id) > MAX_ID_CHARS or len(model) > MAX_ID_CHARS:
            where = f"{name}:{line}"
            prefix_id, model = require(row, "prefix_id", where), require(row, "model", where)
        if type(failed) is not bool:
            failed = as_bool(failed, "generation_failed", f"{name}:{line}")
        if type(response) is not str:
            if response is not None:
                raise InputError(f"{name}:{line}: field 'raw_model_response' must be text")
            if _empty_reply(row):
                response = ""  # a real reply with no text: kept, shown as empty
            elif not failed:
                raise InputError(f"{name}:{line}: missing 'raw_model_response' on a row not marked"
                                 " generation_failed")
        if prefix_id not in stubbed:
            stubbed.add(prefix_id)
            yield _stub_prefix(prefix_id, row, dataset, f"{name}:{line}")
        if type(round_id) is not int:
            round_id = as_int(round_id, "round_id", f"{name}:{line}")
        if case_id is None and "_r" in prefix_id:
            case_id = prefix_id.rsplit("_r", 1)[0]
        elif type(case_id) is not str:
            case_id = _case_text(case_id, f"{name}:{line}")
        if error is not None and type(error) is not str:
            error = to_json(error)  # an error object (e.g. the provider's): kept, shown as text
        # input_messages repeat the prefix's turns (and the file keeps them);
        # storing them again per response would double the database.
        meta = {k: v for k in GENERATION_KEEP if (v := row.get(k)) is not None}
        uid, run = runs.uid(row, prefix_id, model)
        yield ItemRecord(
            uid, "response", dataset,
            {"response": response or "", "error": error}, prefix_id,
            case_id, round_id, split, model, failed, meta,
            True, line, run,  # fills in a placeholder another file made of this response
        )


def _empty_reply(row: dict) -> bool:
    """The reply field is there and holds "": an empty reply, not a missing one."""
    return any(row.get(n) == "" for n in names("raw_model_response"))


MAPPED_MODELS = ("model_requested", "model_actual", "model_alias", "model", "model_name")
"""Where a mapped row names the model whose response it labels (`store.runs.RunNames`):
the model requested, the model served, the submitter's alias, or a name of unsaid kind."""
MAPPER_KEPT = ("model_alias", "mapper_model", "mapper_prompt_version", "mapper_provider")


def mapper_name(row: dict) -> str | None:
    """`<provider>:<mapper_model>@<mapper_prompt_version>` from a mapped row (the
    parts it has), or None when it names no mapper."""
    model = pick(row, "mapper")
    if model is None:
        return None
    name = str(model)
    provider = row.get("mapper_provider")
    if provider and ":" not in name:
        name = f"{provider}:{name}"
    version = row.get("mapper_prompt_version")
    if version not in (None, "") and "@" not in name:
        name = f"{name}@{version}"
    return name


class _MappedRuns:
    """Which imported response a mapped row labels: the run its names name (resolved
    once per set of names by `store.runs.RunResolver`: requested with requested, alias
    with alias, served with served, narrowed by the row's protocol, prompt version and
    provider; several runs fitting is refused, naming them), then that run's response
    to the row's prefix. Never a response of another run."""

    def __init__(self, options: ImportOptions):
        self.query, self.dataset, self.attempt = options.query, options.dataset, options.attempt
        self.resolver = RunResolver(self.query, "response")
        self._responses: dict[int, dict[str, tuple[str, Any]]] = {}
        self._aliased: set[tuple[int, str]] = set()

    def response(self, row: dict, prefix_id: str, where: str) -> tuple[str, Any, RunRecord | None]:
        """(uid of the response, the run, a record naming the run's alias if it is new)."""
        names = RunNames.from_row(row)
        if not names.given():
            require(row, "model", where)  # names the missing field
        if self.attempt is not None:
            names.qualifiers["attempt"] = str(self.attempt)
        try:
            run = self.resolver.resolve(names, self.dataset, where)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        responses = self._responses.get(run.id)
        if responses is None:
            responses = self._responses[run.id] = {p: (u, a) for p, u, a in self.query(
                "SELECT p.uid, i.uid, json_extract(i.meta, '$.model_actual') FROM items i"
                " JOIN items p ON p.id = i.parent_id WHERE i.run_id = ?"
                " AND NOT coalesce(json_extract(i.meta, '$.stub'), 0)", (run.id,))}
        found = responses.get(prefix_id)
        if found is None:
            raise InputError(f"{where}: {run.describe()} has no response to prefix {prefix_id!r};"
                             " import its raw generations first (a mapped label belongs to the"
                             " response it was given for)")
        uid, served = found
        if names.actual is not None and served is not None and str(served) != names.actual:
            raise InputError(f"{where}: model_actual {names.actual!r}, but the response of"
                             f" {run.describe()} to prefix {prefix_id!r} was served by"
                             f" {str(served)!r}: a label belongs to the response it was given for")
        alias = names.alias
        named = None
        if alias is not None and alias not in run.aliases and (run.id, alias) not in self._aliased:
            self._aliased.add((run.id, alias))
            named = RunRecord(run.dataset, run.kind, run.identity, aliases=(alias,))
        return uid, run, named


def read_mapped(path: Path, options: ImportOptions) -> Iterator[Record]:
    """The mapper's label of each response already imported, on the response of the run
    the row names (see `_MappedRuns`); no items."""
    announced: set[str] = set()
    name = str(path)
    if options.query is None:
        raise InputError(f"{name}: a mapped-responses file labels responses already imported:"
                         " it is read into a database")
    runs = _MappedRuns(options)
    for line, row in _rows(path):
        where = f"{name}:{line}"
        prefix_id = require(row, "prefix_id", where)
        label = require(row, "mapped_label", where)
        mapper = str(options.rater or mapper_name(row) or "mapper")
        if mapper not in announced:
            announced.add(mapper)
            yield rater_record_for(
                mapper, "machine", role="mapper",
                meta={k: row[k] for k in ("mapper_model", "mapper_prompt_version",
                                          "mapper_provider") if row.get(k) not in (None, "")})
        uid, run, named = runs.response(row, prefix_id, where)
        if named is not None:
            yield named
        extra: dict[str, Any] = {k: row[k] for k in MAPPER_KEPT if row.get(k) not in (None, "")}
        raw = row.get("mapper_raw_output")
        if raw is not None:
            extra["raw_output"] = raw
        if run.model_requested != row.get("model_requested"):
            extra["matched_run"] = run.label
        yield AnnotationRecord(item_uid=uid, question_key=RESPONSE_QUESTION, rater=mapper,
                               value=str(label), line=line, extra=extra,
                               rationale=row.get("mapper_rationale") or row.get("rationale"))


def read_direct_labels(path: Path, options: ImportOptions) -> Iterator[Record]:
    rater = options.rater or path.stem
    yield rater_record_for(rater, "machine", role="model")
    first: dict[str, int] = {}
    for line, row in _rows(path):
        where = f"{path}:{line}"
        prefix_id = require(row, "prefix_id", where)
        label = require(row, "predicted_label", where)
        seen = first.setdefault(prefix_id, line)
        if seen != line:
            raise InputError(f"{where}: prefix {prefix_id!r} again; line {seen} gave its label"
                             " (a submission gives each prefix one label)")
        yield AnnotationRecord(item_uid=prefix_id, question_key=PREFIX_QUESTION, rater=rater,
                               value=label, line=line)


register(Format(
    "carebench-prefixes", FAMILY, read_prefixes,
    lambda p, f: has_field(f, "prefix_id") and has_field(f, "input_patient_turns"),
    "evaluation prefixes (JSONL, Parquet or CSV) with gold labels",
))
def _mapped(fields: set[str]) -> bool:
    """A mapped-responses file: it may carry the reply too, but its labels make it one."""
    return bool({"mapped_label", "mapper_label", "mapper_model", "mapper_raw_output",
                 "mapper_prompt_version"} & fields) or (
        "predicted_label" in fields and "raw_model_response" in fields)


register(Format(
    "carebench-generations", FAMILY, read_generations,
    lambda p, f: has_field(f, "prefix_id") and "raw_model_response" in f and not _mapped(f),
    "raw generations JSONL: one response item per row, failures kept",
))
register(Format(
    "carebench-mapped", FAMILY, read_mapped,
    lambda p, f: has_field(f, "prefix_id") and _mapped(f),
    "mapped responses JSONL: the mapper's label of each response",
))
register(Format(
    "label-csv", FAMILY, read_direct_labels,
    lambda p, f: without_index(f) == {"prefix_id", "predicted_label"},
    "direct-label CSV (or JSONL) prefix_id,predicted_label: a model's label for each prefix",
))
