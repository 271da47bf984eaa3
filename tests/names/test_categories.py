"""The category of a report row (nsroof.names.categories): by the op's ledger family first, by the kernel name
when no op launched it; copies, collectives, the optimizer and the loss whatever their arithmetic."""

from __future__ import annotations

import pytest

from nsroof.costs.ledger.aten import family
from nsroof.names.categories import CATEGORIES, categorize, category


@pytest.mark.parametrize(("kind", "op", "kernel", "path", "expected"), [
    # the op's family: its shape reader's module in costs/ledger/aten/
    ("kernel", "aten::addmm", "void gemv2T_kernel<float>", "", "GEMM"),
    ("kernel", "aten::linear", "vectorized_elementwise_kernel", "", "GEMM"),  # its bias add is the GEMM's
    ("kernel", "aten::cudnn_convolution", "computeOffsetsKernel", "", "convolution"),
    ("kernel", "aten::_scaled_dot_product_flash_attention", "flash_fwd_kernel", "", "attention"),
    ("kernel", "aten::native_layer_norm", "vectorized_layer_norm_kernel", "", "normalization"),
    ("kernel", "aten::_softmax", "softmax_warp_forward", "", "reduction/softmax"),
    ("kernel", "aten::embedding", "indexSelectLargeIndex", "", "embedding/index"),
    ("kernel", "aten::index_select", "indexSelectLargeIndex", "", "embedding/index"),  # movement family
    ("kernel", "aten::cat", "CatArrayBatchedCopy", "", "elementwise"),
    ("kernel", "aten::max_pool2d_with_indices", "max_pool_forward_nchw", "", "reduction/softmax"),
    ("kernel", "aten::add_", "vectorized_elementwise_kernel", "", "elementwise"),
    # what the op is for beats its arithmetic
    ("kernel", "aten::nll_loss_forward", "cunn_ClassNLLCriterion_updateOutput_kernel", "", "loss"),
    ("kernel", "aten::_fused_adam_", "fused_adam_kernel", "", "optimizer"),
    ("kernel", "aten::_foreach_add_", "multi_tensor_apply_kernel", "Optimizer.step#Adam.step", "optimizer"),
    ("kernel", "aten::_foreach_copy_", "multi_tensor_apply_kernel", "", "elementwise"),  # not an optimizer
    ("kernel", "hipGraphLaunch", "triton_red_fused_sum_1", "", "reduction/softmax"),  # a launch: kernel name
    ("kernel", "aten::add_", "vectorized_elementwise_kernel", "ProfilerStep#2/Optimizer.step#AdamW.step",
     "optimizer"),
    ("kernel", "c10d::allreduce_", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "", "communication"),
    ("memcpy", "aten::copy_", "Memcpy HtoD (Pageable -> Device)", "", "memcpy/memset"),
    # no op: the kernel's name
    ("kernel", "", "ampere_sgemm_128x64_tn", "", "GEMM"),
    ("kernel", "", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x32x256", "", "GEMM"),
    ("kernel", "", "volta_scudnn_128x64_stridedB_interior_nn_v1", "", "convolution"),
    ("kernel", "", "flash_fwd_splitkv_kernel", "", "attention"),
    ("kernel", "", "ncclKernel_AllGather_RING_LL_Sum_int8_t", "", "communication"),
    ("kernel", "", "triton_poi_fused_add_mul_0", "", "elementwise"),
    ("kernel", "", "triton_red_fused_sum_1", "", "reduction/softmax"),
    ("kernel", "", "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwd", "", "normalization"),
    ("kernel", "", "mystery_kernel", "", "other"),
    # an autograd node enclosing its backward ops: its name
    ("kernel", "autograd::engine::evaluate_function: AddmmBackward0", "sgemm", "", "GEMM"),
    # an engine's custom op (no ledger family): its name
    ("kernel", "vllm::unified_attention_with_output", "kernel_unified_attention_2d", "", "attention"),
    ("kernel", "_C::rotary_embedding", "rotary_embedding_kernel", "", "elementwise"),
    ("kernel", "_C::fused_add_rms_norm", "fused_add_rms_norm_kernel", "", "normalization"),
])
def test_category(kind: str, op: str, kernel: str, path: str, expected: str) -> None:
    assert expected in CATEGORIES
    assert category(kind, op, kernel, path, family=family) == expected


def test_categorize_names_each_row() -> None:
    got = categorize(["kernel", "memset", "kernel"], ["aten::mm", "", ""],
                     ["sgemm", "Memset (Device)", "reduce_kernel"], ["", "", ""], family)
    assert got.tolist() == ["GEMM", "memcpy/memset", "reduction/softmax"]


def test_an_ncu_export_never_loads_the_ledger_for_its_categories() -> None:
    """Rows without an op are categorized by their kernel names alone (classify loads the ledger's families
    only when a row names an op)."""
    import subprocess
    import sys

    code = ("import sys, pandas as pd\n"
            "from nsroof.roofs.classify import categories\n"
            "print(categories(pd.DataFrame({'function': ['sgemm'], 'op': ['']})).tolist(),\n"
            "      'nsroof.costs.ledger.aten' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["['GEMM']", "False"]
