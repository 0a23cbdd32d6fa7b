"""Which items a kind-wide question of one benchmark family is asked of (the one place).

Convention: a question keyed `<family>.<name>` belongs to one benchmark family -
`clinicare.verdict` to CliniCARE - and is asked of that family's items: those
whose uid starts with `<family>:` or whose dataset is of that kind. A
KlinikeBench run, or a plain Harbor trial, is not asked CliniCARE's verdict:
not by a reviewer (`review.reviewing.criteria`), not by an LLM extractor
(`labels.llm.judge`).
"""

from __future__ import annotations


def question_family(question_key: str) -> str:
    """The benchmark family a question key names: `clinicare` for `clinicare.verdict`."""
    return question_key.split(".", 1)[0]


def asks_outcome(question_key: str, uid: str, dataset_kind: str) -> bool:
    """Whether a kind-wide label question is asked of the item `uid` (in a dataset of
    kind `dataset_kind`)."""
    family = question_family(question_key)
    return uid.startswith(family + ":") or dataset_kind == family


def asked_of_sql(question_key: str, item: str = "i", dataset: str = "d") -> tuple[str, list]:
    """`asks_outcome` as an SQL condition on an item (alias `item`) joined with its
    dataset (alias `dataset`), and its parameters."""
    family = question_family(question_key)
    prefix = family + ":"
    return (f"(substr({item}.uid, 1, {len(prefix)}) = ? OR {dataset}.kind = ?)",
            [prefix, family])
