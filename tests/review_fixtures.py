"""Invented agent runs and graded conversations for the trajectory and graded
screens, imported through the real importers (`review.datasets.sources.import_file`).

`build_files(dir)` writes the source files; `import_all(store, dir)` imports
them. Every text here is invented; two payloads are hostile on purpose
(`SCRIPT`, `IMG`): a model message that tries to run script in the browser.
"""

from __future__ import annotations

import json
from pathlib import Path

from review.datasets.sources import import_file
from review.datasets.sources.base import ImportOptions
from store import Store
from tests.helpers import write_jsonl
from tests.test_sources_trajectories import atif_doc, clinicare_job, kb_row, kb_steps, make_trial

SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
HOSTILE = f"I will check that. {SCRIPT} Then {IMG} done."
"""A model message carrying both payloads: it must show as text and run nothing."""
KB_UID = "kb:leaderboard/r1/kb-task-001__aa"
HARBOR_UID = "harbor:trial-9__abc"
LONG_OUTPUT = "\n".join(f"line {i}: potassium 4.{i % 10} mmol/L (invented)" for i in range(3000))

PROMPT = {
    "prompt_id": "p-inv-1",
    "prompt": [{"role": "user", "content": "My invented uncle has a rash after a new soap. What now?"},
               {"role": "assistant", "content": "How long has the rash been there?"},
               {"role": "user", "content": "Two days, it itches."}],
    "rubrics": [
        {"criterion": "Advises stopping the new soap.", "points": 5,
         "tags": ["level:example", "axis:accuracy"]},
        {"criterion": "Asks about swelling of the face or trouble breathing.", "points": 3,
         "tags": ["level:example", "axis:completeness"]},
        {"criterion": "Recommends an antibiotic.", "points": -4,
         "tags": ["level:example", "axis:accuracy"]},
    ],
    "example_tags": ["theme:context_seeking"],
    "ideal_completions_data": {"ideal_completion": "Stop the soap; if the lips swell, call for help.",
                               "ideal_completions_group": "g1",
                               "ideal_completions_ref_completions": []},
    "canary": "invented canary",
}
COMPLETION = ("Stop the new soap and use a plain moisturiser. Any swelling of the lips? "
              + HOSTILE)
GRADES = [(0, True, "It says to stop the soap."), (1, False, "Lips only, not breathing."),
          (2, False, "No antibiotic.")]


def kb_rows() -> list[dict]:
    """One KlinikeBench episode whose agent writes the hostile message and reads a
    long lab report."""
    steps = kb_steps()
    steps[3] = dict(steps[3], message=HOSTILE)
    steps[3]["observation"] = {"results": [{"source_call_id": "c4", "content": LONG_OUTPUT}]}
    return [kb_row(agent_steps=json.dumps(steps))]


def subagent_doc() -> dict:
    doc = atif_doc(2, version="ATIF-v1.7")
    doc["trajectory_id"] = "main"
    doc["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"] = [
        {"trajectory_id": "child-1"}]
    child = atif_doc(1, version="ATIF-v1.7")
    child["trajectory_id"] = "child-1"
    child["steps"][-1]["message"] = "Child agent: the chart shows no fever."
    doc["subagent_trajectories"] = [child]
    return doc


def build_files(root: Path) -> dict[str, Path]:
    """The source files, one per format."""
    root.mkdir(parents=True, exist_ok=True)
    files = {"klinikebench": write_jsonl(root / "episodes.jsonl", kb_rows())}
    files["clinicare"] = clinicare_job(root)
    make_trial(root / "harbor-job", "trial-9", atif=subagent_doc(), rewards={"reward": 1.0})
    files["harbor"] = root / "harbor-job"
    files["healthbench"] = write_jsonl(root / "rows.jsonl", [PROMPT])
    files["healthbench-completions"] = write_jsonl(root / "completions.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "c1", "model": "vendor/model-a",
         "completion": COMPLETION}])
    files["healthbench-grades"] = write_jsonl(root / "grades.jsonl", [
        {"prompt_id": "p-inv-1", "completion_id": "c1", "criterion": PROMPT["rubrics"][i]["criterion"],
         "criteria_met": met, "explanation": why} for i, met, why in GRADES])
    return files


def import_all(store: Store, root: Path) -> dict[str, Path]:
    files = build_files(root)
    for fmt, path in files.items():
        options = ImportOptions(rater="openai:grader-x@v1") if fmt == "healthbench-grades" else None
        import_file(store, path, fmt, options)
    return files
