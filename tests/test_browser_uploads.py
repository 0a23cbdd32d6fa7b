"""Uploads in a real browser: the file is on the server's disk, not in its memory.

`carelens serve` puts carelens's upload manager in Streamlit's place
(pages/_uploads.py): a file uploaded to the Data screen is written to a
private folder of the server's temporary directory as it arrives, and the
import reads it from there. bench/bench_upload_memory.py measures the memory."""

from __future__ import annotations

import json
import stat

import pytest

from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app
from tests.test_browser_data import generation

pytestmark = pytest.mark.browser


def test_an_upload_is_spooled_to_disk_and_imported_from_there(demo_copy, tmp_path):
    spool = tmp_path / "server-tmp"
    spool.mkdir()
    upload = tmp_path / "spooled_generations.jsonl"
    upload.write_text("".join(json.dumps(generation(i)) + "\n" for i in range(50)))
    with running_app(demo_copy, env={"TMPDIR": str(spool)}) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/data")
        wait_for_app(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
        page.get_by_test_id("stFileChip").wait_for()
        spooled = []
        for _ in range(100):  # the upload's request may still be under way
            spooled = list(spool.glob("carelens-uploads-*/*/spooled_generations.jsonl"))
            if spooled:
                break
            page.wait_for_timeout(100)
        assert len(spooled) == 1 and spooled[0].read_bytes() == upload.read_bytes()
        assert stat.S_IMODE(spooled[0].parent.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(spooled[0].stat().st_mode) == 0o600
        page.get_by_role("button", name="Import").click()
        page.get_by_text("spooled_generations.jsonl: imported").wait_for(timeout=120_000)
    with open_store(demo_copy) as s:
        assert s.scalar("SELECT n_items FROM imports WHERE path = 'upload:spooled_generations"
                        ".jsonl'") == 100  # 50 prefixes (stubs) and 50 replies
    assert list(spool.glob("carelens-uploads-*")) == []  # gone with the server
