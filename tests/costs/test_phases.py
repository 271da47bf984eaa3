"""Prefill or decode (nsroof.costs.phases): an engine's step annotation says it; else the token embedding
that starts each forward pass of a generate() run ([batch, query length] indices, 1 = decode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nsroof.costs.phases import engine_phase, phases, query_length, token_count


def test_engine_step_annotations() -> None:
    # vLLM's short form: 1 context request (888 tokens), no generation
    assert engine_phase("execute_context_1(888_788544)_generation_0(0)/aten::mm") == "prefill"
    # 32 generation requests of one token each
    assert engine_phase("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)"
                        ) == "decode"
    assert engine_phase("execute_context_2(100)_generation_8(8)") == "mixed"
    assert engine_phase("model/layer0") == ""


def test_query_length_and_tokens_of_an_embedding_call() -> None:
    assert query_length("[[32000, 64], [4, 7]]") == 7  # indices [batch 4, 7 tokens]: a prompt pass
    assert token_count("[[32000, 64], [4, 7]]") == 28  # 4 × 7
    assert query_length("[[32000, 64], [4, 1]]") == 1
    assert query_length("[[32000, 64], [28]]") is None  # flattened: batch and length not told apart
    assert query_length("") is None


def test_a_generate_run_splits_at_each_forward_pass() -> None:
    """embedding [2, 5] (prefill) -> mm -> embedding [2, 1] (decode) -> mm, mm; rows out of time order on
    purpose: the walk follows start_us."""
    ops = ["aten::mm", "aten::embedding", "aten::mm", "aten::embedding", "aten::mm", "aten::mm"]
    shapes = ["", "[[100, 8], [2, 1]]", "", "[[100, 8], [2, 5]]", "", ""]
    starts = [15.0, 10.0, 2.0, 0.0, 11.0, -1.0]
    got = phases(ops, shapes, [""] * 6, np.array(starts))
    # -1 (before any lookup): ''; 0 prefill lookup, 2 its mm; 10 decode lookup, 11 and 15 its mms
    assert got.tolist() == ["decode", "decode", "prefill", "prefill", "decode", ""]


def test_no_decode_pass_is_no_generate_run() -> None:
    """A training step embeds whole sequences: no phase."""
    got = phases(["aten::embedding", "aten::mm"], ["[[100, 8], [8, 128]]", ""], ["", ""],
                 np.array([0.0, 1.0]))
    assert got.tolist() == ["", ""]


def test_a_generate_trace_tells_prefill_rows_from_decode_rows(tmp_path: Path) -> None:
    """A CPU trace of a prompt pass (indices [2, 5]) and one decode step ([2, 1]), each an embedding then a
    matmul: the report's rows and the op-level rows carry their phase."""
    import json

    from nsroof.pipeline import analyze

    def op(name: str, ts: float, dims: list[Any], types: list[str], ext: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 10.0,
                "args": {"External id": ext, "Input Dims": dims, "Input type": types}}

    events = []
    for i, length in enumerate((5, 1)):
        t = 100.0 * i
        events.append(op("aten::embedding", t, [[100, 8], [2, length], [], [], []],
                         ["float", "long int", "Scalar", "Scalar", "Scalar"], 2 * i + 1))
        events.append(op("aten::mm", t + 20, [[2 * length, 8], [8, 100]], ["float", "float"], 2 * i + 2))
    path = tmp_path / "generate.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    report = analyze([path])
    rows = report.frame.drop_duplicates("kernel_id")
    assert sorted(zip(rows["op"], rows["phase"], strict=True)) == [
        ("aten::embedding", "decode"), ("aten::embedding", "prefill"), ("aten::mm", "decode"),
        ("aten::mm", "prefill")]
    assert sorted(zip(report.ops["op"], report.ops["phase"], strict=True)) == [
        ("aten::embedding", "decode"), ("aten::embedding", "prefill"), ("aten::mm", "decode"),
        ("aten::mm", "prefill")]
