"""CUDA/HIP graphs in kineto traces: the kernels a graph replay ran, mapped on to the ops recorded while the
graph was captured (``nsroof analyze REPLAY --capture CAPTURE_TRACE``).

A replay trace shows one runtime event per replay (``cudaGraphLaunch``/``cuGraphLaunch``/``hipGraphLaunch``)
and every kernel of the graph with that event's ``correlation``, but no op: the ops ran at capture. A trace
recorded around the capture shows, on the capturing thread between ``*StreamBeginCapture`` and
``*StreamEndCapture``, one runtime launch per graph node with the op that issued it (trace_ops rules 1-2;
ROCm also writes the kernel's name, grid and block in the launch's args). The rules, in this order:

1. by graph and node id: a kernel whose ``graph id``/``graph node id`` (CUPTI writes them on CUDA) was seen
   in a capture trace's own replay of its graph takes the node that kernel was matched to there;
2. by order, name and launch shape: otherwise the replay's kernels (sorted by ``graph node id`` where every
   one has it — nodes are numbered as they are captured — else by start) are matched to the capture's
   launches of the same kind in order, the k-th kernel of a name to the k-th launch of that name where the
   capture names its kernels. The capture window matched is the best by, in turn: the kernels matched; all
   of them, as many as it has nodes (it is the graph); the kernels launched with the grid and block the
   capture recorded for their node (ROCm) or, where it records none (CUDA), with the name, grid and block
   of the kernel the node's op (same name, shapes, dtypes) launched in an eager run in the capture trace
   (the warm-up before each capture): this tells apart graphs of the same kernels at other sizes;
3. ties: when several windows match equally and captured the same ops with the same shapes (one cost
   whichever: the layers of piecewise graphs), the launches take them in capture order, the k-th such
   launch the k-th window, cycling (piecewise graphs are captured and replayed layer by layer; replays of
   one ``graph id`` take one window). When their ops or shapes differ, the latest captured is taken and the
   launch counts as ambiguous (the summary says how many). A cost is never split between windows.

Every replay carries the full cost of the ops it replays: each replay gets its own copy of the captured ops
its kernels map to (with their enclosing ops), so an op's kernels are those of one replay, never the
kernels of all the replays of its graph (nsroof.costs.attribution would share the cost among them). The
copies are ops of the replay trace's ops table (``recorded_in``: the capture trace), their path the
replay's annotations, then the capture op's.

A capture window is one graph; a replayed kernel no window explains keeps its graph launch as its op.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

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
    dims: str = ""  # the launch's grid and block where the capture records them (ROCm), '' otherwise
    # where the capture names no kernel (CUDA): "name|grid/block" of the kernel its op launched when it ran
    # eagerly in the capture trace (learn_eager_kernels), '' when unknown
    expect: str = ""


@dataclass
class Graph:
    capture: int  # index of the capture trace
    begin_us: float
    nodes: list[Node] = field(default_factory=list)
    ops: tuple[tuple[str, str, str], ...] = ()  # its nodes' ops (name, shapes, dtypes): what costs them


# One replayed GPU activity as matching reads it: (kind, kernel name, grid and block or '').
Signature = tuple[str, str, str]


def launch_dims(grid: Any, block: Any) -> str:
    """A launch's grid and block as one text, compared as given ('' unless both are three values)."""
    if type(grid) is list and type(block) is list and len(grid) == len(block) == 3:  # per kernel: cheap
        return f"{grid[0]}x{grid[1]}x{grid[2]}/{block[0]}x{block[1]}x{block[2]}"
    return ""


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
            named = isinstance(kernel, str) and kind == "kernel"
            open_[key].nodes.append(Node(kind, kernel if named else "", op,
                                         launch_dims(e.args.grid, e.args.block) if named else ""))
    for g in out:
        g.ops = tuple(op_key(tree, n.op) for n in g.nodes)
    return out


def op_key(tree: OpTree, op: int) -> tuple[str, str, str]:
    """What an op's cost reads: its name, shapes and dtypes."""
    if op < 0:
        return "", "", ""
    return tree.ops[op].name, shape_text(tree.args[op].input_dims), str(tree.args[op].input_type)


def _assign(activities: list[Signature], graph: Graph) -> list[Node | None]:
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
    for kind, name, _ in activities:
        queue = named.get((kind, name)) or unnamed.get(kind)
        out.append(queue.popleft() if queue else None)
    return out


def best_windows(activities: list[Signature],
                 graphs: list[Graph]) -> list[tuple[Graph, list[Node | None]]]:
    """Rule 2 for one replay: the capture windows that match it best, equally, in capture order, each with
    the node of each activity ([] when none matches a kernel)."""
    scored = []
    launched = [f"{name}|{dims}" if dims else "" for _, name, dims in activities]
    for g in graphs:
        nodes = _assign(activities, g)
        matched = sum(n is not None for n in nodes)
        if matched:
            shaped = sum(1 for a, seen, n in zip(activities, launched, nodes, strict=True)
                         if n is not None and _launched_as(n, a[2], seen))
            scored.append(((matched, matched == len(activities) == len(g.nodes), shaped), g, nodes))
    if not scored:
        return []
    top = max(s[0] for s in scored)
    return sorted(((g, nodes) for score, g, nodes in scored if score == top), key=lambda t: t[0].begin_us)


def _launched_as(node: Node, dims: str, seen: str) -> bool:
    """Whether a replayed kernel ran with the grid and block its node was captured with (ROCm) or, where the
    capture records none, as its op's eager run launched it (`seen`: "name|dims")."""
    return node.dims == dims if node.dims else bool(node.expect) and node.expect == seen


def match_launch(activities: list[Signature],
                 graphs: list[Graph]) -> tuple[Graph | None, list[Node | None], int]:
    """(the capture window, the node of each activity, how many other windows matched as well) for one
    replay, a tie going to the latest captured (rule 3's pick where tied windows differ)."""
    tied = best_windows(activities, graphs)
    if not tied:
        return None, [None] * len(activities), 0
    return tied[-1][0], tied[-1][1], len(tied) - 1


@dataclass
class Copies:
    """The copies of a capture's ops one replay ran: the capture's op indices (sorted, enclosing ops included)
    and the op_id of the first copy (the others follow in that order), under the replay's path."""

    rows: np.ndarray
    first_id: int
    path: list[str]

    def op_ids(self) -> dict[int, int]:
        """The capture's op index -> the op_id of its copy."""
        rows = self.rows.tolist()
        return dict(zip(rows, range(self.first_id, self.first_id + len(rows)), strict=True))


@dataclass
class Capture:
    """One capture trace: its op tree and the graphs it captured."""

    name: str
    tree: OpTree
    graphs: list[Graph]
    by_node: dict[tuple[int, int], Node] = field(default_factory=dict)  # rule 1: (graph id, node id) -> node
    offset: int = 0  # its ops' op_id = offset + index in its tree (ops_table)
    copies: list[Copies] = field(default_factory=list)  # each replay's copies of its ops (ops_table)
    paths: dict[int, list[str]] = field(default_factory=dict)  # an op's annotation path, once per op

    def path(self, op: int) -> list[str]:
        if op not in self.paths:
            self.paths[op] = self.tree.path(op)
        return self.paths[op]


def graph_ids(args: ActivityArgs) -> tuple[int, int] | None:
    gid, nid = args.graph_id, args.graph_node_id
    if gid is not None and nid is not None and nid > 0:
        return gid, nid
    return None


def replays(activities: list[Activity], launches: dict[int, Launch]) -> dict[int, list[int]]:
    """Graph launch correlation -> indices of its activities, in capture order (node id where every one has
    it, else as given: by start); the launches in the order of their first activity."""
    out: dict[int, list[int]] = {}
    names = {n for n in {launch.name for launch in launches.values()} if is_graph_launch(n)}
    if not names:
        return out
    graph_launches = {corr for corr, launch in launches.items() if launch.name in names}
    for i, a in enumerate(activities):
        corr = a.args.correlation
        if corr in graph_launches:
            out.setdefault(corr, []).append(i)
    for corr, idx in out.items():
        ids = [graph_ids(activities[i].args) for i in idx]
        if all(ids):
            out[corr] = [i for _, i in sorted(zip([x[1] for x in ids if x], idx, strict=True))]
    return out


def signatures(activities: list[Activity], kinds: list[str]) -> list[Signature]:
    return [(k, a.name, launch_dims(a.args.grid, a.args.block))
            for a, k in zip(activities, kinds, strict=True)]


def learn_node_ids(cap: Capture, activities: list[Activity], kinds: list[str],
                   launches: dict[int, Launch]) -> None:
    """Rule 1's table from a capture trace's own replays of its graphs (kernels with graph/node ids)."""
    sig = signatures(activities, kinds)
    for idx in replays(activities, launches).values():
        graph, nodes, _ = match_launch([sig[i] for i in idx], cap.graphs)
        for i, node in zip(idx, nodes, strict=True):
            ids = graph_ids(activities[i].args)
            if graph is not None and node is not None and ids:
                cap.by_node[ids] = node


def learn_eager_kernels(cap: Capture, activities: list[Activity], kinds: list[str],
                        launches: dict[int, Launch]) -> None:
    """Rule 2's launch shapes where the capture records none (CUDA's launches name no kernel, grid or
    block): the kernels an op of the same name, shapes and dtypes launched when it ran eagerly in the capture
    trace (the warm-up run before each capture), in order, given to that op's nodes when as many."""
    per_call: dict[int, list[str]] = {}
    for a, kind in zip(activities, kinds, strict=True):
        corr = a.args.correlation
        launch = launches.get(corr) if corr is not None else None
        dims = launch_dims(a.args.grid, a.args.block)
        if kind != "kernel" or launch is None or is_graph_launch(launch.name) or not dims:
            continue
        j, _ = cap.tree.launcher(a.args, launches)
        if j >= 0:
            per_call.setdefault(j, []).append(f"{a.name}|{dims}")
    eager: dict[tuple[str, str, str], list[str]] = {}
    for j, kernels in per_call.items():  # the first call of each name, shapes and dtypes
        eager.setdefault(op_key(cap.tree, j), kernels)
    for g in cap.graphs:
        by_op: dict[int, list[int]] = {}
        for i, n in enumerate(g.nodes):
            if n.kind == "kernel" and not n.name and n.op >= 0:
                by_op.setdefault(n.op, []).append(i)
        for op, at in by_op.items():
            seen = eager.get(op_key(cap.tree, op), [])
            if len(seen) == len(at):
                for i, expect in zip(at, seen, strict=True):
                    g.nodes[i] = replace(g.nodes[i], expect=expect)


@dataclass
class _Picker:
    """Rule 3: which of several equally matching windows a replay takes, and the counts the summary states."""

    facts: dict[str, int]
    taken: dict[tuple[int, ...], int] = field(default_factory=dict)  # tied windows -> replays that took one
    of_graph: dict[tuple[tuple[int, ...], int], int] = field(default_factory=dict)  # (tied, graph id) -> pick

    def pick(self, tied: list[tuple[Graph, list[Node | None]]], graph_id: int | None
             ) -> tuple[Graph, list[Node | None]]:
        if len(tied) == 1:
            return tied[0]
        self.facts["tied_launches"] += 1
        if len({g.ops for g, _ in tied}) > 1:  # other ops or shapes behind the same kernels
            self.facts["ambiguous_launches"] += 1
            return tied[-1]
        key = tuple(id(g) for g, _ in tied)
        if graph_id is not None and (key, graph_id) in self.of_graph:
            return tied[self.of_graph[key, graph_id]]
        k = self.taken.get(key, 0)
        self.taken[key] = k + 1
        if graph_id is not None:
            self.of_graph[key, graph_id] = k % len(tied)
        return tied[k % len(tied)]


def map_replays(activities: list[Activity], kinds: list[str], launches: dict[int, Launch],
                captures: list[Capture]) -> tuple[dict[int, tuple[int, int, str, int]], dict[str, int]]:
    """Activity index -> (capture index, op index in its tree, link, replay number) for every replayed kernel
    a capture explains; and the counts the summary states."""
    graphs = [g for c in captures for g in c.graphs]
    by_node = {k: (ci, n) for ci, c in enumerate(captures) for k, n in c.by_node.items()}
    out: dict[int, tuple[int, int, str, int]] = {}
    facts = {"graph_launches": 0, "mapped": 0, "unmapped": 0, "tied_launches": 0, "ambiguous_launches": 0}
    replayed = replays(activities, launches)
    # the kernels' signatures match replays to captured graphs: none to match, none computed
    sig = signatures(activities, kinds) if replayed and graphs else []
    picker = _Picker(facts)
    ranked: dict[tuple[Signature, ...], list[tuple[Graph, list[Node | None]]]] = {}  # a sequence ranked once
    for r, idx in enumerate(replayed.values()):
        facts["graph_launches"] += 1
        ids = [graph_ids(activities[i].args) for i in idx]
        if ids and all(x in by_node for x in ids):
            for i, x in zip(idx, ids, strict=True):
                ci, known = by_node[x]  # type: ignore[index]
                if known.op >= 0:
                    out[i] = (ci, known.op, LINK_NODE, r)
        elif graphs:
            key = tuple(sig[i] for i in idx)
            if key not in ranked:
                ranked[key] = best_windows(list(key), graphs)
            if ranked[key]:
                one_graph = {x[0] for x in ids if x}
                graph, nodes = picker.pick(ranked[key], one_graph.pop() if len(one_graph) == 1 else None)
                for i, node in zip(idx, nodes, strict=True):
                    if node is not None and node.op >= 0:
                        out[i] = (graph.capture, node.op, LINK_ORDER, r)
        mapped = sum(1 for i in idx if i in out)
        facts["mapped"] += mapped
        facts["unmapped"] += len(idx) - mapped
    return out, facts


def _closure(tree: OpTree, ops: set[int]) -> np.ndarray:
    """The ops and every op enclosing them, sorted."""
    seen: set[int] = set()
    for op in ops:
        while op >= 0 and op not in seen:
            seen.add(op)
            op = tree.parent[op]
    return np.array(sorted(seen), dtype="int64")


def copy_ops(mapped: dict[int, tuple[int, int, str, int]], captures: list[Capture], first_id: int,
             replay_paths: list[list[str]]) -> dict[int, int]:
    """Each replay's copies of the captured ops its kernels map to (into each capture's `copies`, op ids
    from first_id on); the op_id of each mapped activity."""
    per_replay: dict[tuple[int, int], set[int]] = {}
    first: dict[tuple[int, int], int] = {}  # an activity of each: the replay's path is that of its launch
    for i, (ci, op, _, r) in mapped.items():
        per_replay.setdefault((r, ci), set()).add(op)
        first.setdefault((r, ci), i)
    made: dict[tuple[int, int], Copies] = {}
    for (r, ci), ops in sorted(per_replay.items()):
        rows = _closure(captures[ci].tree, ops)
        made[r, ci] = Copies(rows, first_id, list(replay_paths[first[r, ci]]))
        captures[ci].copies.append(made[r, ci])
        first_id += len(rows)
    ids = {key: copies.op_ids() for key, copies in made.items()}
    return {i: ids[r, ci][op] for i, (ci, op, _, r) in mapped.items()}


CAPTURE_HINT = ("pass --capture CAPTURE_TRACE (a trace recorded around the graphs' capture) to map them to "
                "the ops that issued them")


def apply(frame: Any, activities: list[Activity], launches: dict[int, Launch], tree: OpTree,
          captures: list[Capture], warnings: list[str], extra: dict[str, Any],
          capture_hint: str = CAPTURE_HINT) -> Any:
    """The kernel table with every replayed kernel a capture explains pointing at its replay's copy of the
    capture's op (op_id past the replay's own ops and the captures': ops_table appends them there), its
    shapes, module and path (the replay's annotations, then the capture op's)."""
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
    op_ids = copy_ops(mapped, captures, offset, columns["nvtx_ranges"])
    for i, (ci, op, link, _) in mapped.items():
        cap = captures[ci]
        replay_path = list(columns["nvtx_ranges"][i])
        columns["op_id"][i] = op_ids[i]
        columns["op_link"][i] = link
        columns["op"][i] = cap.tree.ops[op].name
        columns["input_shapes"][i] = shape_text(cap.tree.args[op].input_dims)
        captured = cap.path(op)
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
    warnings += _warnings(facts, captures, capture_hint)
    return frame


def _warnings(facts: dict[str, int], captures: list[Capture], capture_hint: str) -> list[str]:
    unmapped, out = facts["unmapped"], []
    if not captures:
        out.append(f"{unmapped} GPU activities of {facts['graph_launches']} graph launch(es) have the launch "
                   f"as their op: {capture_hint}")
    elif unmapped:
        out.append(f"{unmapped} of {unmapped + facts['mapped']} graph-replayed GPU activities match no "
                   f"launch captured in {', '.join(c.name for c in captures)}: they keep the graph launch as "
                   "their op")
    if facts["ambiguous_launches"]:
        out.append(f"{facts['ambiguous_launches']} graph launch(es) match several captured graphs equally "
                   "whose ops or shapes differ (the same kernels): the latest captured was taken, its cost "
                   "whole")
    return out


def ops_table(tree: OpTree, source: str, captures: list[Capture]) -> Any:
    """The ops table of a trace, the capture traces' ops appended under the same source (op ids past the
    trace's own), each row saying which file recorded it; then each replay's copies of the ops it ran."""
    import pandas as pd

    tables = [tree.table(source)]
    for c in captures:
        t = c.tree.table(source, recorded_in=c.name)
        for col in ("op_id", "parent_op_id", "forward_op_id"):
            t[col] = t[col] + c.offset
        tables.append(t)
        tables += [_copies_table(c, t)] if c.copies else []
    return pd.concat(tables, ignore_index=True) if len(tables) > 1 else tables[0]


def _copies_table(cap: Capture, table: Any) -> Any:
    """Every replay's copies of a capture's ops, one table (`table`: the capture's ops table): their own op
    ids, parents among the copies of the same replay, the replay's path before the captured one."""
    import pandas as pd

    rows = np.concatenate([c.rows for c in cap.copies])
    parent = np.asarray(cap.tree.parent, dtype="int64")
    ids, parents, paths = [], [], []
    for c in cap.copies:
        ids.append(c.first_id + np.arange(len(c.rows)))
        up = parent[c.rows]
        parents.append(np.where(up >= 0, c.first_id + np.searchsorted(c.rows, up), -1))
        paths += ["/".join(c.path + [n for n in cap.path(op) if n not in c.path]) for op in c.rows.tolist()]
    out = table.iloc[rows].reset_index(drop=True)
    out["op_id"] = pd.array(np.concatenate(ids), dtype="Int64")
    up = np.concatenate(parents)
    out["parent_op_id"] = pd.arrays.IntegerArray(np.maximum(up, 0), up < 0)
    out["nvtx_path"] = pd.Series(paths, dtype=object)
    return out
