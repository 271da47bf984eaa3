"""aten readers of the 2-D convolutions (formulas: nsroof.costs.ledger.conv): the forward ops (conv2d,
convolution, mkldnn and cuDNN convolution, each with its own argument positions) and their backward
(convolution_backward, cuDNN's input and weight backward)."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten.args import (
    Reader,
    Shape,
    ledger_op,
    need,
    need_dtype,
    recorded,
    register_reader,
    square,
)


def _conv_reader(stride_at: int, padding_at: int, dilation_at: int, bias: bool = True,
                 transposed_at: int | None = None) -> Reader:
    """Forward 2-D convolution; the argument positions differ per aten op:
    conv2d(input, weight, bias, stride, padding, dilation, groups);
    convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
        groups, …);
    mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups);
    cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32).
    The output size depends on stride, padding and dilation, which only the recorded Concrete Inputs give;
    groups = C / the weight's second dimension."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4,
             "only 2-D convolutions (4-D input and weight) have a formula")
        if not bias:
            # cudnn_convolution lost its bias argument in torch 1.8: an older trace has a tensor here
            need(len(t) > 2 and t[2] in ("ScalarList", ""),
                 "argument layout of this cudnn_convolution not recognised")
        n, cin, h, w = s[0]
        cout, cin_per_group, kh, kw = s[1]
        need(kh == kw, f"the conv2d formula needs a square kernel, got {kh}×{kw}")
        need(cin_per_group > 0 and cin % cin_per_group == 0,
             f"input channels {cin} are not a multiple of the weight's {cin_per_group}")
        if transposed_at is not None:
            need(not bool(recorded(c, transposed_at)), "transposed convolutions have no formula")
        stride, padding, dilation = (square(recorded(c, i), name) for i, name in
                                     ((stride_at, "stride"), (padding_at, "padding"),
                                      (dilation_at, "dilation")))
        has_bias = bias and len(s) > 2 and len(s[2]) == 1
        return ledger_op("conv2d", batch=n, in_channels=cin, height=h, width=w, out_channels=cout,
                         kernel_size=kh, stride=stride, padding=padding, dilation=dilation,
                         groups=cin // cin_per_group, dtype=need_dtype(t, 0), bias=has_bias)

    return read


def _conv_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask): dY's shape gives the output size, so no stride is needed
    need(len(s) >= 3 and all(len(x) == 4 for x in s[:3]),
         "only 2-D convolutions (4-D dY, input, weight) have a formula")
    need(not bool(recorded(c, 7, "conv transposed flag not recorded")),
         "transposed convolutions have no formula")
    mask = recorded(c, 10, "conv backward output_mask not recorded")
    need(isinstance(mask, list | tuple) and len(mask) == 3, f"output_mask {mask!r} is not three flags")
    return _conv_grads(s[0], s[1], s[2], need_dtype(t, 0), bool(mask[0]), bool(mask[1]), bool(mask[2]))


def _cudnn_conv_backward(which: str) -> Reader:
    """cudnn_convolution_backward_input(self_size, grad_output, weight, padding, stride, dilation, groups, …)
    and cudnn_convolution_backward_weight(weight_size, grad_output, self, …) (torch ≤ 1.10): the missing
    tensor's shape is the recorded size list."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        size = recorded(c, 0, f"cudnn conv backward {which} size not recorded")
        need(isinstance(size, list | tuple) and len(size) == 4, f"{which} size {size!r} is not 4-D")
        need(len(s) >= 3 and len(s[1]) == 4 and len(s[2]) == 4, "needs 4-D grad_output and weight/input")
        x, w = (list(size), s[2]) if which == "input" else (s[2], list(size))
        return _conv_grads(s[1], x, w, need_dtype(t, 1), which == "input", which == "weight", False)

    return read


def _conv_grads(dy: Shape, x: Shape, w: Shape, dtype: str, dx: bool, dw: bool, db: bool) -> Any:
    n, cin, h, wd = x
    _, cout, p, q = dy
    k, cin_per_group, r, s2 = w
    need(r == s2, f"the conv2d-backward formula needs a square kernel, got {r}×{s2}")
    need(k == cout and cin_per_group > 0 and cin % cin_per_group == 0,
         f"shapes dY {dy}, X {x}, W {w} do not agree")
    return ledger_op("conv2d-backward", batch=n, in_channels=cin, height=h, width=wd, out_channels=cout,
                     out_height=p, out_width=q, kernel_size=r, groups=cin // cin_per_group, dtype=dtype,
                     input_grad=dx, weight_grad=dw, bias_grad=db)


register_reader(("conv2d",), _conv_reader(3, 4, 5))
register_reader(("convolution", "_convolution"), _conv_reader(3, 4, 5, transposed_at=6))
register_reader(("mkldnn_convolution",), _conv_reader(4, 3, 5))
register_reader(("cudnn_convolution",), _conv_reader(3, 2, 4, bias=False))
register_reader(("convolution_backward",), _conv_backward)
register_reader(("cudnn_convolution_backward_input",), _cudnn_conv_backward("input"))
register_reader(("cudnn_convolution_backward_weight",), _cudnn_conv_backward("weight"))
