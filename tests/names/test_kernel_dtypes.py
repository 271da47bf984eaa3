"""nsroof.names.kernel_dtypes: the operand dtype a cuBLAS/cuDNN/CUTLASS kernel's name states (the names as
those libraries write them: CUTLASS's procedural names, python/cutlass_library/gemm_operation.py; cuBLAS and
cuDNN kernels as profilers list them), and none where the name says no dtype or a complex one."""

from __future__ import annotations

import pytest

from nsroof.names.kernel_dtypes import kernel_dtype


@pytest.mark.parametrize(("name", "dtype"), [
    ("ampere_sgemm_64x64_tn", "fp32"),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false>", "fp32"),
    ("ampere_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "fp32"),
    ("cutlass_simt_sgemm_128x128_8x2_nn_align1", "fp32"),
    # fp32 operands through TF32 math: the dtype of the bytes is fp32 (the roof is TF32's, by the same name)
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_ffma_aligna4", "fp32"),
    ("cutlass_tensorop_s1688tf32gemm_256x128_16x3_nt_align4", "fp32"),
    # fp16 operands with an fp32 accumulator: the narrow type names the bytes
    ("volta_h884gemm_64x64_ldg8_nn", "fp16"),
    ("turing_h1688gemm_128x128_ldg8_tn", "fp16"),
    ("ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x3_nn", "fp16"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16", "fp16"),
    ("cutlass_80_tensorop_s16816gemm_f16_128x128_32x3_nt_align8", "fp16"),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", "fp16"),
    ("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>>()",
     "fp16"),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x3_tn", "bf16"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "bf16"),
    ("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_align16", "fp8"),
    ("ampere_dgemm_64x64_tn", "fp64"),
    ("cutlass_tensorop_d884gemm_64x64_16x4_nn_align1", "fp64"),
    ("sm80_xmma_gemm_i8i8_i8i32_f32_tn_n_tilesize128x128x64", "int8"),
])
def test_a_library_kernel_names_its_operand_dtype(name: str, dtype: str) -> None:
    assert kernel_dtype(name) == dtype


@pytest.mark.parametrize("name", [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)",
    "triton_poi_fused_add_relu_0",
    "ampere_cgemm_32x32_tn",  # complex fp32: its FLOPs are no real GEMM's
    "cutlass_tensorop_c1688gemm_64x64_16x4_nn_align1",
    "ampere_zgemm_32x32_nn",
])
def test_a_name_that_states_no_real_dtype_gives_none(name: str) -> None:
    assert kernel_dtype(name) is None
