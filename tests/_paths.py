"""Where the tests' files are, computed once: the clone (REPO), the repo's own small fixtures (DATA,
tests/data) and the real exports (../shared/fixtures beside the clone, or $NSROOF_SHARED_FIXTURES).

Tests take them as conftest fixtures (repo, data_dir, shared_fixtures, ...); these constants are for what runs
at import time: parametrize lists, skip conditions, helpers and the fuzz harness."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SHARED_FIXTURES = Path(os.environ.get("NSROOF_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
