"""Short function names (nsroof.importers.names) and NVTX cells (nsroof.importers.nvtx), as the CSV
importer uses them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsroof.importers import names, nvtx


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
        ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 9, false>(float*, int)",
         "softmax_warp_forward"),
        # ncu >= 2025 strips namespaces and leaves a dangling `unnamed>::`, with or without `void`
        ("unnamed>::saxpy_kernel(float, const float *, float *, int)", "saxpy_kernel"),
        ("void vectorized_elementwise_kernel<4, unnamed>::silu_kernel(at::TensorIteratorBase &)::[lambda(float) "
         "(instance 1)], std::array<char *, 2>>(int, T2, T3)", "vectorized_elementwise_kernel"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x256_32x3_tn_align8>(Params)", "Kernel2"),
        ('void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t, "x, y">, '
         "true>(Flash_fwd_params)", "flash_fwd_kernel"),
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


PUSH_POP = ('21096  "<default domain>:model.forward:none:none:none:none:none:none"  '
            '"<default domain>:aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], '
            'input_op_ids = [(3, 0)]:none:none:none:none:none:none"  "nsroof:layer1:Int64:42:RGB:0xff00ff00:ASCII:layer1" ')
START_END = ' "100:nsroof:step0:none:none:none:none:none:none" '


def test_push_pop_cell() -> None:
    ranges = nvtx.parse_push_pop(PUSH_POP)
    assert [(r.domain, r.name) for r in ranges] == [
        ("<default domain>", "model.forward"),
        ("<default domain>", "aten::addmm, seq = 12, op_id = 5, sizes = [[64, 128], [128, 256]], input_op_ids = [(3, 0)]"),
        ("nsroof", "layer1"),  # a range with attributes: the six trailing fields are payload/color/message
    ]


def test_start_end_cell() -> None:
    assert [(r.domain, r.name, r.kind) for r in nvtx.parse_start_end(START_END)] == [("nsroof", "step0", "start_end")]


def test_flat_ranges_push_pop_then_start_end() -> None:
    got = nvtx.ranges(PUSH_POP, START_END)
    assert got[0] == "model.forward" and got[-2:] == ("layer1", "step0")
    assert nvtx.path(got).startswith("model.forward/aten::addmm, seq = 12")


def test_empty_cells() -> None:
    assert nvtx.ranges("", "") == ()
    assert nvtx.parse_push_pop("   ") == []


def test_unescaped_quote_inside_a_token() -> None:
    cell = '9  "<default domain>:outer "quoted", name:none:none:none:none:none:none"  "<default domain>:inner:colon:none:none:none:none:none:none" '
    assert nvtx.ranges(cell, "") == ('outer "quoted", name', "inner:colon")


def test_column_names() -> None:
    assert nvtx.is_push_pop_column("thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")
    assert nvtx.is_push_pop_column("thread Domain:Push/Pop_Range")  # shorter form said to appear in 2026+
    assert nvtx.is_start_end_column("Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg")


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
