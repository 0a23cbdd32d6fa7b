"""What makes the Agreement screen fast at 20,000 items, each held by a test: the same
figures, less work (the figures themselves are held by test_agreement*.py)."""

from __future__ import annotations

import gc
import math
import threading

import numpy as np
import pytest

from labels import agreement as ag
from labels import compare as cmp
from labels.compare.collector import collector_paused


def test_ratings_are_encoded_by_one_look_up_each(monkeypatch):
    """Categories and None take the fast path; NaN, pandas.NA and unknown values the
    rating-by-rating one, with the same result and the same message as before."""
    pd = pytest.importorskip("pandas")
    calls = []
    real = ag._is_missing
    monkeypatch.setattr(ag, "_is_missing", lambda x: calls.append(x) or real(x))
    rows = [["a", "b"], [None, "c"], ["c", "c"]] * 1000
    codes = ag._encode(rows, ["a", "b", "c"])
    assert calls == []
    assert codes.shape == (3000, 2) and codes[:3].tolist() == [[0, 1], [-1, 2], [2, 2]]
    mixed = ag._encode([["a", math.nan], [pd.NA, "b"], [np.float64("nan"), None]],
                       ["a", "b"])
    assert mixed.tolist() == [[0, -1], [-1, 1], [-1, -1]]
    with pytest.raises(ValueError, match=r"unit 1, rater 0: 'x' is not one of the categories"):
        ag._encode([["a", "b"], ["x", "a"]], ["a", "b"])
    with pytest.raises(ValueError, match="unit 1 has 1 ratings; the table has 2 raters"):
        ag._encode([["a", "b"], ["a"]], ["a", "b"])
    with pytest.raises(ValueError, match=r"\['a'\] is not one of the categories"):
        ag._encode([[["a"], "b"]], ["a", "b"])


def test_the_collector_is_paused_inside_a_comparison_and_resumed_after(demo, monkeypatch):
    seen = []

    assert gc.isenabled()
    with collector_paused():
        seen.append(gc.isenabled())
        with collector_paused():  # nested, as a screen's call around the library's
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    assert seen == [False, False, False] and gc.isenabled()

    # Two threads: resumed only when the last one leaves.
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with collector_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.isenabled()

    # And a report is computed with it paused, the collector running again after.
    from labels.compare import pairs

    states = []
    real = pairs.agreement_table

    def spy(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(pairs, "agreement_table", spy)
    report = cmp.agreement_report(demo, "carebench.response_action", cmp.MAJORITY,
                                  "demo:mapper@v1", n_boot=50)
    assert states and not any(states) and gc.isenabled() and report.n_units > 0
    with pytest.raises(ValueError):  # resumed after an error too
        cmp.agreement_report(demo, "carebench.response_action", "nobody at all", "x")
    assert gc.isenabled()
