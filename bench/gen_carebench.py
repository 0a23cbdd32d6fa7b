"""Generate CARE-Bench-shaped files at the size of a full study.

925 prefixes (439 cases, 1-3 rounds) and one raw generation per prefix for
each of 20 models: 18,500 responses of realistic length, in the release's
shapes (`../shared/data/conformance/carebench/`): the 14 raw-generation fields,
a failed generation with `raw_model_response` and `model_actual` null and the
provider's error, and now and then an empty reply (`""`, not failed: a model
that spent its output budget). `write_mapped` adds the mapper's output for
them (`mapped_responses.jsonl`). All text is invented filler; nothing here is
patient data.

    python bench/gen_carebench.py OUT_DIR [--prefixes 925] [--models 20] [--mapped]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

CODES = ["0A_NO_ESCALATION_INFO_NEEDED", "0B_NO_ESCALATION_SELF_CARE_MONITOR",
         "1A_ESCALATION_NONURGENT_CARE", "1B_ESCALATION_URGENT_CARE"]
WORDS = ("pain swelling fever cough headache tired dizzy rash week days since morning worse better "
         "left right chest arm leg stomach nausea sleep breathing medicine tablets doctor clinic "
         "sudden gradual mild severe constant comes goes after before eating walking").split()
SPLITS = ("development", "validation", "public_test_1")


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng, rng.randint(8, 18)) for _ in range(sentences))


def generate(out: Path, n_prefixes: int = 925, n_models: int = 20, seed: int = 7) -> tuple[Path, Path]:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    prefixes_path = out / "evaluation_prefixes_public.jsonl"
    generations_path = out / "raw_generations.jsonl"
    models = [f"model-{i:02d}" for i in range(n_models)]
    made = 0
    case = 0
    with prefixes_path.open("w") as pf, generations_path.open("w") as gf:
        while made < n_prefixes:
            case += 1
            turns: list[str] = []
            for rnd in range(1, rng.randint(1, 3) + 1):
                if made >= n_prefixes:
                    break
                made += 1
                turns.append(paragraph(rng, rng.randint(2, 6)))
                prefix_id = f"bench_v1_case_{case:04d}_r{rnd:02d}"
                split = SPLITS[case % 3]
                pf.write(json.dumps({
                    "prefix_id": prefix_id, "case_id": f"bench_v1_case_{case:04d}", "round_id": rnd,
                    "split": split, "gold_label": rng.choice(CODES), "input_patient_turns": list(turns),
                    "source_dataset": "bench", "source_case_id": str(case),
                    "specialty_or_domain": "general", "case_age_group": "adult"}) + "\n")
                info = "\n".join(turns)
                for model in models:
                    failed = rng.random() < 0.01
                    empty = not failed and rng.random() < 0.005
                    reply = None if failed else "" if empty else paragraph(rng, rng.randint(6, 20))
                    gf.write(json.dumps({
                        "prefix_id": prefix_id, "case_id": f"bench_v1_case_{case:04d}", "split": split,
                        "round_id": rnd, "protocol": "unprompted", "prompt_version": "v1",
                        "patient_information_available_so_far": info,
                        "input_messages": [{"role": "system", "content": "You are a helpful assistant."},
                                           {"role": "user", "content": info}],
                        "model_requested": model,
                        "model_actual": None if failed else model + "-2026-10-01",
                        "provider": "bench", "raw_model_response": reply,
                        "generation_failed": failed,
                        "error_message": "RateLimitError: Error code: 429 - rate limit reached"
                        if failed else None}) + "\n")
    return prefixes_path, generations_path


def write_mapped(generations: Path, out: Path, mapper_model: str = "bench-mapper-1",
                 version: str = "bench_mapper_v1", seed: int = 7) -> Path:
    """The mapper's output for the generations that did not fail, as the CARE-Bench
    mapper writes it: each generation's fields plus the submitter's alias, the
    mapper's model, prompt version and raw output, and the label."""
    rng = random.Random(seed)
    with generations.open(encoding="utf-8") as gf, out.open("w", encoding="utf-8") as mf:
        for line in gf:
            row = json.loads(line)
            if row["generation_failed"]:
                continue
            label = rng.choice(CODES)
            mf.write(json.dumps({**row, "model_alias": row["model_requested"].upper(),
                                 "mapper_model": mapper_model, "mapper_prompt_version": version,
                                 "mapper_raw_output": json.dumps({"label": label}),
                                 "predicted_label": label}) + "\n")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--prefixes", type=int, default=925)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--mapped", action="store_true", help="also write mapped_responses.jsonl")
    a = ap.parse_args()
    paths = list(generate(a.out, a.prefixes, a.models))
    if a.mapped:
        paths.append(write_mapped(paths[1], a.out / "mapped_responses.jsonl"))
    for p in paths:
        print(p, f"{p.stat().st_size / 1e6:.1f} MB")
