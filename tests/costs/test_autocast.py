"""Autocast: an op torch.autocast re-dispatched at another dtype is costed at the dtype it ran in.

Under `torch.autocast`, aten::linear is recorded twice: the outer call with the inputs as given (fp32), which
casts them (aten::to -> aten::_to_copy -> aten::copy_) and calls aten::linear again on the bf16 copies, which
calls aten::addmm. The work ran in bf16 (the inner call); the casts are copies of their own
(nsroof.costs.op_table.OpTable.redispatched, nsroof.costs.attribution)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nsroof.costs.attribution import REDISPATCH_REASON, attribute
from nsroof.costs.costing import costed
from nsroof.costs.ledger.aten import COMPOSITE_REASON
from tests.costs.test_attribution import _kernel, _launch, _read, _x

BF16, FLOAT = "c10::BFloat16", "float"
# linear(x[8, 16], W[32, 16], b[32]): tokens 8, 16 -> 32 features
X, W, B = [8, 16], [32, 16], [32]
# linear = gemm-bias(m=8, n=32, k=16): 2·8·32·16 + 8·32 = 8,448 FLOP; in bf16 2·(8·16 + 32·16 + 32 + 8·32) =
# 2·928 = 1,856 bytes (in fp32 twice that)
FLOPS, BF16_BYTES = 8448, 1856
GEMM_KERNEL = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel"
COPY_KERNEL = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
               "at::TensorIteratorBase&)::{lambda()#3}, at::detail::Array<char*, 2> >(int, float)")


def _cast(shape: list[int], ts: float, ext: int, *, gpu: bool) -> list[dict[str, Any]]:
    """aten::to -> aten::_to_copy -> aten::copy_ (bf16 <- fp32), 10 µs; on a GPU the copy launches a
    kernel."""
    scalars = [[]] * 4
    events = [
        _x("cpu_op", "aten::to", ts, 10.0, **{"External id": ext, "Input Dims": [shape, *scalars],
                                             "Input type": [FLOAT, "Scalar", "Scalar", "Scalar", ""]}),
        _x("cpu_op", "aten::_to_copy", ts + 0.5, 9.0, **{
            "External id": ext + 1, "Input Dims": [shape, *scalars, [], []],
            "Input type": [FLOAT, "Scalar", "", "", "", "Scalar", ""],
            "Concrete Inputs": ["", "15", "", "", "", "False", ""]}),
        _x("cpu_op", "aten::copy_", ts + 1.0, 8.0, **{
            "External id": ext + 2, "Input Dims": [shape, shape, []], "Input type": [BF16, FLOAT, "Scalar"]}),
    ]
    if gpu:
        events += [_launch(ts + 2.0, 500 + ext, ext + 2), _kernel(COPY_KERNEL, 300.0 + ext, 3.0, 500 + ext)]
    return events


def _autocast_linear(*, gpu: bool, inner: bool = True) -> list[dict[str, Any]]:
    """The outer aten::linear (fp32, 100 µs), its three casts (10 µs each), the inner aten::linear (bf16,
    60 µs) with aten::t and aten::addmm (bf16, 50 µs; on a GPU it launches the GEMM kernel); `inner`: False
    leaves the inner aten::linear out (aten::addmm right under the outer call)."""
    events = [_x("cpu_op", "aten::linear", 100.0, 100.0, **{"External id": 1, "Input Dims": [X, W, B],
                                                          "Input type": [FLOAT] * 3})]
    for k, shape in enumerate((B, W, X)):
        events += _cast(shape, 101.0 + 11 * k, 10 + 10 * k, gpu=gpu)
    events += [
        *([_x("cpu_op", "aten::linear", 135.0, 60.0, **{"External id": 2, "Input Dims": [X, W, B],
                                                       "Input type": [BF16] * 3})] if inner else []),
        _x("cpu_op", "aten::t", 136.0, 2.0, **{"External id": 3, "Input Dims": [W], "Input type": [BF16]}),
        _x("cpu_op", "aten::addmm", 140.0, 50.0, **{"External id": 4, "Input Dims": [B, X, W[::-1], [], []],
                                                   "Input type": [BF16] * 3 + ["Scalar"] * 2}),
    ]
    if gpu:
        events += [_launch(141.0, 900, 4), _kernel(GEMM_KERNEL, 400.0, 20.0, 900)]
    return events


def test_a_cpu_trace_costs_the_linear_autocast_ran_in_bf16_and_each_cast_on_its_own_row(
        tmp_path: Path) -> None:
    kernels, facts = _read(tmp_path, _autocast_linear(gpu=False))
    c = costed(kernels, facts.ops)
    rows = c.kernels.assign(source=c.quantities["flops_source"].to_numpy(),
                            missing=c.quantities["missing_flops"].to_numpy(),
                            seconds=c.quantities["duration_s"].to_numpy())
    names = rows["op"].tolist()
    # the outer linear's own time, the three casts (aten::to's own time, then _to_copy with its copy_), and
    # the inner linear with its t and addmm folded in
    assert names == ["aten::linear", *["aten::to", "aten::_to_copy"] * 3, "aten::linear"]
    outer, inner = rows.iloc[0], rows.iloc[-1]
    assert outer["missing"] == REDISPATCH_REASON and np.isnan(c.quantities["flops"].iloc[0])
    assert outer["seconds"] == pytest.approx(100e-6 - 3 * 10e-6 - 60e-6)  # its own 10 µs
    assert inner["source"] == ("analytic:linear(tokens=8, in_features=16, out_features=32, bias=True, "
                               "dtype=bf16)")
    assert inner["seconds"] == pytest.approx(60e-6)
    q = c.quantities.iloc[-1]
    assert (q["flops"], q["flops_tensor"], q["bytes_dram"], q["tensor_dtype"]) == (FLOPS, FLOPS, BF16_BYTES,
                                                                                     "bf16")
    casts = c.quantities[rows["op"].eq("aten::_to_copy").to_numpy()]
    assert casts["duration_s"].tolist() == pytest.approx([9e-6] * 3)  # each with its copy_
    # a copy's bytes: fp32 read, bf16 written (6 bytes per element); no FLOPs
    assert casts["bytes_dram"].tolist() == [6 * 32, 6 * 32 * 16, 6 * 8 * 16]
    assert (casts["flops"] == 0).all()
    assert (rows.loc[rows["op"].eq("aten::to"), "missing"] == COMPOSITE_REASON).all()
    # the op level: addmm at bf16 with its own time, and the casts' copies; the outer linear nowhere
    ops = c.op_kernels.assign(source=c.op_quantities["flops_source"].to_numpy())
    assert ops.loc[ops["op"].eq("aten::addmm"), "source"].tolist() == [
        "analytic:gemm-bias(m=8, n=32, k=16, bias_elements=32, dtype=bf16)"]
    assert sorted(ops["op"]) == ["aten::addmm", *["aten::copy_"] * 3]
    assert c.quantities["flops"].sum() == c.op_quantities["flops"].sum() == FLOPS


@pytest.mark.parametrize("inner", [True, False])
def test_a_gpu_trace_costs_the_gemm_kernel_and_the_op_in_bf16_and_the_cast_kernels_as_copies(
        tmp_path: Path, inner: bool) -> None:
    kernels, facts = _read(tmp_path, _autocast_linear(gpu=True, inner=inner))
    a = attribute(kernels, facts.ops)
    rows = kernels[["kernel_name", "op"]].join(a.analytic)
    gemm = rows[rows["kernel_name"].eq(GEMM_KERNEL)].iloc[0]
    assert gemm["op"] == "aten::addmm"
    assert (gemm["analytic_precision"], gemm["analytic_tensor_dtype"]) == ("tensor", "bf16")
    assert gemm["analytic_label"] == "gemm-bias(m=8, n=32, k=16, bias_elements=32, dtype=bf16)"
    copies = rows[rows["kernel_name"].eq(COPY_KERNEL)]
    assert len(copies) == 3 and set(copies["op"]) == {"aten::copy_"}
    assert copies["analytic_flops"].tolist() == [0, 0, 0]
    assert copies["analytic_bytes"].tolist() == [6 * 32, 6 * 32 * 16, 6 * 8 * 16]
    ops = a.op_kernels[["op"]].join(a.op_analytic)
    assert sorted(ops["op"]) == ["aten::addmm", *["aten::copy_"] * 3]  # no fp32 linear at the op level
    addmm = ops[ops["op"].eq("aten::addmm")].iloc[0]
    assert (addmm["analytic_tensor_dtype"], addmm["analytic_flops"]) == ("bf16", FLOPS)


def test_a_bf16_autocast_training_step_is_judged_in_bf16_with_the_flops_flop_counter_mode_counts(
        tmp_path: Path, one_thread: None) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    from nsroof.pipeline import analyze
    from nsroof.roofs.machines import Machine

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LayerNorm(32), torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 32))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(4, 8, 32)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()

    step()
    with FlopCounterMode(display=False) as counter:
        step()
    counted = {str(op).removeprefix("aten."): n for op, n in counter.get_flop_counts()["Global"].items()}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    trace = tmp_path / "autocast.json"
    prof.export_chrome_trace(str(trace))
    machine = Machine(name="test-cpu", source="file", peak_flop_per_s={"fp32": 1e11, "bf16": 8e11},
                      bandwidth_bytes_per_s={"dram": 1e10})
    report = analyze([trace], machine=machine)
    rows, ops = report.frame, report.ops
    formula = rows["flops_source"].astype(str).str.extract(r"^analytic:([a-z0-9-]+)\(")[0]
    linears = rows[rows["op"].astype(str).eq("aten::linear") & rows["flops"].notna()]
    # each linear once, at the dtype it ran in, against the bf16 roof; its outer fp32 call keeps its own time
    assert len(linears) == 2
    assert linears["flops_source"].str.endswith("dtype=bf16)").all()
    assert (linears["precision"] == "tensor").all() and (linears["peak_flop_per_s"] == 8e11).all()
    outer = rows[rows["missing"].astype(str).eq(REDISPATCH_REASON)]
    assert list(outer["op"].astype(str)) == ["aten::linear"] * 2
    # the casts autocast inserted (fp32 -> bf16: x, the weight and the bias of each linear), rows of their own
    casts = rows[rows["flops_source"].astype(str).str.contains("op=convert fp32 -> bf16")]
    assert len(casts) >= 5 and set(casts["op"].astype(str)) == {"aten::_to_copy"}
    # the FLOPs FlopCounterMode counts: mm as mm; addmm plus the m·n bias adds it leaves out (8·32 tokens:
    # 32·(64 + 32) outputs)
    by_formula = rows.groupby(formula)["flops"].sum()
    assert by_formula["gemm"] == counted["mm"]
    assert by_formula["linear"] == counted["addmm"] + 32 * (64 + 32)
    op_formula = ops["flops_source"].astype(str).str.extract(r"^analytic:([a-z0-9-]+)\(")[0]
    assert ops.groupby(op_formula)["flops"].sum()["gemm-bias"] == by_formula["linear"]
    gemms = ops[op_formula.isin(["gemm", "gemm-bias"])]
    assert gemms["flops_source"].str.endswith("dtype=bf16)").all() and (gemms["precision"] == "tensor").all()
