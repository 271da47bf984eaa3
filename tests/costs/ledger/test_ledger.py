"""The ledger core: the additive cost record, the dtype table, the registry and its errors."""

from __future__ import annotations

import math

import pytest

from nsroof.costs import ledger
from nsroof.costs.ledger import Cost, LedgerError, Operator, Roof, Term
from nsroof.costs.ledger.registry import unregister
from nsroof.errors import NsroofError


class TestCost:
    def test_costs_add_term_by_term(self) -> None:
        a = Cost((Term("read x", bytes=8.0), Term("add", flops=2.0)), ("note a",))
        b = Cost((Term("write y", bytes=4.0),), ("note a", "note b"))
        total = a + b
        assert total.flops == 2.0
        assert total.bytes == 12.0
        assert [t.name for t in total.terms] == ["read x", "add", "write y"]
        assert total.notes == ("note a", "note b")  # shared notes are not repeated

    def test_cost_is_frozen(self) -> None:
        c = Cost((Term("x", flops=1.0),))
        with pytest.raises(AttributeError):
            c.terms = ()  # type: ignore[misc]
        with pytest.raises(AttributeError):
            c.terms[0].flops = 2.0  # type: ignore[misc]

    def test_intensity_edges(self) -> None:
        assert Cost((Term("f", flops=3.0), Term("b", bytes=2.0))).intensity == 1.5
        assert Cost((Term("f", flops=3.0),)).intensity == math.inf  # work, no traffic
        assert math.isnan(Cost().intensity)  # neither

    def test_scaled_multiplies_every_term(self) -> None:
        c = ledger.cost("softmax", rows=2, cols=3, dtype="fp32").scaled(4)
        # softmax 2×3 fp32: 5·6 = 30 FLOP, (6 + 6)·4 = 48 bytes; ×4 launches
        assert (c.flops, c.bytes) == (120.0, 192.0)


class TestDtypes:
    @pytest.mark.parametrize(
        ("dtype", "nbytes"),
        [("fp64", 8), ("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1),
         ("int32", 4), ("fp4", 0.5), ("torch.bfloat16", 2), ("float16", 2), ("float8_e4m3fn", 1)],
    )
    def test_bytes_per_element(self, dtype: str, nbytes: float) -> None:
        assert ledger.dtype_bytes(dtype) == nbytes

    def test_dtype_changes_bytes_not_flops(self) -> None:
        h = ledger.cost("gemm", m=8, n=8, k=8, dtype="fp16")
        f = ledger.cost("gemm", m=8, n=8, k=8, dtype="fp32")
        assert h.flops == f.flops == 1024.0  # 2·8·8·8
        assert f.bytes == 2 * h.bytes

    def test_unknown_dtype_lists_known(self) -> None:
        with pytest.raises(LedgerError, match="unknown dtype 'fp12'.*fp32.*fp4"):
            ledger.cost("gemm", m=1, n=1, k=1, dtype="fp12")


class TestRegistry:
    def test_builtin_formulas_are_registered(self) -> None:
        expected = {"gemm", "bmm", "linear", "conv2d", "attention", "attention-traffic", "decode", "rmsnorm",
                    "layernorm", "softmax", "embedding", "elementwise", "norm-rope-quant"}
        assert expected <= set(ledger.names())

    def test_duplicate_registration_is_an_error(self) -> None:
        with pytest.raises(LedgerError, match="'gemm' is already registered"):
            ledger.register("gemm", source="test")(lambda m: None)  # type: ignore[arg-type,return-value]

    def test_register_and_call_a_new_formula(self) -> None:
        @ledger.register("test-copy", source="test")
        def copy(n: int, dtype: str = "fp32") -> Operator:
            b = ledger.dtype_bytes(dtype)
            return Operator("test-copy", {"n": n}, dtype,
                            Cost((Term("read", bytes=n * b), Term("write", bytes=n * b))),
                            Roof("simt", "fp32"))

        try:
            assert ledger.cost("test-copy", n="1e3").bytes == 8000.0  # "1e3" coerced to int 1000; 2·1000·4
            with pytest.raises(LedgerError, match="already registered"):
                ledger.register("test-copy", source="test")(copy)
        finally:
            unregister("test-copy")

    def test_untyped_parameters_are_refused(self) -> None:
        with pytest.raises(LedgerError, match="needs an int/float/bool/str annotation"):
            ledger.register("test-untyped",
                            source="test")(lambda n: None)  # type: ignore[arg-type,return-value]
        assert "test-untyped" not in ledger.names()

    def test_unknown_formula_lists_known_names(self) -> None:
        with pytest.raises(LedgerError, match=r"unknown ledger formula 'gemv'; known: attention, .*gemm"):
            ledger.get("gemv")

    def test_ledger_error_is_an_nsroof_error(self) -> None:
        assert issubclass(LedgerError, NsroofError)  # so the CLI prints it as one line, exit 2

    def test_unknown_parameter_lists_accepted(self) -> None:
        with pytest.raises(LedgerError, match="gemm: unknown parameter 'x'; accepted: m, n, k, dtype, batch"):
            ledger.cost("gemm", m=1, n=1, k=1, x=3)

    def test_missing_parameter_is_named(self) -> None:
        with pytest.raises(LedgerError, match="gemm: missing parameter\\(s\\) k"):
            ledger.cost("gemm", m=1, n=1)

    @pytest.mark.parametrize("bad", ["2.5", "abc", True, float("nan")])
    def test_lossy_int_is_refused(self, bad: object) -> None:
        with pytest.raises(LedgerError, match="m must be int"):
            ledger.cost("gemm", m=bad, n=1, k=1)

    def test_non_positive_shape_is_refused(self) -> None:
        with pytest.raises(LedgerError, match="m must be > 0"):
            ledger.cost("gemm", m=0, n=1, k=1)

    def test_dashes_and_underscores_are_the_same_name(self) -> None:
        a = ledger.operator("norm_rope_quant", tokens=1, q_heads=1, kv_heads=1, head_dim=2)
        b = ledger.operator("norm-rope-quant", **{"tokens": 1, "q-heads": 1, "kv-heads": 1, "head-dim": 2})
        assert a == b

    def test_params_describe_the_signature(self) -> None:
        params = {p.name: p for p in ledger.get("gemm").params}
        assert params["m"].required and params["m"].type is int
        assert params["dtype"].default == "bf16"
        assert params["batch"].default == 1


class TestOperator:
    def test_label_names_formula_shape_and_dtype(self) -> None:
        op = ledger.operator("gemm", m=64, n=256, k=128, dtype="float32")
        assert op.label == "gemm(m=64, n=256, k=128, dtype=fp32)"
        assert op.roof == Roof("matmul", "fp32")

    def test_norms_stand_under_the_simt_roof(self) -> None:
        assert ledger.operator("rmsnorm", rows=1, hidden=8).roof.key == "simt:fp32"

    def test_to_dict_prints_integral_numbers_as_ints(self) -> None:
        d = ledger.operator("gemm", m=4096, n=4096, k=4096).to_dict()
        assert d["flops"] == 137438953472 and isinstance(d["flops"], int)  # 2·4096³
        assert d["variants"]["worst"]["bytes"] == 137506062336
