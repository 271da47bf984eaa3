"""ncu's `--print-summary per-kernel` text: one row per kernel summary, its Average values under the metric
names and units of the per-launch text, `launches` = its Invocations, and every quantity's provenance saying
the values are averages. The fixtures in tests/data/ncu/summary_*.txt are written by hand in the layout
Nsight Compute 2024.1 prints (`ncu -i REPORT --print-summary per-kernel [--page raw]`, checked against the
real CLI on the shared reports below); summary_per_kernel_2025_units.txt uses the short units of ncu 2025
(Ghz, Mhz, ms)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nsroof import importers
from nsroof.pipeline import analyze

BASIS = "average over {} invocations: ncu --print-summary per-kernel"


def test_details_summary_is_one_row_per_kernel_with_its_averages(data_dir: Path) -> None:
    kernels, facts = importers.read(data_dir / "ncu" / "summary_per_kernel.txt")
    assert facts.format == "ncu-text:per-kernel-summary"
    # ncu prints the summaries in name order; a summary has no launch ID: rows are numbered in print order
    assert list(kernels["function"]) == ["row_softmax", "vector_add"]
    assert list(kernels["kernel_id"]) == [0, 1] and kernels["context"].isna().all()
    assert list(kernels["launches"]) == [1, 3]
    assert list(kernels["value_basis"]) == ["average over 1 invocation: ncu --print-summary per-kernel",
                                            BASIS.format(3)]
    assert list(kernels["grid"]) == ["(4096, 1, 1)", "(8192, 1, 1)"] and set(kernels["cc"]) == {"8.0"}
    # the Average column, under the per-launch text's metric names: Duration 10.02 usecond, DRAM Frequency
    # 1.21 cycle/nsecond, Memory Throughput 1.26 Tbyte/second (not the Minimum 9.95 or Maximum 10.08)
    vector_add = kernels.iloc[1]
    assert vector_add["gpu__time_duration.sum"] == pytest.approx(10.02e-6)
    assert vector_add["dram__cycles_elapsed.avg.per_second"] == pytest.approx(1.21e9)
    assert vector_add["dram__bytes.sum.per_second"] == pytest.approx(1.26e12)
    assert kernels.iloc[0]["launch__thread_count"] == 1_048_576
    # the closing note is ncu's, not application output; the warning says what the rows are
    assert not any("skipped" in w for w in facts.warnings)
    assert any(w.startswith("ncu's per-kernel summary: each of the 2 row(s) holds the average launch")
               and "(4 launches in all" in w for w in facts.warnings)


def test_ncu_2025_units_sm_frequency_in_mhz(data_dir: Path) -> None:
    kernels, _ = importers.read(data_dir / "ncu" / "summary_per_kernel_2025_units.txt")
    row = kernels.iloc[0]
    # SM Frequency 765.00 Mhz, DRAM Frequency 10.24 Ghz, Duration 1.99 ms
    assert row["gpc__cycles_elapsed.avg.per_second"] == pytest.approx(765e6)
    assert row["dram__cycles_elapsed.avg.per_second"] == pytest.approx(10.24e9)
    assert row["gpu__time_duration.sum"] == pytest.approx(1.99e-3)
    assert (row["launches"], row["cc"], row["function"]) == (2, "8.9", "gemm_bf16")


def test_raw_summary_gives_the_roofline_of_the_average_launch(data_dir: Path) -> None:
    report = analyze([data_dir / "ncu" / "summary_raw_per_kernel.txt"]).frame.set_index("level")
    assert set(report["launches"]) == {4} and set(report["device"]) == {"NVIDIA A100-SXM4-40GB"}
    note = f"({BASIS.format(4)})"
    assert report.loc["dram", "duration_source"] == f"gpu__time_duration.sum {note}"
    assert report.loc["dram", "bytes_source"] == f"dram__bytes_read.sum + dram__bytes_write.sum {note}"
    assert str(report.loc["dram", "flops_source"]).endswith(note)
    # DRAM: (8,388,608 + 4,194,304) B / 10,000 ns = 1.2582912e12 B/s against the A100's 1280 B × 1,215 MHz
    # = 1.5552e12 B/s (the datasheet entry the device name matches, at the recorded DRAM clock): 80.91%
    dram = report.loc["dram"]
    assert dram["bytes"] == 12_582_912 and dram["duration_s"] == pytest.approx(1e-5)
    assert dram["bandwidth_bytes_per_s"] == pytest.approx(1280 * 1215e6)
    assert dram["roof_fraction"] == pytest.approx(12_582_912 / 1e-5 / (1280 * 1215e6))
    # FLOPs: 2 × 1,048,576 FFMA = 2,097,152; intensity 2,097,152 / 12,582,912 = 0.167: memory-bound
    assert dram["flops"] == 2_097_152 and dram["bound"] == "memory"
    # L2: 393,216 sectors × 32 B = 12,582,912 B against lts__t's 7680 B × 1,063 MHz = 8.16384e12 B/s
    assert report.loc["l2", "roof_fraction"] == pytest.approx(1.2582912e12 / (7680 * 1063e6))


def _real_ncu() -> str | None:
    explicit = os.environ.get("NSROOF_NCU")
    if explicit and Path(explicit).is_file():
        return explicit
    cache = Path.home() / ".cache" / "nsroof-ncu" / "usr" / "lib" / "x86_64-linux-gnu" / "nsight-compute"
    cached = sorted(cache.glob("target/*/ncu"))
    return str(cached[0]) if cached else shutil.which("ncu")


@pytest.mark.parametrize("page", ["details", "raw"])
def test_real_ncu_summaries_of_a_shared_report_agree_with_its_launches(shared_fixtures: Path, tmp_path: Path,
                                                                      page: str) -> None:
    """ncu 2024.1's own summary of a real A100 report (3 launches of silu_kernel): the summary row's roofs,
    bytes and time are those of the report's average launch (its raw-page CSV, converted by the same ncu)."""
    ncu = _real_ncu()
    if ncu is None:
        pytest.skip("no ncu (NSROOF_NCU, ~/.cache/nsroof-ncu from shared/tools/get-ncu.sh, or PATH)")
    name = "alprielse__2025-04-21-77_06-MT"
    out = tmp_path / f"{name}.summary.txt"
    extra = ["--page", "raw", "--print-units", "base"] if page == "raw" else []
    with open(out, "w") as fh:
        subprocess.run([ncu, "-i", str(shared_fixtures / "rep" / f"{name}.ncu-rep"), "--print-summary",
                        "per-kernel", *extra], stdout=fh, check=True, timeout=300,
                       env={**os.environ, "LC_ALL": "C"})
    kernels, facts = importers.read(out)
    launches, _ = importers.read(shared_fixtures / "converted" / f"{name}.raw_base.csv")
    assert list(kernels["launches"]) == [len(launches)] == [3]
    mean = launches["gpu__time_duration.sum"].astype(float).mean()  # 437,088 ns
    # the details page prints 437.09 usecond: within half its last digit
    assert kernels["gpu__time_duration.sum"].iloc[0] == pytest.approx(mean, abs=0.005e-6)
    if page == "raw":
        got = analyze([out]).frame.set_index("level")
        each = analyze([shared_fixtures / "converted" / f"{name}.raw_base.csv"]).frame
        for level in ("dram", "l2", "l1"):
            rows = each[each["level"] == level]
            assert got.loc[level, "bytes"] == pytest.approx(rows["bytes"].mean(), rel=1e-6)
            assert got.loc[level, "roof_fraction"] == pytest.approx(rows["roof_fraction"].mean(), rel=1e-3)
        assert np.isfinite(pd.to_numeric(got["bandwidth_bytes_per_s"])).all()


def test_real_ncu_raw_page_text_per_launch_reads_every_metric(shared_fixtures: Path, tmp_path: Path) -> None:
    """The raw page as text (`ncu -i REPORT --page raw`): the header above one dashed rule, metric names, a
    string too long for its column wrapped onto the next line (`NVIDIA` / `A100-SXM4-40GB`). Its metrics
    were skipped as unknown lines before; now they equal the raw-page CSV's."""
    ncu = _real_ncu()
    if ncu is None:
        pytest.skip("no ncu (NSROOF_NCU, ~/.cache/nsroof-ncu from shared/tools/get-ncu.sh, or PATH)")
    name = "alprielse__2025-04-21-77_06-MT"
    out = tmp_path / f"{name}.raw.txt"
    with open(out, "w") as fh:
        subprocess.run([ncu, "-i", str(shared_fixtures / "rep" / f"{name}.ncu-rep"), "--page", "raw",
                        "--print-units", "base"], stdout=fh, check=True, timeout=300,
                       env={**os.environ, "LC_ALL": "C"})
    text, facts = importers.read(out)
    csv, _ = importers.read(shared_fixtures / "converted" / f"{name}.raw_base.csv")
    assert not any("skipped" in w for w in facts.warnings)
    assert list(text["device"]) == list(csv["device"]) == ["NVIDIA A100-SXM4-40GB"] * 3
    for metric in ("gpu__time_duration.sum", "dram__bytes_read.sum", "lts__t_sectors.sum",
                   "derived__lts__lts2xbar_bytes.sum.per_second", "sm__cycles_elapsed.avg.per_second"):
        assert np.allclose(text[metric].astype(float), csv[metric].astype(float), rtol=1e-5), metric


def test_raw_page_text_per_launch_with_a_wrapped_string(data_dir: Path) -> None:
    # written by hand in ncu 2024.1's `--page raw` text layout: the device name wrapped under its column
    kernels, facts = importers.read(data_dir / "ncu" / "raw_page_text.txt")
    assert facts.format == "ncu-text:details" and "launches" not in kernels.columns
    assert list(kernels["device"]) == ["NVIDIA A100-SXM4-40GB"] * 2
    assert list(kernels["dram__bytes.sum"]) == [12_582_912.0] * 2
    assert list(kernels["gpu__time_duration.sum"]) == [1e-5] * 2
