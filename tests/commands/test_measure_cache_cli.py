"""`nsroof measure` caches what `nsroof profile` reads, keeps a usable cached CPU profile unless --remeasure,
refuses a measurement that fails its physics check twice; `nsroof profile` / `nsroof demo` take
--remeasure. Measurements are canned (tests/_measure_fakes.py): nothing is timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nsroof.cli import cli
from tests._measure_fakes import GB, GOOD, INVERTED, FakeMeasure, canned

pytest.importorskip("torch")


@pytest.fixture
def measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install canned measurements (returns a function taking them) in an empty cache folder."""
    from nsroof.collectors.measure import runner

    monkeypatch.setenv("NSROOF_CACHE_DIR", str(tmp_path / "cache"))

    def install(*results: Any) -> FakeMeasure:
        fake = FakeMeasure(*results)
        monkeypatch.setattr(runner, "measure", fake)
        return fake

    return install


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["measure", "--device", "cpu", "--quick", *args])


def test_measure_caches_the_profile_profile_reads(measured: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from nsroof.collectors.measure import cache

    measured(canned())
    result = run()
    assert result.exit_code == 0, result.output
    path = cache.cpu_cache_path()
    assert f"cached as {path} (the CPU profile `nsroof profile` and `nsroof demo` read" in result.stdout
    assert "timing   perf_counter, best of 15 after 1 warm-up" in result.stdout
    # 3 order checks (l1, l2, l3 against the fastest level behind each); a ceiling and a floor per dtype
    assert "physics check passed (9 checks: cache levels in order" in result.stdout
    # the profile collector's cache reads it: nothing is measured again
    measured()
    assert cache.cpu_profile().path == str(path)


def test_measure_keeps_a_cached_profile_unless_remeasure(measured: Any, tmp_path: Path) -> None:
    from nsroof.collectors.measure import cache

    measured(canned(), canned({**GOOD, "dram": 9.0 * GB}), canned({**GOOD, "dram": 9.5 * GB}))
    assert run().exit_code == 0
    kept = run("-o", str(tmp_path / "m.json"))
    assert kept.exit_code == 0, kept.output
    path = cache.cpu_cache_path()
    assert (f"not cached: {path} already holds this CPU's profile (measured 2026-12-01T10:00:00+00:00), "
            "which `nsroof profile` keeps using; --remeasure replaces it with this one") in kept.stdout
    assert cache.cpu_profile().bandwidth_bytes_per_s["dram"] == GOOD["dram"]  # the first one stays
    assert (tmp_path / "m.json").is_file()  # -o gets the new measurement all the same
    replaced = run("--remeasure")
    assert replaced.exit_code == 0, replaced.output
    assert f"cached as {path}" in replaced.stdout
    assert cache.cpu_profile().bandwidth_bytes_per_s["dram"] == 9.5 * GB


def test_a_partial_measure_prints_no_empty_ridge_table_and_is_not_cached(measured: Any,
                                                                          tmp_path: Path) -> None:
    measured(canned(sections=("stream",)))
    result = run("--only", "stream")
    assert result.exit_code == 0, result.output
    assert "Ridge" not in result.stdout
    assert "not cached: only part of the roofline was measured (--only)" in result.stdout
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").glob("*.json")) == []


def test_a_measurement_failing_twice_is_refused_and_kept_nowhere(measured: Any, tmp_path: Path) -> None:
    fake = measured(canned(INVERTED), canned(INVERTED))
    out, points = tmp_path / "m.json", tmp_path / "points.csv"
    result = run("-o", str(out), "--csv", str(points))
    assert fake.calls == [False, True]  # measured again, longer
    assert result.exit_code == 2
    error = result.stderr.strip()
    assert error.count("\n") == 0
    assert error.startswith("nsroof: error: this CPU's measured roofline failed its physics check twice, the "
                            "same way: order l1>=l2: l1 2.1 GB/s < 75% of l2 60.0 GB/s")
    assert f"so it is neither cached nor written; its points are in {points}" in error
    assert "GEMM peak per dtype" in result.stdout  # the summary shows what was measured, and what failed
    assert "physics check FAILED:\n  order l1>=l2: l1 2.1 GB/s < 75% of l2 60.0 GB/s" in result.stdout
    assert not out.exists() and points.is_file()
    assert list((tmp_path / "cache").glob("*.json")) == []


@pytest.mark.parametrize("command", [
    ["profile", "--remeasure", "--machine", "x.json", "--", "python", "x.py"],
    ["demo", "--remeasure", "--machine", "x.json"]])
def test_remeasure_with_a_machine_is_a_usage_error(command: list[str]) -> None:
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2
    assert "--remeasure measures this CPU's roofline; --machine gives the roofline" in result.output


def test_profile_remeasure_measures_the_cpu_profile_anew(measured: Any, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from nsroof.collectors import torch_profile
    from nsroof.collectors.measure import cache
    from nsroof.commands.profile import _announce_cpu_measurement

    fake = measured(canned(), canned({**GOOD, "dram": 9.0 * GB}))
    cache.cpu_profile()
    assert _announce_cpu_measurement(None) == ""  # cached: nothing to measure
    assert _announce_cpu_measurement(None, remeasure=True) == str(cache.cpu_cache_path())
    assert "nsroof: re-measuring this CPU's roofline after the run" in capsys.readouterr().err
    assert torch_profile.profile(remeasure=True).remeasure
    machine = torch_profile.resolve_machine(None, cuda=False, warnings=[], remeasure=True)
    assert machine is not None and machine.bandwidth_bytes_per_s["dram"] == 9.0 * GB
    assert fake.calls == [False, False]
