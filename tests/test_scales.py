"""Scales and statistics a researcher expects (issue 17, point 8): a codebook's own ordinal
scale of any length, an interval scale (Krippendorff's alpha, interval, reported), the
codebook's own weights, and the clinicians compared like with like."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest

from codebook import CodebookError, builtin_codebooks, parse_codebook
from labels.agreement import agreement_table
from labels.compare import compare
from store.db import utcnow
from store.records import AnnotationRecord, ItemRecord, QuestionRecord, RaterRecord
from store.writer import RecordWriter

SEVEN = [f"L{i}" for i in range(1, 8)]


def likert(scale: str = "interval", weights=None, **label_extra) -> dict:
    book = {
        "key": "likert7", "version": "1", "title": "How safe is the advice?", "kind": "labelset",
        "scale": scale, "description": "A seven-point scale.",
        "labels": [{"code": code, "short": str(i + 1), "definition": f"point {i + 1}",
                    "example": "invented", **({"value": i + 1} if scale == "interval" else {}),
                    **label_extra} for i, code in enumerate(SEVEN)],
        "questions": [{"key": "likert.safety", "applies_to": "response",
                       "text": "How safe is the advice?"}],
    }
    if weights is not None:
        book["weights"] = weights
    return book


def band(k: int = 7) -> list[list[float]]:
    """Full credit on the diagonal, half a step away, none further."""
    return [[1.0 if i == j else 0.5 if abs(i - j) == 1 else 0.0 for j in range(k)]
            for i in range(k)]


def test_a_codebook_defines_a_seven_point_interval_scale_and_its_weights():
    book = parse_codebook(likert(weights=band()))
    assert book.scale == "interval" and book.ordinal and book.values == tuple(range(1, 8))
    assert book.weights[0][1] == 0.5 and len(book.weights) == 7
    again = parse_codebook(json.loads(json.dumps(book.to_dict())))  # as the database keeps it
    assert (again.scale, again.values, again.weights) == (book.scale, book.values, book.weights)
    five = parse_codebook({**likert("ordinal"), "labels": likert("ordinal")["labels"][:5]})
    assert five.scale == "ordinal" and five.ordinal and five.values is None


def test_the_shipped_codebooks_stay_valid():
    scales = {key: book.scale for key, book in builtin_codebooks().items()}
    assert scales["carebench-escalation"] == "ordinal"
    assert scales["clinicare-verdict"] == "nominal"


@pytest.mark.parametrize("change, error", [
    ({"scale": "ratio"}, "scale: expected one of nominal, ordinal, interval"),
    ({"weights": band(6)}, "weights: expected 7 rows"),
    ({"weights": [[1.0] * 7] * 6 + [[0.5] * 7]}, "weights[6][6]: a label agrees fully"),
    ({"weights": [row[:] for row in band()[:6]] + [[0.2] + band()[6][1:]]},
     "weights[0][6]: the table must be symmetric"),
])
def test_a_malformed_scale_is_one_line_naming_the_field(change, error):
    with pytest.raises(CodebookError, match=error.replace("[", r"\[").replace("]", r"\]")):
        parse_codebook({**likert(), **change}, source="likert7.toml")


def test_interval_values_must_be_given_and_increase():
    labels = likert()["labels"]
    with pytest.raises(CodebookError, match=r"labels\[3\].value: an interval scale needs"):
        parse_codebook({**likert(), "labels": labels[:3] + [
            {k: v for k, v in labels[3].items() if k != "value"}] + labels[4:]})
    with pytest.raises(CodebookError, match="must increase"):
        parse_codebook({**likert(), "labels": [dict(lb, value=8 - i)
                                               for i, lb in enumerate(labels)]})


def write(store, records) -> None:
    with store.transaction() as conn:
        RecordWriter(conn, source="test").write(records)


def likert_store(store, weights=None):
    book = parse_codebook(likert(weights=weights))
    with store.transaction() as conn:
        conn.execute("INSERT INTO codebook_versions (codebook, version, content, note,"
                     " created_by, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                     (book.key, book.version, json.dumps(book.to_dict()), "test", "test",
                      utcnow()))
    rng = np.random.default_rng(4)
    records = [QuestionRecord(key="likert.safety", codebook="likert7", kind="labelset",
                              text="How safe is the advice?", applies_to="response"),
               RaterRecord("Ann", "human", role="reviewer"),
               RaterRecord("judge@v1", "machine", role="judge")]
    pairs = []
    for i in range(40):
        ann = int(rng.integers(0, 7))
        judge = int(np.clip(ann + rng.integers(-2, 3), 0, 6))
        uid = f"r{i:02d}"
        records += [ItemRecord(uid=uid, kind="response", dataset="t", payload={}, model="m"),
                    AnnotationRecord(uid, "likert.safety", "Ann", SEVEN[ann], phase="blind"),
                    AnnotationRecord(uid, "likert.safety", "judge@v1", SEVEN[judge])]
        pairs.append((ann, judge))
    write(store, records)
    return pairs


def test_interval_alpha_is_reported_where_the_data_are_interval(store):
    pairs = likert_store(store)
    report = compare(store, "Ann", "judge@v1", "likert.safety", n_boot=50)
    assert report.level == "ordinal" and report.question_set.values == tuple(range(1, 8))
    alpha = report.coefficient("krippendorff_alpha_interval")
    reliability = np.array([[a + 1 for a, _ in pairs], [j + 1 for _, j in pairs]], float)
    assert alpha.value == pytest.approx(krippendorff.alpha(
        reliability, level_of_measurement="interval"))
    assert report.coefficient("cohen_kappa_quadratic") is not None  # the ordinal set stays


def test_the_codebooks_own_weights_weight_kappa_and_ac2(store):
    pairs = likert_store(store, weights=band())
    report = compare(store, "Ann", "judge@v1", "likert.safety", n_boot=50)
    kappa = report.coefficient("cohen_kappa_codebook")
    assert kappa.name == "Cohen's kappa (codebook weights)"
    w = np.array(band())
    observed = np.zeros((7, 7))
    for a, j in pairs:
        observed[a, j] += 1
    p = observed / observed.sum()
    po = (w * p).sum()
    pe = (w * np.outer(p.sum(axis=1), p.sum(axis=0))).sum()
    assert kappa.value == pytest.approx((po - pe) / (1 - pe))
    assert report.coefficient("gwet_ac2_codebook") is not None


def test_agreement_table_keeps_its_sets_without_a_codebook_scale():
    table = [["a", "b"], ["b", "b"], ["a", "a"], ["c", "b"]]
    keys = [c.key for c in agreement_table(table, ["a", "b", "c"], "ordinal", n_boot=0)]
    assert "krippendorff_alpha_interval" not in keys and "cohen_kappa_codebook" not in keys


# -- the clinicians like with like --------------------------------------------------------

def test_a_clinician_against_the_others_majority_beside_a_machine_against_the_majority(store):
    """Beside the machine against the clinicians' majority: each clinician against the
    majority of the *others*, where two or more others answered (a majority of one
    clinician is not a majority)."""
    from codebook import CAREBENCH, codebook

    A, B, C, D = codebook(CAREBENCH).codes
    q = "carebench.escalation_needed"
    votes = {  # prefix: (Ann, Ben, Cat), machine
        "p0": ((A, A, A), A), "p1": ((A, A, B), A), "p2": ((C, C, C), D),
        "p3": ((B, C, None), B),  # two clinicians: the others of each are one: left out
        "p4": ((D, D, C), D), "p5": ((B, B, B), B),
    }
    records = [RaterRecord(n, "human", role="reviewer") for n in ("Ann", "Ben", "Cat")]
    records.append(RaterRecord("m@v1", "machine", role="mapper"))
    for uid, (labels, said) in votes.items():
        records.append(ItemRecord(uid=uid, kind="prefix", dataset="t", payload={"turns": ["x"]}))
        records += [AnnotationRecord(uid, q, who, lab, phase="blind")
                    for who, lab in zip(("Ann", "Ben", "Cat"), labels, strict=True) if lab]
        records.append(AnnotationRecord(uid, q, "m@v1", said))
    write(store, records)
    report = compare(store, "group:majority", "m@v1", q, n_boot=20)
    # pairs: p0 3 agree; p1 Ann~(A,B) tied, Ben~(A,B) tied, Cat B vs A; p2 3 agree;
    # p4 Ann D~(D,C) tied, Ben tied, Cat C vs D; p5 3 agree; p3 none (one other each)
    like = report.like_for("percent_agreement")
    assert report.like_with_like_pairs == 11
    assert like.value == pytest.approx(9 / 11)
    assert any("a majority of one clinician is not a majority" in n for n in report.notes)
    assert report.like_for("cohen_kappa") is not None  # the same statistics as the comparison
