"""Every convolution variant (1-D, 3-D, per-axis kernel/stride/dilation, transposed, grouped), profiled on
CPU with record_shapes=True, costed from the exported Chrome trace's recorded shapes and Concrete Inputs, and
compared with torch.utils.flop_counter.FlopCounterMode, forward and backward (bias off: FlopCounterMode does
not count bias adds, the ledger does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsroof.costs.ledger.aten import op_cost

torch = pytest.importorskip("torch")

# name: (module, input shape, the ledger's forward FLOPs with its arithmetic, groups)
CASES: dict[str, tuple[Any, tuple[int, ...], int, int]] = {
    # causal conv1d, Mamba-style: 16 channels, kernel 4, padding 3, length 32 -> out 32 + 6 − 3 = 35;
    # 2·N·K·L_out·C·k = 2·2·16·35·16·4 = 143,360
    "conv1d causal": (lambda: torch.nn.Conv1d(16, 16, 4, padding=3, bias=False), (2, 16, 32), 143_360, 1),
    # depthwise conv1d (groups = channels 16): out 35 as above;
    # 2·N·K·L_out·(C/groups)·k = 2·2·16·35·1·4 = 8,960
    "conv1d depthwise": (lambda: torch.nn.Conv1d(16, 16, 4, padding=3, groups=16, bias=False), (2, 16, 32),
                         8_960, 16),
    # (1, 3) kernel, stride (2, 1), padding (0, 1), dilation 2: P = (9 − 1)//2 + 1 = 5,
    # Q = (12 + 2 − 2·2 − 1)//1 + 1 = 10; 2·N·K·P·Q·C·R·S = 2·2·6·5·10·4·3 = 14,400
    "conv2d 1x3 stride 2x1 dilation 2": (
        lambda: torch.nn.Conv2d(4, 6, (1, 3), stride=(2, 1), padding=(0, 1), dilation=2, bias=False),
        (2, 4, 9, 12), 14_400, 1),
    # grouped conv2d, groups 2, 3×3 padding 1 on 10×10: out 10×10;
    # 2·N·K·P·Q·(C/g)·R·S = 2·2·8·100·4·9 = 115,200
    "conv2d groups 2": (lambda: torch.nn.Conv2d(8, 8, 3, padding=1, groups=2, bias=False), (2, 8, 10, 10),
                        115_200, 2),
    # conv3d 3×3×3 padding 1 on 4×6×6 (out the same): 2·N·K·D·H·W·C·27 = 2·1·4·144·3·27 = 93,312
    "conv3d": (lambda: torch.nn.Conv3d(3, 4, 3, padding=1, bias=False), (1, 3, 4, 6, 6), 93_312, 1),
    # conv_transpose1d stride 2 output_padding 1, kernel 3 padding 1, 10 -> (10 − 1)·2 − 2 + 2 + 1 + 1 = 20;
    # each input point scatters into K·k: 2·N·C·L_in·K·k = 2·2·6·10·4·3 = 2,880
    "conv_transpose1d stride 2": (
        lambda: torch.nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1, bias=False),
        (2, 6, 10), 2_880, 1),
    # conv_transpose2d stride 2 output_padding 1, 3×3 padding 1, 5×7 -> 10×14; 2·N·C·H·W·K·R·S =
    # 2·1·4·35·3·9 = 7,560
    "conv_transpose2d stride 2": (
        lambda: torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1, bias=False),
        (1, 4, 5, 7), 7_560, 1),
}

BACKWARD = "aten::convolution_backward"
FORWARD = {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
           "aten::conv_transpose3d"}


def _profiled(module: Any, x: Any, tmp_path: Path) -> list[dict[str, Any]]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        module(x).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return [e for e in json.loads(path.read_text())["traceEvents"]
            if e.get("cat") == "cpu_op" and (e["name"] in FORWARD or e["name"] == BACKWARD)]


def _cost(event: dict[str, Any]) -> Any:
    a = event["args"]
    return op_cost(event["name"], a["Input Dims"], a["Input type"], a.get("Concrete Inputs"))


@pytest.mark.parametrize("case", list(CASES))
def test_matches_flop_counter_mode(case: str, tmp_path: Path) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    make, shape, expect, groups = CASES[case]
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape, requires_grad=True)
    with FlopCounterMode(display=False) as fwd:
        y = module(x)
    with FlopCounterMode(display=False) as bwd:
        y.sum().backward()
    events = _profiled(module, x, tmp_path)
    forward = [_cost(e) for e in events if e["name"] in FORWARD]
    backward = [_cost(e) for e in events if e["name"] == BACKWARD]
    assert len(forward) == len(backward) == 1, [e["name"] for e in events]
    assert forward[0].missing == backward[0].missing == ""
    assert forward[0].flops == fwd.get_total_flops() == expect
    # bytes: input, weight and output once each (4 B fp32)
    assert forward[0].bytes == 4 * (x.numel() + module.weight.numel() + y.numel())
    # backward with input and weight gradients (output_mask [True, True, False]): dX and dW each cost the
    # forward's multiply-adds. FlopCounterMode counts a grouped weight gradient with all C input channels per
    # output channel, groups× the forward (see docs/readme/ledger.md); the ledger counts each group once.
    assert backward[0].flops == 2 * expect
    assert bwd.get_total_flops() == expect + groups * expect
