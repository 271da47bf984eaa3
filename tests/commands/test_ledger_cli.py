"""`nsroof ledger`: the seeds' numbers through the CLI's JSON, the text report, sweeps and errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from nsroof.cli import cli


def run(*args: str) -> Result:
    # a wide terminal: these tests read whole lines (at 80 columns the long ones wrap)
    return CliRunner().invoke(cli, ["ledger", *args], env={"COLUMNS": "250"})


def run_json(*args: str) -> Any:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


class TestSeedNumbersThroughJson:
    def test_gemm_4096_cubed(self) -> None:
        d = run_json("gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--machine",
                     "h100-sxm")
        assert d["flops"] == 137_438_953_472  # 2·4096³
        assert d["bytes"] == 100_663_296  # 3·4096²·2 B, each matrix once
        assert d["bytes_worst"] == 137_506_062_336  # (4096² + 4096³ + 4096²)·2 B, B re-read per row of A
        assert d["intensity"] == pytest.approx(1365.333, abs=1e-3)
        assert d["bound"] == "compute"
        assert d["ridge"] == pytest.approx(989.4e12 / 3.35e12)  # 295.3
        assert d["compute_time_s"] == pytest.approx(137_438_953_472 / 989.4e12)
        assert d["memory_time_worst_s"] == pytest.approx(137_506_062_336 / 3.35e12)

    @pytest.mark.parametrize(
        ("tokens", "flops", "nbytes", "intensity", "bound"),
        [
            (512, 4_294_967_296, 13_631_488, "315", "compute"),  # 2·4096·1024·512; 315 > ridge 139
            (1, 8_388_608, 8_398_848, "1.0", "memory"),  # 2·4096·1024; 8,388,608 + 2,048 + 8,192 bytes
        ],
    )
    def test_memory_hierarchy_layer_on_v100(self, tokens: int, flops: int, nbytes: int, intensity: str,
                                            bound: str) -> None:
        d = run_json("linear", "--tokens", str(tokens), "--in-features", "1024", "--out-features", "4096",
                     "--dtype", "fp16", "--machine", "v100-sxm2")
        assert (d["flops"], d["bytes"]) == (flops, nbytes)
        assert f"{d['intensity']:.{0 if tokens > 1 else 1}f}" == intensity
        assert round(d["ridge"]) == 139  # 125e12 / 900e9
        assert d["bound"] == bound

    def test_layer_against_v100_l2(self) -> None:
        d = run_json("linear", "--tokens", "1", "--in-features", "1024", "--out-features", "4096", "--dtype",
                     "fp16", "--machine", "v100-sxm2", "--level", "l2")
        assert round(d["ridge"]) == 40  # 125e12 / 3.1e12
        assert d["bound"] == "memory"  # 1.0 < 40 as well

    def test_attention_traffic_prefill_8k(self) -> None:
        d = run_json("attention-traffic", "--sq", "8192", "--skv", "8192", "--d", "128", "--block-m", "128",
                     "--block-n", "128")
        assert d["naive"]["elements"] == 272_629_760  # 4·8192² + 4·8192·128
        assert d["naive"]["bytes"] == 545_259_520  # · 2 B
        assert d["tiled"]["elements"] == 136_314_880  # 2·8192·128 + 2·64·8192·128
        assert d["tiled"]["bytes"] == 272_629_760
        assert d["naive"]["items"]["S write"] == 67_108_864
        assert d["ratio"] == 2.0 and d["crossover_block_m"] == 64

    def test_attention_traffic_decode_8k(self) -> None:
        d = run_json("attention-traffic", "--sq", "1", "--skv", "8192", "--d", "128")
        assert d["naive"]["elements"] == 2_130_176  # 128 + 2·1,048,576 + 4·8192 + 128
        assert d["tiled"]["elements"] == 2_097_408  # 128 + 2·1,048,576 + 128

    def test_decode_7b_on_h100(self) -> None:
        d = run_json("decode", "--params", "7e9", "--batch", "1", "--machine", "h100-sxm")
        assert d["intensity"] == 1  # 2·batch / 2 B
        assert d["step_s"] == pytest.approx(14e9 / 3.35e12)  # 4.179 ms: the weights once
        assert d["tokens_per_s"] == pytest.approx(3.35e12 / 14e9)  # 239.3
        assert d["mfu"] == pytest.approx(3.35e12 / 989.4e12)  # 0.34%
        assert d["batch_to_leave_memory_bound"] == pytest.approx(989.4e12 / 3.35e12)

    def test_decode_sweep_reproduces_the_seed_table(self) -> None:
        d = run_json("decode", "--params", "7e9", "--machine", "h100-sxm", "--sweep")
        printed = [(r["batch"], f"{r['intensity']:.1f}", f"{r['step_s'] * 1e3:.3f}",
                    f"{r['tokens_per_s']:.0f}", f"{r['mfu'] * 100:.1f}", r["regime"]) for r in d["rows"]]
        assert printed == [
            (1, "1.0", "4.179", "239", "0.3", "memory"),
            (2, "2.0", "4.179", "479", "0.7", "memory"),
            (4, "4.0", "4.179", "957", "1.4", "memory"),
            (8, "8.0", "4.179", "1914", "2.7", "memory"),
            (16, "16.0", "4.179", "3829", "5.4", "memory"),
            (32, "32.0", "4.179", "7657", "10.8", "memory"),
            (64, "64.0", "4.179", "15314", "21.7", "memory"),
            (128, "128.0", "4.179", "30629", "43.3", "memory"),
            (256, "256.0", "4.179", "61257", "86.7", "memory"),
            (512, "512.0", "7.245", "70671", "100.0", "compute"),  # 2·7e9·512 / 989.4e12 = 7.245 ms
        ]

    def test_attention_traffic_sweep(self) -> None:
        d = run_json("attention-traffic", "--sweep")
        assert [r["n"] for r in d["prefill"]] == [512, 2048, 8192, 32768, 131072]
        assert d["prefill"][-1]["naive"] == 68_786_585_600  # 4·131072² + 4·131072·128
        assert d["prefill"][-1]["tiled"] == 34_393_292_800  # 2·131072² + 2·131072·128 (block_m = d)
        assert d["decode"][2] == {"n": 8192, "naive": 2_130_176, "tiled": 2_097_408,
                                  "ratio": pytest.approx(2_130_176 / 2_097_408)}

    def test_norms_elementwise_and_fused_quant(self) -> None:
        r = run_json("rmsnorm", "--rows", "8192", "--hidden", "4096", "--weight", "resident")
        assert (r["flops"], r["bytes"]) == (134_242_304, 134_217_728)  # seeds/operator_ledger.py numbers
        fused = run_json("elementwise", "--n", "16777216")
        eager = run_json("elementwise", "--n", "16777216", "--no-fused")
        assert (fused["bytes"], eager["bytes"]) == (67_108_864, 134_217_728)  # 2 vs 4 passes of 2 B
        q = run_json("norm-rope-quant", "--tokens", "4096", "--q-heads", "32", "--kv-heads", "8",
                     "--head-dim", "128")
        assert (q["flops"], q["bytes"]) == (210_206_720, 67_764_736)
        assert q["roof"] == "simt:fp32"


class TestText:
    def test_gemm_report(self) -> None:
        result = run("gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--machine", "h100-sxm")
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert "gemm(m=4096, n=4096, k=4096, dtype=bf16) on H100 SXM" in out
        assert "137,438,953,472" in out and "100,663,296" in out
        assert "-> compute-bound" in out
        assert "worst case      137,506,062,336 bytes" in out
        assert "the other roofs, for contrast:" in out and "peak_flop_per_s.fp32" in out

    def test_attention_traffic_table(self) -> None:
        out = run("attention-traffic", "--sq", "8192", "--skv", "8192", "--d", "128").stdout
        assert "S write             67,108,864                 0" in out
        assert "total              272,629,760       136,314,880" in out
        assert "block_m > d/2 = 64" in out

    def test_decode_sweep_text(self) -> None:
        out = run("decode", "--params", "7e9", "--sweep").stdout
        assert "    512     512.0     7.245       70671  100.0%   compute" in out

    def test_listing_formulas(self) -> None:
        result = run()
        assert result.exit_code == 0
        for name in ("gemm", "decode", "attention-traffic", "rmsnorm", "elementwise", "norm-rope-quant"):
            assert f"  {name} " in result.stdout
        assert "--m INT --n INT --k INT" in result.stdout
        listing = run_json()
        assert {f["name"] for f in listing} >= {"gemm", "decode", "conv2d"}

    def test_seed_operator_table(self) -> None:
        d = run_json("--sweep", "--machine", "h100-sxm")
        rows = {r["operator"]: r for r in d["rows"]}
        assert rows["gemm 4096^3 fp16"]["bound"] == "compute"
        assert rows["elementwise chain n=16.8M eager"]["intensity"] == 0.25


class TestMachineFile:
    def test_seed_cpu_profile_from_a_file(self, tmp_path: Any) -> None:
        # seeds/roofline.py 'cpu-server': 32 cores · 2 FMA units · 16 lanes · 2 FLOP · 2.5 GHz; 8 ch DDR5-4800
        profile = tmp_path / "cpu.json"
        profile.write_text(json.dumps({"name": "cpu-server", "peak_flop_per_s": {"fp32": 5.1e12},
                                       "bandwidth_bytes_per_s": {"dram": 307e9}}))
        d = run_json("gemm", "--m", "512", "--n", "512", "--k", "512", "--dtype", "fp32", "--machine",
                     str(profile))
        assert d["machine"] == "cpu-server"
        assert d["ridge"] == pytest.approx(5.1e12 / 307e9)  # 16.6
        assert d["bound"] == "compute"  # 2·512³ / (3·512²·4) = 85.3 > 16.6


class TestErrors:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("gemv",), "unknown ledger formula 'gemv'; known: attention"),
            (("gemm", "--m", "4", "--n", "4"), "gemm: missing parameter(s) k"),
            (("gemm", "--m", "4", "--n", "4", "--k", "4", "--x", "1"),
             "gemm: unknown option --x; options: --m, --n"),
            (("gemm", "--m", "four", "--n", "4", "--k", "4"), "gemm: m must be int, got 'four'"),
            (("gemm", "--m", "4", "--n", "4", "--k", "4", "--dtype", "fp12"), "unknown dtype 'fp12'"),
            (("gemm", "--m", "4", "--n", "4", "--k", "4", "--sweep"), "--sweep is available for decode"),
            (("gemm", "--m", "4", "--n", "4", "--k", "4", "--machine", "nope"), "unknown machine 'nope'"),
            (("gemm", "4"), "unexpected argument '4'"),
            (("--m", "4"), "need an OP"),
        ],
    )
    def test_one_line_and_exit_2(self, args: tuple[str, ...], message: str) -> None:
        result = run(*args)
        assert result.exit_code == 2
        assert result.stderr.startswith("nsroof: error: ")
        assert message in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


class TestMissingRoof:
    def test_decode_on_a_machine_without_bf16(self) -> None:
        # V100 has no bf16 tensor cores: no stand-in roof, the times are n/a and the output says what to pass
        result = run("decode", "--params", "7e9", "--machine", "v100-sxm2")
        assert result.exit_code == 0, result.output
        assert "SOL time (max)  n/a  -> bound unknown" in result.stdout
        assert "missing         peak_flop_per_s.bf16" in result.stdout
        assert "this machine's matmul roofs: fp64, fp32, fp16" in result.stdout
        d = run_json("decode", "--params", "7e9", "--machine", "v100-sxm2", "--compute-dtype", "fp16")
        assert d["step_s"] == pytest.approx(14e9 / 900e9)  # 15.6 ms: bf16 weights at 900 GB/s
        assert d["missing"] == []


def test_the_text_fits_an_80_column_terminal() -> None:
    result = CliRunner().invoke(cli, ["ledger", "attention-traffic", "--sq", "8192", "--skv", "8192", "--d",
                                      "128"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "block_m > d/2 = 64" in " ".join(result.output.split())  # wrapped, not cut
