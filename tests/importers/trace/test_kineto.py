"""torch.profiler chrome traces -> the kernel table: kernel events of both spellings, launch facts, op links
through External id / correlation (op_id), and the five real traces. Costs:
tests/costs/test_attribution.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from nsroof import importers
from nsroof.errors import InputError
from nsroof.importers import sniff


def read(path: Path) -> Any:
    """The kernel table alone (importers.read returns it with the file facts)."""
    return importers.read(path)[0]


DEVICE = {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "computeMajor": 8, "computeMinor": 0}


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _new_style() -> dict[str, Any]:
    """A linear layer inside a record_function: aten::linear -> aten::addmm launches one sgemm kernel."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [DEVICE],
        "traceEvents": [
            _x("user_annotation", "train step", 100.0, 50.0, **{"External id": 9}),
            _x("cpu_op", "aten::linear", 101.0, 20.0, **{"External id": 10,
                                                        "Input Dims": [[8, 16], [32, 16], [32]],
                                                        "Input type": ["float", "float", "float"]}),
            _x("cpu_op", "aten::addmm", 102.0, 10.0, **{"External id": 11,
                                                       "Input Dims": [[32], [8, 16], [16, 32], [], []],
                                                       "Input type": ["float", "float", "float", "Scalar",
                                                                      "Scalar"]}),
            _x("cuda_runtime", "cudaLaunchKernel", 103.0, 2.0, correlation=100, **{"External id": 11}),
            _x("kernel", "ampere_sgemm_32x32_sliced1x4_tn", 130.25, 12.5, pid=0, tid=7, device=0, stream=7,
               correlation=100, grid=[4, 1, 1], block=[128, 1, 1],
               **{"External id": 11, "registers per thread": 32, "shared memory": 1024}),
        ],
    }


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    text = json.dumps(data)
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_kernel_rows_with_launch_facts_and_their_op(tmp_path: Path) -> None:
    df, facts = importers.read(_write(tmp_path, "trace.json", _new_style()))
    assert facts.format == "torch-trace"
    assert len(df) == 1
    k = df.iloc[0]
    assert k["kernel_name"] == "ampere_sgemm_32x32_sliced1x4_tn"
    assert k["gpu__time_duration.sum"] == pytest.approx(12.5e-6)  # dur is µs, fractions kept
    assert (k["grid"], k["block"]) == ("(4, 1, 1)", "(128, 1, 1)")
    assert (k["launch__registers_per_thread"], k["launch__shared_mem_per_block"]) == (32, 1024)
    assert (k["stream"], k["device"], k["cc"]) == (7, "NVIDIA A100-SXM4-40GB", "8.0")
    # the kernel's External id names the innermost op; its shapes come with it
    assert k["op"] == "aten::addmm"
    assert k["input_shapes"] == "[[32], [8, 16], [16, 32], [], []]"
    assert k["nvtx_path"] == "train step"


def test_2021_spelling_lowercase_external_id_and_no_device_properties(tmp_path: Path) -> None:
    trace = {"traceEvents": [
        _x("Operator", "aten::mm", 10.0, 8.0, **{"external id": 5, "Input Dims": [[4, 8], [8, 2]],
                                               "Input type": ["float", "float"]}),
        _x("Runtime", "cudaLaunchKernel", 11.0, 1.0, correlation=77, **{"external id": 5}),
        # no External id on the kernel: linked through its correlation to the runtime launch
        _x("Kernel", "gemv2T_kernel", 20.0, 3.0, pid=0, tid="stream 7", correlation=77),
    ]}
    k = read(_write(tmp_path, "old.json", trace)).iloc[0]
    assert k["op"] == "aten::mm" and k["stream"] == 7
    assert k["device"] == "" and k["cc"] == ""


def test_gzip_and_plain_read_the_same(tmp_path: Path) -> None:
    plain = read(_write(tmp_path, "t.json", _new_style()))
    packed = read(_write(tmp_path, "t.json.gz", _new_style()))
    assert sniff(tmp_path / "t.json.gz") == "torch-trace"
    assert plain.drop(columns=["source"]).equals(packed.drop(columns=["source"]))


def test_broken_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{"traceEvents": [\n  {"ph": "X", "cat": "kernel",\n')
    with pytest.raises(InputError) as err:
        read(path)
    assert err.value.line == 3 and "not valid JSON" in str(err.value)


def test_json_without_trace_events_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="traceEvents"):
        read(_write(tmp_path, "other.json", {"hello": 1}))


# --------------------------------------------------------------------------- the real traces


TRACES = {
    # file: (rows, rows linked to a cpu_op, rows whose launch no op encloses: the runtime launch is their op)
    "hta__alexnet_benchmark_result_2869224_1695835535_trace.json.gz": (79, 79, 0),
    "hta__timeline_analysis_sampled_rank-0.json.gz": (1154, 1138, 16),
    "hta__triton_example.json.gz": (1, 1, 0),
    "kineto__after_fix_trace.json": (1, 1, 0),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_real_traces_import(shared_fixtures: Path, name: str) -> None:
    df = read(shared_fixtures / "traces" / name)
    df = df[df["kind"] == "kernel"]
    rows, linked, launches = TRACES[name]
    assert len(df) == rows
    assert int((df["op_link"] == "runtime launch").sum()) == launches
    assert int(((df["op"] != "") & (df["op_link"] != "runtime launch")).sum()) == linked
    assert df["gpu__time_duration.sum"].notna().all() and (df["gpu__time_duration.sum"] > 0).all()


def test_real_trace_details(shared_fixtures: Path) -> None:
    alexnet = read(shared_fixtures / "traces"
                   / "hta__alexnet_benchmark_result_2869224_1695835535_trace.json.gz")
    alexnet = alexnet[alexnet["kind"] == "kernel"]
    assert set(alexnet["device"]) == {"NVIDIA A100-PG509-200"} and set(alexnet["cc"]) == {"8.0"}
    sampled = read(shared_fixtures / "traces" / "hta__timeline_analysis_sampled_rank-0.json.gz")
    sampled = sampled[sampled["kind"] == "kernel"]
    assert set(sampled["device"]) == {""}  # no deviceProperties
    kineto = read(shared_fixtures / "traces" / "kineto__after_fix_trace.json").iloc[0]
    assert kineto["kernel_name"] == "Kernel" and kineto["gpu__time_duration.sum"] == pytest.approx(0.02e-6)
    assert kineto["op"] == "op1"  # the launch has no External id: the enclosing op


def test_range_profiler_trace_imports_its_flop_counters(shared_fixtures: Path) -> None:
    df, facts = importers.read(
        shared_fixtures / "traces" / "hta__cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz")
    assert len(df) == 77
    assert "gpu__time_duration.sum" not in df.columns  # a range's dur is the profiling window
    assert df["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"].max() == 9_119_334_400
    assert "__missing__" in set(df["kernel_name"])
    assert facts.warnings


def test_analyze_classifies_trace_kernels_with_analytic_costs(tmp_path: Path) -> None:
    from nsroof.pipeline import analyze
    from nsroof.roofs.machines import Machine

    gpu = Machine(name="test-gpu", source="file", peak_flop_per_s={"fp32": 1e13},
                  simt_flop_per_s={"fp32": 1e13}, bandwidth_bytes_per_s={"dram": 1e12})
    report = analyze(_write(tmp_path, "trace.json", _new_style()), machine=gpu)
    row = report.frame.iloc[0]
    assert list(report.frame["level"]) == ["dram"]  # analytic bytes exist at DRAM only
    assert (row["op"], row["flops"], row["bytes"]) == ("aten::addmm", 8448, 3712)
    # 8,448 / 3,712 = 2.28 FLOP/B < ridge 1e13 / 1e12 = 10: memory-bound
    assert row["bound"] == "memory" and row["bytes_source"] == "analytic:gemm-bias"  # addmm, under linear
