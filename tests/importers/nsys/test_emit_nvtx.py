"""An emit_nvtx(record_shapes=True) export of a training step costs its ops as a kineto trace of the same step
does: the NVTX range texts PyTorch writes (torch/csrc/profiler/util.cpp, getNvtxStr) become the same ops
table, so the same formulas price the same kernels; the backward ops take their forward op through `seq`.
emit_nvtx writes sizes and no dtypes: every op gets the FLOPs a trace recorded with dtypes gives (FLOPs follow
from the shapes), and the bytes and compute roof where its kernels' names state the dtype (cuBLAS sgemm:
fp32); elsewhere the bytes are NaN with the dtype named as missing, as in a trace recorded without dtypes.
The NVTX paths differ by design where no kernel is: nsys paths are the launching thread's ranges (an export
holds every thread's), a kineto path every thread's of the process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nsroof.pipeline import analyze
from tests.importers.nsys.synthetic import Export, write

MAIN, AUTOGRAD = 1, 2
# (text emit_nvtx writes, kineto's name, its args, start µs, end µs, thread): one linear + relu step
OPS: list[tuple[str, str, dict[str, Any], int, int, int]] = [
    ("aten::linear, seq = 0, op_id = 1, sizes = [[64, 128], [256, 128], [256]]", "aten::linear",
     {"Sequence number": 0, "Input Dims": [[64, 128], [256, 128], [256]]}, 100, 400, MAIN),
    ("aten::t, seq = 0, op_id = 2, sizes = [[256, 128]]", "aten::t",
     {"Sequence number": 0, "Input Dims": [[256, 128]]}, 110, 120, MAIN),
    ("aten::addmm, seq = 1, op_id = 3, sizes = [[256], [64, 128], [128, 256], [], []], "
     "input_op_ids = [(0,0), (2,0)]", "aten::addmm",
     {"Sequence number": 1, "Input Dims": [[256], [64, 128], [128, 256], [], []]}, 130, 390, MAIN),
    ("aten::relu, seq = 2, op_id = 4, sizes = [[64, 256]]", "aten::relu",
     {"Sequence number": 2, "Input Dims": [[64, 256]]}, 500, 600, MAIN),
    ("autograd::engine::evaluate_function: ReluBackward0, op_id = 9",
     "autograd::engine::evaluate_function: ReluBackward0", {}, 2000, 2300, AUTOGRAD),
    ("ReluBackward0, seq = 2, op_id = 10, sizes = [[64, 256]]", "ReluBackward0",
     {"Sequence number": 2, "Fwd thread id": MAIN, "Input Dims": [[64, 256]]}, 2010, 2290, AUTOGRAD),
    ("aten::threshold_backward, op_id = 11, sizes = [[64, 256], [64, 256], []]", "aten::threshold_backward",
     {"Input Dims": [[64, 256], [64, 256], []]}, 2020, 2280, AUTOGRAD),
    ("autograd::engine::evaluate_function: AddmmBackward0, op_id = 12",
     "autograd::engine::evaluate_function: AddmmBackward0", {}, 3000, 3500, AUTOGRAD),
    ("AddmmBackward0, seq = 1, op_id = 13, sizes = [[64, 256]]", "AddmmBackward0",
     {"Sequence number": 1, "Fwd thread id": MAIN, "Input Dims": [[64, 256]]}, 3010, 3490, AUTOGRAD),
    ("aten::mm, op_id = 14, sizes = [[64, 256], [256, 128]]", "aten::mm",
     {"Input Dims": [[64, 256], [256, 128]]}, 3020, 3200, AUTOGRAD),
    ("aten::mm, op_id = 15, sizes = [[256, 64], [64, 128]]", "aten::mm",
     {"Input Dims": [[256, 64], [64, 128]]}, 3250, 3450, AUTOGRAD),
]
# (kernel, launch start µs, thread, kernel start µs, duration µs): each launched inside the op above it
KERNELS = [("ampere_sgemm_64x64_tn", 140, MAIN, 1000, 12),
           ("vectorized_elementwise_kernel", 510, MAIN, 1100, 3),
           ("vectorized_elementwise_kernel", 2030, AUTOGRAD, 4000, 3),
           ("ampere_sgemm_64x64_nn", 3030, AUTOGRAD, 4100, 11),
           ("ampere_sgemm_64x64_nt", 3260, AUTOGRAD, 4200, 11)]
STEP = ("train_step", 50, 3600, MAIN)  # a user range around the forward


def _kineto(path: Path, *, typed: bool = False) -> Path:
    """The step as torch.profiler(record_shapes=True) records it (`typed`: with its "Input type"s: every
    tensor of this step fp32, `float`; a scalar argument `Scalar`), or without types."""

    def x(cat: str, name: str, ts: float, dur: float, tid: int, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [x("user_annotation", STEP[0], STEP[1], STEP[2] - STEP[1], STEP[3])]
    events += [x("cpu_op", name, s, e - s, tid, **args, **_types(args) if typed else {})
               for _, name, args, s, e, tid in OPS]
    for corr, (kernel, at, tid, start, dur) in enumerate(KERNELS, 1):
        events.append(x("cuda_runtime", "cudaLaunchKernel", at, 5, tid, correlation=corr))
        k = x("kernel", kernel, start, dur, 7, correlation=corr, device=0, stream=7)
        events.append(k | {"pid": 0})
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                       "computeMajor": 9, "computeMinor": 0}],
                                "traceEvents": events}))
    return path


def _types(args: dict[str, Any]) -> dict[str, Any]:
    dims = args.get("Input Dims")
    return {} if dims is None else {"Input type": ["float" if d else "Scalar" for d in dims]}


def _nsys(path: Path, *, text_ids: bool = False) -> Path:
    us = 1000  # the export's ns
    export = Export(text_ids=text_ids, ranges=[(STEP[0], STEP[1] * us, STEP[2] * us, STEP[3])])
    export.ranges += [(text, s * us, e * us, tid) for text, _, _, s, e, tid in OPS]
    for corr, (kernel, at, tid, start, dur) in enumerate(KERNELS, 1):
        export.launches.append(("cudaLaunchKernel_v7000", at * us, (at + 5) * us, corr, tid))
        export.kernels.append((kernel, start * us, (start + dur) * us, corr, 7))
    return write(path, export)


def _ops(path: Path, columns: tuple[str, ...] = ("op", "input_shapes", "flops", "missing")) -> pd.DataFrame:
    ops = analyze(path).ops
    return ops[ops["level"] == "dram"][list(columns)].reset_index(drop=True)


def _op_table(path: Path) -> pd.DataFrame:
    from nsroof import importers

    ops = importers.read(path)[1].ops
    assert ops is not None
    names = ops["name"].tolist()
    forward = [names[int(f)] if f is not pd.NA else "" for f in ops["forward_op_id"]]
    return pd.DataFrame({"name": names, "input_shapes": ops["input_shapes"], "seq": ops["sequence_number"],
                         "forward": forward})


@pytest.mark.parametrize("text_ids", [False, True], ids=["inline text", "textId"])
def test_an_emit_nvtx_step_gives_the_kineto_traces_ops_table(tmp_path: Path, text_ids: bool) -> None:
    trace = _op_table(_kineto(tmp_path / "step.json"))
    export = _op_table(_nsys(tmp_path / "step.sqlite", text_ids=text_ids))
    pd.testing.assert_frame_equal(trace, export)
    assert export["forward"].tolist().count("aten::addmm") == 3  # AddmmBackward0 and its two mm


def test_an_emit_nvtx_step_costs_every_op_as_the_kineto_trace_of_the_step_without_dtypes(
        tmp_path: Path) -> None:
    trace, export = _ops(_kineto(tmp_path / "step.json")), _ops(_nsys(tmp_path / "step.sqlite"))
    pd.testing.assert_frame_equal(trace, export)
    # the elementwise kernels name no dtype: relu's FLOPs from its shape (64·256 = 16,384), no bytes
    relu = export.set_index("op").loc["aten::relu"]
    assert relu["flops"] == 16_384 and "input dtype not recorded" in relu["missing"]


COSTED = ("op", "input_shapes", "flops", "flops_source", "bytes", "precision", "peak_flop_per_s", "missing")


def test_an_emit_nvtx_step_gets_the_flops_per_op_of_the_kineto_trace_with_dtypes(tmp_path: Path) -> None:
    typed = _ops(_kineto(tmp_path / "step.json", typed=True), COSTED)
    export = _ops(_nsys(tmp_path / "step.sqlite"), COSTED)
    shapes = ["op", "input_shapes", "flops"]
    pd.testing.assert_frame_equal(export[shapes], typed[shapes])
    # addmm = gemm-bias(64, 256, 128): 2·64·256·128 + 64·256 = 4,210,688; relu and threshold_backward one
    # FLOP per element of [64, 256]: 16,384; each mm 2·64·128·256 = 4,194,304
    assert export["flops"].tolist() == [4_210_688, 16_384, 16_384, 4_194_304, 4_194_304]
    gemm = export["op"].isin(["aten::addmm", "aten::mm"]).to_numpy()
    # their kernels are cuBLAS sgemm (fp32 operands): the bytes and the fp32 roof of the typed trace, e.g.
    # addmm's 4·(64·128 + 128·256 + 64·256 + 256) = 230,400 B
    same = ["bytes", "precision", "peak_flop_per_s", "missing"]
    pd.testing.assert_frame_equal(export.loc[gemm, same], typed.loc[gemm, same])
    assert export.loc[gemm, "bytes"].iloc[0] == 230_400
    assert export.loc[gemm, "flops_source"].str.endswith("[dtype from kernel name]").all()
    # the elementwise kernels name none: FLOPs from the shapes, bytes NaN with the dtype the missing fact
    assert export.loc[~gemm, "bytes"].isna().all() and typed.loc[~gemm, "bytes"].notna().all()
    assert export.loc[~gemm, "missing"].str.contains("input dtype not recorded").all()
    assert export.loc[~gemm, "flops_source"].str.contains("dtype=not recorded").all()


def test_backward_kernels_take_the_forward_ops_path_through_seq(tmp_path: Path) -> None:
    frame = analyze(_nsys(tmp_path / "step.sqlite")).frame
    rows = frame[frame["level"] == "dram"].set_index("kernel_name")
    # the mm kernels run on autograd's thread, outside any range of theirs: the forward addmm's path
    assert rows.loc["ampere_sgemm_64x64_nn", "nvtx_path"] == "train_step"
    assert rows.loc["ampere_sgemm_64x64_nn", "op"] == "aten::mm"
    assert rows.loc["ampere_sgemm_64x64_tn", "op"] == "aten::addmm"
