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


class TestConvolution:
    """The N-D convolution formula: the square 2-D case equals conv2d; per-axis sizes; transposed."""

    def test_square_2d_equals_conv2d(self) -> None:
        nd = ledger.operator("convolution", batch=1, in_channels=3, out_channels=64, size="224x224",
                             kernel="7", stride="2", padding="3", dtype="fp16")
        assert nd.flops == 236_027_904 and nd.bytes == (150_528 + 9_408 + 802_816) * 2  # as the resnet stem
        assert (nd.facts["out_0"], nd.facts["out_1"]) == (112, 112)

    def test_per_axis_and_transposed(self) -> None:
        # 1×3 kernel, stride 2×1, padding 0×1, dilation 2 on 9×12: out 5×10; 2·2·6·5·10·4·3 = 14,400
        op = ledger.operator("convolution", batch=2, in_channels=4, out_channels=6, size="9x12", kernel="1x3",
                             stride="2x1", padding="0x1", dilation="2", dtype="fp32")
        assert op.flops == 14_400 and "kernel=1x3" in op.label
        # transposed 1-D: 10 -> (10 − 1)·2 − 2 + 2 + 1 + 1 = 20; 2·N·C·L_in·K·k = 2·2·6·10·4·3 = 2,880
        t = ledger.operator("convolution", batch=2, in_channels=6, out_channels=4, size="10", kernel="3",
                            stride="2", padding="1", output_padding="1", transposed=True, dtype="fp32")
        assert t.flops == 2_880 and t.facts["out_0"] == 20
        assert t.bytes == 4 * (2 * 6 * 10 + 6 * 4 * 3 + 2 * 4 * 20)

    def test_errors(self) -> None:
        with pytest.raises(LedgerError, match="has 3 axes"):
            ledger.cost("convolution", batch=1, in_channels=1, out_channels=1, size="8x8", kernel="3x3x3")
        with pytest.raises(LedgerError, match="does not fit"):
            ledger.cost("convolution", batch=1, in_channels=1, out_channels=1, size="2", kernel="5")
        with pytest.raises(LedgerError, match="not integers"):
            ledger.cost("convolution", batch=1, in_channels=1, out_channels=1, size="8xa", kernel="3")

    def test_backward_square_2d_equals_conv2d_backward(self) -> None:
        kw = {"batch": 2, "in_channels": 8, "out_channels": 8, "groups": 2, "bias_grad": True,
              "dtype": "fp32"}
        nd = ledger.operator("convolution-backward", size="16x16", out_size="16x16", kernel="3", **kw)
        old = ledger.operator("conv2d-backward", height=16, width=16, out_height=16, out_width=16,
                              kernel_size=3, **kw)
        assert (nd.flops, nd.bytes) == (old.flops, old.bytes) == (2 * 294_912 + 4_096, nd.bytes)
