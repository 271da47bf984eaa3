"""aten shape readers of the matmul, convolution, normalisation, pooling, softmax, attention and embedding ops:
each turns one call's recorded shapes, dtypes and scalar arguments into a ledger Operator, or raises NoShape."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten_args import (
    Reader,
    Shape,
    arg,
    broadcast,
    dtype_of,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.attention import LOWER_RIGHT, UPPER_LEFT

# --------------------------------------------------------------------------- per-op shape readers
# Each takes (shapes, dtypes, concrete) and returns a ledger Operator or raises NoShape.

def _mm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 2 and len(s[1]) == 2, "mm needs two 2-D inputs")
    (m, k), (k2, n) = s[0], s[1]
    need(k == k2, f"mm inner dimensions differ ({k} vs {k2})")
    return ledger_op("gemm", m=m, n=n, k=k, dtype=need_dtype(t, 0))


def _addmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 3 and len(s[1]) == 2 and len(s[2]) == 2, "addmm needs a bias and two 2-D inputs")
    (m, k), (k2, n) = s[1], s[2]
    need(k == k2, f"addmm inner dimensions differ ({k} vs {k2})")
    return ledger_op("gemm-bias", m=m, n=n, k=k, bias_elements=max(numel(s[0]), 1), dtype=need_dtype(t, 1))


def _bmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 3 and len(s[1]) == 3, "bmm needs two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[0], s[1]
    need(k == k2 and b == b2, f"bmm shapes {s[0]} and {s[1]} do not agree")
    return ledger_op("bmm", batch=b, m=m, n=n, k=k, dtype=need_dtype(t, 0))


def _baddbmm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 3 and len(s[1]) == 3 and len(s[2]) == 3, "baddbmm needs a bias and two 3-D inputs")
    (b, m, k), (b2, k2, n) = s[1], s[2]
    need(k == k2 and b == b2, f"baddbmm shapes {s[1]} and {s[2]} do not agree")
    return ledger_op("gemm-bias", m=m, n=n, k=k, batch=b, bias_elements=max(numel(s[0]), 1), dtype=need_dtype(t, 1))


def _matmul(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) >= 1, "matmul needs two tensor inputs")
    a, b = list(s[0]), list(s[1])
    dt = need_dtype(t, 0)
    # 1-D operands are promoted to matrices as torch.matmul does.
    if len(a) == 1:
        a = [1, a[0]]
    if len(b) == 1:
        b = [b[0], 1]
    m, k = a[-2], a[-1]
    n = b[-1]
    need(b[-2] == k, f"matmul inner dimensions differ ({k} vs {b[-2]})")
    if len(b) == 2:
        # (..., m, k) @ (k, n): torch folds the batch dimensions into m.
        return ledger_op("gemm", m=numel(a[:-1]), n=n, k=k, dtype=dt)
    batch = broadcast(a[:-2], b[:-2])
    return ledger_op("bmm", batch=max(numel(batch), 1), m=m, n=n, k=k, dtype=dt)


def _linear(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) >= 1 and len(s[1]) == 2, "linear needs an input and a 2-D weight")
    out_f, in_f = s[1]
    # linear(input, weight, bias) records 2 or 3 inputs that agree; sampled production traces hold records
    # with more inputs or disagreeing shapes (HTA's timeline sample): no shape to trust
    need(len(s) <= 3 and s[0][-1] == in_f, f"linear inputs {s} are not (input, weight[, bias])")
    has_bias = len(s) > 2 and len(s[2]) == 1
    return ledger_op("linear", tokens=numel(s[0][:-1]) or 1, in_features=in_f, out_features=out_f,
                   dtype=need_dtype(t, 0), bias=has_bias)


def _conv_reader(stride_at: int, padding_at: int, dilation_at: int, bias: bool = True,
                 transposed_at: int | None = None) -> Reader:
    """Forward 2-D convolution; the argument positions differ per aten op:
    conv2d(input, weight, bias, stride, padding, dilation, groups);
    convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, …);
    mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups);
    cudnn_convolution(input, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32).
    The output size depends on stride, padding and dilation, which only the recorded Concrete Inputs give;
    groups = C / the weight's second dimension."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4,
              "only 2-D convolutions (4-D input and weight) have a formula")
        if not bias:
            # cudnn_convolution lost its bias argument in torch 1.8: an older trace has a tensor here
            need(len(t) > 2 and t[2] in ("ScalarList", ""), "argument layout of this cudnn_convolution not recognised")
        n, cin, h, w = s[0]
        cout, cin_per_group, kh, kw = s[1]
        need(kh == kw, f"the conv2d formula needs a square kernel, got {kh}×{kw}")
        need(cin_per_group > 0 and cin % cin_per_group == 0,
              f"input channels {cin} are not a multiple of the weight's {cin_per_group}")
        if transposed_at is not None:
            need(not bool(recorded(c, transposed_at)), "transposed convolutions have no formula")
        stride, padding, dilation = (square(recorded(c, i), name) for i, name in
                                     ((stride_at, "stride"), (padding_at, "padding"), (dilation_at, "dilation")))
        has_bias = bias and len(s) > 2 and len(s[2]) == 1
        return ledger_op("conv2d", batch=n, in_channels=cin, height=h, width=w, out_channels=cout, kernel_size=kh,
                       stride=stride, padding=padding, dilation=dilation, groups=cin // cin_per_group,
                       dtype=need_dtype(t, 0), bias=has_bias)

    return read


def square(value: Any, name: str) -> int:
    values = list(value) if isinstance(value, list | tuple) else [value]
    need(len(values) >= 1 and all(isinstance(v, int) and not isinstance(v, bool) for v in values),
          f"{name} {value!r} is not a list of integers")
    need(len(set(values)) == 1, f"the conv2d formula needs equal {name} on both axes, got {values}")
    return int(values[0])


def _conv_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    # output_padding, groups, output_mask): dY's shape gives the output size, so no stride is needed
    need(len(s) >= 3 and all(len(x) == 4 for x in s[:3]), "only 2-D convolutions (4-D dY, input, weight) have a formula")
    need(not bool(recorded(c, 7, "conv transposed flag not recorded")), "transposed convolutions have no formula")
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
    need(k == cout and cin_per_group > 0 and cin % cin_per_group == 0, f"shapes dY {dy}, X {x}, W {w} do not agree")
    return ledger_op("conv2d-backward", batch=n, in_channels=cin, height=h, width=wd, out_channels=cout, out_height=p,
                   out_width=q, kernel_size=r, groups=cin // cin_per_group, dtype=dtype, input_grad=dx,
                   weight_grad=dw, bias_grad=db)


def _batch_norm(training_at: int | None) -> Reader:
    """batch_norm / _batch_norm_impl_index / native_batch_norm / cudnn_batch_norm / miopen_batch_norm
    (input, weight, bias, running_mean, running_var, training, …); training_at None: always evaluation
    (_native_batch_norm_legit_no_training)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        n, channels, spatial = _nc_spatial(s)
        training = False if training_at is None else recorded(c, training_at, "batch norm training flag not recorded")
        need(isinstance(training, bool), f"batch norm training flag {training!r} is not a boolean")
        affine = len(s) > 2 and len(s[1]) == 1 and len(s[2]) == 1
        return ledger_op("batchnorm", batch=n, channels=channels, spatial=spatial, dtype=need_dtype(t, 0),
                       training=training, affine=affine)

    return read


def _nc_spatial(s: list[Shape], at: int = 0) -> tuple[int, int, int]:
    need(len(s) > at and len(s[at]) >= 2, "batch norm needs an (N, C, …) input")
    shape = s[at]
    return shape[0], shape[1], max(numel(shape[2:]), 1)


def _batch_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    # train, eps, output_mask)
    n, channels, spatial = _nc_spatial(s, 1)
    training = recorded(c, 7, "batch norm training flag not recorded")
    mask = recorded(c, 9, "batch norm backward output_mask not recorded")
    need(isinstance(mask, list | tuple) and len(mask) == 3, f"output_mask {mask!r} is not three flags")
    return ledger_op("batchnorm-backward", batch=n, channels=channels, spatial=spatial, dtype=need_dtype(t, 0),
                   training=bool(training), input_grad=bool(mask[0]), affine_grad=bool(mask[1] or mask[2]))


def _cudnn_batch_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # epsilon, reserveSpace): training mode, all three gradients
    n, channels, spatial = _nc_spatial(s, 0)
    return ledger_op("batchnorm-backward", batch=n, channels=channels, spatial=spatial, dtype=need_dtype(t, 0),
                   training=True)


def _pool(mode: str, indices: bool) -> Reader:
    """max_pool2d[_with_indices](input, kernel_size, stride, padding, dilation, ceil_mode);
    avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
        what = "pool kernel/stride/padding not recorded"
        kernel = square(recorded(c, 1, what), "kernel_size")
        stride_value = recorded(c, 2, what)
        # an empty stride list is torch's "same as the kernel"
        stride = kernel if stride_value in ([], ()) else square(stride_value, "stride")
        padding = square(recorded(c, 3, what), "padding")
        dilation = square(recorded(c, 4, what), "dilation") if mode == "max" else 1
        ceil_mode = recorded(c, 5 if mode == "max" else 4, what)
        n, ch, h, w = s[0]
        return ledger_op("pool2d", batch=n, channels=ch, height=h, width=w, kernel_size=kernel, stride=stride,
                       padding=padding, dilation=dilation, ceil_mode=bool(ceil_mode), mode=mode,
                       dtype=need_dtype(t, 0), indices=indices)

    return read


def _pool_backward(mode: str) -> Reader:
    """max_pool2d_with_indices_backward(grad_output, input, kernel_size, …, indices) and
    avg_pool2d_backward(grad_output, input, kernel_size, …): dY's shape is the output size."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) >= 2 and len(s[0]) == 4 and len(s[1]) == 4, "only batched 2-D pooling (4-D dY and input) has a formula")
        kernel = square(recorded(c, 2, "pool kernel/stride/padding not recorded"), "kernel_size")
        n, ch, h, w = s[1]
        return ledger_op("pool2d-backward", batch=n, channels=ch, height=h, width=w, out_height=s[0][2],
                       out_width=s[0][3], kernel_size=kernel, mode=mode, dtype=need_dtype(t, 0))

    return read


def _adaptive_avg_pool(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # _adaptive_avg_pool2d(input, output_size): with sizes that divide the input, disjoint windows, i.e. a
    # mean over each window (global average pooling is output_size [1, 1])
    need(len(s) >= 1 and len(s[0]) == 4, "only batched 2-D pooling (a 4-D input) has a formula")
    size = recorded(c, 1, "adaptive pool output_size not recorded")
    need(isinstance(size, list | tuple) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size),
          f"output_size {size!r} is not two positive integers")
    n, ch, h, w = s[0]
    need(h % size[0] == 0 and w % size[1] == 0, f"output {size} does not divide the {h}×{w} input (overlapping windows)")
    return ledger_op("reduction", n=max(numel(s[0]), 1), outputs=n * ch * size[0] * size[1], dtype=need_dtype(t, 0),
                   divide_per_output=1.0, op="adaptive_avg_pool2d")


def _attention_reader(q_at: int, causal_at: int, backward: bool, align: str) -> Reader:
    """SDPA ops (BHSD): `is_causal` applies the mask aligned as `align` (attention.causal_pairs says which kernel
    aligns it where)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        need(len(s) > q_at + 1 and len(s[q_at]) == 4 and len(s[q_at + 1]) == 4,
              "attention needs 4-D (batch, heads, seq, dim) query and key")
        b, h, sq, d = s[q_at]
        skv = s[q_at + 1][2]
        causal = bool(arg(c, causal_at, False))
        return ledger_op("attention-backward" if backward else "attention", batch_heads=b * h, sq=sq, skv=skv, d=d,
                       dtype=need_dtype(t, q_at), causal=causal, causal_align=align)

    return read


def _layer_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    hidden, rows = _norm_rows(s, c, 1)
    affine = len(s) > 2 and len(s[2]) >= 1
    return ledger_op("layernorm", rows=rows, hidden=hidden, dtype=need_dtype(t, 0), affine=affine)


def _rms_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    hidden, rows = _norm_rows(s, c, 1)
    return ledger_op("rmsnorm", rows=rows, hidden=hidden, dtype=need_dtype(t, 0))


def _layer_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
    need(len(s) >= 2 and len(s[1]) >= 1, "layer_norm backward needs the input shape")
    normalized = arg(c, 2)
    need(isinstance(normalized, list) and len(normalized) >= 1, "normalized_shape was not recorded")
    hidden = numel(normalized)
    affine = len(s) > 5 and len(s[5]) >= 1
    return ledger_op("layernorm-backward", rows=numel(s[1]) // hidden, hidden=hidden, dtype=need_dtype(t, 1),
                   affine=affine)


def _norm_rows(s: list[Shape], c: list[Any], at: int) -> tuple[int, int]:
    need(len(s) >= 1 and len(s[0]) >= 1, "norm needs the input shape")
    normalized = arg(c, at)
    need(isinstance(normalized, list) and len(normalized) >= 1, "normalized_shape was not recorded")
    hidden = numel(normalized)
    return hidden, numel(s[0]) // hidden


def _softmax(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    rows, cols = _softmax_rows(s, c, 0, 1)
    return ledger_op("softmax", rows=rows, cols=cols, dtype=need_dtype(t, 0))


def _softmax_backward(log: bool) -> Reader:
    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        # _softmax_backward_data(grad_output, output, dim, input_dtype)
        rows, cols = _softmax_rows(s, c, 0, 2)
        return ledger_op("softmax-backward", rows=rows, cols=cols, dtype=need_dtype(t, 0), log=log)

    return read


def _softmax_rows(s: list[Shape], c: list[Any], x_at: int, dim_at: int) -> tuple[int, int]:
    need(len(s) > x_at and len(s[x_at]) >= 1, "softmax needs the input shape")
    shape = s[x_at]
    dim = arg(c, dim_at)
    need(isinstance(dim, int), "softmax dim was not recorded")
    cols = shape[dim % len(shape)]
    return numel(shape) // cols, cols


def _embedding(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    need(len(s) >= 2 and len(s[0]) == 2, "embedding needs a 2-D weight and the indices")
    _, hidden = s[0]
    return ledger_op("embedding", tokens=max(numel(s[1]), 1), hidden=hidden, dtype=need_dtype(t, 0),
                   index_dtype=dtype_of(t, 1) or "int64")


def _embedding_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq);
    # embedding_backward(…, sparse) adds the sparse flag: a sparse gradient is no dense table write
    need(len(s) >= 2 and len(s[0]) >= 1, "embedding backward needs the gradient shape")
    need(not bool(arg(c, 5, False)), "sparse embedding gradients have no formula")
    num_weights = recorded(c, 2, "embedding num_weights not recorded")
    need(isinstance(num_weights, int) and not isinstance(num_weights, bool), f"num_weights {num_weights!r} is not an integer")
    hidden = s[0][-1]
    return ledger_op("embedding-backward", tokens=max(numel(s[1]), 1), hidden=hidden, num_embeddings=num_weights,
                   dtype=need_dtype(t, 0), index_dtype=dtype_of(t, 1) or "int64")




register_reader(("mm",), _mm)
register_reader(("addmm",), _addmm)
register_reader(("bmm",), _bmm)
register_reader(("baddbmm",), _baddbmm)
register_reader(("matmul",), _matmul)
register_reader(("linear",), _linear)
register_reader(("conv2d",), _conv_reader(3, 4, 5))
register_reader(("convolution", "_convolution"), _conv_reader(3, 4, 5, transposed_at=6))
register_reader(("mkldnn_convolution",), _conv_reader(4, 3, 5))
register_reader(("cudnn_convolution",), _conv_reader(3, 2, 4, bias=False))
register_reader(("convolution_backward",), _conv_backward)
register_reader(("cudnn_convolution_backward_input",), _cudnn_conv_backward("input"))
register_reader(("cudnn_convolution_backward_weight",), _cudnn_conv_backward("weight"))
register_reader(("batch_norm", "_batch_norm_impl_index", "native_batch_norm", "cudnn_batch_norm",
                 "miopen_batch_norm"), _batch_norm(5))
register_reader(("_native_batch_norm_legit_no_training",), _batch_norm(None))
register_reader(("native_batch_norm_backward",), _batch_norm_backward)
register_reader(("cudnn_batch_norm_backward", "miopen_batch_norm_backward"), _cudnn_batch_norm_backward)
register_reader(("max_pool2d",), _pool("max", False))
register_reader(("max_pool2d_with_indices",), _pool("max", True))
register_reader(("avg_pool2d",), _pool("avg", False))
register_reader(("max_pool2d_with_indices_backward",), _pool_backward("max"))
register_reader(("avg_pool2d_backward",), _pool_backward("avg"))
register_reader(("adaptive_avg_pool2d", "_adaptive_avg_pool2d"), _adaptive_avg_pool)
# is_causal: upper-left on the composite op (PyTorch docs: causal_upper_left "is equivalent to the is_causal=True
# argument in scaled_dot_product_attention"), the CPU flash kernel (checked against torch's masks in the tests),
# the memory-efficient kernel (is_causal -> CausalFromTopLeft) and cuDNN (its set_causal_mask, top-left); lower-right
# on the CUDA flash kernel, FlashAttention 2's (torch.nn.attention.bias: "for this particular op it means lower
# right"; torch's dispatcher never sends it a non-square is_causal, CausalBias's lower-right dispatch does)
register_reader(("scaled_dot_product_attention",), _attention_reader(0, 5, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention",), _attention_reader(0, 4, False, LOWER_RIGHT))
register_reader(("_scaled_dot_product_flash_attention_for_cpu",), _attention_reader(0, 4, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"),
                _attention_reader(0, 6, False, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention_for_cpu_backward",), _attention_reader(1, 7, True, UPPER_LEFT))
register_reader(("_scaled_dot_product_flash_attention_backward",), _attention_reader(1, 11, True, LOWER_RIGHT))
register_reader(("_scaled_dot_product_efficient_attention_backward",), _attention_reader(1, 11, True, UPPER_LEFT))
register_reader(("layer_norm", "native_layer_norm"), _layer_norm)
register_reader(("native_layer_norm_backward",), _layer_norm_backward)
register_reader(("rms_norm", "_fused_rms_norm"), _rms_norm)
register_reader(("softmax", "_softmax", "log_softmax", "_log_softmax"), _softmax)
register_reader(("_softmax_backward_data",), _softmax_backward(False))
register_reader(("_log_softmax_backward_data",), _softmax_backward(True))
register_reader(("embedding",), _embedding)
register_reader(("embedding_dense_backward", "embedding_backward"), _embedding_backward)

