"""Roofline quantities per kernel from whatever counters an export holds, with provenance.

CONTRACT (used by nsroof.report.build):

    derive(kernels: DataFrame) -> DataFrame   # same index as `kernels`

with columns
    duration_s, duration_source
    flops_fp64, flops_fp32, flops_fp16, flops_tensor, flops, flops_source, flops_estimated (bool)
    bytes_dram, bytes_l2, bytes_l1, bytes_source_dram, bytes_source_l2, bytes_source_l1
    peak_flop_per_s_fp64, peak_flop_per_s_fp32, peak_flop_per_s_fp16, peak_flop_per_s_tensor
    bandwidth_bytes_per_s_dram, bandwidth_bytes_per_s_l2, bandwidth_bytes_per_s_l1
    ceiling_source_<same suffixes>          ("ncu:<formula>" or "")
    missing_duration, missing_flops, missing_dram, missing_l2, missing_l1   (comma-separated metric names)

(implementation lands with the importer work)
"""
