"""HealthBench: rubric rows, model completions, grader results, meta-evaluation rows.

Formats:
- `healthbench` (JSONL): rows `prompt_id, prompt, rubrics, example_tags,
  ideal_completions_data, canary`. Each row is the graded-conversation item
  `hb:<prompt_id>`: the conversation, and as its completion the
  physician-written ideal completion when the row has one
  (`completion_source` = ideal_completion; otherwise no completion). Each
  rubric criterion is a question of kind criterion bound to that item, with
  its points (negative allowed: a MUST-NOT criterion), tags, axis and level.
- `healthbench-results`: the full-results file OpenAI's simple-evals writes
  (`healthbench_<model>_<date>[_<time>]_allresults.json`: one JSON document
  `{score, metrics, htmls, convos, metadata}`). Each entry of
  `metadata.example_level_metadata` (`prompt_id`, `completion_id`, `prompt`
  as sent, `completion` as `[{role, content}]`, `rubric_items[{criterion,
  points, tags, criteria_met, explanation}]`, `usage`) is a completion item,
  and the grader's verdict on each rubric item is its answer to that
  criterion. The file does not name the grader: simple-evals grades with
  `gpt-4.1-2025-04-14` and its own template, so the grader is the machine
  rater `SIMPLE_EVALS_GRADER` (an assumption; `--rater` names another). The
  completion's model is the one the file name gives (simple-evals names the
  file after the sampled model). The file's own `score` and `metrics` are
  not imported: carelens computes scores from the verdicts (a file's metrics
  need not follow upstream's formula). A prompt or criterion the `healthbench`
  rows have not brought yet is made from the entry (placeholders the rows
  fill in). The run is the file's (`results_run`: the model it is named after
  and the file: two results files of one model are two runs); each verdict
  keeps how many rubric items its example was graded on (`RUBRIC_ITEMS`), since
  simple-evals scores an example on those.
- `healthbench-examples` (JSONL): those same example-level records, one JSON
  object per line, read exactly as a results file's entries (the model from a
  file name of simple-evals' shape, else none).
- `healthbench-completions` (JSONL): `prompt_id, completion_id, model,
  completion` -> the graded-conversation item `hb:<prompt_id>::<completion_id>`,
  whose parent is the prompt item (it shares the prompt's criteria). The
  completion is text or a list of messages `[{role, content}]` (the
  assistant's messages are the reply). Import the `healthbench` rows first, or
  the meta rows, which carry the prompt.
- `healthbench-grades` (JSONL): `prompt_id, completion_id, criterion,
  criteria_met, explanation` -> answers of a machine judge (`--rater`, else
  the row's `grader`, else `healthbench-grader`). The criterion is named by
  its text.
- `healthbench-meta` (JSONL): `prompt, completion, rubric, binary_labels,
  anonymized_physician_ids, category, prompt_id, completion_id` -> the prompt
  item (a stub, completed when the `healthbench` row is imported), the
  completion item (a stub too: it names no model, and a completions or
  results file imported later fills it in), the criterion, and one answer per
  physician, each physician a human rater `healthbench-physician:<anonymized
  id>`; plus the grader's answer when the row carries one (`grader_label` /
  `criteria_met` / `model_label`), by `--rater` or `healthbench-meta-grader`.

A completion's model is kept whatever order the files come in: a file that
names it fills in a completion that a meta row only named; one that names it
too finds the completion there and leaves it as it is.

Question keys: `hb:<prompt_id>:<h>` where <h> is the first 10 hex digits of
the SHA-1 of the criterion text with whitespace collapsed. Keys follow from
the text alone, so grades and meta rows find their criterion without a
lookup; the same criterion of a prompt is one question whichever file named
it first. (A criterion repeated word for word within one prompt gets `-2`,
`-3`: grades naming that text go to the first.)
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from review.datasets.sources.atif import read_json_file
from review.datasets.sources.base import Format, ImportOptions, rater_record_for, register
from review.datasets.sources.fields import ID_FIELDS, as_bool, id_length
from review.datasets.sources.readers import quote, read_rows
from store.records import (
    AnnotationRecord,
    ItemRecord,
    QuestionRecord,
    RaterRecord,
    Record,
    RunRecord,
)
from store.writer import InputError

FAMILY = "healthbench"
RUBRIC = "rubric"
GRADER = "healthbench-grader"
META_GRADER = "healthbench-meta-grader"
PHYSICIAN_PREFIX = "healthbench-physician"
GRADER_FIELDS = ("grader_label", "criteria_met", "model_label", "grader_met")
RUBRIC_ITEMS = "rubric_items"
"""The extra of a grader's verdict from a simple-evals record: how many rubric items
that example was graded on (`labels.healthbench_score` scores it on those)."""
SIMPLE_EVALS_GRADER = "openai:gpt-4.1-2025-04-14@simple-evals-healthbench"
"""The grader of a simple-evals results file, which does not name it: simple-evals'
HealthBench eval grades with gpt-4.1-2025-04-14 and its GRADER_TEMPLATE."""
RESULTS_NAME = re.compile(
    r"^(?P<eval>healthbench(?:_hard|_consensus)?)_(?P<model>.+?)_(?P<date>\d{8})"
    r"(?:_\d{4,6})?(?:_DEBUG)?_allresults\.json$")
"""simple-evals' file name: `{eval}_{sampled model}_{YYYYMMDD_HHMMSS}[_DEBUG]_allresults.json`."""


def prompt_uid(prompt_id: str) -> str:
    return f"hb:{prompt_id}"


def completion_uid(prompt_id: str, completion_id: str) -> str:
    return f"hb:{prompt_id}::{completion_id}"


def criterion_key(prompt_id: str, criterion: str) -> str:
    digest = hashlib.sha1(" ".join(criterion.split()).encode("utf-8")).hexdigest()[:10]
    return f"hb:{prompt_id}:{digest}"


def _text(row: Mapping[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if value is None or value == "":
        raise InputError(f"{where}: missing required field {name!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{where}: field {name!r} must be text, got {type(value).__name__}")
    return id_length(value, name, where) if name in ID_FIELDS else value


def _conversation(value: Any, where: str, name: str = "prompt") -> list[dict[str, str]]:
    if value is None:
        raise InputError(f"{where}: missing required field {name!r}")
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: field {name!r} must be a non-empty list of {{role, content}}")
    for i, turn in enumerate(value):
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str) \
                or not isinstance(turn.get("content"), str):
            raise InputError(f"{where}: {name}[{i}]: expected {{role: text, content: text}}")
    return [{"role": t["role"], "content": t["content"]} for t in value]


def _criterion_meta(tags: list[str], index: int, points: float | None) -> dict[str, Any]:
    def tag(prefix: str) -> str | None:
        return next((t.split(":", 1)[1] for t in tags if t.startswith(prefix + ":")), None)

    return {"group": "healthbench", "tags": tags, "axis": tag("axis"), "level": tag("level"),
            "cluster": tag("cluster"), "must_not": points is not None and points < 0,
            "index": index}


# -- healthbench rows --------------------------------------------------------------

def read_rubric_rows(path: Path, options: ImportOptions) -> Iterator[Record]:
    dataset = options.dataset or FAMILY
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        prompt_id = _text(row, "prompt_id", where)
        uid = prompt_uid(prompt_id)
        turns = _conversation(row.get("prompt"), where)
        rubrics = row.get("rubrics")
        if not isinstance(rubrics, list) or not rubrics:
            raise InputError(f"{where}: field 'rubrics' must be a non-empty list of criteria"
                             if rubrics is not None else f"{where}: missing required field 'rubrics'")
        ideal = row.get("ideal_completions_data")
        if ideal is not None and not isinstance(ideal, dict):
            raise InputError(f"{where}: field 'ideal_completions_data' must be null or an object")
        ideal = ideal or {}
        tags = row.get("example_tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InputError(f"{where}: field 'example_tags' must be a list of text tags,"
                             f" got {quote(tags)}")
        payload = {"turns": turns, "completion": ideal.get("ideal_completion"),
                   "completion_source": "ideal_completion" if ideal.get("ideal_completion") else None}
        meta = {
            "example_tags": tags,
            "theme": next((t.split(":", 1)[1] for t in tags if t.startswith("theme:")), None),
            "physician_agreed_category": next(
                (t.split(":", 1)[1] for t in tags if t.startswith("physician_agreed_category:")), None),
            "ideal_completions_group": ideal.get("ideal_completions_group"),
            "ideal_completions_ref_completions": ideal.get("ideal_completions_ref_completions"),
            "canary": row.get("canary"), "prompt_id": prompt_id,
        }
        yield ItemRecord(uid=uid, kind="graded_conversation", dataset=dataset, payload=payload,
                         case_id=prompt_id, meta={k: v for k, v in meta.items() if v is not None},
                         replace_stub=True, line=line)
        seen: dict[str, int] = {}
        for i, crit in enumerate(rubrics):
            yield _criterion(crit, i, prompt_id, uid, f"{where}: rubrics[{i}]", seen)


def _criterion(crit: Any, index: int, prompt_id: str, uid: str, where: str,
               seen: dict[str, int]) -> QuestionRecord:
    if not isinstance(crit, dict):
        raise InputError(f"{where}: expected an object {{criterion, points, tags}}")
    text = crit.get("criterion")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{where}.criterion: " + ("missing required field" if text is None
                                                   else "expected non-empty text"))
    points = crit.get("points")
    if points is None:
        raise InputError(f"{where}.points: missing required field")
    if isinstance(points, bool) or not isinstance(points, (int, float)):
        raise InputError(f"{where}.points: expected a number, got {quote(points)}")
    try:
        finite = math.isfinite(points)
    except OverflowError:  # an integer beyond any float
        finite = False
    if not finite:
        raise InputError(f"{where}.points: expected a finite number, got {quote(points)}"
                         " (no score can be computed with it)")
    tags = crit.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError(f"{where}.tags: expected a list of text tags")
    key = criterion_key(prompt_id, text)
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 1:
        key = f"{key}-{seen[key]}"
    return QuestionRecord(key=key, codebook=RUBRIC, kind="criterion", text=text, item_uid=uid,
                          points=float(points), meta=_criterion_meta(tags, index, float(points)),
                          replace_stub=True)


# -- completions -------------------------------------------------------------------

def completion_payload(value: Any, where: str, name: str = "completion") -> dict[str, Any]:
    """A completion given as text or as a list of messages `[{role, content}]`
    (the assistant's messages are the reply; the list is kept when it holds more
    than one message)."""
    if isinstance(value, str) and value:
        return {"completion": value, "completion_source": "model"}
    if value is None or value == "":
        raise InputError(f"{where}: missing required field {name!r}")
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: field {name!r} must be text or a non-empty list of "
                         f"{{role, content}}, got {type(value).__name__}")
    messages = _conversation(value, where, name)
    replies = [m["content"] for m in messages if m["role"] == "assistant"] or [
        m["content"] for m in messages]
    payload: dict[str, Any] = {"completion": "\n\n".join(replies), "completion_source": "model"}
    if len(messages) > 1:
        payload["completion_messages"] = messages
    return payload


def _completion_item(prompt_id: str, completion_id: str, payload: dict[str, Any], dataset: str,
                     model: Any, line: int | None, meta: dict[str, Any] | None = None,
                     stub: bool = False, run: RunRecord | None = None) -> ItemRecord:
    """A completion item; it fills in a completion that another file only named. Its
    uid is simple-evals' completion id (a digest of the prompt id and the text): a file
    naming a completion another file brought names that completion, which stays in the
    run it came with (`ItemRecord.shared`); a new one joins `run` (None: the run of its
    model alone). A placeholder belongs to no run until it is filled in."""
    return ItemRecord(
        uid=completion_uid(prompt_id, completion_id), kind="graded_conversation", dataset=dataset,
        payload=payload, parent_uid=prompt_uid(prompt_id), case_id=prompt_id,
        model=str(model) if model else None,
        meta={"prompt_id": prompt_id, "completion_id": completion_id, **(meta or {}),
              **({"stub": True} if stub else {})},
        replace_stub=not stub, line=line, run=None if stub else run, shared=not stub)


def read_completions(path: Path, options: ImportOptions) -> Iterator[Record]:
    dataset = options.dataset or FAMILY
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        prompt_id = _text(row, "prompt_id", where)
        completion_id = _text(row, "completion_id", where)
        payload = completion_payload(row.get("completion"), where)
        if row.get("prompt") is not None:
            payload["turns"] = _conversation(row["prompt"], where)
        yield _completion_item(prompt_id, completion_id, payload, dataset, row.get("model"), line)


# -- simple-evals results ----------------------------------------------------------

def results_model(path: Path) -> str | None:
    """The sampled model a simple-evals results file is named after, or None."""
    match = RESULTS_NAME.match(path.name)
    return match.group("model") if match else None


EXAMPLES_NAME = re.compile(
    r"^(?P<eval>healthbench(?:_hard|_consensus)?)_(?P<model>.+?)_(?P<date>\d{8})"
    r"(?:_\d{4,6})?(?:_DEBUG)?(?:_[A-Za-z]+)*\.jsonl?$")
"""A file of example-level records named as simple-evals names its outputs
(`{eval}_{sampled model}_{YYYYMMDD_HHMMSS}...`): the model is read from it as from a
results file's name (an assumption: simple-evals writes these records only inside
`*_allresults.json`, and names nothing else per example)."""


def results_run(path: Path, options: ImportOptions, model: str | None,
                pattern: re.Pattern = RESULTS_NAME) -> RunRecord:
    """The run of a simple-evals results file (or a file of its example-level records):
    the sampled model it is named after, and the file itself (two results files of one
    model are two runs), with the eval and date its name gives."""
    name = Path(options.name or str(path)).name
    match = pattern.match(path.name)
    meta = {k: match.group(k) for k in ("eval", "date")} if match else {}
    return RunRecord(options.dataset or FAMILY, "graded_conversation",
                     {"model_requested": model, "file": name, "attempt": options.attempt},
                     meta=meta)


def _results_document(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError:
        return read_json_file(path, str(path))  # says where it is not JSON


def read_results(path: Path, options: ImportOptions) -> Iterator[Record]:
    """simple-evals' `*_allresults.json`: each example a completion item with the
    grader's verdict on every rubric item (see the module docstring)."""
    dataset = options.dataset or FAMILY
    doc = _results_document(path)
    examples = doc.get("metadata") if isinstance(doc, dict) else None
    examples = examples.get("example_level_metadata") if isinstance(examples, dict) else None
    if not isinstance(examples, list):
        raise InputError(f"{path}: not a simple-evals results file: expected an object with "
                         "metadata.example_level_metadata, a list of graded examples")
    model = results_model(path)
    run = results_run(path, options, model)
    grader = str(options.rater or SIMPLE_EVALS_GRADER)
    yield rater_record_for(grader, "machine", role="judge",
                           meta={"about": "the grader of a simple-evals HealthBench run",
                                 "assumed": options.rater is None})
    for i, example in enumerate(examples):
        where = f"{path}: metadata.example_level_metadata[{i}]"
        yield from _example_records(example, i + 1, where, dataset, model, grader, run)


def read_examples(path: Path, options: ImportOptions) -> Iterator[Record]:
    """simple-evals' example-level records one per line (each what a results file keeps
    in `metadata.example_level_metadata`: `score`, `usage`, `rubric_items` with the
    grader's `criteria_met` and `explanation`, `prompt`, `completion`, `prompt_id`,
    `completion_id`): each a completion with the grader's verdict on every rubric item,
    read exactly as the results file's entries are. The run is the file's."""
    dataset = options.dataset or FAMILY
    match = EXAMPLES_NAME.match(path.name)
    model = match.group("model") if match else None
    run = results_run(path, options, model, EXAMPLES_NAME)
    grader = str(options.rater or SIMPLE_EVALS_GRADER)
    yield rater_record_for(grader, "machine", role="judge",
                           meta={"about": "the grader of a simple-evals HealthBench run",
                                 "assumed": options.rater is None})
    for line, row in read_rows(path):
        yield from _example_records(row, line, f"{path}:{line}", dataset, model, grader, run)


def _example_records(example: Any, line: int, where: str, dataset: str, model: str | None,
                     grader: str, run: RunRecord | None = None) -> Iterator[Record]:
    if not isinstance(example, dict):
        raise InputError(f"{where}: expected an object {{prompt_id, completion_id, completion,"
                         " rubric_items, ...}}")
    prompt_id = _text(example, "prompt_id", where)
    completion_id = _text(example, "completion_id", where)
    payload = completion_payload(example.get("completion"), where)
    prompt = example.get("prompt")
    turns = _conversation(prompt, where) if prompt is not None else None
    items = example.get("rubric_items")
    if not isinstance(items, list) or not items:
        raise InputError(f"{where}.rubric_items: " + ("missing required field" if items is None
                                                      else "expected a non-empty list"))
    parent = prompt_uid(prompt_id)
    # The prompt as the `healthbench` rows give it, until they are imported.
    yield ItemRecord(uid=parent, kind="graded_conversation", dataset=dataset,
                     payload={"turns": turns or [], "completion": None}, case_id=prompt_id,
                     meta={"stub": True, "prompt_id": prompt_id})
    if turns:
        payload["turns"] = turns  # the prompt as sent (with the sampler's system message)
    usage = example.get("usage")
    yield _completion_item(prompt_id, completion_id, payload, dataset, model, line,
                           meta={"source": "simple-evals results",
                                 **({"usage": usage} if isinstance(usage, dict) else {})},
                           run=run)
    seen: dict[str, int] = {}
    uid = completion_uid(prompt_id, completion_id)
    for j, item in enumerate(items):
        here = f"{where}.rubric_items[{j}]"
        question = _criterion(item, j, prompt_id, parent, here, seen)
        yield question
        met = item.get("criteria_met")
        if met is None:
            continue  # not graded: no answer
        if not isinstance(met, bool):
            raise InputError(f"{here}.criteria_met: expected true or false, got {met!r}")
        explanation = item.get("explanation")
        # How many rubric items the example was graded on: simple-evals scores it on
        # those (a consensus or hard run grades a part of the prompt's criteria).
        yield AnnotationRecord(
            item_uid=uid, question_key=question.key, rater=grader,
            value="met" if met else "not_met", line=line,
            rationale=str(explanation) if explanation is not None else None,
            extra={RUBRIC_ITEMS: len(items)})


RESULTS_HEAD = re.compile(rb'\A\s*\{\s*"(?:score|metrics|htmls|convos|metadata)"\s*:')


def looks_like_results(path: Path, fields: set[str]) -> bool:
    """A simple-evals results file: its top-level keys (a one-line file), its
    name, or the first key of an indented one."""
    if {"metadata", "convos"} <= fields or {"metadata", "htmls"} <= fields:
        return True
    if path.suffix.lower() != ".json" or fields:
        return False
    if path.name.endswith("_allresults.json"):
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return False
    return bool(RESULTS_HEAD.match(head)) and b"\n" in head


# -- grades ------------------------------------------------------------------------

def _target_uid(row: Mapping[str, Any], prompt_id: str) -> str:
    completion_id = row.get("completion_id")
    if completion_id in (None, "", "ideal", "ideal_completion"):
        return prompt_uid(prompt_id)
    return completion_uid(prompt_id, str(completion_id))


def read_grades(path: Path, options: ImportOptions) -> Iterator[Record]:
    announced: set[str] = set()
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        prompt_id = _text(row, "prompt_id", where)
        criterion = _text(row, "criterion", where)
        if "criteria_met" not in row or row["criteria_met"] is None:
            raise InputError(f"{where}: missing required field 'criteria_met'")
        met = as_bool(row["criteria_met"], "criteria_met", where)
        rater = options.rater or row.get("grader") or GRADER
        if rater not in announced:
            announced.add(rater)
            yield rater_record_for(str(rater), "machine", role="judge")
        explanation = row.get("explanation")
        yield AnnotationRecord(
            item_uid=_target_uid(row, prompt_id), question_key=criterion_key(prompt_id, criterion),
            rater=str(rater), value="met" if met else "not_met",
            rationale=str(explanation) if explanation is not None else None, line=line,
        )


# -- meta-evaluation ---------------------------------------------------------------

def read_meta(path: Path, options: ImportOptions) -> Iterator[Record]:
    dataset = options.dataset or FAMILY
    announced: set[str] = set()
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        prompt_id = _text(row, "prompt_id", where)
        completion_id = _text(row, "completion_id", where)
        payload = completion_payload(row.get("completion"), where)
        criterion = _text(row, "rubric", where)
        turns = _conversation(row.get("prompt"), where)
        labels, physicians = row.get("binary_labels"), row.get("anonymized_physician_ids")
        if not isinstance(labels, list) or not isinstance(physicians, list):
            raise InputError(f"{where}: fields 'binary_labels' and 'anonymized_physician_ids' "
                             "must be lists")
        if len(labels) != len(physicians):
            raise InputError(f"{where}: {len(labels)} binary_labels but {len(physicians)} "
                             "anonymized_physician_ids")
        category = row.get("category")
        parent = prompt_uid(prompt_id)
        uid = completion_uid(prompt_id, completion_id)
        key = criterion_key(prompt_id, criterion)
        yield ItemRecord(uid=parent, kind="graded_conversation", dataset=dataset,
                         payload={"turns": turns, "completion": None}, case_id=prompt_id,
                         meta={"stub": True, "prompt_id": prompt_id})
        # A stub: the row names no model; a completions or results file fills it in.
        yield _completion_item(prompt_id, completion_id, payload, dataset, None, line, stub=True)
        # A placeholder until the prompt's rubric row gives its points, tags and axis.
        yield QuestionRecord(key=key, codebook=RUBRIC, kind="criterion", text=criterion,
                             item_uid=parent, points=None,
                             meta={"stub": True, "group": "healthbench", "category": category})
        for i, (label, physician) in enumerate(zip(labels, physicians, strict=True)):
            if not isinstance(label, bool):
                raise InputError(f"{where}: binary_labels[{i}]: expected true or false, got {label!r}")
            name = f"{PHYSICIAN_PREFIX}:{physician}"
            if name not in announced:
                announced.add(name)
                yield RaterRecord(name=name, kind="human", role="physician",
                                  meta={"anonymized_physician_id": str(physician),
                                        "about": "HealthBench meta-evaluation physician"})
            yield AnnotationRecord(item_uid=uid, question_key=key, rater=name,
                                   value="met" if label else "not_met", line=line,
                                   extra={"category": category} if category else {})
        grader_value = next((row[k] for k in GRADER_FIELDS if row.get(k) is not None), None)
        if grader_value is not None:
            rater = options.rater or META_GRADER
            if rater not in announced:
                announced.add(rater)
                yield rater_record_for(rater, "machine", role="judge")
            met = as_bool(grader_value, "grader_label", where)
            yield AnnotationRecord(item_uid=uid, question_key=key, rater=rater,
                                   value="met" if met else "not_met", line=line,
                                   rationale=row.get("grader_explanation") or row.get("explanation"),
                                   extra={"category": category} if category else {})


register(Format(
    "healthbench", FAMILY, read_rubric_rows,
    lambda p, f: {"prompt_id", "prompt", "rubrics"} <= f,
    "HealthBench rows: conversations with their rubric criteria (points, tags, axis)",
))
register(Format(
    "healthbench-results", FAMILY, read_results, looks_like_results,
    "simple-evals HealthBench results (*_allresults.json): completions and the grader's verdicts",
))
register(Format(
    "healthbench-examples", FAMILY, read_examples,
    lambda p, f: {"prompt_id", "completion_id", "completion", "rubric_items"} <= f,
    "simple-evals example-level records JSONL (score, rubric_items with the grader's verdicts,"
    " prompt, completion): completions and the grader's verdicts",
))
register(Format(
    "healthbench-meta", FAMILY, read_meta,
    lambda p, f: {"binary_labels", "anonymized_physician_ids"} <= f,
    "HealthBench meta-evaluation rows: physicians' labels of one criterion per completion",
))
register(Format(
    "healthbench-grades", FAMILY, read_grades,
    lambda p, f: {"prompt_id", "criterion", "criteria_met"} <= f,
    "HealthBench grader results JSONL prompt_id,completion_id,criterion,criteria_met,explanation",
))
register(Format(
    "healthbench-completions", FAMILY, read_completions,
    lambda p, f: {"prompt_id", "completion_id", "completion"} <= f and "rubric" not in f,
    "HealthBench model completions JSONL prompt_id,completion_id,model,completion",
))
