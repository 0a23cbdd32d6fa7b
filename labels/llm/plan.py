"""Planning a run: what would be sent, what is already cached, what it would cost.

    plan = plan_map_run(store, "openai:gpt-4.1-mini", "v2", limit=100,
                        filters={"dataset": "carebench"})
    print(plan.summary())            # counts, cache hits, cost estimate
    for request in plan.requests:    # a dry run: one JSON-serialisable dict per item
        print(json.dumps(request))

Planning reads the store and calls nothing: no key is needed. Items the
rater has already answered are left out (so a run resumes where it stopped)
unless `include_answered=True`; requests identical to an earlier successful
call are marked cached and cost nothing. The estimate counts characters / 4
as tokens for the input and the task's typical output, priced from
`pricing.PRICES`; it is None when the model's price is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from labels.llm.judge import EXTRACTOR, JUDGE
from labels.llm.mapper import MAPPER
from labels.llm.pricing import BATCH_DISCOUNT, estimate_tokens, price_for
from labels.llm.prompts import PromptTemplate, load_prompt
from labels.llm.providers import request_body_for
from labels.llm.record import cached_calls, canonical_json, find_rater_id, rater_name, request_hash
from labels.llm.spec import ModelSpec, parse_model_spec, public_url, resolve_base_url
from labels.llm.tasks import Task, Work
from store import Store

TASKS: dict[str, Task] = {"map": MAPPER, "judge": JUDGE, "extract": EXTRACTOR}


@dataclass
class Unit:
    """One request of a plan: an (item, question) and the exact body to send."""

    work: Work
    body: dict[str, Any]
    request_hash: str
    est_input_tokens: int
    cached: bool = False

    @property
    def custom_id(self) -> str:
        """Id of the request inside a provider batch."""
        return f"i{self.work.item_id}-q{self.work.question_id}"


@dataclass
class RunPlan:
    task: Task
    spec: ModelSpec
    prompt: PromptTemplate
    rater: str
    """The machine rater the answers will be recorded as."""
    units: list[Unit]
    filters: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    include_answered: bool = False
    base_url: str | None = None
    """Base URL of a compatible server (recorded without user or password)."""
    unusable: dict[str, int] = field(default_factory=dict)
    """Items left out, by reason."""
    est_cost_usd: float | None = None
    """Estimated cost of the requests not in the cache, direct calls."""

    @property
    def n_cached(self) -> int:
        return sum(unit.cached for unit in self.units)

    @property
    def n_to_send(self) -> int:
        return len(self.units) - self.n_cached

    @property
    def est_cost_batch_usd(self) -> float | None:
        return None if self.est_cost_usd is None else round(self.est_cost_usd * BATCH_DISCOUNT, 6)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The dry run: one JSON-serialisable dict per request, nothing sent."""
        return [{
            "item": unit.work.item_uid,
            "question": unit.work.question_key,
            "rater": self.rater,
            "provider": self.spec.provider,
            "model": self.spec.model,
            "prompt_version": self.prompt.version,
            "request_hash": unit.request_hash,
            "cached": unit.cached,
            "request": unit.body,
        } for unit in self.units]

    def params(self) -> dict[str, Any]:
        """What is recorded in llm_runs.params (and enough to plan the run again)."""
        return {"filters": self.filters, "limit": self.limit,
                "include_answered": self.include_answered,
                "max_output_tokens": self.task.max_output_tokens,
                "prompt": self.prompt.version if self.prompt.shipped else self.prompt.source,
                "base_url": public_url(self.base_url)}

    def summary(self) -> str:
        """One paragraph for the terminal or the Data screen."""
        what = {"map": "responses to map", "judge": "criteria to judge",
                "extract": "reports to read"}[self.task.name]
        text = f"{len(self.units)} {what} as {self.rater}"
        if self.n_cached:
            text += f"; {self.n_cached} answered from the cache at no cost"
        if self.est_cost_usd is None:
            text += f"; no price known for {self.spec.name}, cost not estimated"
        else:
            text += (f"; estimated cost ${self.est_cost_usd:.2f} "
                     f"(${self.est_cost_batch_usd:.2f} with the batch API)")
        if self.unusable:
            text += "; left out: " + ", ".join(f"{n} {why}" for why, n in self.unusable.items())
        return text


def _check_filters(task: Task, filters: dict[str, Any] | None) -> dict[str, Any]:
    filters = {k: v for k, v in (filters or {}).items() if v not in (None, "", [])}
    unknown = set(filters) - set(task.filters)
    if unknown:
        raise ValueError(f"unknown filter(s) {', '.join(sorted(unknown))} for {task.name}; "
                         f"known: {', '.join(task.filters)}")
    return filters


MAX_OUTPUT_TOKENS = 128_000
"""The largest output limit a run may ask for (the largest any current model takes)."""


def plan_run(store: Store, task: str, model_spec: str | ModelSpec, prompt_version: str | None = None,
             limit: int | None = None, filters: dict[str, Any] | None = None, *,
             include_answered: bool = False, base_url: str | None = None,
             max_output_tokens: int | None = None) -> RunPlan:
    """Plan a run of any task (map | judge | extract); see the module docstring.
    `max_output_tokens`: the room each reply has (default: the task's); a
    reply cut off at the limit is left unanswered, for a run with more room."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    the_task = TASKS[task]
    if max_output_tokens is not None:
        if type(max_output_tokens) is not int or not 1 <= max_output_tokens <= MAX_OUTPUT_TOKENS:
            raise ValueError(f"the output limit must be a whole number of tokens from 1 to"
                             f" {MAX_OUTPUT_TOKENS:,}, got {max_output_tokens!r}")
        the_task = replace(the_task, max_output_tokens=max_output_tokens)
    spec = parse_model_spec(model_spec)
    prompt = load_prompt(task, prompt_version)
    filters = _check_filters(the_task, filters)
    if limit is not None and limit < 0:
        raise ValueError("limit must be 0 or more")
    url = resolve_base_url(spec, base_url) if spec.provider == "compatible" else base_url
    name = rater_name(spec, prompt)
    rater_id = find_rater_id(store, name)
    if rater_id is not None:
        known = store.scalar("SELECT json_extract(meta, '$.prompt_hash') FROM raters WHERE id = ?",
                             (rater_id,))
        if known and known != prompt.sha256:
            raise ValueError(f"rater {name!r} answered with a different prompt text; "
                             "give the changed prompt a new version")
    found = the_task.find_work(store, rater_id, filters, limit, include_answered)
    units = []
    for work in found.work:
        system, user = prompt.render(work.values)
        body = request_body_for(spec, system, user, the_task)
        units.append(Unit(work, body, request_hash(spec, body, url),
                          estimate_tokens(canonical_json(body))))
    hits = cached_calls(store, [u.request_hash for u in units])
    for unit in units:
        unit.cached = unit.request_hash in hits
    plan = RunPlan(the_task, spec, prompt, name, units, filters, limit, include_answered, url,
                   found.unusable)
    price = price_for(spec.provider, spec.model)
    if price is not None:
        to_send = [u for u in units if not u.cached]
        tokens_in = sum(u.est_input_tokens for u in to_send)
        tokens_out = the_task.typical_output_tokens * len(to_send)
        plan.est_cost_usd = round((tokens_in * price[0] + tokens_out * price[1]) / 1_000_000, 6)
    return plan


def plan_map_run(store: Store, model_spec: str | ModelSpec, prompt_version: str | None = "mapper-v1",
                 limit: int | None = None, filters: dict[str, Any] | None = None, *,
                 include_answered: bool = False, base_url: str | None = None,
                 max_output_tokens: int | None = None) -> RunPlan:
    """Plan mapping CARE-Bench responses onto the four escalation codes.
    Filters: dataset, model (the responding model), split, items (uids)."""
    return plan_run(store, "map", model_spec, prompt_version, limit, filters,
                    include_answered=include_answered, base_url=base_url,
                    max_output_tokens=max_output_tokens)


def plan_judge_run(store: Store, model_spec: str | ModelSpec, prompt_version: str | None = "judge-v1",
                   limit: int | None = None, filters: dict[str, Any] | None = None, *,
                   include_answered: bool = False, base_url: str | None = None,
                 max_output_tokens: int | None = None) -> RunPlan:
    """Plan judging rubric criteria (questions of kind 'criterion'), one criterion per call.
    Filters: dataset, kind (item kind), question (key or glob, e.g. 'hb:*'), codebook,
    items, answered_by (rater-name glob: only pairs that rater answered)."""
    return plan_run(store, "judge", model_spec, prompt_version, limit, filters,
                    include_answered=include_answered, base_url=base_url,
                    max_output_tokens=max_output_tokens)


def plan_extract_run(store: Store, model_spec: str | ModelSpec,
                     prompt_version: str | None = "extract-v1", limit: int | None = None,
                     filters: dict[str, Any] | None = None, *, include_answered: bool = False,
                     base_url: str | None = None, max_output_tokens: int | None = None) -> RunPlan:
    """Plan reading the verdict of CliniCARE reports. Filters: dataset, kind
    (default trajectory), question (default clinicare.verdict), items, unparsed_only
    (only reports whose `## Answer:` line the importer could not read)."""
    return plan_run(store, "extract", model_spec, prompt_version, limit, filters,
                    include_answered=include_answered, base_url=base_url,
                    max_output_tokens=max_output_tokens)
