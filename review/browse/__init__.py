"""Browse: search and qualitative error browsing over the store.

One module per job - `query` (a view and its URL), `facts` (what each facet
reads, as SQL), `index` (every item's facet values in memory: selections and
counts), `results` (one page of items), `facets` (counts per value), `tags`
(the error taxonomy), `side_by_side` (all responses to one prefix), `views`
(saved views), `export` (rows and case-study sheets) - with their public
names re-exported here. Full-text search itself lives in `review.browse.search`.
"""

from review.browse.export import (
    Case,
    ExportOptions,
    case_rows,
    case_study_html,
    case_study_markdown,
    gather_cases,
    to_csv,
    to_jsonl,
)
from review.browse.facets import (
    GATE_NAMES,
    Facet,
    FacetValue,
    comparable_raters,
    facets,
    label_name,
    ordinal_rank,
    rater_name,
)
from review.browse.index import FacetIndex, facet_index
from review.browse.query import PARAM_NAMES, PARENT, SCREENS, BrowseQuery, browse_link, item_link
from review.browse.results import (
    PER_PAGE,
    BrowsePage,
    ResultItem,
    browse,
    selected_item_ids,
    view_item_ids,
)
from review.browse.side_by_side import LabelCell, ResponseColumn, SideBySide, side_by_side
from review.browse.tags import (
    Tag,
    TagCount,
    TagEvent,
    add_tag,
    create_tag,
    list_tags,
    may_add_tags,
    remove_tag,
    retire_tag,
    tag_counts,
    tag_history,
    tags_on,
)
from review.browse.views import SavedView, save_view, saved_views

__all__ = [
    "GATE_NAMES", "PARAM_NAMES", "PARENT", "PER_PAGE", "BrowsePage", "BrowseQuery", "Case", "ExportOptions",
    "Facet", "FacetValue", "LabelCell", "ResponseColumn", "ResultItem", "SavedView", "SideBySide",
    "Tag", "TagCount", "TagEvent", "add_tag", "browse", "browse_link", "case_rows",
    "case_study_html", "case_study_markdown", "comparable_raters", "create_tag", "facet_index",
    "SCREENS", "facets", "gather_cases", "item_link", "label_name", "list_tags", "ordinal_rank", "rater_name",
    "may_add_tags", "remove_tag", "retire_tag",
    "save_view", "saved_views", "selected_item_ids", "side_by_side", "tag_counts", "tag_history",
    "tags_on", "to_csv", "to_jsonl", "FacetIndex", "view_item_ids",
]
