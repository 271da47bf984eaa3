"""The conv2d formula against hand counts and torch.utils.flop_counter."""

from __future__ import annotations

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import LedgerError


class TestConv2d:
    def test_resnet_stem(self) -> None:
        op = ledger.operator("conv2d", batch=1, in_channels=3, height=224, width=224, out_channels=64,
                             kernel_size=7, stride=2, padding=3, dtype="fp16")
        assert (op.facts["out_height"], op.facts["out_width"]) == (112, 112)  # (224 + 6 - 7)//2 + 1
        assert op.flops == 236_027_904  # 2 · 64 · 112² · 3 · 7² (118,013,952 MACs)
        # input 3·224² = 150,528 + weights 64·3·49 = 9,408 + output 64·112² = 802,816 elements, · 2 B
        assert op.bytes == (150_528 + 9_408 + 802_816) * 2

    def test_groups_divide_the_work(self) -> None:
        dense = ledger.cost("conv2d", batch=1, in_channels=8, height=4, width=4, out_channels=8,
                            kernel_size=3, padding=1, dtype="fp32")
        depthwise = ledger.cost("conv2d", batch=1, in_channels=8, height=4, width=4, out_channels=8,
                                kernel_size=3, padding=1, groups=8, dtype="fp32")
        assert dense.flops == 8 * depthwise.flops  # C/groups = 8 vs 1

    def test_kernel_larger_than_input_is_an_error(self) -> None:
        with pytest.raises(LedgerError, match="does not fit"):
            ledger.cost("conv2d", batch=1, in_channels=1, height=2, width=2, out_channels=1, kernel_size=5)


class TestAgainstIndependentCounts:
    """The closed forms against brute force and against torch.utils.flop_counter (an independent count)."""

    @pytest.mark.parametrize(
        ("n", "c", "h", "w", "k", "r", "stride", "padding", "dilation", "groups"),
        [(2, 3, 17, 13, 8, 3, 1, 1, 1, 1), (1, 4, 32, 32, 6, 5, 2, 2, 1, 2), (3, 8, 9, 11, 8, 3, 2, 0, 2, 8)],
    )
    def test_conv2d_matches_torch(self, n: int, c: int, h: int, w: int, k: int, r: int, stride: int,
                                  padding: int, dilation: int, groups: int) -> None:
        torch = pytest.importorskip("torch")
        from torch.utils.flop_counter import FlopCounterMode

        x = torch.zeros(n, c, h, w)
        weight = torch.zeros(k, c // groups, r, r)
        with FlopCounterMode(display=False) as counter:
            y = torch.nn.functional.conv2d(x, weight, stride=stride, padding=padding, dilation=dilation,
                                           groups=groups)
        op = ledger.operator("conv2d", batch=n, in_channels=c, height=h, width=w, out_channels=k,
                             kernel_size=r, stride=stride, padding=padding, dilation=dilation, groups=groups,
                             dtype="fp32")
        assert (op.facts["out_height"], op.facts["out_width"]) == tuple(y.shape[2:])
        assert op.flops == counter.get_total_flops()
        assert op.bytes == (x.numel() + weight.numel() + y.numel()) * 4
