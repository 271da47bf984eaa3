"""`nsroof measure`: this device's real roofline, on a GPU (CUDA events) or the CPU (perf_counter).

    measure(device, quick=..., dtypes=...) -> MeasureResult      the sweep
    to_machine(result) -> Machine                                 the profile (source "measured")
    cpu_profile(cache_dir=None) -> Machine                        cached quick CPU profile

Modules: plan (what is swept), timing, environment, gemm, stream, ladder, analysis (pure maths),
runner (orchestration), render (the text summary), cache (cpu_profile).
"""

from __future__ import annotations

from nsroof.collectors.measure.cache import cpu_profile
from nsroof.collectors.measure.runner import MeasureResult, measure, to_machine, write_points_csv

__all__ = ["MeasureResult", "cpu_profile", "measure", "to_machine", "write_points_csv"]
