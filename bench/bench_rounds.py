"""Twenty reviewers working one round of 2,000 items with k = 2 at once.

Threads against the store, no browser: each reviewer repeatedly reserves the
next item of the round and answers it, until the round has nothing left for
them. Bar: every item ends with exactly 2 answers, nothing is lost, and no
error reaches a caller. Prints answers per second; the reference is the same
store committing free-review answers from one thread (no reservations).

    python bench/bench_rounds.py [--reviewers 20] [--items 2000] [--k 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from review.reviewing.commit import commit_answer  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.team.rounds import RoundSpec, create_round, reserve_next_item  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.helpers import CODES, write_prefixes  # noqa: E402

Q = "carebench.escalation_needed"


def main(n_reviewers: int, n_items: int, k: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rounds.db"
        s = open_store(path)
        write_prefixes(s, n_items)
        admin = ensure_reviewer(s, "Admin", role="admin")
        rid = create_round(s, RoundSpec("bench", Q, reviewers_per_item=k, stratify_by="gold"), admin)
        qid = s.scalar("SELECT id FROM questions WHERE key = ?", (Q,))
        reviewers = [ensure_reviewer(s, f"Reviewer {i:02d}") for i in range(n_reviewers)]
        s.close()
        errors: list[BaseException] = []
        answered = Counter()

        def work(rev):
            local = open_store(path)
            try:
                while (item := reserve_next_item(local, rid, rev)) is not None:
                    commit_answer(local, rev, item, qid, CODES[item % 4], round_id=rid)
                    answered[rev.name] += 1
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                local.close()

        threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0

        s = open_store(path)
        per_item = Counter(r[0] for r in s.query(
            "SELECT COUNT(DISTINCT rater_id) FROM annotations WHERE round_id = ? GROUP BY item_id", (rid,)))
        total = sum(answered.values())
        stored = s.scalar("SELECT COUNT(*) FROM annotations WHERE round_id = ?", (rid,))
        # Reference: one thread committing the same number of free-review answers.
        ref = ensure_reviewer(s, "Reference")
        ids = [r[0] for r in s.query("SELECT id FROM items ORDER BY id")]
        t0 = time.perf_counter()
        for i in range(total):
            commit_answer(s, ref, ids[i % len(ids)], qid, CODES[i % 4])
        ref_elapsed = time.perf_counter() - t0
        print(f"{n_reviewers} reviewers, {n_items:,} items, k = {k}: {total:,} answers in {elapsed:.1f} s"
              f" = {total / elapsed:,.0f} answers/s")
        print(f"answers per item: {dict(sorted(per_item.items()))} (bar: all {n_items:,} at exactly {k});"
              f" stored {stored:,} = answered {total:,}; errors reaching a caller: {len(errors)}"
              + (f" (first: {errors[0]!r})" if errors else ""))
        print(f"reference, one thread answering freely: {total / ref_elapsed:,.0f} answers/s;"
              f" ratio {total / elapsed / (total / ref_elapsed):.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reviewers", type=int, default=20)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    main(a.reviewers, a.items, a.k)
