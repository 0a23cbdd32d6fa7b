"""Opening a 200-step agent run on the Trajectory screen, server side.

A database of KlinikeBench-shaped episodes (bench/gen_klinikebench.py: by
default 300 runs of 30 steps) plus one run of 200 steps, which a reviewer has
half reviewed: a dozen steps marked and the run's criteria committed, so the
reveal has work to do. Two figures:

- the data the screen needs, as `pages/trajectories.py` asks for it: the run
  (payload read and parsed, display model built), the reviewer's step marks,
  the run's questions, my answers and the judges' revealed verdicts
  (`open_run`), plus queue progress, position, neighbours, next unreviewed
  run, reviewed state and the filter choices;
- the whole page script under Streamlit's AppTest (app.py, the sidebar, the
  page, the Plotly timeline, every widget): what the server does before the
  browser gets the page.

Bar: under 300 ms. The reference is reading the run's payload row alone.

    python bench/bench_trajectory_open.py [--episodes 300] [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gen_klinikebench import episode, write_jsonl  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.reviewing.commit import Verdict, commit_verdicts, mark_step  # noqa: E402
from review.reviewing.criteria import (  # noqa: E402
    is_reviewed,
    item_position,
    neighbour,
    next_unreviewed,
    review_progress,
)
from review.reviewing.queue import QueueFilter, filter_choices  # noqa: E402
from review.reviewing.screens import open_run  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402

STEPS = 200
REVIEWER = "Dr. Bench"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def build(tmp: Path, episodes: int) -> tuple[Path, str]:
    """The database, and the uid of the 200-step run."""
    db = tmp / "open.db"
    store = open_store(db)
    write_jsonl(tmp / "many.jsonl", episodes, seed=5)
    import_file(store, tmp / "many.jsonl")
    row = episode(episodes + 1, seed=9, steps=STEPS)
    while row["exception"]:  # a failed episode is cut short: take one that ran
        row = episode(int(row["trial_name"].split("__")[1], 16) + 1, seed=9, steps=STEPS)
    row["trial_name"] = "long-run__200"
    (tmp / "long.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    import_file(store, tmp / "long.jsonl")
    uid = store.scalar("SELECT uid FROM items WHERE uid LIKE '%long-run__200'")
    item_id = store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
    me = ensure_reviewer(store, REVIEWER)
    for k, step_id in enumerate(range(5, STEPS, 16)):
        mark_step(store, me, item_id, step_id, ["wrong_tool", "missed_essential_question",
                                                "no_error"][k % 3], 3, note=f"bench note {k}")
    screen = open_run(store, me.id, item_id)
    commit_verdicts(store, me, item_id, [Verdict(q.id, "met" if q.kind == "criterion" else
                                                 "cannot_assess") for q in screen.questions])
    store.close()
    return db, uid


def main(episodes: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        db, uid = build(tmp, episodes)
        store = open_store(db)
        me = ensure_reviewer(store, REVIEWER)
        item_id = store.scalar("SELECT id FROM items WHERE uid = ?", (uid,))
        n_items = store.scalar("SELECT COUNT(*) FROM items")
        size = store.scalar("SELECT length(payload) FROM items WHERE id = ?", (item_id,))
        filt = QueueFilter(kind="trajectory")

        def data() -> None:
            screen = open_run(store, me.id, item_id)
            assert len(screen.view.steps) == STEPS and screen.marks and screen.revealed
            review_progress(store, me.id, filt)
            item_position(store, item_id, filt)
            neighbour(store, item_id, filt, -1)
            neighbour(store, item_id, filt, +1)
            next_unreviewed(store, me.id, filt, after_id=item_id)
            is_reviewed(store, me.id, item_id)
            filter_choices(store, "trajectory")

        def reference() -> None:
            store.scalar("SELECT payload FROM items WHERE id = ?", (item_id,))

        data_ms = timed(data, repeat)
        ref_ms = timed(reference, repeat)
        parse_ms = timed(lambda: json.loads(store.scalar(
            "SELECT payload FROM items WHERE id = ?", (item_id,))), repeat)

        os.environ["CARELENS_DB"] = str(db)
        from streamlit.testing.v1 import AppTest

        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params["reviewer"] = REVIEWER
        at.query_params["item"] = uid
        at.switch_page("pages/trajectories.py").run()  # first run: imports, Plotly, caches
        assert not at.exception, at.exception
        page_ms = timed(lambda: at.run(), max(5, repeat // 5))
        assert not at.exception, at.exception
        # The screen names the run in words; that it is this run shows in its step count.
        shown = [str(e.value) for e in (*at.markdown, *at.caption, *at.code, *at.text)]
        assert any(f"step 1 of {STEPS}" in text for text in shown), "the long run is not shown"

        print(f"database: {n_items:,} items; the run: {STEPS} steps, {size / 1e6:.2f} MB of payload,"
              f" 12 steps marked, criteria committed")
        print(f"data the screen needs (open_run + queue): median {statistics.median(data_ms):.1f} ms,"
              f" p95 {pct(data_ms, 0.95):.1f} ms  (bar: < 300 ms)")
        print(f"whole page script (AppTest run): median {statistics.median(page_ms):.1f} ms,"
              f" p95 {pct(page_ms, 0.95):.1f} ms  (bar: < 300 ms)")
        print(f"reference, reading the payload row: median {statistics.median(ref_ms):.2f} ms"
              f" (+ JSON parse: {statistics.median(parse_ms):.2f} ms)")
        print(f"ratio data / payload read: {statistics.median(data_ms) / statistics.median(ref_ms):.1f};"
              f" data / payload read and parse: "
              f"{statistics.median(data_ms) / statistics.median(parse_ms):.1f};"
              f" page / payload read: {statistics.median(page_ms) / statistics.median(ref_ms):.1f}")
        store.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    main(args.episodes, args.repeat)
