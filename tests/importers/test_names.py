"""importers.names.fit_name: the one shortener of kernel names for tables and charts."""

from __future__ import annotations

from nsroof.importers.names import fit_name


def test_fit_name_cuts_the_middle_and_keeps_the_suffix_that_differs() -> None:
    nn = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn"
    tn = nn[:-2] + "tn"
    # width 30: 15 characters of the head, '…', 14 of the tail
    assert fit_name(nn, 30) == "ampere_bf16_s16…stages_64x3_nn"
    assert len(fit_name(nn, 30)) == 30
    assert fit_name(nn, 30) != fit_name(tn, 30)
    assert fit_name("short", 30) == "short"
    assert fit_name("abc", 1) == "…" and fit_name("abc", 0) == ""
