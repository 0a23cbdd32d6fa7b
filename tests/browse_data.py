"""A Browse test database: the demo plus a few invented agent runs, with step
errors, tags and a flag, written through the real importer and actions."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gen_klinikebench import episode
from review.browse import add_tag
from review.datasets.sources import import_file
from review.reviewing.blinding import open_labels
from review.reviewing.commit import commit_answer
from review.reviewing.items import flag_item
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store

RUNS = 6
STEPS = 12
REVIEWER = "Dr. Browse Test"
FABRICATED = "The troponin came back normal, so cardiac causes are excluded."
"""An invented unsupported claim put into step 7 of the first run."""


def trajectory_rows(n: int = RUNS, steps: int = STEPS) -> list[dict]:
    """KlinikeBench-shaped episodes (invented text), the first with a claim to find."""
    rows = [episode(i, seed=3, steps=steps, n_total=n) for i in range(n)]
    first = json.loads(rows[0]["agent_steps"])  # a whole ATIF trajectory
    step = next(s for s in first["steps"] if s["step_id"] == 7)
    reply = json.loads(step["message"])
    reply["plan"] = FABRICATED
    step["message"] = json.dumps(reply)
    rows[0]["agent_steps"] = json.dumps(first)
    rows[0]["exception"] = None
    return rows


def add_trajectories(db_path: Path) -> dict[str, str]:
    """Import the runs into `db_path` and mark, tag and flag some of them; returns
    {'marked': uid of the run with a step error, 'other': another run's uid}."""
    path = db_path.parent / "klinikebench-browse.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in trajectory_rows()), encoding="utf-8")
    s = open_store(db_path)
    try:
        import_file(s, path, "klinikebench")
        me = ensure_reviewer(s, REVIEWER, "emergency medicine", "consultant")
        uids = [r[0] for r in s.query(  # this file's runs (the demo has runs of its own)
            "SELECT uid FROM items WHERE kind = 'trajectory'"
            " AND import_id = (SELECT MAX(id) FROM imports) ORDER BY id")]
        qid = s.scalar("SELECT id FROM questions WHERE key = 'trajectory.step_error'")
        first = s.scalar("SELECT id FROM items WHERE uid = ?", (uids[0],))
        second = s.scalar("SELECT id FROM items WHERE uid = ?", (uids[1],))
        commit_answer(s, me, first, qid, "unsupported_claim", target="step:7",
                      rationale="claims a troponin result that was never ordered",
                      extra={"severity": 4})
        commit_answer(s, me, second, qid, "missed_essential_question", target="step:4",
                      extra={"severity": 2})
        add_tag(s, me, second, "unsafe reassurance", note="tells the patient it is nothing serious")
        flag_item(s, me, second, True, "check with the team")
        open_labels(s, me, "browse", 0)  # a researcher who chose to see every rater's labels
    finally:
        s.close()
    return {"marked": uids[0], "other": uids[1]}
