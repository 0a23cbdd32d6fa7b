"""One importer per format, each turning a file into the common item model.

Importing this package registers every format in `FORMATS`.
"""

# The plain conversations first: a file with `messages` is theirs (no published format
# has that field), before formats whose looser names (`id`, `output`) it could match.
from review.datasets.sources import conversations  # noqa: F401, I001
from review.datasets.sources import atif, clinicare, harbor, healthbench, klinikebench  # noqa: F401, I001
from review.datasets.sources import carebench, labels_long  # noqa: F401  (registers formats)
from review.datasets.sources.base import (
    AUTO,
    FORMATS,
    ImportOptions,
    ImportResult,
    detect_format,
    import_file,
)
from review.datasets.sources.readers import Limits
from store.writer import InputError

__all__ = ["AUTO", "FORMATS", "ImportOptions", "ImportResult", "InputError", "Limits", "detect_format",
           "import_file"]
