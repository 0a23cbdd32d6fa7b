"""Plain conversations: a study's own chats, from any source, as items to review.

The format (`conversations`), JSONL or Parquet, one conversation a row:

    {"id": "chat-0001",
     "messages": [{"role": "user", "content": "I have had chest pain since..."},
                  {"role": "assistant", "content": "Chest pain can..."}],
     "model": "acme-chat-2",                       (optional)
     "split": "pilot", "case_id": "patient-17",    (optional)
     "labels": [{"question": "harm.severity", "value": "3_MODERATE",
                 "rater": "openai:gpt-4.1@harm-v1", "rationale": "..."}],  (optional)
     "site": "clinic A", ...}                      (any other field: metadata)

- `id` (text or whole number) is the item's id, as a labels file names it;
- `messages`: the conversation in order, each a `role` (as written: user,
  assistant, system, tool, or the source's own word) and its `content` (text;
  a message's other fields are kept with it);
- `model`: the model that wrote the assistant's messages (the item's model, as
  a CARE-Bench response carries its model); with `provider`, `protocol`,
  `prompt_version` and `model_actual` (the model served) where the file has
  them, and `--attempt`, it names the run the chat belongs to (`store.runs`:
  every per-model figure is per run; a file naming no model gives the run of no
  model named); `split`, `case_id` (conversations of one patient or case:
  intervals resample them together);
- `labels`: machine labels of the conversation, each an answer to a question of
  a codebook in force (`carelens codebook add`), by a machine rater (the
  label's `rater`, else `--rater`); or, with `--rater`, an object
  `{question: value}`;
- every other field is metadata, kept with the item as written (and offered
  as a facet on Browse).

Each row is an item of kind `conversation`, asked every question whose
`applies_to` is `conversation`. Another shape is read with a field mapping,
`--map id=conversation_id,messages=turns,role=from,content=value` (carelens's
name = the file's): a ShareGPT file, a hospital's export. A bad row is one line
naming the file, the line and the field, and nothing of the file is kept.

Detected without `--format` when the first row has `messages` and `id` (or the
names `--map` gives them): no published format has a `messages` field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from review.datasets.sources.base import Format, ImportOptions, rater_record_for, register
from review.datasets.sources.fields import as_int, id_length
from review.datasets.sources.readers import file_kind, quote, read_rows
from store.records import AnnotationRecord, ItemRecord, RaterRecord, Record, RunRecord
from store.writer import InputError

FORMAT = "conversations"
FAMILY = "conversations"
KIND = "conversation"
FIELDS = ("id", "messages", "role", "content", "model", "split", "case_id", "labels")
"""carelens's names for the fields a mapping may rename (`--map NAME=FILE_FIELD`)."""
ROW_FIELDS = ("id", "messages", "model", "split", "case_id", "labels")
"""The fields of a row (the rest is metadata); `role` and `content` are a message's."""
RUN_FIELDS = ("provider", "protocol", "prompt_version", "model_actual")
"""The fields that, with the model, name the run a chat belongs to (`store.runs.IDENTITY`;
`model_actual` is the model served, not part of the identity)."""
LABEL_FIELDS = ("question", "value", "rater", "rationale", "confidence", "status")


def parse_mapping(text: str | Mapping[str, str] | None) -> dict[str, str]:
    """`id=conversation_id,messages=turns` as {carelens's name: the file's field}; an
    unknown name, a name given twice or an empty side is a ValueError in words."""
    if not text:
        return {}
    pairs = list(text.items()) if isinstance(text, Mapping) else [
        part.partition("=")[::2] for part in str(text).split(",") if part.strip()]
    out: dict[str, str] = {}
    for ours, theirs in pairs:
        ours, theirs = str(ours).strip(), str(theirs).strip()
        if not ours or not theirs:
            raise ValueError(f"--map {text!r}: write each as NAME=FIELD (e.g. "
                             "id=conversation_id,messages=turns)")
        if ours not in FIELDS:
            raise ValueError(f"--map: {ours!r} is not a field of a conversation; map one of "
                             f"{', '.join(FIELDS)}")
        if ours in out:
            raise ValueError(f"--map: {ours!r} is mapped twice")
        out[ours] = theirs
    taken = [f for f in out.values() if list(out.values()).count(f) > 1]
    if taken:
        raise ValueError(f"--map: the file's field {taken[0]!r} is given to two names")
    return out


def _names(options: ImportOptions | None) -> dict[str, str]:
    mapping = dict(options.mapping) if options is not None else {}
    return {name: mapping.get(name, name) for name in FIELDS}


def detect(path: Path, fields: set[str], mapping: Mapping[str, str] | None = None) -> bool:
    """A conversations file: its first row has the id and messages fields."""
    if file_kind(path) == "csv":
        return False  # a list of messages does not fit a CSV cell
    names = {name: (mapping or {}).get(name, name) for name in ("id", "messages")}
    return names["id"] in fields and names["messages"] in fields


def read_conversations(path: Path, options: ImportOptions) -> Iterator[Record]:
    if file_kind(path) == "csv":
        raise InputError(f"{path}: a conversations file is JSONL or Parquet (a list of messages"
                         " does not fit a CSV cell)")
    names = _names(options)
    dataset = options.dataset or FAMILY
    raters: set[str] = set()
    first = True
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected an object (one conversation), got {quote(row)}")
        if first:
            missing = [names[f] for f in ("id", "messages") if names[f] not in row]
            if missing:
                raise InputError(f"{where}: missing field(s) {', '.join(map(repr, missing))};"
                                 " a conversation has an id and its messages (or name them:"
                                 " --map id=FIELD,messages=FIELD)")
            first = False
        item = _item(row, names, dataset, where, line)
        item.run = _run(row, item, dataset, options.attempt, where)
        yield item
        for label in _labels(row, names, options, where, item.uid, line):
            if label.rater not in raters:
                raters.add(label.rater)
                yield _machine(label.rater)
            yield label


def _text(value: Any, field: str, where: str, *, empty: bool = False) -> str:
    if isinstance(value, str) and (empty or value.strip()):
        return value
    raise InputError(f"{where}: field {field!r} must be {'a' if empty else 'non-empty'} text,"
                     f" got {quote(value)}")


def _item(row: dict[str, Any], names: dict[str, str], dataset: str, where: str,
          line: int) -> ItemRecord:
    raw_id = row.get(names["id"])
    if isinstance(raw_id, bool) or raw_id is None or raw_id == "":
        raise InputError(f"{where}: field {names['id']!r} must be the conversation's id (text"
                         f" or a whole number), got {quote(raw_id)}")
    if isinstance(raw_id, int | float):
        uid = str(as_int(raw_id, names["id"], where))
    else:
        uid = _text(raw_id, names["id"], where)
        if uid != uid.strip():
            raise InputError(f"{where}: field {names['id']!r}: an id has no spaces at its ends,"
                             f" got {quote(uid)}")
    id_length(uid, names["id"], where)
    messages = row.get(names["messages"])
    if hasattr(messages, "tolist"):
        messages = messages.tolist()
    if not isinstance(messages, list) or not messages:
        raise InputError(f"{where}: field {names['messages']!r} must be a list of messages "
                         f"({{{names['role']!r}: ..., {names['content']!r}: ...}}), got "
                         f"{quote(messages)}")
    turns = []
    for n, message in enumerate(messages):
        at = f"{names['messages']}[{n}]"
        if not isinstance(message, dict):
            raise InputError(f"{where}: field {at!r} must be an object with "
                             f"{names['role']!r} and {names['content']!r}, got {quote(message)}")
        role = message.get(names["role"])
        content = message.get(names["content"])
        if names["role"] not in message:
            raise InputError(f"{where}: field {at}.{names['role']} is missing (who speaks:"
                             " user, assistant, ...)")
        role = _text(role, f"{at}.{names['role']}", where)
        if names["content"] not in message:
            raise InputError(f"{where}: field {at}.{names['content']} is missing (what is said)")
        content = _text(content, f"{at}.{names['content']}", where, empty=True)
        rest = {k: v for k, v in message.items() if k not in (names["role"], names["content"])}
        turns.append({"role": role, "content": content, **({"fields": rest} if rest else {})})
    model = row.get(names["model"])
    if model is not None:
        model = id_length(_text(model, names["model"], where), names["model"], where)
    split = row.get(names["split"])
    if split is not None:
        split = _text(split, names["split"], where)
    case_id = row.get(names["case_id"])
    if case_id is not None:
        case_id = str(as_int(case_id, names["case_id"], where)) \
            if isinstance(case_id, int | float) and not isinstance(case_id, bool) \
            else _text(case_id, names["case_id"], where)
        id_length(case_id, names["case_id"], where)
    own = {names[f] for f in ROW_FIELDS} | set(RUN_FIELDS)
    metadata = {k: v for k, v in row.items() if k not in own}
    return ItemRecord(uid=uid, kind=KIND, dataset=dataset, payload={"messages": turns},
                      case_id=case_id, split=split, model=model,
                      meta={"metadata": metadata} if metadata else {}, line=line)


def _run(row: dict[str, Any], item: ItemRecord, dataset: str, attempt: int | None,
         where: str) -> RunRecord:
    """The run of a chat: its model as requested, with the row's provider, protocol and
    prompt version (and the import's attempt) where given; the model served apart."""
    identity: dict[str, Any] = {"model_requested": item.model}
    for name in ("provider", "protocol", "prompt_version"):
        if row.get(name) is not None:
            identity[name] = id_length(_text(row[name], name, where), name, where)
    if attempt is not None:
        identity["attempt"] = attempt
    served = row.get("model_actual")
    if served is not None:
        served = id_length(_text(served, "model_actual", where), "model_actual", where)
    return RunRecord(dataset, KIND, identity, model_actual=served)


def _labels(row: dict[str, Any], names: dict[str, str], options: ImportOptions, where: str,
            uid: str, line: int) -> Iterator[AnnotationRecord]:
    raw = row.get(names["labels"])
    if raw is None:
        return
    if hasattr(raw, "tolist"):
        raw = raw.tolist()
    field = names["labels"]
    if isinstance(raw, dict):
        if not options.rater:
            raise InputError(f"{where}: field {field!r} gives labels by question without a"
                             " rater: name the machine rater with --rater, or give each label"
                             " as {\"question\", \"value\", \"rater\"}")
        raw = [{"question": q, "value": v} for q, v in raw.items()]
    if not isinstance(raw, list):
        raise InputError(f"{where}: field {field!r} must be a list of labels "
                         "({\"question\", \"value\", \"rater\"}), got " + quote(raw))
    seen: set[tuple[str, str]] = set()
    for n, label in enumerate(raw):
        at = f"{field}[{n}]"
        if not isinstance(label, dict):
            raise InputError(f"{where}: field {at!r} must be an object "
                             f"{{\"question\", \"value\", \"rater\"}}, got {quote(label)}")
        unknown = [k for k in label if k not in LABEL_FIELDS]
        if unknown:
            raise InputError(f"{where}: field {at}.{unknown[0]} is not a label's (its fields:"
                             f" {', '.join(LABEL_FIELDS)})")
        question = _text(label.get("question"), f"{at}.question", where)
        rater = label.get("rater") or options.rater
        if rater is None:
            raise InputError(f"{where}: field {at}.rater is missing: who gave this label (a"
                             " machine rater, e.g. openai:gpt-4.1@harm-v1), or --rater")
        rater = id_length(_text(rater, f"{at}.rater", where), f"{at}.rater", where)
        if (question, rater) in seen:
            raise InputError(f"{where}: field {at}: a second label of {question!r} by {rater!r}"
                             " in one conversation (which would be the answer?)")
        seen.add((question, rater))
        status = label.get("status") or "answered"
        if status not in ("answered", "cannot_assess"):
            raise InputError(f"{where}: field {at}.status must be answered or cannot_assess, "
                             f"got {quote(status)}")
        value = label.get("value")
        if status == "answered" and (value is None or value == ""):
            raise InputError(f"{where}: field {at}.value is missing (or say status "
                             "cannot_assess)")
        if value is not None and not isinstance(value, str | int | float | list) \
                or isinstance(value, bool):
            raise InputError(f"{where}: field {at}.value must be a label code, got {quote(value)}")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        confidence = as_int(label.get("confidence"), f"{at}.confidence", where)
        if confidence is not None and not 1 <= confidence <= 5:
            raise InputError(f"{where}: field {at}.confidence must be 1 to 5, got {confidence}")
        rationale = label.get("rationale")
        if rationale is not None:
            rationale = _text(rationale, f"{at}.rationale", where, empty=True) or None
        yield AnnotationRecord(
            item_uid=uid, question_key=question, rater=rater,
            value=None if status != "answered" else (value if isinstance(value, list | str)
                                                     else str(value)),
            status=status, rationale=rationale, confidence=confidence, line=line)


def _machine(name: str) -> RaterRecord:
    """A label's rater: a machine rater (a file of conversations carries no clinician's
    answers: those come as a labels file or are given here)."""
    return rater_record_for(name, "machine", role="judge")


register(Format(
    FORMAT, FAMILY, read_conversations, detect,
    "plain conversations (JSONL or Parquet): {id, messages: [{role, content}], model?, "
    "labels?, ...}; other shapes with --map id=FIELD,messages=FIELD,...",
    mapped=True,
))
