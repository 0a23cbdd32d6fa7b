"""Eight reviewers committing at once, each on their own connection.

8 threads x 500 annotations against one database file. Prints answers per
second, how many were stored, and whether any "database is locked" (or any
other error) reached a caller. The reference is the same 4,000 commits made
by one thread.

    python bench/bench_concurrent_commits.py [--threads 8] [--each 500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from review.reviewing.commit import commit_answer  # noqa: E402
from review.team.reviewers import ensure_reviewer  # noqa: E402
from review.workspace import open_store  # noqa: E402
from tests.helpers import write_prefixes  # noqa: E402


def run(path: Path, n_threads: int, each: int, tag: str) -> tuple[float, list[BaseException]]:
    s = open_store(path)
    qid = s.scalar("SELECT id FROM questions WHERE key = 'carebench.escalation_needed'")
    ids = [r[0] for r in s.query("SELECT id FROM items ORDER BY id LIMIT ?", (each,))]
    reviewers = [ensure_reviewer(s, f"{tag} {i}") for i in range(n_threads)]
    s.close()
    errors: list[BaseException] = []

    def work(rev):
        try:
            local = open_store(path)
            for item in ids:
                commit_answer(local, rev, item, qid, "1A")
            local.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, errors


def main(n_threads: int, each: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "concurrent.db"
        s = open_store(path)
        write_prefixes(s, each)
        s.close()
        total = n_threads * each
        one, _ = run(path, 1, each, "Solo")  # reference: one reviewer alone
        many, errors = run(path, n_threads, each, "Reviewer")
        s = open_store(path)
        stored = s.scalar("SELECT COUNT(*) FROM annotations a JOIN raters r ON r.id = a.rater_id"
                          " WHERE r.name LIKE 'Reviewer %'")
        print(f"{n_threads} threads x {each} commits: {stored:,} of {total:,} stored, "
              f"{len(errors)} errors reached a caller"
              + (f" (first: {errors[0]!r})" if errors else ""))
        print(f"{total / many:,.0f} answers/s concurrently; one thread alone: {each / one:,.0f} answers/s;"
              f" ratio {total / many / (each / one):.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--each", type=int, default=500)
    a = ap.parse_args()
    main(a.threads, a.each)
