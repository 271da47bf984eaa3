"""The softmax formula (its test checks the embedding lookup too).

Against the seeds' numbers (../shared/seeds), arithmetic in the comments; the machines are built from
the seeds' own figures (seed_machines)."""

from __future__ import annotations

from nsroof.costs import ledger


class TestSoftmax:
    def test_softmax_and_embedding(self) -> None:
        s = ledger.cost("softmax", rows=4, cols=10, dtype="fp16")
        assert (s.flops, s.bytes) == (200, 160)  # 5 · 40; (40 + 40) · 2
        e = ledger.cost("embedding", tokens=16, hidden=32, dtype="fp16")
        assert e.flops == 0
        assert e.bytes == 16 * 8 + 16 * 32 * 2 + 16 * 32 * 2  # int64 ids + rows read + output
        e4 = ledger.cost("embedding", tokens=16, hidden=32, dtype="fp16", unique_tokens=4)
        assert e.bytes - e4.bytes == 12 * 32 * 2
