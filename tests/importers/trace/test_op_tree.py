"""The correlation rules of nsroof.importers.trace.op_tree on small traces written here (autograd's thread, a
module range, the main thread's annotations; a launch outside any op). The shared traces' NVTX coverage is
in test_shared_traces.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsroof import importers
from nsroof.importers.trace.op_tree import Timeline
from tests._paths import DATA as TEST_DATA

DATA = TEST_DATA / "traces"


def test_a_backward_kernel_gets_the_main_threads_annotations_and_its_forward_module() -> None:
    frame, facts = importers.read(DATA / "cross_thread.json")
    rows = frame.set_index("kernel_name")
    # forward, on the main thread: the ranges enclosing aten::linear
    assert rows.at["ampere_sgemm_fwd", "nvtx_path"] == "ProfilerStep#1/## forward ##/model.fc"
    # backward, launched on autograd's thread 2 (no annotation of its own): the main thread's step and
    # `## backward ##` open at the op's start, then (rule 3) the forward op's path not already there (same
    # Sequence number 5), its module range marked as backward
    bwd = "ProfilerStep#1/## backward ##/## forward ##/model.fc (backward)"
    assert rows.at["ampere_sgemm_bwd", "nvtx_path"] == bwd
    assert rows.at["ampere_sgemm_bwd", "module"] == "model.fc"
    ops = facts.ops.set_index("name")
    assert ops.at["aten::mm", "nvtx_path"] == bwd
    assert ops.at["aten::mm", "thread"] == "1/2"


def test_a_launch_outside_any_op_is_its_own_op_with_the_annotations_around_it(tmp_path: Path) -> None:
    def x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    trace = {"traceEvents": [x("user_annotation", "decode", 0, 100),
                             x("cuda_driver", "cuLaunchKernel", 10, 2, correlation=1),
                             x("kernel", "triton_poi_fused_add_0", 20, 3, tid=7, correlation=1),
                             x("kernel", "lost_kernel", 30, 3, tid=7, correlation=2)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    rows = importers.read(path)[0].set_index("kernel_name")
    assert (rows.at["triton_poi_fused_add_0", "op"], rows.at["triton_poi_fused_add_0", "op_link"]) == \
        ("cuLaunchKernel", "runtime launch")
    assert rows.at["triton_poi_fused_add_0", "nvtx_path"] == "decode"
    # a kernel whose launch is not in the trace has no op
    assert rows.at["lost_kernel", "op_link"] == "none" and rows["op_id"].isna().sum() == 1


def test_timeline_gives_the_spans_open_at_a_time_also_when_they_overlap_without_nesting() -> None:
    line = Timeline([(0, 100, "a"), (10, 20, "b"), (50, 150, "c"), (160, 170, "d")])
    assert [n for _, _, n in line.open_at(15)] == ["a", "b"]
    assert [n for _, _, n in line.open_at(30)] == ["a"]
    assert [n for _, _, n in line.open_at(120)] == ["c"]  # a closed at 100 below c
    assert [n for _, _, n in line.open_at(155)] == []
    assert [n for _, _, n in line.open_at(165)] == ["d"]
    assert line.open_at(-1) == []


def test_every_ops_path_facts_in_one_pass_are_each_ops_own(data_dir: Path) -> None:
    from nsroof.importers.trace import kineto
    from nsroof.importers.trace.load import load

    for name in ("cross_thread.json", "graph_capture.json", "rocm_capture.json"):
        events = load(data_dir / "traces" / name)
        tree, _ = kineto.op_tree(events, kineto.trace_meta(events.top))
        assert len(tree.ops) > 1
        # one op at a time (computed, then cached by location) against all at once (gathered by np.unique)
        assert tree.all_path_facts() == [tree.path_facts(i) for i in range(len(tree.ops))], name
        assert tree.forward_ids() == [tree.forward_of(i) for i in range(len(tree.ops))], name


def test_ops_by_start_is_sorteds_order_with_ties_and_infinities() -> None:
    import random

    from nsroof.importers.trace.op_tree import by_start

    rng = random.Random(5)
    values = [0.0, -0.0, 1.0, 2.5, float("inf"), -float("inf")]
    for _ in range(200):
        spans = [(rng.choice(values), rng.choice(values)) for _ in range(rng.randint(0, 12))]
        assert by_start(spans) == sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1])), spans
    # a NaN time: sorted()'s own order, whatever comparisons make of it
    spans = [(1.0, 2.0), (float("nan"), 1.0), (0.0, 3.0)]
    assert by_start(spans) == sorted(range(3), key=lambda i: (spans[i][0], -spans[i][1]))


def test_per_object_renders_each_distinct_object_once_even_of_temporaries() -> None:
    from nsroof.importers.trace.op_tree import per_object

    calls: list[object] = []

    def render(v: object) -> str:
        calls.append(v)
        return str(v)

    shared = [1, 2]
    assert per_object(render, [shared, None, shared, None]) == ["[1, 2]", "None", "[1, 2]", "None"]
    assert len(calls) == 2
    # fresh lists made one by one (freed at once by their maker): ids could repeat, results must not mix up
    assert per_object(str, ([i] for i in range(1000))) == [f"[{i}]" for i in range(1000)]


def test_numbers_is_number_of_each_value() -> None:
    import math

    from nsroof.importers.trace.op_tree import number, numbers

    values: list[Any] = [1.5, None, float("inf"), -float("inf"), float("nan"), 0, -7, (1 << 62) + 1, -0.0]
    got = numbers(values)
    assert got.dtype == "float64" and len(got) == len(values)
    for g, v in zip(got.tolist(), values, strict=True):
        assert (math.isnan(g) and math.isnan(number(v))) or g == number(v), v
    assert numbers([]).shape == (0,)


def test_activities_in_order_is_sorteds_order_by_start_then_correlation() -> None:
    import random

    from nsroof.importers.trace.events import ActivityArgs, Event
    from nsroof.importers.trace.kineto import in_order
    from nsroof.importers.trace.op_tree import number

    def key(e: Any) -> tuple[float, float]:
        return number(e.ts), number(e.args.correlation)

    rng = random.Random(11)
    for _ in range(200):
        times: list[Any] = [0.0, 1.0, 1.0, 2.5, -3.0] + ([None, float("nan")] if rng.random() < 0.3 else [])
        events = [Event(f"k{i}", "kernel", rng.choice(times), 1.0, 0, 7,
                        ActivityArgs(correlation=rng.choice([1, 2, 2, None] if rng.random() < 0.3
                                                            else [1, 2, 2, 3])))
                  for i in range(rng.randint(0, 12))]
        assert [e.name for e in in_order(events)] == [e.name for e in sorted(events, key=key)]


def test_kernels_launched_through_launch_kernel_ex_belong_to_their_op(tmp_path: Path) -> None:
    # flashinfer/trtllm-gen and Triton launch through the driver's cuLaunchKernelEx and the runtime's
    # cudaLaunchKernelExC: correlated like cudaLaunchKernel, their kernels get the op enclosing the launch
    def x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    trace = {"traceEvents": [
        x("cpu_op", "vllm::moe_forward", 0, 100, **{"External id": 5, "Input Dims": [[8, 64], [8, 4], []],
                                                   "Input type": ["c10::BFloat16", "c10::BFloat16", ""]}),
        x("cuda_driver", "cuLaunchKernelEx", 10, 2, correlation=1, **{"External id": 5}),
        x("cuda_runtime", "cudaLaunchKernelExC", 20, 2, correlation=2, **{"External id": 5}),
        x("kernel", "bmm_MxE4m3_MxE2m1MxE4m3_Fp32", 30, 3, tid=7, correlation=1),
        x("kernel", "routingIndicesHistogramKernel", 40, 3, tid=7, correlation=2)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    rows = importers.read(path)[0].set_index("kernel_name")
    for kernel in ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32", "routingIndicesHistogramKernel"):
        assert rows.at[kernel, "op"] == "vllm::moe_forward", kernel
