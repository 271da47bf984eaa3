"""The matmul formulas (gemm, bmm, linear).

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

import pytest

from nsroof.costs import ledger
from nsroof.roofs import ledger_analysis
from tests.costs.ledger.seed_machines import H100, V100


class TestMemoryHierarchyLayer:
    """4096 outputs × 1024 inputs, fp16, on 512 examples and on 1 (memory_hierarchy.md table)."""

    def test_512_examples(self) -> None:
        c = ledger.cost("linear", tokens=512, in_features=1024, out_features=4096, dtype="fp16")
        assert c.flops == 4_294_967_296  # 2 · 4096 · 1024 · 512
        # weights 4096·1024·2 = 8,388,608 + inputs 512·1024·2 = 1,048,576 + outputs 512·4096·2 = 4,194,304
        assert c.bytes == 13_631_488
        assert round(c.intensity) == 315  # 4,294,967,296 / 13,631,488 = 315.08

    def test_1_example(self) -> None:
        c = ledger.cost("linear", tokens=1, in_features=1024, out_features=4096, dtype="fp16")
        assert c.flops == 8_388_608  # 2 · 4096 · 1024
        assert c.bytes == 8_398_848  # 8,388,608 weights + 2,048 input + 8,192 output
        assert round(c.intensity, 1) == 1.0  # 0.9988

    def test_fp32_doubles_bytes_and_halves_intensity(self) -> None:
        h = ledger.cost("linear", tokens=512, in_features=1024, out_features=4096, dtype="fp16")
        f = ledger.cost("linear", tokens=512, in_features=1024, out_features=4096, dtype="fp32")
        assert f.bytes == 2 * h.bytes and f.intensity == h.intensity / 2

    def test_v100_ridges_and_verdicts(self) -> None:
        ridges = ledger_analysis.ridge_table(V100)
        assert round(ridges["peak_flop_per_s.fp16"]["dram"]) == 139  # 125e12 / 900e9 = 138.9
        assert round(ridges["peak_flop_per_s.fp16"]["l2"]) == 40  # 125e12 / 3.1e12 = 40.3
        assert round(ridges["peak_flop_per_s.fp32"]["dram"]) == 17  # 15.7e12 / 900e9 = 17.4
        big = ledger_analysis.analyze(ledger.operator("linear", tokens=512, in_features=1024,
                                                      out_features=4096), V100)
        one = ledger_analysis.analyze(ledger.operator("linear", tokens=1, in_features=1024,
                                                      out_features=4096), V100)
        assert big.timing.bound == "compute"  # 315 > 139
        assert one.timing.bound == "memory"  # 1.0 < 139
        one_l2 = ledger_analysis.analyze(one.op, V100, level="l2")
        assert one_l2.timing.bound == "memory" and round(one_l2.ridge) == 40  # 1.0 < 40 as well


class TestGemm:
    def test_4096_cubed_best_and_worst_traffic(self) -> None:
        op = ledger.operator("gemm", m=4096, n=4096, k=4096, dtype="bf16")
        assert op.flops == 137_438_953_472  # 2 · 4096³
        assert op.bytes == 100_663_296  # (3 · 4096²) · 2 B: each matrix streamed once
        worst = op.variants["worst"]
        # (m·k + m·k·n + m·n) · 2 = (16,777,216 + 68,719,476,736 + 16,777,216) · 2
        assert worst.bytes == 137_506_062_336
        assert worst.flops == op.flops  # same arithmetic, different traffic
        assert op.intensity == pytest.approx(1365.333, abs=1e-3)  # 137,438,953,472 / 100,663,296
        assert worst.intensity == pytest.approx(0.99951, abs=1e-5)

    def test_h100_verdicts_and_times(self) -> None:
        a = ledger_analysis.analyze(ledger.operator("gemm", m=4096, n=4096, k=4096), H100)
        assert a.timing.bound == "compute"  # 1365 > ridge 295
        assert a.variants["worst"].bound == "memory"  # 1.0 < 295
        assert a.timing.compute_time_s == pytest.approx(137_438_953_472 / 989.4e12)  # 0.139 ms
        assert a.variants["worst"].memory_time_s == pytest.approx(137_506_062_336 / 3.35e12)  # 41.0 ms
        assert a.timing.sol_time_s == a.timing.compute_time_s

    def test_batched_gemm_scales_everything_by_batch(self) -> None:
        one = ledger.operator("gemm", m=64, n=32, k=16, dtype="fp32")
        eight = ledger.operator("bmm", batch=8, m=64, n=32, k=16, dtype="fp32")
        assert eight.flops == 8 * one.flops == 8 * 65_536  # 2·64·32·16 = 65,536
        assert eight.bytes == 8 * one.bytes == 8 * 14_336  # (64·16 + 16·32 + 64·32)·4 = 14,336
        assert eight.variants["worst"].bytes == 8 * one.variants["worst"].bytes

    def test_linear_bias(self) -> None:
        c = ledger.cost("linear", tokens=2, in_features=3, out_features=4, dtype="fp32", bias=True)
        assert c.flops == 2 * 2 * 3 * 4 + 2 * 4  # 48 multiply-add FLOPs + 8 bias adds
        assert c.bytes == (4 * 3 + 2 * 3 + 2 * 4 + 4) * 4  # W, x, y, b: 30 elements · 4 B = 120


class TestAgainstIndependentCounts:
    """The closed forms against brute force and against torch.utils.flop_counter (an independent count)."""

    def test_matmuls_match_torch(self) -> None:
        torch = pytest.importorskip("torch")
        from torch.utils.flop_counter import FlopCounterMode

        a, b = torch.zeros(4, 24, 40), torch.zeros(4, 40, 16)
        with FlopCounterMode(display=False) as counter:
            torch.bmm(a, b)
        assert ledger.cost("bmm", batch=4, m=24, n=16, k=40).flops == counter.get_total_flops()
        x, weight = torch.zeros(10, 24), torch.zeros(48, 24)
        with FlopCounterMode(display=False) as counter:
            torch.nn.functional.linear(x, weight)
        assert (ledger.cost("linear", tokens=10, in_features=24, out_features=48).flops
                == counter.get_total_flops())
