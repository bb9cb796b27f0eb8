"""Stage 3: apply a Series to a kernel git tree in isolation, one commit per patch.

Later stages use `apply_series` and the result dataclasses; the commits live in the user's object
store and stay reachable from `refs/patchbench/<series>/<base>-<diffs>` (see `apply.series_ref`).
"""

import importlib

# name -> the module defining it, imported on first use: the checker imports only
# patchbench.tree.git, and apply's imports (the mail and series stages, GitPython) cost a tenth of
# a second at every lint's start
_EXPORTS = {"REF_PREFIX": "apply", "apply_series": "apply", "series_ref": "apply",
            "AppliedPatch": "result", "ApplyFailure": "result", "ApplyResult": "result"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
