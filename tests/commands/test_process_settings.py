"""The table commands' process settings (nsroof.cli.prepare_table_process): made before numpy and pyarrow
load, an explicit setting kept, nothing changed in a process that already loaded them. Each case runs in
a fresh interpreter (the settings are read when the libraries are imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests._paths import REPO

_PROBE = """
import json, os, sys
from nsroof.cli import prepare_table_process
if sys.argv[1] == "late":
    import pyarrow
prepare_table_process()
import pyarrow as pa
print(json.dumps({"pool": pa.default_memory_pool().backend_name,
                  "env": os.environ.get("ARROW_DEFAULT_MEMORY_POOL"),
                  "blas": os.environ.get("OPENBLAS_NUM_THREADS")}))
"""


def _probe(when: str, **env: str) -> dict[str, str | None]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("ARROW_DEFAULT_MEMORY_POOL", "OPENBLAS_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", _PROBE, when], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**clean, "PYTHONPATH": str(REPO), **env})
    result: dict[str, str | None] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the system allocator pool is checked on Linux")
def test_arrow_allocates_through_the_c_library() -> None:
    assert _probe("early") == {"pool": "system", "env": "system", "blas": "1"}


def test_an_explicit_setting_is_kept() -> None:
    got = _probe("early", ARROW_DEFAULT_MEMORY_POOL="jemalloc", OPENBLAS_NUM_THREADS="3")
    assert got["env"] == "jemalloc" and got["blas"] == "3"


def test_a_process_that_loaded_pyarrow_is_left_alone() -> None:
    got = _probe("late")
    assert got["env"] is None and got["pool"] != "system"
