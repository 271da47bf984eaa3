"""nsroof.profile on CPU: one row per op call, exact analytic costs, module and range attribution, steps.

The machine is passed explicitly (no measurement in tests): 100 GFLOP/s fp32, 10 GB/s DRAM, ridge 10 FLOP/B.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from nsroof.costs.ledger.aten import op_cost
from nsroof.roofs.machines import Machine
from nsroof.schema import COLUMNS

torch = pytest.importorskip("torch")

from nsroof.collectors.torch_profile import coverage, profile, render_summary  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

MACHINE = Machine(
    name="test-cpu", source="file", peak_flop_per_s={"fp32": 1e11, "fp64": 5e10},
    simt_flop_per_s={"fp32": 1e11, "fp64": 5e10}, bandwidth_bytes_per_s={"dram": 1e10},
)

# torch.mm of (512×1024)·(1024×256) in fp32
MM_FLOPS = 2 * 512 * 1024 * 256  # = 268,435,456
MM_BYTES = 4 * (512 * 1024 + 1024 * 256 + 512 * 256)  # = 4·(524,288 + 262,144 + 131,072) = 3,670,016


def test_matmul_gives_exact_costs_one_row_per_call() -> None:
    a, b = torch.randn(512, 1024), torch.randn(1024, 256)
    with profile(machine=MACHINE) as prof:
        torch.mm(a, b)
        torch.mm(a, b)
    r = prof.report
    assert list(r.columns) == COLUMNS
    mm = r[r["op"] == "aten::mm"]
    assert len(mm) == 2
    assert (mm["flops"] == MM_FLOPS).all() and (mm["flops_fp32"] == MM_FLOPS).all()
    assert (mm["bytes"] == MM_BYTES).all()
    assert set(mm["bytes_source"]) == {"analytic:gemm"}
    assert set(mm["flops_source"]) == {"analytic:gemm(m=512, n=256, k=1024, dtype=fp32)"}
    # the report is built from the saved chrome trace: its rows name it as their source
    assert set(mm["source"]) == {prof.result.trace.name} and set(mm["level"]) == {"dram"}
    assert set(mm["input_shapes"]) == {"[[512, 1024], [1024, 256]]"}
    # intensity = 268,435,456 / 3,670,016 = 73.14 FLOP/B > ridge 1e11 / 1e10 = 10 -> compute-bound
    assert mm["intensity"].iloc[0] == pytest.approx(MM_FLOPS / MM_BYTES)
    assert set(mm["bound"]) == {"compute"}
    # the floor is the compute time: 268,435,456 / 1e11 = 2.684 ms
    assert mm["time_floor_s"].iloc[0] == pytest.approx(MM_FLOPS / 1e11)
    assert (mm["duration_s"] > 0).all()
    assert set(mm["ceiling_source"]) == {"file:test-cpu"}
    assert (mm["headroom"] == mm["duration_s"] / mm["ideal_time_s"]).all()


def test_an_op_with_a_cost_absorbs_its_children_and_time_is_counted_once() -> None:
    lin = torch.nn.Linear(64, 32)
    x = torch.randn(8, 64)
    with profile(machine=MACHINE, modules=False) as prof:
        lin(x)
    r = prof.report
    assert list(r["op"]) == ["aten::linear"]  # aten::t and aten::addmm are folded into it
    # linear(tokens=8, in=64, out=32, bias): 2·8·64·32 + 8·32 = 33,024 FLOP;
    # 4·(32·64 + 8·64 + 8·32 + 32) = 4·2,848 = 11,392 bytes
    assert r["flops"].iloc[0] == 2 * 8 * 64 * 32 + 8 * 32
    assert r["bytes"].iloc[0] == 4 * (32 * 64 + 8 * 64 + 8 * 32 + 32)
    assert r["duration_source"].iloc[0] == "cpu_op dur"  # the trace event's whole dur, children included


def test_ops_without_a_formula_are_nan_and_say_why() -> None:
    with profile(machine=MACHINE) as prof:
        torch.randperm(100)
    r = prof.report
    row = r[r["op"] == "aten::randperm"].iloc[0]
    assert math.isnan(row["flops"]) and math.isnan(row["bytes"])
    assert "no formula for aten::randperm" in row["missing"]
    assert row["bound"] == "unknown"
    assert coverage(r) == 0.0


def test_rows_carry_module_and_range_paths_forward_and_backward() -> None:
    import nsroof

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    with profile(machine=MACHINE) as prof:
        with nsroof.annotate("train step"):
            model(x).sum().backward()
    r = prof.report
    gelu = r[r["op"] == "aten::gelu"].iloc[0]
    assert gelu["module"] == "Sequential.1"
    assert gelu["nvtx_path"] == "train step/Sequential/Sequential.1"
    # gelu(n=256): read 256, write 256 fp32 = 2,048 bytes; 5 FLOP per element = 1,280 FLOP
    assert (gelu["flops"], gelu["bytes"]) == (5 * 8 * 32, 4 * 2 * 8 * 32)
    backward = r[r["op"] == "aten::gelu_backward"].iloc[0]
    assert backward["module"] == "Sequential.1"
    assert backward["nvtx_path"].endswith("Sequential (backward)/Sequential.1 (backward)")
    mm_modules = set(r.loc[r["op"] == "aten::mm", "module"])
    assert mm_modules <= {"Sequential.0", "Sequential.2"} and mm_modules


def test_steps_and_warmup_keep_only_the_selected_optimizer_steps() -> None:
    w = torch.nn.Parameter(torch.randn(8, 8))
    opt = torch.optim.SGD([w], lr=0.1)
    with profile(machine=MACHINE, warmup=1, steps=2) as prof:
        for size in (3, 5, 7, 9):
            # each step has its own matmul shape, so the kept rows tell which steps were recorded
            (torch.randn(size, 8) @ w).sum().backward()
            opt.step()
            opt.zero_grad()
    shapes = set(prof.report.loc[prof.report["op"] == "aten::matmul", "input_shapes"])
    assert shapes == {"[[5, 8], [8, 8]]", "[[7, 8], [8, 8]]"}
    assert prof.result is not None and prof.result.step_source == "optimizer steps"


def test_nsroof_step_marks_take_precedence_over_optimizer_steps() -> None:
    import nsroof

    with profile(machine=MACHINE, warmup=2, steps=1) as prof:
        for size in (2, 4, 6):
            torch.ones(size) * 2
            nsroof.step()
    assert set(prof.report.loc[prof.report["op"] == "aten::mul", "input_shapes"]) == {"[[6], []]"}
    assert prof.result is not None and prof.result.step_source == "nsroof steps"


def test_warmup_past_the_last_step_is_a_clear_error() -> None:
    from nsroof.errors import NsroofError

    with pytest.raises(NsroofError, match=r"no ops recorded in steps 6\.\.6"):
        with profile(machine=MACHINE, warmup=5, steps=1):
            torch.ones(3) + 1


def test_summary_names_top_ops_bounds_and_coverage() -> None:
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    with profile(machine=MACHINE) as prof:
        torch.mm(a, b)
        torch.randperm(10)
    text = render_summary(prof.result)
    assert "aten::mm" in text and "compute" in text
    assert "Coverage:" in text and "no formula for aten::randperm" in text
    cov = coverage(prof.report)
    assert 0 < cov < 1
    # the first screen is analyze's: the category table comes before the op table, its shares summing to
    # the run (one mm, the randperm and the profiler's own rows: 100% between them)
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("Time by category")))
    assert start < lines.index(next(line for line in lines if line.startswith("Top ")))
    shares = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        shares.append(float(next(c for c in line.split() if c.endswith("%") and c[0].isdigit()).rstrip("%")))
    assert any(line.startswith("  GEMM ") for line in lines[start:start + 2 + len(shares)])
    assert sum(shares) == pytest.approx(100, abs=0.1 * len(shares))


def test_an_mm_above_a_low_cpu_peak_is_blamed_on_the_cache_or_the_peak_not_the_flops() -> None:
    """Issue "Numbers a user can trust": a low measured CPU peak put aten::mm at 233 % of its roof and the
    summary blamed the (exact) FLOP count. Against a measured CPU profile whose peak is far too low
    (1 GFLOP/s: any mm beats it), the cause names the cache its working set fits, L3 here."""
    low = Machine(name="Xeon, 1 threads", source="measured", peak_flop_per_s={"fp32": 1e9},
                  bandwidth_bytes_per_s={"dram": 1e10}, environment={"device": "cpu"},
                  cache_bytes={"l2": 2 * 2**20, "l3": 480 * 2**20})
    a, b = torch.randn(512, 1024), torch.randn(1024, 256)
    with profile(machine=low) as prof:
        torch.mm(a, b)
    mm = prof.report[prof.report["op"].astype(str) == "aten::mm"].iloc[0]
    assert mm["bytes"] == MM_BYTES and bool(mm["above_roof"])  # 268 MFLOP in well under 268 ms
    # MM_BYTES = 3,670,016 bytes = 3.67 MB: above the 2 MiB L2, inside the 480 MiB = 503 MB L3
    assert str(mm["above_roof_cause"]).startswith("working set 3.67 MB fits the CPU's L3 (503 MB): "
                                                  "cache-resident operands can beat a peak timed")
    text = render_summary(prof.result)
    assert "  - aten::mm (1 rows, " in text and "working set 3.67 MB fits the CPU's L3" in text
    assert "FLOPs counted above what ran" not in text


# --------------------------------------------------------------------------- op_costs: golden numbers


@pytest.mark.parametrize(
    ("op", "shapes", "dtypes", "concrete", "flops", "nbytes"),
    [
        # addmm(bias[64], [16,32]·[32,64]): 2·16·32·64 + 16·64 = 66,560;
        # 4·(16·32 + 32·64 + 16·64 + 64) = 14,592
        ("aten::addmm", [[64], [16, 32], [32, 64], [], []], ["float"] * 3 + ["Scalar"] * 2, None,
         2 * 16 * 32 * 64 + 16 * 64, 4 * (16 * 32 + 32 * 64 + 16 * 64 + 64)),
        # bmm 4×[8,16]·[16,2] in bf16: 2·4·8·16·2 = 2,048; 2·4·(8·16 + 16·2 + 8·2) = 1,408
        ("aten::bmm", [[4, 8, 16], [4, 16, 2]], ["c10::BFloat16"] * 2, None, 2 * 4 * 8 * 16 * 2,
         2 * 4 * (128 + 32 + 16)),
        # matmul [2,3,8]·[8,5] folds the batch into m = 6: 2·6·8·5 = 480; 4·(6·8 + 8·5 + 6·5) = 472
        ("aten::matmul", [[2, 3, 8], [8, 5]], ["float"] * 2, None, 480, 4 * (48 + 40 + 30)),
        # causal SDPA b=2, h=4, s=16, d=8: scores = 16·17/2 = 136 per head; QK^T+PV 4·8·136·8 = 34,816,
        # softmax 5·8·136 + 8·16·8 = 6,464 -> 41,280; bytes 4·4·(8·16·8) = 16,384
        ("aten::scaled_dot_product_attention", [[2, 4, 16, 8]] * 3 + [[]] * 5, ["float"] * 3 + [""] * 5,
         [None, None, None, None, 0.0, True, None, False], 41280, 16384),
        # layer_norm rows = 4·16 = 64, hidden 32, affine: FLOPs 8·2048 + 4·64 = 16,640;
        # bytes 4·(2·2048 + 2·32)
        ("aten::layer_norm", [[4, 16, 32], [], [32], [32], [], []],
         ["float", "ScalarList", "float", "float", "Scalar", "Scalar"],
         [None, [32], None, None, 1e-5, True], 8 * 2048 + 4 * 64, 4 * (2 * 2048 + 2 * 32)),
        # softmax over the last dim of [64, 100]: 5·6,400 = 32,000 FLOP; 4·2·6,400 = 51,200 bytes
        ("aten::_softmax", [[64, 100], [], []], ["float", "Scalar", "Scalar"], [None, -1, False], 32000,
         51200),
        # embedding 64 tokens of a [100, 32] fp32 table: 0 FLOP; 8·64 + 4·64·32 + 4·64·32 = 16,896 bytes
        ("aten::embedding", [[100, 32], [4, 16], [], [], []],
         ["float", "long int", "Scalar", "Scalar", "Scalar"], None, 0, 8 * 64 + 2 * 4 * 64 * 32),
        # add with a broadcast bias: out [8, 32] (256), reads 256 + 32, writes 256 -> 4·544 bytes, 256 FLOP
        ("aten::add", [[8, 32], [32], []], ["float", "float", "Scalar"], None, 256, 4 * (256 + 32 + 256)),
        # where(mask, a, b) over [16] fp32 with a bool mask: a, b and the output at 4 B, the mask at 1 B:
        # 4·(16 + 16 + 16) + 1·16 = 208 bytes; 1 select per output = 16 FLOP
        ("aten::where", [[16], [16], [16]], ["bool", "float", "float"], None, 16, 4 * 48 + 16),
        # in-place add_ of a 0-dim int64 tensor to AdamW's 0-dim fp32 step counter: 1 FLOP;
        # read 4 (fp32) + 8 (int64), write 4 = 16 bytes
        ("aten::add_", [[], [], []], ["float", "long int", "Scalar"], None, 1, 4 + 8 + 4),
        # copy_ of int64 into fp32 [10]: the destination is written, not read: 8·10 + 4·10 = 120 bytes
        ("aten::copy_", [[10], [10], []], ["float", "long int", "Scalar"], None, 0, 8 * 10 + 4 * 10),
    ],
)
def test_op_costs_golden(op: str, shapes: list, dtypes: list, concrete: list | None, flops: float,
                         nbytes: float) -> None:
    cost = op_cost(op, shapes, dtypes, concrete)
    assert cost.missing == ""
    assert (cost.flops, cost.bytes) == (flops, nbytes)


def test_op_costs_without_shapes_or_formula_are_nan_with_a_reason() -> None:
    no_shapes = op_cost("aten::mm", [], [])
    assert math.isnan(no_shapes.flops) and "no input shapes recorded" in no_shapes.missing
    unknown = op_cost("aten::nonzero", [[10]], ["float"])
    assert math.isnan(unknown.bytes) and unknown.missing == "no formula for aten::nonzero"
    odd = op_cost("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 5], []], ["float"] * 3,
                  [None, None, None, [1, 1], [0, 0], [1, 1], 1])
    # a non-square (3, 5) kernel is costed now (the N-D convolution formula): out 6×4, so
    # 2 · N 1 · C_out 4 · 6·4 · C_in 3 · 3·5 = 8,640 FLOPs
    assert odd.flops == 8640 and odd.formula == "convolution" and odd.missing == ""


def test_precision_follows_the_dtype_and_the_roof() -> None:
    assert op_cost("aten::mm", [[8, 8], [8, 8]], ["c10::Half"] * 2).precision == "tensor"
    assert op_cost("aten::mm", [[8, 8], [8, 8]], ["double"] * 2).precision == "fp64"
    assert op_cost("aten::gelu", [[8, 8], []], ["c10::BFloat16", ""]).precision == "fp32"
    assert np.isfinite(op_cost("aten::gelu", [[8, 8], []], ["float", ""]).flops)


@pytest.mark.gpu
def test_cuda_rows_are_kernels_linked_to_their_op() -> None:
    a, b = torch.randn(512, 1024, device="cuda"), torch.randn(1024, 256, device="cuda")
    torch.mm(a, b)
    torch.cuda.synchronize()  # cuBLAS initialised outside the profile
    gpu = Machine(name="test-gpu", source="file", peak_flop_per_s={"fp32": 1e13},
                  simt_flop_per_s={"fp32": 1e13}, bandwidth_bytes_per_s={"dram": 1e12})
    with profile(machine=gpu) as prof:
        torch.mm(a, b)
        torch.cuda.synchronize()
    r = prof.report
    mm = r[r["op"] == "aten::mm"]
    assert len(mm) >= 1
    assert (mm["kernel_name"] != "aten::mm").all()  # rows are the kernels the op launched
    assert set(mm["duration_source"]) == {"gpu__time_duration.sum"}  # the trace's kernel dur
    # the op's cost is shared among its kernels by device time: the shares add up to the exact cost
    assert mm["flops"].sum() == pytest.approx(MM_FLOPS)
    assert mm["bytes"].sum() == pytest.approx(MM_BYTES)


def test_a_default_window_keeps_a_run_without_steps_whole_and_says_so() -> None:
    with profile(machine=MACHINE, warmup=1, steps=3, window_optional=True) as prof:
        torch.ones(4) * 3  # no optimizer step, no nsroof.step(): nothing to count steps by
    assert (prof.report["op"] == "aten::mul").sum() == 1
    assert prof.result is not None and any("whole run is recorded" in w for w in prof.result.warnings)


def test_the_profiler_stops_once_the_window_is_recorded() -> None:
    w = torch.nn.Parameter(torch.randn(4, 4))
    opt = torch.optim.SGD([w], lr=0.1)
    with profile(machine=MACHINE, warmup=1, steps=1, window_optional=True) as prof:
        for size in (2, 3, 5):
            (torch.randn(size, 4) @ w).sum().backward()
            opt.step()
    # step 0 skipped, step 1 kept, step 2 after the profiler stopped: never recorded
    shapes = set(prof.report.loc[prof.report["op"] == "aten::matmul", "input_shapes"])
    assert shapes == {"[[3, 4], [4, 4]]"}
    assert prof.result is not None and prof.result.steps_marked == 2


def test_tf32_from_the_new_api_is_read_without_raising() -> None:
    from nsroof.collectors.torch_profile import tf32_settings

    backends = torch.backends
    before = (backends.cuda.matmul.fp32_precision, backends.cudnn.conv.fp32_precision)
    try:
        backends.cuda.matmul.fp32_precision = "tf32"
        backends.cudnn.conv.fp32_precision = "ieee"
        with pytest.raises(RuntimeError, match="legacy and new"):
            torch.get_float32_matmul_precision()  # what the check called before: it raises here
        facts = tf32_settings()
        assert (facts["matmul"], facts["cudnn"]) == (True, False)
        assert facts["matmul_api"] == "torch.backends.cuda.matmul.fp32_precision"
        with profile(machine=MACHINE) as prof:
            torch.ones(2) + 1
        assert prof.result is not None and prof.result.trace_facts["tf32"]["matmul"] is True
    finally:
        backends.cuda.matmul.fp32_precision, backends.cudnn.conv.fp32_precision = before


def test_tf32_from_the_legacy_api() -> None:
    from nsroof.collectors.torch_profile import tf32_settings

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # legacy: allows TF32 matmuls
        assert tf32_settings()["matmul"] is True
        torch.set_float32_matmul_precision("highest")
        assert tf32_settings()["matmul"] is False
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_report_that_cannot_be_built_keeps_the_trace_and_names_the_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_machine_json: Path) -> None:
    from torch.nn.modules import module as torch_module

    from nsroof import pipeline
    from nsroof.errors import NsroofError

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(pipeline, "analyze", broken)
    trace = tmp_path / "t.json.gz"
    with pytest.raises(NsroofError) as caught:
        with profile(machine=str(cpu_machine_json), trace=trace, captures=[tmp_path / "c.json"]):
            torch.ones(2) + 1
    # the command names what the report is classified against and the options that change it
    assert str(caught.value) == (f"ValueError: boom; the profile's trace is kept: `nsroof analyze {trace} "
                                 f"--machine {cpu_machine_json} --capture {tmp_path / 'c.json'}` rebuilds "
                                 "the report from it")
    assert trace.is_file()
    assert not torch_module._global_forward_pre_hooks and not torch_module._global_forward_hooks


def test_facts_that_cannot_be_read_do_not_lose_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from nsroof.collectors import torch_profile

    def broken(**kwargs: object) -> None:
        raise RuntimeError("a getter raised")

    monkeypatch.setattr(torch_profile, "trace_facts", broken)
    with profile(machine=MACHINE) as prof:
        torch.ones(2) * 2
    assert (prof.report["op"] == "aten::mul").sum() == 1
    assert prof.result is not None and "a getter raised" in prof.result.trace_facts["facts_error"]


def test_module_ranges_are_fast_records_that_the_importer_reads_as_ranges(tmp_path: Path) -> None:
    import json

    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    trace = tmp_path / "t.json"
    with profile(machine=MACHINE, trace=trace) as prof:
        model(torch.randn(2, 4))
    events = json.loads(trace.read_text())["traceEvents"]
    # torch's C++ record function: a cpu_op named by the module (not a Python record_function annotation)
    assert {e.get("cat") for e in events if e.get("name") == "Sequential.0"} == {"cpu_op"}
    assert "Sequential.0" not in set(prof.report["op"])
    assert set(prof.report.loc[prof.report["op"] == "aten::linear", "module"]) == {"Sequential.0"}


def test_a_compiled_module_is_attributed_to_the_module_it_wraps() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    compiled = torch.compile(model, backend="eager")  # Dynamo traces the hooks; no C++ compile needed here
    x = torch.randn(4, 8, requires_grad=True)
    compiled(x).sum().backward()  # compiled before the profile starts (its tracing would be recorded too)
    with profile(machine=MACHINE) as prof:
        compiled(x).sum().backward()
    modules = set(prof.report["module"].astype(str)) - {""}
    assert modules == {"Sequential"}  # the compiled region: its root, never OptimizedModule
    linear = prof.report[prof.report["op"] == "aten::linear"]
    # Linear(8, 8) on 4 rows: 2·4·8·8 = 512 FLOP plus 4·8 = 32 bias adds
    assert len(linear) == 1 and linear["flops"].iloc[0] == 2 * 4 * 8 * 8 + 4 * 8


def test_inductor_records_its_kernel_estimates_and_cpu_kernels_while_profiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import torch._inductor.config as inductor_config

    from nsroof.collectors.compile_settings import INDUCTOR_SETTINGS

    envs = [env for _, env in INDUCTOR_SETTINGS]
    assert envs == ["TORCHINDUCTOR_BENCHMARK_KERNEL", "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"]
    for env in envs:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(inductor_config, "benchmark_kernel", False)
    monkeypatch.setattr(inductor_config.cpp, "enable_kernel_profile", False)
    seen = {}
    with profile(machine=MACHINE):
        seen = {"estimates": inductor_config.benchmark_kernel,
                "cpu kernels": inductor_config.cpp.enable_kernel_profile,
                "env": [os.environ.get(env) for env in envs]}
        torch.ones(2) + 1
    assert seen == {"estimates": True, "cpu kernels": True, "env": ["1", "1"]}
    assert inductor_config.benchmark_kernel is False and inductor_config.cpp.enable_kernel_profile is False
    assert not any(env in os.environ for env in envs)
