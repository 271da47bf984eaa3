"""The kind of work a report row does (its `category`), from the names it carries: declared once here.

    kind memcpy/memset                     -> memcpy/memset (a GPU copy or set, whatever op issued it)
    the op, then the NVTX path (OP_RULES)  -> communication, optimizer, loss
    the op's ledger family (FAMILY_RULES,  -> GEMM for aten::addmm (its reader: costs/ledger/aten/matmul.py)
      then FAMILY_CATEGORY)
    the op's name, then the kernel's (NAME_RULES)
    else                                   -> other

An op names the work better than its kernels do (aten::linear's bias add is part of the GEMM, as TraceLens
counts it); a kernel no op launched (an ncu export, a Triton kernel launched from Python) is read by its own
name: cuBLAS/CUTLASS/rocBLAS GEMMs, flash/fmha attention, NCCL collectives, PyTorch's elementwise and
reduce kernels. The family lookup is passed in (`family`), so this module needs nothing of the ledger.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

GEMM, ATTENTION, CONV = "GEMM", "attention", "convolution"
ELEMENTWISE, NORM, REDUCTION = "elementwise", "normalization", "reduction/softmax"
INDEX, OPTIMIZER, LOSS = "embedding/index", "optimizer", "loss"
COMM, COPY, OTHER = "communication", "memcpy/memset", "other"

#: every category, in the order tables list them when times tie
CATEGORIES: tuple[str, ...] = (GEMM, ATTENTION, CONV, ELEMENTWISE, NORM, REDUCTION, INDEX, OPTIMIZER, LOSS,
                               COMM, COPY, OTHER)

#: the ledger's op families (the modules of nsroof/costs/ledger/aten/) -> category
FAMILY_CATEGORY: dict[str, str] = {
    "matmul": GEMM, "attention": ATTENTION, "conv": CONV, "norm": NORM, "pointwise": ELEMENTWISE,
    "reduction": REDUCTION, "embedding": INDEX,
    # cuDNN/oneDNN recurrent cells are GEMMs with a pointwise gate
    "recurrent": GEMM,
    # upsampling is pointwise; cat/stack/pad/fill copy data (pooling, index/gather/scatter: FAMILY_RULES)
    "resample": ELEMENTWISE,
    "movement": ELEMENTWISE,
}
#: within a family, the ops of another category: pooling is a windowed reduction, an indexed copy an index
FAMILY_RULES: dict[str, tuple[tuple[re.Pattern[str], str], ...]] = {
    "resample": ((re.compile(r"pool"), REDUCTION),),
    "movement": ((re.compile(r"index|gather|scatter|select_backward"), INDEX),),
}

_I = re.IGNORECASE
#: what the op (or an enclosing range) says beyond its arithmetic: checked before the family
OP_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"c10d|nccl|rccl|record_param_comms|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                r"|symm_mem", _I), COMM),
    # (_foreach_ ops also copy and scale outside optimizers: inside Optimizer.step# the path says it)
    (re.compile(r"_fused_(adam|sgd|adagrad)|(^|/)Optimizer\.(step|zero_grad)#"), OPTIMIZER),
    (re.compile(r"loss|nll_|cross_entropy|kl_div|_ctc", _I), LOSS),
)

#: op and kernel names, first match wins (after OP_RULES and the family)
NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    *OP_RULES,
    (re.compile(r"^Mem(cpy|set)\b|memcpy|memset", _I), COPY),
    (re.compile(r"flash|fmha|attention|attn|sdpa|mha_|paged_att", _I), ATTENTION),
    (re.compile(r"conv|scudnn|dgrad|wgrad|fprop|winograd|im2col|col2im|implicit_gemm|computeB?OffsetsKernel"
                r"|scalePackedTensor", _I), CONV),
    (re.compile(r"pool", _I), REDUCTION),
    (re.compile(r"rotary|rope", _I), ELEMENTWISE),
    (re.compile(r"gemm|cutlass|cublas|hipblas|^Cijk_|matmul|_mm\b|^mm\b|bmm|addmm|mmbackward|linear|moe"
                r"|experts|wgmma"
                r"|xmma|triton_tem", _I), GEMM),
    (re.compile(r"norm|bn_fw|bn_bw|welford", _I), NORM),
    (re.compile(r"softmax|reduce|triton_(red|per)_|argmax|argmin|topk|sort|scan|cumsum", _I), REDUCTION),
    (re.compile(r"embedding|index|gather|scatter|take_along|cache", _I), INDEX),
    (re.compile(r"adam|sgd|multi_tensor_apply|lamb_", _I), OPTIMIZER),
    (re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi_|fused_|activation|gelu|relu|silu"
                r"|sigmoid|tanh|copy|fill|cast|quant|act_and_mul|add|mul|div", _I), ELEMENTWISE),
)

COPY_KINDS = ("memcpy", "memset")


def _by_rules(name: str, rules: Sequence[tuple[re.Pattern[str], str]]) -> str:
    for pattern, category in rules:
        if pattern.search(name):
            return category
    return ""


def category(kind: str, op: str, kernel_name: str, nvtx_path: str = "",
             family: Callable[[str], str] = lambda op: "") -> str:
    """The category of one row (see the module's docstring for the order)."""
    if kind in COPY_KINDS:
        return COPY
    if op and (found := _by_rules(op, OP_RULES)):
        return found
    if nvtx_path and (found := _by_rules(nvtx_path, OP_RULES[1:2])):  # inside Optimizer.step#…
        return found
    if op and (kin := family(op)):
        return _by_rules(op, FAMILY_RULES.get(kin, ())) or FAMILY_CATEGORY.get(kin, OTHER)
    return (_by_rules(op, NAME_RULES) if op else "") or _by_rules(kernel_name, NAME_RULES) or OTHER


Texts = Sequence[str] | np.ndarray


def categorize(kinds: Texts, ops: Texts, kernel_names: Texts, nvtx_paths: Texts,
               family: Callable[[str], str] = lambda op: "") -> np.ndarray:
    """category() of every row, each distinct (kind, op, kernel name, path) once (a trace repeats a few
    hundred over millions of rows)."""
    seen: dict[tuple[str, str, str, str], str] = {}
    out = np.empty(len(kinds), dtype=object)
    for i, key in enumerate(zip(kinds, ops, kernel_names, nvtx_paths, strict=True)):
        found = seen.get(key)
        if found is None:
            found = seen[key] = category(*key, family=family)
        out[i] = found
    return out
