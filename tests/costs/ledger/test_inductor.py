"""Inductor's Triton kernels costed from their launch records (nsroof.costs.ledger.inductor and
inductor_launch): the fused ops read from the name, the numels from the last integer arguments (as many as
the block sizes name dimensions), each tensor once and at most the iteration space, GEMM templates from the
shapes that multiply; a fact the record lacks named, never guessed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from nsroof.costs.ledger.aten import OpContext, OpCost, op_cost
from nsroof.costs.ledger.inductor_launch import parse_name, per_element


def _cost(name: str, dims: list[Any], types: list[str], concrete: list[str], **facts: Any) -> OpCost:
    return op_cost(name, dims, types, concrete, context=OpContext(args=facts))


@pytest.mark.parametrize(("name", "kind", "ops", "unknown"), [
    ("triton_poi_fused_add_cos_sin_0", "poi", ["add", "cos", "sin"], []),
    ("triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0", "poi",
     ["add", "bitwise_and", "bitwise_not", "bitwise_or", "ge", "lt", "mul", "sub"], []),
    ("triton_poi_fused__to_copy_1", "poi", ["_to_copy"], []),
    ("triton_poi_fused_0", "poi", [], []),
    ("triton_poi_fused_constant_pad_nd_moe_forward_0", "poi", ["constant_pad_nd"], ["moe_forward"]),
    ("triton_red_fused__softmax_native_layer_norm_12", "red", ["_softmax", "native_layer_norm"], []),
    ("triton_tem_fused_addmm_relu_3", "tem", ["addmm", "relu"], []),
])
def test_the_fused_ops_are_read_from_the_name_longest_op_first(name: str, kind: str, ops: list[str],
                                                               unknown: list[str]) -> None:
    assert parse_name(name) == (kind, ops, unknown)


def test_names_that_are_not_inductors_are_not_launches() -> None:
    assert parse_name("triton_kernel_fused_experts") is None
    assert parse_name("_fwd_kernel") is None
    # no formula: the ledger's reason for any other op
    assert op_cost("triton_matmul_kernel", [[4, 4]], ["float"], [""]).missing.startswith("no formula")


def test_a_pointwise_kernel_with_a_broadcast_input() -> None:
    # x[64, 128] + b[128], then sigmoid, bf16: xnumel 8192 (the last integer; one XBLOCK: one numel)
    c = _cost("triton_poi_fused_add_sigmoid_0", [[64, 128], [128], [64, 128], []],
              ["c10::BFloat16"] * 3 + ["Scalar"], ["", "", "", "8192"], kernel_kwargs="XBLOCK=256")
    assert per_element(["add", "sigmoid"]) == (4.0, "add 1 + sigmoid 3")
    assert c.flops == 8192 * 4 == 32768  # add 1 + sigmoid 3 (exp, add, divide) per element
    assert c.bytes == 8192 * 2 + 128 * 2 + 8192 * 2 == 33024  # x, b (once, at its own size), y
    # under the CUDA-core fp32 roof, as the ledger's pointwise formula puts every dtype narrower than fp64
    assert (c.formula, c.precision, c.roof_kind) == ("triton-pointwise", "fp32", "simt")
    assert c.label == "triton-pointwise(n=8192, ops=add+sigmoid, flops_per_element=4, dtype=bf16)"


def test_a_buffer_larger_than_the_iteration_space_counts_at_most_that_space() -> None:
    # an embedding gather: 32 int64 ids into a 50000×64 fp32 table, 32×64 out (xnumel 2048): the table is
    # read in 2048 elements at most (Inductor's estimate_kernel_num_bytes), not its 12.8 MB
    c = _cost("triton_poi_fused_embedding_0", [[32], [50000, 64], [32, 64], []],
              ["long int", "float", "float", "Scalar"], ["", "", "", "2048"], kernel_kwargs="XBLOCK=128")
    assert c.bytes == 32 * 8 + 2048 * 4 + 2048 * 4 == 16640
    assert c.flops == 0  # a gather: data movement


def test_size_symbols_before_the_numels_and_block_sizes_after_them() -> None:
    # dynamic shapes pass size symbols (ks0 = 77) before the numels; newer Triton passes the block sizes'
    # values (XBLOCK = 256) after them: the numel is 8192 either way
    dims, types = [[64, 128], [128], [64, 128], [], [], []], ["float"] * 3 + ["Scalar"] * 3
    c = _cost("triton_poi_fused_add_0", dims, types, ["", "", "", "77", "8192", "256"],
              kernel_kwargs="XBLOCK=256")
    assert (c.flops, c.bytes) == (8192, (8192 * 2 + 128) * 4)  # add 1 per element; x, b, y in fp32


def test_pytorch_2_4_records_the_grid_call_with_the_numels() -> None:
    # hta's triton_example (PyTorch of 2023): 'grid(100,)' and no kernel_kwargs; sin(x) + cos(y) of 10×10
    c = _cost("triton_poi_fused_add_cos_sin_0", [[10, 10], [10, 10], [10, 10], []],
              ["float", "float", "float", "Scalar"], ["", "", "", "100"], grid="grid(100,)")
    assert (c.flops, c.bytes) == (100 * 3, 3 * 100 * 4)  # add + cos + sin per element; two reads, one write


def test_a_reduction_and_a_persistent_reduction() -> None:
    # mean(x²) over rows of a 16×4096 fp32 x: xnumel 16, r0_numel 4096 (XBLOCK and R0_BLOCK: two numels)
    red = _cost("triton_red_fused_mean_pow_0", [[16, 4096], [16], [], []],
                ["float", "float", "Scalar", "Scalar"], ["", "", "16", "4096"],
                kernel_kwargs="XBLOCK=1,R0_BLOCK=2048")
    assert red.flops == 16 * 4096 * 2 == 131072  # mean 1 + pow 1 per element of the 16×4096 space
    assert red.bytes == 16 * 4096 * 4 + 16 * 4 == 262208
    assert red.label.startswith("triton-reduction(outputs=16, reduced=4096, ops=mean+pow")
    # a persistent reduction drops R0_BLOCK from its config: still one r numel, the last integer
    per = _cost("triton_per_fused__softmax_0", [[8, 1024], [8, 1024], [], []],
                ["c10::Half", "c10::Half", "Scalar", "Scalar"], ["", "", "8", "1024"],
                kernel_kwargs="XBLOCK=1")
    assert per.flops == 8 * 1024 * 5 == 40960  # softmax: max, subtract, exp, sum, divide
    assert per.bytes == 2 * 8 * 1024 * 2 == 32768


def test_gemm_templates_from_the_shapes_that_multiply() -> None:
    # addmm with a fused relu, fp16: bias[256], A[128, 512], B[512, 256], C[128, 256]; no numel arguments
    c = _cost("triton_tem_fused_addmm_relu_0", [[256], [128, 512], [512, 256], [128, 256]],
              ["c10::Half"] * 4, ["", "", "", ""], kernel_kwargs="BLOCK_M=64,BLOCK_N=64,BLOCK_K=32")
    # 2·128·256·512 = 33,554,432 multiply-add FLOPs + (bias add 1 + relu 1)·128·256 = 65,536
    assert c.flops == 2 * 128 * 256 * 512 + 2 * 128 * 256 == 33_619_968
    assert c.bytes == (256 + 128 * 512 + 512 * 256 + 128 * 256) * 2 == 459_264
    assert (c.formula, c.precision, c.tensor_dtype, c.roof_kind) == ("triton-mm", "tensor", "fp16", "matmul")
    bmm = _cost("triton_tem_fused_bmm_1", [[4, 64, 32], [4, 32, 16], [4, 64, 16]], ["float"] * 3,
                ["", "", ""])
    assert bmm.flops == 2 * 4 * 64 * 16 * 32 == 262144
    assert bmm.bytes == (4 * 64 * 32 + 4 * 32 * 16 + 4 * 64 * 16) * 4 == 57344
    assert bmm.label == "triton-mm(m=64, n=16, k=32, batch=4, ops=bmm, dtype=fp32)"


def test_an_op_without_flops_per_element_leaves_the_flops_nan_and_names_it() -> None:
    # vLLM's padded MoE input: constant_pad_nd (data movement) and the custom op moe_forward
    c = _cost("triton_poi_fused_constant_pad_nd_moe_forward_0", [[32, 2880], [32, 3072], []],
              ["c10::BFloat16", "c10::BFloat16", "Scalar"], ["", "", "98304"], kernel_kwargs="XBLOCK=2048")
    assert c.known and math.isnan(c.flops)
    assert c.bytes == (32 * 2880 + 32 * 3072) * 2 == 380928
    assert "moe_forward have no FLOPs per element" in c.flops_missing
    # a bias add or copy left over from a GEMM Inductor ran in cuBLAS: which, the name does not say
    bias = _cost("triton_poi_fused_addmm_relu_0", [[64, 256], [256], []], ["float", "float", "Scalar"],
                 ["", "", "16384"], kernel_kwargs="XBLOCK=512")
    assert bias.bytes == (16384 + 256) * 4 and math.isnan(bias.flops)
    assert "it names addmm, which Inductor runs as an external kernel" in bias.flops_missing


@pytest.mark.parametrize(("name", "dims", "types", "concrete", "facts", "why"), [
    ("triton_poi_fused_add_3", None, None, None, {"kernel_kwargs": "XBLOCK=64"},
     "triton_poi_fused_add_3: the trace records no kernel_flop/kernel_num_gb and no tensor shapes"),
    ("triton_poi_fused_add_3", [[64], [64], []], ["float", "float", "Scalar"], ["", "", "64"], {},
     "neither the launch's kernel_kwargs nor its grid"),
    ("triton_poi_fused_add_3", [[64], [64], []], ["float", "float", "Scalar"], None,
     {"kernel_kwargs": "XBLOCK=64"},
     "values are not recorded (Concrete Inputs"),
    ("triton_poi_fused_0", [[32], [32]], ["float", "float"], ["", ""], {"kernel_kwargs": "XBLOCK=64"},
     "numels are compiled into the kernel"),
    ("triton_tem_fused_0", [[8, 64], [8, 64]], ["float", "float"], ["", ""], {},
     "a Triton template that is not a GEMM"),
    ("triton_tem_fused_mm_0", [[8, 64], [32, 16], [8, 16]], ["float"] * 3, ["", "", ""], {},
     "no two recorded tensor arguments multiply"),
    ("triton_for_fused_0", [[8], [8]], ["float", "float"], ["", ""], {}, "a Triton foreach kernel"),
])
def test_what_the_record_lacks_is_named(name: str, dims: Any, types: Any, concrete: Any,
                                        facts: dict[str, Any], why: str) -> None:
    c = _cost(name, dims, types, concrete, **facts)
    assert not c.known and math.isnan(c.flops) and math.isnan(c.bytes)
    assert why in c.missing and c.missing.startswith(name)


def test_a_kernel_files_argument_names_count_an_in_place_buffer_twice_and_give_static_numels() -> None:
    # in_out_ptr0 is read and written; the file fixes xnumel = 1024 (no integer argument needed)
    file_facts = {"arg_names": ["in_out_ptr0", "in_ptr0", "XBLOCK"], "constexprs": ["XBLOCK"],
                  "numels": {"xnumel": 1024}}
    c = _cost("triton_poi_fused_add_relu_0", [[1024], [1024]], ["float", "float"], ["", ""],
              kernel_file_facts=file_facts)
    assert c.bytes == 1024 * 4 * 2 + 1024 * 4 == 12288  # in_out_ptr0 twice, in_ptr0 once
    assert c.flops == 1024 * 2  # add 1 + relu 1


# --------------------------------------------------------------------------- the shared real traces

_TRACES = "traces"
_VLLM = "tracelens__vllm_decode_full__graph_execution.json.gz"
_VLLM_CAPTURE = "tracelens__vllm_decode_full__graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"


@pytest.mark.parametrize(("trace", "capture", "expected"), [
    # sin(x) + cos(y) of 10×10 fp32 (grid(100,)): 100·3 FLOP, 3·100·4 B
    ("hta__triton_example.json.gz", None, {"triton_poi_fused_add_cos_sin_0": (300, 1200)}),
    # vLLM's token masking on 888 tokens: int32, int64 and bool [888] (8 ops, each 1 per element)
    ("tracelens__b200__eager_trace.json.gz", None,
     {"triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0":
      (888 * 8, 888 * (4 + 8 + 1))}),
    # replayed from the graph its capture recorded: fp32 [131072, 64] → bf16, 8,388,608 elements
    (_VLLM, _VLLM_CAPTURE, {"triton_poi_fused__to_copy_1": (0, 8388608 * (4 + 2))}),
])
def test_the_shared_traces_triton_kernels(shared_fixtures: Any, trace: str, capture: str | None,
                                          expected: dict[str, tuple[float, float]]) -> None:
    from nsroof.pipeline import analyze

    folder = shared_fixtures / _TRACES
    frame = analyze(folder / trace, captures=[folder / capture] if capture else []).frame
    triton = frame[frame["kernel_name"].astype(str).str.match(r"triton_[a-z]+_fused")]
    assert len(triton)
    for name, (flops, nbytes) in expected.items():
        rows = triton[triton["kernel_name"] == name]
        assert len(rows) and (rows["flops"] == flops).all() and (rows["bytes"] == nbytes).all(), name
    # every other one names what it lacks, by the kernel's name
    uncosted = triton[triton["flops"].isna() | triton["bytes"].isna()]
    assert all(name in why for name, why in zip(uncosted["kernel_name"], uncosted["missing"], strict=True))
