"""The norm formulas (rmsnorm, layernorm, norm-rope-quant).

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import LedgerError


class TestNorms:
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
