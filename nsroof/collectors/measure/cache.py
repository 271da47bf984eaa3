"""Measured rooflines cached on disk, where `nsroof measure` writes them and `nsroof profile` reads them.

- `cpu_profile()`: this CPU's, measured once (quick sweep) on first use. The file is keyed by the CPU
  model, the torch thread count and the torch/nsroof versions (`cpu_cache_path`), and a file is used only
  when what it holds says the same (`why_unusable`: a copied, renamed or older file of another
  configuration is measured again, not trusted), covers the default CPU dtypes and all three sweeps, and
  passes its physics check (physics.check_cpu_profile). A measurement that fails the check is re-measured
  once with a longer run, then refused with one line naming the check and its numbers.
- Two nsroof processes: files are written atomically (Machine.save: a temporary file renamed over the
  target, so a reader sees the old file or the new one, never half of one), and measuring is serialized
  per file by an advisory lock beside it (`locked`): the second process waits for the first's profile and
  uses it instead of measuring and overwriting it. A usable cached CPU profile is replaced only on request
  (`--remeasure`), so the same command gives the same roofs run after run.
- `gpu_cache_path(device)` / `cached_gpu_profile(device)`: one file per GPU name, written only by an
  explicit `nsroof measure --device cuda` (a GPU sweep takes minutes; it is never started implicitly).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def resolve_cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("NSROOF_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "nsroof"


def key_fields() -> dict[str, Any]:
    """What a cached CPU profile belongs to, as its environment records it: CPU model, torch threads,
    torch and nsroof versions."""
    import torch

    from nsroof._version import __version__
    from nsroof.collectors.measure.environment import cpu_model

    return {"device_name": cpu_model(), "threads_used": int(torch.get_num_threads()),
            "torch": str(torch.__version__), "nsroof": __version__}


def cache_key() -> str:
    fields = key_fields()
    text = "|".join(str(fields[k]) for k in ("device_name", "threads_used", "torch", "nsroof"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cpu_cache_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cached CPU profile of this CPU at the current torch thread count and versions."""
    return resolve_cache_dir(cache_dir) / f"cpu-{cache_key()}.json"


def why_unusable(machine: Any) -> str:
    """Why a cached CPU profile must not be used ('' when it may): not a complete measured CPU profile of
    this configuration, or one that fails its physics check."""
    from nsroof.collectors.measure.physics import check_cpu_profile

    env = machine.environment or {}
    if machine.source != "measured" or env.get("device") != "cpu":
        return "not a measured CPU profile"
    mismatched = [f"{k} {env.get(k)!r}, not {v!r}" for k, v in key_fields().items() if env.get(k) != v]
    if mismatched:
        return "measured for another configuration (" + "; ".join(mismatched) + ")"
    partial = partial_reason(env.get("plan") or {}, machine.peak_flop_per_s, machine.bandwidth_bytes_per_s)
    if partial:
        return partial
    verdict = check_cpu_profile(machine.peak_flop_per_s, machine.bandwidth_bytes_per_s, env)
    return f"fails its physics check: {verdict.line()}" if not verdict.passed else ""


def partial_reason(plan: dict[str, Any], peaks: dict[str, float], bandwidths: dict[str, float]) -> str:
    """Why a CPU measurement is not the complete profile `nsroof profile` needs ('' when it is): all three
    sweeps, the default CPU dtypes asked for, an fp32 peak and a DRAM bandwidth."""
    from nsroof.collectors.measure.runner import DEFAULT_CPU_DTYPES

    sections = set(plan.get("sections") or ())
    if not {"gemm", "stream", "ladder"} <= sections:
        return "only part of the roofline was measured (--only)"
    missing = [d for d in DEFAULT_CPU_DTYPES if d not in set(plan.get("dtypes") or ())]
    if missing:
        covers = ", ".join(DEFAULT_CPU_DTYPES)
        return f"{', '.join(missing)} not swept (--dtype): the CPU profile covers {covers}"
    if "fp32" not in peaks or "dram" not in bandwidths:
        return "no fp32 peak or no DRAM bandwidth"
    return ""


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the advisory lock of one cache file (`PATH.lock`, fcntl.flock): processes measuring the same
    profile take turns. Where there is no flock, or the lock file cannot be made, nothing is locked (the
    atomic write still keeps every file whole)."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - held across the yield
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_cpu_profile(path: Path) -> tuple[Any | None, str]:
    """(the usable cached profile at `path`, '') or (None, why not; '' when there is no file)."""
    from nsroof.errors import NsroofError
    from nsroof.roofs.machines import load_file

    if not path.is_file():
        return None, ""
    try:
        machine = load_file(path)
    except (NsroofError, json.JSONDecodeError, OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({str(exc).splitlines()[0][:120]})"
    why = why_unusable(machine)
    return (None, why) if why else (with_cache_sizes(machine), "")


def with_cache_sizes(machine: Any) -> Any:
    """The profile with its L2/L3 sizes (Machine.cache_bytes, which the above-roof causes read): from its
    recorded environment, else from the OS now (a profile cached before it recorded them; same CPU)."""
    import dataclasses

    from nsroof.collectors.measure.environment import cpu_caches
    from nsroof.collectors.measure.runner import cache_sizes

    if machine.cache_bytes:
        return machine
    sizes = cache_sizes(machine.environment) or cache_sizes(
        {"caches": {c.name: {"bytes": c.bytes, "source": c.source} for c in cpu_caches()}})
    return dataclasses.replace(machine, cache_bytes=sizes) if sizes else machine


def refusal(result: Any, first: str, outcome: str = "it is not used") -> str:
    """The one line refusing a CPU measurement that failed its physics check twice: each try's failed
    checks with their numbers, what happens to it (`outcome`) and what to do."""
    from nsroof.collectors.measure.runner import failed_checks

    again = failed_checks(result)
    tries = f"twice (first: {first}; then, run longer: {again})" if first != again else \
        f"twice, the same way: {again}"
    threads = "" if (getattr(result, "environment", None) or {}).get("threads_used") == 1 else \
        " or with --threads 1"
    return (f"this CPU's measured roofline failed its physics check {tries}, so {outcome} — rerun on an "
            f"idle machine{threads}, or pass --machine FILE")


def cpu_profile(cache_dir: str | os.PathLike[str] | None = None, *, progress: Any = None,
                remeasure: bool = False) -> Any:
    """The CPU's measured Machine (source "measured"): the usable cached profile, or — when there is none,
    or `remeasure` — measured now with the quick sweep (re-measured once, longer, when it fails its physics
    check) and saved there atomically. A measurement that fails twice raises NsroofError (never used)."""
    from nsroof.collectors.measure import runner
    from nsroof.errors import NsroofError
    from nsroof.roofs.machines import Machine

    say = progress or (lambda _msg: None)
    path = cpu_cache_path(cache_dir)
    with locked(path):  # a second process waits here, then reads what the first one cached
        if not remeasure:
            cached, why = read_cpu_profile(path)
            if cached is not None:
                return cached
            if why:
                say(f"cached CPU profile {path.name} not used: {why}; measuring again")
        result, first = runner.measure_checked("cpu", quick=True, progress=progress)
        if runner.failed_checks(result):
            raise NsroofError(refusal(result, first))
        measured = runner.to_machine(result)
        measured.save(path)
    return with_cache_sizes(Machine.from_dict(measured.to_dict(), path=os.fspath(path)))


def store(machine: Any, path: Path, *, replace: bool) -> str:
    """Cache `machine` at `path` unless a usable CPU profile is there and `replace` is off; what was done,
    as the line `nsroof measure` prints."""
    with locked(path):
        if not replace and machine.environment.get("device") == "cpu":
            kept, _why = read_cpu_profile(path)
            if kept is not None:
                when = kept.environment.get("measured_at", "earlier")
                return (f"not cached: {path} already holds this CPU's profile (measured {when}), which "
                        "`nsroof profile` keeps using; --remeasure replaces it with this one")
        machine.save(path)
    return f"cached as {path}"


def gpu_cache_path(device_name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The cached profile of the GPU called `device_name` (as torch names it)."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", device_name).strip("-").lower() or "gpu"
    return resolve_cache_dir(cache_dir) / f"cuda-{name}.json"


def cached_gpu_profile(device_name: str, cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """The measured Machine `nsroof measure --device cuda` cached for this GPU, or None (none cached, or a
    file that is not a complete measured profile: it is not trusted)."""
    from nsroof.errors import NsroofError
    from nsroof.roofs.machines import load_file

    path = gpu_cache_path(device_name, cache_dir)
    if not path.is_file():
        return None
    try:
        machine = load_file(path)
    except (NsroofError, json.JSONDecodeError, OSError):
        return None
    complete = machine.source == "measured" and machine.peak_flop_per_s and machine.bandwidth_bytes_per_s
    return machine if complete else None
