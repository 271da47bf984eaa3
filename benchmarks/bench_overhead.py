"""Collector overheads, measured side by side in one run on the tiny transformer training step
(nsroof.examples.train_tiny, CPU, one intra-op thread so that other jobs on the machine disturb it less):

1. `annotate` ranges with no profiler attached (no NVTX tool: the nvtx package's dummy domain), target ≤ 1%:
   a. user ranges: `annotate("step")` around each step and one range each for forward, backward and the
      optimizer step (4 ranges per step);
   b. `annotate_modules(model)`: a forward and a backward range for every nn.Module (NVTX only, reported
      for scale: it does more than a user range).
   Steps alternate plain / annotated one by one; the ratio is of the minima (other jobs on a shared
   machine only ever add time, so the minimum is the steadiest estimate; the medians are printed too).
   The cost of one empty range (a tight loop, minus the loop) is printed with the overhead it predicts.
2. `nsroof.profile` against plain `torch.profiler.profile(record_shapes=True)` on the same steps, target ≤ 5%:
   the wall time of the profiled region (entering the profiler, the steps, leaving it), alternating the
   two, ratio of the minima (medians printed too); and, separately, nsroof's report building after the
   profiler stopped (it scales with the number of op calls, not with the length of a step).

    .venv/bin/python benchmarks/run.py overhead
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import target

SAMPLES = 40  # single steps per variant, alternated
PROFILED_STEPS = 3
PROFILE_SAMPLES = 16  # 8 left the fastest run of each within noise of the 5% target on a 2-core VM


def _setup() -> tuple[Any, Any, Any, Any, Any]:
    import torch
    from torch.nn import functional as F  # noqa: N812

    from nsroof.examples.train_tiny import Config, build_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = Config()
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1))
    return model, opt, tokens, cfg, F


def _step_fns() -> tuple[Callable[[], None], Callable[[], None], Callable[[], None]]:
    """(plain, with 4 user ranges, with annotate_modules) steps of one model: the variants share the model,
    the optimizer and the batch, so only the ranges differ."""
    from nsroof import annotate
    from nsroof.collectors import nvtx_ranges

    model, opt, tokens, cfg, F = _setup()  # noqa: N806
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    def plain() -> None:
        loss = F.cross_entropy(model(inputs).reshape(-1, cfg.vocab), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def ranged() -> None:
        with annotate("step"):
            with annotate("forward"):
                loss = F.cross_entropy(model(inputs).reshape(-1, cfg.vocab), targets.reshape(-1))
            with annotate("backward"):
                loss.backward()
            with annotate("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)

    class Modules:
        """plain() with annotate_modules hooks on the model; hooks are added and removed outside the timing."""

        def __init__(self) -> None:
            self.handle: Any = None

        def before(self) -> None:
            self.handle = nvtx_ranges.annotate_modules(model)

        def after(self) -> None:
            self.handle.remove()

        def __call__(self) -> None:
            plain()

    plain.model = model  # type: ignore[attr-defined]
    return plain, ranged, Modules()


CPU_TIMES: dict[int, list[float]] = {}


def _alternate(*fns: Callable[[], None], samples: int) -> list[list[float]]:
    """Per-step wall times of each function, run one step each in turn `samples` times (after a warm-up).
    The process CPU time of each step is kept too (CPU_TIMES, by id of the returned list): on a loaded
    machine it is blurred less by waiting for a core."""
    for fn in fns:
        fn()
        fn()
    times: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for i, fn in enumerate(fns):
            getattr(fn, "before", lambda: None)()
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[i].append(time.perf_counter() - start)
            cpu[i].append(time.process_time() - start_cpu)
            getattr(fn, "after", lambda: None)()
    for t, c in zip(times, cpu, strict=True):
        CPU_TIMES[id(t)] = c
    return times


def _ratios(base: list[float], other: list[float]) -> tuple[float, float]:
    return min(other) / min(base), statistics.median(other) / statistics.median(base)


def record_targets(a: dict[str, float], p: dict[str, float]) -> None:
    """This module's targets for the table `make bench` prints (benchmarks/_common.py)."""
    target("annotate: 4 user ranges a step, no profiler", a["ranges_ratio"], 1.01, at_least=False,
           what="step time ratio", detail=f"fastest of {SAMPLES} alternated steps")
    target("nsroof.profile vs torch.profiler, tiny transformer", p["ratio"], 1.05, at_least=False,
           what="profiled region ratio", detail=f"fastest of {PROFILE_SAMPLES} alternated runs")


def empty_range_ns(n: int = 100_000, repeats: int = 5) -> float:
    from nsroof import annotate

    r = annotate("x")
    return max(min(_range_ns(r, n) for _ in range(repeats)), 0.0)


def _range_ns(r: Any, n: int) -> float:
    """ns per `with r:` over n iterations, the empty loop's cost subtracted."""
    start = time.perf_counter()
    for _ in range(n):
        pass
    loop = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        with r:
            pass
    return (time.perf_counter() - start - loop) / n * 1e9


def profiled_range_ns(n: int = 20_000, repeats: int = 3) -> float:
    """Cost of one range while torch.profiler records (it then also opens a record_function)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from nsroof import annotate

    r = annotate("x")
    best = float("inf")
    for _ in range(repeats):
        with torch_profile(activities=[ProfilerActivity.CPU]):
            best = min(best, _range_ns(r, n))
    return best


def _module_call_ns(attach: Callable[[Any], Any], *, profiled: bool, n: int = 20_000, repeats: int = 3) -> float:
    """Extra ns per call of an nn.Identity with the hooks `attach(module)` installs (it returns a handle
    with .remove()) over the bare call, both under torch.profiler(record_shapes=True) when `profiled`."""
    import contextlib

    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    m = torch.nn.Identity()
    x = torch.zeros(1)

    def loop() -> float:
        recording = (torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) if profiled
                     else contextlib.nullcontext())
        with recording:
            start = time.perf_counter()
            for _ in range(n):
                m(x)
            return time.perf_counter() - start

    best = float("inf")
    for _ in range(repeats):
        bare = loop()
        handle = attach(m)
        hooked = loop()
        handle.remove()
        best = min(best, (hooked - bare) / n * 1e9)
    return max(best, 0.0)


def hooked_call_ns() -> float:
    """Extra cost of one nn.Module call with annotate_modules' hooks (nothing listening) over a bare call."""
    from nsroof.collectors import nvtx_ranges

    return _module_call_ns(nvtx_ranges.annotate_modules, profiled=False)


def profiled_module_call_ns() -> float:
    """Extra cost of one nn.Module call under torch.profiler with nsroof.profile's module hooks (global hooks,
    a fast C++ record function per call) over the same call under the profiler without them."""
    from nsroof.collectors import nvtx_ranges

    return _module_call_ns(lambda m: nvtx_ranges.annotate_all_modules(backward=False), profiled=True)


def module_calls_per_step(step: Callable[[], None]) -> int:
    from torch.nn.modules.module import register_module_forward_pre_hook

    calls = [0]
    handle = register_module_forward_pre_hook(lambda m, a: calls.__setitem__(0, calls[0] + 1))
    try:
        step()
    finally:
        handle.remove()
    return calls[0]


def bench_annotate() -> dict[str, float]:
    plain, ranged, modules = _step_fns()
    t_plain, t_ranged, t_modules = _alternate(plain, ranged, modules, samples=SAMPLES)
    per_range = empty_range_ns()
    ranges_min, ranges_median = _ratios(t_plain, t_ranged)
    ranges_cpu = statistics.median(CPU_TIMES[id(t_ranged)]) / statistics.median(CPU_TIMES[id(t_plain)])
    modules_cpu = statistics.median(CPU_TIMES[id(t_modules)]) / statistics.median(CPU_TIMES[id(t_plain)])
    modules_min, modules_median = _ratios(t_plain, t_modules)
    per_call = hooked_call_ns()
    calls = module_calls_per_step(plain)
    return {
        "hooked_call_ns": per_call, "module_calls": calls, "predicted_modules": calls * per_call * 1e-9 / min(t_plain),
        "ranges_cpu": ranges_cpu, "modules_cpu": modules_cpu,
        "step_s": min(t_plain), "ranges_ratio": ranges_min, "ranges_median": ranges_median,
        "per_range_ns": per_range, "predicted_ranges": 4 * per_range * 1e-9 / min(t_plain),
        "modules": len(list(plain.model.modules())),  # type: ignore[attr-defined]
        "modules_ratio": modules_min, "modules_median": modules_median,
    }


def bench_profile() -> dict[str, float]:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from nsroof.collectors.torch_profile import profile as nsroof_profile
    from nsroof.roofs.machines import Machine

    # An explicit machine: the comparison is about collection, not about measuring the CPU's roofs.
    machine = Machine(name="bench-cpu", source="file", peak_flop_per_s={"fp32": 1e11},
                      bandwidth_bytes_per_s={"dram": 1e10})
    plain_fn = nsroof_fn = _step_fns()[0]  # one model for both

    cpu_plain: list[float] = []
    cpu_ours: list[float] = []

    def plain() -> tuple[float, float]:
        start, start_cpu = time.perf_counter(), time.process_time()
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(PROFILED_STEPS):
                plain_fn()
        region = time.perf_counter() - start
        cpu_plain.append(time.process_time() - start_cpu)
        prof.events()  # already parsed on exit; kept for symmetry with nsroof's use of it
        return region, 0.0

    def ours() -> tuple[float, float]:
        session = nsroof_profile(machine=machine, cuda=False)
        start, start_cpu = time.perf_counter(), time.process_time()
        session.__enter__()
        for _ in range(PROFILED_STEPS):
            nsroof_fn()
        session._stop()  # the profiler's own exit, as in plain()
        region = time.perf_counter() - start
        cpu_ours.append(time.process_time() - start_cpu)
        start = time.perf_counter()
        session.__exit__(None, None, None)  # hooks removed, events -> rows -> report
        return region, time.perf_counter() - start

    plain()
    ours()  # warm up
    regions_plain, regions_ours, build = [], [], []
    for _ in range(PROFILE_SAMPLES):
        regions_plain.append(plain()[0])
        r, b = ours()
        regions_ours.append(r)
        build.append(b)
    session = nsroof_profile(machine=machine, cuda=False)
    with session:
        nsroof_fn()
    rows = len(session.report)
    ratio_min, ratio_median = _ratios(regions_plain, regions_ours)
    ratio_cpu = statistics.median(cpu_ours[-PROFILE_SAMPLES:]) / statistics.median(cpu_plain[-PROFILE_SAMPLES:])
    # What nsroof adds inside the region is one range per module call (plus a marker per optimizer step):
    # its cost measured in a tight loop gives a prediction that other jobs on the machine cannot blur.
    per_range = profiled_range_ns()
    calls = module_calls_per_step(plain_fn)
    step_s = min(regions_plain) / PROFILED_STEPS
    return {"plain_s": min(regions_plain), "nsroof_s": min(regions_ours), "ratio": ratio_min,
            "ratio_median": ratio_median, "ratio_cpu": ratio_cpu, "build_s": statistics.median(build), "rows_per_step": rows,
            "profiled_range_ns": per_range, "module_calls": calls,
            "predicted": (calls + 1) * per_range * 1e-9 / step_s}


LAUNCH_MODULES = 96  # Linear(32, 32) and ReLU alternating: a step of small launches, module calls every op
LAUNCH_STEPS = 3
LAUNCH_SAMPLES = 32  # the fastest of 16 still moved by ±3% between runs on a 2-core VM


def _launch_bound_step() -> Callable[[], None]:
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(LAUNCH_MODULES // 2):
        layers += [torch.nn.Linear(32, 32), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(8, 32)

    def step() -> None:
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def bench_launch_bound() -> dict[str, float]:
    """nsroof.profile against plain torch.profiler(record_shapes=True) on a launch-bound step (96 small
    modules): the profiled region (ratio of the fastest of alternated runs), then what happens after it —
    nsroof's report (trace export + analysis) against torch's own export_chrome_trace of the same run to the
    same kind of file (.json.gz)."""
    import tempfile
    from pathlib import Path

    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from nsroof.collectors.torch_profile import profile as nsroof_profile
    from nsroof.roofs.machines import Machine

    machine = Machine(name="bench-cpu", source="file", peak_flop_per_s={"fp32": 1e11},
                      bandwidth_bytes_per_s={"dram": 1e10})
    step = _launch_bound_step()
    folder = Path(tempfile.mkdtemp(prefix="nsroof-bench-"))

    cpu: dict[str, list[float]] = {"plain": [], "nsroof": []}
    # the steps alone (the profiler entered, not yet stopped): what the module hooks add, undiluted by
    # kineto's own start and stop, which both pay alike
    steps: dict[str, list[float]] = {"plain": [], "nsroof": []}
    steps_cpu: dict[str, list[float]] = {"plain": [], "nsroof": []}

    def profiled_steps(name: str) -> None:
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(LAUNCH_STEPS):
            step()
        steps[name].append(time.perf_counter() - start)
        steps_cpu[name].append(time.process_time() - start_cpu)

    def plain() -> tuple[float, float]:
        start, start_cpu = time.perf_counter(), time.process_time()
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            profiled_steps("plain")
        region = time.perf_counter() - start
        cpu["plain"].append(time.process_time() - start_cpu)
        start = time.perf_counter()
        prof.export_chrome_trace(str(folder / "torch.json.gz"))
        return region, time.perf_counter() - start

    from nsroof.collectors import torch_profile as collector

    saving: list[float] = []
    real_save = collector.save_trace

    def timed_save(prof: Any, path: Path) -> None:
        start = time.perf_counter()
        real_save(prof, path)
        saving.append(time.perf_counter() - start)

    collector.save_trace = timed_save  # type: ignore[assignment]

    def ours() -> tuple[float, float]:
        session = nsroof_profile(machine=machine, cuda=False, trace=folder / "nsroof.json.gz")
        start, start_cpu = time.perf_counter(), time.process_time()
        session.__enter__()
        profiled_steps("nsroof")
        session._stop()
        region = time.perf_counter() - start
        cpu["nsroof"].append(time.process_time() - start_cpu)
        start = time.perf_counter()
        session.__exit__(None, None, None)
        return region, time.perf_counter() - start

    for _ in range(2):
        plain()
        ours()
    regions: dict[str, list[float]] = {"plain": [], "nsroof": []}
    after: dict[str, list[float]] = {"plain": [], "nsroof": []}
    for _ in range(LAUNCH_SAMPLES):
        for name, fn in (("plain", plain), ("nsroof", ours)):
            r, a = fn()
            regions[name].append(r)
            after[name].append(a)
    collector.save_trace = real_save  # type: ignore[assignment]
    ratio_min, ratio_median = _ratios(regions["plain"], regions["nsroof"])
    cpu_min, _ = _ratios(cpu["plain"][-LAUNCH_SAMPLES:], cpu["nsroof"][-LAUNCH_SAMPLES:])
    steps_min, steps_median = _ratios(steps["plain"][-LAUNCH_SAMPLES:], steps["nsroof"][-LAUNCH_SAMPLES:])
    steps_cpu_min, steps_cpu_median = _ratios(steps_cpu["plain"][-LAUNCH_SAMPLES:], steps_cpu["nsroof"][-LAUNCH_SAMPLES:])
    per_call = profiled_module_call_ns()
    calls = module_calls_per_step(step)
    return {"ratio_cpu": cpu_min, "module_call_ns": per_call, "module_calls": calls,
            "steps_plain_s": min(steps["plain"][-LAUNCH_SAMPLES:]), "steps_ratio": steps_min,
            "steps_median": steps_median, "steps_cpu": steps_cpu_min, "steps_cpu_median": steps_cpu_median,
            "load": os.getloadavg()[0],
            "predicted": calls * per_call * 1e-9 / (min(regions["plain"]) / LAUNCH_STEPS), "plain_s": min(regions["plain"]), "nsroof_s": min(regions["nsroof"]), "ratio": ratio_min,
            "ratio_median": ratio_median, "export_s": statistics.median(after["plain"]),
            "report_s": statistics.median(after["nsroof"]), "save_s": statistics.median(saving),
            "report_ratio": statistics.median(after["nsroof"]) / statistics.median(after["plain"])}


def main() -> bool:
    a = bench_annotate()
    print(f"annotate, no profiler: step {a['step_s'] * 1e3:.1f} ms (fastest of {SAMPLES} alternated steps)")
    print(f"  4 user ranges per step:           ratio {a['ranges_ratio']:.4f} ({(a['ranges_ratio'] - 1) * 100:+.2f}%; "
          f"medians {(a['ranges_median'] - 1) * 100:+.2f}%)   target <= 1%")
    print(f"  4 user ranges, process CPU time:  ratio {a['ranges_cpu']:.4f} ({(a['ranges_cpu'] - 1) * 100:+.2f}%, medians)")
    print(f"  one empty range:                  {a['per_range_ns']:.0f} ns -> {a['predicted_ranges'] * 100:.4f}% "
          "of a step for 4 ranges")
    print(f"  annotate_modules ({a['modules']} modules):     ratio {a['modules_ratio']:.4f} "
          f"({(a['modules_ratio'] - 1) * 100:+.2f}%; medians {(a['modules_median'] - 1) * 100:+.2f}%)")
    print(f"  annotate_modules, process CPU:    ratio {a['modules_cpu']:.4f} ({(a['modules_cpu'] - 1) * 100:+.2f}%, medians)")
    print(f"  one hooked module call:           +{a['hooked_call_ns']:.0f} ns × {a['module_calls']} calls per step -> "
          f"{a['predicted_modules'] * 100:.3f}% of a step")
    p = bench_profile()
    record_targets(a, p)
    print(f"nsroof.profile vs torch.profiler(record_shapes=True), {PROFILED_STEPS} steps, {PROFILE_SAMPLES} alternated runs:")
    print(f"  profiled region: plain {p['plain_s'] * 1e3:.0f} ms, nsroof {p['nsroof_s'] * 1e3:.0f} ms (fastest runs), "
          f"ratio {p['ratio']:.4f} ({(p['ratio'] - 1) * 100:+.2f}%; medians {(p['ratio_median'] - 1) * 100:+.2f}%)"
          "   target <= 5%")
    print(f"  profiled region, process CPU time: ratio {p['ratio_cpu']:.4f} ({(p['ratio_cpu'] - 1) * 100:+.2f}%, medians)")
    print(f"  one range under the profiler: {p['profiled_range_ns']:.0f} ns × ({p['module_calls']} module calls + 1 step "
          f"marker) per step -> {p['predicted'] * 100:.2f}% of a profiled step")
    rows = PROFILED_STEPS * p["rows_per_step"]
    print(f"  report building after the run: {p['build_s'] * 1e3:.0f} ms for {rows:.0f} op rows "
          f"({p['build_s'] / rows * 1e6:.0f} us per row)")
    lb = bench_launch_bound()
    print(f"launch-bound step ({LAUNCH_MODULES} small modules), {LAUNCH_STEPS} steps, {LAUNCH_SAMPLES} alternated runs:")
    print(f"  profiled region: torch.profiler(record_shapes=True) {lb['plain_s'] * 1e3:.1f} ms, nsroof.profile "
          f"{lb['nsroof_s'] * 1e3:.1f} ms (fastest runs), ratio {lb['ratio']:.4f} "
          f"(medians {lb['ratio_median']:.4f})   target <= 1.03")
    print(f"  profiled region, process CPU time: ratio {lb['ratio_cpu']:.4f} (fastest runs)")
    print(f"  the profiled steps alone: plain {lb['steps_plain_s'] * 1e3:.1f} ms, ratio {lb['steps_ratio']:.4f} "
          f"(medians {lb['steps_median']:.4f}); process CPU time {lb['steps_cpu']:.4f} (medians "
          f"{lb['steps_cpu_median']:.4f}); load average {lb['load']:.1f} on {os.cpu_count()} cores")
    print(f"  one module call's ranges under the profiler: +{lb['module_call_ns']:.0f} ns × {lb['module_calls']} "
          f"calls per step -> {lb['predicted'] * 100:.2f}% of a profiled step")
    print(f"  after the run: torch's export_chrome_trace(.json.gz) {lb['export_s'] * 1e3:.0f} ms, nsroof's report "
          f"(export + analysis) {lb['report_s'] * 1e3:.0f} ms (medians), ratio {lb['report_ratio']:.2f}   target <= 1.5")
    print(f"    of nsroof's: the trace written (kineto's JSON, one gzip pass) {lb['save_s'] * 1e3:.0f} ms, "
          f"its import and the report {(lb['report_s'] - lb['save_s']) * 1e3:.0f} ms")
    target("nsroof.profile vs torch.profiler, launch-bound step", lb["ratio"], 1.03, at_least=False,
           what="profiled region ratio", detail=f"{LAUNCH_MODULES} small modules, fastest of {LAUNCH_SAMPLES} runs; "
                                                f"predicted from the per-call cost {lb['predicted'] * 100:.1f}%")
    target("nsroof.profile report vs torch's export_chrome_trace", lb["report_ratio"], 1.5, at_least=False,
           what="time ratio", detail="launch-bound run, medians; the export and the import + report")
    ok = a["ranges_ratio"] <= 1.01 and p["ratio"] <= 1.05 and lb["ratio"] <= 1.03 and lb["report_ratio"] <= 1.5
    print(f"targets {'met' if ok else 'NOT met'} in this run")
    return True  # a measurement, not a gate: noisy shared machines must not fail `make bench`


if __name__ == "__main__":
    main()
