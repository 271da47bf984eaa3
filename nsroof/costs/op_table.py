"""A trace's ops table (nsroof.schema.OP_COLUMNS) indexed by op_id, each op's formula cost computed once: what
nsroof.costs.attribution walks to find which op's formula prices a kernel.

A profile repeats the same calls step after step, so an aten op is priced once per distinct call (its name and
the text of its recorded shapes, dtypes and concrete inputs) and the costs spread back to the ops with integer
codes; the walks up the op tree go one level at a time over all the ops asked about at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, cast

import numpy as np
import pandas as pd

from nsroof.costs import op_evidence
from nsroof.costs.analytic_rows import objects, per_cost
from nsroof.costs.ledger.aten import (
    DTYPE_UNRECORDED,
    TORCH_DTYPES,
    OpCost,
    assumed_dtypes,
    base_name,
    concrete_values,
    has_formula,
    no_formula_reason,
    op_cost,
    unknown,
)
from nsroof.costs.ledger.aten.movement import INDEX_OPS
from nsroof.frames.columns import text_values
from nsroof.frames.distinct import first_appearances, map_rows, row_codes

# what pricing an op's name needs: a call priced by its arguments alone (an aten op), one that needs more
# than its arguments (an index op's child ops, an engine op's or collective's context), one without a formula
_BY_CALL, _ONE_BY_ONE, _NO_FORMULA = 0, 1, 2
# a kernel Inductor generated, priced from the ops it fused (the importer's attrs["fused_kernels"] records:
# nsroof.costs.fused_kernels)
_FUSED = 3
# op-tree levels walked for all ops at once; deeper chains (a cycle in a hostile table) finish one by one
_LEVELS = 64
# torch.profiler's names of the floating dtypes (float, double, c10::BFloat16, ...): what autocast casts
_FLOATING_TYPES = frozenset(name for name, dtype in TORCH_DTYPES.items() if not dtype.startswith("int"))


class OpTable:
    """The ops table indexed by op_id, with each op's formula cost computed once."""

    def __init__(self, ops: pd.DataFrame) -> None:
        self.frame = ops
        ops = ops.copy(deep=False)  # its columns read without the frame's attrs (each read deep-copies them)
        ops.attrs = {}
        self.columns = ops
        n = len(ops)
        ids = ops["op_id"].to_numpy(dtype="int64") if n else np.zeros(0, dtype="int64")
        self.ids = ids
        self.row = dict(zip(ids.tolist(), range(n), strict=True))
        parents = ops["parent_op_id"].astype("Int64").fillna(-1).to_numpy(dtype="int64") if n else ids
        # None: op_ids repeat (the last row counts)
        self._index = pd.Index(ids) if len(self.row) == n else None
        self._parents = parents
        self._parent_row = np.where(parents >= 0, self.rows_of(parents), -1)
        self.names = text_values(ops["name"], np.nan) if n else np.zeros(0, dtype=object)
        codes, distinct = pd.factorize(self.names) if n else (np.zeros(0, dtype="int64"), [])
        self._name_code = np.asarray(codes, dtype="int64")
        self._distinct_names = [str(x) for x in distinct]
        self._pricing = np.array([_pricing(x) for x in self._distinct_names], dtype="int64")
        fused = self.frame.attrs.get("fused_kernels") or {}
        self._fused: dict[str, OpCost] | None = None  # priced on first use
        if fused:
            self._pricing[[i for i, x in enumerate(self._distinct_names) if x in fused]] = _FUSED
        # the recorded arguments as plain object arrays (a DataFrame cell lookup per op is slow)
        self.args = [ops[c].to_numpy(dtype=object)
                     for c in ("input_shapes", "input_dtypes", "concrete_inputs")]
        self._cost = np.full(n, None, dtype=object)  # OpCost per row, once priced
        self._known = np.zeros(n, dtype=bool)
        self._priced = np.zeros(n, dtype=bool)
        self._by_call: dict[Any, OpCost] = {}
        self._no_formula = np.full(len(self._distinct_names), None, dtype=object)  # by name code
        self._bmm = self._distinct_names.index("aten::bmm") if "aten::bmm" in self._distinct_names else -1
        self._shape_text = np.full(n, None, dtype=object)  # shape_text of each row's input shapes, once known
        self._units: dict[int, int] = {}
        self._contexts: dict[int, dict[int, Any]] = {}  # by name code
        self._context_of: dict[int, Any] = {}  # each op's context as its formula got it, by op_id
        self._launched: dict[int, list[int]] = {}  # kernel rows by launching op_id (set_launches)
        self._kernel_paths: np.ndarray = np.zeros(0, dtype=object)
        self._kernel_names: np.ndarray = np.zeros(0, dtype=object)
        # (parent op_id, op row) by parent, then start
        self._children: tuple[np.ndarray, np.ndarray] | None = None
        self.forward = ops["forward_op_id"].astype("Int64").fillna(-1).to_numpy(dtype="int64") \
            if n and "forward_op_id" in ops else np.full(n, -1, dtype="int64")

    @cached_property
    def parent(self) -> dict[int, int]:
        """op_id -> its parent's op_id (-1: none)."""
        return dict(zip(self.ids.tolist(), self._parents.tolist(), strict=True))

    def __contains__(self, op_id: int) -> bool:
        return op_id in self.row

    def rows_of(self, op_ids: np.ndarray) -> np.ndarray:
        """The row of each op_id (-1 where the table has none)."""
        op_ids = np.asarray(op_ids, dtype="int64")
        if self._index is not None:
            return np.asarray(self._index.get_indexer(op_ids), dtype="int64")
        return np.array([self.row.get(j, -1) for j in op_ids.tolist()], dtype="int64")

    def name_codes(self, rows: np.ndarray) -> np.ndarray:
        """Each op row's name as an integer code (equal names, equal codes)."""
        return self._name_code[rows]

    def name(self, op_id: int) -> str:
        return str(self.names[self.row[op_id]])

    def cost(self, op_id: int) -> OpCost:
        r = self.row[op_id]
        if not self._priced[r]:
            self._price(np.array([r], dtype="int64"))
        return cast(OpCost, self._cost[r])

    def costs_at(self, rows: np.ndarray) -> np.ndarray:
        """The OpCost of each op row (an object array), every op priced once."""
        rows = np.asarray(rows, dtype="int64")
        todo = rows[~self._priced[rows]]
        if len(todo):
            self._price(np.unique(todo))
        return self._cost[rows]

    def known_at(self, rows: np.ndarray) -> np.ndarray:
        self.costs_at(rows)
        return self._known[rows]

    def _price(self, rows: np.ndarray) -> None:
        code = self._name_code[rows]
        pricing = self._pricing[code]
        found = np.empty(len(rows), dtype=object)
        if (at := pricing == _BY_CALL).any():
            found[at] = self._call_costs(rows[at])
        if (at := pricing == _NO_FORMULA).any():
            for c in np.unique(code[at]).tolist():
                if self._no_formula[c] is None:
                    self._no_formula[c] = unknown(no_formula_reason(self._distinct_names[c]))
            found[at] = self._no_formula[code[at]]
        for k in np.flatnonzero(pricing == _ONE_BY_ONE).tolist():
            found[k] = self._one_cost(int(rows[k]))
        if (at := pricing == _FUSED).any():
            if self._fused is None:
                from nsroof.costs.fused_kernels import kernel_costs

                self._fused = kernel_costs(self.frame.attrs["fused_kernels"])
            found[at] = objects([self._fused[self._distinct_names[c]] for c in code[at].tolist()])
        for k in np.flatnonzero(code == self._bmm).tolist():
            found[k] = op_evidence.causal_math(self, int(self.ids[rows[k]]), found[k])
        self._cost[rows], self._known[rows], self._priced[rows] = (
            found, per_cost(found, lambda c: c.known, bool), True)

    def _call_costs(self, rows: np.ndarray) -> np.ndarray:
        """Ops priced by their name and arguments alone: once per distinct call."""
        args = [_repr_codes(a[rows]) for a in self.args]
        codes, first = row_codes(self._name_code[rows], *(c for c, _ in args))
        priced, shapes = [], []
        for i in first.tolist():
            r = int(rows[i])
            call = (str(self.names[r]), *(texts[c[i]] for c, texts in args))
            found = self._by_call.get(call) or op_cost(call[0], *(a[r] for a in self.args), context=None)
            self._by_call[call] = found
            priced.append(found)
            shapes.append(shape_text(self.args[0][r]))
        self._shape_text[rows] = objects(shapes)[codes]  # the same recorded shapes, the same text
        return objects(priced)[codes]

    def shape_texts(self, rows: np.ndarray) -> list[str]:
        """shape_text of each op row's recorded input shapes."""
        known = self._shape_text[rows]
        return [str(t) if t is not None else shape_text(self.args[0][r])
                for t, r in zip(known.tolist(), rows.tolist(), strict=True)]

    def _one_cost(self, r: int) -> OpCost:
        """An op whose cost needs more than its arguments: an index op's child ops, an engine op's context."""
        op_id = int(self.ids[r])
        shapes, dtypes, concrete = (a[r] for a in self.args)
        name = str(self.names[r])
        if name.startswith("aten::") and base_name(name) in INDEX_OPS:
            concrete = op_evidence.with_index_evidence(self, op_id, shapes, concrete)
        context = self.context(op_id)
        # an op without context is priced by its name and arguments alone: each step repeats the same calls
        call = (name, repr(shapes), repr(dtypes), repr(concrete)) if context is None else op_id
        found = self._by_call.get(call) or op_cost(name, shapes, dtypes, concrete, context=context)
        self._by_call[call] = found
        return found

    def children(self, op_id: int) -> list[int]:
        """The ops directly inside op_id, by start."""
        if self._children is None:
            order = self.columns["start_us"].astype("float64").to_numpy().argsort(kind="stable") \
                if len(self.ids) else np.zeros(0, dtype="int64")
            parents = self._parents[order] if self._index is not None else \
                np.array([self.parent.get(j, -1) for j in self.ids[order].tolist()], dtype="int64")
            by_parent = np.argsort(parents, kind="stable")
            self._children = parents[by_parent], order[by_parent]
        parents, rows = self._children
        lo, hi = np.searchsorted(parents, op_id, "left"), np.searchsorted(parents, op_id, "right")
        return self.ids[rows[lo:hi]].tolist()

    def set_launches(self, op_ids: np.ndarray, paths: np.ndarray, names: np.ndarray) -> None:
        """The kernels each op launched (op_id -1: none): their annotation paths (a graph replay's kernel:
        the replay's annotations, then the captured op's) and names, for the facts an engine op takes from
        them."""
        op_ids = np.asarray(op_ids, dtype="int64")
        order = np.argsort(op_ids, kind="stable")
        by_op = op_ids[order]
        cuts = np.flatnonzero(np.r_[True, by_op[1:] != by_op[:-1]]).tolist() if len(by_op) else []
        for lo, hi in zip(cuts, [*cuts[1:], len(by_op)][:len(cuts)], strict=True):
            if by_op[lo] >= 0:
                self._launched[int(by_op[lo])] = order[lo:hi].tolist()
        self._kernel_paths = np.asarray(paths, dtype=object)
        self._kernel_names = np.asarray(names, dtype=object)

    def context(self, op_id: int) -> Any:
        """The facts an engine op or collective needs beyond its arguments
        (nsroof.costs.ledger.custom.OpContext):
        the step annotation on its path, its order among the same-named ops of that step (its layer), the
        process-group size and the event's attributes the importer kept (ops.attrs); None for aten ops. An op
        recorded at a CUDA graph's capture takes the step annotation its kernels' replay ran under (one step:
        a graph replayed in several steps of other sizes has no one cost); a formula registered with
        inside=True gets the calls recorded inside the op and the names of the kernels under it."""
        if self.name(op_id).startswith("aten::"):
            return None
        if op_id in self._context_of:
            return self._context_of[op_id]
        # an op's ordinal counts the ops of its name alone (where op_ids repeat: the whole table's, the last
        # row of an op_id counting)
        code = int(self._name_code[self.row[op_id]]) if self._index is not None else -1
        if code not in self._contexts:
            from nsroof.costs.ledger.engine_context import op_contexts

            rows = np.flatnonzero(self._name_code == code) if code >= 0 else np.arange(len(self.ids))
            # the table's attrs (world_size, op_attributes) handed over, not carried by the rows (pandas
            # deep-copies a frame's attrs on every column read)
            self._contexts[code] = op_contexts(self.columns.iloc[rows], self.frame.attrs)
        found = self._context_of[op_id] = self._with_launches(op_id, self._contexts[code].get(op_id))
        return found

    def _with_launches(self, op_id: int, context: Any) -> Any:
        from nsroof.costs.ledger import custom

        formula = custom.get(self.name(op_id))
        inside = formula is not None and formula.inside
        if context is None or (context.step is not None and not inside):
            return context
        below = self._subtree(op_id)
        kernels = [k for j in below for k in self._launched.get(j, ())]
        if context.step is None and kernels:
            from nsroof.costs.ledger.engine_context import step_of

            steps = {step_of(str(p).split("/")) for p in self._kernel_paths[kernels].tolist()}
            if len(steps) == 1:
                context = replace(context, step=steps.pop())
        if inside:
            shapes, dtypes, concrete = self.args

            def calls(ops: list[int]) -> tuple[custom.Call, ...]:
                return tuple(custom.Call(str(self.names[r]), shapes[r] or [], dtypes[r] or [],
                                         concrete_values(concrete[r]))
                             for r in self.rows_of(np.array(ops, dtype="int64")).tolist() if r >= 0)

            peers = [j for p in self._peers(op_id) for j in self._subtree(p)[1:]]
            context = replace(context, inside=calls(below[1:]), peer_inside=calls(peers),
                              kernels=tuple(dict.fromkeys(str(n) for n in self._kernel_names[kernels])))
        return context

    def _peers(self, op_id: int) -> list[int]:
        """The other ops of op_id's name with the same recorded shapes and dtypes."""
        r = self.row[op_id]
        key = (repr(self.args[0][r]), repr(self.args[1][r]))
        same = np.flatnonzero(self._name_code == self._name_code[r]).tolist()
        return [int(self.ids[s]) for s in same if s != r
                and (repr(self.args[0][s]), repr(self.args[1][s])) == key]

    def _subtree(self, op_id: int) -> list[int]:
        """op_id and every op inside it, depth first by start."""
        out: list[int] = []
        todo = [op_id]
        while todo and len(out) <= len(self.ids):
            j = todo.pop()
            out.append(j)
            todo += reversed(self.children(j))
        return out

    def warnings(self) -> list[str]:
        """What the formulas said about the facts they were given (OpContext.warnings), each once."""
        found = [w for c in self._context_of.values() if c is not None for w in c.warnings]
        return list(dict.fromkeys(found))

    def concrete(self, op_id: int) -> Any:
        return self.args[2][self.row[op_id]]

    def price_at_dtypes(self, op_ids: np.ndarray, dtypes: Sequence[str], how: str) -> None:
        """Price again, each at its dtype of `dtypes` (a ledger dtype read elsewhere: its kernels' names), the
        ops of `op_ids` recorded without dtypes, the label saying `how`; an op that dtype does not price keeps
        the cost it had (its FLOPs from the shapes)."""
        rows = self.rows_of(op_ids)
        before = self.costs_at(rows)
        lacking = per_cost(before, lambda c: c.missing == DTYPE_UNRECORDED, bool)
        at, before = rows[lacking], before[lacking]
        if not len(at):
            return
        dtypes = [d for d, lack in zip(dtypes, lacking.tolist(), strict=True) if lack]
        self.args[1] = self.args[1].copy()  # the caller's ops table keeps what it recorded
        recorded = self.args[1][at]
        # per distinct (shapes, dtype): a long run repeats a few hundred calls a hundred thousand times
        shape_codes, _ = _repr_codes(self.args[0][at])
        example = at[first_appearances(shape_codes)]  # a row of each distinct shape list
        self.args[1][at] = map_rows(lambda c, d: assumed_dtypes(self.args[0][example[c]], d), shape_codes,
                                    objects(dtypes))
        self._priced[at] = False
        after = self.costs_at(at)
        priced = per_cost(after, lambda c: not c.missing, bool)
        labelled: dict[int, OpCost] = {}
        for c in after[priced].tolist():
            if id(c) not in labelled:
                labelled[id(c)] = replace(c, label=f"{c.label} [{how}]")
        after[priced] = objects([labelled[id(c)] for c in after[priced].tolist()])
        after[~priced], self.args[1][at[~priced]] = before[~priced], recorded[~priced]
        self._cost[at], self._known[at] = after, True

    def cost_with(self, op_id: int, concrete: list[Any]) -> OpCost:
        r = self.row[op_id]
        return op_cost(self.name(op_id), self.args[0][r], self.args[1][r], concrete)

    def _up(self, op_id: int) -> Iterator[int]:
        """op_id and the ops enclosing it, innermost first, as walked (a cycle stops after every op once)."""
        if self._index is None:  # op_ids repeat: by op_id, the last row of each counting
            j, count = op_id, 0
            while j >= 0 and j in self.row and count <= len(self.row):
                yield j
                j, count = self.parent.get(j, -1), count + 1
            return
        r, count = self.row.get(op_id, -1) if op_id >= 0 else -1, 0
        while r >= 0 and count <= len(self.row):
            yield int(self.ids[r])
            r, count = int(self._parent_row[r]), count + 1

    def ancestors(self, op_id: int) -> list[int]:
        """op_id and the ops enclosing it, innermost first."""
        return list(self._up(op_id))

    def unit(self, op_id: int) -> int:
        """The innermost op at or above op_id with a known cost (-1 when none); once per op."""
        found = self._units.get(op_id)
        if found is None:
            found = self._units[op_id] = next((j for j in self._up(op_id) if self.cost(j).known), -1)
        return found

    def units_at(self, rows: np.ndarray) -> np.ndarray:
        """unit() of the op at each row (an op_id, -1 when none), each op priced once."""
        return self._costed_at(rows, outermost=False)

    def outermost_costed(self, op_id: int, skip: np.ndarray | None = None) -> int:
        """The outermost op at or above op_id with a known cost (-1 when none); `skip`: rows not counted as
        costed (a mask by row)."""
        return next((j for j in reversed(self.ancestors(op_id))
                     if self.cost(j).known and (skip is None or not skip[self.row[j]])), -1)

    def outermost_costed_at(self, rows: np.ndarray, skip: np.ndarray | None = None) -> np.ndarray:
        """outermost_costed() of the op at each row (an op_id, -1 when none), each op priced once; `skip`:
        rows not counted as costed (a mask by row, e.g. the ops `redispatched` names)."""
        return self._costed_at(rows, outermost=True, skip=skip)

    def _costed_at(self, rows: np.ndarray, *, outermost: bool, skip: np.ndarray | None = None) -> np.ndarray:
        """The innermost (`outermost`: the outermost) op at or above each row's op with a known cost: the
        chains walked up together, a level at a time; the outermost walk goes on past a cost, a later one
        overwriting it. `skip` (the outermost walk's): rows not counted as costed."""
        def one_by_one(op_id: int) -> int:
            return self.outermost_costed(op_id, skip) if outermost else self.unit(op_id)

        rows = np.asarray(rows, dtype="int64")
        if self._index is None:  # op_ids repeat: walk by op_id, one by one
            return np.array([one_by_one(int(self.ids[r])) for r in rows.tolist()], dtype="int64")
        distinct, back = np.unique(rows, return_inverse=True)
        out = np.full(len(distinct), -1, dtype="int64")
        at, active = distinct.copy(), np.arange(len(distinct))
        for _ in range(min(_LEVELS, len(self.row) + 1)):
            known = self.known_at(at[active])
            if skip is not None:
                known &= ~skip[at[active]]
            out[active[known]] = self.ids[at[active[known]]]
            going = active if outermost else active[~known]
            above = self._parent_row[at[going]]
            active = going[above >= 0]
            at[active] = above[above >= 0]
            if not len(active):
                break
        for k in active.tolist():  # chains deeper than _LEVELS
            out[k] = one_by_one(int(self.ids[distinct[k]]))
        return out[back.reshape(-1)]

    def redispatched(self, known: np.ndarray) -> np.ndarray:
        """The ops that call themselves again, with the same shapes, at other floating dtypes, where that
        inner call has a known cost (`known`: a mask by row); a mask by row. This is autocast: its kernel
        casts the inputs (aten::to/_to_copy children) and re-dispatches the op, which the profiler records
        inside the first call. The outer call's dtypes are those before the casts: its work is done, and
        costed, by the call inside it, at the dtype it ran in."""
        outer, inner = self._redispatches
        out = np.zeros(len(self.ids), dtype=bool)
        out[outer[known[inner]]] = True
        return out

    @cached_property
    def _redispatches(self) -> tuple[np.ndarray, np.ndarray]:
        """(outer row, inner row) of each op called again inside itself at other floating dtypes."""
        child = np.flatnonzero(self._parent_row >= 0)
        parent = self._parent_row[child]
        same = self._name_code[child] == self._name_code[parent]
        shapes, dtypes = self.args[0], self.args[1]
        pairs = [(p, c) for c, p in zip(child[same].tolist(), parent[same].tolist(), strict=True)
                 if _recast(dtypes[p], dtypes[c]) and repr(shapes[p]) == repr(shapes[c])]
        found = np.array(pairs, dtype="int64").reshape(-1, 2)
        return found[:, 0], found[:, 1]

    def costed_inside(self, rows: np.ndarray) -> np.ndarray:
        """Whether an op at one of `rows` lies strictly inside each op of the table (a mask by row): the ops
        enclosing them marked a level at a time, each op walked up from once."""
        inside = np.zeros(len(self.ids), dtype=bool)
        if self._index is None:  # op_ids repeat: the enclosing ops by op_id, as ancestors() walks them
            for j in {a for r in np.asarray(rows).tolist() for a in self.ancestors(int(self.ids[r]))[1:]}:
                inside[self.row[j]] = True
            return inside
        at = np.unique(self._parent_row[np.asarray(rows, dtype="int64")])
        at = at[at >= 0]
        while len(at):  # an op already marked was walked up from already (so a cycle ends too)
            at = at[~inside[at]]
            inside[at] = True
            at = np.unique(self._parent_row[at])
            at = at[at >= 0]
        return inside


def _recast(before: Any, after: Any) -> bool:
    """Whether the recorded input dtypes `after` are `before` with some floating inputs cast to another
    floating dtype, and nothing else changed (another overload of an op records other arguments)."""
    lists = isinstance(before, list | tuple) and isinstance(after, list | tuple)
    if not lists or len(before) != len(after):
        return False
    changed = [(str(x), str(y)) for x, y in zip(before, after, strict=True) if x != y]
    return bool(changed) and all(x in _FLOATING_TYPES and y in _FLOATING_TYPES for x, y in changed)


def _pricing(name: str) -> int:
    if name.startswith("aten::"):
        return _ONE_BY_ONE if base_name(name) in INDEX_OPS else _BY_CALL
    # op_cost answers an op without a formula by its name alone, before it reads any context
    return _ONE_BY_ONE if has_formula(name) else _NO_FORMULA


def shape_text(dims: Any) -> str:
    """The kernel table's input_shapes text of a recorded Input Dims list."""
    return str(dims) if isinstance(dims, list) and dims and any(dims) else ""


def _repr_codes(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """An integer code per value, equal where their reprs are, and each code's repr: repr'd once per distinct
    object (a trace's decoder shares the argument lists of equal calls)."""
    by_object, first = row_codes(np.fromiter(map(id, values), dtype=np.uint64, count=len(values)))
    by_text, texts = pd.factorize(objects([repr(v) for v in values[first].tolist()]))
    return np.asarray(by_text, dtype="int64")[by_object], [str(t) for t in texts]
