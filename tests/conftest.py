"""Shared test fixtures. The default run needs no GPU; tests marked `gpu` skip without CUDA.

Real exports from public projects live in ../shared/fixtures (beside the clone, read-only);
tests that use them skip when the folder is absent. Never copy those files into the repo.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._paths import DATA, REPO, SHARED_FIXTURES


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without the plugin
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`make test` runs `-n auto`: one worker per CPU this process may use (its affinity, which a container's
    CPU set limits; psutil would count the host's), at most 4: the longest test module (tests/collectors/
    test_gpu_check.py, about 30 s) bounds the run beyond that, and each worker imports torch."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


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
def repo() -> Path:
    """The clone's root."""
    return REPO


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """tests/data: the repo's own small fixtures."""
    return DATA


@pytest.fixture(scope="session")
def example_csv() -> Path:
    """The packaged example (what `nsroof demo` reads): 15 kernels on an A100-SXM4-40GB, 10 names, 6 of them
    GEMMs and 2 softmax, with ncu's own peaks."""
    return REPO / "nsroof" / "data" / "examples" / "example_details.csv"


@pytest.fixture(scope="session")
def tiny_raw_csv() -> Path:
    """tests/data/spine/tiny_raw.csv: a raw-page export of 2 launches on an NVIDIA A100-SXM4-40GB, no ncu
    peaks."""
    return DATA / "spine" / "tiny_raw.csv"


@pytest.fixture(scope="session")
def cpu_machine_json() -> Path:
    """tests/data/collectors/test-cpu.json: round test figures (100 GFLOP/s fp32, 10 GB/s DRAM), not a real
    CPU."""
    return DATA / "collectors" / "test-cpu.json"


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread for the test (`pytestmark = pytest.mark.usefixtures("one_thread")`): on two cores
    shared with other jobs, OpenMP spinning makes each op milliseconds slower."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
