"""A reviewer blind to the model reads no id that names it: the address and the
details line carry an opaque id until the item's labels are shown."""

from __future__ import annotations

from review.reviewing.names import item_in_address, item_name, opaque_uid
from review.team.reviewers import ensure_reviewer
from review.workspace import open_store
from tests.helpers import action_button, open_app, shown


def address(at) -> str:
    value = at.query_params.get("item")
    return value[0] if isinstance(value, list) else value


def test_a_reply_is_addressed_by_an_opaque_id_while_the_reviewer_is_blind(demo_copy, monkeypatch):
    monkeypatch.setenv("CARELENS_DB", str(demo_copy))
    monkeypatch.setenv("CARELENS_REVEAL_DELAY", "0")
    s = open_store(demo_copy)
    ensure_reviewer(s, "Dr. Opaque", "emergency medicine", "resident")
    models = [r["model"] for r in s.query("SELECT DISTINCT model FROM items WHERE kind = 'response'")]
    s.close()
    assert models
    at = open_app("pages/review.py", "Dr. Opaque", kind="response")
    opaque = address(at)
    assert opaque.startswith("item-"), opaque
    captions = " ".join(shown(c.value) for c in at.caption)
    assert opaque in captions
    for model in models:
        assert model not in opaque and model not in captions
    # The opaque id opens the same item (a reload, a copied link).
    s = open_store(demo_copy)
    item_id = item_in_address(s, opaque, "response")
    assert item_id is not None and opaque_uid(item_id) == opaque
    real = item_name(s, item_id).uid
    s.close()
    assert "::" in real
    # Answered and revealed: the researcher's ids are back where the labels are.
    action_button(at, "label").click().run()
    action_button(at, "prev").click().run()
    assert not at.exception, at.exception
    assert address(at) == real

