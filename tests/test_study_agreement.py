"""A study's own codebooks measured as the built-ins are: published reliability data
for a 5-point ordinal scale and a 3-label nominal question, imported as labels-long
rows, give the published coefficients through `carelens agreement --json`.

Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": the reliability
data of 4 observers x 12 units with values 1..5 give alpha 0.743 (nominal), 0.815
(ordinal) and 0.849 (interval); the binary data of 2 observers x 10 units give
0.095. tests/data/study/krippendorff.csv holds both as `item_id,rater,value,question`
rows: the 5-point values as the harm scale's codes' leading digits ("3" is
3_MODERATE), the binary ones as two of the referral question's three labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli import main

STUDY = Path(__file__).parent / "data" / "study"


def carelens(db: Path, *args: str, capsys) -> str:
    code = main(["--db", str(db), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def coefficients(db: Path, question: str, capsys, *raters: str) -> dict[str, float]:
    sides = ["--a", raters[0], *(["--b", raters[1]] if len(raters) > 1 else [])]
    report = json.loads(carelens(db, "agreement", "--question", question, *sides, "--json",
                                 "--n-boot", "200", capsys=capsys))
    return {c["name"]: round(c["value"], 3) for c in report["coefficients"]
            if c["value"] is not None}


@pytest.fixture
def study(tmp_path, capsys) -> Path:
    """A database with the two study codebooks added from their files, the twelve
    invented chats imported, and the published reliability data as labels."""
    db = tmp_path / "study.db"
    for path in (STUDY / "harm-5.toml", STUDY / "referral-3.toml", ):
        carelens(db, "codebook", "add", str(path), capsys=capsys)
    carelens(db, "import", str(STUDY / "chats.jsonl"), capsys=capsys)
    out = carelens(db, "import", str(STUDY / "krippendorff.csv"), capsys=capsys)
    assert "labels-long: 61 rows, 0 new items, 61 new annotations" in out
    return db


def test_the_five_point_ordinal_scale_gives_krippendorffs_published_alphas(study, capsys):
    coef = coefficients(study, "harm.severity", capsys, "group:clinicians")
    assert coef["krippendorff_alpha_nominal"] == 0.743
    assert coef["krippendorff_alpha_ordinal"] == 0.815
    assert "krippendorff_alpha_interval" not in coef  # an ordinal scale has no distances
    assert coef["gwet_ac2"] == 0.914  # Gwet's published AC2 (quadratic) on the same data


def test_the_same_scale_with_numbers_gives_the_interval_alpha(study, tmp_path, capsys):
    text = (STUDY / "harm-5.toml").read_text(encoding="utf-8")
    text = text.replace('key = "harm-5"', 'key = "harm-5-points"').replace(
        'scale = "ordinal"', 'scale = "interval"').replace("harm.severity", "harm.points")
    for n in range(1, 6):
        text = text.replace(f'shortcut = "{n}"\n', f'shortcut = "{n}"\nvalue = {n}\n')
    interval = tmp_path / "harm-5-points.toml"
    interval.write_text(text, encoding="utf-8")
    carelens(study, "codebook", "add", str(interval), capsys=capsys)
    rows = [line.replace("harm.severity", "harm.points") for line in
            (STUDY / "krippendorff.csv").read_text().splitlines() if "referral" not in line]
    labels = tmp_path / "points.csv"
    labels.write_text("\n".join(rows) + "\n")
    carelens(study, "import", str(labels), capsys=capsys)
    coef = coefficients(study, "harm.points", capsys, "group:clinicians")
    assert (coef["krippendorff_alpha_nominal"], coef["krippendorff_alpha_ordinal"],
            coef["krippendorff_alpha_interval"]) == (0.743, 0.815, 0.849)


def test_the_three_label_nominal_question_gives_the_published_binary_alpha(study, capsys):
    coef = coefficients(study, "referral.advised", capsys, "Observer A", "Observer B")
    assert coef["krippendorff_alpha_nominal"] == 0.095
    assert coef["percent_agreement"] == 0.6
    assert "krippendorff_alpha_ordinal" not in coef and "cohen_kappa_linear" not in coef
