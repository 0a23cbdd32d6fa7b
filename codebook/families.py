"""Which items a kind-wide question of one benchmark family is asked of (the one place).

Convention: a question keyed `<family>.<name>` belongs to one benchmark family -
`clinicare.verdict` to CliniCARE - and is asked of that family's items: those
whose uid starts with `<family>:` or whose dataset is of that kind. A
KlinikeBench run, or a plain Harbor trial, is not asked CliniCARE's verdict:
not by a reviewer (`review.reviewing.criteria`), not by an LLM extractor
(`labels.llm.judge`). A study's own question (its family is no benchmark's:
`harm.severity`) is asked of every item of its kind.
"""

from __future__ import annotations

BENCHMARK_FAMILIES = ("carebench", "clinicare", "klinikebench", "healthbench", "harbor")
"""The benchmark families carelens reads (the kinds of their datasets): a question
keyed by one is asked only of that benchmark's items."""


def question_family(question_key: str) -> str:
    """The benchmark family a question key names: `clinicare` for `clinicare.verdict`."""
    return question_key.split(".", 1)[0]


def asks_outcome(question_key: str, uid: str, dataset_kind: str) -> bool:
    """Whether a kind-wide label question is asked of the item `uid` (in a dataset of
    kind `dataset_kind`)."""
    family = question_family(question_key)
    if family not in BENCHMARK_FAMILIES:
        return True  # a study's own question: of every item of its kind
    return uid.startswith(family + ":") or dataset_kind == family


def asked_of_sql(question_key: str, item: str = "i", dataset: str = "d") -> tuple[str, list]:
    """`asks_outcome` as an SQL condition on an item (alias `item`) joined with its
    dataset (alias `dataset`), and its parameters."""
    family = question_family(question_key)
    if family not in BENCHMARK_FAMILIES:
        return "1", []
    prefix = family + ":"
    return (f"(substr({item}.uid, 1, {len(prefix)}) = ? OR {dataset}.kind = ?)",
            [prefix, family])


def asks_outcome_sql(key: str, item: str = "i") -> str:
    """`asks_outcome` for a question whose key is the SQL expression `key` (another
    query's column), on an item (alias `item`): an SQL condition."""
    family = f"substr({key}, 1, instr({key}, '.') - 1)"
    families = ", ".join(f"'{f}'" for f in BENCHMARK_FAMILIES)
    return (f"({family} NOT IN ({families}) OR {item}.uid LIKE {family} || ':%'"
            f" OR (SELECT kind FROM datasets WHERE id = {item}.dataset_id) = {family})")
