"""Inductor's own estimates for the Triton kernels an imported trace launches (kernel_flop, kernel_num_gb):
from each launch record, else from the generated kernel file it points to (nsroof.importers.trace.
inductor_cache), into the kernel table's trace_flops / trace_bytes / trace_cost_source."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nsroof.importers.trace import graphs, inductor_cache
from nsroof.importers.trace.events import OpArgs
from nsroof.importers.trace.op_tree import OpTree, number


def read(frame: pd.DataFrame, tree: OpTree, captures: Sequence[graphs.Capture]) -> pd.DataFrame:
    """The kernel table with the estimates of the Triton kernels the trace's ops (or its captures') launch."""
    return estimates(frame, launch_args(tree, captures), triton_ops(tree))


def launch_args(tree: OpTree, captures: Sequence[graphs.Capture]) -> Callable[[int], OpArgs | None]:
    """The recorded args of the op with op_id j: the trace's own, or a capture trace's (past the trace's own
    ops, as graphs.ops_table numbers them)."""
    copied = {op_id: c.tree.args[row] for c in captures for copy in c.copies
              for row, op_id in copy.op_ids().items()}

    def of(j: int) -> OpArgs | None:
        if 0 <= j < len(tree.args):
            return tree.args[j]
        if j in copied:  # a replay's copy of a captured op
            return copied[j]
        for c in captures:  # (an offset is set where a replay was mapped: graphs.apply)
            if c.offset >= len(tree.args) and 0 <= j - c.offset < len(c.tree.args):
                return c.tree.args[j - c.offset]
        return None

    return of


def triton_ops(tree: OpTree) -> np.ndarray:
    """Which of the trace's own ops launch a Triton kernel (their record says kernel_backend triton)."""
    return np.fromiter((a.kernel_backend == "triton" for a in tree.args), dtype=bool, count=len(tree.args))


def estimates(frame: pd.DataFrame, args_of: Callable[[int], OpArgs | None],
                       own_triton: np.ndarray | None = None) -> pd.DataFrame:
    """Inductor's own estimates for the Triton kernels it launches: its launch record (a ``cpu_op`` named by
    the kernel, ``kernel_backend`` triton) carries ``kernel_flop`` (FLOP) and ``kernel_num_gb`` (10^9 bytes
    its buffers move) when ``torch._inductor.config.benchmark_kernel`` was on at compile time (nsroof profile
    turns it on); so does the generated kernel file's inductor_meta, read where the record points to a file
    that is here (inductor_cache). Read into trace_flops / trace_bytes / trace_cost_source (nsroof.schema);
    the costing (nsroof.costs.attribution) prefers them to an op formula. `args_of`: the recorded args of
    the op a kernel row's op_id names (launch_args); `own_triton`: which of the trace's own ops launch a
    Triton kernel (triton_ops): only their rows and those of other ops (a capture's) are looked at."""
    n = len(frame)
    flops, nbytes, source = np.full(n, np.nan), np.full(n, np.nan), [""] * n
    files: dict[Any, dict[str, Any]] = {}
    op_ids = frame["op_id"].astype("Int64").fillna(-1).to_numpy(dtype="int64")
    looked = (frame["kind"].to_numpy(dtype=object) == "kernel") & (op_ids >= 0)
    if own_triton is not None:
        own = looked & (op_ids < len(own_triton))
        looked[own] = own_triton[op_ids[own]]
    for i in np.flatnonzero(looked).tolist():
        args = args_of(int(op_ids[i]))
        if args is None or args.kernel_backend != "triton":
            continue
        flops[i], gb = number(args.kernel_flop), number(args.kernel_num_gb)
        stated = [k for k, v in (("kernel_flop", flops[i]), ("kernel_num_gb", gb)) if v == v]
        if not stated and args.extras is not None:  # the record states none: its kernel file may
            path = args.extras.kernel_file
            if path not in files:
                files[path] = inductor_cache.facts(path)
            flops[i], gb = number(files[path].get("kernel_flop")), number(files[path].get("kernel_num_gb"))
            stated = [f"{k} (kernel file)" for k, v in (("kernel_flop", flops[i]), ("kernel_num_gb", gb))
                      if v == v]
        nbytes[i] = gb * 1e9
        source[i] = "inductor:" + ", ".join(stated) if stated else ""
    frame["trace_flops"], frame["trace_bytes"] = flops, nbytes
    frame["trace_cost_source"] = pd.Series(source, dtype=object)
    return frame
