"""`nsroof machines`: the ceiling table, ridges per precision and level, the seed's decode batch
table, sources, the 2:4-sparse trap, and the JSON shape other tools read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from nsroof.cli import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["machines", *args])


def run_json(*args: str) -> list[dict[str, Any]]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, list)
    return data


class TestJson:
    def test_every_machine_has_the_documented_keys(self) -> None:
        data = run_json()
        assert len(data) >= 20
        for m in data:
            assert isinstance(m["name"], str) and m["name"]
            assert isinstance(m["peak_flop_per_s"], dict) and m["peak_flop_per_s"]
            assert set(m["peak_flop_per_s"]) <= {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4",
                                                 "fp64_tensor"}
            assert set(m["bandwidth_bytes_per_s"]) >= {"dram"}
            assert m["sources"].get("bandwidth_bytes_per_s.dram")  # every number has its source

    def test_h100_is_the_dense_sxm(self) -> None:
        (h100,) = run_json("--machine", "h100-sxm")
        assert h100["name"] == "H100 SXM"
        assert h100["peak_flop_per_s"]["bf16"] == 989.4e12  # dense, not the 1,979 sparse headline
        assert h100["bandwidth_bytes_per_s"]["dram"] == 3.35e12
        assert h100["sparse_peak_flop_per_s"]["bf16"] == pytest.approx(2 * 989.4e12, rel=1e-3)
        assert any("bf16" in t and "2:4" in t for t in h100["sparse_trap"])

    def test_v100_ridges(self) -> None:
        (v100,) = run_json("--machine", "v100-sxm2")
        ridges = v100["ridges"]
        assert round(ridges["peak_flop_per_s.fp16"]["dram"]) == 139  # 125e12 / 900e9 = 138.9
        assert round(ridges["peak_flop_per_s.fp16"]["l2"]) == 40  # 125e12 / 3.1e12 = 40.3
        assert round(ridges["peak_flop_per_s.fp32"]["dram"]) == 17  # 15.7e12 / 900e9 = 17.4

    @pytest.mark.parametrize(
        ("machine", "expected"),
        [  # seeds/roofline.py `table`: batch = ridge · bytes / 2
            ("h100-sxm", {"bf16": "295", "fp16": "295", "fp8": "148", "fp32": "591"}),  # 989.4/3.35 = 295.3
            # 312/2.039 = 153.0 (80 GB SXM)
            ("a100-80gb", {"bf16": "153", "fp16": "153", "fp8": "77", "fp32": "306"}),
        ],
    )
    def test_seed_decode_batch_table(self, machine: str, expected: dict[str, str]) -> None:
        (m,) = run_json("--machine", machine)
        table = m["decode_batch_to_leave_memory_bound"]
        assert table["roof"] == "peak_flop_per_s.bf16"
        assert {k: f"{v:.0f}" for k, v in table["batch"].items()} == expected

    @pytest.mark.parametrize(
        ("profile", "expected"),
        [  # the seed's two non-GPU rows, as JSON profiles
            ({"name": "cpu-server", "peak_flop_per_s": {"fp32": 5.1e12},
              "bandwidth_bytes_per_s": {"dram": 307e9}},
             {"bf16": "17", "fp16": "17", "fp8": "8", "fp32": "33"}),  # ridge 16.6
            ({"name": "laptop", "peak_flop_per_s": {"fp32": 1.0e12},
              "bandwidth_bytes_per_s": {"dram": 200e9}},
             {"bf16": "5", "fp16": "5", "fp8": "2", "fp32": "10"}),  # ridge 5; 2.5 prints as 2
        ],
    )
    def test_seed_rows_from_profile_files(self, tmp_path: Path, profile: dict[str, Any],
                                          expected: dict[str, str]) -> None:
        path = tmp_path / "m.json"
        path.write_text(json.dumps(profile))
        (m,) = run_json("--machine", str(path))
        table = m["decode_batch_to_leave_memory_bound"]
        assert table["roof"] == "peak_flop_per_s.fp32"  # no bf16 roof: the table says which one it used
        assert {k: f"{v:.0f}" for k, v in table["batch"].items()} == expected


class TestText:
    def test_overview(self) -> None:
        result = run()
        assert result.exit_code == 0, result.output
        out = result.stdout
        for name in ("V100 SXM2", "A100 SXM4 80GB", "H100 SXM", "RTX 4090", "B200"):
            assert name in out
        assert "2:4-sparse trap" in out
        assert "H100 SXM bf16: the 1,979 TFLOP/s headline is 2:4 structured sparsity" in out
        h100 = next(line for line in out.splitlines() if line.startswith("H100 SXM "))
        assert h100.rstrip().endswith("295   295 / 295 / 148 / 591")
        # L2 and L1 columns: H100 5120 B × 1.98 GHz = 10.14 TB/s, 128 × 132 × 1.98 GHz = 33.45 TB/s
        header = next(line for line in out.splitlines() if line.startswith("machine "))
        assert header.split()[7:10] == ["DRAM", "L2", "L1"]
        assert "10.14 TB/s  33.45 TB/s" in h100

    def test_every_missing_cache_roof_says_why(self) -> None:
        out = run().stdout
        header = next(line for line in out.splitlines() if line.startswith("machine "))
        l2_end = header.index(" L2") + 3
        for name in ("L4", "L40S", "RTX 5090", "RTX 5070", "B200"):
            line = next(line for line in out.splitlines() if line.startswith(f"{name} "))
            assert line[:l2_end].rstrip().endswith("—")  # the L2 cell is empty ...
            assert f"  {name}: no L2" in out  # ... and the footnote says why

    def test_device_name_as_ncu_prints_it(self) -> None:
        # the case: 'NVIDIA A10G' was refused with "did you mean A10G?"
        result = run("--machine", "NVIDIA A10G")
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("A10G (spec:A10G")

    @pytest.mark.parametrize("name", ["GTX 1650", "GTX 1660 Ti", "GTX 1660 SUPER"])
    def test_overview_shows_no_ridge_without_a_bf16_or_fp16_figure(self, name: str) -> None:
        # the header promises "ridge = dense bf16 (else fp16)": these profiles have neither (no tensor
        # cores), so the FP32 ridge (GTX 1650: 2.849e12 / 192e9 = 15) must not appear under that label
        out = run().stdout
        line = next(line for line in out.splitlines() if line.startswith(f"{name} "))
        assert line.rstrip().endswith("—   — / — / — / —"), line
        assert f"{name}: no dense bf16 or fp16 figure" in out

    def test_detail_names_every_source(self) -> None:
        out = run("--machine", "v100-sxm2").stdout
        assert "peak_flop_per_s.fp16             125        138.9         40.3" in out
        assert "Deep Learning Performance Guide" in out  # the L2 figure's source
        # L1 from its per-cycle figure: 128 B × 80 SMs × 1.53 GHz = 15.67 TB/s; 125e12 / 15.667e12 = 7.98
        assert "l1      15.67 TB/s   derived: bytes_per_cycle.l1 × sm_count × clocks_hz.boost" in out
        assert "80 SMs; clocks: boost 1,530 MHz" in out
        assert "bf16 139   fp16 139   fp8 69   fp32 278" in out  # V100 has no bf16: fp16 roof, named

    def test_unknown_machine(self) -> None:
        result = run("--machine", "h1000")
        assert result.exit_code == 2
        assert result.stderr.startswith("nsroof: error: unknown machine 'h1000'")


class TestProfileValidation:
    def test_misspelled_rate_keys_exit_2(self, tmp_path: Path) -> None:
        path = tmp_path / "u.json"
        path.write_text(json.dumps({"name": "x", "peak_flop_per_s": {"fp23": 1e13},
                                    "bandwidth_bytes_per_s": {"dram": 1e12}}))
        result = run("--machine", str(path))
        assert result.exit_code == 2
        assert result.stderr.startswith(f"nsroof: error: {path}: ")
        assert "unknown key 'fp23'" in result.stderr and "Traceback" not in result.stderr

    def test_empty_profile_exit_2(self, tmp_path: Path) -> None:
        path = tmp_path / "e.json"
        path.write_text('{"name": "x"}')
        result = run("--machine", str(path))
        assert result.exit_code == 2 and "holds no compute peak" in result.stderr
