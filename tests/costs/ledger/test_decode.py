"""The decode formula and the batch table it gives.

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

import math

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import LedgerError
from nsroof.roofs import ledger_analysis
from nsroof.roofs.machines import Machine
from tests.costs.ledger.seed_machines import A100, CPU, H100, LAPTOP


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
