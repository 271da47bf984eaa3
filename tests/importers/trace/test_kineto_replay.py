"""Replay of real kineto traces (../shared/fixtures/traces) and of small traces written here, checking the
importer against the JSON itself, independently of its code:

- kernel rows = the number of `kernel`/`Kernel` events, and their durations add up to the JSON's sum;
- each kernel's op is the innermost cpu_op enclosing its runtime launch on the launching thread (computed
  here by brute force);
- no memcpy/memset/sync event among the kernel rows; memcpy/memset rows carry their own kind and no cost;
- backward kernels launched from autograd's thread get the NVTX path of the annotated forward op.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from nsroof import importers


def read(path: Path) -> Any:
    """The kernel table alone (importers.read returns it with the file facts)."""
    return importers.read(path)[0]

TRACE_FILES = [
    "hta__alexnet_benchmark_result_2869224_1695835535_trace.json.gz",
    "hta__timeline_analysis_sampled_rank-0.json.gz",
    "hta__triton_example.json.gz",
    "kineto__after_fix_trace.json",
    "hta__cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz",
]
KERNEL_CATS = {"kernel", "Kernel"}


def _events(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    return data["traceEvents"] if isinstance(data, dict) else data


def _innermost_enclosing(ops: list[dict[str, Any]], event: dict[str, Any]) -> dict[str, Any] | None:
    """Brute force: the shortest cpu_op on the event's (pid, tid) whose [ts, ts + dur] holds the event's;
    of equal spans the one written later (kineto writes an op before the ops it calls)."""
    s, e = event["ts"], event["ts"] + event.get("dur", 0)
    holding = [(k, op) for k, op in enumerate(ops) if (op["pid"], op["tid"]) == (event["pid"], event["tid"])
               and op["ts"] <= s and e <= op["ts"] + op["dur"]]
    return min(holding, key=lambda t: (t[1]["dur"], -t[1]["ts"], -t[0]))[1] if holding else None


@pytest.mark.parametrize("name", TRACE_FILES)
def test_replay_kernel_count_time_and_ops_equal_the_json(shared_fixtures: Path, name: str) -> None:
    path = shared_fixtures / "traces" / name
    events = [e for e in _events(path) if e.get("ph") == "X"]
    kernels_json = [e for e in events if e.get("cat") in KERNEL_CATS]
    df = read(path)
    if not kernels_json:  # the range-profiler trace: counters only, no kernel events
        assert "kind" not in df.columns or not (df["kind"] == "kernel").any()
        return
    rows = df[df["kind"] == "kernel"].reset_index(drop=True)
    assert len(rows) == len(kernels_json)
    assert rows["gpu__time_duration.sum"].sum() == pytest.approx(sum(e["dur"] for e in kernels_json) * 1e-6,
                                                                 rel=1e-12)
    # no copy, set or sync among the kernels; every non-kernel row is a memcpy/memset of the JSON
    assert set(df["kind"]) <= {"kernel", "memcpy", "memset"}
    copies = sum(1 for e in events if e.get("cat") in {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"})
    assert (df["kind"] != "kernel").sum() == copies
    assert not rows["kernel_name"].isin({e["name"] for e in events if e.get("cat") == "cuda_sync"}).any()

    # each kernel's op: the innermost op enclosing its launch on the launching thread
    ops = [e for e in events if e.get("cat") in {"cpu_op", "Operator"}]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in {"cuda_runtime", "cuda_driver", "Runtime"}
                and "correlation" in e.get("args", {})}
    order = sorted(kernels_json, key=lambda e: (e["ts"], e["args"].get("correlation", math.nan)))
    checked = 0
    for kernel, (_, row) in zip(order, rows.iterrows(), strict=True):
        assert row["kernel_name"] == kernel["name"]
        launch = launches.get(kernel["args"].get("correlation"))
        if launch is None:
            continue
        expected = _innermost_enclosing(ops, launch)
        # a launch no op encloses is its own op (trace_ops rule 5)
        assert row["op"] == (expected["name"] if expected else launch["name"]), (kernel["name"][:60],
                                                                                 row["op_link"])
        checked += 1
    assert checked >= 1


def test_alexnet_external_ids_that_name_another_op_are_not_trusted(shared_fixtures: Path) -> None:
    """In this 2023 trace a launch's External id equals its correlation id and names an unrelated op: the
    uniform_ kernel's launch says 218, which is an aten::clamp_min_ ten seconds later."""
    df, facts = importers.read(shared_fixtures / "traces"
                               / "hta__alexnet_benchmark_result_2869224_1695835535_trace.json.gz")
    uniform = df[df["kernel_name"].str.contains("uniform_kernel") & (df["kind"] == "kernel")]
    assert len(uniform) and set(uniform["op"]) == {"aten::uniform_"}
    assert set(df["op_link"]) == {"enclosing op"}
    assert any("linked to the innermost enclosing op" in w for w in facts.warnings)


# --------------------------------------------------------------------------- small traces written here


def _x(cat: str, name: str, ts: float, dur: float, *, tid: Any = 1, pid: Any = 1,
       **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _training_trace(meta: dict[str, Any] | None = None, *, cc: tuple[int, int] = (9, 0)) -> dict[str, Any]:
    """A Linear forward on the main thread (tid 1) under 'step' and the module range 'Net.fc'; its backward
    on autograd's thread (tid 2) launches two kernels; a memcpy, a memset and a Context Sync besides."""
    linear_args = {"External id": 10, "Sequence number": 5, "Fwd thread id": 0,
                   "Input Dims": [[8, 16], [32, 16], [32]], "Input type": ["float", "float", "float"]}
    mm_args = {"External id": 21, "Input Dims": [[8, 32], [32, 16]], "Input type": ["float", "float"]}
    top: dict[str, Any] = {
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": cc[0],
                              "computeMinor": cc[1]}],
        "traceEvents": [
            _x("user_annotation", "step", 0, 1000, **{"External id": 1}),
            _x("user_annotation", "Net.fc", 10, 100, **{"External id": 2}),
            _x("cpu_op", "aten::linear", 20, 50, **linear_args),
            _x("cuda_runtime", "cudaLaunchKernel", 30, 5, correlation=500, **{"External id": 10}),
            _x("kernel", "sm90_xmma_gemm_f32f32_tf32f32", 200, 8, pid=0, tid=7, correlation=500, device=0,
               stream=7, grid=[4, 1, 1], block=[128, 1, 1]),
            # backward, on autograd's thread: the evaluate_function node carries the forward's sequence number
            _x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 400, 100, tid=2,
               **{"External id": 20, "Sequence number": 5, "Fwd thread id": 1}),
            _x("cpu_op", "aten::mm", 410, 30, tid=2, **mm_args),
            _x("cuda_runtime", "cudaLaunchKernel", 420, 5, tid=2, correlation=501, **{"External id": 21}),
            _x("kernel", "sm90_xmma_gemm_bwd", 600, 6, pid=0, tid=7, correlation=501, device=0, stream=7),
            # a launch whose External id names an op on another thread: linked by enclosure instead
            _x("cuda_runtime", "cudaLaunchKernel", 450, 5, tid=2, correlation=502, **{"External id": 10}),
            _x("kernel", "elementwise_kernel", 700, 2, pid=0, tid=7, correlation=502, device=0, stream=7),
            _x("cuda_runtime", "cudaMemcpyAsync", 40, 5, correlation=503, **{"External id": 10}),
            _x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 210, 3, pid=0, tid=7, correlation=503,
               device=0),
            _x("gpu_memset", "Memset (Device)", 220, 1, pid=0, tid=7, correlation=504, device=0),
            _x("cuda_sync", "Context Sync", 230, 50, pid=0, tid=4294967295, device=0),
        ],
    }
    if meta is not None:
        top["nsroof"] = meta
    return top


def _write(tmp_path: Path, data: Any, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_backward_kernels_on_autograds_thread_get_the_forward_path(tmp_path: Path) -> None:
    df = read(_write(tmp_path, _training_trace({"module_ranges": ["Net.fc"]})))
    k = df[df["kind"] == "kernel"].set_index("kernel_name")
    assert k.loc["sm90_xmma_gemm_f32f32_tf32f32", "nvtx_path"] == "step/Net.fc"
    assert k.loc["sm90_xmma_gemm_f32f32_tf32f32", "module"] == "Net.fc"
    bwd = k.loc["sm90_xmma_gemm_bwd"]
    assert bwd["op"] == "aten::mm" and bwd["op_link"] == "external id"
    # inherited through Sequence number 5, module ranges marked as backward
    assert bwd["nvtx_path"] == "step/Net.fc (backward)" and bwd["module"] == "Net.fc"
    wrong = k.loc["elementwise_kernel"]
    assert (wrong["op"] == "autograd::engine::evaluate_function: AddmmBackward0"
            and wrong["op_link"] == "enclosing op")


def test_copies_have_their_kind_and_sync_is_dropped(tmp_path: Path) -> None:
    df = read(_write(tmp_path, _training_trace()))
    assert df["kind"].tolist().count("kernel") == 3
    assert sorted(df.loc[df["kind"] != "kernel", "kind"]) == ["memcpy", "memset"]
    assert "Context Sync" not in set(df["kernel_name"])
    memcpy = df[df["kind"] == "memcpy"].iloc[0]
    assert memcpy["op"] == "aten::linear"


def test_fp32_matmul_is_judged_against_tf32_when_the_trace_says_it_was_allowed(tmp_path: Path) -> None:
    from nsroof.pipeline import analyze
    from nsroof.roofs.machines import Machine

    h100 = Machine(name="test-h100", source="file",
                   peak_flop_per_s={"fp32": 6.7e13, "tf32": 4.95e14}, simt_flop_per_s={"fp32": 6.7e13},
                   bandwidth_bytes_per_s={"dram": 3.35e12})
    allowed = {"tf32": {"matmul": True, "cudnn": True, "matmul_precision": "high"}}
    report = analyze(_write(tmp_path, _training_trace(allowed)), machine=h100)
    fwd = report.frame[report.frame["kernel_name"] == "sm90_xmma_gemm_f32f32_tf32f32"].iloc[0]
    # linear(tokens=8, in=16, out=32, bias) = 2·8·16·32 + 8·32 = 8,448 FLOP on tensor cores, TF32 roof
    assert (fwd["precision"], fwd["flops_tensor"], fwd["flops_fp32"]) == ("tensor", 8448, 0)
    assert fwd["peak_flop_per_s"] == 4.95e14 and "[TF32 allowed]" in fwd["flops_source"]
    assert report.metadata["inputs"][0]["facts"]["tf32"]["rows"] == 2  # the forward and backward matmuls

    forbidden = {"tf32": {"matmul": False, "cudnn": True, "matmul_precision": "highest"}}
    strict = analyze(_write(tmp_path, _training_trace(forbidden), "strict.json"), machine=h100).frame
    row = strict[strict["kernel_name"] == "sm90_xmma_gemm_f32f32_tf32f32"].iloc[0]
    assert (row["precision"], row["peak_flop_per_s"]) == ("fp32", 6.7e13)

    # a V100 (CC 7.0) has no TF32: fp32 whatever torch allowed
    volta = analyze(_write(tmp_path, _training_trace(allowed, cc=(7, 0)), "volta.json"), machine=h100).frame
    assert set(volta.loc[volta["kind"] == "kernel", "precision"]) <= {"fp32", ""}
    # a trace that does not say: fp32, and the facts say why
    _, unknown = importers.read(_write(tmp_path, _training_trace(), "plain.json"))
    assert unknown.extra["tf32"]["applied"].startswith("unknown")


def test_the_step_window_recorded_in_the_trace_selects_rows(tmp_path: Path) -> None:
    events = [_x("user_annotation", f"nsroof::step#optimizer#{n}", 100 * n, 0) for n in (1, 2, 3)]
    events += [_x("cpu_op", "aten::relu", 100 * n + 10, 5, **{"Input Dims": [[4]], "Input type": ["float"]})
               for n in (0, 1, 2, 3)]
    data = {"traceEvents": events, "nsroof": {"steps": {"warmup": 1, "steps": 2}}}
    df, facts = importers.read(_write(tmp_path, data))
    # steps: [0, 100) warm-up, [100, 200) and [200, 300) kept, [300, …) after the window
    assert df["kind"].tolist() == ["cpu_op", "cpu_op"]
    assert df["kernel_id"].tolist() == [0, 1]
    # 4 relu calls, one per step 1..4 (step i ends at the i-th mark); steps 2 and 3 kept, and the window
    # the summary states is numbered as the `step` column is
    assert df["step"].tolist() == [2, 3]
    assert facts.extra["steps"] == {"source": "optimizer steps", "marked": 3, "warmup": 1, "steps": 2,
                                    "window": "2..3", "kept": 2, "rows": 4}


# --------------------------------------------------------------------------- hostile input


def _one_line_error(path: Path, *fragments: str) -> None:
    from nsroof.errors import InputError

    with pytest.raises(InputError) as info:
        read(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text
    for fragment in fragments:
        assert fragment in text, text


@pytest.mark.parametrize(("field", "value", "where"), [
    ("ts", "12", "traceEvents[4]: field 'ts'"),
    ("dur", [1], "traceEvents[4]: field 'dur'"),
    ("tid", {"a": 1}, "traceEvents[4]: field 'tid'"),
    ("args", [1, 2], "traceEvents[4]: field 'args'"),
    ("name", 7, "traceEvents[4]: field 'name'"),
])
def test_wrong_field_types_name_the_event_and_field(tmp_path: Path, field: str, value: Any,
                                                    where: str) -> None:
    data = _training_trace()
    data["traceEvents"][4][field] = value
    _one_line_error(_write(tmp_path, data), where)


@pytest.mark.parametrize(("event", "arg", "value"), [
    (2, "External id", "10"), (4, "correlation", 1.5), (3, "correlation", "500"),
    (2, "Sequence number", True), (4, "grid", [1, 2]), (2, "Input Dims", [[[[[1]]]]]),
    (2, "Input Dims", "[[8, 16]]"),
    (2, "Concrete Inputs", [{"x": 1}]),
    # a shape mixing a list and an integer (fuzz seed 1 case 2831: it reached the cost model's numel)
    (2, "Input Dims", [[[], 16], [32, 16], [32]]),
])
def test_wrong_arg_types_name_the_event_and_arg(tmp_path: Path, event: int, arg: str, value: Any) -> None:
    data = _training_trace()
    data["traceEvents"][event]["args"][arg] = value
    _one_line_error(_write(tmp_path, data), f"traceEvents[{event}].args: field {arg!r}")


@pytest.mark.parametrize(("arg", "value"), [("correlation", 1.5), ("grid", [1, 2]), ("stream", [7])])
def test_args_no_number_reads_on_that_category_are_not_checked(tmp_path: Path, arg: str, value: Any) -> None:
    # a CPU op's correlation, grid or stream feed nothing (only launches' and GPU activities' do):
    # read as given
    data = _training_trace()
    data["traceEvents"][2]["args"][arg] = value
    assert "aten::linear" in read(_write(tmp_path, data))["op"].tolist()


def test_device_properties_and_events_of_the_wrong_shape(tmp_path: Path) -> None:
    data = _training_trace()
    data["deviceProperties"][0]["computeMajor"] = "9"
    _one_line_error(_write(tmp_path, data), "deviceProperties[0]: field 'computeMajor'")
    data = _training_trace()
    data["traceEvents"].insert(3, ["not", "an", "event"])
    _one_line_error(_write(tmp_path, data, "b.json"), "traceEvents[3] is a list")


def test_deep_json_is_refused_not_recursed(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    _one_line_error(deep, "nested deeper")
    # 1,000 levels inside an arg nsroof reads: refused before parsing reaches them; 50 levels parse and are
    # refused by the declared schema (shapes nest 3 levels at most)
    for depth, message in ((1000, "nested deeper"), (50, "field 'Input Dims'")):
        data = _training_trace()
        data["traceEvents"][2]["args"]["Input Dims"] = "@DEEP@"
        path = tmp_path / f"deep_arg_{depth}.json"
        path.write_text(json.dumps(data).replace('"@DEEP@"', "[" * depth + "1" + "]" * depth))
        _one_line_error(path, message)


def test_damaged_gzip_is_an_input_error(tmp_path: Path) -> None:
    good = gzip.compress(json.dumps(_training_trace()).encode())
    bad = tmp_path / "trace.json.gz"
    bad.write_bytes(good[: len(good) // 2])
    _one_line_error(bad, "gzip")
    flipped = tmp_path / "flipped.json.gz"
    flipped.write_bytes(good[:20] + bytes(b ^ 0xFF for b in good[20:40]) + good[40:])
    _one_line_error(flipped)


@pytest.mark.parametrize("dur", [-5, float("nan"), float("inf")])
def test_negative_or_non_finite_durations_become_nan_and_say_so(tmp_path: Path, dur: float) -> None:
    data = _training_trace()
    data["traceEvents"][4]["dur"] = dur
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))  # json writes NaN / Infinity literals, which Python's reader accepts
    df, facts = importers.read(path)
    row = df[df["kernel_name"] == "sm90_xmma_gemm_f32f32_tf32f32"].iloc[0]
    assert math.isnan(row["gpu__time_duration.sum"])
    assert any("negative or non-finite 'dur'" in w for w in facts.warnings)


def test_replay_backward_kernels_carry_their_forward_ops_annotations(shared_fixtures: Path) -> None:
    """The sampled rank-0 trace has 314 autograd backward nodes; its backward kernels run on autograd's
    thread, away from the forward's annotations. Brute force here: the kernel's launching op, the backward
    node enclosing it, the forward op with that node's Sequence number (outermost, latest before the node),
    and the annotations enclosing that forward op: each must be in the kernel's nvtx_path."""
    path = shared_fixtures / "traces" / "hta__timeline_analysis_sampled_rank-0.json.gz"
    events = [e for e in _events(path) if e.get("ph") == "X"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    annotations = [e for e in events if e.get("cat") == "user_annotation"]
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in {"cuda_runtime", "cuda_driver"}}
    df = read(path)
    rows = df[df["kind"] == "kernel"].reset_index(drop=True)
    order = sorted([e for e in events if e.get("cat") == "kernel"],
                   key=lambda e: (e["ts"], e["args"].get("correlation", math.nan)))

    def holds(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
        return ((outer["pid"], outer["tid"]) == (inner["pid"], inner["tid"]) and outer["ts"] <= inner["ts"]
                and inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer["dur"])

    nodes = [op for op in ops if op["name"].startswith("autograd::engine::evaluate_function: ")]
    forwards = [op for op in ops if isinstance(op["args"].get("Sequence number"), int)
                and not any(holds(n, op) for n in nodes if n["tid"] == op["tid"])]
    checked = 0
    for kernel, (_, row) in zip(order, rows.iterrows(), strict=True):
        launch = launches.get(kernel["args"].get("correlation"))
        node = next((n for n in nodes if launch is not None and holds(n, launch)), None)
        if node is None:
            continue
        seq = node["args"].get("Sequence number")
        candidates = [op for op in forwards
                      if op["args"]["Sequence number"] == seq and op["ts"] <= node["ts"]]
        if not candidates:
            continue
        latest = max(c["ts"] for c in candidates if not any(
            holds(o, c) for o in candidates if o is not c and o["args"]["Sequence number"] == seq))
        forward = next(c for c in candidates if c["ts"] == latest)
        expected = [a["name"] for a in annotations if holds(a, forward)]
        assert set(expected) <= set(row["nvtx_ranges"]), (row["op"], expected, row["nvtx_path"])
        checked += len(expected) > 0
    assert checked >= 10  # 202 of the 1,154 kernels are backward kernels whose forward op is annotated


def test_the_summary_counts_copies_apart_from_kernels(tmp_path: Path) -> None:
    """3 kernels (8 + 6 + 2 us) and a memcpy (3 us) + memset (1 us): the copies are timed and shown, never
    classified, and left out of the bound shares and of the 'not classified' kernels."""
    from nsroof.pipeline import analyze
    from nsroof.report.summary import bound_shares, render

    report = analyze([_write(tmp_path, _training_trace())], machine="h100-sxm")
    text = render(report)
    assert text.splitlines()[0].startswith("3 kernels + 2 memory copies/sets (5 launches, 20 us)")
    assert "Memory copies/sets: 4 us (20.0% of the time), not kernels" in text  # (3 + 1) / 20
    assert "(copy/set)" in text and "kernels and copies by time" in text
    dram = bound_shares(report.frame).set_index("level").loc["dram"]
    # over the 16 us of kernels: the elementwise kernel (2 us, its enclosing op has no formula) is the unknown
    # 2/16 = 12.5% (with the copies counted it would read (2 + 4)/20 = 30%)
    assert dram["unknown"] == pytest.approx(2 / 16)
