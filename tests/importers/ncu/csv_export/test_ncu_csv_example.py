"""The packaged example export (nsroof/data/examples/example_details.csv, what `make demo` analyzes): a
plausible bf16 training step on an A100-SXM4-40GB, in ncu 2024's details format. It must read cleanly
and its numbers must be physically possible on that GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nsroof
from nsroof.importers.ncu import csv_export

EXAMPLE = Path(nsroof.__file__).resolve().parent / "data" / "examples" / "example_details.csv"

A100_DRAM_BYTES_PER_S = 1.555e12  # datasheet, 40 GB
A100_BF16_TENSOR_FLOP_PER_S = 312e12  # dense
A100_FP32_FLOP_PER_S = 19.5e12


@pytest.fixture(scope="module")
def read_example():  # type: ignore[no-untyped-def]
    return csv_export.read(EXAMPLE)  # (kernels, facts)


@pytest.fixture(scope="module")
def example(read_example):  # type: ignore[no-untyped-def]
    return read_example[0]


def test_reads_cleanly(example, read_example) -> None:  # type: ignore[no-untyped-def]
    facts = read_example[1]
    assert len(example) == 15
    assert facts.format == "ncu-csv:details" and facts.number_style == "en_US"
    assert facts.warnings == [] and facts.hints == []
    assert example["device"].eq("NVIDIA A100-SXM4-40GB").all() and example["cc"].eq("8.0").all()
    assert example["nvtx_path"].str.startswith("train_step/").all()


def test_holds_every_counter_the_roofline_needs(example) -> None:  # type: ignore[no-untyped-def]
    from nsroof.counters.metric_formulas import required_metrics

    needed = set(required_metrics("8.0"))
    have = set(example.columns)
    # per kernel: time, bytes at every level, CUDA-core FLOP counters, peaks and clocks for the ceilings
    for name in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                 "lts__t_bytes.sum", "l1tex__t_bytes.sum",
                 "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
                 "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum", "dram__bytes.sum.peak_sustained",
                 "dram__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"):
        assert name in have and name in needed | {"dram__bytes_read.sum", "dram__bytes_write.sum"}, name
    assert not example[["gpu__time_duration.sum", "lts__t_bytes.sum",
                        "l1tex__t_bytes.sum"]].isna().any().any()


def test_numbers_fit_an_a100(example) -> None:  # type: ignore[no-untyped-def]
    t = example["gpu__time_duration.sum"].to_numpy()
    dram = (example["dram__bytes_read.sum"] + example["dram__bytes_write.sum"]).to_numpy()
    assert (dram / t <= A100_DRAM_BYTES_PER_S).all()
    # the hierarchy: each level moves at least the bytes of the level below it
    assert (example["lts__t_bytes.sum"].to_numpy() >= dram).all()
    assert (example["l1tex__t_bytes.sum"].to_numpy() >= example["lts__t_bytes.sum"].to_numpy() * 0.99).all()
    tensor = example["sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum"].fillna(0).to_numpy()
    assert (tensor / t <= A100_BF16_TENSOR_FLOP_PER_S).all()
    f = "sm__sass_thread_inst_executed_op_f{}_pred_on.sum"
    fp32 = (example[f.format("add")] + example[f.format("mul")] + 2 * example[f.format("fma")]).to_numpy()
    assert (fp32 / t <= A100_FP32_FLOP_PER_S).all()
    # the ceilings in the export equal the datasheet: 6,912 FFMA/cycle x 2 x 1.41 GHz = 19.49 TFLOP/s;
    # 1,285.12 B/cycle x 1.21 GHz = 1,555 GB/s
    peak = (example["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] * 2
            * example["sm__cycles_elapsed.avg.per_second"])
    assert np.allclose(peak, 19.49e12, rtol=1e-3)
    bw = example["dram__bytes.sum.peak_sustained"] * example["dram__cycles_elapsed.avg.per_second"]
    assert np.allclose(bw, 1.555e12, rtol=1e-3)


def test_golden_gemm(example) -> None:  # type: ignore[no-untyped-def]
    qkv = example.set_index("kernel_id").loc[2]
    # QKV projection, 4096 x 3072 x 1024: 2*4096*3072*1024 = 25.77e9 FLOP in 118.40 us = 217.6 TFLOP/s
    assert qkv["function"] == "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
    assert qkv["sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum"] == 25_770_000_000.0
    assert qkv["gpu__time_duration.sum"] == pytest.approx(118.40e-6)
    # "15.90" Mbyte read + "25.30" Mbyte written = 41.2e6 B -> 348 GB/s
    assert qkv["dram__bytes_read.sum"] + qkv["dram__bytes_write.sum"] == pytest.approx(41.2e6)
    assert qkv["nvtx_path"] == "train_step/forward/layers.0.attn.qkv/aten::linear, seq = 2, op_id = 9"
