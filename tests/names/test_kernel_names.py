"""Kernel names (nsroof.names.kernel_names): the short function name every importer gives a
kernel, and fit_name, the one shortener of names for tables and charts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.names import kernel_names as names


@pytest.mark.parametrize(
    ("kernel_name", "function"),
    [
        ("ampere_sgemm_32x32_sliced1x4_tn", "ampere_sgemm_32x32_sliced1x4_tn"),  # cuBLAS: no decoration
        ("kernel", "kernel"),
        ("initRNG(curandStateXORWOW*, unsigned int)", "initRNG"),
        ("void computeValue<float>(unsigned int*, curandStateXORWOW*, unsigned int)", "computeValue"),
        ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, "
         "at::native::<unnamed>::distribution_nullary_kernel<float, float, (int)4, at::CUDAGeneratorImpl *>"
         "(at::TensorIteratorBase &)::[lambda(int, float) (instance 1)]>(int, at::PhiloxCudaState, T3, T4)",
         "distribution_elementwise_grid_stride_kernel"),
        ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 9, false>"
         "(float*, int)", "softmax_warp_forward"),
        # ncu >= 2025 strips namespaces and leaves a dangling `unnamed>::`, with or without `void`
        ("unnamed>::saxpy_kernel(float, const float *, float *, int)", "saxpy_kernel"),
        ("void vectorized_elementwise_kernel<4, unnamed>::silu_kernel(at::TensorIteratorBase &)::"
         "[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)",
         "vectorized_elementwise_kernel"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8>"
         "(Params)", "Kernel2"),
        ('void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t, '
         '"x, y">, true>(Flash_fwd_params)', "flash_fwd_kernel"),
        # --print-nvtx-rename kernel: `<innermost range>/<kernel>`
        ("aten::relu, seq = 13, op_id = 6/void computeValue<float>(unsigned int*)", "computeValue"),
        ("static cutlass::Status run_gemm<float>(int)", "run_gemm"),
        ("", ""),
    ],
)
def test_short_name(kernel_name: str, function: str) -> None:
    assert names.short_name(kernel_name) == function


def test_short_name_of_a_very_long_name_is_fast_and_right() -> None:
    args = ", ".join(f"cute::tuple<cute::C<{i}>, cute::C<128>>" for i in range(400))
    name = f"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<{args}>>(T1::Params)"
    assert len(name) > 10_000
    assert names.short_name(name) == "device_kernel"


def _segments_char_by_char(name: str) -> tuple[str, str]:
    """The bracket scan as first written, one character at a time: the reference."""
    depth = 0
    kept: list[str] = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch in "<[{":
            depth += 1
        elif ch in ">]}":
            depth = max(0, depth - 1)
        elif ch == "(":
            if depth == 0:
                if name.startswith("(anonymous namespace)", i):
                    kept.append("(anonymous namespace)")
                    i += len("(anonymous namespace)")
                    continue
                return "".join(kept), name[i:]
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            kept.append(ch)
        i += 1
    return "".join(kept), ""


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["<", ">", "(", ")", "[", "]", "{", "}", "a", "::", " ", "void ",
                                 "(anonymous namespace)", "operator<"]), max_size=20).map("".join))
def test_bracket_scan_equals_the_character_loop(name: str) -> None:
    assert names._top_level_segments(name) == _segments_char_by_char(name)


def test_fit_name_cuts_the_middle_and_keeps_the_suffix_that_differs() -> None:
    nn = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn"
    tn = nn[:-2] + "tn"
    # width 30: 15 characters of the head, '…', 14 of the tail
    assert names.fit_name(nn, 30) == "ampere_bf16_s16…stages_64x3_nn"
    assert len(names.fit_name(nn, 30)) == 30
    assert names.fit_name(nn, 30) != names.fit_name(tn, 30)
    assert names.fit_name("short", 30) == "short"
    assert names.fit_name("abc", 1) == "…" and names.fit_name("abc", 0) == ""
