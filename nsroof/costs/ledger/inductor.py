"""Inductor's generated Triton kernels: pointwise (``triton_poi_fused_*``), reductions
(``triton_red_fused_*``) and persistent reductions (``triton_per_fused_*``), and GEMM templates
(``triton_tem_fused_mm`` / ``addmm`` / ``bmm`` …), each costed from what a trace records of its launch
(nsroof.costs.ledger.inductor_launch reads it).

What the name says. Inductor names a fused kernel ``triton_<kind>_fused_<ops>_<n>`` where ``<ops>`` is the
sorted set of the original ATen ops it fused, each named once however often the graph applies it, at most
``kernel_name_max_ops`` (10) of them (pytorch/pytorch torch/_inductor/utils.py ``get_fused_kernel_name``,
config ``triton.descriptive_names = "original_aten"``; ``<kind>`` is the first three letters of
torch/_inductor/wrapper_benchmark.py ``get_kernel_category_by_source_code``).

The conventions (the ledger's: nsroof.costs.ledger.core):

* FLOPs of a pointwise or reduction kernel = the elements of its iteration space (x·r) × the FLOPs per
  element of each op its name lists (inductor_launch.FLOPS_PER_OP: a basic op, a compare or a
  transcendental 1; a composite the per-element terms of its own ledger formula; data movement 0), each op
  once. A graph that applies an op twice counts it once, and an op that runs once per output row (a mean's
  divide) counts per element: the name holds no more. An op without an entry leaves the FLOPs NaN with its
  name given.
* Bytes = every tensor argument once, each at most the kernel's iteration space (a buffer larger than it is
  read in part: a gather, a slice), in-place buffers twice where the kernel file says which they are: the
  rule of Inductor's own estimate (torch/_inductor/codegen/simd.py ``SIMDKernel.estimate_kernel_num_bytes``,
  which caps a buffer at the kernel's numel).
* A GEMM template: 2·M·N·K per batch (the ledger's gemm) plus its epilogue's ops once per output element;
  bytes = every tensor argument whole (A, B, the output, a bias or epilogue input: a template's own
  estimate, TritonTemplateKernel.estimate_kernel_num_bytes, counts its inputs and output whole).
"""

from __future__ import annotations

import math

from nsroof.costs.ledger.core import (
    Cost,
    LedgerError,
    Operator,
    Roof,
    Term,
    canonical_dtype,
    non_negative,
    positive,
    simt_roof,
)
from nsroof.costs.ledger.registry import register

SRC_INDUCTOR = ("Inductor's kernel name (torch/_inductor/utils.py get_fused_kernel_name: the fused ATen ops, "
                "each once) and byte estimate (torch/_inductor/codegen/simd.py estimate_kernel_num_bytes: "
                "each buffer at most the kernel's numel); FLOPs per op: the ledger convention")

def _flop_term(iteration: int, flops_per_element: float, ops: str, flops_known: bool) -> Term:
    if not flops_known:
        return Term(f"fused ops ({ops or 'unnamed'})", flops=math.nan,
                    note="FLOPs per element unknown: an op its name lists has no entry")
    return Term(f"fused ops ({ops or 'none named'})", flops=flops_per_element * iteration,
                note=f"{flops_per_element:g} per element of the iteration space (each listed op once)")


def _buffers(buffer_bytes: float) -> Term:
    return Term("read and write the launch's tensors", bytes=buffer_bytes,
                note="Σ over its tensor arguments of min(numel, iteration space)·itemsize")


@register("triton-pointwise", source=SRC_INDUCTOR)
def triton_pointwise(n: int, buffer_bytes: float, flops_per_element: float = 0.0, ops: str = "",
                     dtype: str = "fp32", flops_known: bool = True) -> Operator:
    """An Inductor pointwise kernel over n elements: its listed ops' FLOPs per element × n; its tensors once
    each, each at most n elements (flops_known=False: FLOPs NaN, an op has no entry)."""
    positive("triton-pointwise", n=n)
    non_negative("triton-pointwise", buffer_bytes=buffer_bytes, flops_per_element=flops_per_element)
    dt = canonical_dtype(dtype)
    items = (_buffers(buffer_bytes), _flop_term(n, flops_per_element, ops, flops_known))
    shape = {"n": n, "ops": ops or "-"} | ({"flops_per_element": flops_per_element} if flops_known else {})
    return Operator("triton-pointwise", shape, dt, Cost(items), simt_roof(dt))


@register("triton-reduction", source=SRC_INDUCTOR)
def triton_reduction(outputs: int, reduced: int, buffer_bytes: float, flops_per_element: float = 0.0,
                     ops: str = "", dtype: str = "fp32", flops_known: bool = True) -> Operator:
    """An Inductor reduction (or persistent reduction) of `reduced` elements into each of `outputs`: its
    listed ops' FLOPs per element × outputs·reduced; its tensors once each, each at most outputs·reduced
    elements."""
    positive("triton-reduction", outputs=outputs, reduced=reduced)
    non_negative("triton-reduction", buffer_bytes=buffer_bytes, flops_per_element=flops_per_element)
    dt = canonical_dtype(dtype)
    items = (_buffers(buffer_bytes), _flop_term(outputs * reduced, flops_per_element, ops, flops_known))
    shape = {"outputs": outputs, "reduced": reduced, "ops": ops or "-"} | (
        {"flops_per_element": flops_per_element} if flops_known else {})
    return Operator("triton-reduction", shape, dt, Cost(items), simt_roof(dt))


@register("triton-mm", source=SRC_INDUCTOR)
def triton_mm(m: int, n: int, k: int, buffer_bytes: float, batch: int = 1, epilogue_per_output: float = 0.0,
              ops: str = "mm", dtype: str = "fp16") -> Operator:
    """An Inductor GEMM template: 2·m·n·k per batch (one multiply-add per product) plus its epilogue's ops
    once per output element; its tensors (A, B, the output, a bias or epilogue input) read or written once,
    whole."""
    positive("triton-mm", m=m, n=n, k=k, batch=batch)
    non_negative("triton-mm", buffer_bytes=buffer_bytes, epilogue_per_output=epilogue_per_output)
    dt = canonical_dtype(dtype)
    if dt in ("int32", "int64"):
        raise LedgerError(f"triton-mm: no matmul roof for {dt}")
    items = (Term("read A, B (and the epilogue's inputs), write C", bytes=buffer_bytes,
                  note="Σ over its tensor arguments of numel·itemsize"),
             Term("multiply-add", flops=2.0 * batch * m * n * k, note="2·batch·m·n·k"),
             Term("epilogue", flops=epilogue_per_output * batch * m * n,
                  note=f"{epilogue_per_output:g} per output element"))
    shape = {"m": m, "n": n, "k": k} | ({"batch": batch} if batch != 1 else {}) | {"ops": ops}
    return Operator("triton-mm", shape, dt, Cost(items), Roof("matmul", dt))
