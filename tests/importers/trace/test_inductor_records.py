"""What nsroof.profile recorded of Inductor's kernels, read back (nsroof.importers.trace.inductor): module
paths of a compiled graph's calls, the steps torch.compile compiled in left out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsroof.importers.trace import inductor


def test_a_kernel_module_reads_like_an_eager_one() -> None:
    # torch.compile(step): the stack names the root module's class
    assert inductor.module_path({"root": "Llama", "module": "layers.0.mlp"}, "") == "Llama.layers.0.mlp"
    # torch.compile(model): the root is the compiled module, named by the range the row sits in
    assert inductor.module_path({"root": "", "module": "layers.0.mlp"}, "Llama") == "Llama.layers.0.mlp"
    assert inductor.module_path({"root": "", "module": ""}, "Llama") == "Llama"


def _frame(names: list[str], modules: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"op": names, "module": modules})


def test_each_call_of_a_reused_kernel_gets_its_own_module_from_the_call_order() -> None:
    # one MLP kernel reused by both layers (Inductor names identical code once), an mm beside each
    calls = {"0.0": [{"op": "aten::mm", "root": "", "module": "layers.0.mlp.up"},
                     {"op": "graph_0_cpp_fused_silu_0", "root": "", "module": "layers.0.mlp"},
                     {"op": "aten::mm", "root": "", "module": "layers.1.mlp.up"},
                     {"op": "graph_0_cpp_fused_silu_0", "root": "", "module": "layers.1.mlp"}]}
    names = ["aten::mm", "aten::view", "graph_0_cpp_fused_silu_0", "aten::mm", "graph_0_cpp_fused_silu_0",
             "aten::mm", "graph_0_cpp_fused_silu_0", "aten::mm", "graph_0_cpp_fused_silu_0"]
    frame = _frame(names, ["Net"] * 9)
    starts = np.arange(9, dtype="float64")
    # a run of the graph, then a region whose calls are not a recorded sequence (three of the four): left as
    # it was, and counted
    frame, done, matched, unmatched = inductor.call_modules(frame, starts, [(0, 4.5), (5, 7.5)], calls)
    assert (matched, unmatched) == (1, 1)
    assert frame["module"].tolist()[:5] == ["Net.layers.0.mlp.up", "Net", "Net.layers.0.mlp",
                                            "Net.layers.1.mlp.up", "Net.layers.1.mlp"]
    assert frame["module"].tolist()[5:] == ["Net"] * 4
    assert done.tolist() == [True, False] + [True] * 3 + [False] * 4


def test_a_kernel_outside_a_matched_run_takes_its_record_module() -> None:
    frame = _frame(["graph_0_cpp_fused_relu_0", "aten::mm"], ["Net", "Net"])
    records = {"graph_0_cpp_fused_relu_0": {"root": "", "module": "block.fc1"}}
    out = inductor.with_kernel_modules(frame, records, "op", done=np.array([False, False]))
    assert out["module"].tolist() == ["Net.block.fc1", "Net"]


def test_the_steps_torch_compile_compiled_in_are_left_out() -> None:
    frame = _frame(["a", "b", "c", "d"], [""] * 4)
    starts = np.array([1.0, 15.0, 25.0, 35.0])
    facts: dict = {}
    # steps end at 10, 20, 30, 40; compilations started in steps 1 and 3 (a recompile)
    out, kept = inductor.without_compile_steps(frame, starts, [10.0, 20.0, 30.0, 40.0],
                                               [(0.5, 2.0), (21, 24)], facts)
    assert out["op"].tolist() == ["b", "d"] and kept.tolist() == [15.0, 35.0]
    assert facts == {"compile_steps": [1, 3], "compile_rows_left_out": 2}
    # no step marks: the rows inside the compilations (the compiler's own op calls)
    out, _ = inductor.without_compile_steps(frame, starts, [], [(0.5, 2.0), (30, 36)], facts)
    assert out["op"].tolist() == ["b", "c"] and facts["compile_rows_left_out"] == 2


def test_only_a_profile_that_asked_leaves_compile_steps_out() -> None:
    assert inductor.skips_compile_steps({"steps": {"compile_steps": "skip"}})
    assert not inductor.skips_compile_steps({"steps": {"compile_steps": "keep"}})
    assert not inductor.skips_compile_steps({})  # a trace nsroof did not record
    assert inductor.extended_steps({"steps": {"compile_extended": 2}}) == 2
    assert inductor.extended_steps({"steps": {"compile_extended": True}}) == 0
