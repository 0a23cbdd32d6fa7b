"""A Browse view as data: `BrowseQuery`, and the links that open a view or an item.

A view is words to search for plus facet filters. It round-trips through URL
query parameters (`to_params` / `from_params`, `query_string` /
`from_query_string`), so a link opens the same view and a saved view is just
its query string. `PARAM_NAMES` lists the parameter names (the agreement
screen links here with rater_a, rater_b, a_said, b_said).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

PARENT = "parent:"
"""Prefix of a rater name meaning: that rater's label on the item's parent (a response's prefix)."""


@dataclass(frozen=True)
class BrowseQuery:
    """Everything that decides what Browse shows. Empty fields filter nothing."""

    text: str = ""
    """What was typed in the search box."""
    kinds: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    rounds: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    """``rater=value`` pairs; values of one rater are alternatives, raters must all hold."""
    rater_a: str | None = None
    rater_b: str | None = None
    a_said: str | None = None
    b_said: str | None = None
    distances: tuple[int, ...] = ()
    """Ordinal distances between rater A's and rater B's answers."""
    gates: tuple[str, ...] = ()
    step_errors: tuple[str, ...] = ()
    severities: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    flagged: bool = False
    reviewers: tuple[str, ...] = ()
    page: int = 1
    side: str | None = None
    """The prefix whose responses are shown side by side."""

    def to_params(self) -> dict[str, str | list[str]]:
        """URL query parameters: only what differs from an empty view."""
        out: dict[str, str | list[str]] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            name = PARAM_NAMES[f.name]
            if isinstance(value, tuple):
                if value:
                    out[name] = [str(v) for v in value]
            elif isinstance(value, bool):
                if value:
                    out[name] = "1"
            elif f.name == "page":
                if value > 1:
                    out[name] = str(value)
            elif value:
                out[name] = str(value)
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, str | Sequence[str]]) -> BrowseQuery:
        """The view a URL describes. Unknown or malformed parameters are ignored."""
        kw: dict[str, Any] = {}
        for f in fields(cls):
            raw = params.get(PARAM_NAMES[f.name])
            if raw is None:
                continue
            values = [raw] if isinstance(raw, str) else [str(v) for v in raw]
            values = [v.strip() for v in values if v is not None and v.strip()]
            if not values:
                continue
            if f.name in INT_TUPLES:
                kw[f.name] = tuple(dict.fromkeys(int(v) for v in values if _is_int(v)))
            elif f.name in STR_TUPLES:
                kw[f.name] = tuple(dict.fromkeys(values))
            elif f.name == "flagged":
                kw[f.name] = values[-1].lower() in ("1", "true", "yes")
            elif f.name == "page":
                kw[f.name] = max(1, int(values[-1])) if _is_int(values[-1]) else 1
            else:
                kw[f.name] = values[-1] if f.name != "text" else (
                    raw if isinstance(raw, str) else raw[-1])
        return cls(**kw)

    def query_string(self) -> str:
        """The view as a URL query string (without '?')."""
        return urlencode(self.to_params(), doseq=True, quote_via=quote)

    @classmethod
    def from_query_string(cls, qs: str) -> BrowseQuery:
        return cls.from_params(parse_qs(qs.lstrip("?"), keep_blank_values=False))

    def with_page(self, page: int) -> BrowseQuery:
        return replace(self, page=max(1, page))


PARAM_NAMES = {
    "text": "q", "kinds": "item_kind", "datasets": "dataset", "splits": "split", "models": "model",
    "rounds": "round", "labels": "label", "rater_a": "rater_a", "rater_b": "rater_b",
    "a_said": "a_said", "b_said": "b_said", "distances": "distance", "gates": "gate",
    "step_errors": "error", "severities": "severity", "tags": "tag", "flagged": "flagged",
    "reviewers": "reviewed_by", "page": "page", "side": "side",
}
"""Field name -> URL parameter name (the agreement screen links with these)."""
INT_TUPLES = {"rounds", "distances", "severities"}
STR_TUPLES = {"kinds", "datasets", "splits", "models", "labels", "gates", "step_errors", "tags",
              "reviewers"}


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit() and len(text) < 10


def split_label(pair: str) -> tuple[str, str]:
    """``rater=value`` -> (rater, value). Rater names may hold '=' (split at the last)."""
    rater, _, value = pair.rpartition("=")
    return rater, value


def browse_link(query: BrowseQuery, page_path: str = "browse") -> str:
    """A relative link (``./``, so a server's base path is kept) that opens
    this view on the Browse page."""
    qs = query.query_string()
    return f"./{page_path}" + (f"?{qs}" if qs else "")


SCREENS = {"prefix": "", "response": "", "trajectory": "trajectories",
           "graded_conversation": "graded"}
"""The screen that reviews each kind of item (app.py's url paths; '' is the
Review page, the default, which also takes ?kind=)."""


def item_link(kind: str, uid: str, step: int | str | None = None,
              reviewer: str | None = None) -> str:
    """A relative link (``./``) that opens the item on the screen that reviews
    its kind: an agent run on Trajectories (at `step`, a step id or 'step:N',
    when given), a graded conversation on Graded conversations, a prefix or a
    response on Review; carrying the reviewer, where given, so that a link
    opened in a new tab comes back as them (local mode)."""
    screen = SCREENS.get(kind, "")
    params = {"kind": kind} if screen == "" else {}
    params["item"] = uid
    at = str(step).removeprefix("step:") if step is not None else ""
    if kind == "trajectory" and at:
        params["step"] = at
    if reviewer:
        params["reviewer"] = reviewer
    return f"./{screen}?" + urlencode(params, quote_via=quote)


