"""aten readers of the convolutions (formulas: nsroof.costs.ledger.conv): the forward ops (conv1d/2d/3d,
conv_transpose1d/2d/3d, convolution, mkldnn and cuDNN convolution, each with its own argument positions) and
their backward (convolution_backward, cuDNN's input and weight backward). A square 2-D convolution is priced
by conv2d / conv2d-backward, every other one (1-D, 3-D, per-axis kernel, stride, padding or dilation,
transposed) by the N-D convolution / convolution-backward."""

from __future__ import annotations

from typing import Any, NamedTuple

from nsroof.costs.ledger.aten.args import (
    Reader,
    Shape,
    ledger_op,
    need,
    need_dtype,
    recorded,
    register_reader,
)


class At(NamedTuple):
    """Positions of one aten op's arguments (None: the op has no such argument)."""
    stride: int
    padding: int
    dilation: int
    bias: bool = True
    transposed: int | bool = False  # position of the flag, or the op's fixed answer
    output_padding: int | None = None
    groups: int | None = None


def _axes(value: Any, dims: int, name: str) -> list[int]:
    """A recorded per-axis argument: an int or a list of ints, one per axis or one for all."""
    values = list(value) if isinstance(value, list | tuple) else [value]
    need(len(values) >= 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
         f"{name} {value!r} is not a list of integers")
    need(len(values) in (1, dims), f"{name} {value!r} has {len(values)} axes, the convolution {dims}")
    return [int(v) for v in values] * (dims if len(values) == 1 else 1)


def _padding(value: Any, kernel: list[int], dilation: list[int]) -> list[int]:
    # aten::conv1d/2d/3d.padding take 'valid' (none) or 'same' (output = input, stride 1): symmetric only
    # when dil·(k − 1) is even, else torch pads one more on one side, which the formula cannot say
    if value == "valid":
        return [0] * len(kernel)
    if value == "same":
        spans = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        need(all(s % 2 == 0 for s in spans), f"padding='same' is asymmetric for kernel {kernel}")
        return [s // 2 for s in spans]
    return _axes(value, len(kernel), "padding")


def _is_transposed(c: list[Any], at: At) -> bool:
    if isinstance(at.transposed, bool):
        return at.transposed
    return bool(recorded(c, at.transposed, "conv transposed flag not recorded"))


def _conv_reader(at: At) -> Reader:
    """Forward convolution; the argument positions differ per aten op:
    conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups);
    conv_transpose1d/2d/3d(input, weight, bias, stride, padding, output_padding, groups, dilation);
    convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
        groups, …);
    mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups);
    cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32);
    cudnn_convolution_transpose(input, weight, padding, output_padding, stride, dilation, groups, …).
    The output size depends on stride, padding and dilation, which only the recorded Concrete Inputs give;
    groups = C / the weight's second dimension, or for a transposed convolution (weight C × K/groups × k)
    the recorded groups."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2 and len(s[1]) in (3, 4, 5) and len(s[0]) in (len(s[1]) - 1, len(s[1])),
             "only 1-, 2- and 3-D convolutions (3- to 5-D weight, input batched or not) have a formula")
        if not at.bias:
            # cudnn_convolution lost its bias argument in torch 1.8: an older trace has a tensor here
            need(len(t) > 2 and t[2] in ("ScalarList", ""),
                 "argument layout of this cudnn_convolution not recognised")
        x = list(s[0]) if len(s[0]) == len(s[1]) else [1, *s[0]]  # unbatched conv1d(C, L) etc.
        n, cin, *size = x
        w0, w1, *kernel = s[1]
        dims = len(kernel)
        transposed = _is_transposed(c, at)
        stride, dilation = (_axes(recorded(c, i), dims, name)
                            for i, name in ((at.stride, "stride"), (at.dilation, "dilation")))
        padding = _padding(recorded(c, at.padding), kernel, dilation)
        has_bias = at.bias and len(s) > 2 and len(s[2]) == 1
        if transposed:
            assert at.output_padding is not None and at.groups is not None  # every transposed layout has both
            groups = recorded(c, at.groups, "conv groups not recorded")
            need(isinstance(groups, int) and groups > 0 and w0 == cin,
                 f"weight {s[1]} does not fit input {x}")
            return ledger_op("convolution", batch=n, in_channels=cin, out_channels=w1 * groups,
                             size=_x(size), kernel=_x(kernel), stride=_x(stride), padding=_x(padding),
                             dilation=_x(dilation), groups=groups, transposed=True,
                             output_padding=_x(_axes(recorded(c, at.output_padding), dims, "output_padding")),
                             dtype=need_dtype(t, 0), bias=has_bias)
        need(w1 > 0 and cin % w1 == 0, f"input channels {cin} are not a multiple of the weight's {w1}")
        if dims == 2 and len(set(kernel)) == len(set(stride)) == len(set(padding)) == len(set(dilation)) == 1:
            return ledger_op("conv2d", batch=n, in_channels=cin, height=size[0], width=size[1],
                             out_channels=w0, kernel_size=kernel[0], stride=stride[0], padding=padding[0],
                             dilation=dilation[0], groups=cin // w1, dtype=need_dtype(t, 0), bias=has_bias)
        return ledger_op("convolution", batch=n, in_channels=cin, out_channels=w0, size=_x(size),
                         kernel=_x(kernel), stride=_x(stride), padding=_x(padding), dilation=_x(dilation),
                         groups=cin // w1, dtype=need_dtype(t, 0), bias=has_bias)

    return read


def _x(sizes: list[int]) -> str:
    return "x".join(map(str, sizes))


def _conv_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask): dY's shape gives the output size, so no stride is needed
    need(len(s) >= 3 and len(s[0]) in (3, 4, 5) and all(len(x) == len(s[0]) for x in s[:3]),
         "only 1-, 2- and 3-D convolutions (3- to 5-D dY, input, weight) have a formula")
    transposed = bool(recorded(c, 7, "conv transposed flag not recorded"))
    mask = recorded(c, 10, "conv backward output_mask not recorded")
    need(isinstance(mask, list | tuple) and len(mask) == 3, f"output_mask {mask!r} is not three flags")
    groups = recorded(c, 9, "conv groups not recorded") if transposed else None
    return _conv_grads(s[0], s[1], s[2], need_dtype(t, 0), bool(mask[0]), bool(mask[1]), bool(mask[2]),
                       groups)


def _cudnn_conv_backward(which: str) -> Reader:
    """cudnn_convolution_backward_input(self_size, grad_output, weight, padding, stride, dilation, groups, …)
    and cudnn_convolution_backward_weight(weight_size, grad_output, self, …) (torch ≤ 1.10): the missing
    tensor's shape is the recorded size list."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        size = recorded(c, 0, f"cudnn conv backward {which} size not recorded")
        need(isinstance(size, list | tuple) and len(size) in (3, 4, 5),
             f"{which} size {size!r} is not 3- to 5-D")
        need(len(s) >= 3 and len(s[1]) == len(s[2]) == len(size),
             "needs grad_output and weight/input of its rank")
        x, w = (list(size), s[2]) if which == "input" else (s[2], list(size))
        return _conv_grads(s[1], x, w, need_dtype(t, 1), which == "input", which == "weight", False)

    return read


def _conv_grads(dy: Shape, x: Shape, w: Shape, dtype: str, dx: bool, dw: bool, db: bool,
                transposed_groups: int | None = None) -> Any:
    """transposed_groups: None for a convolution, the recorded groups for a transposed one."""
    n, cin, *size = x
    _, cout, *out = dy
    w0, w1, *kernel = w
    if transposed_groups is not None:
        g = transposed_groups
        need(isinstance(g, int) and g > 0 and w0 == cin and w1 * g == cout,
             f"shapes dY {dy}, X {x}, W {w} do not agree with groups {g!r}")
        return ledger_op("convolution-backward", batch=n, in_channels=cin, out_channels=cout, size=_x(size),
                         out_size=_x(out), kernel=_x(kernel), groups=g, transposed=True, dtype=dtype,
                         input_grad=dx, weight_grad=dw, bias_grad=db)
    need(w0 == cout and w1 > 0 and cin % w1 == 0, f"shapes dY {dy}, X {x}, W {w} do not agree")
    if len(kernel) == 2 and kernel[0] == kernel[1]:
        return ledger_op("conv2d-backward", batch=n, in_channels=cin, height=size[0], width=size[1],
                         out_channels=cout, out_height=out[0], out_width=out[1], kernel_size=kernel[0],
                         groups=cin // w1, dtype=dtype, input_grad=dx, weight_grad=dw, bias_grad=db)
    return ledger_op("convolution-backward", batch=n, in_channels=cin, out_channels=cout, size=_x(size),
                     out_size=_x(out), kernel=_x(kernel), groups=cin // w1, dtype=dtype,
                     input_grad=dx, weight_grad=dw, bias_grad=db)


register_reader(("conv1d", "conv2d", "conv3d"), _conv_reader(At(3, 4, 5)))
register_reader(("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"),
                _conv_reader(At(3, 4, 7, transposed=True, output_padding=5, groups=6)))
register_reader(("convolution", "_convolution"), _conv_reader(At(3, 4, 5, transposed=6, output_padding=7,
                                                                   groups=8)))
register_reader(("mkldnn_convolution",), _conv_reader(At(4, 3, 5)))
register_reader(("cudnn_convolution",), _conv_reader(At(3, 2, 4, bias=False)))
register_reader(("cudnn_convolution_transpose",),
                _conv_reader(At(4, 2, 5, bias=False, transposed=True, output_padding=3, groups=6)))
register_reader(("convolution_backward",), _conv_backward)
register_reader(("cudnn_convolution_backward_input",), _cudnn_conv_backward("input"))
register_reader(("cudnn_convolution_backward_weight",), _cudnn_conv_backward("weight"))
