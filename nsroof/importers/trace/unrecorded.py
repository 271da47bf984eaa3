"""Kernel launches whose GPU activity a trace did not record.

torch.profiler records the CPU side (ops, the runtime's `cudaLaunchKernel` calls) under ProfilerActivity.CPU
and the kernels themselves only under ProfilerActivity.CUDA. A trace of launches without kernel events is a
GPU run whose GPU side is missing, not a CPU run: its ops' CPU time is no kernel time. So each launch is a
kernel row of unknown duration (NaN, `duration_missing` saying why), linked to the op that issued it, and the
importer warns once. Launches inside a stream capture (`*StreamBeginCapture` ... `*StreamEndCapture` on the
same thread) run nothing and are not counted."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from nsroof.frames.arrays import nonnegative_or_missing
from nsroof.importers.kernel_table import empty_identity
from nsroof.importers.trace.events import ActivityArgs, Launch
from nsroof.importers.trace.graphs import BEGIN_CAPTURE, END_CAPTURE, KERNEL_LAUNCH
from nsroof.importers.trace.op_tree import OpTree, is_graph_launch, number, shape_text, thread_key

RECORD_HINT = "record with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"


def kernel_launches(launches: list[Launch]) -> list[Launch]:
    """The runtime/driver calls that launch kernels or graphs, outside any stream capture, in time order."""
    capturing: set[tuple[str, str]] = set()
    out: list[Launch] = []
    for e in sorted(launches, key=lambda e: number(e.ts)):
        key = thread_key(e)
        if BEGIN_CAPTURE.match(e.name):
            capturing.add(key)
        elif END_CAPTURE.match(e.name):
            capturing.discard(key)
        elif key not in capturing and (KERNEL_LAUNCH.match(e.name) or is_graph_launch(e.name)):
            out.append(e)
    return out


def missing_fact(launches: list[Launch]) -> str:
    """What the trace lacks, in one phrase (the warning and every row's `duration_missing`)."""
    names = Counter(e.name for e in launches)
    calls = ", ".join(f"{name} ×{count}" for name, count in names.most_common(3))
    return (f"the trace has {len(launches)} kernel launch(es) ({calls}) but no GPU kernel events: the GPU "
            f"activity was not recorded; {RECORD_HINT}")


def launch_rows(launches: list[Launch], tree: OpTree, devices: dict[int, tuple[str, str]],
                name: str) -> tuple[pd.DataFrame, np.ndarray]:
    """One kernel row per launch: its op (the kernel table's op_id, as a recorded kernel's), the device
    when the trace lists one model, and no duration."""
    n = len(launches)
    linked = [tree.launcher(ActivityArgs(correlation=e.args.correlation), {e.args.correlation: e})
              if e.args.correlation is not None else (tree.enclosing(e), "enclosing op") for e in launches]
    facts = tree.all_path_facts()
    js = [j for j, _ in linked]
    models = set(devices.values())
    device, cc = models.pop() if len(models) == 1 else ("", "")
    cols = empty_identity(n)
    cols["source"] = [name] * n
    cols["kernel_name"] = cols["function"] = [f"{e.name}: kernel not recorded" for e in launches]
    cols["device"], cols["cc"] = [device] * n, [cc] * n
    cols["nvtx_ranges"] = [facts[j][0] if j >= 0 else [] for j in js]
    cols["nvtx_path"] = [facts[j][1] if j >= 0 else "" for j in js]
    frame = pd.DataFrame(cols, copy=False)
    frame["kind"] = pd.Series(["kernel"] * n, dtype=object)
    frame["op_id"] = nonnegative_or_missing(np.array(js, dtype=np.int64).reshape(-1))
    frame["op_link"] = pd.Series([link for _, link in linked], dtype=object)
    frame["op"] = pd.Series([tree.ops[j].name if j >= 0 else "" for j in js], dtype=object)
    frame["input_shapes"] = pd.Series([shape_text(tree.args[j].input_dims) if j >= 0 else "" for j in js],
                                      dtype=object)
    frame["module"] = pd.Series([facts[j][2] if j >= 0 else "" for j in js], dtype=object)
    frame["gpu__time_duration.sum"] = np.full(n, np.nan)
    frame["duration_missing"] = pd.Series([missing_fact(launches)] * n, dtype=object)
    frame["start_us"] = np.full(n, np.nan)
    return frame, np.array([number(e.ts) for e in launches], dtype="float64")
