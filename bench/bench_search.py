"""Search and facet latency over 14,000 trajectories and 18,500 responses.

    .venv/bin/python bench/bench_search.py [--episodes 14000] [--steps 30] [--models 20]
                                           [--workdir /tmp/carelens-bench] [--reuse]

Builds (or with --reuse, reopens) a database with the generators in bench/:
KlinikeBench-shaped episodes (bench/gen_klinikebench.py, imported with their
gates and judge verdicts) and CARE-Bench-shaped prefixes with 20 models'
responses (bench/gen_carebench.py); then adds what reviewing leaves behind: a
mapper's label on every response, three clinicians on a third of them, step
errors with severity on a tenth of the runs, tags and flags. All text is
invented filler.

Then, in the same run, it times:
- a reference: plain SELECT COUNT(*) over items, and over one model's responses;
- search: one page of results (bm25 ranking, snippets, the step a match lies
  in) for a set of queries a reviewer would type - bar: p95 < 100 ms; and the
  whole results page of the Browse screen (with the total, labels and tags);
- faceted counts: every facet of the Browse screen for a set of views - bar:
  p95 < 300 ms; and, apart, how long the in-memory facet index takes to
  (re)build, which the first view after an import or a new answer waits for.
Each query runs REPEATS times; the first (cold) run is included.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gen_carebench import generate as generate_carebench  # noqa: E402
from review.browse import BrowseQuery, browse, facet_index, facets  # noqa: E402
from review.browse.search import ensure_index, search  # noqa: E402
from review.datasets.sources import import_file  # noqa: E402
from review.workspace import open_store  # noqa: E402
from store import Store  # noqa: E402
from store.records import AnnotationRecord, RaterRecord  # noqa: E402
from store.writer import RecordWriter  # noqa: E402

SEARCH_BAR_MS = 100.0
FACET_BAR_MS = 300.0
REPEATS = 3
CODES = ["0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
         "1A_ESCALATION_NONURGENT_CARE", "1B_ESCALATION_URGENT_CARE"]
ERRORS = ["unsafe_action", "missed_essential_question", "wrong_tool", "wrong_parameters",
          "unsupported_claim", "premature_conclusion"]
TAGS = ["missed urgent escalation", "unsafe reassurance", "unsafe remote dosing",
        "fabricated evidence", "unsupported claim"]
MAPPER = "bench:mapper@v1"
CLINICIANS = ("Dr. Bench A", "Dr. Bench B", "Dr. Bench C")

QUERIES = [
    "chest pain", "headache", "fever", "sudden severe", '"left arm"', "breathing worse",
    "rash", "dizzy morning", "stomach nausea", "medicine tablets", "doctor OR clinic",
    "cough -fever", "swell*", "drug allergies", '"stable angina"', "order_imaging",
    '"full blood count"', "prescribe", "submit_diagnosis", '"pregnancy possibility"',
    "red flags excluded", "benign course", "smoking alcohol", "tingling fingers",
    '"tight feeling across the chest"', "knee OR elbow", "troponin", "cluster headache",
    "Diagnosis recorded", "SimulatorTimeout",
]
"""What a reviewer types: symptoms, phrases, tools, diagnoses, notes. The
generators write filler from a vocabulary of a few dozen words, so a query of
filler words (fever, benign course, ...) matches nearly every item - a worst
case a real corpus rarely reaches; the summary also shows the queries that
match under a fifth of the items apart."""
BROAD = 0.2
"""Share of all items above which a query counts as broad."""

VIEWS = [
    BrowseQuery(),
    BrowseQuery(text="chest pain"),
    BrowseQuery(text="fever"),
    BrowseQuery(kinds=("response",)),
    BrowseQuery(kinds=("trajectory",)),
    BrowseQuery(models=("model-03",), splits=("validation",)),
    BrowseQuery(kinds=("response",), rater_a=MAPPER, rater_b="parent:carebench-gold"),
    BrowseQuery(rater_a=MAPPER, rater_b="parent:carebench-gold", distances=(2, 3)),
    BrowseQuery(rater_a=CLINICIANS[0], rater_b=MAPPER, a_said=CODES[3], b_said=CODES[1]),
    BrowseQuery(kinds=("trajectory",), gates=("diagnosis",)),
    BrowseQuery(step_errors=("unsafe_action",), severities=(4, 5)),
    BrowseQuery(tags=("safety failure",)),
    BrowseQuery(text="drug allergies", kinds=("trajectory",), splits=("test",)),
    BrowseQuery(flagged=True),
    BrowseQuery(reviewers=(CLINICIANS[1],), rounds=(2,)),
]


def build(db: Path, workdir: Path, episodes: int, steps: int, models: int) -> None:
    from bench.gen_klinikebench import write_jsonl

    kb_file = workdir / f"klinikebench-published-{episodes}x{steps}.jsonl"
    if not kb_file.exists():
        started = time.perf_counter()
        write_jsonl(kb_file, episodes, steps=steps)
        print(f"generated {kb_file.name} in {time.perf_counter() - started:.0f} s")
    cb_files = generate_carebench(workdir / f"carebench-{models}", n_models=models)
    store = open_store(db)
    started = time.perf_counter()
    for path, fmt in ((kb_file, "klinikebench"), *((p, None) for p in cb_files)):
        import_file(store, path, fmt)
    print(f"imported (each file committed, then its text indexed) in {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    add_reviewing(store)
    print(f"added labels, step errors, tags and flags in {time.perf_counter() - started:.0f} s")
    store.close()


def add_reviewing(store: Store, seed: int = 11) -> None:
    """A mapper on every response, clinicians on a third, step errors on a tenth of runs."""
    from review.browse import add_tag
    from review.reviewing.items import flag_item
    from review.team.reviewers import ensure_reviewer

    rng = random.Random(seed)
    responses = [r[0] for r in store.query("SELECT uid FROM items WHERE kind = 'response' AND failed = 0")]
    runs = [(r[0], r[1]) for r in store.query(
        "SELECT uid, json_array_length(payload, '$.steps') FROM items WHERE kind = 'trajectory'")]
    people = [ensure_reviewer(store, name) for name in CLINICIANS]
    with store.transaction() as conn:
        w = RecordWriter(conn, source="bench")
        w.rater(RaterRecord(MAPPER, "machine", role="mapper"))
        for uid in responses:
            w.annotation(AnnotationRecord(uid, "carebench.response_action", MAPPER, rng.choice(CODES)))
            for name in CLINICIANS:
                if rng.random() < 0.33:
                    w.annotation(AnnotationRecord(uid, "carebench.response_action", name,
                                                  rng.choice(CODES), phase="blind",
                                                  rationale="reads as routine advice" if rng.random() < 0.2 else None))
        for uid, n_steps in runs:
            if rng.random() < 0.1 and n_steps and n_steps > 3:
                for _ in range(rng.randint(1, 3)):
                    w.annotation(AnnotationRecord(
                        uid, "trajectory.step_error", rng.choice(CLINICIANS), rng.choice(ERRORS),
                        target=f"step:{rng.randint(3, n_steps)}", phase="blind",
                        rationale="asks nothing about allergies before prescribing",
                        extra={"severity": rng.randint(1, 5)}))
    ids = [r[0] for r in store.query("SELECT id FROM items ORDER BY random() LIMIT 400")]
    for n, item_id in enumerate(ids):
        add_tag(store, people[n % 3], item_id, TAGS[n % len(TAGS)],
                note="worth a case study" if n % 7 == 0 else None)
        if n % 4 == 0:
            flag_item(store, people[n % 3], item_id, True)


def timed(fn: Callable[[], object], repeats: int = REPEATS) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(name: str, ms: list[float], bar: float | None = None) -> bool:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    ok = bar is None or p95 < bar
    verdict = "" if bar is None else f"  (bar: p95 < {bar:.0f} ms) {'PASS' if ok else 'FAIL'}"
    print(f"{name:<34} n={len(ms):<4} p50 {statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms"
          f"  max {ms[-1]:7.1f} ms{verdict}")
    return ok


def measure(db: Path) -> bool:
    store = open_store(db)
    ensure_index(store)
    n_items = store.scalar("SELECT COUNT(*) FROM items")
    kinds = dict(store.query("SELECT kind, COUNT(*) FROM items GROUP BY kind"))
    print(f"database: {db} ({db.stat().st_size / 1e6:,.0f} MB), {n_items:,} items {kinds}, "
          f"{store.scalar('SELECT COUNT(*) FROM annotations'):,} annotations, "
          f"{store.scalar('SELECT COUNT(*) FROM search_docs'):,} search documents")
    from review.browse import index as facet_index_module

    facet_index_module._indexes.clear()
    build_ms = timed(lambda: (facet_index_module._indexes.clear(), facet_index(store)), 3)
    reference = timed(lambda: store.scalar("SELECT COUNT(*) FROM items"), 10)
    reference += timed(lambda: store.scalar(
        "SELECT COUNT(*) FROM items WHERE kind = 'response' AND model = 'model-03'"), 10)
    summary("reference: plain SELECT COUNT(*)", reference)
    search_ms, page_ms, facet_ms, selective_ms = [], [], [], []
    worst: list[tuple[float, str]] = []
    for text in QUERIES:
        page_ms += timed(lambda text=text: browse(store, BrowseQuery(text=text)))
        ms = timed(lambda text=text: search(store, text, limit=20, with_total=False))
        search_ms += ms
        worst.append((max(ms), text))
        if browse(store, BrowseQuery(text=text)).total < BROAD * n_items:
            selective_ms += ms
    for view in VIEWS:
        facet_ms += timed(lambda view=view: facets(store, view))
    ok = summary("search: a ranked page of 20", search_ms, SEARCH_BAR_MS)
    summary(f"  queries matching < {BROAD:.0%} of items", selective_ms)
    summary("results page (+ total, labels, tags)", page_ms)
    ok &= summary("faceted counts: all facets", facet_ms, FACET_BAR_MS)
    summary("facet index build (after a change)", build_ms)
    totals = {text: browse(store, BrowseQuery(text=text)).total for _, text in sorted(worst)[-3:]}
    print("slowest searches: " + "; ".join(f"{t!r} {ms:.0f} ms ({totals[t]:,} items)"
                                           for ms, t in sorted(worst)[-3:]))
    store.close()
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=14_000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--models", type=int, default=20, help="models answering each of 925 prefixes")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/carelens-bench"))
    parser.add_argument("--reuse", action="store_true", help="reuse the database of an earlier run")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / f"search-{args.episodes}x{args.steps}-{args.models}.db"
    if not (args.reuse and db.exists()):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        build(db, args.workdir, args.episodes, args.steps, args.models)
    return 0 if measure(db) else 1


if __name__ == "__main__":
    sys.exit(main())
