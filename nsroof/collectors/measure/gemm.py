"""GEMM sweep: achieved FLOP/s per dtype over square sizes and Llama-3.1-8B projection shapes.

FLOP = 2·M·N·K (one multiply and one add per multiply-accumulate). Bytes are compulsory traffic
(read A and B, write C, each once), so the intensity is the most a kernel of that shape can reach.
fp64 is a plain torch.matmul of float64 operands: cuBLAS's DGEMM, which runs on the FP64 tensor cores
(DMMA) of the GPUs that have them (A100, H100/H200, B200), so there its peak is also stored as the
profile's FP64 tensor roof (``runner.peak_keys``). fp8 goes only through torch._scaled_mm (a real scaled
fp8 product); where that path is missing it is reported as not measured, never as a bf16 number under
another name.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nsroof.collectors.measure import timing
from nsroof.collectors.measure.plan import DTYPE_BYTES, Plan
from nsroof.collectors.measure.timing import Timer, Timing

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    label: str  # "square" or a projection name

    @property
    def flop(self) -> int:
        return 2 * self.m * self.n * self.k


def compulsory_bytes(shape: GemmShape, dtype: str) -> int:
    """A [M,K] and B [K,N] read once, C [M,N] written once; fp8 products write bf16 (2 bytes)."""
    elem = DTYPE_BYTES[dtype]
    out_elem = 2 if dtype == "fp8" else elem
    return elem * (shape.m * shape.k + shape.k * shape.n) + out_elem * shape.m * shape.n


def sweep_shapes(plan: Plan) -> list[GemmShape]:
    """Squares first (smallest first: they find the dtype's rate quickly and the large ones are the
    peak), then the projections by FLOP, so each point's time is predicted from rates already seen
    (points predicted over the budget are skipped, not run)."""
    squares = [GemmShape(s, s, s, "square") for s in sorted(plan.squares)]
    projections = [GemmShape(m, n, k, label) for k, n, label in plan.projections for m in plan.m_sweep]
    return squares + sorted(projections, key=lambda s: (s.flop, s.label))


def unsupported_reason(dtype: str, device: str) -> str | None:
    """Why a dtype has no real matmul path on this device/torch, or None when it has one."""
    import torch

    if dtype == "tf32" and device != "cuda":
        return "no TF32 matmul mode on the CPU (TF32 is a tensor-core mode of NVIDIA GPUs)"
    if dtype == "fp8":
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return f"torch {torch.__version__} has no float8_e4m3fn/_scaled_mm"
        if device == "cuda":
            major, minor = torch.cuda.get_device_capability()
            if (major, minor) < (8, 9):
                return f"compute capability {major}.{minor} has no fp8 tensor cores (needs 8.9 or newer)"
    return None


def shape_reason(dtype: str, shape: GemmShape) -> str | None:
    # torch._scaled_mm checks mat1.size(1) (K), mat2.size(0) (K) and mat2.size(1) (N) for multiples of 16;
    # M, the token count of a decode step, is free.
    if dtype == "fp8" and any(d % 16 for d in (shape.n, shape.k)):
        return "torch._scaled_mm needs K and N divisible by 16"
    return None


@contextlib.contextmanager
def matmul_precision(dtype: str) -> Iterator[None]:
    """fp32 at IEEE precision, tf32 allowed, for CUDA matmuls; restored after. torch's current API
    (``torch.backends.cuda.matmul.fp32_precision``, torch >= 2.9) when it exists: once anything in the process
    has set it, the legacy ``get_float32_matmul_precision()`` raises on the mix of the two APIs."""
    import torch

    if dtype not in ("fp32", "tf32"):
        yield
        return
    matmul = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
    if matmul is not None and hasattr(matmul, "fp32_precision"):
        old_new = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = old_new
        return
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _torch_dtype(dtype: str) -> Any:
    import torch

    return {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
            "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]


def rotation_sets(set_bytes: int, plan: Plan) -> int:
    """Operand copies to cycle through so that consecutive calls do not find their inputs in the last
    cache: enough to exceed plan.rotate_target_bytes, capped by plan.rotate_cap_bytes."""
    if set_bytes >= plan.rotate_target_bytes:
        return 1
    wanted = math.ceil(plan.rotate_target_bytes / max(set_bytes, 1))
    return max(1, min(wanted, plan.rotate_cap_bytes // max(set_bytes, 1), 64))


def make_call(dtype: str, shape: GemmShape, plan: Plan, seed: int) -> tuple[Callable[[int], Any], int]:
    """A function of the call index running one GEMM on rotating operand sets, and the set count.
    Operands are random (never zeros: a product of zeros can run faster than real data)."""
    import torch

    device = plan.device
    src = torch.float32 if dtype == "fp8" else _torch_dtype(dtype)
    a0 = random_tensor((shape.m, shape.k), src, device, seed)
    b0 = random_tensor((shape.k, shape.n), src, device, seed + 1)  # [K, N]: plain torch.matmul(a, b)
    if dtype == "fp8":
        a0 = a0.to(torch.float8_e4m3fn)
        b0 = b0.to(torch.float8_e4m3fn)
    set_bytes = DTYPE_BYTES[dtype] * (shape.m * shape.k + shape.n * shape.k)
    n_sets = rotation_sets(set_bytes, plan)
    a_sets = [a0] + [a0.clone() for _ in range(n_sets - 1)]
    if dtype == "fp8":
        # _scaled_mm wants B column-major: the transpose of a row-major [N, K] weight, as LLM weights are
        # stored.
        b_sets = [b0.t().contiguous().t()] + [b0.t().contiguous().t() for _ in range(n_sets - 1)]
        scale = torch.ones((), device=timing.allocation_device(device), dtype=torch.float32)

        def call_fp8(i: int) -> Any:
            j = i % n_sets
            return torch._scaled_mm(a_sets[j], b_sets[j], scale_a=scale, scale_b=scale,
                                    out_dtype=torch.bfloat16)

        return call_fp8, n_sets
    b_sets = [b0] + [b0.clone() for _ in range(n_sets - 1)]
    # reused: time the product, not the allocator
    out = torch.empty((shape.m, shape.n), device=timing.allocation_device(device), dtype=src)

    def call(i: int) -> Any:
        j = i % n_sets
        return torch.matmul(a_sets[j], b_sets[j], out=out)

    return call, n_sets


def random_tensor(shape: tuple[int, ...], dtype: Any, device: str, seed: int, *, block: int = 1 << 20) -> Any:
    """Uniform(-1, 1) values: one random block of at most `block` elements, repeated to fill the tensor.
    Never zeros (a product of zeros can run faster than real data), and far cheaper than drawing every
    element when operands are hundreds of MiB on a CPU."""
    import torch

    numel = math.prod(shape)
    device = timing.allocation_device(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    first = torch.rand(min(numel, block), generator=gen, device=device,
                       dtype=torch.float32).mul_(2).sub_(1).to(dtype)
    out = torch.empty(numel, device=device, dtype=dtype)
    whole = numel // first.numel()
    if whole:
        out[: whole * first.numel()].view(whole, first.numel()).copy_(first.expand(whole, first.numel()))
    rest = numel - whole * first.numel()
    if rest:
        out[numel - rest :].copy_(first[:rest])
    return out.view(shape)


def _probe(dtype: str, plan: Plan, timer: Timer) -> tuple[int, float]:
    """(FLOP, seconds) of a small warmed-up product: the first anchor for predicting larger points."""
    shape = GemmShape(64, 64, 64, "probe")
    call, _ = make_call(dtype, shape, plan, seed=0)
    t = timer.time(call, warmup=1, reps=3)
    return shape.flop, t.median_s


def predict_time_s(flop: int, anchors: list[tuple[int, float]]) -> float:
    """Time of a product of `flop` FLOP, scaled linearly from the measured product nearest below it in
    FLOP (or the smallest one). Larger products run at least as efficiently as smaller ones, so this
    over-predicts, which only ever skips a point, never overruns the budget."""
    below = [a for a in anchors if a[0] <= flop]
    f0, t0 = max(below) if below else min(anchors)
    return t0 * flop / f0


def _time_point(dtype: str, shape: GemmShape, plan: Plan, timer: Timer, *, seed: int) -> tuple[Timing, int]:
    call, n_sets = make_call(dtype, shape, plan, seed)
    return timer.time(call, warmup=plan.warmup, reps=plan.reps), n_sets


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


def run_gemm_sweep(plan: Plan, timer: Timer,
                   progress: Progress | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every GEMM point (measured or skipped, with the reason) and the dtypes not measured at all."""
    import torch

    say = progress or (lambda _msg: None)
    points: list[dict[str, Any]] = []
    not_measured: dict[str, str] = {}
    shapes = sweep_shapes(plan)
    deadline = time.perf_counter() + plan.gemm_budget_s
    dtypes = [d for d in plan.dtypes]
    for di, dtype in enumerate(dtypes):
        reason = unsupported_reason(dtype, plan.device)
        if reason is None:
            try:
                with matmul_precision(dtype):
                    anchors = [_probe(dtype, plan, timer)]
            except (RuntimeError, NotImplementedError, TypeError) as exc:
                reason = (f"torch refused a 64x64x64 {dtype} product on {plan.device}: "
                          f"{str(exc).splitlines()[0][:160]}")
        if reason is not None:
            not_measured[dtype] = reason
            say(f"gemm {dtype}: not measured — {reason}")
            continue
        first_point = len(points)
        # Each remaining dtype gets an equal share of what is left of the section's budget.
        dtype_deadline = time.perf_counter() + (deadline - time.perf_counter()) / (len(dtypes) - di)
        with matmul_precision(dtype):
            for i, shape in enumerate(shapes):
                nbytes = compulsory_bytes(shape, dtype)
                base: dict[str, Any] = {"kind": "gemm", "dtype": dtype, "label": shape.label, "m": shape.m,
                        "n": shape.n, "k": shape.k, "flop": shape.flop, "bytes": nbytes,
                        "path": "torch._scaled_mm" if dtype == "fp8" else "torch.matmul"}
                skip = shape_reason(dtype, shape)
                predicted_s = predict_time_s(shape.flop, anchors)
                calls = plan.warmup + 1 + plan.reps
                if skip is None and predicted_s > plan.point_budget_s:
                    skip = (f"predicted {predicted_s:.2g} s per call > the {plan.point_budget_s:g} s point "
                            "budget")
                if skip is None and time.perf_counter() + predicted_s * calls > dtype_deadline:
                    skip = "the sweep's time budget is spent"
                if skip is not None:
                    points.append({**base, "status": "skipped", "reason": skip})
                    continue
                try:
                    t, n_sets = _time_point(dtype, shape, plan, timer, seed=1000 + i)
                except (RuntimeError, MemoryError) as exc:
                    if not _is_oom(exc):
                        raise
                    points.append({**base, "status": "skipped", "reason": "out of memory"})
                    continue
                finally:
                    if plan.device == "cuda":
                        torch.cuda.empty_cache()  # the operand sets are gone; hand their memory back
                time_s = t.of(plan.statistic)
                flop_per_s = shape.flop / time_s
                anchors.append((shape.flop, t.median_s))
                points.append({**base, "status": "measured", "time_s": time_s, "statistic": plan.statistic,
                               "time_median_s": t.median_s, "time_min_s": t.min_s,
                               "time_max_s": t.max_s, "reps": t.reps, "inner": t.inner, "clock": t.clock,
                               "rotating_sets": n_sets, "flop_per_s": flop_per_s,
                               "intensity_flop_per_byte": shape.flop / nbytes})
                say(f"gemm {dtype} {shape.label} M={shape.m} N={shape.n} K={shape.k}: "
                    f"{flop_per_s / 1e9:,.1f} GFLOP/s")
        if not any(p["status"] == "measured" for p in points[first_point:]):
            not_measured[dtype] = "no shape fitted the sweep's time budget (see the skipped points)"
    return points, not_measured
