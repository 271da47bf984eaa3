"""The cached CPU profile (nsroof.collectors.measure.cache.cpu_profile): keyed by CPU model, thread count and
torch, used only when what it holds is this configuration's, complete and physically possible; a failed
measurement re-measured once, longer, then refused; written atomically, one measuring process at a time.
Measurements are canned (tests/_measure_fakes.py): nothing is timed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from nsroof.collectors.measure import cache, runner  # noqa: E402
from nsroof.errors import InputError, NsroofError  # noqa: E402
from tests._measure_fakes import GB, GOOD, INVERTED, MIB, FakeMeasure, canned  # noqa: E402


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NSROOF_CACHE_DIR", str(tmp_path))
    return tmp_path


def fake(monkeypatch: pytest.MonkeyPatch, *results: Any) -> FakeMeasure:
    measure = FakeMeasure(*results)
    monkeypatch.setattr(runner, "measure", measure)
    return measure


def test_measured_once_then_read_from_the_cache(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measure = fake(monkeypatch, canned())
    first = cache.cpu_profile()
    assert measure.calls == [False]
    assert first.source == "measured" and first.path == str(cache.cpu_cache_path())
    assert first.peak_flop_per_s["fp32"] == GOOD["fp32"]
    assert first.environment["derived"]["physics_check"]["passed"] is True
    # the OS's cache sizes travel with the profile, for the above-roof causes
    assert first.cache_bytes == {"l2": 2 * MIB, "l3": 480 * MIB}
    second = cache.cpu_profile()
    assert measure.calls == [False]  # read, not measured
    assert second.bandwidth_bytes_per_s == first.bandwidth_bytes_per_s
    Path(second.path).write_text("{ not json")
    measure.results.append(canned())
    cache.cpu_profile()
    assert measure.calls == [False, False]  # a broken file is measured again, not trusted


def test_the_key_is_cpu_threads_and_torch(cache_dir: Path) -> None:
    fields = cache.key_fields()
    assert set(fields) == {"device_name", "threads_used", "torch", "nsroof"}
    assert fields["threads_used"] == torch.get_num_threads() and fields["torch"] == torch.__version__
    before = torch.get_num_threads()
    here = cache.cpu_cache_path()
    try:
        torch.set_num_threads(before + 1)
        assert cache.cpu_cache_path() != here  # another thread count, another file
    finally:
        torch.set_num_threads(before)
    assert cache.cpu_cache_path() == here


def test_a_failed_check_is_measured_again_longer_then_used(cache_dir: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    measure = fake(monkeypatch, canned(INVERTED), canned())
    said: list[str] = []
    machine = cache.cpu_profile(progress=said.append)
    assert measure.calls == [False, True]  # the second run is the longer one
    assert machine.bandwidth_bytes_per_s["l1"] == GOOD["l1"]
    assert said == ["physics check failed: order l1>=l2: l1 2.1 GB/s < 75% of l2 60.0 GB/s: a cache reads "
                    "slower than the memory behind it; measuring again with a longer run"]


def test_failing_twice_is_refused_in_one_line_and_nothing_is_cached(cache_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    low_peak = {**GOOD, "fp32": 5 * GB}  # 5 < 1 core × 5.2 GHz × 64 / 64 = 5.2 GFLOP/s
    fake(monkeypatch, canned(INVERTED), canned(low_peak))
    with pytest.raises(NsroofError) as err:
        cache.cpu_profile()
    text = str(err.value)
    assert "\n" not in text
    threads = torch.get_num_threads()
    bound = min(threads, 2) * 5.2 * 64  # cores × 2,600 MHz × 2 (turbo allowance) × 64 FLOP/cycle, GFLOP/s
    assert text == (
        "this CPU's measured roofline failed its physics check twice (first: order l1>=l2: l1 2.1 GB/s < 75% "
        "of l2 60.0 GB/s: a cache reads slower than the memory behind it; then, run longer: floor fp32: fp32 "
        f"5.0 GFLOP/s < 1/64 of its bound {bound:,.1f} GFLOP/s: a stalled or shared-CPU measurement), so it "
        "is not used — rerun on an idle machine or with --threads 1, or pass --machine FILE")
    assert not cache.cpu_cache_path().exists()


def test_a_profile_of_another_configuration_is_not_used(cache_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a file at this key holding another thread count's profile (copied, or written by older code)
    other = runner.to_machine(canned(threads_used=torch.get_num_threads() + 3))
    other.save(cache.cpu_cache_path())
    machine, why = cache.read_cpu_profile(cache.cpu_cache_path())
    assert machine is None
    assert why.startswith("measured for another configuration (threads_used ")
    measure = fake(monkeypatch, canned())
    said: list[str] = []
    assert cache.cpu_profile(progress=said.append).environment["threads_used"] == torch.get_num_threads()
    assert measure.calls == [False]
    name = cache.cpu_cache_path().name
    assert said[0].startswith(f"cached CPU profile {name} not used: measured for another")


def test_a_cached_profile_that_fails_the_check_is_not_used(cache_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # cached before the check existed: its inverted ladder is refused on reading, and measured again
    bad = canned(INVERTED)
    bad.derived.pop("physics_check")
    runner.to_machine(bad).save(cache.cpu_cache_path())
    why = cache.read_cpu_profile(cache.cpu_cache_path())[1]
    assert why.startswith("fails its physics check: order l1>=l2")
    measure = fake(monkeypatch, canned())
    assert cache.cpu_profile().bandwidth_bytes_per_s["l1"] == GOOD["l1"]
    assert measure.calls == [False]


def test_a_partial_profile_is_not_the_cpu_profile(cache_dir: Path) -> None:
    assert cache.partial_reason({"sections": ["gemm", "stream"], "dtypes": ["fp32"]}, {}, {}) == \
        "only part of the roofline was measured (--only)"
    complete = {"sections": ["gemm", "stream", "ladder"], "dtypes": ["fp32", "bf16"]}
    assert cache.partial_reason(complete, {}, {}) == \
        "fp16 not swept (--dtype): the CPU profile covers fp32, fp16, bf16"


def test_remeasure_replaces_a_usable_cached_profile(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measure = fake(monkeypatch, canned(), canned({**GOOD, "dram": 9.0 * GB}))
    cache.cpu_profile()
    assert cache.cpu_profile(remeasure=True).bandwidth_bytes_per_s["dram"] == 9.0 * GB
    assert measure.calls == [False, False]
    assert cache.cpu_profile().bandwidth_bytes_per_s["dram"] == 9.0 * GB  # the new one is the cached one


def test_a_write_that_fails_midway_leaves_the_cached_profile_whole(cache_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake(monkeypatch, canned(), canned({**GOOD, "dram": 9.0 * GB}))
    cache.cpu_profile()
    before = cache.cpu_cache_path().read_text()

    def half_then_full_disk(self: Path, text: str, **kwargs: Any) -> int:
        with open(self, "w", encoding="utf-8") as fh:
            fh.write(text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched, pytest.raises(InputError, match="No space left on device"):
        patched.setattr(Path, "write_text", half_then_full_disk)
        cache.cpu_profile(remeasure=True)
    assert cache.cpu_cache_path().read_text() == before  # readers see the old file whole
    assert json.loads(before)["bandwidth_bytes_per_s"]["dram"] == GOOD["dram"]
    assert sorted(p.name for p in cache_dir.iterdir()) == [cache.cpu_cache_path().name,
                                                           cache.cpu_cache_path().name + ".lock"]


def test_a_second_process_waits_and_uses_the_first_ones_profile(cache_dir: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """While one process holds the file's lock (measuring), another that wants the profile waits, then
    reads what the first cached: it neither measures nor overwrites it."""
    measure = fake(monkeypatch)  # measuring at all would fail the test
    path = cache.cpu_cache_path()
    got: dict[str, Any] = {}
    started = threading.Event()

    def second() -> None:
        started.set()
        try:
            got["machine"] = cache.cpu_profile()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            got["error"] = exc

    with cache.locked(path):  # the first process, measuring
        thread = threading.Thread(target=second)
        thread.start()
        started.wait()
        thread.join(0.3)
        assert thread.is_alive()  # blocked on the lock, not measuring
        runner.to_machine(canned()).save(path)  # the first process's profile lands
    thread.join(60)
    assert "error" not in got, got.get("error")
    assert got["machine"].path == str(path) and measure.calls == []
