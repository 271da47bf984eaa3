"""Timers: the median of repeated runs, on the host clock (CPU) or on CUDA events (GPU).

A timed function takes the call index, so rotating operand sets is the caller's choice. Short calls
are batched (`inner` calls per sample) until one sample lasts at least `min_sample_s`: a single
microsecond call is otherwise dominated by timer resolution and launch overhead.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

MAX_INNER = 10_000


@dataclass(frozen=True)
class Timing:
    median_s: float  # per call
    min_s: float
    max_s: float
    reps: int
    inner: int
    clock: str

    def of(self, statistic: str) -> float:
        """The time per call a point reports: the fastest sample ("best") or the median ("median")."""
        return self.min_s if statistic == "best" else self.median_s

    @property
    def spread(self) -> float:
        """(max - min) / median over the samples: how much to trust a difference between two points."""
        return (self.max_s - self.min_s) / self.median_s if self.median_s > 0 else math.nan


class Timer(Protocol):
    clock: str

    def time(self, fn: Callable[[int], Any], *, warmup: int, reps: int) -> Timing: ...

    def synchronize(self) -> None: ...


def inner_count(one_call_s: float, min_sample_s: float) -> int:
    """Calls per sample so that one sample lasts at least min_sample_s (1 for calls already that long)."""
    if one_call_s <= 0:
        return MAX_INNER
    # round: 2e-3/1e-6 is 2000.0000000000002
    return max(1, min(MAX_INNER, math.ceil(round(min_sample_s / one_call_s, 9))))


def summarize(samples_s: list[float], *, inner: int, clock: str) -> Timing:
    return Timing(
        median_s=statistics.median(samples_s), min_s=min(samples_s), max_s=max(samples_s),
        reps=len(samples_s), inner=inner, clock=clock,
    )


@dataclass
class CpuTimer:
    """time.perf_counter around synchronous CPU work."""

    min_sample_s: float = 2e-3
    clock: str = "perf_counter"

    def synchronize(self) -> None:
        return None

    def time(self, fn: Callable[[int], Any], *, warmup: int, reps: int) -> Timing:
        call = 0
        one_s = 0.0
        for _ in range(max(1, warmup)):  # the last warm-up call also sizes the batches
            t0 = time.perf_counter()
            fn(call)
            one_s = time.perf_counter() - t0
            call += 1
        inner = inner_count(one_s, self.min_sample_s)
        samples: list[float] = []
        for _ in range(max(1, reps)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn(call)
                call += 1
            samples.append((time.perf_counter() - t0) / inner)
        return summarize(samples, inner=inner, clock=self.clock)


@dataclass
class CudaTimer:
    """CUDA events recorded on the current stream: device time, not how fast Python enqueues work.

    Device-true for any kernel size: a sample is ``torch.cuda._sleep`` (a spin kernel) queued first, then
    the start event, the `inner` calls and the end event. The GPU spins while Python enqueues the calls, so
    they run back to back and the events bracket device work only; without the sleep a small GEMM (a decode
    shape) finishes before Python launches the next one, and the events time Python. The sleep lasts the
    measured host enqueue time of the batch plus a margin; if the start event has already completed when
    the host finishes enqueueing (``Event.query()``), the device caught up and may have idled: the sleep is
    doubled and the sample taken again (``caught_up`` counts those). Chosen over CUDA graphs because it
    times the very calls the sweep makes (graph capture changes allocation and needs static operands).
    """

    min_sample_s: float = 1e-3
    clock: str = "cuda-events+queued-sleep"
    max_sleep_s: float = 0.5
    caught_up: int = 0
    _cycles_per_s: float = 0.0

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def cycles_per_second(self) -> float:
        """The spin kernel's cycles per second, timed once with events (clock rates vary by boost state)."""
        import torch

        if self._cycles_per_s <= 0:
            cycles = 1_000_000
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            elapsed_s = start.elapsed_time(end) * 1e-3
            self._cycles_per_s = cycles / elapsed_s if elapsed_s > 0 else 1e9
        return self._cycles_per_s

    def time(self, fn: Callable[[int], Any], *, warmup: int, reps: int) -> Timing:
        import torch

        call = 0
        for _ in range(max(0, warmup - 1)):
            fn(call)
            call += 1
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()  # the last warm-up call, timed, sizes the batches
        fn(call)
        call += 1
        end.record()
        enqueue_s = time.perf_counter() - t0
        end.synchronize()
        inner = inner_count(start.elapsed_time(end) * 1e-3, self.min_sample_s)
        # Python's enqueue time of a batch, with room for a slow call: the sleep must outlast it
        sleep_s = min(self.max_sleep_s, 2.0 * enqueue_s * inner + 50e-6)
        samples: list[float] = []
        while len(samples) < max(1, reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(max(1, int(sleep_s * self.cycles_per_second())))
            s.record()
            for _ in range(inner):
                fn(call)
                call += 1
            e.record()
            caught_up = bool(s.query())  # the device already passed the start: it may have waited for us
            e.synchronize()
            if caught_up and sleep_s < self.max_sleep_s:
                self.caught_up += 1
                sleep_s = min(self.max_sleep_s, sleep_s * 2)
                continue
            samples.append(s.elapsed_time(e) * 1e-3 / inner)
        return summarize(samples, inner=inner, clock=self.clock)


def allocation_device(device: str) -> str:
    """The torch device the sweep allocates on to measure `device`: that device itself. Every tensor of
    the sweep is made through here (the GEMM operands, output and fp8 scale, the memory pool, the spin-up
    operands), so the one test that runs the whole CUDA control flow on a CPU-only torch
    (tests/collectors/measure/test_fake_cuda_measure.py) lands "cuda" tensors on the CPU by replacing this one
    function, not torch's factories."""
    return device


def spin_up(device: str, seconds: float, size: int) -> float:
    """Run size x size matrix products for `seconds` before measuring: clocks ramp up from idle (a GPU idles
    at a few hundred MHz) and a VM's first touches of memory and threads are slow. The clock is read after
    every product, so a slow one overruns `seconds` by one product at most. Returns the time spent."""
    import torch

    if seconds <= 0:
        return 0.0
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    where = allocation_device(device)
    a = torch.rand((size, size), device=where, dtype=dtype)
    b = torch.rand((size, size), device=where, dtype=dtype)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        torch.matmul(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
    return time.perf_counter() - t0
