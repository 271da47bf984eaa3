"""Every formula against the seeds' numbers (../shared/seeds), arithmetic in the comments.

The machines here are built from the seeds' own figures, so these tests do not depend on the
packaged machine table (tests/commands/test_machines_cli.py checks the table gives the same numbers).
"""

from __future__ import annotations

import math

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import LedgerError
from nsroof.costs.ledger.attention import LOWER_RIGHT, UPPER_LEFT, causal_pairs
from nsroof.roofs import ledger_analysis
from nsroof.roofs.machines import Machine

# seeds/roofline.py HW table: dense peak at the stated dtype, DRAM bandwidth
H100 = Machine("h100", peak_flop_per_s={"bf16": 989.4e12}, bandwidth_bytes_per_s={"dram": 3.35e12})
A100 = Machine("a100", peak_flop_per_s={"bf16": 312e12}, bandwidth_bytes_per_s={"dram": 2.039e12})
CPU = Machine("cpu-server", peak_flop_per_s={"fp32": 5.1e12}, bandwidth_bytes_per_s={"dram": 307e9})
LAPTOP = Machine("laptop", peak_flop_per_s={"fp32": 1.0e12}, bandwidth_bytes_per_s={"dram": 200e9})
# seeds/memory_hierarchy.md: 125 TFLOP/s fp16 tensor, 15.7 fp32, 900 GB/s DRAM, 3.1 TB/s L2
V100 = Machine("v100", peak_flop_per_s={"fp16": 125e12, "fp32": 15.7e12},
               bandwidth_bytes_per_s={"dram": 900e9, "l2": 3.1e12})


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
        big = ledger_analysis.analyze(ledger.operator("linear", tokens=512, in_features=1024, out_features=4096), V100)
        one = ledger_analysis.analyze(ledger.operator("linear", tokens=1, in_features=1024, out_features=4096), V100)
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


class TestConv2d:
    def test_resnet_stem(self) -> None:
        op = ledger.operator("conv2d", batch=1, in_channels=3, height=224, width=224, out_channels=64,
                             kernel_size=7, stride=2, padding=3, dtype="fp16")
        assert (op.facts["out_height"], op.facts["out_width"]) == (112, 112)  # (224 + 6 - 7)//2 + 1
        assert op.flops == 236_027_904  # 2 · 64 · 112² · 3 · 7² (118,013,952 MACs)
        # input 3·224² = 150,528 + weights 64·3·49 = 9,408 + output 64·112² = 802,816 elements, · 2 B
        assert op.bytes == (150_528 + 9_408 + 802_816) * 2

    def test_groups_divide_the_work(self) -> None:
        dense = ledger.cost("conv2d", batch=1, in_channels=8, height=4, width=4, out_channels=8, kernel_size=3,
                            padding=1, dtype="fp32")
        depthwise = ledger.cost("conv2d", batch=1, in_channels=8, height=4, width=4, out_channels=8,
                                kernel_size=3, padding=1, groups=8, dtype="fp32")
        assert dense.flops == 8 * depthwise.flops  # C/groups = 8 vs 1

    def test_kernel_larger_than_input_is_an_error(self) -> None:
        with pytest.raises(LedgerError, match="does not fit"):
            ledger.cost("conv2d", batch=1, in_channels=1, height=2, width=2, out_channels=1, kernel_size=5)


class TestAttention:
    def test_fused_minimum_traffic_and_softmax_flops(self) -> None:
        op = ledger.operator("attention", batch_heads=32, sq=4096, skv=4096, d=128, dtype="fp16")
        # Q, K, V, O: 4 · 32 · 4096 · 128 elements · 2 B = 134,217,728
        assert op.bytes == 134_217_728
        # QK^T + PV: 4 · 32 · 4096² · 128 = 274,877,906,944; softmax 5 · 32 · 4096² + 32 · 4096 · 128
        assert op.flops == 274_877_906_944 + 2_684_354_560 + 16_777_216

    def test_causal_counts_only_visible_scores(self) -> None:
        assert causal_pairs(4, 4) == 10  # 4·5/2: rows see 1, 2, 3, 4 keys
        assert causal_pairs(1, 8192) == 8192  # decode: the one query sees every key
        assert causal_pairs(2, 5) == 4 + 5  # keys aligned to the end: row 0 sees 4, row 1 sees 5
        assert causal_pairs(5, 2) == 3  # more queries than keys: 0, 0, 0, 1, 2
        full = ledger.cost("attention", batch_heads=1, sq=4096, skv=4096, d=128)
        causal = ledger.cost("attention", batch_heads=1, sq=4096, skv=4096, d=128, causal=True)
        assert causal.bytes == full.bytes  # the mask saves work, not compulsory traffic
        # QK^T + PV: 4 · (4096·4097/2) · 128 against 4 · 4096² · 128: half plus the diagonal
        qk = 4.0 * 4096 * 4097 / 2 * 128
        assert causal.terms[4].flops == qk
        assert causal.flops / full.flops == pytest.approx(0.5, abs=1e-3)

    def test_causal_alignment_when_the_lengths_differ(self) -> None:
        # sq = 3 queries, skv = 4 keys. Upper-left (torch's is_causal, tril(ones(3, 4))): rows see 1, 2, 3 keys = 6;
        # lower-right (flash-attn >= 2.1, engines): rows see 2, 3, 4 = 9
        assert causal_pairs(3, 4, UPPER_LEFT) == 1 + 2 + 3 == 6
        assert causal_pairs(3, 4, LOWER_RIGHT) == 2 + 3 + 4 == 9
        # sq = 4 > skv = 3: upper-left rows see 1, 2, 3, 3 = 9; lower-right 0, 1, 2, 3 = 6
        assert causal_pairs(4, 3, UPPER_LEFT) == 1 + 2 + 3 + 3 == 9
        assert causal_pairs(4, 3, LOWER_RIGHT) == 0 + 1 + 2 + 3 == 6
        # decode, one query over 8,192 keys: upper-left sees only the first key, lower-right all of them
        assert (causal_pairs(1, 8192, UPPER_LEFT), causal_pairs(1, 8192, LOWER_RIGHT)) == (1, 8192)
        # the formula: 4·bh·pairs·d for QK^T + PV, bh = 2, d = 16: 4·2·6·16 = 768 against 4·2·9·16 = 1,152
        ul = ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True, causal_align=UPPER_LEFT)
        lr = ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True)
        assert (ul.cost.terms[4].flops, lr.cost.terms[4].flops) == (768, 1_152)
        assert ul.shape["causal_align"] == UPPER_LEFT and lr.shape["causal_align"] == LOWER_RIGHT
        square = ledger.operator("attention", batch_heads=2, sq=4, skv=4, d=16, causal=True, causal_align=UPPER_LEFT)
        assert "causal_align" not in square.shape  # the same mask either way: the shape stays as it was
        with pytest.raises(LedgerError, match="causal_align"):
            ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True, causal_align="diagonal")


class TestAttentionTraffic:
    """seeds/attention_traffic_model.py: one (batch, head) pair, d = 128, block_m = block_n = 128."""

    def test_prefill_8k(self) -> None:
        op = ledger.operator("attention-traffic", sq=8192, skv=8192, d=128, block_m=128, block_n=128)
        naive, tiled = op.variants["naive"], op.cost
        by_name = {t.name: t.elements for t in naive.terms if t.elements is not None}
        assert by_name["S write"] == by_name["P read"] == 67_108_864  # 8192²
        assert by_name["Q read"] == by_name["V read"] == 1_048_576  # 8192 · 128
        assert naive.elements == 272_629_760  # 4 · 8192² + 4 · 8192 · 128
        tiled_by_name = {t.name: t.elements for t in tiled.terms if t.elements is not None}
        assert tiled_by_name["K read"] == 67_108_864  # 64 Q blocks · 8192 · 128
        assert tiled.elements == 136_314_880  # 2 · 8192 · 128 + 2 · 64 · 8192 · 128
        assert (naive.bytes, tiled.bytes) == (545_259_520, 272_629_760)  # · 2 B (fp16)
        assert op.facts["ratio_naive_over_tiled"] == 2.0
        assert op.facts["q_blocks"] == op.facts["kv_blocks"] == 64
        assert op.facts["naive_asymptotic_elements"] == 272_629_760  # 4·N² + 2·(N+N)·d: exact here
        assert op.facts["tiled_asymptotic_elements"] == 134_217_728  # 2 · 64 · 8192 · 128

    def test_decode_8k(self) -> None:
        op = ledger.operator("attention-traffic", sq=1, skv=8192, d=128)
        # naive: Q 128 + K 1,048,576 + S/P 4 · 8192 + V 1,048,576 + O 128
        assert op.variants["naive"].elements == 2_130_176
        assert op.cost.elements == 2_097_408  # 1 Q block: 128 + 2 · 1,048,576 + 128
        assert round(op.facts["ratio_naive_over_tiled"]) == 1  # 1.016: the S term is not the problem

    @pytest.mark.parametrize(
        ("n", "naive", "tiled"),
        [  # prefill sweep: naive 4N² + 4Nd, tiled 2Nd + 2(N/128)Nd = 2N² + 2Nd at d = 128
            (512, 1_310_720, 655_360),
            (2048, 17_825_792, 8_912_896),
            (8192, 272_629_760, 136_314_880),
            (32768, 4_311_744_512, 2_155_872_256),
            (131072, 68_786_585_600, 34_393_292_800),
        ],
    )
    def test_prefill_sweep(self, n: int, naive: int, tiled: int) -> None:
        op = ledger.operator("attention-traffic", sq=n, skv=n, d=128)
        assert (op.variants["naive"].elements, op.cost.elements) == (naive, tiled)
        assert op.facts["ratio_naive_over_tiled"] == 2.0  # block_m = d makes it exactly 2 at every N

    @pytest.mark.parametrize("n", [512, 2048, 8192, 32768, 131072])
    def test_decode_sweep(self, n: int) -> None:
        op = ledger.operator("attention-traffic", sq=1, skv=n, d=128)
        assert op.variants["naive"].elements == 4 * n + 2 * 128 + 2 * n * 128  # S, P are 1 × n
        assert op.cost.elements == 2 * 128 + 2 * n * 128

    @pytest.mark.parametrize(("block_m", "tiled_wins"), [(32, False), (64, False), (96, True), (128, True)])
    def test_crossover_block_m_over_half_d(self, block_m: int, tiled_wins: bool) -> None:
        # leading terms, prefill: tiled 2·(N/block_m)·N·d vs naive 4·N·N; d = 128 -> crossover at 64
        n = 3072
        op = ledger.operator("attention-traffic", sq=n, skv=n, d=128, block_m=block_m)
        assert op.facts["crossover_block_m"] == 64
        assert (op.facts["tiled_asymptotic_elements"] < 4 * n * n) is tiled_wins

    def test_same_arithmetic_both_ways(self) -> None:
        op = ledger.operator("attention-traffic", sq=512, skv=512, d=64)
        assert op.variants["naive"].flops == op.cost.flops == ledger.cost("attention", batch_heads=1, sq=512,
                                                                         skv=512, d=64).flops


class TestDecode:
    """seeds/roofline.py `decode --params 7e9 --hw h100` (bf16): I = 2·batch/2 = batch."""

    T_MEM = 14e9 / 3.35e12  # 7e9 params · 2 B / 3.35 TB/s = 4.179 ms

    @pytest.mark.parametrize("batch", [1, 2, 4, 8, 16, 32, 64, 128, 256])
    def test_memory_bound_rows(self, batch: int) -> None:
        a = ledger_analysis.analyze(ledger.operator("decode", params=7e9, batch=batch), H100)
        d = a.derived
        assert d["intensity"] == batch  # 2·N·batch / (N·2)
        assert d["step_s"] == pytest.approx(self.T_MEM, rel=1e-12)
        assert d["tokens_per_s"] == pytest.approx(batch / self.T_MEM, rel=1e-12)  # 239.29 per unit of batch
        assert d["mfu"] == pytest.approx(batch * 3.35e12 / 989.4e12, rel=1e-12)  # 0.339% per unit of batch
        assert a.timing.bound == "memory"
        assert a.regime == "memory"  # 256 < 0.9 · 295.3 as well

    def test_seed_table_as_printed(self) -> None:
        rows = {}
        for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            d = ledger_analysis.analyze(ledger.operator("decode", params=7e9, batch=batch), H100).derived
            rows[batch] = (f"{d['intensity']:.1f}", f"{d['step_s'] * 1e3:.3f}", f"{d['tokens_per_s']:.0f}",
                           f"{d['mfu'] * 100:.1f}")
        assert rows[1] == ("1.0", "4.179", "239", "0.3")
        assert rows[16] == ("16.0", "4.179", "3829", "5.4")
        assert rows[256] == ("256.0", "4.179", "61257", "86.7")
        # 512 > ridge 295: compute-bound, step = 2·7e9·512 / 989.4e12 = 7.245 ms, tokens/s = 989.4e12 / 14e9
        assert rows[512] == ("512.0", "7.245", "70671", "100.0")

    def test_batch_to_leave_memory_bound(self) -> None:
        d = ledger_analysis.analyze(ledger.operator("decode", params=7e9), H100).derived
        assert d["batch_to_leave_memory_bound"] == pytest.approx(989.4e12 / 3.35e12)  # ridge · 2 / 2 = 295.3

    def test_fp8_weights_halve_bytes_not_flops(self) -> None:
        bf16 = ledger.operator("decode", params=7e9, batch=4)
        fp8 = ledger.operator("decode", params=7e9, batch=4, dtype="fp8")
        assert fp8.flops == bf16.flops and fp8.bytes == bf16.bytes / 2
        assert fp8.roof == bf16.roof  # weight-only quantization: compute stays at the bf16 roof

    def test_kv_cache_bytes_with_context(self) -> None:
        op = ledger.operator("decode", params=7e9, batch=1, context=4096, layers=32, heads=32, head_dim=128)
        # per token 2 (K,V) · 32 layers · 32 kv heads · 128 · 2 B = 524,288; · 4096 tokens = 2 GiB
        assert op.facts["kv_bytes_per_token"] == 524_288
        assert op.facts["kv_cache_bytes"] == 2_147_483_648
        assert op.bytes == 14e9 + 2_147_483_648 + 524_288  # weights + cache + the new token's K,V
        gqa = ledger.operator("decode", params=7e9, batch=1, context=4096, layers=32, heads=32, kv_heads=8,
                              head_dim=128)
        assert gqa.facts["kv_cache_bytes"] == 2_147_483_648 / 4  # 8 of 32 heads keep K,V

    def test_context_without_geometry_names_what_is_missing(self) -> None:
        with pytest.raises(LedgerError, match="missing: layers, heads, head_dim"):
            ledger.operator("decode", params=7e9, context=4096)


class TestBatchTable:
    """seeds/roofline.py `table`: batch = ridge · bytes / 2, at the dense bf16 (or fp32 on CPUs) roof."""

    @pytest.mark.parametrize(
        ("machine", "expected"),
        [
            (H100, {"bf16": "295", "fp16": "295", "fp8": "148", "fp32": "591"}),  # ridge 989.4/3.35 = 295.3
            (A100, {"bf16": "153", "fp16": "153", "fp8": "77", "fp32": "306"}),  # ridge 312/2.039 = 153.0
            (CPU, {"bf16": "17", "fp16": "17", "fp8": "8", "fp32": "33"}),  # ridge 5.1e12/307e9 = 16.6
            (LAPTOP, {"bf16": "5", "fp16": "5", "fp8": "2", "fp32": "10"}),  # ridge 5; fp8 2.5 prints "2"
        ],
    )
    def test_seed_table(self, machine: Machine, expected: dict[str, str]) -> None:
        table = ledger_analysis.decode_batch_table(machine)
        assert {k: f"{v:.0f}" for k, v in table["batch"].items()} == expected

    def test_machine_without_a_roof_gives_nan(self) -> None:
        table = ledger_analysis.decode_batch_table(Machine("bare", bandwidth_bytes_per_s={"dram": 1e12}))
        assert all(math.isnan(v) for v in table["batch"].values())


class TestNormsAndElementwise:
    def test_elementwise_chain_fused_vs_eager(self) -> None:
        n = 16 * 1024 * 1024  # the seed sweep's 16.8M elements, fp16
        fused = ledger.cost("elementwise", n=n, dtype="fp16")
        eager = ledger.cost("elementwise", n=n, dtype="fp16", fused=False)
        assert fused.flops == eager.flops == 2 * n  # cos + sin
        assert fused.bytes == 2 * n * 2  # read x, write y
        assert eager.bytes == 4 * n * 2  # x -> a -> b: two round trips
        assert fused.intensity == 0.5 and eager.intensity == 0.25

    def test_rmsnorm_seed_numbers(self) -> None:
        seed = ledger.cost("rmsnorm", rows=8192, hidden=4096, dtype="fp16", weight="resident")
        assert seed.bytes == 134_217_728  # read x + write y: 2 · 8192 · 4096 · 2 B; w resident = 0
        # 2·n (sum of squares) + rows (rsqrt) + 2·rows (scale) + 2·n (multiply by w), n = 33,554,432
        assert seed.flops == 134_242_304
        once = ledger.cost("rmsnorm", rows=8192, hidden=4096, dtype="fp16")
        assert once.bytes == seed.bytes + 4096 * 2  # the convention: w read once
        per_row = ledger.cost("rmsnorm", rows=8192, hidden=4096, dtype="fp16", weight="per-row")
        assert per_row.bytes == seed.bytes + 8192 * 4096 * 2

    def test_rmsnorm_bad_weight_mode(self) -> None:
        with pytest.raises(LedgerError, match="weight must be one of once, resident, per-row"):
            ledger.cost("rmsnorm", rows=1, hidden=1, weight="cached")

    def test_layernorm(self) -> None:
        c = ledger.cost("layernorm", rows=2, hidden=8, dtype="fp32")
        # per element 1 (sum) + 3 (variance) + 2 (normalize) + 2 (affine) = 8; per row 4
        assert c.flops == 8 * 16 + 4 * 2
        assert c.bytes == (16 + 16 + 8 + 8) * 4  # x, y, γ, β
        plain = ledger.cost("layernorm", rows=2, hidden=8, dtype="fp32", affine=False)
        assert plain.flops == 6 * 16 + 4 * 2 and plain.bytes == 32 * 4

    def test_softmax_and_embedding(self) -> None:
        s = ledger.cost("softmax", rows=4, cols=10, dtype="fp16")
        assert (s.flops, s.bytes) == (200, 160)  # 5 · 40; (40 + 40) · 2
        e = ledger.cost("embedding", tokens=16, hidden=32, dtype="fp16")
        assert e.flops == 0
        assert e.bytes == 16 * 8 + 16 * 32 * 2 + 16 * 32 * 2  # int64 ids + rows read + output
        e4 = ledger.cost("embedding", tokens=16, hidden=32, dtype="fp16", unique_tokens=4)
        assert e.bytes - e4.bytes == 12 * 32 * 2

    def test_norm_rope_quant_seed_case(self) -> None:
        op = ledger.operator("norm-rope-quant", tokens=4096, q_heads=32, kv_heads=8, head_dim=128)
        rows, elems = 4096 * 40, 4096 * 40 * 128  # 163,840 rows, 20,971,520 elements
        # read bf16 2·elems + write fp8 elems + fp32 scales 4·rows + weights 2·128·2 + RoPE 2·4096·128·4
        assert op.bytes == 2 * elems + elems + 4 * rows + 512 + 4_194_304 == 67_764_736
        # 2e + 3r + 2e + 6·64·r + e + 2e
        assert op.flops == 7 * elems + 3 * rows + 384 * rows == 210_206_720
        per_head = ledger.operator("norm-rope-quant", tokens=4096, q_heads=32, kv_heads=8, head_dim=128,
                                   rope_table_per_head=True)
        assert per_head.bytes - op.bytes == 39 * 4_194_304  # the table read by 40 heads instead of once


class TestAgainstIndependentCounts:
    """The closed forms against brute force and against torch.utils.flop_counter (an independent count)."""

    @pytest.mark.parametrize("sq", [1, 2, 5, 17, 64])
    @pytest.mark.parametrize("skv", [1, 3, 5, 64, 100])
    def test_causal_pairs_brute_force(self, sq: int, skv: int) -> None:
        # query i (of sq) sees key j (of skv) when j <= i + skv - sq: the mask aligned to the last key
        brute = sum(1 for i in range(sq) for j in range(skv) if j <= i + skv - sq)
        assert causal_pairs(sq, skv) == causal_pairs(sq, skv, LOWER_RIGHT) == brute
        # upper-left: query i sees key j when j <= i
        assert causal_pairs(sq, skv, UPPER_LEFT) == sum(1 for i in range(sq) for j in range(skv) if j <= i)

    @pytest.mark.filterwarnings("ignore:Lower right causal bias")  # torch's note on sq > skv rows that see nothing
    @pytest.mark.parametrize(("sq", "skv"), [(3, 4), (4, 3), (1, 7), (5, 5), (17, 64)])
    def test_causal_pairs_match_the_masks_torch_builds(self, sq: int, skv: int) -> None:
        bias = pytest.importorskip("torch.nn.attention.bias")
        assert causal_pairs(sq, skv, UPPER_LEFT) == int(bias.causal_upper_left(sq, skv)._materialize().sum())
        assert causal_pairs(sq, skv, LOWER_RIGHT) == int(bias.causal_lower_right(sq, skv)._materialize().sum())

    @pytest.mark.parametrize(
        ("n", "c", "h", "w", "k", "r", "stride", "padding", "dilation", "groups"),
        [(2, 3, 17, 13, 8, 3, 1, 1, 1, 1), (1, 4, 32, 32, 6, 5, 2, 2, 1, 2), (3, 8, 9, 11, 8, 3, 2, 0, 2, 8)],
    )
    def test_conv2d_matches_torch(self, n: int, c: int, h: int, w: int, k: int, r: int, stride: int, padding: int,
                                  dilation: int, groups: int) -> None:
        torch = pytest.importorskip("torch")
        from torch.utils.flop_counter import FlopCounterMode

        x = torch.zeros(n, c, h, w)
        weight = torch.zeros(k, c // groups, r, r)
        with FlopCounterMode(display=False) as counter:
            y = torch.nn.functional.conv2d(x, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)
        op = ledger.operator("conv2d", batch=n, in_channels=c, height=h, width=w, out_channels=k, kernel_size=r,
                             stride=stride, padding=padding, dilation=dilation, groups=groups, dtype="fp32")
        assert (op.facts["out_height"], op.facts["out_width"]) == tuple(y.shape[2:])
        assert op.flops == counter.get_total_flops()
        assert op.bytes == (x.numel() + weight.numel() + y.numel()) * 4

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
        assert ledger.cost("linear", tokens=10, in_features=24, out_features=48).flops == counter.get_total_flops()

    def test_attention_matmul_flops_match_torch(self) -> None:
        torch = pytest.importorskip("torch")
        from torch.utils.flop_counter import FlopCounterMode

        q, kv = torch.zeros(2, 3, 16, 8), torch.zeros(2, 3, 24, 8)
        with FlopCounterMode(display=False) as counter:  # the unfused formulation: S = QK^T, P = softmax(S), O = PV
            torch.softmax(q @ kv.transpose(-1, -2), dim=-1) @ kv
        op = ledger.operator("attention", batch_heads=6, sq=16, skv=24, d=8)
        qk_pv = next(t for t in op.cost.terms if t.name == "QK^T + PV")
        assert qk_pv.flops == counter.get_total_flops() == 73_728  # 4·6·16·24·8; flop_counter skips softmax
