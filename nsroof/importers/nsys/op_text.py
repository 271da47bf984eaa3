"""PyTorch's NVTX range texts (`torch.autograd.profiler.emit_nvtx`), read back into an op's name, autograd
sequence number and input sizes.

torch/csrc/profiler/util.cpp (`getNvtxStr`, PyTorch 1.x-2.x) writes, for each op call:

    NAME[, seq = N][, op_id = K][, sizes = [[64, 128], [128, 256]]][, input_op_ids = [(3,0), (7,0)]]

`seq` when the op has an autograd sequence number, `op_id` the record-function handle, `sizes` (with
`record_shapes=True`) one shape per input, `[]` for a non-tensor input and the tensors of a list input
flattened in (`inputSizes(fn, true)`), and `input_op_ids` the producers of its tensor inputs. PyTorch 1.x
wrote a backward function's range as `NAME, stashed seq = N`. A range with none of these fields is an op
when its name is in an op namespace (`aten::empty`: emit_nvtx writes ops without a sequence number by
name alone); any other text (a user's range, a library's) is an annotation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

# the sizes are matched loosely (brackets, digits, commas) and checked when read (_sizes): a pattern that
# spells out the list of shapes took 3.4 µs a text, a third of an export's reading of 200,000 op ranges
_TEXT = re.compile(
    r"(?P<name>[^,]+)"
    r"(?:, (?P<stashed>stashed )?seq = (?P<seq>-?\d+))?"
    r"(?:, op_id = (?P<op_id>\d+))?"
    r"(?:, sizes = (?P<sizes>\[[-\d, \[\]]*\]))?"
    r"(?:, input_op_ids = (?P<inputs>\[[^\]]*\]))?\Z")
# op namespaces a range named by an op alone is in (emit_nvtx's ops without a sequence number)
_OP_NAME = re.compile(r"^(?:aten|prim|c10d|_c10d_functional|c10d_functional|torchvision|quantized|"
                      r"cudnn|mkldnn|profiler|inductor|triton|_inductor|vllm|sglang)::\S+$"
                      r"|^autograd::engine::evaluate_function: \S+$")
EVALUATE = "autograd::engine::evaluate_function: "


@dataclass(frozen=True)
class OpText:
    """One emit_nvtx range read back: None where the text does not say."""

    name: str
    sequence_number: int | None
    input_dims: list[list[int]] | None
    stashed: bool  # PyTorch 1.x's backward function ranges


def parse(text: str) -> OpText | None:
    """The op an NVTX range text names, or None for a range that is no op (a user's annotation)."""
    m = _TEXT.match(text)
    if m is None:
        return None
    name, seq, sizes = m.group("name"), m.group("seq"), m.group("sizes")
    if seq is None and sizes is None and m.group("op_id") is None and _OP_NAME.match(name) is None:
        return None
    dims = _sizes(sizes) if sizes is not None else None
    if sizes is not None and dims is None:
        return None  # brackets that are no list of shapes: not PyTorch's text
    return OpText(name, int(seq) if seq is not None else None, dims, m.group("stashed") is not None)


@lru_cache(maxsize=65536)
def _sizes(text: str) -> list[list[int]] | None:
    """One list per distinct sizes text, shared by the ops that repeat it (as the trace loader shares Input
    Dims): every call of a step has its own op_id, so the whole texts are all distinct, their sizes not.
    None when the text is no list of shapes (lists of integers)."""
    try:
        sizes = json.loads(text)
    except ValueError:
        return None
    if not all(isinstance(s, list) and all(isinstance(d, int) for d in s) for s in sizes):
        return None
    return cast(list[list[int]], sizes)
