"""One measurement run: environment, GEMM sweep, streams, cache ladder, then the machine profile.

`measure()` returns a MeasureResult; `to_machine()` turns it into a nsroof.roofs.machines.Machine with
source "measured" (every number carries its provenance in `sources`, every point is kept).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nsroof.collectors.measure import analysis
from nsroof.collectors.measure.environment import cache_levels, describe_cpu, describe_cuda, load_average
from nsroof.collectors.measure.ladder import find_plateaus, level_bandwidths, levels_from_plateaus
from nsroof.collectors.measure.physics import check_cpu_profile
from nsroof.collectors.measure.plan import ALL_DTYPES, DTYPE_BYTES, Plan, longer, make_plan
from nsroof.errors import NsroofError

Progress = Callable[[str], None]

DEFAULT_CPU_DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16")
SAME_LEVEL_TOLERANCE = 0.10  # adjacent levels within 10 % are reported as one rate, not two


@dataclass
class MeasureResult:
    plan: Plan
    environment: dict[str, Any]
    points: list[dict[str, Any]]
    peak_flop_per_s: dict[str, float]
    bandwidth_bytes_per_s: dict[str, float]
    sources: dict[str, str]
    not_measured: dict[str, str]
    derived: dict[str, Any] = field(default_factory=dict)
    duration_s: float = math.nan


def resolve_device(device: str | None) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise NsroofError(f"unknown device '{device}' — use cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        build = ("a CPU-only build" if torch.version.cuda is None
                 else f"CUDA {torch.version.cuda}, but no device is visible")
        raise NsroofError(f"--device cuda: torch {torch.__version__} sees no CUDA device ({build}) — "
                          "run `nsroof measure --device cpu`, or run on a machine with a GPU")
    return device


def default_dtypes(device: str) -> tuple[str, ...]:
    return ALL_DTYPES if device == "cuda" else DEFAULT_CPU_DTYPES


def _free_memory_bytes(device: str) -> int:
    if device == "cuda":
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
        return int(pages * os.sysconf("SC_PAGE_SIZE")) if pages else 8 * 2**30


def build_plan(
    device: str, *, quick: bool, dtypes: tuple[str, ...] | None = None, environment: dict[str, Any],
    sections: tuple[str, ...] = ("gemm", "stream", "ladder"),
) -> Plan:
    caches = cache_levels(environment)
    # Without a reported last cache, assume a large one: buffers too big are safe, too small are not.
    last = max((c.bytes for c in caches), default=256 * 2**20)
    return make_plan(device, quick=quick, dtypes=tuple(dtypes or default_dtypes(device)),
                     last_cache_bytes=last, free_memory_bytes=_free_memory_bytes(device), sections=sections)


def measure(
    device: str | None = None, *, quick: bool = False, dtypes: tuple[str, ...] | None = None,
    threads: int | None = None, sections: tuple[str, ...] = ("gemm", "stream", "ladder"),
    progress: Progress | None = None, plan: Plan | None = None, gemm_budget_s: float | None = None,
    longer_run: bool = False,
) -> MeasureResult:
    """Measure this machine's roofline. `plan` overrides the whole sweep (tests use small ones);
    `gemm_budget_s` only the GEMM sweep's wall-clock budget; `longer_run` runs the sweep longer
    (plan.longer: the second try after a failed physics check)."""
    import torch

    say = progress or (lambda _msg: None)
    dev = resolve_device(device if plan is None else plan.device)
    unknown = sorted(set(dtypes or ()) - set(ALL_DTYPES))
    if unknown:
        raise NsroofError(f"unknown dtype {', '.join(unknown)} — choose from {', '.join(ALL_DTYPES)}")
    if threads is not None and threads < 1:
        raise NsroofError(f"--threads {threads}: need at least 1")
    if gemm_budget_s is not None and not gemm_budget_s > 0:
        raise NsroofError(f"--budget {gemm_budget_s}: the GEMM sweep needs a positive number of seconds")
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _measure(dev, quick=quick, dtypes=dtypes, sections=sections, say=say, plan=plan,
                        gemm_budget_s=gemm_budget_s, longer_run=longer_run)
    finally:
        torch.set_num_threads(previous_threads)  # a library call leaves the caller's thread setting alone


def _measure(
    dev: str, *, quick: bool, dtypes: tuple[str, ...] | None, sections: tuple[str, ...], say: Progress,
    plan: Plan | None, gemm_budget_s: float | None, longer_run: bool = False,
) -> MeasureResult:
    import torch

    from nsroof.collectors.measure.gemm import random_tensor, run_gemm_sweep, unsupported_reason
    from nsroof.collectors.measure.ladder import run_ladder
    from nsroof.collectors.measure.stream import run_streams
    from nsroof.collectors.measure.timing import CpuTimer, CudaTimer, Timer, spin_up

    t_start = time.perf_counter()
    env = describe_cuda() if dev == "cuda" else describe_cpu()
    if plan is None:
        plan = build_plan(dev, quick=quick, dtypes=dtypes, environment=env, sections=sections)
    if gemm_budget_s is not None:
        plan = dataclasses.replace(plan, gemm_budget_s=float(gemm_budget_s))
    if longer_run:
        plan = longer(plan)
    timer: Timer = CudaTimer(plan.min_sample_s) if dev == "cuda" else CpuTimer(plan.min_sample_s)
    env["timer"] = timer.clock
    say(f"measuring {env['device_name']} ({dev}, {'quick' if plan.quick else 'full'} sweep)")
    env["spin_up_s"] = spin_up(dev, plan.spin_up_s, plan.spin_up_size)

    points: list[dict[str, Any]] = []
    not_measured: dict[str, str] = {}
    for dtype in ALL_DTYPES:
        if dtype not in plan.dtypes:
            if dtype == "fp8" and dev == "cpu" and _has_scaled_mm():
                not_measured[dtype] = ("not in the default CPU set; pass --dtype fp8 to time "
                                       "torch._scaled_mm on the CPU")
            else:
                not_measured[dtype] = unsupported_reason(dtype, dev) or "not requested (--dtype)"
    if "gemm" in plan.sections:
        gemm_points, missing = run_gemm_sweep(plan, timer, say)
        points += gemm_points
        not_measured.update(missing)

    if "stream" in plan.sections or "ladder" in plan.sections:
        n_stream = plan.stream_buffer_bytes // 4
        n_ladder = max(plan.ladder_sizes, default=0) // 4 if "ladder" in plan.sections else 0
        numel = max(3 * n_stream if "stream" in plan.sections else 0, n_ladder)
        say(f"allocating {numel * 4 / 2**20:,.0f} MiB of random float32 for the memory sweeps")
        pool = random_tensor((numel,), torch.float32, dev, seed=7)
        try:
            if "stream" in plan.sections:
                points += run_streams(pool, plan, timer, say)
            if "ladder" in plan.sections:
                points += run_ladder(pool, plan, timer, say)
        finally:
            del pool
            if dev == "cuda":
                torch.cuda.empty_cache()

    if dev == "cpu":
        env["load_average_at_end"] = load_average()
    result = summarize(plan, env, points, not_measured)
    result.duration_s = time.perf_counter() - t_start
    return result


def measure_checked(device: str | None = None, *, progress: Progress | None = None,
                    **options: Any) -> tuple[MeasureResult, str]:
    """measure(device, **options); when a CPU result fails its physics check (physics.check_cpu_profile),
    once more with a longer run (plan.longer). Returns the last result — its derived["physics_check"] says
    whether it passed — and the first run's failed checks ('' when the first run passed)."""
    say = progress or (lambda _msg: None)
    result = measure(device, progress=progress, **options)
    first = failed_checks(result)
    if not first:
        return result, ""
    say(f"physics check failed: {first}; measuring again with a longer run")
    return measure(device, progress=progress, longer_run=True, **options), first


def failed_checks(result: MeasureResult) -> str:
    """The failed physics checks of a CPU measurement, one phrase each ('' when it passed or is a GPU's)."""
    return str(result.derived.get("physics_check", {}).get("failed", ""))


def _has_scaled_mm() -> bool:
    import torch

    return hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")


def summarize(plan: Plan, env: dict[str, Any], points: list[dict[str, Any]],
              not_measured: dict[str, str]) -> MeasureResult:
    """Peaks, level bandwidths, sources and the derived tables from the raw points (pure)."""
    timing = f"{'CUDA events' if plan.device == 'cuda' else 'perf_counter'} {plan.timing}"
    peaks: dict[str, float] = {}
    sources: dict[str, str] = {}
    for dtype, p in analysis.best_gemm(points).items():
        peaks[dtype] = p["flop_per_s"]
        sources[f"peak_flop_per_s.{dtype}"] = (
            f"measured: best of {sum(1 for q in analysis.measured(points, 'gemm') if q['dtype'] == dtype)} "
            f"{p['path']} points, {p['label']} M={p['m']} N={p['n']} K={p['k']}, 2·M·N·K / time, {timing}"
        )
    for dtype, reason in not_measured.items():
        sources[f"peak_flop_per_s.{dtype}"] = f"not measured: {reason}"

    bandwidths: dict[str, float] = {}
    derived: dict[str, Any] = {"notes": list(plan.notes)}
    ladder = analysis.measured(points, "ladder")
    if ladder:
        ws = [p["working_set_bytes"] for p in ladder]
        bw = [p["bytes_per_s"] for p in ladder]
        plateaus = find_plateaus(ws, bw)
        derived["plateaus"] = [dataclasses.asdict(p) for p in plateaus]
        caches = cache_levels(env)
        levels = (level_bandwidths(ws, bw, caches, top_k=plan.level_top_k) if caches
                  else levels_from_plateaus(plateaus))
        derived["ladder_levels"] = [dataclasses.asdict(lv) for lv in levels]
        for lv in levels:
            if lv.level == "dram" or not math.isfinite(lv.bytes_per_s):
                continue
            bandwidths[lv.level] = lv.bytes_per_s
            sources[f"bandwidth_bytes_per_s.{lv.level}"] = (
                f"measured: cache ladder, {lv.how}, {lv.note}; "
                f"passes of x[:W].expand(passes, W).sum(dim=1), {timing}"
            )
        cache_rates = [(lv.level, lv.bytes_per_s) for lv in levels if math.isfinite(lv.bytes_per_s)]
        for (lo, lo_bw), (hi, hi_bw) in zip(cache_rates, cache_rates[1:], strict=False):
            if abs(lo_bw - hi_bw) <= SAME_LEVEL_TOLERANCE * max(lo_bw, hi_bw):
                derived["notes"].append(
                    f"{lo} and {hi} read at the same rate here ({lo_bw / 1e9:.1f} vs {hi_bw / 1e9:.1f} "
                    f"GB/s): the reduction kernel, not the {lo} cache, limits the smaller working sets"
                )
    best = analysis.best_stream(points)
    if best is not None:
        bandwidths["dram"] = best["bytes_per_s"]
        chunk = best.get("chunk_bytes", best["buffer_bytes"])
        chunks = f" in {chunk / 2**20:,.0f} MiB chunks" if chunk < best["buffer_bytes"] else ""
        sources["bandwidth_bytes_per_s.dram"] = (
            f"measured: best streaming kernel '{best['kernel']}' ({best['description']}) over "
            f"{best['buffer_bytes'] / 2**20:,.0f} MiB buffers{chunks}, bytes read + written / time, {timing}"
        )
    elif ladder:
        dram = next((lv for lv in levels if lv.level == "dram"), None)
        if dram is not None and math.isfinite(dram.bytes_per_s):
            bandwidths["dram"] = dram.bytes_per_s
            sources["bandwidth_bytes_per_s.dram"] = f"measured: cache ladder, {dram.note}, {timing}"

    busy = busy_note(env)
    if busy:
        derived["notes"].append(busy)
    derived["ridges_flop_per_byte"] = analysis.ridges(peaks, bandwidths)
    derived["saturation"] = analysis.saturation(points)
    derived["reference_workloads"] = analysis.reference_workloads(peaks, bandwidths.get("dram", 0.0))
    derived["efficiency"] = analysis.efficiency(peaks, bandwidths, _datasheet(env))
    derived["dtype_bytes"] = {d: DTYPE_BYTES[d] for d in peaks}
    if env.get("device") == "cpu":
        derived["physics_check"] = check_cpu_profile(peaks, bandwidths, env).to_dict()
    return MeasureResult(plan=plan, environment=env, points=points, peak_flop_per_s=peaks,
                         bandwidth_bytes_per_s=bandwidths, sources=sources, not_measured=not_measured,
                         derived=derived)


def busy_note(env: dict[str, Any]) -> str | None:
    """A warning when the 1-minute load average exceeded the CPU count at the start or the end."""
    cpus = env.get("logical_cpus") or 0
    loads = [la[0] for la in (env.get("load_average_at_start"), env.get("load_average_at_end")) if la]
    if not cpus or not loads or max(loads) <= cpus:
        return None
    # --threads 1 steadies the ratios only where the run used more threads than that
    threads = "" if env.get("threads_used") == 1 else ", or with --threads 1 for steadier ratios"
    return (f"load average up to {max(loads):.1f} on {cpus} CPUs: other processes shared the CPU during this "
            f"run, so these figures are lower bounds (rerun on an idle machine{threads})")


def _datasheet(env: dict[str, Any]) -> Any | None:
    try:
        from nsroof.roofs.machines import lookup_device
    except ImportError:
        return None
    return lookup_device(str(env.get("device_name", "")))


def json_safe(value: Any) -> Any:
    """NaN/inf -> None, tuples -> lists, recursively: the profile stays strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def peak_keys(dtype: str, environment: dict[str, Any]) -> tuple[str, ...]:
    """The profile keys a measured GEMM peak is stored under: its dtype, and for an fp64 GEMM on a GPU with
    FP64 tensor cores also the FP64 tensor roof `fp64_tensor`, where the machine table has that key. Both
    are true there: `fp64` is the best rate an FP64 matmul reaches (the dense table's meaning), and cuBLAS's
    DGEMM reaches it on the tensor cores."""
    from nsroof.counters.tensor_paths import fp64_tensor_ccs
    from nsroof.roofs.machines import RATE_KEYS

    # GA100, GH100 and GB100 have FP64 tensor cores (DMMA), which cuBLAS's DGEMM uses
    tensor = (dtype == "fp64" and environment.get("device") == "cuda"
              and str(environment.get("compute_capability", "")) in fp64_tensor_ccs())
    return (dtype, "fp64_tensor") if tensor and "fp64_tensor" in RATE_KEYS["peak_flop_per_s"] else (dtype,)


def to_machine(result: MeasureResult) -> Any:
    from nsroof.roofs.machines import Machine

    env = dict(result.environment)
    name = str(env.get("device_name", result.plan.device))
    if env.get("device") == "cpu":
        name += f", {env.get('threads_used')} threads"  # a CPU's roofline depends on the threads it may use
    environment = json_safe({
        **env,
        "plan": dataclasses.asdict(result.plan),
        "not_measured": result.not_measured,
        "derived": result.derived,
        "duration_s": result.duration_s,
    })
    peaks, sources = dict(result.peak_flop_per_s), dict(result.sources)
    for dtype, value in result.peak_flop_per_s.items():
        for key in peak_keys(dtype, env)[1:]:
            peaks[key] = value
            sources[f"peak_flop_per_s.{key}"] = (
                f"{result.sources.get(f'peak_flop_per_s.{dtype}', 'measured')} "
                f"(the {dtype} GEMM: cuBLAS runs it on the FP64 tensor cores of "
                f"CC {env.get('compute_capability')})")
    return Machine(name=name, source="measured", peak_flop_per_s=peaks,
                   bandwidth_bytes_per_s=dict(result.bandwidth_bytes_per_s), sources=sources,
                   environment=environment, points=json_safe(result.points), cache_bytes=cache_sizes(env))


def cache_sizes(env: dict[str, Any]) -> dict[str, float]:
    """The capacities the report's above-roof causes compare working sets with (Machine.cache_bytes: a
    CPU's L2 and L3, a GPU's L2), from the sizes the OS or the device reported (environment "caches")."""
    from nsroof.roofs.machines import CACHE_LEVELS

    return {c.name: float(c.bytes) for c in cache_levels(env) if c.name in CACHE_LEVELS and c.bytes > 0}


def write_points_csv(points: list[dict[str, Any]], path: str | os.PathLike[str]) -> None:
    """Every point, one row each (columns: the union of all points' keys), written atomically."""
    import pandas as pd

    from nsroof.atomic import atomic_path

    frame = pd.DataFrame.from_records(json_safe(points))
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
