"""The Data screen in a real browser: a clinician uploads files to import."""

from __future__ import annotations

import json

import pytest

from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app
from tests.helpers import table_counts

pytestmark = pytest.mark.browser


def generation(i: int) -> dict:
    return {"prefix_id": f"up_case_{i:04d}_r01", "round_id": 1, "split": "validation",
            "patient_information_available_so_far": "Invented: a cough for a week.",
            "model_requested": "upload-model", "raw_model_response": f"Invented reply {i}.",
            "generation_failed": False, "error_message": None}


def counts(db):
    s = open_store(db)
    out = table_counts(s)
    s.close()
    return out


def upload(page, path) -> None:
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    page.get_by_test_id("stFileChip").wait_for()  # its name is shortened on screen
    page.get_by_role("button", name="Import").click()


def test_upload_a_file_then_a_bad_one_that_changes_nothing(demo_copy, tmp_path):
    good = tmp_path / "raw_generations.jsonl"
    good.write_text("".join(json.dumps(generation(i)) + "\n" for i in range(2500)))
    bad = tmp_path / "broken_generations.jsonl"
    bad.write_text(json.dumps(generation(9000)) + "\n" + json.dumps(dict(generation(9001), model_requested=None))
                   + "\n")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(url + "/data?reviewer=Dr.+Amara+Okafor")
        wait_for_app(page)
        upload(page, good)
        page.get_by_text("raw_generations.jsonl: carebench-generations: 2,500 rows, 5,000 new items").wait_for(
            timeout=60_000)
        main = page.get_by_test_id("stMain").inner_text()
        assert "search index 5,000 items" in main and "raw_generations.jsonl: imported" in main
        assert "2,840" in main  # the response count above (340 + 2,500), after the import
        s = open_store(demo_copy)
        assert s.scalar("SELECT path FROM imports ORDER BY id DESC LIMIT 1") == "upload:raw_generations.jsonl"
        s.close()
        before = counts(demo_copy)

        page.goto(url + "/data?reviewer=Dr.+Amara+Okafor")
        wait_for_app(page)
        upload(page, bad)
        page.get_by_text("broken_generations.jsonl: nothing was imported.").first.wait_for(timeout=60_000)
        main = page.get_by_test_id("stMain").inner_text()
        assert "broken_generations.jsonl:2: missing required field 'model'" in main
        assert counts(demo_copy) == before


def test_each_export_is_made_when_its_button_is_pressed(demo_copy, tmp_path):
    """The screen no longer writes the exports on every run: pressing a button makes its
    file then, with what the reader may read, the same bytes the export writes."""
    from review.datasets.export import export_annotations, export_carebench_labels
    from review.reviewing.blinding import open_labels
    from review.team.reviewers import find_reviewer

    with open_store(demo_copy) as s:
        open_labels(s, find_reviewer(s, "Dr. Amara Okafor"), "export", 0)
        export_annotations(s, tmp_path / "want.csv")
        export_annotations(s, tmp_path / "want.jsonl")
        n, _ = export_carebench_labels(s, tmp_path / "want_labels.csv")
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        page.goto(url + "/data?reviewer=Dr.+Amara+Okafor")
        wait_for_app(page)
        for name, want in (("All annotations (CSV)", "want.csv"),
                           ("All annotations (JSONL)", "want.jsonl"),
                           (f"Clinician labels, CARE-Bench CSV ({n})", "want_labels.csv")):
            with page.expect_download(timeout=60_000) as got:
                page.get_by_role("button", name=name, exact=True).click()
            assert got.value.failure() is None
            assert open(got.value.path(), "rb").read() == (tmp_path / want).read_bytes(), name
