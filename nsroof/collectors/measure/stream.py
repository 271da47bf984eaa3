"""Streaming kernels over buffers far larger than the last cache: the DRAM bandwidth. On a CPU each call
runs on one 8 MiB chunk of the buffers (plan.stream_chunk_bytes), the calls walking through them.

Bytes are counted exactly from what each kernel must read and write (the STREAM convention: a
write-allocate read the hardware may add is not counted, so a CPU's copy/fill can look slower than
its read-only reduction).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsroof.collectors.measure.plan import Plan
from nsroof.collectors.measure.timing import Timer

Progress = Callable[[str], None]
ELEM_BYTES = 4  # float32 buffers


@dataclass(frozen=True)
class StreamKernel:
    name: str
    description: str
    reads: int  # buffers read per element
    writes: int  # buffers written per element


STREAM_KERNELS: tuple[StreamKernel, ...] = (
    StreamKernel("copy", "b = a (1 read + 1 write)", 1, 1),
    StreamKernel("triad", "a = b + 3·c (2 reads + 1 write)", 2, 1),
    StreamKernel("read", "sum(a) (read-only reduction)", 1, 0),
    StreamKernel("fill", "c = 1.25 (write-only fill)", 0, 1),
)


def stream_bytes(kernel: StreamKernel, n: int) -> tuple[int, int]:
    """(bytes read, bytes written) for n float32 elements; the reduction also writes its one result."""
    read = kernel.reads * n * ELEM_BYTES
    written = kernel.writes * n * ELEM_BYTES + (ELEM_BYTES if kernel.name == "read" else 0)
    return read, written


def _call(kernel: str, a: Any, b: Any, c: Any) -> Callable[[int], Any]:
    import torch

    if kernel == "copy":
        return lambda _i: b.copy_(a)
    if kernel == "triad":
        return lambda _i: torch.add(b, c, alpha=3.0, out=a)
    if kernel == "read":
        return lambda _i: torch.sum(a)
    if kernel == "fill":
        return lambda _i: c.fill_(1.25)
    raise ValueError(kernel)


def _chunked(kernel: str, a: Any, b: Any, c: Any, chunk: int) -> tuple[Callable[[int], Any], int]:
    """Call i runs `kernel` on the (i mod chunks)-th chunk of `chunk` elements of each buffer: successive
    calls walk through the buffers, so a chunk is back in the caches only after the whole buffers passed
    (≥ 2× the last cache). Returns the call and the chunk count."""
    chunks = max(1, a.numel() // chunk)

    def call(i: int) -> Any:
        lo = (i % chunks) * chunk
        part = slice(lo, lo + chunk)
        return _call(kernel, a[part], b[part], c[part])(i)

    return call, chunks


def run_streams(pool: Any, plan: Plan, timer: Timer,
                progress: Progress | None = None) -> list[dict[str, Any]]:
    """Time the four kernels on three disjoint float32 views a, b, c of `pool` (each
    plan.stream_buffer_bytes long): whole buffers per call, or with plan.stream_chunk_bytes one chunk per
    call, the samples walking through the buffers at least once (the fastest chunk is the DRAM rate a
    shared CPU left undisturbed)."""
    say = progress or (lambda _msg: None)
    n = plan.stream_buffer_bytes // ELEM_BYTES
    if pool.numel() < 3 * n:
        raise ValueError(f"stream pool holds {pool.numel()} elements, needs {3 * n}")
    a, b, c = pool[:n], pool[n : 2 * n], pool[2 * n : 3 * n]
    chunk = min(n, plan.stream_chunk_bytes // ELEM_BYTES) if plan.stream_chunk_bytes else n
    points: list[dict[str, Any]] = []
    for kernel in STREAM_KERNELS:
        read, written = stream_bytes(kernel, chunk)
        if chunk < n:
            call, chunks = _chunked(kernel.name, a, b, c, chunk)
        else:
            call, chunks = _call(kernel.name, a, b, c), 1
        t = timer.time(call, warmup=max(1, plan.warmup), reps=max(plan.reps, chunks))
        time_s = t.of(plan.statistic)
        bytes_per_s = (read + written) / time_s
        points.append({"kind": "stream", "kernel": kernel.name, "description": kernel.description,
                       "status": "measured", "buffer_bytes": n * ELEM_BYTES,
                       "chunk_bytes": chunk * ELEM_BYTES, "bytes_read": read, "bytes_written": written,
                       "bytes": read + written, "time_s": time_s,
                       "statistic": plan.statistic, "time_median_s": t.median_s,
                       "time_min_s": t.min_s, "time_max_s": t.max_s, "reps": t.reps, "inner": t.inner,
                       "clock": t.clock, "bytes_per_s": bytes_per_s})
        say(f"stream {kernel.name} over {n * ELEM_BYTES / 2**20:,.0f} MiB buffers: "
            f"{bytes_per_s / 1e9:,.1f} GB/s")
    return points
