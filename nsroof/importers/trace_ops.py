"""The CPU side of a kineto trace: the op tree, which op launched each GPU activity, the annotation (NVTX)
path and module of each op, and the ops' analytic costs. The correlation rules live here and only here
(docs/readme/collectors.md, "Correlation rules"):

1. GPU activity -> runtime launch: the activity's ``correlation`` equals the launch event's ``correlation``
   (cat ``cuda_runtime``/``cuda_driver``, ``Runtime`` in 2021 traces).
2. launch -> op: the launch's ``External id`` (``external id`` in 2021 traces) names an op, accepted only
   when that op runs on the launching thread and its span encloses the launch. Otherwise the innermost op
   on the launching thread whose span encloses the launch, flagged ``enclosing op``. A GPU activity whose
   launch is not in the trace falls back to its own External id (flagged ``kernel external id``).
3. backward ops (inside ``autograd::engine::evaluate_function: …``, or carrying a non-zero
   ``Fwd thread id``) take the annotation path and module of the forward op with the same
   ``Sequence number``: of the outermost ops carrying it, the one that started last (before the node).
4. The path of an op: the ``user_annotation`` spans (record_function, nsroof ranges, module ranges) on its
   thread that enclose it, outermost first; step markers are left out.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Sequence
from typing import Any

EVALUATE = "autograd::engine::evaluate_function: "
STEP_MARKER = "nsroof::step"
BACKWARD_SUFFIX = " (backward)"

LINK_EXTERNAL = "external id"
LINK_ENCLOSING = "enclosing op"
LINK_KERNEL_EXTERNAL = "kernel external id"
LINK_NONE = "none"


def number(value: Any) -> float:
    """A finite float, or NaN (the trace's own numbers were checked at the door; this keeps NaN out of
    span arithmetic)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    f = float(value)
    return f if math.isfinite(f) else math.nan


def external_id(args: dict[str, Any]) -> int | None:
    for key in ("External id", "external id"):
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def thread_key(e: dict[str, Any]) -> tuple[str, str]:
    return str(e.get("pid")), str(e.get("tid"))


def span(e: dict[str, Any]) -> tuple[float, float]:
    """(start, end) in µs; an event without a usable duration is a point at its start."""
    start = number(e.get("ts"))
    dur = number(e.get("dur"))
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


def concrete_values(values: Any) -> list[Any] | None:
    return [concrete_value(v) for v in values] if isinstance(values, list) else None


class OpTree:
    """CPU ops of a trace with their nesting per thread, annotation paths, forward ops and costs."""

    def __init__(self, ops: list[dict[str, Any]], annotations: list[dict[str, Any]],
                 module_ranges: Sequence[str] = (), world_size: int = 0) -> None:
        self.ops = ops
        self.world_size = world_size  # the trace's process-group size (distributedInfo), for collectives
        self.spans = [span(op) for op in ops]
        self.keys = [thread_key(op) for op in ops]
        self.args = [op.get("args") or {} for op in ops]
        self.module_ranges = set(module_ranges)
        self.by_external: dict[int, int] = {}
        for i, a in enumerate(self.args):
            ext = external_id(a)
            if ext is not None:
                self.by_external.setdefault(ext, i)
        self.parent = self._nest()
        self._by_thread: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
        for i in sorted(range(len(ops)), key=lambda i: (self.spans[i][0], -self.spans[i][1])):
            starts, idx = self._by_thread.setdefault(self.keys[i], ([], []))
            starts.append(self.spans[i][0])
            idx.append(i)
        self.annotations: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        for a in annotations:
            name = str(a.get("name", ""))
            if name.startswith(STEP_MARKER):
                continue
            s, e = span(a)
            self.annotations.setdefault(thread_key(a), []).append((s, e, name))
        for spans in self.annotations.values():
            spans.sort(key=lambda t: (t[0], -t[1]))
        self._forward = self._forward_ops()
        self._costs: dict[int, Any] = {}
        self._paths: dict[int, list[str]] = {}
        self._ordinals: dict[int, int] | None = None

    # -- nesting
    def _nest(self) -> list[int]:
        parent = [-1] * len(self.ops)
        order = sorted(range(len(self.ops)), key=lambda i: (self.keys[i], self.spans[i][0], -self.spans[i][1]))
        stack: list[int] = []
        current: tuple[str, str] | None = None
        for i in order:
            if self.keys[i] != current:
                stack, current = [], self.keys[i]
            start, end = self.spans[i]
            while stack and not (start >= self.spans[stack[-1]][0] and end <= self.spans[stack[-1]][1]):
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        return parent

    def encloses(self, i: int, event: dict[str, Any]) -> bool:
        if self.keys[i] != thread_key(event):
            return False
        s, e = span(event)
        return self.spans[i][0] <= s and e <= self.spans[i][1]

    def enclosing(self, event: dict[str, Any]) -> int:
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
    def launcher(self, activity_args: dict[str, Any], launches: dict[int, dict[str, Any]]) -> tuple[int, str]:
        """(index of the op that launched a GPU activity or -1, how it was linked)."""
        corr = activity_args.get("correlation")
        launch = launches.get(corr) if isinstance(corr, int) and not isinstance(corr, bool) else None
        if launch is None:
            ext = external_id(activity_args)
            if ext is not None and ext in self.by_external:
                return self.by_external[ext], LINK_KERNEL_EXTERNAL
            return -1, LINK_NONE
        ext = external_id(launch.get("args") or {})
        if ext is not None and ext in self.by_external:
            j = self.by_external[ext]
            if self.encloses(j, launch):
                return j, LINK_EXTERNAL
        j = self.enclosing(launch)
        return j, (LINK_ENCLOSING if j >= 0 else LINK_NONE)

    # -- rule 3
    def _is_backward_node(self, i: int) -> bool:
        fwd = self.args[i].get("Fwd thread id")
        return str(self.ops[i].get("name", "")).startswith(EVALUATE) or (isinstance(fwd, int) and fwd > 0)

    def backward_node(self, i: int) -> int:
        j = i
        while j >= 0:
            if self._is_backward_node(j):
                return j
            j = self.parent[j]
        return -1

    def _forward_ops(self) -> dict[int, list[tuple[float, int]]]:
        """Sequence number -> (start, op) of the forward op carrying it on each thread: of the outermost ops
        with that number, the one that started last. torch records the number the next autograd node will
        get (``sequence_nr`` peeked), so the ops of a thread before a node is created share it and the op
        that creates the node is the last of them."""
        pick: dict[tuple[tuple[str, str], int], int] = {}
        for i in sorted(range(len(self.ops)), key=lambda i: (self.spans[i][0], -self.spans[i][1])):
            seq = self.args[i].get("Sequence number")
            if isinstance(seq, int) and seq >= 0 and self.backward_node(i) < 0:
                cur = pick.get((self.keys[i], seq))
                inside = cur is not None and self.spans[cur][0] <= self.spans[i][0] and self.spans[i][1] <= self.spans[cur][1]
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
        seq = self.args[node].get("Sequence number")
        candidates = self._forward.get(seq, []) if isinstance(seq, int) else []
        k = bisect.bisect_right(candidates, (self.spans[node][0], math.inf))
        return candidates[k - 1][1] if k else -1

    # -- rule 4
    def _own_path(self, i: int) -> list[str]:
        spans = self.annotations.get(self.keys[i], [])
        start, end = self.spans[i]
        upto = bisect.bisect_right(spans, (start, math.inf, ""))
        names = [name for s, e, name in spans[:upto] if s <= start and e >= end]
        return [n for k, n in enumerate(names) if k == 0 or n != names[k - 1]]

    def path(self, i: int) -> list[str]:
        """Annotation path of op i; a backward op gets its forward op's path too, module ranges marked
        ' (backward)'."""
        cached = self._paths.get(i)
        if cached is not None:
            return cached
        own = self._own_path(i)
        forward = self.forward_of(i)
        if forward >= 0:
            inherited = [n + BACKWARD_SUFFIX if n in self.module_ranges else n for n in self._own_path(forward)]
            own = own + [n for n in inherited if n not in own]
        self._paths[i] = own
        return own

    def module(self, path: Sequence[str]) -> str:
        for name in reversed(path):
            base = name.removesuffix(BACKWARD_SUFFIX)
            if base in self.module_ranges:
                return base
        return ""

    # -- costs
    def cost(self, i: int) -> Any:
        if i not in self._costs:
            from nsroof.models.ledger.aten import op_cost

            a = self.args[i]
            self._costs[i] = op_cost(str(self.ops[i].get("name", "")), a.get("Input Dims"), a.get("Input type"),
                                     concrete_values(a.get("Concrete Inputs")), context=self.context(i))
        return self._costs[i]

    def context(self, i: int) -> Any:
        """Facts about op i from outside its arguments (nsroof.models.ledger.custom.OpContext): the engine step
        annotation on its path, its order among the same-named ops of that step, the process-group size."""
        from nsroof.models.ledger.custom import OpContext
        from nsroof.models.ledger.engine_facts import step_of

        name = str(self.ops[i].get("name", ""))
        if name.startswith("aten::"):
            return None
        if self._ordinals is None:
            self._ordinals = {}
            seen: dict[tuple[str, str], int] = {}
            for j in sorted(range(len(self.ops)), key=lambda j: self.spans[j][0]):
                step = step_of(self._own_path(j))
                key = (step.annotation if step else "", str(self.ops[j].get("name", "")))
                self._ordinals[j] = seen.get(key, 0)
                seen[key] = self._ordinals[j] + 1
        return OpContext(step=step_of(self.path(i)), ordinal=self._ordinals.get(i, -1), world_size=self.world_size,
                         args=self.args[i])

    def costed_ancestor(self, i: int) -> int:
        """The outermost op at or above i with a known cost (-1 when none)."""
        found = -1
        j = i
        while j >= 0:
            if self.cost(j).known:
                found = j
            j = self.parent[j]
        return found

    def self_time_us(self, i: int, children: dict[int, list[int]]) -> float:
        """Duration minus the durations of its direct op children."""
        s, e = self.spans[i]
        inner = sum(self.spans[c][1] - self.spans[c][0] for c in children.get(i, []))
        return max(e - s - inner, 0.0)

    def cpu_rows(self) -> list[tuple[int, float, str]]:
        """Rows of a trace without GPU activity: (op, duration µs, duration source). An op with a known
        cost is one row with its whole time (its children folded in); an op without one, not under a
        costed op, is a row with its self time. Together the rows count the profiled op time once."""
        children: dict[int, list[int]] = {}
        for i, p in enumerate(self.parent):
            if p >= 0:
                children.setdefault(p, []).append(i)
        rows: list[tuple[int, float, str]] = []
        for i in sorted(range(len(self.ops)), key=lambda i: self.spans[i][0]):
            unit = self.costed_ancestor(i)
            if unit >= 0 and unit != i:
                continue
            s, e = self.spans[i]
            if unit == i:
                rows.append((i, e - s, "cpu_op dur"))
            else:
                rows.append((i, self.self_time_us(i, children), "cpu_op dur - op children dur"))
        return rows
