"""roofs.ceilings: every roof of a kernel, with its source or the reason it is absent, from one place."""

import numpy as np
import pandas as pd

from nsroof.counters.metric_formulas import has_roofline_counters, lacking_roofline_counters
from nsroof.roofs import ceilings, machines

A100 = "NVIDIA A100-SXM4-40GB"


def _tables(devices: list[str], ncu_fp32_peak: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    kernels = pd.DataFrame({"device": devices, "cc": ["8.0"] * len(devices)})
    quantities = pd.DataFrame({
        "duration_s": [1e-3] * len(devices),
        "flops": [1e9] * len(devices), "flops_fp32": [1e9] * len(devices),
        "flops_tensor": [np.nan] * len(devices),
        "peak_flop_per_s_fp32": ncu_fp32_peak,
        "ceiling_source_fp32": ["ncu:sm__sass_thread_inst_executed"] * len(devices),
    })
    return kernels, quantities


def test_export_peak_first_then_datasheet_then_a_reason():
    kernels, q = _tables([A100, A100, "Mystery GPU 9000"], [1.0e13, np.nan, np.nan])
    r = ceilings.resolve_roofs(kernels, q, levels=("dram",))
    # kernel 0: the export's own figure; kernel 1: the A100 datasheet's SIMT fp32 19.5 TFLOP/s (no clocks
    # recorded: at boost); kernel 2: an unknown device, no roof and a reason naming it
    assert r.peak[0] == 1.0e13 and r.peak_src[0] == "ncu:sm__sass_thread_inst_executed"
    assert r.peak[1] == 19.5e12 and r.peak_src[1] == "spec:A100 SXM4 40GB#simt_flop_per_s.fp32"
    assert (np.isnan(r.peak[2]) and "Mystery GPU 9000" in r.peak_reason[2]
            and r.peak_reason[:2].tolist() == ["", ""])
    # DRAM: no ncu figure in the quantities, so the datasheet's 1,555 GB/s for the A100 rows
    assert r.bandwidth["dram"][:2].tolist() == [1.555e12, 1.555e12]
    assert r.bandwidth_src["dram"][0] == "spec:A100 SXM4 40GB#bandwidth_bytes_per_s.dram"
    assert np.isnan(r.bandwidth["dram"][2]) and r.bandwidth_src["dram"][2] == ""
    assert r.l2_cache_bytes[0] == 41943040.0  # 40 MiB, the A100 profile's cache_bytes.l2


def test_a_machine_is_a_what_if_over_the_export():
    kernels, q = _tables([A100], [1.0e13])
    h100 = machines.resolve("h100-sxm")
    r = ceilings.resolve_roofs(kernels, q, h100, levels=("dram",))
    assert r.what_if and r.peak_src[0].startswith("spec:H100 SXM#")
    assert r.peak[0] == h100.simt_flop_per_s["fp32"]
    assert ceilings.machines_used([A100, "Mystery GPU 9000"]) == [machines.lookup_device(A100)]
    assert ceilings.machines_used([A100], h100) == [h100]
    assert ceilings.machine_of("") is None and ceilings.machine_of("", h100) is h100


def test_has_ncu_ceilings():
    _, q = _tables([A100], [np.nan])
    assert not ceilings.has_ncu_ceilings(q)
    q.loc[0, "peak_flop_per_s_fp32"] = 1.0
    assert ceilings.has_ncu_ceilings(q)


def test_roofline_counters_one_definition():
    assert lacking_roofline_counters(["dram__bytes_read.sum",
                                      "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"]) == []
    assert lacking_roofline_counters(["gpu__time_duration.sum", "dram__sectors_read.sum"]) == ["FLOP"]
    assert lacking_roofline_counters(["sm__inst_executed_pipe_tensor.sum"]) == ["byte"]
    assert lacking_roofline_counters(["gpu__time_duration.sum"]) == ["byte", "FLOP"]
    assert has_roofline_counters(["lts__t_bytes.sum", "sm__ops_path_tensor_src_fp16.sum"])
    assert not has_roofline_counters(["lts__t_bytes.sum"])


def test_the_datasheet_roof_is_the_one_of_the_counter_the_bytes_came_from():
    # three A100 kernels whose L2 bytes came from lts2xbar, lts__t and no counter (an analytic cost), and L1
    # bytes from the LSU writeback and l1tex__t; no ncu ceiling, no clock recorded: the figures at boost
    kernels, q = _tables([A100] * 3, [np.nan] * 3)
    q["bytes_counter_l2"] = ["lts2xbar", "lts__t", ""]
    q["bytes_counter_l1"] = ["lsu", "l1tex__t", ""]
    r = ceilings.resolve_roofs(kernels, q, levels=("l2", "l1"))
    # L2: lts2xbar 80 slices × 64 B × 1.41 GHz = 7.2192e12; the tag stage lts__t 80 × 96 B × 1.41 GHz =
    # 1.08288e13 (1.5x); bytes of no counter take the level's plain figure (the lts2xbar one)
    assert r.bandwidth["l2"].tolist() == [5120 * 1.41e9, 7680 * 1.41e9, 5120 * 1.41e9]
    assert r.bandwidth_src["l2"][1] == "spec:A100 SXM4 40GB#counter_bandwidth_bytes_per_s.l2.lts__t"
    assert r.bandwidth_reason["l2"].tolist() == ["", "", ""]
    # L1: the LSU writeback 128 B × 108 SMs × 1.41 GHz = 1.949e13; no l1tex__t figure: NaN and why
    assert r.bandwidth["l1"][0] == 128 * 108 * 1.41e9 and np.isnan(r.bandwidth["l1"][1])
    assert r.bandwidth_reason["l1"][1] == (
        "bandwidth_bytes_per_s[l1] (no ncu peak metric; spec:A100 SXM4 40GB has no L1 roof for the l1tex__t "
        "counter (its L1 figure is the lsu counter's): collect l1tex__t_bytes.sum.peak_sustained and "
        "l1tex__cycles_elapsed.avg.per_second, or pass --machine a profile with "
        "counter_bandwidth_bytes_per_s.l1.l1tex__t)")


def test_the_exports_own_roof_stays_and_a_machine_without_the_counter_does_not_replace_it():
    kernels, q = _tables([A100], [np.nan])
    q["bytes_counter_l1"] = ["l1tex__t"]
    q["bandwidth_bytes_per_s_l1"] = [2.0e13]
    q["ceiling_source_l1"] = ["ncu:l1tex__t_bytes.sum.peak_sustained × l1tex__cycles_elapsed.avg.per_second"]
    r = ceilings.resolve_roofs(kernels, q, machines.resolve("a100-40gb"), levels=("l1",))
    assert r.bandwidth["l1"][0] == 2.0e13 and r.bandwidth_src["l1"][0].startswith("ncu:l1tex__t_bytes")


def test_a_cpu_profile_gives_its_kernels_l2_and_l3_and_says_cpu():
    cpu = machines.Machine(name="Xeon, 1 threads", source="measured", peak_flop_per_s={"fp32": 1e11},
                           bandwidth_bytes_per_s={"dram": 1e10, "l3": 2e10}, environment={"device": "cpu"},
                           cache_bytes={"l2": 2 * 2**20, "l3": 480 * 2**20})
    kernels = pd.DataFrame({"device": ["cpu"]})
    quantities = pd.DataFrame({"duration_s": [1e-3], "flops": [1e9], "flops_fp32": [1e9]})
    r = ceilings.resolve_roofs(kernels, quantities, cpu, levels=("dram",))
    assert r.cpu.tolist() == [True]
    assert r.l2_cache_bytes.tolist() == [2 * 2**20] and r.l3_cache_bytes.tolist() == [480 * 2**20]
    gpu_kernels, gpu_q = _tables([A100], [np.nan])
    gpu = ceilings.resolve_roofs(gpu_kernels, gpu_q, levels=("dram",))
    assert gpu.cpu.tolist() == [False] and np.isnan(gpu.l3_cache_bytes[0])
