"""The team: reviewers and their roles, review rounds, settlements and
adjudication, activity, and the codebook versions a study's admins edit.

`reviewers`, `rounds`, `settlements`, `activity` and `codebook_versions` have
their public names re-exported here; they sit below `review.reviewing`, whose
commit path claims a round's place and reopens a settlement an answer breaks.
`review.team.adjudication` (the queues of disagreements and the rulings) sits
above it, since a ruling is written through that commit path: import its
names from `review.team.adjudication` (re-exporting them here would make
every import of this package import `review.reviewing` too, which itself
imports this package). `access` (who may do what; it opens stores through
`review.workspace`), `identity` (who signed in) and `designs` (rounds as
sampling designs) are imported by module too.
"""

from review.team.activity import (
    AuditEntry,
    audit_actions,
    audit_actors,
    audit_entries,
    reviewer_progress,
)
from review.team.codebook_versions import codebook_history, current_codebook, edit_label
from review.team.reviewers import (
    PEOPLE,
    ROLES,
    Reviewer,
    can_adjudicate,
    ensure_reviewer,
    find_reviewer,
    grant_role,
    is_admin,
    list_reviewers,
    people_sql,
)
from review.team.rounds import (
    ItemPlaces,
    RoundCounts,
    RoundError,
    RoundInfo,
    RoundSpec,
    answered_outside,
    create_round,
    criteria_round_key,
    full_text,
    get_round,
    in_round,
    is_rubric_round,
    keep_reservation,
    label_questions,
    late_for_round,
    list_rounds,
    my_round_items,
    name_round_members,
    release_reservation,
    reserve_next_item,
    round_counts,
    round_members,
    round_places,
    round_progress,
)
from review.team.settlements import (
    ADJUDICATED,
    Settlement,
    Unit,
    UnitAnswer,
    settlement_on,
    settlements_in_force,
)

__all__ = [
    "ADJUDICATED", "PEOPLE", "ROLES", "AuditEntry", "Reviewer", "RoundError", "RoundInfo",
    "RoundSpec", "Settlement", "Unit", "UnitAnswer", "answered_outside", "audit_actions",
    "audit_actors", "audit_entries", "can_adjudicate", "codebook_history", "create_round",
    "criteria_round_key", "current_codebook", "edit_label", "ensure_reviewer", "find_reviewer",
    "full_text", "get_round", "grant_role", "in_round", "is_admin", "is_rubric_round",
    "keep_reservation", "label_questions", "late_for_round", "list_reviewers", "list_rounds",
    "my_round_items", "people_sql", "release_reservation", "reserve_next_item",
    "reviewer_progress", "round_progress", "settlement_on", "settlements_in_force",
    "ItemPlaces", "RoundCounts", "name_round_members", "round_counts", "round_members",
    "round_places",
]
