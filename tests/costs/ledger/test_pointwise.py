"""The elementwise formula, fused and eager.

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

from nsroof.costs import ledger


class TestElementwise:
    def test_elementwise_chain_fused_vs_eager(self) -> None:
        n = 16 * 1024 * 1024  # the seed sweep's 16.8M elements, fp16
        fused = ledger.cost("elementwise", n=n, dtype="fp16")
        eager = ledger.cost("elementwise", n=n, dtype="fp16", fused=False)
        assert fused.flops == eager.flops == 2 * n  # cos + sin
        assert fused.bytes == 2 * n * 2  # read x, write y
        assert eager.bytes == 4 * n * 2  # x -> a -> b: two round trips
        assert fused.intensity == 0.5 and eager.intensity == 0.25
