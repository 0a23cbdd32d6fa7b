"""How long a full agreement report takes, bootstraps included, on the demo and on a
20,000-item synthetic CARE-Bench-shaped database.

    .venv/bin/python bench/bench_agreement.py [--items 20000] [--boot 1000]

Prints, for each database: what the Agreement screen computes before its first render
with nothing cached (first screen: the default comparison, the pickers, the Compare
tab's report by round), reading the answers, one comparison (clinicians' majority vs a
mapper, by round and model), and every tab's views at once (the export's bundle:
pairwise clinicians, machine versions, anchoring, triage leaderboard), with the ratio of
the synthetic to the demo time. Databases are built in a temporary directory.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codebook import CAREBENCH, codebook  # noqa: E402
from labels.compare import agreement_bundle, agreement_report  # noqa: E402
from labels.compare.answers import load_answers  # noqa: E402
from review.datasets.demo import load_demo  # noqa: E402
from review.workspace import open_store  # noqa: E402
from store.records import AnnotationRecord, ItemRecord, RaterRecord  # noqa: E402
from store.writer import RecordWriter  # noqa: E402

PREFIX_Q, RESPONSE_Q = "carebench.escalation_needed", "carebench.response_action"
MODELS = ("model-a", "model-b", "model-c")
CLINICIANS = ("Clinician 1", "Clinician 2", "Clinician 3")
MAPPERS = ("bench:mapper@v1", "bench:mapper@v2")


def near(rng: random.Random, code: str, codes: list[str], p: float) -> str:
    i = codes.index(code)
    if rng.random() < p:
        i = max(0, min(len(codes) - 1, i + rng.choice((-1, 1))))
    return codes[i]


def synthetic(path: Path, n_items: int, seed: int = 1) -> None:
    """A quarter prefixes with gold, three quarters model responses; three clinicians
    read about 60% of each kind; two mapper versions read every response; 5% of the
    clinicians' response answers are revised after the reveal."""
    rng = random.Random(seed)
    codes = codebook(CAREBENCH).codes
    n_prefixes = n_items // (1 + len(MODELS))
    records: list = [RaterRecord("gold", "reference")]
    records += [RaterRecord(c, "human", role="reviewer") for c in CLINICIANS]
    records += [RaterRecord(m, "machine", role="mapper") for m in MAPPERS]
    for p in range(n_prefixes):
        uid, gold = f"bench_{p:06d}_r01", rng.choice(codes)
        meta = {"specialty_or_domain": rng.choice(("cardiology", "neurology", "general"))}
        records += [ItemRecord(uid=uid, kind="prefix", dataset="bench", payload={"turns": ["."]},
                               round_id=1 + p % 3, split=("dev", "test")[p % 2], meta=meta),
                    AnnotationRecord(uid, PREFIX_Q, "gold", gold)]
        records += [AnnotationRecord(uid, PREFIX_Q, c, near(rng, gold, codes, 0.2))
                    for c in CLINICIANS if rng.random() < 0.6]
        for model in MODELS:
            rid, said = f"{uid}::{model}", near(rng, gold, codes, 0.3)
            records.append(ItemRecord(uid=rid, kind="response", dataset="bench", payload={},
                                      parent_uid=uid, model=model, round_id=1 + p % 3,
                                      split=("dev", "test")[p % 2]))
            records += [AnnotationRecord(rid, RESPONSE_Q, m, near(rng, said, codes, q))
                        for m, q in zip(MAPPERS, (0.25, 0.1), strict=True)]
            for c in CLINICIANS:
                if rng.random() < 0.6:
                    blind = near(rng, said, codes, 0.12)
                    records.append(AnnotationRecord(rid, RESPONSE_Q, c, blind, phase="blind"))
                    if rng.random() < 0.05:
                        records.append(AnnotationRecord(rid, RESPONSE_Q, c, near(
                            rng, blind, codes, 1.0), phase="after_reveal", rationale="again"))
    with open_store(path) as store, store.transaction() as conn:
        RecordWriter(conn, source="bench").write(records)


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def first_screen(store, n_boot: int) -> None:
    """What the Agreement screen computes before its first render, nothing read before
    (a new answer empties the caches): the question sets, the comparison to show first,
    the filters' choices, the rater pickers, and the Compare tab's report broken down by
    round (the other tabs are computed when opened)."""
    from labels import compare as cmp
    from labels.compare import answers
    from labels.compare.stats import forest_keys

    answers._READ.clear()
    sets = cmp.question_sets(store)
    qkey, _, _ = cmp.default_comparison(store)
    qs = next(q for q in sets if q.key == qkey)
    cmp.facet_choices(store, qkey)
    filters = cmp.filters_from({"phase": "blind"})
    a, b = cmp.default_raters(cmp.choices_for(store, qkey, filters))
    by = "criterion" if qs.kind == "criterion" else "round"
    cmp.agreement_report(store, qkey, a, b, filters, by=(by,), n_boot=n_boot,
                         forest_key=forest_keys(cmp.compared_question_set(qs, filters).level)[0])


def measure(path: Path, mapper: str, n_boot: int) -> dict[str, float]:
    from labels.compare import answers as read_cache

    with open_store(path) as store:
        read_cache._READ.clear()
        read, answers = timed(lambda: load_answers(store, RESPONSE_Q))
        one, report = timed(lambda: agreement_report(
            store, RESPONSE_Q, "group:majority", mapper, by=["round", "model"], n_boot=n_boot))
        full, _ = timed(lambda: agreement_bundle(
            store, RESPONSE_Q, "group:majority", mapper, by=["round"], n_boot=n_boot))
        cpu = time.process_time()
        first, _ = timed(lambda: first_screen(store, n_boot))
        first_cpu = time.process_time() - cpu  # on a shared machine, less noisy than the wall
    items = len({u.item_uid for u in answers.units})
    return {"units": report.n_units, "items": items, "read": read, "compare": one, "full": full,
            "first": first, "first_cpu": first_cpu}


def main() -> int:
    import scipy.stats  # noqa: F401  (loaded once per process: not counted in any timing)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        demo = Path(tmp) / "demo.db"
        with open_store(demo) as store:
            load_demo(store, Path(tmp) / "files")
        built, _ = timed(lambda: synthetic(Path(tmp) / "big.db", args.items))
        print(f"synthetic database of {args.items:,} items built in {built:.1f} s")
        results = {
            "demo": measure(demo, "demo:mapper@v1", args.boot),
            f"{args.items:,} items": measure(Path(tmp) / "big.db", MAPPERS[0], args.boot),
        }
    print(f"\n{args.boot} bootstrap resamples per coefficient; times in seconds\n")
    print(f"{'database':<14}{'responses':>10}{'compared':>10}{'read':>8}{'compare':>9}"
          f"{'every tab':>11}{'first screen':>14}{'(its CPU)':>11}")
    for name, r in results.items():
        print(f"{name:<14}{r['items']:>10,}{r['units']:>10,}{r['read']:>8.2f}{r['compare']:>9.2f}"
              f"{r['full']:>11.2f}{r['first']:>14.2f}{r['first_cpu']:>11.2f}")
    small, big = results.values()
    print(f"\nratio synthetic / demo: {big['items'] / small['items']:.0f}x the responses, "
          f"{big['compare'] / small['compare']:.1f}x the comparison time, "
          f"{big['full'] / small['full']:.1f}x the every-tab time, "
          f"{big['first'] / small['first']:.1f}x the first screen's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
