"""A sample of the malformed-file run (bench/mutants_importers.py, 500 and more
mutants in their own processes): 40 mutants over every import format, in this
process, each into a fresh copy of a database holding the demo and the
corpus. None may raise, change the database when refused, or be refused in
other than one line naming the file."""

from __future__ import annotations

from bench.mutants_importers import counts, run_all
from review.datasets.sources import FORMATS


def test_forty_malformed_files_over_every_format_are_refused_in_one_line(tmp_path):
    outcomes = run_all(40, seed=16, in_process=True, keep=tmp_path / "mutants",
                       report=lambda line: None)
    assert len(outcomes) >= 40
    assert {o.mutant.seed.format for o in outcomes} == set(FORMATS)  # what `carelens formats` lists
    problems = [(o.mutant.name, o.problems, o.stderr[-300:]) for o in outcomes if o.problems]
    assert problems == []
    assert counts(outcomes) == {"tracebacks": 0, "hangs": 0, "changes": 0, "messages": 0}
    assert sum(not o.accepted for o in outcomes) >= 30  # most are refused, as they should be
