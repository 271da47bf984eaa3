"""Shared test fixtures. The default run needs no GPU; tests marked `gpu` skip without CUDA.

Real exports from public projects live in ../shared/fixtures (beside the clone, read-only);
tests that use them skip when the folder is absent. Never copy those files into the repo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._paths import REPO, SHARED_FIXTURES  # noqa: F401  (REPO re-exported for tests)

DATA = Path(__file__).resolve().parent / "data"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA
