"""Who the people of a study are, as the store keeps them: roles, a reviewer, the
SQL that picks people out of all raters, and the rater of settled answers.

The bottom of `review.team`: `access` (who may do what) and `reviewers` (who
is reviewing) both read it, so neither reads the other's insides.
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("reviewer", "adjudicator", "admin")


@dataclass(frozen=True)
class Reviewer:
    id: int
    name: str
    role: str
    specialty: str | None = None
    seniority: str | None = None


def reviewer_from_row(row) -> Reviewer:
    return Reviewer(row["id"], row["name"], row["role"] or "reviewer", row["specialty"],
                    row["seniority"])


def people_sql(alias: str = "") -> str:
    """SQL true for human raters who review in the app (`alias`: the raters
    table's alias in the query): not those an import brought with another role,
    such as HealthBench's anonymized physicians (`physician`), whose labels are
    data, not anyone's login or anyone's work to adjudicate."""
    a = f"{alias}." if alias else ""
    return (f"{a}kind = 'human' AND ({a}role IS NULL OR {a}role IN"
            f" ({', '.join(repr(r) for r in ROLES)}))")


PEOPLE = people_sql()


SETTLED_ANSWERS = "adjudicated"
"""The rater of settled answers (`review.team.adjudication.ADJUDICATED`)."""
