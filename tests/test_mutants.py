"""A sample of the malformed-file run (bench/mutants_importers.py, 500 and more
mutants in their own processes): 40 mutants over every import format, in this
process, each into a fresh copy of a database holding the demo and the
corpus. None may raise, change the database when refused, or be refused in
other than one line naming the file."""

from __future__ import annotations

from bench.mutants_importers import counts, run_all
from review.datasets.sources import FORMATS, import_file


def test_forty_malformed_files_over_every_format_are_refused_in_one_line(tmp_path):
    outcomes = run_all(40, seed=16, in_process=True, keep=tmp_path / "mutants",
                       report=lambda line: None)
    assert len(outcomes) >= 40
    assert {o.mutant.seed.format for o in outcomes} == set(FORMATS)  # what `carelens formats` lists
    problems = [(o.mutant.name, o.problems, o.stderr[-300:]) for o in outcomes if o.problems]
    assert problems == []
    assert counts(outcomes) == {"tracebacks": 0, "hangs": 0, "changes": 0, "messages": 0}
    assert sum(not o.accepted for o in outcomes) >= 30  # most are refused, as they should be


def test_every_decompression_bomb_and_harbor_trouble_is_refused_or_read_in_one_line(tmp_path):
    """Each bomb of the full run over a CARE-Bench and a KlinikeBench Parquet file, and
    each Harbor trouble (a step that raised, only a log, counts, a percentage past 100,
    a lowered byte limit) over the corpus's Harbor job: never a traceback, and a
    refused file changes nothing."""
    import random

    from bench.mutants_importers import (
        BOMBS,
        CONFORMANCE,
        HARBOR_TROUBLES,
        Seed,
        make_mutant,
        run_in_process,
        table_digest,
        try_mutant,
    )
    from review.workspace import open_store

    job = CONFORMANCE / "harbor" / "jobs" / "2026-03-14__09-30-00"
    parquet = [Seed("carebench-prefixes", CONFORMANCE / "carebench" / "evaluation_prefixes-train.parquet"),
               Seed("klinikebench", CONFORMANCE / "klinikebench" / "leaderboard-00000-of-00001.parquet")]
    base = tmp_path / "base.db"
    with open_store(base) as s:
        import_file(s, job)
        for seed in parquet:
            import_file(s, seed.path)
    digest = table_digest(base)
    rng = random.Random(25)
    out, scratch = tmp_path / "mutants", tmp_path / "scratch"
    out.mkdir(), scratch.mkdir()
    plan = [(seed, op) for seed in parquet for op in sorted(BOMBS - {"a million repeated rows"})]
    plan += [(Seed("harbor", job), op) for op in sorted(HARBOR_TROUBLES)]
    outcomes = [try_mutant(make_mutant(seed, op, rng, out, n), base, digest, scratch, 20,
                           run_in_process) for n, (seed, op) in enumerate(plan)]
    assert [(o.mutant.name, o.problems, o.stderr[-300:]) for o in outcomes if o.problems] == []
    bombs = [o for o in outcomes if o.mutant.operator.startswith("bomb")]
    assert len(bombs) == 10 and all(o.status == 2 for o in bombs)
    assert all("bytes once decompressed" in o.stderr for o in bombs)
    lowered = next(o for o in outcomes if o.mutant.operator == "a file past a lowered limit")
    assert lowered.status == 2 and "over the limit of 2,000 bytes a file" in lowered.stderr
