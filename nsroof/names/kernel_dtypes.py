"""The data type a GEMM/convolution/attention library kernel's name states, for an op whose own dtype the
profile did not record (PyTorch's emit_nvtx ranges write sizes only; a kineto trace recorded without
types): its bytes and its tensor-core roof need one, and the library says it in the name.

The rules are data, first match wins, each a pattern of a kernel's full (demangled) name and the ledger dtype
of the tensors it reads (its A/B operands, not its accumulator). Where they come from:

  * CUTLASS 2.x procedural names (NVIDIA/cutlass, python/cutlass_library/gemm_operation.py,
    `GemmOperation.core_name` / `extended_name`): ``[C type_]<accumulator letter><MMA shape>[math input
    type]gemm[_A type]``, the letters from library.py's ShortDataTypeNames (h = f16, s = f32, d = f64,
    i = s32, c/z = complex) and the types from DataTypeNames (f16, bf16, tf32, e4m3, e5m2, s8):
    ``tensorop_s16816gemm_f16`` reads fp16 (fp32 accumulator), ``tensorop_bf16_s16816gemm_bf16`` bf16,
    ``s1688tf32gemm`` fp32 data through TF32 math, ``simt_sgemm`` fp32, ``h16816gemm`` fp16; CUTLASS 3.x:
    ``gemm_<A>_<B>_<acc>_<C>_<D>``.
  * cuBLAS/cuDNN kernels name their types the same way: ``ampere_sgemm_*``, ``volta_h884gemm_*``,
    ``turing_h1688gemm_*``, ``ampere_fp16_s16816gemm_fp16_*``, ``ampere_bf16_s16816gemm_bf16_*``,
    ``ampere_dgemm_*``, ``ampere_scudnn_*``, ``implicit_convolve_sgemm``; the xmma kernels list the A and B
    types first (``sm80_xmma_gemm_f16f16_f16f32_f32``, ``sm90_xmma_gemm_bf16bf16_bf16f32_f32``,
    ``sm80_xmma_gemm_f32f32_tf32f32_f32``: fp32 data, TF32 math).
  * CUTLASS's C++ element types in a template argument list (FlashAttention, xformers):
    ``cutlass::half_t``, ``cutlass::bfloat16_t``.

A complex GEMM (``cgemm``/``zgemm``, CUTLASS ``cf32``) reads no dtype here: its FLOPs are not a real
GEMM's, and no rule must make them look priced.
"""

from __future__ import annotations

import functools
import re

# (pattern, ledger dtype of the operands), first match wins: the narrow types before the wide ones, since a
# narrow-operand kernel names its wider accumulator too (f16f16_f16f32, fp16_s16816gemm)
KERNEL_DTYPES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), dtype) for pattern, dtype in (
        (r"e4m3|e5m2", "fp8"),
        (r"bf16|bfloat16", "bf16"),
        (r"tf32", "fp32"),  # fp32 tensors through TF32 math (whose roof the kernel name also picks)
        (r"f16|fp16|half_t|__half|hgemm|(?<![a-z0-9])h\d{3,5}(?:gemm|cudnn)", "fp16"),
        (r"i8i8|imma|gemm_s8|(?<![a-z0-9])i\d{3,5}gemm", "int8"),  # s8 operands, s32 accumulator
        (r"f64|dgemm|dcudnn|(?<![a-z0-9])d\d{3,5}gemm", "fp64"),
        (r"f32|sgemm|scudnn|(?<![a-z0-9])s\d{3,5}gemm", "fp32"),
    ))
_COMPLEX = re.compile(r"cgemm|zgemm|(?<![a-z0-9])[cz]\d{3,5}gemm|cf16|cf32|cf64|complex", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def kernel_dtype(name: str) -> str | None:
    """The ledger dtype of the operands a library kernel's name states ('fp16', 'bf16', ...), or None."""
    if _COMPLEX.search(name):
        return None
    return next((dtype for pattern, dtype in KERNEL_DTYPES if pattern.search(name)), None)
