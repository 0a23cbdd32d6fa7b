"""Write a KlinikeBench-shaped episodes file: deterministic, invented text only.

    .venv/bin/python bench/gen_klinikebench.py OUT.jsonl --episodes 14000 [--steps 30] [--seed 0]
    .venv/bin/python bench/gen_klinikebench.py OUT.parquet --episodes 200

One row per episode in the published shape (the dataset card, FORMATS.md
section 2, `../shared/data/conformance/klinikebench/`): `reward`,
`outcome_pass`, `diagnosis`, `required_tools`, `parameterised_actions` and
`must_ask` are verifier scores in 0..1 (null when the episode raised);
`transcript`, `agent_steps` (a whole ATIF trajectory), `gates` (per gate: the
pass flag and its detail - expected diagnosis, required and missing tools,
parameter violations, the judge's per-topic verdicts) and `meta` are JSON
strings, as in the real data. An agent step is a Terminus-style reply
`{analysis, plan, commands}` whose command runs `clinic say "..."` (a question
to the simulated patient, answered in the observation) or `clinic call <tool>
'<json>'`. About 2% of episodes raise (`exception` set, verifier fields null).
Sizes aim at real runs: a ~3 KB system prompt, agent replies of a few hundred
characters, tool outputs up to ~1 KB; about 60 KB an episode at 30 steps (the nested JSON strings
are escaped twice, as in the real files).
Episode i depends only on (seed, i), so any slice can be regenerated alone.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SUBSETS = (("leaderboard", 8912), ("step_cap_ablation", 1000), ("patient_simulator_grid", 4000),
           ("qwen3_4b_zero_shot", 50))
CLINICIANS = tuple(f"vendor{v}/clinician-model-{m}" for v in "abc" for m in range(1, 10))
PATIENTS = ("simco/patient-sim-small", "simco/patient-sim-large")
JUDGE = "judgeco/judge-model-2"
TOOLS = ("check_vitals", "physical_exam", "order_lab", "order_imaging", "prescribe", "refer")
TOPICS = ("onset and duration of the complaint", "current medicines", "drug allergies",
          "smoking and alcohol", "previous episodes", "family history", "fever or chills",
          "weight change", "sleep and mood", "pregnancy possibility", "recent travel",
          "bowel and bladder habits")
COMPLAINTS = ("a dull ache in the lower back", "a tight feeling across the chest when climbing stairs",
              "itchy red patches on both elbows", "waking at night with a dry cough",
              "a throbbing headache behind one eye", "tingling in the fingers of the left hand",
              "feeling light-headed when standing up", "a sore, swollen right knee")
DIAGNOSES = ("mechanical back strain", "stable angina", "plaque psoriasis", "cough-variant asthma",
             "cluster headache", "carpal tunnel syndrome", "orthostatic hypotension",
             "knee osteoarthritis flare")
WORDS = ("the", "patient", "reports", "symptoms", "that", "started", "gradually", "over", "several",
         "days", "with", "no", "clear", "trigger", "and", "mild", "improvement", "after", "rest",
         "which", "suggests", "a", "benign", "course", "but", "red", "flags", "must", "be",
         "excluded", "before", "any", "plan", "is", "agreed", "history", "examination", "findings",
         "support", "next", "step", "ask", "about", "medication", "review", "results", "pending")


def sentence(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        s = sentence(rng, rng.randint(8, 18))
        out.append(s)
        size += len(s) + 1
    return " ".join(out)


SYSTEM_PROMPT = (
    "You are a clinician working in a simulated outpatient clinic. You talk to the patient and "
    "use clinic tools only through shell commands. Reply with a JSON object with the keys "
    "analysis, plan and commands. " + paragraph(random.Random(7), 2900)
)


def _agent_step(rng: random.Random, step_id: int, t: datetime, model: str, kind: str,
                text: str, tool: str | None, args: dict | None, reply: str,
                prompt_tokens: int, done: bool) -> dict[str, Any]:
    if kind == "say":
        command = f'clinic say "{text}"\n'
    else:
        command = f"clinic call {tool} '{json.dumps(args)}'\n"
    call_id = f"call_{step_id}_1"
    message = {"analysis": paragraph(rng, rng.randint(150, 400)), "plan": paragraph(rng, 100),
               "commands": [{"keystrokes": command, "duration": 1.0}], "task_complete": done}
    completion = rng.randint(120, 400)
    return {
        "step_id": step_id, "timestamp": t.isoformat().replace("+00:00", "Z"), "source": "agent",
        "model_name": model, "message": json.dumps(message),
        "tool_calls": [{"tool_call_id": call_id, "function_name": "bash_command",
                        "arguments": {"keystrokes": command, "duration": 1.0}}],
        "observation": {"results": [{"source_call_id": call_id, "content": reply}]},
        "metrics": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                    "cached_tokens": prompt_tokens // 2,
                    "cost_usd": round(prompt_tokens * 1e-7 + completion * 4e-7, 6)},
    }


def episode(i: int, seed: int = 0, steps: int = 30, n_total: int = 14_000) -> dict[str, Any]:
    """Episode number i as a row (JSON-string fields as in the real data)."""
    rng = random.Random(seed * 1_000_003 + i)
    subset = _subset(i, n_total)
    case = rng.randrange(len(COMPLAINTS))
    model = CLINICIANS[i % len(CLINICIANS)]
    task_id = f"kb-task-{i % 333:03d}"
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=7 * i)
    must_ask = rng.sample(TOPICS, rng.randint(3, 6))
    required = rng.sample(TOOLS, 3)
    params = [{"tool": "prescribe", "params": {"dose_mg": 500, "route": "oral"}}]
    failed = rng.random() < 0.02
    n_steps = steps if not failed else rng.randint(3, max(3, steps // 3))
    atif = [{"step_id": 1, "timestamp": start.isoformat().replace("+00:00", "Z"), "source": "system",
             "message": SYSTEM_PROMPT},
            {"step_id": 2, "timestamp": start.isoformat().replace("+00:00", "Z"), "source": "user",
             "message": f"A patient has come to the clinic with {COMPLAINTS[case]}. "
                        + paragraph(rng, 700)}]
    transcript = [{"role": "user", "content": f"Hello doctor, I have {COMPLAINTS[case]}."}]
    asked: list[str] = []
    prompt_tokens = 1500
    t = start
    for step_id in range(3, n_steps + 1):
        t += timedelta(seconds=rng.randint(4, 40))
        prompt_tokens += rng.randint(150, 500)
        last = step_id == n_steps and not failed
        if last:
            args = {"diagnosis": DIAGNOSES[case], "confidence": "moderate"}
            step = _agent_step(rng, step_id, t, model, "call", "", "submit_diagnosis", args,
                               "Diagnosis recorded.", prompt_tokens, True)
        elif rng.random() < 0.6:
            topic = rng.choice(must_ask + list(TOPICS))
            question = f"Could you tell me about {topic}? " + sentence(rng, 10)
            answer = "PATIENT: " + paragraph(rng, rng.randint(100, 300))
            asked.append(topic)
            transcript += [{"role": "assistant", "content": question},
                           {"role": "user", "content": answer[9:]}]
            step = _agent_step(rng, step_id, t, model, "say", question, None, None, answer,
                               prompt_tokens, False)
        else:
            tool = rng.choice(TOOLS)
            args = {"test": "full blood count"} if tool == "order_lab" else {"area": "general"}
            output = json.dumps({"tool": tool, "status": "ok", "result": paragraph(rng, rng.randint(150, 1000))})
            step = _agent_step(rng, step_id, t, model, "call", "", tool, args, output,
                               prompt_tokens, False)
        atif.append(step)
    return _row(i, rng, subset, model, task_id, start, t, atif, transcript, must_ask, asked,
                required, params, failed, case)


def trajectory(model: str, steps: list[dict[str, Any]], session: str) -> dict[str, Any]:
    """The agent's steps as a whole ATIF document (what `agent_steps` holds)."""
    usage = [s.get("metrics") or {} for s in steps]
    return {
        "schema_version": "ATIF-v1.5", "session_id": session,
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": model,
                  "extra": {"parser": "json"}},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
            "total_completion_tokens": sum(u.get("completion_tokens", 0) for u in usage),
            "total_cached_tokens": sum(u.get("cached_tokens", 0) for u in usage),
            "total_cost_usd": round(sum(u.get("cost_usd", 0) for u in usage), 6),
            "total_steps": len(steps)},
    }


def _row(i, rng, subset, model, task_id, start, end, atif, transcript, must_ask, asked,
         required, params, failed, case) -> dict[str, Any]:
    topics = [{"topic": topic, "asked": topic in asked,
               "verdict": "yes" if topic in asked else "no",
               "explanation": sentence(rng, 12)} for topic in must_ask]
    missing = [t for t in required if rng.random() < 0.2]
    scores = {"diagnosis": float(rng.random() < 0.6),
              "required_tools": round(1 - len(missing) / len(required), 4),
              "parameterised_actions": float(rng.random() < 0.8),
              "must_ask": round(sum(t["asked"] for t in topics) / len(topics), 4)}
    gates = {
        "diagnosis": {"passed": scores["diagnosis"] == 1.0, "expected": DIAGNOSES[case],
                      "recorded": DIAGNOSES[case] if scores["diagnosis"] == 1.0 else None},
        "required_tools": {"passed": not missing, "required": required, "missing_tools": missing},
        "parameterised_actions": {
            "passed": scores["parameterised_actions"] == 1.0,
            "violations": [] if scores["parameterised_actions"] == 1.0 else [
                {"tool": "prescribe", "param": "dose_mg", "reason": "expected 500, got 5000"}]},
        "must_ask": {"passed": scores["must_ask"] >= 0.8, "judge_model": JUDGE, "topics": topics},
    }
    passed = all(g["passed"] for g in gates.values())
    usage = [s.get("metrics", {}) for s in atif]
    verified = None if failed else scores
    return {
        "subset": subset, "run": f"run-{i % 3 + 1}", "trial_name": f"{task_id}__{i:06x}",
        "task_id": task_id, "split": "test" if i % 5 == 0 else "train",
        "task_dataset": "kb-synthetic", "clinician_model": model,
        "patient_model": PATIENTS[i % 2], "judge_model": JUDGE, "max_turns": 20,
        "max_steps": len(atif) + 5,
        "reward": None if failed else float(passed),
        "outcome_pass": None if failed else float(passed),
        **{k: None if verified is None else verified[k] for k in scores},
        "n_turns": len(transcript) // 2, "n_steps": len(atif),
        "diagnosed": not failed and scores["diagnosis"] == 1.0, "sim_ok": not failed,
        "judge_ok": not failed,
        "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
        "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage),
        "cached_tokens": sum(u.get("cached_tokens", 0) for u in usage),
        "cost_usd": round(sum(u.get("cost_usd", 0) for u in usage), 6),
        "started_at": start.isoformat(), "finished_at": end.isoformat(),
        "exception": "SimulatorTimeout" if failed else None,
        "transcript": json.dumps(transcript),
        "agent_steps": json.dumps(trajectory(model, atif, f"{task_id}__{i:06x}-sess")),
        "gates": None if failed else json.dumps(gates),
        "meta": json.dumps({"max_turns": 20, "max_steps": len(atif) + 5, "completed": not failed,
                            "patient_simulator": {"status": "ok" if not failed else "timeout"},
                            "episode": i, "seed_note": "synthetic"}),
    }


def _subset(i: int, n_total: int) -> str:
    total = sum(n for _, n in SUBSETS)
    position = (i % n_total) / max(n_total, 1) * total
    for name, n in SUBSETS:
        if position < n:
            return name
        position -= n
    return SUBSETS[-1][0]


def episodes(n: int, seed: int = 0, steps: int = 30) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield episode(i, seed, steps, n)


def write_jsonl(path: Path, n: int, seed: int = 0, steps: int = 30) -> int:
    """Write n episodes; returns the file size in bytes."""
    with path.open("w", encoding="utf-8") as fh:
        for row in episodes(n, seed, steps):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path.stat().st_size


STRINGS = ("subset", "run", "trial_name", "task_id", "split", "task_dataset", "clinician_model",
           "patient_model", "judge_model", "started_at", "finished_at", "exception", "transcript",
           "agent_steps", "gates", "meta")
INTS = ("max_turns", "max_steps", "n_turns", "n_steps", "prompt_tokens", "completion_tokens",
        "cached_tokens")
FLOATS = ("reward", "outcome_pass", "diagnosis", "required_tools", "parameterised_actions",
          "must_ask", "cost_usd")
BOOLS = ("diagnosed", "sim_ok", "judge_ok")
COLUMNS = ("subset", "run", "trial_name", "task_id", "split", "task_dataset", "clinician_model",
           "patient_model", "judge_model", "max_turns", "max_steps", "reward", "outcome_pass",
           "diagnosis", "required_tools", "parameterised_actions", "must_ask", "n_turns", "n_steps",
           "diagnosed", "sim_ok", "judge_ok", "prompt_tokens", "completion_tokens", "cached_tokens",
           "cost_usd", "started_at", "finished_at", "exception", "transcript", "agent_steps",
           "gates", "meta")
"""The columns in the order of the hub's Parquet export."""


def write_parquet(path: Path, n: int, seed: int = 0, steps: int = 30, chunk: int = 256) -> int:
    """Write n episodes as Parquet, typed as the hub exports them (scores as
    doubles, the JSON fields as strings); returns the size in bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {**dict.fromkeys(STRINGS, pa.string()), **dict.fromkeys(INTS, pa.int64()),
             **dict.fromkeys(FLOATS, pa.float64()), **dict.fromkeys(BOOLS, pa.bool_())}
    schema = pa.schema([(k, types[k]) for k in COLUMNS])
    with pq.ParquetWriter(path, schema) as writer:
        rows: list[dict[str, Any]] = []
        for row in episodes(n, seed, steps):
            rows.append(row)
            if len(rows) == chunk:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                rows.clear()
        if rows:
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--episodes", type=int, default=14_000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    write = write_parquet if args.out.suffix == ".parquet" else write_jsonl
    size = write(args.out, args.episodes, args.seed, args.steps)
    print(f"{args.out}: {args.episodes} episodes, {size / 1e6:.1f} MB "
          f"({size / max(args.episodes, 1) / 1e3:.1f} KB an episode)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
