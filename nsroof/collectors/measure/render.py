"""Text summary of a measurement (what `nsroof measure` prints on stdout)."""

from __future__ import annotations

import math
from typing import Any

from nsroof.collectors.measure.analysis import measured
from nsroof.units import human_bytes, human_si


def _si(value: float | None, unit: str) -> str:
    """Measure's figures: one decimal under an SI prefix ('1.2 TB/s', '19.5 TFLOP/s')."""
    return human_si(value, unit, decimals=1)


def _table(headers: list[str], rows: list[list[str]], right: tuple[int, ...] = ()) -> list[str]:
    """Plain-text table; columns in `right` (numbers) are right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip())
    return lines


def _environment(result: Any) -> list[str]:
    """The device, its caches and how it was timed."""
    env = result.environment
    if env.get("device") == "cuda":
        device = (f"device   {env['device_name']}  CC {env.get('compute_capability')}  "
                  f"{env.get('sm_count')} SMs  {human_bytes(env.get('memory_bytes'))}  "
                  f"driver {env.get('driver_version')}  CUDA {env.get('cuda_runtime')}  "
                  f"torch {env.get('torch')}")
    else:
        device = (f"device   {env['device_name']}  {env.get('logical_cpus')} logical CPUs, "
                  f"{env.get('threads_used')} torch threads  torch {env.get('torch')}")
    caches = ", ".join(f"{k.upper()} {human_bytes(v['bytes'])}" for k, v in env.get("caches", {}).items())
    return [device, f"caches   {caches or 'not reported'}",
            f"timing   {env.get('timer')}, {result.plan.timing} after {result.plan.warmup} warm-up; "
            f"{'quick' if result.plan.quick else 'full'} sweep in {result.duration_s:.1f} s", ""]


def _gemm_peaks(result: Any) -> list[str]:
    """Per dtype: the peak, the shape that reached it and the first shape within 90% of it."""
    sat = result.derived.get("saturation", {})
    rows = []
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        if dtype in result.peak_flop_per_s:
            best = max((p for p in measured(result.points, "gemm") if p["dtype"] == dtype),
                       key=lambda p: p["flop_per_s"])
            s = sat.get(dtype, {})
            rows.append([dtype, _si(result.peak_flop_per_s[dtype], "FLOP/s"),
                         f"{best['label']} {best['m']}x{best['n']}x{best['k']}",
                         f"{s.get('label', '')} {s.get('m')}x{s.get('n')}x{s.get('k')}" if s else "—"])
        elif dtype in result.not_measured:
            rows.append([dtype, "not measured", "", result.not_measured[dtype]])
    return ["GEMM peak per dtype (2·M·N·K / time)",
            *_table(["dtype", "peak", "best shape MxNxK", "first shape >= 90% of peak"], rows, right=(1,)),
            ""]


def _memory_sweeps(result: Any) -> list[str]:
    """The streaming kernels and the cache ladder with its plateaus (each only when it ran)."""
    out: list[str] = []
    streams = measured(result.points, "stream")
    if streams:
        out.append("Streaming kernels (DRAM)")
        rows = [[f"{p['kernel']}: {p['description']}", human_bytes(p["buffer_bytes"]),
                 human_bytes(p["bytes"]), _si(p["bytes_per_s"], "B/s")] for p in streams]
        out += _table(["kernel", "buffer", "bytes/call", "rate"], rows, right=(1, 2, 3))
        out.append("")
    ladder = measured(result.points, "ladder")
    if ladder:
        plateaus = result.derived.get("plateaus", [])
        out.append("Cache ladder (read rate of repeated passes over a working set)")
        row = [f"{human_bytes(p['working_set_bytes'])} {_si(p['bytes_per_s'], 'B/s')}" for p in ladder]
        for i in range(0, len(row), 4):
            out.append("  " + " | ".join(row[i : i + 4]))
        if plateaus:
            out.append("  plateaus: " + "; ".join(
                f"{human_bytes(p['first_bytes'])}–{human_bytes(p['last_bytes'])} ≈ "
                f"{_si(p['bytes_per_s'], 'B/s')}" for p in plateaus))
        out.append("")
    return out


def _ceilings(result: Any) -> list[str]:
    """Bandwidth per level, the ridge points and the fraction of the datasheet reached."""
    out = ["Bandwidth per level: " + ", ".join(
        f"{lvl} {_si(bw, 'B/s')}" for lvl, bw in result.bandwidth_bytes_per_s.items())]
    ridges = result.derived.get("ridges_flop_per_byte", {})
    if ridges and result.peak_flop_per_s and result.bandwidth_bytes_per_s:  # --only stream/gemm: no ridge
        dtypes = list(result.peak_flop_per_s)
        out.append("Ridge I* = peak / bandwidth (FLOP/byte)")
        out += _table(["level", *dtypes],
                      [[lvl, *(f"{r[d]:,.1f}" for d in dtypes)] for lvl, r in ridges.items()],
                      right=tuple(range(1, len(dtypes) + 1)))
    eff = result.derived.get("efficiency", {})
    if eff:
        out.append(f"Against the datasheet ({eff['datasheet']}): " + ", ".join(
            f"{k.split('.', 1)[1]} {v['fraction']:.0%}" for k, v in eff.items() if isinstance(v, dict)))
    else:
        out.append("Against the datasheet: no packaged datasheet profile matches this device")
    out.append("")
    return out


def _reference_workloads(result: Any) -> list[str]:
    """Where reference workloads sit on the DRAM roofline (T* tokens for a decode step)."""
    work = result.derived.get("reference_workloads", [])
    if not work:
        return []
    rows = []
    for w in work:
        if "t_star_tokens" in w:
            t = w["t_star_tokens"]
            rows.append([w["dtype"], w["workload"], "", "",
                         f"T* = {t:,.0f} tokens" if t is not None and math.isfinite(t)
                         else "never compute-bound"])
        else:
            rows.append([w["dtype"], w["workload"], f"{w['intensity_flop_per_byte']:,.1f}", w["bound"],
                         _si(w["attainable_flop_per_s"], "FLOP/s")])
    return ["Reference workloads on the DRAM roofline",
            *_table(["dtype", "workload", "I (FLOP/B)", "bound", "attainable"], rows, right=(2, 4))]


def _physics(result: Any) -> list[str]:
    """The physics check of a CPU measurement: one line when it passed, every failed check when not."""
    check = result.derived.get("physics_check")
    if not check:
        return []
    ran = [c for c in check.get("checks", []) if c.get("status") != "skip"]
    if check.get("passed"):
        return ["", f"physics check passed ({len(ran)} checks: cache levels in order, peaks within what the "
                    "ISA allows and above its floor)"]
    return ["", "physics check FAILED:", *(f"  {c['name']}: {c['detail']}" for c in ran
                                           if c.get("status") == "fail")]


def render(result: Any) -> str:
    out = [*_environment(result), *_gemm_peaks(result), *_memory_sweeps(result), *_ceilings(result),
           *_reference_workloads(result), *_physics(result)]
    notes = result.derived.get("notes", [])
    if notes:
        out.append("")
        out += [f"note: {n}" for n in notes]
    return "\n".join(out)
