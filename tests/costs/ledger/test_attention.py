"""The attention formulas (attention, the causal masks, attention-traffic).

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import LedgerError
from nsroof.costs.ledger.attention import LOWER_RIGHT, UPPER_LEFT, causal_pairs


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
        # sq = 3 queries, skv = 4 keys. Upper-left (torch's is_causal, tril(ones(3, 4))): rows see
        # 1, 2, 3 keys = 6;
        # lower-right (flash-attn >= 2.1, engines): rows see 2, 3, 4 = 9
        assert causal_pairs(3, 4, UPPER_LEFT) == 1 + 2 + 3 == 6
        assert causal_pairs(3, 4, LOWER_RIGHT) == 2 + 3 + 4 == 9
        # sq = 4 > skv = 3: upper-left rows see 1, 2, 3, 3 = 9; lower-right 0, 1, 2, 3 = 6
        assert causal_pairs(4, 3, UPPER_LEFT) == 1 + 2 + 3 + 3 == 9
        assert causal_pairs(4, 3, LOWER_RIGHT) == 0 + 1 + 2 + 3 == 6
        # decode, one query over 8,192 keys: upper-left sees only the first key, lower-right all of them
        assert (causal_pairs(1, 8192, UPPER_LEFT), causal_pairs(1, 8192, LOWER_RIGHT)) == (1, 8192)
        # the formula: 4·bh·pairs·d for QK^T + PV, bh = 2, d = 16: 4·2·6·16 = 768 against 4·2·9·16 = 1,152
        ul = ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True,
                             causal_align=UPPER_LEFT)
        lr = ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True)
        assert (ul.cost.terms[4].flops, lr.cost.terms[4].flops) == (768, 1_152)
        assert ul.shape["causal_align"] == UPPER_LEFT and lr.shape["causal_align"] == LOWER_RIGHT
        square = ledger.operator("attention", batch_heads=2, sq=4, skv=4, d=16, causal=True,
                                 causal_align=UPPER_LEFT)
        assert "causal_align" not in square.shape  # the same mask either way: the shape stays as it was
        with pytest.raises(LedgerError, match="causal_align"):
            ledger.operator("attention", batch_heads=2, sq=3, skv=4, d=16, causal=True,
                            causal_align="diagonal")


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

    # torch's note on sq > skv rows that see nothing
    @pytest.mark.filterwarnings("ignore:Lower right causal bias")
    @pytest.mark.parametrize(("sq", "skv"), [(3, 4), (4, 3), (1, 7), (5, 5), (17, 64)])
    def test_causal_pairs_match_the_masks_torch_builds(self, sq: int, skv: int) -> None:
        bias = pytest.importorskip("torch.nn.attention.bias")
        assert causal_pairs(sq, skv, UPPER_LEFT) == int(bias.causal_upper_left(sq, skv)._materialize().sum())
        assert (causal_pairs(sq, skv, LOWER_RIGHT)
                == int(bias.causal_lower_right(sq, skv)._materialize().sum()))

    def test_attention_matmul_flops_match_torch(self) -> None:
        torch = pytest.importorskip("torch")
        from torch.utils.flop_counter import FlopCounterMode

        q, kv = torch.zeros(2, 3, 16, 8), torch.zeros(2, 3, 24, 8)
        # the unfused formulation: S = QK^T, P = softmax(S), O = PV
        with FlopCounterMode(display=False) as counter:
            torch.softmax(q @ kv.transpose(-1, -2), dim=-1) @ kv
        op = ledger.operator("attention", batch_heads=6, sq=16, skv=24, d=8)
        qk_pv = next(t for t in op.cost.terms if t.name == "QK^T + PV")
        assert qk_pv.flops == counter.get_total_flops() == 73_728  # 4·6·16·24·8; flop_counter skips softmax
