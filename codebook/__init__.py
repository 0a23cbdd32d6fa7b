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
from codebook.vocabulary import (
    BLIND,
    BLINDING_MODES,
    CANNOT_ASSESS,
    ITEM_KINDS,
    LABEL_KINDS,
    MET,
    NO_ERROR,
    NOT_MET,
    REVEAL_AFTER_COMMIT,
    RUBRIC_KINDS,
    STATUSES,
    STEP_CODEBOOK,
    STEP_ERROR_QUESTION,
    SUGGEST,
)

CAREBENCH = "carebench-escalation"

__all__ = [
    "BLIND",
    "BLINDING_MODES",
    "CANNOT_ASSESS",
    "CAREBENCH",
    "ITEM_KINDS",
    "LABEL_KINDS",
    "MET",
    "NOT_MET",
    "NO_ERROR",
    "REVEAL_AFTER_COMMIT",
    "RUBRIC_KINDS",
    "STATUSES",
    "STEP_CODEBOOK",
    "STEP_ERROR_QUESTION",
    "SUGGEST",
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
