"""aten readers of the normalizations, forward and backward (formulas: nsroof.costs.ledger.norm): layer,
RMS and batch norm (cuDNN's and MIOpen's too), group norm (layernorm over each sample's group) and
instance norm (batch norm over each sample's channels)."""

from __future__ import annotations

from typing import Any

from nsroof.costs.ledger.aten.args import (
    Reader,
    Shape,
    arg,
    ledger_op,
    need,
    need_dtype,
    numel,
    recorded,
    register_reader,
)
from nsroof.costs.ledger.core import Cost, Term, dtype_bytes


def _batch_norm(training_at: int | None) -> Reader:
    """batch_norm / _batch_norm_impl_index / native_batch_norm / cudnn_batch_norm / miopen_batch_norm
    (input, weight, bias, running_mean, running_var, training, …); training_at None: always evaluation
    (_native_batch_norm_legit_no_training)."""

    def read(s: list[Shape], t: list[str], c: list[Any]) -> Any:
        n, channels, spatial = _nc_spatial(s)
        training = (False if training_at is None
                    else recorded(c, training_at, "batch norm training flag not recorded"))
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
    return ledger_op("batchnorm-backward", batch=n, channels=channels, spatial=spatial,
                     dtype=need_dtype(t, 0), training=bool(training), input_grad=bool(mask[0]),
                     affine_grad=bool(mask[1] or mask[2]))


def _cudnn_batch_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    # epsilon, reserveSpace): training mode, all three gradients
    n, channels, spatial = _nc_spatial(s, 0)
    return ledger_op("batchnorm-backward", batch=n, channels=channels, spatial=spatial,
                     dtype=need_dtype(t, 0), training=True)


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


def _group_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_group_norm(input, weight, bias, N, C, HxW, group, eps): layernorm over each (sample, group)
    need(len(s) >= 1 and len(s[0]) >= 2, "group_norm needs the input shape")
    n, ch, hw, groups = (int(recorded(c, i, "group_norm sizes not recorded")) for i in (3, 4, 5, 6))
    dt = need_dtype(t, 0)
    op = ledger_op("layernorm", rows=n * groups, hidden=ch // groups * hw, dtype=dt, affine=False)
    affine = len(s) > 2 and len(s[1]) == 1
    extra = Cost((Term("read γ, β", bytes=2 * ch * dtype_bytes(dt)),
                  Term("γ·x̂ + β", flops=2.0 * n * ch * hw)))
    from dataclasses import replace

    return replace(op, formula="groupnorm", cost=op.cost + extra if affine else op.cost,
                   shape={"rows": n * groups, "hidden": ch // groups * hw, "groups": groups})


def _group_norm_backward(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask)
    n, ch, hw, groups = (int(recorded(c, i, "group_norm sizes not recorded")) for i in (5, 6, 7, 8))
    dt = need_dtype(t, 0)
    op = ledger_op("layernorm-backward", rows=n * groups, hidden=ch // groups * hw, dtype=dt, affine=False)
    extra = Cost((Term("read γ, write dγ, dβ", bytes=3 * ch * dtype_bytes(dt)),
                  Term("dγ, dβ", flops=3.0 * n * ch * hw)))
    from dataclasses import replace

    return replace(op, formula="groupnorm-backward", cost=op.cost + extra)


def _instance_norm(s: list[Shape], t: list[str], c: list[Any]) -> Any:
    # instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn):
    # batch norm over N·C channels of one sample each
    need(len(s) >= 1 and len(s[0]) >= 3, "instance_norm needs an (N, C, …) input")
    x = s[0]
    training = bool(recorded(c, 5, "instance_norm use_input_stats not recorded"))
    return ledger_op("batchnorm", batch=1, channels=x[0] * x[1], spatial=numel(x[2:]), dtype=need_dtype(t, 0),
                     training=training, affine=len(s) > 1 and len(s[1]) == 1)


register_reader(("batch_norm", "_batch_norm_impl_index", "native_batch_norm", "cudnn_batch_norm",
                 "miopen_batch_norm"), _batch_norm(5))
register_reader(("_native_batch_norm_legit_no_training",), _batch_norm(None))
register_reader(("native_batch_norm_backward",), _batch_norm_backward)
register_reader(("cudnn_batch_norm_backward", "miopen_batch_norm_backward"), _cudnn_batch_norm_backward)
register_reader(("layer_norm", "native_layer_norm"), _layer_norm)
register_reader(("native_layer_norm_backward",), _layer_norm_backward)
register_reader(("rms_norm", "_fused_rms_norm"), _rms_norm)
register_reader(("native_group_norm",), _group_norm)
register_reader(("native_group_norm_backward",), _group_norm_backward)
register_reader(("instance_norm",), _instance_norm)
