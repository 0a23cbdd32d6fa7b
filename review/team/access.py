"""Who may do what: the role matrix, checked below the pages.

Every screen and command that acts or shows other people's work asks
`require(reviewer, action, server=...)` (or `allowed`): a page hides what its
reader may not use, and the function below it refuses all the same.

Three roles (`review.team.reviewers.ROLES`): reviewer, adjudicator, admin.
In **server mode** (people sign in) the matrix below holds as written. In
**local mode** the machine's users choose their name and role themselves, so
the actions that only guard the server (importing, the demo, paid LLM runs,
reading other people's answers) are everyone's; the team's own work
(adjudicating, rounds, roles, the codebook) still follows the role. The
command line is the operator's: whoever may write the database file (the
`reviewer` is None outside server mode) may run every command.

Reading: a reviewer in server mode sees their own answers, never another
person's (nor the settled answers made of them), and the machine and
reference labels only as their blinding allows (`review.reviewing`'s
decision; the page's labels gate). `open_as_viewer` gives them a store whose
reads hold exactly that, so Browse, Agreement and the exports cannot show
more whatever query they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from review.team.people import PEOPLE, ROLES, SETTLED_ANSWERS, Reviewer
from store import Store
from store.permits import Permit, issue

EVERYONE = frozenset(ROLES)
ADJUDICATORS = frozenset({"adjudicator", "admin"})
ADMINS = frozenset({"admin"})


@dataclass(frozen=True)
class Action:
    """One thing a person may do, and who may."""

    name: str
    words: str
    """What it is, in the README's words."""
    server: frozenset[str]
    """Roles that may, in server mode."""
    local: frozenset[str]
    """Roles that may, in local mode."""
    where: str
    """The screen or command it belongs to."""


MATRIX: dict[str, Action] = {a.name: a for a in (
    Action("review", "answer items, revise their own answers", EVERYONE, EVERYONE,
           "Review, Trajectories, Graded conversations"),
    Action("browse", "search and browse items, tag them, save views", EVERYONE, EVERYONE,
           "Browse"),
    # Reviewers too where an admin allows it (review.team.study: reviewers_add_tags).
    Action("add_tags", "add a tag to the list", ADMINS, ADMINS, "Browse"),
    Action("manage_tags", "retire a tag or offer it again", ADMINS, ADMINS, "Browse"),
    Action("agreement", "compare raters on the answers they may read", EVERYONE, EVERYONE,
           "Agreement; `carelens agreement`, `triage-metrics`"),
    Action("export", "download the answers they may read", EVERYONE, EVERYONE,
           "Data; `carelens export`"),
    Action("read_others", "read other people's answers and rationales, and the settled answers",
           ADJUDICATORS, EVERYONE, "Browse, Agreement, Data exports"),
    Action("progress", "see everyone's counts and pace, and their own audit entries", EVERYONE,
           EVERYONE, "Progress and audit"),
    Action("audit_log", "read everyone's audit entries", ADJUDICATORS, ADJUDICATORS,
           "Progress and audit"),
    Action("read_codebook", "read the codebook and its versions", EVERYONE, EVERYONE, "Codebook"),
    Action("edit_codebook", "edit a label's wording (a new codebook version)", ADMINS, ADMINS,
           "Codebook"),
    Action("add_codebook", "add a study's own codebook from a file (or its next version)",
           ADMINS, ADMINS, "Codebook; `carelens codebook add`"),
    Action("adjudicate", "settle disagreements", ADJUDICATORS, ADJUDICATORS, "Adjudicate"),
    # Not asked before the labels show (their opening is recorded all the same:
    # review.reviewing.blinding).
    Action("labels_unasked", "see the machine and reference labels without being asked first",
           ADJUDICATORS, ADJUDICATORS, "Review, Browse, Agreement"),
    Action("manage_rounds", "create review rounds and name their reviewers", ADMINS, ADMINS,
           "Rounds and people"),
    Action("grant_roles", "grant roles", ADMINS, ADMINS, "Rounds and people"),
    Action("study_settings", "change what the study allows", ADMINS, ADMINS,
           "Rounds and people, Browse"),
    Action("end_sessions", "sign a person out (end their sessions on every device)", ADMINS,
           ADMINS, "Rounds and people; `carelens sessions --end`"),
    Action("import", "import files", ADMINS, EVERYONE, "Data; `carelens import`"),
    Action("replace_answers", "replace answers in force of raters who exist, by import",
           ADMINS, EVERYONE, "`carelens import --replace`"),
    Action("load_demo", "load the demo data", ADMINS, EVERYONE, "Data; `carelens demo`"),
    Action("run_llm", "run LLM raters (paid with the server's keys)", ADMINS, EVERYONE,
           "Data; `carelens map`, `judge`, `extract`, `collect`"),
)}


class NotAllowed(PermissionError):
    """The person may not do this; the message says who may, in one line."""


def allowed(reviewer: Reviewer | None, action: str, *, server: bool) -> bool:
    """Whether `reviewer` may do `action` (a name in `MATRIX`). Outside server mode,
    no reviewer means the operator at the command line, who may do everything; in
    server mode, nobody signed in may do nothing."""
    rule = MATRIX[action]
    if reviewer is None:
        return not server
    return reviewer.role in (rule.server if server else rule.local)


def require(reviewer: Reviewer | None, action: str, *, server: bool) -> None:
    """Refuse (NotAllowed) what `reviewer` may not do; see `allowed`."""
    if allowed(reviewer, action, server=server):
        return
    rule = MATRIX[action]
    roles = rule.server if server else rule.local
    who = ("an admin" if roles == ADMINS else "an adjudicator or an admin"
           if roles == ADJUDICATORS else "someone signed in")
    where = " on this server" if server and roles != (rule.local) else ""
    raise NotAllowed(f"only {who} may {rule.words}{where}")


def permit(reviewer: Reviewer | None, action: str, *, server: bool,
           session: int | None = None) -> Permit:
    """`require`, and a permit saying so, for an acting function below `review`
    that cannot ask this matrix itself (`store.permits`: the LLM runs), naming the
    session the person acts in."""
    require(reviewer, action, server=server)
    return issue(action, reviewer.name if reviewer is not None else None, session)


def may(reviewer: Reviewer | None, action: str) -> bool:
    """Whether `reviewer` may do `action`, one of the team's own work whose rule is
    the same in both modes (adjudicating, rounds, roles, the codebook, the study's
    settings). Somebody must be named for it: the operator at the command line
    (None) may not. Raises ValueError for an action whose rule depends on the mode
    (ask `allowed` with `server`)."""
    rule = MATRIX[action]
    if rule.server != rule.local:
        raise ValueError(f"who may {rule.words} depends on the mode: use allowed(..., server=)")
    return reviewer is not None and reviewer.role in rule.server


def require_role(reviewer: Reviewer | None, action: str) -> None:
    """Refuse (NotAllowed) unless `may`: for the functions that act in everyone's
    work (answering, drafts, flags, views), whose rule is the same in both modes:
    somebody, a person with a role, must be named for it."""
    if not may(reviewer, action):
        raise NotAllowed(f"only someone with a role here may {MATRIX[action].words}")


def role_may(role: str | None, action: str) -> bool:
    """`may` for a rater's role as stored (None: a reviewer's)."""
    return may(Reviewer(-1, "", role or "reviewer"), action)


def reads_everything(reviewer: Reviewer | None, *, server: bool) -> bool:
    """Whether the reader sees every rater's answers (`read_others`)."""
    return allowed(reviewer, "read_others", server=server)


@dataclass(frozen=True)
class Viewer:
    """Whose reads are limited, and to what (`open_as_viewer`): hashable, so a cache
    of results keyed on it never hands one reader's results to another."""

    rater_id: int
    """The reader: their own answers are theirs to read."""
    labels: bool
    """Whether the machine and reference labels are shown to them now."""


def viewer_scope(reviewer: Reviewer | None, *, server: bool, labels: bool) -> Viewer | None:
    """None when the reader sees every rater's answers; else what they may see.
    Nobody signed in on a server reads nobody's answers."""
    if reads_everything(reviewer, server=server):
        return None
    return Viewer(reviewer.id if reviewer is not None else -1, labels and reviewer is not None)


def open_for(path: str | Path, viewer: Viewer | None) -> Store:
    """A store for reading as `viewer` (None: every answer)."""
    if viewer is None:
        return Store(path)  # reads only: no codebook sync or indexer needed (review.workspace)
    return open_as_viewer(path, viewer.rater_id, labels=viewer.labels)


def open_as_viewer(path: str | Path, rater_id: int, *, labels: bool) -> Store:
    """A store on `path` whose reads hold only what a reviewer who may not read
    other people's answers sees: their own answers, and the answers of raters who
    are not people (machine raters, reference raters, a dataset's own labellers)
    but not the settled answers, those only when `labels` (their blinding shows
    the labels). Answers, answers in force and the search index's notes are so
    filtered (temporary views of the same names, which SQLite reads first), so
    whatever query Browse, Agreement or an export runs, nothing more comes back.
    Other tables (tags, saved views, the audit log) are written as usual; an
    answer is never written through it."""
    store = Store(path)
    me = int(rater_id)
    others = (f" OR rater_id IN (SELECT id FROM main.raters WHERE NOT ({PEOPLE})"
              f" AND name != '{SETTLED_ANSWERS}')") if labels else ""
    store.conn.executescript(f"""
CREATE TEMP VIEW annotations AS
    SELECT * FROM main.annotations WHERE rater_id = {me}{others};
CREATE TEMP VIEW current_annotations AS
    SELECT a.* FROM temp.annotations a WHERE a.id = (
        SELECT MAX(b.id) FROM main.annotations b WHERE b.item_id = a.item_id
        AND b.question_id = a.question_id AND b.rater_id = a.rater_id AND b.target = a.target);
CREATE TEMP VIEW search_docs AS
    SELECT * FROM main.search_docs WHERE source != 'annotation'
    OR source_id IN (SELECT id FROM temp.annotations);
""")
    return store
