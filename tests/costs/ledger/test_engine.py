"""Engine custom ops, collectives, step annotations, --model-config and the public op-formula registry."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from nsroof.costs.ledger import custom
from nsroof.costs.ledger.aten import op_cost
from nsroof.costs.ledger.core import LedgerError, Term
from nsroof.costs.ledger.custom import OpContext, Tensor, formula, using_model
from nsroof.costs.ledger.engine_context import op_contexts, parse_step, read_model_config
from nsroof.errors import NsroofError
from tests import _paths
from tests._paths import SHARED_FIXTURES

GPT_OSS = _paths.DATA / "models" / "gpt-oss-120b.config.json"
B200 = SHARED_FIXTURES / "traces" / "tracelens__b200__eager_trace.json.gz"


def test_both_step_annotation_forms_parse() -> None:
    step = parse_step("execute_context_1(888_788544)_generation_0(0)")
    assert step is not None and step.tokens == 888 and step.context.q_kv == 788_544 == 888 * 888
    # one causal request of 888: Σq·kv − (Σq² − Σq)/2 = 788,544 − (788,544 − 888)/2 = 394,716 = 888·889/2
    assert step.context.causal_pairs("context") == 394_716 == 888 * 889 // 2
    long = parse_step("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)")
    assert long is not None and long.generation.causal_pairs("generation") == 32_785  # one query per request
    short = parse_step("execute_context_2(100)_generation_3(3)")
    assert short is not None
    with pytest.raises(custom.Missing, match="Σ q·kv"):
        short.context.causal_pairs("context")


def test_engine_attention_counts_the_lower_right_mask() -> None:
    from nsroof.costs.ledger.attention import LOWER_RIGHT, causal_pairs

    # one prefill of 100 new tokens over 300 keys (200 cached): the queries are the newest tokens, so the mask
    # is lower-right: Σq·kv − (Σq² − Σq)/2 = 30,000 − (10,000 − 100)/2 = 25,050
    # = 100·(300 − 100 + 1) + 100·99/2
    step = parse_step("execute_1_context_1(sq100sk300sqsq10000sqsk30000)_generation_0(sq0sk0sqsq0sqsk0)")
    assert step is not None
    assert step.context.causal_pairs("context") == causal_pairs(100, 300, LOWER_RIGHT) == 25_050


def test_attention_from_the_step_annotation_names_what_is_missing() -> None:
    shapes = [[888, 8, 64], [888, 1, 64], [888, 1, 64], [888, 8, 64], [], [], []]
    types = ["c10::Float8_e4m3fn", "c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "", ""]
    none = op_cost("vllm::unified_attention_with_output", shapes, types)
    assert "step annotation" in none.missing
    ctx = OpContext(step=parse_step("execute_context_1(888_788544)_generation_0(0)"))
    cost = op_cost("vllm::unified_attention_with_output", shapes, types, context=ctx)
    # 8 heads, d 64, 394,716 causal pairs: 4·8·394,716·64 + 5·8·394,716 + 888·8·64 FLOP
    assert cost.flops == 4 * 8 * 394_716 * 64 + 5 * 8 * 394_716 + 888 * 8 * 64
    # sliding layer (gpt-oss: window 128, layer 0): Σ_i min(i + 1, 128) = 128·129/2 + (888 − 128)·128
    # = 105,536
    model = read_model_config(str(GPT_OSS))
    sliding = op_cost("vllm::unified_attention_with_output", shapes, types,
                      context=OpContext(step=ctx.step, model=model, ordinal=0))
    assert sliding.flops == 4 * 8 * 105_536 * 64 + 5 * 8 * 105_536 + 888 * 8 * 64


def test_moe_forward_needs_the_model_config_and_uses_it() -> None:
    shapes, types = [[888, 3072], [888, 128], []], ["c10::BFloat16", "c10::BFloat16", ""]
    assert "--model-config" in op_cost("vllm::moe_forward", shapes, types).missing
    with using_model(read_model_config(str(GPT_OSS))):
        assert "tensor-parallel" in op_cost("vllm::moe_forward", shapes, types).missing
        cost = op_cost("vllm::moe_forward", shapes, types, context=OpContext(world_size=8))
    # ffn per rank 2880/8 = 360: 2·888·4·3072·720 + 5·888·4·360 + 2·888·4·360·3072 + 888·128 + 2·888·4·3072
    expect = 2 * 3552 * 3072 * 720 + 5 * 3552 * 360 + 2 * 3552 * 360 * 3072 + 888 * 128 + 2 * 3552 * 3072
    assert cost.known and cost.flops == expect


def test_collectives_use_the_nccl_tests_bus_factors() -> None:
    # all-reduce of 888·2880 bf16 over 8 ranks: S·2·7/8 = 5,114,880·1.75 = 8,951,040 link bytes
    ctx = OpContext(world_size=8)
    cost = op_cost("symm_mem::multimem_all_reduce_", [[2_557_440], [], []], ["c10::BFloat16", "", ""],
                   context=ctx)
    assert cost.bytes == 2_557_440 * 2 * 2 * 7 / 8
    assert "process group size" in op_cost("symm_mem::multimem_all_reduce_", [[8], [], []],
                                           ["float", "", ""]).missing
    # all-gather 1×25,136 -> 8×25,136 bf16: S = 402,176 B, ·7/8
    gather = op_cost("c10d::_allgather_base_", [[8, 25136], [1, 25136]], ["c10::BFloat16"] * 2, context=ctx)
    assert gather.bytes == 8 * 25136 * 2 * 7 / 8


def test_user_formulas_are_checked_like_the_built_in_ones(tmp_path: Path) -> None:
    @formula("mylib::scale_add", source="2 FLOP per element")
    def scale_add(x: Tensor, b: Tensor, a: float) -> list[Term]:
        return [Term("read", bytes=x.nbytes + b.nbytes), Term("write", bytes=x.nbytes),
                Term("ax+b", flops=2 * x.numel)]

    try:
        cost = op_cost("mylib::scale_add", [[4, 8], [4, 8], []], ["float", "float", "Scalar"],
                       [None, None, 2.0])
        assert (cost.flops, cost.bytes) == (2 * 32, 3 * 32 * 4)
        with pytest.raises(LedgerError, match="already has a formula"):
            formula("mylib::scale_add")(scale_add)
        with pytest.raises(LedgerError, match="annotation"):
            formula("mylib::bad")(lambda x: [])
        with pytest.raises(LedgerError, match="built-in"):
            formula("aten::mm")(scale_add)
    finally:
        custom.unregister("mylib::scale_add")
    bad = tmp_path / "f.py"
    bad.write_text("import nsroof\n@nsroof.formula('nope')\ndef f(x: nsroof.Tensor): return []\n")
    with pytest.raises(NsroofError, match="f.py"):
        custom.load_file(str(bad))


@pytest.mark.skipif(not B200.exists(), reason="shared B200 trace absent")
def test_b200_trace_every_custom_op_costed_or_naming_its_fact() -> None:
    from nsroof.pipeline import analyze

    frame = analyze(B200, machine="b200").frame
    kernels = frame[frame["kind"].astype(str) == "kernel"]
    custom_ops = kernels[~kernels["op"].astype(str).str.startswith("aten::")
                         & kernels["op"].astype(str).str.contains("::")]
    missing = set(custom_ops.loc[custom_ops["flops"].isna(), "missing"].astype(str))
    # without --model-config the MoE's sizes come from the trace: only its routing, quantize and finalize
    # kernels stay without FLOPs (the attribution's rule 2: the op's work is on its GEMM kernels)
    assert missing == {"a copy/layout kernel of vllm::moe_forward: its tensors are not recorded; the op's "
                       "FLOPs and bytes are on its GEMM/conv/attention kernels"}
    d = kernels["duration_s"].fillna(0.0)
    assert d[kernels["flops"].notna()].sum() / d.sum() >= 0.90
    with using_model(read_model_config(str(GPT_OSS))):
        report = analyze(B200, machine="b200")
    kernels = report.frame[report.frame["kind"].astype(str) == "kernel"]
    d = kernels["duration_s"].fillna(0.0)
    assert d[kernels["flops"].notna()].sum() / d.sum() >= 0.90
    # the config's 2880 / 8 = 360 per rank against the 512 the trace's buffers hold (padded): both named
    assert any("ffn 512" in w and "360" in w for w in report.warnings)
    att = kernels[kernels["op"].astype(str) == "vllm::unified_attention_with_output"]
    assert att["flops"].notna().all() and not math.isnan(float(att["flops"].sum()))


def test_collectives_stand_under_the_interconnect_roof_from_the_datasheets() -> None:
    from nsroof.roofs.machines import interconnect

    cost = op_cost("vllm::all_reduce", [[888, 2880], []], ["c10::BFloat16", ""],
                   context=OpContext(world_size=8))
    assert cost.roof_kind == "link"
    b200 = interconnect("B200")
    # NVLink 5: 1.8 TB/s per GPU both directions -> 900 GB/s each way; the all-reduce's floor is
    # 8,951,040 B / 9e11
    assert b200 is not None and b200["bandwidth_bytes_per_s"] == 9e11 and "datasheet" in b200["source"]
    assert interconnect("RTX 4090") is None


@pytest.mark.skipif(not B200.exists(), reason="shared B200 trace absent")
def test_analyze_takes_the_model_config_and_formulas_options(tmp_path: Path) -> None:
    from tests._cli import invoke

    example = _paths.REPO / "docs" / "examples" / "my_formulas.py"
    code, out, err = invoke("analyze", str(B200), "-o", str(tmp_path / "r.parquet"), "--machine", "b200",
                            "--model-config", str(GPT_OSS), "--formulas", str(example))
    assert code == 0, err
    import re

    # kernel time costed with the model config: 91.9% (the MoE's GEMM kernels carry its cost; its routing,
    # quantize and finalize helpers none), 43.9% without
    share = re.search(r"eager_trace\.json\.gz\s+([\d.]+)% of", out)
    assert share is not None and float(share.group(1)) >= 75.0, out
    code, out, err = invoke("analyze", str(B200), "-o", str(tmp_path / "s.parquet"), "--model-config",
                            str(example))
    assert code == 2 and "my_formulas.py:1: not JSON" in err


def test_norm_ops_of_each_engine_count_the_same_bytes() -> None:
    # rows 32, hidden 4096, bf16: rmsnorm reads x (262,144 B) and w (8,192 B), writes y (262,144 B);
    # the fused-add forms also read the residual and write the sum (2·262,144 B) and add once per element
    bf16 = "c10::BFloat16"
    plain = op_cost("_C::rms_norm", [[32, 4096], [32, 4096], [4096], []], [bf16] * 3 + ["Scalar"],
                    [None] * 3 + [1e-5])
    assert plain.bytes == 262_144 + 8_192 + 262_144
    assert op_cost("aiter::rmsnorm", [[32, 4096], [32, 4096], [4096], []], [bf16] * 3 + ["Scalar"],
                   [None] * 3 + [1e-5]).bytes == plain.bytes
    fused = op_cost("aiter::add_rmsnorm", [[32, 4096]] * 4 + [[4096], []], [bf16] * 5 + ["Scalar"],
                    [None] * 5 + [1e-5])
    vllm = op_cost("_C::fused_add_rms_norm", [[32, 4096], [32, 4096], [4096], []], [bf16] * 3 + ["Scalar"],
                   [None] * 3 + [1e-5])
    assert (fused.bytes == vllm.bytes == plain.bytes + 2 * 262_144
            and fused.flops == vllm.flops == plain.flops + 32 * 4096)


def test_op_contexts_count_each_steps_calls_of_one_name_in_start_order() -> None:
    step_a = "execute_context_1(8_64)_generation_0(0)"
    step_b = "execute_context_0(0)_generation_2(2)"
    rows = [  # (op_id, name, start, nvtx_path)
        (1, "vllm::unified_attention", 3.0, f"run/{step_a}"), (2, "_C::rms_norm", 1.0, f"run/{step_a}"),
        (3, "vllm::unified_attention", 2.0, f"run/{step_a}"), (4, "aten::mm", 0.0, f"run/{step_a}"),
        (5, "vllm::unified_attention", 4.0, f"run/{step_b}"), (6, "_C::rms_norm", 5.0, ""),
        (7, "vllm::unified_attention", 2.0, f"run/{step_a}"),  # a tie with op 3: table order
    ]
    ops = pd.DataFrame({"op_id": pd.array([r[0] for r in rows], dtype="Int64"), "name": [r[1] for r in rows],
                        "start_us": [r[2] for r in rows], "nvtx_path": [r[3] for r in rows]})
    ops.attrs = {"world_size": 4, "op_attributes": {5: {"group_size": 2}}}
    got = op_contexts(ops)
    assert sorted(got) == [1, 2, 3, 5, 6, 7]  # not the aten op
    assert {j: got[j].ordinal for j in got} == {3: 0, 7: 1, 1: 2, 5: 0, 2: 0, 6: 0}
    assert got[1].step is not None and got[1].step.annotation == step_a and got[6].step is None
    assert (got[5].world_size, got[5].args, got[1].args) == (4, {"group_size": 2}, {})
    # the ops of one name alone get the contexts the whole table gives them (an ordinal counts one name)
    attention = ops[ops["name"] == "vllm::unified_attention"]
    attention.attrs = {}
    assert op_contexts(attention, ops.attrs) == {j: got[j] for j in (1, 3, 5, 7)}


def test_aiter_rmsnorms_follow_their_signatures() -> None:
    bf16 = "c10::BFloat16"
    # rmsnorm2d_fwd_with_add_ck(out, input, residual_in, residual_out, weight, eps, flag) on [32, 2880]:
    # 4·n + 3·rows + n (the add) FLOP, n = 92,160; read x, write out, read w, read residual + write the sum
    n = 32 * 2880
    add = op_cost("aiter::rmsnorm2d_fwd_with_add_ck", [[32, 2880]] * 4 + [[2880], [], []], [bf16] * 5 +
                  ["Scalar", "Scalar"], ["", "", "", "", "", "1e-05", "0"])
    assert add.flops == 4 * n + 3 * 32 + n
    assert add.bytes == 2 * n + 2 * 2880 + 2 * n + 2 * 2 * n
    # rms_norm(input, weight, eps, flag) -> out of the input's shape: 4·n + 3·rows, x + y + w bytes
    plain = op_cost("aiter::rms_norm", [[32, 2880], [2880], [], []], [bf16, bf16, "Scalar", "Scalar"],
                    ["", "", "1e-05", "0"])
    assert (plain.flops, plain.bytes) == (4 * n + 3 * 32, 2 * n + 2 * n + 2 * 2880)


def test_aiter_groupnorm_in_both_signatures() -> None:
    # x [2, 64, 8, 8] bf16, 32 groups: a layernorm over 2·32 rows of 2·64 elements (layernorm without affine:
    # 1 + 3 + 2 per element, 4 per row) + γ·x̂ + β (2 per element); x read, y written, γ and β read once
    n = 2 * 64 * 8 * 8
    flops = 6 * n + 4 * 64 + 2 * n
    nbytes = 2 * n * 2 + 2 * 64 * 2
    bf16 = "c10::BFloat16"
    old = op_cost("aiter::_groupnorm_run", [[2, 64, 8, 8], [], [64], [64], []],
                  [bf16, "Scalar", bf16, bf16, "Scalar"], ["", "32", "", "", "1e-05"])
    new = op_cost("aiter::_groupnorm_run", [[2, 64, 8, 8], [4096], [2, 64, 8, 8], [], [64], [64], []],
                  [bf16, "float", bf16, "Scalar", bf16, bf16, "Scalar"], ["", "", "", "32", "", "", "1e-05"])
    assert (old.flops, old.bytes) == (new.flops, new.bytes) == (flops, nbytes)


def test_aiter_mha_batch_prefill_counts_the_mask_it_records() -> None:
    bf16 = "c10::BFloat16"
    # one request: 128 new queries over 512 cached-and-new keys in 32 pages of 16, 8 heads over 2 kv heads,
    # d = 64; is_causal (#12) True, window_size_left (#13) -1
    shapes = [[128, 8, 64], [40, 16, 2, 64], [40, 16, 2, 64], [2], [2], [32], *([[]] * 9)]
    types = [bf16, bf16, bf16, "int", "int", "int", *(["Scalar"] * 9)]

    def concrete(causal: bool, left: int) -> list[str]:
        return ["", "", "", "", "", "", "128", "512", "0.0", "0.125", "0.0", "False", str(causal), str(left),
                "-1"]

    causal = op_cost("aiter::mha_batch_prefill", shapes, types, concrete(True, -1), context=OpContext())
    # lower-right causal pairs q·kv − q(q − 1)/2 = 65,536 − 8,128 = 57,408; 2·8·57,408·(64 + 64) +
    # 5·8·57,408 + 128·8·64 FLOP; Q read, O written (128·8·64·2 B each), K and V 512·2·(64 + 64)·2 B
    pairs = 128 * 512 - 128 * 127 // 2
    assert causal.flops == 2 * 8 * pairs * 128 + 5 * 8 * pairs + 128 * 8 * 64
    assert causal.bytes == 2 * 128 * 8 * 64 * 2 + 512 * 2 * 128 * 2
    full = op_cost("aiter::mha_batch_prefill", shapes, types, concrete(False, -1), context=OpContext())
    assert full.flops == 2 * 8 * 128 * 512 * 128 + 5 * 8 * 128 * 512 + 128 * 8 * 64
    # a left window of 63 keys: query i at position 384 + i sees min(385 + i, 64) = 64 keys each
    window = op_cost("aiter::mha_batch_prefill", shapes, types, concrete(True, 63), context=OpContext())
    assert window.flops == 2 * 8 * 128 * 64 * 128 + 5 * 8 * 128 * 64 + 128 * 8 * 64
    batched = [[128, 8, 64], [40, 16, 2, 64], [40, 16, 2, 64], [3], [3], [32], *([[]] * 9)]
    assert "per-request" in op_cost("aiter::mha_batch_prefill", batched, types, concrete(True, -1),
                                    context=OpContext()).missing


def test_sglang_profiler_paged_attention_takes_the_kv_lengths_from_the_step() -> None:
    bf16 = "c10::BFloat16"
    # the wrapper records the tensor arguments only: out, workspace, query, key/value cache [slots, 1, 8, 128]
    # (NHD, page 1), kv_indptr [33], kv_page_indices (the pool's capacity), kv_last_page_lens, alibi (None),
    # k_scale, v_scale, fp8_out_scale (None)
    shapes = [[32, 32, 128], [1000], [32, 32, 128], [835874, 1, 8, 128], [835874, 1, 8, 128], [33],
              [20971520], [4096], [], [1], [1], []]
    types = [bf16, "unsigned char", bf16, bf16, bf16, "int", "int", "int", "", "float", "float", ""]
    name = "sglang_profiler::attention_paged_attention_ragged_100"  # the profiler's counter suffix
    assert "step annotation" in op_cost(name, shapes, types, context=OpContext()).missing
    step = parse_step("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)")
    cost = op_cost(name, shapes, types, context=OpContext(step=step))
    # 32 one-token requests over Σkv = 32,785 keys: 32,785 pairs per head; 4·32·32,785·128 + 5·32·32,785 +
    # 32·32·128 FLOP (TraceLens: 4·32·32,785·128 = 0.537 GFLOP); K and V 32,785·8·128·2·2 B + Q + O
    assert cost.flops == 4 * 32 * 32_785 * 128 + 5 * 32 * 32_785 + 32 * 32 * 128
    assert cost.bytes == 2 * 32 * 32 * 128 * 2 + 2 * 32_785 * 8 * 128 * 2


def test_aiter_mha_batch_prefill_refuses_another_signatures_arguments() -> None:
    bf16 = "c10::BFloat16"
    shapes = [[128, 8, 64], [40, 16, 2, 64], [40, 16, 2, 64], [2], [2], [32], *([[]] * 9)]
    types = [bf16, bf16, bf16, "int", "int", "int", *(["Scalar"] * 9)]
    # a release with one more scalar before is_causal: #12 holds a float, #13 a bool: no flag is coerced
    shifted = ["", "", "", "", "", "", "128", "512", "128", "0.0", "0.125", "0.0", "False", "True", "-1"]
    cost = op_cost("aiter::mha_batch_prefill", shapes, types, shifted, context=OpContext())
    assert "is_causal and window_size_left" in cost.missing


def test_aiter_mha_varlen_fwd_in_both_argument_layouts() -> None:
    bf16 = "c10::BFloat16"
    # one request of 256 tokens, packed keys [256, 2, 64], 8 heads, causal: 256·256 − 256·255/2 = 32,896
    # pairs; 2·8·32,896·128 + 5·8·32,896 + 256·8·64 FLOP
    pairs = 256 * 256 - 256 * 255 // 2
    expect = 2 * 8 * pairs * 128 + 5 * 8 * pairs + 256 * 8 * 64
    shapes = [[256, 8, 64], [256, 2, 64], [256, 2, 64], [2], [2], *([[]] * 11)]
    types = [bf16, bf16, bf16, "int", "int", *(["Scalar"] * 11)]
    # (q, k, v, cu_q, cu_k, max_q, max_k, dropout, scale, zero_tensors, is_causal #10, window_left #11, …)
    old = ["", "", "", "", "", "256", "256", "0.0", "0.125", "False", "True", "-1", "-1", "False", "False",
           ""]
    # (…, max_k, min_q, dropout, scale, soft_cap, zero_tensors, is_causal #12, window_left #13, …)
    new = ["", "", "", "", "", "256", "256", "256", "0.0", "0.125", "0.0", "False", "True", "-1", "-1", ""]
    for concrete in (old, new):
        assert op_cost("aiter::mha_varlen_fwd", shapes, types, concrete, context=OpContext()).flops == expect
