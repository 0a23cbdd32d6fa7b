"""From committing an answer to the next item being ready, server side.

A database of 20,000 items (1,000 prefixes and 19,000 responses, made by
bench/gen_carebench.py) and a reviewer working through the response queue.
Each step does what the Review screen does after a key press: commit the
answer, find the next unreviewed item, load it, count progress and position,
find its neighbours, and reveal the labels of the item just answered.
Bar: under 100 ms. The reference is the commit alone (one transaction).

    python bench/bench_review_latency.py [--answers 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gen_carebench import generate  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.reviewing.blinding import reveal_reference_labels  # noqa: E402
from review.reviewing.commit import commit_answer  # noqa: E402
from review.reviewing.items import is_flagged, load_item, my_answers  # noqa: E402
from review.reviewing.queue import (  # noqa: E402
    QueueFilter,
    filter_choices,
    item_position,
    neighbour_item,
    next_unreviewed_item,
    queue_progress,
)
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(answers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = open_store(tmp / "latency.db")
        for path in generate(tmp / "files", n_prefixes=1000, n_models=19):
            import_file(store, path)
        n_items = store.scalar("SELECT COUNT(*) FROM items")
        me = ensure_reviewer(store, "Dr. Bench")
        filt = QueueFilter(kind="response")
        item_id = next_unreviewed_item(store, me.id, filt)
        item = load_item(store, item_id)
        codes = item.codebook.codes
        step_ms, commit_ms = [], []
        for i in range(answers):
            t0 = time.perf_counter()
            commit_answer(store, me, item.id, item.question_id, codes[i % 4], seconds_on_task=3.0)
            t1 = time.perf_counter()
            last = item
            item = load_item(store, next_unreviewed_item(store, me.id, filt, after_id=last.id))
            queue_progress(store, me.id, filt)
            item_position(store, item.id, filt)
            neighbour_item(store, item.id, filt, -1)
            neighbour_item(store, item.id, filt, +1)
            filter_choices(store, "response")
            reveal_reference_labels(store, me.id, last)
            my_answers(store, me.id, last.id, last.question_id)
            my_answers(store, me.id, item.id, item.question_id)
            is_flagged(store, me.id, item.id)
            t2 = time.perf_counter()
            commit_ms.append((t1 - t0) * 1000)
            step_ms.append((t2 - t0) * 1000)
        print(f"database: {n_items:,} items; {answers} answers by one reviewer")
        print(f"commit -> next item ready: median {statistics.median(step_ms):.1f} ms, "
              f"p95 {pct(step_ms, 0.95):.1f} ms, max {max(step_ms):.1f} ms  (bar: < 100 ms)")
        print(f"reference, the commit alone: median {statistics.median(commit_ms):.2f} ms; "
              f"ratio whole step / commit: {statistics.median(step_ms) / statistics.median(commit_ms):.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--answers", type=int, default=300)
    main(ap.parse_args().answers)
