"""Strict per number, lenient per metric: which counters a roofline number reads
(nsroof.counters.dimensions)."""

from __future__ import annotations

from nsroof.counters import dimensions


def test_formula_inputs_and_tensor_counts_are_read() -> None:
    for metric in ("gpu__time_duration.sum", "dram__bytes.sum", "lts__t_bytes.sum",
                   "sm__cycles_elapsed.avg.per_second", "derived__lts__lts2xbar_bytes.sum.per_second",
                   "dram__bytes.sum.peak_sustained", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
                   "sm__inst_executed_pipe_tensor.sum", "sm__pipe_tensor_cycles_active.sum",
                   "derived__sm__sass_thread_inst_executed_op_ffma_pred_on_x2"):
        assert dimensions.is_read(metric), metric


def test_metrics_no_number_reads_are_not() -> None:
    # ncu prints these in `byte` (not byte/second) on GPUs without NVLink; no formula reads them
    for metric in ("nvlrx__bytes.sum.per_second", "nvltx__bytes.sum.per_second", "gpc__cycles_elapsed.max",
                   "l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained_elapsed.per_second",
                   "sm__ops_path_tensor_src_fp16_dst_fp32.avg.per_second"):
        assert not dimensions.is_read(metric), metric
    # the dimension check itself is unchanged: the importers decide what a misfit costs
    assert dimensions.check("nvlrx__bytes.sum.per_second", "byte") is not None


def test_one_warning_names_the_dropped_metrics() -> None:
    assert dimensions.ignored_warning([]) is None
    text = dimensions.ignored_warning([("nvlrx__bytes.sum.per_second", "byte")] * 2 + [("x__y.sum", "")])
    assert text is not None and text.startswith("ignored 2 metric(s)")
    assert "nvlrx__bytes.sum.per_second ('byte')" in text and "x__y.sum ('no unit')" in text


def test_a_per_cycle_rate_spelled_cycle_over_cycle_is_a_dimensionless_ratio() -> None:
    # IMetric.unit() of some peaks is the bare `cycle`, which the raw page spells over `cycle`: a number per
    # cycle either way, so a Volta report's FFMA peak in `cycle/cycle` is read, not refused
    peak = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
    assert dimensions.check(peak, "cycle/cycle") is None
    assert dimensions.check(peak, "inst/cycle") is None
    # only where the metric is a ratio: a count or a duration in `cycle/cycle` is still a misfit
    assert dimensions.check("dram__bytes.sum", "cycle/cycle") is not None
    assert dimensions.check("gpu__time_duration.sum", "cycle/cycle") is not None
    assert dimensions.check(peak, "byte/cycle") is not None
