"""--machine means what the user says, for every command: a table name, the device name as ncu prints it,
or a JSON profile; over an export's own ncu ceilings it is a what-if the summary announces; a machine of
another kind or device is named; a CPU profile for GPU kernels is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from nsroof.cli import cli


def _analyze(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    # a wide terminal: these tests read whole summary lines (at 80 columns they wrap)
    r = CliRunner().invoke(cli, ["analyze", *args, "-o", str(tmp_path / "r.parquet")], env={"COLUMNS": "250"})
    return r.exit_code, r.stdout, r.stderr


def test_the_device_name_as_ncu_prints_it(tiny_raw_csv: Path, tmp_path: Path) -> None:
    code, out, err = _analyze(tmp_path, str(tiny_raw_csv), "--machine", "NVIDIA A100-SXM4-40GB")
    assert code == 0, err
    assert out.splitlines()[1] == "ceilings: --machine A100 SXM4 40GB"
    # the tiny export records no clock: the datasheet roofs are the boost-clock ones, and the summary says so
    assert out.splitlines()[3] == ("  (datasheet roofs without '@ … MHz' are at the boost clock: "
                                   "the export records no clock)")
    assert "warning" not in out


def test_over_ncu_peaks_the_machine_is_a_what_if_and_says_so(example_csv: Path, tmp_path: Path) -> None:
    code, out, err = _analyze(tmp_path, str(example_csv), "--machine", "a100-40gb")
    assert code == 0, err
    assert out.splitlines()[1] == ("ceilings: --machine A100 SXM4 40GB "
                                   "(overrides the export's ncu peaks: a what-if)")
    df = pd.read_parquet(tmp_path / "r.parquet")
    # every roof the machine has replaces ncu's: nothing is left labelled ncu at DRAM
    assert not df.loc[df["level"] == "dram", "ceiling_source"].astype(str).str.contains("ncu").any()


def test_a_machine_of_another_device_is_a_warning_line(tiny_raw_csv: Path, tmp_path: Path) -> None:
    code, out, err = _analyze(tmp_path, str(tiny_raw_csv), "--machine", "NVIDIA A10G")
    assert code == 0, err
    assert ("warning: tiny_raw.csv: --machine A10G is not the export's device 'NVIDIA A100-SXM4-40GB' "
            "(A100 SXM4 40GB): its roofs are a what-if") in out


def test_a_cpu_profile_for_gpu_kernels_is_refused(tiny_raw_csv: Path, tmp_path: Path) -> None:
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"name": "my cpu", "source": "measured", "simt_flop_per_s": {"fp32": 1e11},
                               "bandwidth_bytes_per_s": {"dram": 2e10, "l3": 1e11},
                               "environment": {"device": "cpu"}}))
    code, out, err = _analyze(tmp_path, str(tiny_raw_csv), "--machine", str(cpu))
    assert code == 2
    assert err.startswith("nsroof: error: ") and "CPU profile, but the export holds GPU kernels" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r.parquet").exists()


def test_a_generic_name_is_refused_with_its_candidates(tiny_raw_csv: Path, tmp_path: Path) -> None:
    code, _, err = _analyze(tmp_path, str(tiny_raw_csv), "--machine", "NVIDIA H100")
    assert code == 2 and "fits several entries (H100 SXM, H100 PCIe, H100 NVL)" in err
