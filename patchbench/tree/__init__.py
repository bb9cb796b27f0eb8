"""Stage 3: apply a Series to a kernel git tree in isolation, one commit per patch.

Later stages use `apply_series` and the result dataclasses; the commits live in the user's object
store and stay reachable from `refs/patchbench/<series>/<base>-<diffs>` (see `apply.series_ref`).
"""

from patchbench.tree.apply import REF_PREFIX, apply_series, series_ref
from patchbench.tree.result import AppliedPatch, ApplyFailure, ApplyResult

__all__ = ["REF_PREFIX", "AppliedPatch", "ApplyFailure", "ApplyResult", "apply_series", "series_ref"]
