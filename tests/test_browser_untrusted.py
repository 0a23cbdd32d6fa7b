"""Untrusted text in a real browser: a patient turn and a model reply written to
attack the page are shown exactly as written, and nothing in them links,
loads, runs, colours or formats."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from review.datasets.sources import import_file
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.browser import chromium, running_app, wait_for_app
from tests.helpers import write_jsonl

pytestmark = pytest.mark.browser

# What escaped earlier versions of the escaping (each reached the browser as a
# link, an image, colour or an icon), and the classics.
HOSTILE = [
    "a@evil.example`b", "x`https://evil.example/t", "see `www.evil.example", "_www.evil.example_",
    "1https://evil.example", "x_https://evil.example", ":red[RED] :smile: :material/home: x:ok:",
    "**bold https://evil.example/b** and _it a@evil.example_",
    "[`x`](//evil.example/p) ![`x`](//evil.example/i.png) [[c]](//evil.example/q)",
    "`a", "# [h](//evil.example/h) `", "- https://evil.example/l", "> [bq](//evil.example/bq)",
    "[r]: //evil.example/rb", "[r]", "<img src=x onerror=alert(1)> <script>alert(1)</script> &amp;",
    "$x^2$ costs $5", "<https://evil.example/angle>", "    indented four", "| a | b |", "|---|---|",
    "![x](data:image/png;base64,AAAA)", "~~strike~~",
]
TURN = "\n".join(HOSTILE)


def test_hostile_patient_and_model_text_is_shown_as_written_and_does_nothing(demo_copy, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    prefixes = write_jsonl(files / "evaluation_prefixes_public.jsonl", [{
        "prefix_id": "zz_hostile_r01", "case_id": "zz_hostile", "round_id": 1, "split": "validation",
        "gold_label": "0A_NO_ESCALATION_INFO_NEEDED", "input_patient_turns": [TURN]}])
    generations = write_jsonl(files / "raw_generations.jsonl", [{
        "prefix_id": "zz_hostile_r01", "model": "m-hostile", "raw_model_response": TURN,
        "generation_failed": False}])
    with open_store(demo_copy) as s:
        import_file(s, prefixes)
        import_file(s, generations)
        ensure_reviewer(s, "Dr. Untrusted")
        s.checkpoint()
    with running_app(demo_copy) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        page.goto(f"{url}/?reviewer={quote('Dr. Untrusted')}&kind=response"
                  f"&item={quote('zz_hostile_r01::m-hostile')}")
        wait_for_app(page)
        found = page.evaluate("""() => {
          const main = document.querySelector('[data-testid=stMain]');
          const md = [...main.querySelectorAll('[data-testid=stChatMessage] [data-testid=stMarkdownContainer]')];
          return {
            links: [...main.querySelectorAll('a[href]')].map(a => a.href)
                     .filter(h => !h.startsWith(location.origin)),
            images: main.querySelectorAll('img').length,
            math: main.querySelectorAll('.katex').length,
            styled: md.flatMap(e => [...e.querySelectorAll('[style], strong, em, del, code, h1, li, table, blockquote')]).length,
            icons: md.flatMap(e => [...e.querySelectorAll('[data-testid=stIconMaterial]')]).length,
            texts: md.map(e => e.innerText),
            pwned: window.__pwned === 1,
          };
        }""")
    assert found["links"] == [] and found["images"] == 0 and found["math"] == 0
    assert found["styled"] == 0 and found["icons"] == 0 and not found["pwned"]
    shown = [t.replace("\u2060", "").replace("\u00a0", " ") for t in found["texts"]]
    assert shown.count(TURN) == 2, shown  # the patient's turn and the model's reply, character for character
