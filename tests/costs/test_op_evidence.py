"""What the op tree says that an op's own record lacks (nsroof.costs.op_evidence): a math-path causal
attention's bmm's, forward and backward, count the visible scores as the fused kernels do. The index tensors
of aten::index / index_put_: tests/costs/ledger/aten/test_movement.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsroof.pipeline import analyze

torch = pytest.importorskip("torch")


def _math_attention_trace(tmp_path: Path, causal: bool) -> Path:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    q, k, v = (torch.randn(1, 2, 64, 16, requires_grad=True) for _ in range(3))
    with sdpa_kernel(SDPBackend.MATH), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
    path = tmp_path / f"math_{causal}.json"
    prof.export_chrome_trace(str(path))
    return path


def _bmms(path: Path) -> list[tuple[float, str]]:
    ops = analyze([path]).ops
    rows = ops[ops["op"].astype(str) == "aten::bmm"]
    return list(zip(rows["flops"].tolist(), rows["flops_source"].astype(str).tolist(), strict=True))


def test_a_causal_math_attention_counts_the_visible_scores_forward_and_backward(tmp_path: Path) -> None:
    bmms = _bmms(_math_attention_trace(tmp_path, causal=True))
    # 2 forward bmm's (QKᵀ, PV) and 4 backward (dV, dP, dQ, dK), each 2·bh·scores·d; sq = skv = 64 causal:
    # 64·65/2 = 2,080 of 4,096 scores visible per head -> 2·2·2,080·16 = 133,120 FLOP
    # (not 2·2·4,096·16 = 262,144)
    assert [f for f, _ in bmms] == [2 * 2 * 2_080 * 16] * 6
    assert (sum("(math path, backward)" in s for _, s in bmms) == 4
            and all("2,080 of 4,096" in s for _, s in bmms))
    # the forward's two equal the fused formula's matmul term, 4·bh·pairs·d = 4·2·2,080·16 = 266,240
    from nsroof.costs.ledger.aten import op_cost

    fused = op_cost("aten::_scaled_dot_product_flash_attention", [[1, 2, 64, 16]] * 3 + [[]] * 3,
                    ["float"] * 3 + [""] * 3, [None] * 3 + [0.0, True, False])
    assert bmms[0][0] + bmms[1][0] == 4 * 2 * 2_080 * 16 == fused.flops - 5 * 2 * 2_080 - 2 * 64 * 16


def test_a_full_math_attention_counts_every_score_and_says_nothing(tmp_path: Path) -> None:
    bmms = _bmms(_math_attention_trace(tmp_path, causal=False))
    assert [f for f, _ in bmms] == [2 * 2 * 64 * 64 * 16] * 6 and not any("[" in s for _, s in bmms)


def test_an_unrecorded_is_causal_is_said_not_guessed(tmp_path: Path) -> None:
    path = _math_attention_trace(tmp_path, causal=True)
    trace = json.loads(path.read_text())
    for e in trace["traceEvents"]:
        if e.get("name") == "aten::_scaled_dot_product_attention_math":
            e["args"].pop("Concrete Inputs", None)
    path.write_text(json.dumps(trace))
    bmms = _bmms(path)
    assert [f for f, _ in bmms] == [2 * 2 * 64 * 64 * 16] * 6
    assert all("is_causal is not recorded: every score counted" in s for _, s in bmms)
