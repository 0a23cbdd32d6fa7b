"""LLM raters: the blinded CARE-Bench mapper, rubric judges and verdict extraction.

Every answer is an annotation by a machine rater named
`provider:model@prompt_version` (phase "blind", source "llm"), so the
agreement screen compares prompt versions and models with the clinicians
like any other rater. Every call is on record in `llm_calls` and cached by
the hash of its request.

What the command line and the Data screen call:

    from labels.llm import plan_map_run, run_map

    with open_store(path) as store:
        plan = plan_map_run(store, "anthropic:claude-haiku-4-5", "mapper-v2",
                            limit=100, filters={"dataset": "carebench"})
    print(plan.summary())                      # counts, cache hits, cost estimate
    for request in plan.requests:              # --dry-run: one JSON object a line
        print(json.dumps(request))
    summary = run_map(path, plan, concurrency=16, progress=on_progress)
    summary = run_map(path, plan, use_batch=True)          # provider batch API

- `plan_map_run`, `plan_judge_run`, `plan_extract_run` (or `plan_run(task=...)`)
  read the store and call nothing; `RunPlan.requests` is the dry run.
- `run_map`, `run_judge`, `run_extract` (all `run_plan`) send, record and
  answer; `progress(RunProgress)` is called from the caller's thread.
- `collect_batch(path, run_id)` finishes a batch run that was interrupted
  (`batch_id=` for one whose id its run could not note; `abandon_batch` for one
  never submitted, or one the provider no longer has: both close a batch the
  provider answers 404 / 410 for); `uncollected_batches(store)` lists what is left, each
  saying whether a live run still waits for it. Running the same plan again
  also collects an uncollected batch instead of paying twice.
- `shipped_versions(task)` lists the prompt versions (mapper-v1, mapper-v2,
  judge-v1, extract-v1); a path to a template file is accepted too.
- `parse_model_spec("PROVIDER:MODEL")`; keys from ANTHROPIC_API_KEY,
  OPENAI_API_KEY, CARELENS_COMPATIBLE_API_KEY or the `keys` argument (see
  `labels.llm.spec`).
"""

from labels.llm.judge import VERDICTS, judge_values
from labels.llm.plan import (
    MAX_OUTPUT_TOKENS,
    TASKS,
    RunPlan,
    Unit,
    plan_extract_run,
    plan_judge_run,
    plan_map_run,
    plan_run,
)
from labels.llm.prompts import PromptError, load_prompt, shipped_versions
from labels.llm.providers import CallFailed, provider_for
from labels.llm.render import RECORD_CHAR_LIMIT, RENDERERS
from labels.llm.runner import (
    OpenBatch,
    RunAborted,
    RunProgress,
    RunSummary,
    abandon_batch,
    collect_batch,
    run_extract,
    run_judge,
    run_map,
    run_plan,
    uncollected_batches,
)
from labels.llm.spec import (
    BASE_URL_VARS,
    KEY_VARS,
    MissingKeyError,
    ModelSpec,
    ModelSpecError,
    parse_model_spec,
)

__all__ = [
    "BASE_URL_VARS",
    "KEY_VARS",
    "MAX_OUTPUT_TOKENS",
    "RECORD_CHAR_LIMIT",
    "RENDERERS",
    "TASKS",
    "VERDICTS",
    "CallFailed",
    "MissingKeyError",
    "ModelSpec",
    "ModelSpecError",
    "OpenBatch",
    "PromptError",
    "RunAborted",
    "RunPlan",
    "RunProgress",
    "RunSummary",
    "Unit",
    "abandon_batch",
    "collect_batch",
    "judge_values",
    "load_prompt",
    "parse_model_spec",
    "plan_extract_run",
    "plan_judge_run",
    "plan_map_run",
    "plan_run",
    "provider_for",
    "run_extract",
    "run_judge",
    "run_map",
    "run_plan",
    "shipped_versions",
    "uncollected_batches",
]
