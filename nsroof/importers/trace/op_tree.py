"""The CPU side of a kineto trace: the op tree, which op launched each GPU activity, the annotation (NVTX)
path and module of each op, as the ops table (nsroof.schema.OP_COLUMNS). The correlation rules live here and
only here (docs/readme/collectors.md, "Correlation rules"):

1. GPU activity -> runtime launch: the activity's ``correlation`` equals the launch event's ``correlation``
   (cat ``cuda_runtime``/``cuda_driver``, ``Runtime`` in 2021 traces).
2. launch -> op: the launch's ``External id`` (``external id`` in 2021 traces) names an op, accepted only
   when that op runs on the launching thread and its span encloses the launch. Otherwise the innermost op
   on the launching thread whose span encloses the launch, flagged ``enclosing op``. A GPU activity whose
   launch is not in the trace falls back to its own External id (flagged ``kernel external id``).
3. backward ops (inside ``autograd::engine::evaluate_function: …``, or carrying a non-zero
   ``Fwd thread id``) take the annotation path and module of the forward op with the same
   ``Sequence number``: of the outermost ops carrying it, the one that started last (before the node).
4. The path of an op: the ``user_annotation`` spans (record_function, nsroof ranges, module ranges) open
   at the op's start on every thread of its process (on its own thread, those enclosing its whole span),
   outermost (earliest start) first, then, for a backward op, rule 3's inherited path; step markers are
   left out. So a kernel launched on autograd's thread gets the main thread's ``## backward ##`` and step,
   and a graph replay the engine's step annotation around the launch.
5. A graph launch (``cudaGraphLaunch``/``cuGraphLaunch``/``hipGraphLaunch``) is an op of its own in the tree
   (a child of the op enclosing it, if any): the kernels of the replay share the launch's ``correlation``
   and are linked to it (``graph launch``); nsroof.importers.trace.graphs maps them on to the ops recorded
   when the graph was captured. A kernel launch no op encloses (a Triton or custom kernel launched from
   Python) is an op of its own too (``runtime launch``), so it still gets rule 4's path. Only a kernel
   whose launch is not in the trace has no op (``none``).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, TypeVar

import numpy as np

from nsroof.frames.arrays import nonnegative_or_missing, row_numbers
from nsroof.frames.distinct import first_appearances, identity_codes, row_codes, spread
from nsroof.importers.trace.events import (
    INT64,
    NO_OP_ARGS,
    ActivityArgs,
    Event,
    Launch,
    LaunchArgs,
    Op,
    OpArgs,
)

AnyArgs = ActivityArgs | LaunchArgs | OpArgs

EVALUATE = "autograd::engine::evaluate_function: "
STEP_MARKER = "nsroof::step"
BACKWARD_SUFFIX = " (backward)"

LINK_EXTERNAL = "external id"
LINK_ENCLOSING = "enclosing op"
LINK_KERNEL_EXTERNAL = "kernel external id"
LINK_NONE = "none"
LINK_GRAPH = "graph launch"
LINK_LAUNCH = "runtime launch"

T = TypeVar("T")

GRAPH_LAUNCH = re.compile(r"(?:cuda|cu|hip)GraphLaunch")


@cache
def is_graph_launch(name: str) -> bool:
    """Whether a runtime call launches a CUDA/HIP graph (once per distinct call name: a run has a few)."""
    return GRAPH_LAUNCH.match(name) is not None


def number(value: Any) -> float:
    """A finite float, or NaN (the trace's own numbers were checked at the door; this keeps NaN out of
    span arithmetic)."""
    kind = type(value)  # the common cases first: this runs for every time of every event
    if kind is float:
        return value if value - value == 0.0 else math.nan
    if kind is int and -INT64 <= value < INT64:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        f = float(value)
    except OverflowError:  # an integer beyond any float (an attribute passed on as given)
        return math.nan
    return f if math.isfinite(f) else math.nan


def numbers(values: list[float | int | None]) -> np.ndarray:
    """number() of each of the loader's decoded times and counts (floats, 64-bit integers or None) as one
    float64 array: None and non-finite values NaN."""
    out = np.array(values, dtype="float64").reshape(-1)
    out[~np.isfinite(out)] = math.nan
    return out


def external_id(args: AnyArgs) -> int | None:
    if isinstance(args, OpArgs):  # one spelling already
        return args.external_id
    return args.external_id if args.external_id is not None else args.external_id_2021


def thread_key(e: Event[Any]) -> tuple[str, str]:
    return _thread_key(e.pid, e.tid)


@cache
def _thread_key(pid: int | str | None, tid: int | str | None) -> tuple[str, str]:
    """One tuple per thread, shared by all its events (a trace has a few threads and millions of events)."""
    return str(pid), str(tid)


def span(e: Event[Any]) -> tuple[float, float]:
    """(start, end) in µs; an event without a usable duration is a point at its start."""
    start = number(e.ts)
    dur = number(e.dur)
    return start, start + (dur if dur == dur and dur >= 0 else 0.0)


def concrete_value(text: Any) -> Any:
    """A trace's 'Concrete Inputs' entry as the Python value torch recorded: the trace writes them as text
    ('' for a tensor, '[0]', 'True', '0.', '1e-05'); what does not parse stays text."""
    if not isinstance(text, str):
        return text
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return float(text)  # '0.' and '1.' are floats to Python, not to JSON
    except ValueError:
        return text


def shape_text(dims: list[Any] | None) -> str:
    """An op's Input Dims as the kernel table's input_shapes text ('' for none or all scalars)."""
    return str(dims) if dims and any(dims) else ""


def per_object(render: Callable[[Any], T], values: Iterable[Any]) -> list[T]:
    """[render(v) for v in values], render called once per distinct object (in order of first appearance):
    the loader shares one list per distinct argument text, so a trace's millions of cells hold a few
    thousand objects (lists: unhashable, so not _distinct.map_rows, which codes values)."""
    held = np.fromiter(values, dtype=object)  # every object alive until the end: no id is reused meanwhile
    if not len(held):
        return []
    codes = identity_codes(held)
    return spread(render, codes, first_appearances(codes), held).tolist()


def concrete_values(values: Any) -> list[Any] | None:
    return [concrete_value(v) for v in values] if isinstance(values, list) else None


def by_start(spans: Sequence[tuple[float, float]] | np.ndarray) -> list[int]:
    """Indices of the spans by start, the longer first at one start, ties in index order: sorted()'s order,
    by numpy's stable sort unless a time is NaN (which sorted() leaves where comparisons put it). The two
    keys sort as one complex number (numpy orders complex numbers by real part, then imaginary): faster
    than a lexsort of two."""
    times = np.asarray(spans, dtype="float64").reshape(-1, 2)
    if not np.isnan(times).any():
        keys = np.empty(len(times), dtype=np.complex128)
        keys.real, keys.imag = times[:, 0], -times[:, 1]  # set, not multiplied: 1j * inf would be nan + inf j
        return np.argsort(keys, kind="stable").tolist()
    rows = times.tolist()
    return sorted(range(len(rows)), key=lambda i: (rows[i][0], -rows[i][1]))


class Timeline:
    """The annotation spans of one thread as change points, so the spans open at a time are one bisect away
    (instead of a scan of every earlier span per op)."""

    def __init__(self, spans: list[tuple[float, float, str]]) -> None:
        self.times: list[float] = []
        self.stacks: list[tuple[tuple[float, float, str], ...]] = []
        stack: list[tuple[float, float, str]] = []
        for sp in sorted(spans, key=lambda t: (t[0], -t[1])):
            self._close(stack, sp[0])
            stack.append(sp)
            self._mark(sp[0], stack)
        self._close(stack, math.inf)
        # the earliest end of each stack: a time before it (and at or after the change point) has the whole
        # stack open, so every op there gets the same spans (OpTree caches them)
        self.min_end = [min((sp[1] for sp in st), default=math.inf) for st in self.stacks]

    def _close(self, stack: list[tuple[float, float, str]], t: float) -> None:
        while stack and stack[-1][1] < t:
            self._mark(stack.pop()[1], stack)

    def _mark(self, t: float, stack: list[tuple[float, float, str]]) -> None:
        # spans that overlap without nesting close late (after the one above them): times stay sorted
        t = max(t, self.times[-1]) if self.times else t
        if self.times and self.times[-1] == t:
            self.stacks[-1] = tuple(stack)
        else:
            self.times.append(t)
            self.stacks.append(tuple(stack))

    def index(self, t: float) -> int:
        """The change point at or before t (-1: before the first)."""
        return bisect.bisect_right(self.times, t) - 1

    def open_at(self, t: float) -> list[tuple[float, float, str]]:
        k = bisect.bisect_right(self.times, t) - 1
        return [sp for sp in self.stacks[k] if sp[0] <= t <= sp[1]] if k >= 0 else []


class OpTree:
    """CPU ops of a trace with their nesting per thread, annotation paths and forward ops."""

    def __init__(self, ops: list[Op], annotations: list[Op], module_ranges: Sequence[str] = (),
                 linked_ids: set[int] | None = None) -> None:
        """`linked_ids`: the External ids the launches and GPU activities name, the only ones rules 1-2 look
        up (None: every op's; a trace has millions of ops and far fewer launches)."""
        self.ops: list[Op | Launch] = list(ops)
        self.spans = [span(op) for op in ops]
        self.keys = [thread_key(op) for op in ops]
        self.args: list[OpArgs] = [op.args for op in ops]
        self.module_ranges = set(module_ranges)
        self.by_external: dict[int, int] = {}
        for i, a in enumerate(self.args):
            ext = a.external_id
            if ext is not None and (linked_ids is None or ext in linked_ids):
                self.by_external.setdefault(ext, i)
        # (start, end) rows of the ops above
        self._times = np.asarray(self.spans, dtype="float64").reshape(-1, 2)
        self._by_start = by_start(self._times)
        self.parent = self._nest()
        self._by_thread: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
        for i in self._by_start:
            starts, idx = self._by_thread.setdefault(self.keys[i], ([], []))
            starts.append(self.spans[i][0])
            idx.append(i)
        by_thread: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        for event in annotations:
            if event.name.startswith(STEP_MARKER):
                continue
            s, e = span(event)
            by_thread.setdefault(thread_key(event), []).append((s, e, event.name))
        self.annotations = {key: Timeline(spans) for key, spans in by_thread.items()}
        self._annotated_threads: dict[str, list[tuple[str, str]]] = {}
        for key in self.annotations:
            self._annotated_threads.setdefault(key[0], []).append(key)
        self._own_paths: dict[tuple[Any, ...], list[str]] = {}
        self._adopted: dict[int, int] = {}  # rule 5: id() of a launch event -> its op index
        self._forward = self._forward_ops()
        self._paths: dict[tuple[Any, ...], tuple[list[str], str, str]] = {}
        self._where: list[tuple[Any, ...]] = []  # per op, the key of its own path (_locate)
        self._locations: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self._forward_of_node: dict[int, int] = {}
        self._forward_ids: list[int] = []
        self._all_facts: list[tuple[list[str], str, str]] = []  # all_path_facts, while no op is adopted

    # -- nesting
    def _nest(self) -> list[int]:
        """Each op's parent (-1: none); and, parents first, the backward node each op is in (rule 3)."""
        n = len(self.ops)
        parent, backward = [-1] * n, [-1] * n
        is_node = [op.name.startswith(EVALUATE) or (a.fwd_thread_id is not None and a.fwd_thread_id > 0)
                   for op, a in zip(self.ops, self.args, strict=True)]  # rule 3's backward nodes
        keys, spans = self.keys, self.spans
        order = sorted(self._by_start, key=keys.__getitem__)  # stable: by (thread, start, -end), then index
        stack: list[tuple[int, float, float]] = []  # (op, start, end) of the open ops, outermost first
        current: tuple[str, str] | None = None
        for i in order:
            if keys[i] != current:
                stack, current = [], keys[i]
            start, end = spans[i]
            while stack and not (start >= stack[-1][1] and end <= stack[-1][2]):
                stack.pop()
            up = stack[-1][0] if stack else -1
            parent[i] = up
            backward[i] = i if is_node[i] else backward[up] if up >= 0 else -1
            stack.append((i, start, end))
        self._backward = backward
        return parent

    def encloses(self, i: int, event: Event[Any]) -> bool:
        if self.keys[i] != thread_key(event):
            return False
        s, e = span(event)
        return self.spans[i][0] <= s and e <= self.spans[i][1]

    def enclosing(self, event: Event[Any]) -> int:
        """The innermost op on the event's thread whose span contains it (-1 when none)."""
        starts, idx = self._by_thread.get(thread_key(event), ([], []))
        s, e = span(event)
        k = bisect.bisect_right(starts, s)
        # ops starting at or before the event, latest first (same start: the shorter, inner one first):
        # with nested spans the first one that contains the event is the innermost
        while k > 0:
            k -= 1
            i = idx[k]
            if self.spans[i][1] >= e:
                return i
            if self.parent[i] < 0 and self.spans[i][1] < s:
                break  # a finished top-level op: nothing that started earlier can contain the event
        return -1

    # -- rule 1 + 2
    def launcher(self, activity_args: ActivityArgs, launches: dict[int, Launch]) -> tuple[int, str]:
        """(index of the op that launched a GPU activity or -1, how it was linked)."""
        corr = activity_args.correlation
        launch = launches.get(corr) if corr is not None else None
        if launch is None:
            ext = external_id(activity_args)
            if ext is not None and ext in self.by_external:
                return self.by_external[ext], LINK_KERNEL_EXTERNAL
            return -1, LINK_NONE
        if is_graph_launch(launch.name):
            return self.adopt(launch, self.enclosing(launch)), LINK_GRAPH
        ext = external_id(launch.args)
        if ext is not None and ext in self.by_external:
            j = self.by_external[ext]
            if self.encloses(j, launch):
                return j, LINK_EXTERNAL
        j = self.enclosing(launch)
        return (j, LINK_ENCLOSING) if j >= 0 else (self.adopt(launch, -1), LINK_LAUNCH)

    # -- rule 5
    def adopt(self, launch: Launch, parent: int) -> int:
        """The op index of a runtime launch made an op of its own (a child of `parent`), once per launch.
        It encloses no other op, so the per-thread search structures stay as they are."""
        key = id(launch)
        if key not in self._adopted:
            self._adopted[key] = len(self.ops)
            self.ops.append(launch)
            self.spans.append(span(launch))
            self.keys.append(thread_key(launch))
            self.args.append(NO_OP_ARGS)  # a launch's args (correlation, External id) are no op inputs
            self.parent.append(parent)
            self._backward.append(self._backward[parent] if parent >= 0 else -1)
        return self._adopted[key]

    def _span_array(self) -> np.ndarray:
        """self.spans as (start, end) rows of one float64 array, the adopted launches' appended as they
        come."""
        if len(self._times) < len(self.spans):
            adopted = np.asarray(self.spans[len(self._times):], dtype="float64").reshape(-1, 2)
            self._times = np.concatenate([self._times, adopted])
        return self._times

    # -- rule 3
    def backward_node(self, i: int) -> int:
        """The backward node op i is in (itself or an enclosing op; -1: a forward op)."""
        return self._backward[i]

    def _forward_ops(self) -> dict[int, list[tuple[float, int]]]:
        """Sequence number -> (start, op) of the forward op carrying it on each thread: of the outermost ops
        with that number, the one that started last. torch records the number the next autograd node will
        get (``sequence_nr`` peeked), so the ops of a thread before a node is created share it and the op
        that creates the node is the last of them."""
        pick: dict[tuple[tuple[str, str], int], int] = {}
        for i in self._by_start:
            seq = self.args[i].sequence_number
            if seq is not None and seq >= 0 and self.backward_node(i) < 0:
                cur = pick.get((self.keys[i], seq))
                inside = (cur is not None and self.spans[cur][0] <= self.spans[i][0]
                          and self.spans[i][1] <= self.spans[cur][1])
                if not inside:
                    pick[(self.keys[i], seq)] = i
        out: dict[int, list[tuple[float, int]]] = {}
        for (_, seq), i in pick.items():
            out.setdefault(seq, []).append((self.spans[i][0], i))
        for candidates in out.values():
            candidates.sort()
        return out

    def forward_of(self, i: int) -> int:
        """The forward op a backward op differentiates (-1 for forward ops and when the trace lacks it)."""
        node = self.backward_node(i)
        if node < 0:
            return -1
        found = self._forward_of_node.get(node)
        if found is None:
            seq = self.args[node].sequence_number
            candidates = self._forward.get(seq, []) if seq is not None else []
            k = bisect.bisect_right(candidates, (self.spans[node][0], math.inf))
            found = self._forward_of_node[node] = candidates[k - 1][1] if k else -1
        return found

    # -- rule 4
    def _locate(self) -> None:
        """For the ops not yet located: where each starts among the annotation change points of its
        process's threads, as a key shared by every op that gets the same own path (the spans open at the
        change point are open throughout the op: each one ends after its end on its own thread, after its
        start on another); an op for which some span closes early gets a key of its own."""
        lo, hi = len(self._where), len(self.ops)
        where = np.empty(hi - lo, dtype=object)
        where.fill(())  # a process without annotations: no path
        keys = self.keys[lo:hi]
        # thread keys are shared tuples
        key_code, first = row_codes(np.fromiter(keys, dtype=object, count=hi - lo))
        threads_of = [keys[i] for i in first.tolist()]
        thread_codes = {key: code for code, key in enumerate(threads_of)}
        spans = self._span_array()[lo:hi]
        for pid, threads in self._annotated_threads.items():
            rows = np.flatnonzero(np.isin(key_code, [c for k, c in thread_codes.items() if k[0] == pid]))
            if not len(rows):
                continue
            starts, ends, codes = spans[rows, 0], spans[rows, 1], key_code[rows]
            whole = np.ones(len(rows), dtype=bool)
            cols = [codes]
            for t in threads:
                timeline = self.annotations[t]
                times = np.asarray(timeline.times, dtype="float64")
                col = np.searchsorted(times, starts, side="right") - 1
                # col -1: inf
                min_end = np.append(np.asarray(timeline.min_end, dtype="float64"), math.inf)[col]
                own = codes == thread_codes.get(t, -1)
                # a span without a start (NaN) leaves the times unsorted: each op then looks for itself
                whole &= ((col < 0) | (min_end >= np.where(own, ends, starts))) & ~np.isnan(times).any()
                cols.append(col)
            # one tuple per distinct location (a trace has thousands, and millions of ops)
            inverse, first = row_codes(*(c[whole] for c in cols))
            shared = self._locations
            located = np.empty(len(first), dtype=object)
            for code, row in enumerate(np.stack(cols, axis=1)[whole][first].tolist()):
                loc = (threads_of[row[0]], *row[1:])
                located[code] = shared.setdefault(loc, loc)
            where[rows[whole]] = located[inverse]
            for r in rows[~whole].tolist():
                where[r] = shared.setdefault(("op", lo + r), ("op", lo + r))
        self._where += where.tolist()

    def _own_path(self, i: int) -> list[str]:
        """Annotations open at op i's start on every thread of its process; on its own thread, those that
        enclose its whole span. Outermost (earliest start, then longest) first."""
        if i >= len(self._where):
            self._locate()
        at = self._where[i]
        cached = self._own_paths.get(at)
        if cached is not None:
            return cached
        key = self.keys[i]
        start, end = self.spans[i]
        own = self.annotations.get(key) if at else None
        found = [a for a in own.open_at(start) if a[1] >= end] if own is not None else []
        for other in self._annotated_threads.get(key[0], []) if at else []:
            if other != key:
                found += self.annotations[other].open_at(start)
        found.sort(key=lambda a: (a[0], -a[1]))
        names = [name for _, _, name in found]
        path = self._own_paths[at] = [n for k, n in enumerate(names) if k == 0 or n != names[k - 1]]
        return path

    def path(self, i: int) -> list[str]:
        """Annotation path of op i; a backward op gets its forward op's path too, module ranges marked
        ' (backward)'."""
        return self.path_facts(i)[0]

    def path_facts(self, i: int) -> tuple[list[str], str, str]:
        """(path, the path joined by '/', module) of op i, computed once per distinct path."""
        own = self._own_path(i)
        forward = self.forward_of(i)
        key = (self._where[i], self._where[forward] if forward >= 0 else None)
        cached = self._paths.get(key)
        if cached is None:
            if forward >= 0:
                inherited = [n + BACKWARD_SUFFIX if n in self.module_ranges else n
                             for n in self._own_path(forward)]
                own = own + [n for n in inherited if n not in own]
            cached = self._paths[key] = (own, "/".join(own), self.module(own))
        return cached

    def forward_ids(self) -> list[int]:
        """forward_of of every op, in op order (only the backward ops look theirs up); kept until an op is
        adopted."""
        if len(self._forward_ids) != len(self.ops):
            nodes = np.asarray(self._backward, dtype="int64")
            inside = nodes >= 0
            # a node's ops share its forward op
            distinct, inverse = np.unique(nodes[inside], return_inverse=True)
            ids = np.full(len(nodes), -1, dtype="int64")
            ids[inside] = np.asarray([self.forward_of(node) for node in distinct.tolist()],
                                     dtype="int64")[inverse]
            self._forward_ids = ids.tolist()
        return self._forward_ids

    def all_path_facts(self) -> list[tuple[list[str], str, str]]:
        """path_facts of every op, in op order: each op's location hashed once, each distinct (own location,
        forward op's location) pair's path built once (by its first op) and shared."""
        n = len(self.ops)
        if len(self._all_facts) == n:
            return self._all_facts
        if len(self._where) < n:
            self._locate()
        # equal locations are one object (_locate shares them): coded by identity, not by hashing tuples
        own = (identity_codes(np.fromiter(self._where, dtype=object, count=n)) if n
               else np.zeros(0, dtype="int64"))
        distinct = int(own.max()) + 1 if n else 0
        fwd = np.asarray(self.forward_ids(), dtype="int64")
        inherited = np.where(fwd >= 0, own[np.maximum(fwd, 0)], -1) if n else fwd
        _, first, inverse = np.unique(own * (distinct + 1) + inherited + 1, return_index=True,
                                      return_inverse=True)
        shared = np.empty(len(first), dtype=object)
        shared[:] = [self.path_facts(int(i)) for i in first]
        self._all_facts = shared[inverse.reshape(-1)].tolist()
        return self._all_facts

    def module(self, path: Sequence[str]) -> str:
        for name in reversed(path):
            base = name.removesuffix(BACKWARD_SUFFIX)
            if base in self.module_ranges:
                return base
        return ""

    # -- the ops table (nsroof.schema.OP_COLUMNS)
    def table(self, source: str, *, recorded_in: str = "") -> Any:
        """One row per op call, op_id = its index here: what nsroof.costs.attribution costs kernels from.
        `recorded_in`: the file that recorded the ops when not `source` (a capture trace)."""
        import pandas as pd

        n = len(self.ops)
        facts = self.all_path_facts()
        forward = self.forward_ids()

        times = self._span_array()
        seq = [a.sequence_number for a in self.args]
        threads = {key: f"{key[0]}/{key[1]}" for key in set(self.keys)}  # one thread name per distinct one
        sequence = np.fromiter((0 if v is None else v for v in seq), dtype="int64", count=n)

        return pd.DataFrame({
            "source": pd.Series([source] * n, dtype=object),
            "op_id": row_numbers(n),
            "parent_op_id": nonnegative_or_missing(self.parent),
            "name": pd.Series([op.name for op in self.ops], dtype=object),
            "input_shapes": pd.Series([a.input_dims for a in self.args], dtype=object),
            "input_dtypes": pd.Series([a.input_type for a in self.args], dtype=object),
            "concrete_inputs": pd.Series(per_object(concrete_values, (a.concrete_inputs for a in self.args)),
                                         dtype=object),
            "sequence_number": pd.arrays.IntegerArray(sequence,
                                                      np.array([v is None for v in seq], dtype=bool)),
            "forward_op_id": nonnegative_or_missing(forward),
            "thread": pd.Series([threads[key] for key in self.keys], dtype=object),
            "start_us": times[:, 0].copy(),
            "duration_us": times[:, 1] - times[:, 0],
            "nvtx_path": pd.Series([f[1] for f in facts], dtype=object),
            "module": pd.Series([f[2] for f in facts], dtype=object),
            "recorded_in": pd.Series([recorded_in or source] * n, dtype=object),
        }, copy=False)  # no consolidating copy of the columns: millions of rows

