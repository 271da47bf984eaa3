"""Measured rooflines cached on disk, where `nsroof measure` writes them and `nsroof profile` reads them.

- `cpu_profile()`: this CPU's, measured once (quick sweep) on first use. The cache key is the CPU model,
  the torch thread count and the torch/nsroof versions, so a different machine, thread setting or
  library never reuses a stale profile.
- `gpu_cache_path(device)` / `cached_gpu_profile(device)`: one file per GPU name, written only by an
  explicit `nsroof measure --device cuda` (a GPU sweep takes minutes; it is never started implicitly).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
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


def cache_key() -> str:
    import torch

    from nsroof._version import __version__
    from nsroof.collectors.measure.environment import cpu_model

    text = "|".join([cpu_model(), str(torch.get_num_threads()), torch.__version__, __version__])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cpu_profile(cache_dir: str | os.PathLike[str] | None = None, *, progress: Any = None) -> Any:
    """The CPU's measured Machine (source "measured"): read from the cache, or measured now with the
    quick sweep and saved there atomically. An unreadable cache file is measured again, not trusted."""
    from nsroof.collectors.measure.runner import measure, to_machine
    from nsroof.errors import NsroofError
    from nsroof.roofs.machines import Machine, load_file

    folder = resolve_cache_dir(cache_dir)
    path = folder / f"cpu-{cache_key()}.json"
    if path.is_file():
        try:
            machine = load_file(path)
            if machine.source == "measured" and machine.peak_flop_per_s and machine.bandwidth_bytes_per_s:
                return machine
        except (NsroofError, json.JSONDecodeError, OSError):
            pass
    measured = to_machine(measure("cpu", quick=True, progress=progress))
    measured.save(path)
    return Machine.from_dict(measured.to_dict(), path=os.fspath(path))



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
