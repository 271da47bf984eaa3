"""The summary's op-level lines: the calls of one op and shape together, their kernels' time and their
formula's whole FLOPs (nsroof.report.op_tables.op_lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsroof.pipeline import analyze, ops_path
from nsroof.report.summary import render
from nsroof.roofs.machines import Machine

GPU = Machine(name="test-gpu", source="file", peak_flop_per_s={"fp32": 1e13}, simt_flop_per_s={"fp32": 1e13},
              bandwidth_bytes_per_s={"dram": 1e12})


def _x(cat: str, name: str, ts: float, dur: float, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(tmp_path: Path) -> Path:
    """Two calls of aten::mm (8×16 · 16×32), each a GEMM kernel (10 µs) and its split-K reduce (10 µs)."""
    events = []
    for call in range(2):
        t = 1000.0 * call
        events.append(_x("cpu_op", "aten::mm", t, 50.0,
                         **{"External id": call, "Input Dims": [[8, 16], [16, 32]],
                            "Input type": ["float", "float"]}))
        for n, name in enumerate(("ampere_sgemm_32x32", "splitKreduce_kernel")):
            corr = 10 * call + n
            events += [_x("cuda_runtime", "cudaLaunchKernel", t + 1 + n, 1.0, correlation=corr,
                          **{"External id": call}),
                       _x("kernel", name, t + 100 + 20 * n, 10.0, pid=0, tid=7, correlation=corr)]
    path = tmp_path / "mm.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_the_summary_shows_ops_with_their_whole_flops_over_their_kernels_time(tmp_path: Path) -> None:
    report = analyze(_trace(tmp_path), machine=GPU)
    line = next(x for x in render(report).splitlines() if x.strip().startswith("aten::mm"))
    # gemm(m=8, n=32, k=16) = 2·8·32·16 = 8,192 FLOP per call; 2 calls over 2 × (10 + 10) µs = 40 µs:
    # 16,384 / 40e-6 = 4.1e8 FLOP/s; 2 calls, 4 kernels; the shapes the group shares shown
    assert line.split()[1:8] == ["8x16", "16x32", "40", "us", "2", "4", "4.1e+08"]
    out = report.write(tmp_path / "r.parquet")
    assert ops_path(out).name == "r.ops.parquet" and ops_path(out).is_file()


def test_the_report_and_its_op_rows_replace_the_old_pair_only_when_both_are_written(
        tmp_path: Path, monkeypatch: Any) -> None:
    import pandas as pd
    import pytest

    from nsroof.errors import InputError
    from nsroof.report import parquet

    report = analyze(_trace(tmp_path), machine=GPU)
    out = report.write(tmp_path / "r.parquet")
    assert (len(pd.read_parquet(out)) == len(report.frame)
            and len(pd.read_parquet(ops_path(out))) == len(report.ops))
    before = {p.name: p.read_bytes() for p in (out, ops_path(out))}
    write_table = parquet.pq.write_table

    def failing_ops(table: Any, where: Any, **options: Any) -> None:
        if "ops.parquet" in str(where):  # the op rows' temporary file
            raise OSError(28, "No space left on device")
        write_table(table, where, **options)

    monkeypatch.setattr(parquet.pq, "write_table", failing_ops)
    report.metadata = {**report.metadata, "note": "a second run"}  # files that differ from the first
    with pytest.raises(InputError) as error:
        report.write(out)
    # the failing file named
    assert Path(error.value.path).name == "r.ops.parquet" and "No space left" in str(error.value)
    assert {p.name: p.read_bytes() for p in (out, ops_path(out))} == before  # neither replaced
    # no temporaries
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mm.json", "r.ops.parquet", "r.parquet"]
