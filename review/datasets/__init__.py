"""Datasets: what comes in (`sources`, one importer per format), what goes out
(`export`), what the database holds (`holdings`), and the invented demo data
(`demo`, `demo_rubrics`). Their public names are re-exported here."""

from review.datasets.demo import is_empty, items_beside_the_demo, load_demo
from review.datasets.export import (
    ExportError,
    carebench_labels,
    export_annotations,
    export_carebench_labels,
    export_kind,
)
from review.datasets.holdings import (
    ImportRecord,
    KindCount,
    annotation_count,
    import_history,
    item_counts,
)
from review.datasets.sources import (
    FORMATS,
    ImportOptions,
    ImportResult,
    InputError,
    detect_format,
    import_file,
)

__all__ = [
    "FORMATS", "ExportError", "ImportOptions", "ImportRecord", "ImportResult", "InputError",
    "KindCount", "annotation_count", "carebench_labels", "detect_format", "export_annotations",
    "export_carebench_labels", "export_kind", "import_file", "import_history", "is_empty",
    "item_counts", "items_beside_the_demo", "load_demo",
]
