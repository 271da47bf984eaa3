"""nsroof.importers.trace.triton_estimates: Inductor's kernel_flop / kernel_num_gb for the Triton kernels a
trace launches, read from the launching op's record (costed end to end in test_kineto_kernel_costs.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsroof.importers.trace.events import OpArgs, OpExtras
from nsroof.importers.trace.triton_estimates import estimates


def test_only_triton_launch_records_state_a_kernels_cost() -> None:
    triton = OpArgs(extras=OpExtras(kernel_backend="triton", kernel_flop=2048, kernel_num_gb=1.5e-5))
    plain = OpArgs(sequence_number=3)
    own = [plain, triton, plain]
    captured = {7: triton}  # a replay's copy of a captured op, past the trace's own ops

    def args_of(j: int) -> OpArgs | None:
        return own[j] if 0 <= j < len(own) else captured.get(j)

    frame = pd.DataFrame({"kind": ["kernel", "kernel", "kernel", "gpu_memcpy", "kernel"],
                          "op_id": pd.array([0, 1, 7, 1, None], dtype="Int64")})
    own_triton = np.array([False, True, False])
    out = estimates(frame.copy(), args_of, own_triton)
    # 1.5e-5 GB = 15,000 bytes; a copy is not a kernel, a kernel without an op has no record
    np.testing.assert_array_equal(out["trace_flops"], [np.nan, 2048.0, 2048.0, np.nan, np.nan])
    np.testing.assert_array_equal(out["trace_bytes"], [np.nan, 15_000.0, 15_000.0, np.nan, np.nan])
    assert out["trace_cost_source"].tolist() == ["", "inductor:kernel_flop, kernel_num_gb",
                                                 "inductor:kernel_flop, kernel_num_gb", "", ""]
    # the mask only spares looking: without it, the same
    again = estimates(frame.copy(), args_of)
    pd.testing.assert_frame_equal(again, out)
