"""aten op -> ledger cost (nsroof.costs.ledger.aten.op_cost) as a whole: the reason an op has no cost, one
reader per op, and costs only from recorded arguments, on a real profiler trace and the shared traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nsroof.costs.ledger.aten import NO_SHAPES, READERS, op_cost, register_reader
from nsroof.errors import NsroofError
from tests._paths import SHARED_FIXTURES
from tests._shared_inputs import trace_events


def test_no_input_shapes_is_its_own_reason_for_every_aten_op() -> None:
    for op in ("aten::cudnn_convolution", "aten::mm", "aten::nonzero"):
        assert (op_cost(op, None, None).missing == NO_SHAPES
                == "no input shapes recorded (profile with record_shapes=True)")
    # shapes recorded, no formula: the other reason
    assert op_cost("aten::nonzero", [[10]], ["float"]).missing == "no formula for aten::nonzero"


def test_an_aten_op_cannot_get_two_readers() -> None:
    with pytest.raises(NsroofError, match="already has a shape reader"):
        register_reader(("mm",), READERS["bmm"])
    assert READERS["mm"].__name__ == "_mm"


def test_uncosted_rows_name_their_real_cause() -> None:
    from nsroof.costs.ledger.aten import BOOKKEEPING_REASON, VIEW_REASON

    assert op_cost("aten::transpose", [[4, 4], [], []], ["float", "Scalar", "Scalar"],
                   [None, 0, 1]).missing == VIEW_REASON
    assert op_cost("detach", [[4]], ["float"]).missing == VIEW_REASON
    wrapper = "autograd::engine::evaluate_function: AddmmBackward0"
    assert op_cost(wrapper, [], []).missing == op_cost("MmBackward0", [], []).missing == BOOKKEEPING_REASON
    assert "@nsroof.formula(\"mylib::op\")" in op_cost("mylib::op.default", [[4]], ["float"]).missing
    from nsroof.costs.ledger.aten import INDUCTOR_CPU_REASON

    # the names torch 2.13's Inductor gives its C++ kernels under cpp.enable_kernel_profile
    for name in ("graph_0_cpp_fused_gelu_0",
                 "graph_3_cpp_fused_native_layer_norm_native_layer_norm_backward_0", "cpp_fused_relu_1"):
        assert op_cost(name, [], []).missing == INDUCTOR_CPU_REASON, name
    # no kernel name after the prefix
    assert op_cost("graph_0_cpp_fused", [], []).missing != INDUCTOR_CPU_REASON
    from nsroof.costs.ledger.aten import COMPILED_WRAPPER_REASON

    # torch.compile's wrappers: overhead around the compiled regions, their kernels costed on their own rows
    for name in ("CompiledFunction", "CompiledFunctionBackward", "TorchDynamo Cache Lookup",
                 "Torch-Compiled Region: 0/1", "Pregraph bytecode", "AOTDispatcher Runtime Wrapper Prologue",
                 "autograd::engine::evaluate_function: CompiledFunctionBackward"):
        assert op_cost(name, [], []).missing == COMPILED_WRAPPER_REASON, name


def test_a_real_profiler_trace_is_costed_from_its_recorded_arguments(tmp_path: Path) -> None:
    """torch.profiler(record_shapes=True) on a small CNN: every conv, norm and pool op of the chrome trace
    gets a cost from its Concrete Inputs, equal to the cost from the live events."""
    torch = pytest.importorskip("torch")
    from torch.profiler import profile

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, stride=2, padding=3), torch.nn.BatchNorm2d(8),
                              torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1), torch.nn.AvgPool2d(2))
    x = torch.randn(2, 3, 32, 32, requires_grad=True)
    with profile(record_shapes=True) as prof:
        net(x).sum().backward()
    path = tmp_path / "cnn.json"
    prof.export_chrome_trace(str(path))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"]
    wanted = ("aten::conv2d", "aten::convolution_backward", "aten::native_batch_norm",
              "aten::native_batch_norm_backward", "aten::max_pool2d_with_indices",
              "aten::max_pool2d_with_indices_backward", "aten::avg_pool2d", "aten::avg_pool2d_backward")
    from_trace = {}
    for e in events:
        if e["name"] in wanted:
            a = e["args"]
            from_trace[e["name"]] = op_cost(e["name"], a["Input Dims"], a["Input type"], a["Concrete Inputs"])
    assert set(from_trace) == set(wanted)
    assert all(c.known for c in from_trace.values()), {k: c.missing for k, c in from_trace.items()}
    # conv 7×7/2 pad 3: 16×16 out, 2·2·8·256·3·49 = 1,204,224 + bias 2·8·256 = 4,096
    assert from_trace["aten::conv2d"].flops == 1_204_224 + 4_096
    live = {e.name: op_cost(e.name, e.input_shapes, e.input_dtypes, e.concrete_inputs)
            for e in prof.events() if e.name == "aten::conv2d"}
    assert live["aten::conv2d"].flops == from_trace["aten::conv2d"].flops


def _traces() -> list[Path]:
    folder = SHARED_FIXTURES / "traces"
    return sorted(folder.glob("*.json*")) if folder.is_dir() else []


@pytest.mark.skipif(not _traces(), reason="shared fixtures not present")
def test_no_shared_trace_op_is_costed_from_an_assumed_argument() -> None:
    """Every costed op of the real traces: recomputed with its recorded scalar arguments removed, it must
    either keep its cost (the formula needs only shapes) or become NaN — never a cost from a default."""
    costed = 0
    for path in _traces():
        for e in trace_events(path):  # the JSON's events, decoded once per process
            if e.get("cat") not in ("cpu_op", "Operator"):
                continue
            a = e.get("args") or {}
            cost = op_cost(str(e.get("name", "")), a.get("Input Dims"), a.get("Input type"),
                           a.get("Concrete Inputs"))
            if not cost.known:
                continue
            costed += 1
            bare = op_cost(str(e.get("name", "")), a.get("Input Dims"), a.get("Input type"), None)
            assert not bare.known or (bare.flops, bare.bytes) == (cost.flops, cost.bytes), e["name"]
    assert costed > 0


def test_a_call_recorded_without_dtypes_gets_its_flops_from_the_shapes_and_no_bytes() -> None:
    """emit_nvtx ranges (and a trace recorded without types) give sizes alone: a matmul's or an elementwise
    op's FLOPs follow from them, its bytes and its compute roof need the dtype, named as the missing fact."""
    from nsroof.costs.ledger.aten import DTYPE_UNRECORDED

    mm = op_cost("aten::mm", [[64, 128], [128, 256]], None)
    # 2·m·n·k = 2·64·256·128 = 4,194,304
    assert mm.flops == 4_194_304 and math.isnan(mm.bytes) and mm.known
    assert (mm.missing, mm.precision, mm.roof_kind) == (DTYPE_UNRECORDED, "", "matmul")
    assert "dtype" in mm.missing and mm.label == "gemm(m=64, n=256, k=128, dtype=not recorded)"
    # add(x, y, alpha): the [] of the scalar alpha is no tensor; 1 FLOP per output, 8·16 = 128
    add = op_cost("aten::add", [[8, 16], [8, 16], []], [])
    assert add.flops == 128 and math.isnan(add.bytes) and add.missing == DTYPE_UNRECORDED
    # recorded dtypes price it whole, as before
    assert op_cost("aten::mm", [[64, 128], [128, 256]], ["float", "float"]).bytes == 4 * (
        64 * 128 + 128 * 256 + 64 * 256)
    # a shape the formula cannot read keeps its own reason
    assert op_cost("aten::mm", [[64, 128], [64, 256]], None).missing == (
        "aten::mm: mm inner dimensions differ (128 vs 64)")


def test_flops_that_depend_on_the_dtype_stay_nan_without_one() -> None:
    from nsroof.costs.ledger.custom import Tensor, Term, formula, unregister

    @formula("mylib::per_byte", source="one FLOP per byte (a formula whose FLOPs follow the dtype)")
    def per_byte(x: Tensor) -> list[Term]:
        return [Term("work", flops=x.nbytes, bytes=x.nbytes)]

    try:
        assert op_cost("mylib::per_byte", [[4, 8]], ["float"]).flops == 4 * 32
        unpriced = op_cost("mylib::per_byte", [[4, 8]], None)
        assert math.isnan(unpriced.flops) and not unpriced.known
        assert unpriced.missing == "mylib::per_byte: tensor argument x (#0) not recorded"
    finally:
        unregister("mylib::per_byte")


def test_with_dtype_prices_a_call_at_a_dtype_read_elsewhere() -> None:
    from nsroof.costs.ledger.aten import with_dtype

    cost = with_dtype("aten::addmm", [[256], [64, 128], [128, 256], [], []], "fp16",
                      how="dtype from kernel name")
    # gemm-bias(64, 256, 128) at 2 B: 2·(64·128 + 128·256 + 64·256 + 256) = 2·57,600 = 115,200 B;
    # 2·64·256·128 + 64·256 = 4,210,688 FLOP, under the fp16 tensor roof
    assert (cost.flops, cost.bytes) == (4_210_688, 115_200)
    assert (cost.precision, cost.tensor_dtype) == ("tensor", "fp16")
    assert cost.label.endswith("dtype=fp16) [dtype from kernel name]") and not cost.missing
