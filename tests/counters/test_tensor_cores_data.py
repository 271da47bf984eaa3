"""The per-GPU tensor-core facts are data (nsroof/data/tensor_cores.json, read by
nsroof.counters.tensor_paths): the table loaded equals what the code held before it moved, every fact has a
source, and the package ships the file."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest

from nsroof.counters import tensor_paths as tp

REPO = Path(__file__).resolve().parents[2]

# The golden: the literals nsroof/counters/tensor_paths.py (TENSOR_FAMILIES, TENSOR_SHAPES_BY_CC,
# FIRST_SPARSE_CC, _NO_DRAM_CC) and nsroof/costs/attribution.py / nsroof/collectors/measure/runner.py
# (FP64_TENSOR_CC, FP64_TENSOR_CCS, one set written twice) held before the facts became data: the same
# values, wrapped to 110 columns; a change to the data file changes results and must be made here too.
OLD_TENSOR_FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "TU10x": {
        "cc": ("7.5",),
        "aggregate": ("src_fp16_dst_fp16", "src_fp16_bf16_tf32_dst_fp32", "src_{int8,int4,int1}"),
        "per_class": (),
    },
    "GA100/GA10x/GA10y": {
        "cc": ("8.0", "8.6", "8.7"),
        "aggregate": (
            "src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,int8,int4}+sp",
            "src_fp64",
            "src_int1",
        ),
        "per_class": (),
    },
    "AD10x": {
        "cc": ("8.9",),
        "aggregate": (
            "src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,int8,int4,fp8}+sp",
            "src_fp64",
            "src_int1",
        ),
        "per_class": (),
    },
    "GH100": {
        "cc": ("9.0",),
        "aggregate": ("src_{fp16,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,int1}", "src_fp8+sp"),
        "per_class": (
            "op_hgmma_src_{fp16,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_{igmma,imma}_src_int8+sp",
            "op_{bgmma,bmma}_src_int1",
        ),
    },
    "GB100/GB10b": {
        "cc": ("10.0", "11.0"),
        "aggregate": (
            "src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,fp4_dst_fp32,"
            "fp4_fp6_fp8_dst_fp16,fp4_fp6_fp8_dst_fp32}",
        ),
        "per_class": (
            "op_utchmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_utcqmma_src_fp4_fp6_fp8_dst_{fp16,fp32}+sp",
            "op_utcomma_src_fp4_dst_fp32+sp",
            "op_utcimma_src_int8+sp",
            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_imma_src_int8+sp",
        ),
    },
    "GB11x": {
        "cc": ("10.3",),
        "aggregate": (
            "src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8,fp4_dst_fp32,"
            "fp4_fp6_dst_fp16,fp4_fp6_dst_fp32}",
        ),
        "per_class": (
            "op_utcqmma_src_fp8_dst_fp16+sp",
            "op_utcqmma_src_fp8_dst_fp32_sparsity_off",
            "op_utcqmma_src_fp4_fp6_dst_{fp16,fp32}+sp",
            "op_utcomma_src_fp4_dst_fp32+sp",
            "op_utchmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_imma_src_int8+sp",
        ),
    },
    "GB20x/GB20b": {
        "cc": ("12.0", "12.1"),
        "aggregate": (
            "src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32,fp64,int8}",
            "src_{fp8_dst_fp16,fp8_dst_fp32,fp4_dst_fp32,fp4_fp6_dst_fp16,fp4_fp6_dst_fp32}+sp",
        ),
        "per_class": (
            "op_hmma_src_{fp16_dst_fp16,fp16_dst_fp32,bf16_dst_fp32,tf32_dst_fp32}+sp",
            "op_imma_src_int8+sp",
        ),
    },
}
OLD_TENSOR_SHAPES_BY_CC: dict[str, tuple[tuple[str, float], ...]] = {
    "7.0": (("HMMA.884", 512.0),), "7.2": (("HMMA.884", 512.0),), "7.5": (("HMMA.1688", 2048.0),),
    **{cc: (("HMMA.16816", 4096.0), ("HMMA.1688", 2048.0), ("HMMA.1684", 1024.0))
       for cc in ("8.0", "8.6", "8.7", "8.9")},
}
OLD_FIRST_SPARSE_CC = 8.0
OLD_NO_DRAM_CC = frozenset({"8.7", "11.0", "12.1"})
OLD_FP64_TENSOR_CC = frozenset({"8.0", "9.0", "10.0"})


def test_the_loaded_tables_equal_what_the_code_held() -> None:
    assert tp.tensor_families() == OLD_TENSOR_FAMILIES
    assert list(tp.tensor_families()) == list(OLD_TENSOR_FAMILIES)  # the formulas document's order
    assert tp.tensor_shapes_by_cc() == OLD_TENSOR_SHAPES_BY_CC
    assert list(tp.tensor_shapes_by_cc()) == list(OLD_TENSOR_SHAPES_BY_CC)
    assert tp.tensor_flop_per_inst_by_cc() == {cc: s[0][1] for cc, s in OLD_TENSOR_SHAPES_BY_CC.items()}
    assert tp.first_sparse_cc() == OLD_FIRST_SPARSE_CC
    assert tp.no_dram_ccs() == OLD_NO_DRAM_CC
    assert tp.fp64_tensor_ccs() == OLD_FP64_TENSOR_CC


def test_the_table_is_read_once() -> None:
    assert tp.tensor_families() is tp.tensor_families() and tp.fp64_tensor_ccs() is tp.fp64_tensor_ccs()


def test_every_fact_names_its_source() -> None:
    data = json.loads((REPO / "nsroof" / "data" / "tensor_cores.json").read_text(encoding="utf-8"))
    facts = [*data["families"], *data["mma_shapes"],
             *(data[k] for k in ("fp64_tensor_cc", "first_sparse_cc", "no_dram_cc"))]
    assert facts and all(isinstance(f.get("source"), str) and f["source"].strip() for f in facts)


def test_the_package_ships_the_file() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["nsroof"]
    # setuptools expands package-data patterns as recursive globs under the package (data/**/* takes data/x)
    shipped = {f for p in patterns for f in glob.glob(p, root_dir=REPO / "nsroof", recursive=True)}
    assert "data/tensor_cores.json" in shipped
