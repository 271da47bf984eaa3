"""CUDA/HIP graphs in kineto traces: the kernels a graph replay ran, mapped on to the ops recorded while the
graph was captured (``nsroof analyze REPLAY --capture CAPTURE_TRACE``).

A replay trace shows one runtime event per replay (``cudaGraphLaunch``/``cuGraphLaunch``/``hipGraphLaunch``)
and every kernel of the graph with that event's ``correlation``, but no op: the ops ran at capture. A trace
recorded around the capture shows, on the capturing thread between ``*StreamBeginCapture`` and
``*StreamEndCapture``, one runtime launch per graph node with the op that issued it (trace_ops rules 1-2;
ROCm also writes the kernel's name in the launch's ``kernel`` arg). The rules, in this order:

1. by graph and node id: a kernel whose ``graph id``/``graph node id`` (CUPTI writes them on CUDA) was seen
   in a capture trace's own replay of its graph takes the node that kernel was matched to there;
2. by order and name: otherwise the replay's kernels (sorted by ``graph node id`` where every one has it —
   nodes are numbered as they are captured — else by start) are matched to the capture's launches of the
   same kind in order, the k-th kernel of a name to the k-th launch of that name where the capture names
   its kernels. The capture window matched is the one matching most kernels (all of them, as many as it
   has nodes, when it is the graph); of equal ones, the latest captured, and the summary says how many
   launches had a tie.

A capture window is one graph; a replayed kernel no window explains keeps its graph launch as its op.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from nsroof.importers.trace.events import Activity, ActivityArgs, Launch
from nsroof.importers.trace.op_tree import OpTree, is_graph_launch, number, shape_text, thread_key

BEGIN_CAPTURE = re.compile(r"(?:cuda|cu|hip)StreamBeginCapture")
END_CAPTURE = re.compile(r"(?:cuda|cu|hip)StreamEndCapture")
KERNEL_LAUNCH = re.compile(r"(?:cuda|cu|hip)(?:Ext)?(?:Module)?Launch(?:Cooperative)?Kernel")
COPY_LAUNCH = re.compile(r"(?:cuda|cu|hip)Mem(cpy|set)")

LINK_NODE = "capture graph node"
LINK_ORDER = "capture order"


@dataclass(frozen=True)
class Node:
    kind: str  # kernel, memcpy or memset
    name: str  # the kernel's name where the capture records it ('' otherwise)
    op: int  # op index in the capture's tree (-1: no op)


@dataclass
class Graph:
    capture: int  # index of the capture trace
    begin_us: float
    nodes: list[Node] = field(default_factory=list)


def node_kind(name: str) -> str:
    if KERNEL_LAUNCH.match(name):
        return "kernel"
    copy = COPY_LAUNCH.match(name)
    return ("memcpy" if copy.group(1) == "cpy" else "memset") if copy else ""


def capture_graphs(capture: int, launches: list[Launch], tree: OpTree) -> list[Graph]:
    """The graphs captured in one trace: per thread, the launches between a begin and an end of capture."""
    open_: dict[tuple[str, str], Graph] = {}
    out: list[Graph] = []
    for e in sorted(launches, key=lambda e: number(e.ts)):
        name, key = e.name, thread_key(e)
        if BEGIN_CAPTURE.match(name):
            open_[key] = Graph(capture, number(e.ts))
        elif END_CAPTURE.match(name):
            if key in open_:
                out.append(open_.pop(key))
        elif key in open_ and (kind := node_kind(name)):
            corr = e.args.correlation
            op = (tree.launcher(ActivityArgs(correlation=corr), {corr: e})[0] if corr is not None
                  else tree.enclosing(e))
            kernel = e.args.kernel
            open_[key].nodes.append(Node(kind, kernel if isinstance(kernel, str) and kind == "kernel" else "",
                                         op))
    return out


def _assign(activities: list[tuple[str, str]], graph: Graph) -> list[Node | None]:
    """Rule 2 for one graph: each (kind, name) to the next unused node of that kind and name; where the
    capture does not name its nodes, to the next unused one of that kind."""
    named: dict[tuple[str, str], deque[Node]] = {}
    unnamed: dict[str, deque[Node]] = {}
    for node in graph.nodes:
        if node.name:
            named.setdefault((node.kind, node.name), deque()).append(node)
        else:
            unnamed.setdefault(node.kind, deque()).append(node)
    out: list[Node | None] = []
    for kind, name in activities:
        queue = named.get((kind, name)) or unnamed.get(kind)
        out.append(queue.popleft() if queue else None)
    return out


def match_launch(activities: list[tuple[str, str]],
                 graphs: list[Graph]) -> tuple[Graph | None, list[Node | None], int]:
    """(the capture window, the node of each activity, how many other windows matched as well) for one
    replay: most kernels matched, then all of them and as many as the window has nodes, then the latest."""
    scored = []
    for g in graphs:
        nodes = _assign(activities, g)
        matched = sum(n is not None for n in nodes)
        if matched:
            scored.append(((matched, matched == len(activities) == len(g.nodes)), g.begin_us, g, nodes))
    if not scored:
        return None, [None] * len(activities), 0
    top = max(s[0] for s in scored)
    best = max((s for s in scored if s[0] == top), key=lambda s: s[1])
    return best[2], best[3], sum(1 for s in scored if s[0] == top) - 1


@dataclass
class Capture:
    """One capture trace: its op tree and the graphs it captured."""

    name: str
    tree: OpTree
    graphs: list[Graph]
    by_node: dict[tuple[int, int], Node] = field(default_factory=dict)  # rule 1: (graph id, node id) -> node
    offset: int = 0  # its ops' op_id = offset + index in its tree (ops_table)


def graph_ids(args: ActivityArgs) -> tuple[int, int] | None:
    gid, nid = args.graph_id, args.graph_node_id
    if gid is not None and nid is not None and nid > 0:
        return gid, nid
    return None


def replays(activities: list[Activity], launches: dict[int, Launch]) -> dict[int, list[int]]:
    """Graph launch correlation -> indices of its activities, in capture order (node id where every one has
    it, else as given: by start)."""
    out: dict[int, list[int]] = {}
    for i, a in enumerate(activities):
        corr = a.args.correlation
        if corr is not None and corr in launches and is_graph_launch(launches[corr].name):
            out.setdefault(corr, []).append(i)
    for corr, idx in out.items():
        ids = [graph_ids(activities[i].args) for i in idx]
        if all(ids):
            out[corr] = [i for _, i in sorted(zip([x[1] for x in ids if x], idx, strict=True))]
    return out


def learn_node_ids(cap: Capture, activities: list[Activity], kinds: list[str],
                   launches: dict[int, Launch]) -> None:
    """Rule 1's table from a capture trace's own replays of its graphs (kernels with graph/node ids)."""
    for idx in replays(activities, launches).values():
        graph, nodes, _ = match_launch([(kinds[i], activities[i].name) for i in idx], cap.graphs)
        for i, node in zip(idx, nodes, strict=True):
            ids = graph_ids(activities[i].args)
            if graph is not None and node is not None and ids:
                cap.by_node[ids] = node


def map_replays(activities: list[Activity], kinds: list[str], launches: dict[int, Launch],
                captures: list[Capture]) -> tuple[dict[int, tuple[int, int, str]], dict[str, int]]:
    """Activity index -> (capture index, op index in its tree, link) for every replayed kernel a capture
    explains; and the counts the summary states."""
    graphs = [g for c in captures for g in c.graphs]
    by_node = {k: (ci, n) for ci, c in enumerate(captures) for k, n in c.by_node.items()}
    out: dict[int, tuple[int, int, str]] = {}
    facts = {"graph_launches": 0, "mapped": 0, "unmapped": 0, "tied_launches": 0}
    for idx in replays(activities, launches).values():
        facts["graph_launches"] += 1
        ids = [graph_ids(activities[i].args) for i in idx]
        if ids and all(x in by_node for x in ids):
            for i, x in zip(idx, ids, strict=True):
                ci, known = by_node[x]  # type: ignore[index]
                if known.op >= 0:
                    out[i] = (ci, known.op, LINK_NODE)
        else:
            graph, nodes, ties = match_launch([(kinds[i], activities[i].name) for i in idx], graphs)
            facts["tied_launches"] += int(ties > 0)
            for i, node in zip(idx, nodes, strict=True):
                if graph is not None and node is not None and node.op >= 0:
                    out[i] = (graph.capture, node.op, LINK_ORDER)
        mapped = sum(1 for i in idx if i in out)
        facts["mapped"] += mapped
        facts["unmapped"] += len(idx) - mapped
    return out, facts


CAPTURE_HINT = ("pass --capture CAPTURE_TRACE (a trace recorded around the graphs' capture) to map them to "
                "the ops that issued them")


def apply(frame: Any, activities: list[Activity], launches: dict[int, Launch], tree: OpTree,
          captures: list[Capture], warnings: list[str], extra: dict[str, Any],
          capture_hint: str = CAPTURE_HINT) -> Any:
    """The kernel table with every replayed kernel a capture explains pointing at the capture's op (op_id
    past the replay's own ops: ops_table appends the captures' ops there), its shapes, module and path
    (the replay's annotations, then the capture op's)."""
    import pandas as pd

    kinds = [str(k) for k in frame["kind"]]
    mapped, facts = map_replays(activities, kinds, launches, captures)
    warnings += [f"{c.name}: no stream capture in it (no *StreamBeginCapture ... *StreamEndCapture on a "
                 "thread): record the capture trace around the graphs' capture"
                 for c in captures if not c.graphs]
    if not facts["graph_launches"]:
        if captures:
            warnings.append("no graph launch (cudaGraphLaunch, hipGraphLaunch) in the trace: "
                            "--capture maps nothing")
        return frame
    offset = len(tree.ops)
    for c in captures:
        c.offset, offset = offset, offset + len(c.tree.ops)
    columns = {c: frame[c].tolist()
               for c in ("op_id", "op_link", "op", "input_shapes", "module", "nvtx_ranges")}
    for i, (ci, op, link) in mapped.items():
        cap = captures[ci]
        replay_path = list(columns["nvtx_ranges"][i])
        dims = cap.tree.args[op].input_dims
        columns["op_id"][i] = cap.offset + op
        columns["op_link"][i] = link
        columns["op"][i] = cap.tree.ops[op].name
        columns["input_shapes"][i] = shape_text(dims)
        captured = cap.tree.path(op)
        columns["module"][i] = cap.tree.module(captured)
        columns["nvtx_ranges"][i] = replay_path + [n for n in captured if n not in replay_path]
    frame = frame.copy()
    for col, values in columns.items():
        frame[col] = (pd.array(values, dtype="Int64") if col == "op_id"
                      else pd.Series(values, dtype=object, index=frame.index))
    frame["nvtx_path"] = pd.Series(["/".join(p) for p in columns["nvtx_ranges"]], dtype=object,
                                   index=frame.index)
    extra["graphs"] = facts | {"captures": [c.name for c in captures],
                               "captured_graphs": sum(len(c.graphs) for c in captures)}
    unmapped = facts["unmapped"]
    if not captures:
        warnings.append(f"{unmapped} GPU activities of {facts['graph_launches']} graph launch(es) have the "
                        f"launch as their op: {capture_hint}")
    elif unmapped:
        warnings.append(f"{unmapped} of {unmapped + facts['mapped']} graph-replayed GPU activities match no "
                        f"launch captured in {', '.join(c.name for c in captures)}: they keep the graph "
                        "launch as their op")
    if facts["tied_launches"]:
        warnings.append(f"{facts['tied_launches']} graph launch(es) match several captured graphs equally "
                        "(same kernels): the latest captured was taken")
    return frame


def ops_table(tree: OpTree, source: str, captures: list[Capture]) -> Any:
    """The ops table of a trace, the capture traces' ops appended under the same source (op ids past the
    trace's own), each row saying which file recorded it."""
    import pandas as pd

    tables = [tree.table(source)]
    for c in captures:
        t = c.tree.table(source, recorded_in=c.name)
        for col in ("op_id", "parent_op_id", "forward_op_id"):
            t[col] = t[col] + c.offset
        tables.append(t)
    return pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]
