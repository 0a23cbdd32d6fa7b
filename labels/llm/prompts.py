"""Prompt templates: versioned text files with a system part and a user part.

Shipped prompts live in `labels/llm/prompts/<version>.txt` (mapper-v1,
mapper-v2, judge-v1, extract-v1) and are never edited once shipped: a change
is a new file with a new version, so a machine rater's name
(`provider:model@version`) always means one prompt text. A user may supply a
template file of their own; it is versioned by its content as
`<file stem>-<first 8 hex digits of its sha256>`.

Format: optional `#` comment lines, then a line `--- system ---`, the system
text, a line `--- user ---`, the user text. Placeholders are `$name` or
`${name}` (`$$` is a literal dollar sign); which names a task offers and
requires is listed in `PLACEHOLDERS` and checked when the file is loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from string import Template

PROMPT_DIR = Path(__file__).parent / "prompts"

PLACEHOLDERS: dict[str, tuple[set[str], set[str]]] = {
    # task: (offered names, names the template must use)
    "map": ({"codebook", "codebook_examples", "codebook_description", "labels",
             "patient_turns", "response"}, {"patient_turns", "response"}),
    "judge": ({"record", "criterion", "record_limit"}, {"record", "criterion"}),
    "extract": ({"report", "verdicts"}, {"report"}),
}
TASK_PREFIX = {"map": "mapper", "judge": "judge", "extract": "extract"}
DEFAULT_VERSION = {"map": "mapper-v1", "judge": "judge-v1", "extract": "extract-v1"}


class PromptError(ValueError):
    """A template that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class PromptTemplate:
    task: str
    version: str
    """Shipped version (mapper-v2) or `<stem>-<hash8>` for a user's file."""
    text: str
    sha256: str
    """Hash of the whole template text: stored with every call and run."""
    system: Template
    user: Template
    source: str
    """File it was read from."""

    @property
    def shipped(self) -> bool:
        """True for a prompt shipped with carelens (not a user's file)."""
        return Path(self.source).parent == PROMPT_DIR

    def render(self, values: dict[str, str]) -> tuple[str, str]:
        """(system text, user text) with the placeholders filled in."""
        return self.system.substitute(values), self.user.substitute(values)


def _split(text: str, where: str) -> tuple[str, str]:
    system_mark, user_mark = "--- system ---", "--- user ---"
    lines = text.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() in (system_mark, user_mark)]
    kinds = [lines[i].strip() for i in marks]
    if kinds != [system_mark, user_mark]:
        raise PromptError(
            f"{where}: expected a line '{system_mark}' and then a line '{user_mark}'")
    head = [line for line in lines[:marks[0]] if line.strip() and not line.startswith("#")]
    if head:
        raise PromptError(f"{where}: text before '{system_mark}' must be '#' comments")
    system = "\n".join(lines[marks[0] + 1:marks[1]]).strip("\n")
    user = "\n".join(lines[marks[1] + 1:]).strip("\n")
    if not user.strip():
        raise PromptError(f"{where}: the user part is empty")
    return system, user


def parse_template(task: str, text: str, version: str, source: str) -> PromptTemplate:
    if task not in PLACEHOLDERS:
        raise PromptError(f"unknown task {task!r}; expected one of {', '.join(PLACEHOLDERS)}")
    system, user = _split(text, source)
    offered, required = PLACEHOLDERS[task]
    templates = Template(system), Template(user)
    used: set[str] = set()
    for tpl in templates:
        if not tpl.is_valid():
            raise PromptError(f"{source}: a '$' that is not a placeholder; write '$$' for a dollar sign")
        used |= set(tpl.get_identifiers())
    unknown = used - offered
    if unknown:
        raise PromptError(f"{source}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
                          f"a {task} prompt may use {', '.join(sorted(offered))}")
    missing = required - used
    if missing:
        raise PromptError(f"{source}: the template must use {', '.join('$' + m for m in sorted(missing))}")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PromptTemplate(task, version, text, digest, *templates, source)


def shipped_versions(task: str) -> list[str]:
    """The shipped prompt versions of a task, oldest first."""
    prefix = TASK_PREFIX[task] + "-"
    return sorted(p.stem for p in PROMPT_DIR.glob(f"{prefix}*.txt"))


def load_prompt(task: str, version: str | None = None) -> PromptTemplate:
    """A shipped version by name (`mapper-v2`, or `v2` for short), or a path
    to the user's own template file."""
    version = version or DEFAULT_VERSION[task]
    path = Path(version)
    if path.suffix and path.is_file():
        text = path.read_text(encoding="utf-8")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        stem = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in path.stem)
        return parse_template(task, text, f"{stem}-{digest[:8]}", str(path))
    name = version if version.startswith(TASK_PREFIX[task] + "-") else f"{TASK_PREFIX[task]}-{version}"
    shipped = PROMPT_DIR / f"{name}.txt"
    if not shipped.is_file():
        raise PromptError(
            f"no {task} prompt {version!r}: shipped versions are "
            f"{', '.join(shipped_versions(task))}, or give the path of a template file")
    return parse_template(task, shipped.read_text(encoding="utf-8"), name, str(shipped))
