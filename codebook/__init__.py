"""What may be answered: label sets and rubrics as versioned data files."""

from codebook.loader import (
    Codebook,
    CodebookError,
    Label,
    QuestionSpec,
    builtin_codebooks,
    codebook,
    load_codebook_file,
    parse_codebook,
    question_specs,
)

CAREBENCH = "carebench-escalation"

__all__ = [
    "CAREBENCH",
    "Codebook",
    "CodebookError",
    "Label",
    "QuestionSpec",
    "builtin_codebooks",
    "codebook",
    "load_codebook_file",
    "parse_codebook",
    "question_specs",
]
