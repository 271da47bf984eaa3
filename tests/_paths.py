"""Where the real exports are: ../shared/fixtures beside the clone, or $NSROOF_SHARED_FIXTURES."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = Path(os.environ.get("NSROOF_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
