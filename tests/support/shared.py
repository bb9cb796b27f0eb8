"""Where the tests find what ../shared holds: the peer mail corpus and the patchwork API description.

`$PATCHBENCH_SHARED` names a copy fetched at the commits pinned in scripts/shared-manifest
(`scripts/fetch-shared DEST`, as the GitHub workflow does); by default, ../shared beside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("PATCHBENCH_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CORPUS = SHARED / "corpus"
PATCHWORK_SPEC = SHARED / "specs" / "patchwork-api-v1.3.yaml"
