"""Which roof a unit's matmul-family cost meets on a GPU: TF32 tensor cores for fp32 where torch allowed them
(its recorded switches, else the kernels' names) and the part has them; FP64 tensor cores for fp64 on the
data-center parts. nsroof.costs.attribution applies these rules to each unit of kernels."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from nsroof.costs.ledger.aten import OpCost, on_kernel
from nsroof.counters import tensor_paths as tp

# The ledger formulas whose fp32 form runs on tensor cores as TF32 when torch allows it.
TF32_MATMUL_FORMULAS = ("gemm", "gemm-bias", "bmm", "linear", "attention", "attention-backward", "decode")
TF32_CONV_PREFIX = "conv"


def tf32_rule(tf32: tuple[bool | None, bool | None], cc: np.ndarray, names: np.ndarray
               ) -> Callable[[OpCost, list[int]], OpCost]:
    """How a unit's fp32 matmul/conv cost meets TF32: by torch's recorded switches on CC >= 8.0 GPUs, or by
    its kernels' names when the trace records no switch."""
    matmul, cudnn = tf32
    judged: dict[tuple[int, str], tuple[OpCost, OpCost]] = {}  # (id of a cost, how) -> (the cost, judged)

    def once(judge: Callable[..., OpCost], cost: OpCost, *how: str) -> OpCost:
        """judge(cost, *how), once per cost object (a profile's units share a few thousand costs)."""
        key = (id(cost), "".join(how))
        if key not in judged:
            judged[key] = (cost, judge(cost, *how))
        return judged[key][1]

    def rule(cost: OpCost, members: list[int]) -> OpCost:
        if tf32 == (None, None):
            for i in members:
                cost = once(on_kernel, cost, str(names[i]))
            return cost
        allowed = ((cost.formula in TF32_MATMUL_FORMULAS and bool(matmul))
                   or (cost.formula.startswith(TF32_CONV_PREFIX) and bool(cudnn)))
        if (cost.known and cost.precision == "fp32" and allowed
                and any(_has_tf32(str(cc[i])) for i in members)):
            return once(_tf32_allowed, cost)
        return cost

    return rule


# FP64 tensor cores (DMMA) exist on the data-center parts only (nsroof.counters.tensor_paths.fp64_tensor_ccs:
# 8.0, 9.0, 10.0, from the datasheets); cuBLAS runs FP64 GEMMs on them there. A CUTLASS SIMT kernel on such a
# part does not, and says so in its name.
FP64_SIMT_KERNEL = re.compile(r"simt", re.IGNORECASE)


def fp64_tensor_rule(cc: np.ndarray, names: np.ndarray) -> Callable[[OpCost, list[int]], OpCost]:
    """An fp64 matmul-family cost on a device with FP64 tensor cores meets the FP64 tensor roof (the dense
    fp64 peak), picked like TF32: by the op's dtype and formula, the device, and the kernel (a SIMT kernel
    stays on the CUDA-core fp64 roof)."""
    fp64_tensor = tp.fp64_tensor_ccs()

    def rule(cost: OpCost, members: list[int]) -> OpCost:
        if (cost.known and cost.precision == "fp64" and cost.formula in TF32_MATMUL_FORMULAS
                and any(str(cc[i]) in fp64_tensor for i in members)
                and not any(FP64_SIMT_KERNEL.search(str(names[i])) for i in members)):
            return replace(cost, precision="tensor", tensor_dtype="fp64",
                           label=f"{cost.label} [FP64 tensor cores]")
        return cost

    return rule


def _tf32_allowed(cost: OpCost) -> OpCost:
    return replace(cost, precision="tensor", tensor_dtype="tf32", label=f"{cost.label} [TF32 allowed]")


def _has_tf32(cc: str) -> bool:
    try:
        return float(cc) >= 8.0
    except ValueError:
        return False
